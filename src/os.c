/* os.c — the only file that talks to the kernel about memory: mappings at
 * any or at a fixed address, purging, remapping, and the metadata arena that
 * holds hakmem's own structures (heaps, region directories, SuperSlab
 * headers), which are never returned. */
#include "hakmem_internal.h"

#include <errno.h>
#include <sys/mman.h>
#include <time.h>

#ifndef MAP_FIXED_NOREPLACE
#define MAP_FIXED_NOREPLACE 0x100000
#endif

void *_hak_os_map(size_t bytes) {
  void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  return p == MAP_FAILED ? NULL : p;
}

/* A mapping exactly at addr, never over an existing one. Kernels older than
 * 4.17 treat the flag as a hint: a mapping elsewhere is undone. */
void *_hak_os_map_at(uintptr_t addr, size_t bytes) {
  void *p = mmap((void *)addr, bytes, PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
  if (p == MAP_FAILED) return NULL;
  if ((uintptr_t)p != addr) { munmap(p, bytes); errno = EEXIST; return NULL; }
  return p;
}

/* bytes at an address aligned to align (a power of two >= page size). */
void *_hak_os_map_aligned(size_t bytes, size_t align) {
  if (align <= HAK_PAGE) return _hak_os_map(bytes);
  size_t span = bytes + align;
  if (span < bytes) return NULL;
  char *raw = _hak_os_map(span);
  if (!raw) return NULL;
  uintptr_t start = ((uintptr_t)raw + align - 1) & ~(uintptr_t)(align - 1);
  size_t head = start - (uintptr_t)raw, tail = span - head - bytes;
  if (head) munmap(raw, head);
  if (tail) munmap((char *)start + bytes, tail);
  return (void *)start;
}

void _hak_os_unmap(void *p, size_t bytes) {
  if (p && bytes) munmap(p, bytes);
}

void _hak_os_purge(void *p, size_t bytes) {
  if (!bytes) return;
  madvise(p, bytes, MADV_DONTNEED);     /* not MADV_FREE: see docs/experiments.md */
  atomic_fetch_add_explicit(&_hak_stats_gauges.bytes_purged, (int64_t)bytes, memory_order_relaxed);
  atomic_fetch_add_explicit(&_hak_stats_gauges.purge_calls, 1, memory_order_relaxed);
}

/* Private pages back to the OS; they read 0 again (tables, not blocks: no
 * gauges). */
void _hak_os_zero(void *p, size_t bytes) {
  if (bytes) madvise(p, bytes, MADV_DONTNEED);
}

void *_hak_os_remap(void *p, size_t old_bytes, size_t new_bytes) {
  void *q = mremap(p, old_bytes, new_bytes, MREMAP_MAYMOVE);
  return q == MAP_FAILED ? NULL : q;
}

/* Moves the pages of [from, from + bytes) to to, over what was mapped there
 * (page tables move; nothing is copied or faulted in). */
bool _hak_os_move(void *from, size_t bytes, void *to) {
  return mremap(from, bytes, bytes, MREMAP_MAYMOVE | MREMAP_FIXED, to) != MAP_FAILED;
}

uint32_t _hak_os_now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
  return (uint32_t)((uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u);
}

uint64_t _hak_os_now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* ---- metadata arena: bump allocation from 1 MiB chunks ------------------ */
#define HAK_META_CHUNK (1u << 20)
hak_lock_t _hak_os_meta_lock;
static char *meta_cur, *meta_end;

/* A memory checker neither checks nor scans metadata (track.h). */
static void *meta_map(size_t bytes) {
  void *p = _hak_os_map(bytes);
  if (p) hak_track_meta(p, bytes);
  return p;
}

void *_hak_os_meta_alloc(size_t bytes) {
  bytes = (bytes + HAK_CACHELINE - 1) & ~(size_t)(HAK_CACHELINE - 1);
  if (bytes >= HAK_META_CHUNK / 4) {            /* big: a mapping of its own */
    size_t rounded = (bytes + HAK_PAGE - 1) & ~(size_t)(HAK_PAGE - 1);
    return meta_map(rounded);
  }
  hak_lock(&_hak_os_meta_lock);
  if ((size_t)(meta_end - meta_cur) < bytes) {
    char *chunk = meta_map(HAK_META_CHUNK);
    if (!chunk) { hak_unlock(&_hak_os_meta_lock); return NULL; }
    meta_cur = chunk;
    meta_end = chunk + HAK_META_CHUNK;
  }
  void *p = meta_cur;
  meta_cur += bytes;
  hak_unlock(&_hak_os_meta_lock);
  return p;
}
