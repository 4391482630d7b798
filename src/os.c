/* os.c — the only file that talks to the kernel about memory: the OS page,
 * mappings at any or at a fixed address, purging, remapping, and the
 * metadata arena that
 * holds hakmem's own structures (heaps, region directories, SuperSlab
 * headers), which are never returned. It counts every byte hakmem has
 * mapped and not unmapped (the bytes_mapped gauge: blocks and tables
 * alike) and holds the memory limit (HAKMEM_LIMIT_MB, hak_set_limit) to
 * it: a mapping of blocks that would pass the limit is refused (ENOMEM),
 * and the slow paths of api.c trim and try again. */
#include "hakmem_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#ifndef MAP_FIXED_NOREPLACE
#define MAP_FIXED_NOREPLACE 0x100000
#endif

/* ---- the OS page ------------------------------------------------------------ */
/* hakmem's page (hakmem_internal.h) is the kernel's unless HAKMEM_PAGE_SIZE
 * asks for a bigger power of two, up to HAK_PAGE_MAX: then hakmem maps,
 * purges, guards and rounds in those pages (mappings at any address are
 * aligned to them: map_aligned), as it would on a kernel with that page.
 * A kernel page above HAK_PAGE_MAX is one hakmem cannot run on. */
size_t _hak_os_page;
static size_t kernel_page;                     /* what mmap aligns to */

void _hak_os_page_init(void) {
  long got = sysconf(_SC_PAGESIZE);
  size_t kernel = got > 0 ? (size_t)got : HAK_PAGE_MIN;
  if (kernel < HAK_PAGE_MIN || kernel > HAK_PAGE_MAX || (kernel & (kernel - 1))) {
    _hak_guard_write("hakmem: the kernel's page of %zu bytes is not one hakmem supports (%u to %u)\n",
                     kernel, HAK_PAGE_MIN, HAK_PAGE_MAX);
    abort();
  }
  size_t page = kernel;
  long want = _hak_options_get(HAK_OPT_PAGE_SIZE);   /* -1: the kernel's */
  if (want >= 0 && ((want & (want - 1)) || (size_t)want < kernel))
    _hak_guard_write("hakmem: HAKMEM_PAGE_SIZE=%ld is not a power of two from the kernel's page "
                     "(%zu) to %u; using %zu\n", want, kernel, HAK_PAGE_MAX, kernel);
  else if (want >= 0)
    page = (size_t)want;
  kernel_page = kernel;
  _hak_os_page = page;
}

/* Debug builds: [p, p + bytes) is whole OS pages (every purge, fixed
 * mapping, guard and block mapping; tables mapped anywhere need not be). */
static void check_pages(const void *p, size_t bytes) {
  HAK_ASSERT(_hak_os_page && ((uintptr_t)p | bytes) % _hak_os_page == 0);
  (void)p; (void)bytes;
}

/* ---- mapped bytes and the limit ------------------------------------------ */
/* The limit counts mapped bytes, not resident ones: it bounds hakmem's
 * resident memory from above (purged pages of a mapped SuperSlab count
 * until it is unmapped), it is exact (a mapping either exists or not), and
 * what a trim gives back under it is what it unmaps. Tables and metadata
 * count but are never refused (they are small, and a thread without its
 * heap could not even free); blocks are refused past the bar:
 *   limit 0: none, the bar is never looked at;
 *   hard: the bar is the limit;
 *   soft: the bar is the limit, raised after a trim that could not bring
 *   the mapped bytes under it to what is mapped then plus a sixteenth of
 *   the limit (_hak_os_limit_relieve), so a program that lives above a
 *   soft limit trims once per sixteenth it grows, not once per mapping;
 *   the thread that relieves maps its block whatever the bar. */
#define HAK_LIMIT_STEP_DIV 16
static _Atomic size_t limit_bytes, limit_bar;
static _Atomic bool limit_hard;
static __thread bool limit_waived __attribute__((tls_model("initial-exec")));

static void mapped_add(int64_t delta) {
  _hak_stats_gauge_add(&_hak_stats_gauges.bytes_mapped, &_hak_stats_gauges.bytes_mapped_peak, delta);
}

/* Takes bytes of the limit for a mapping of blocks (given back by
 * mapped_undo if the mapping fails); false: past the bar, errno ENOMEM. */
static bool mapped_take(size_t bytes) {
  int64_t before = atomic_fetch_add_explicit(&_hak_stats_gauges.bytes_mapped, (int64_t)bytes,
                                             memory_order_relaxed);
  size_t bar = atomic_load_explicit(&limit_bar, memory_order_relaxed);
  if (HAK_UNLIKELY(bar) && !limit_waived && (size_t)before + bytes > bar) {
    atomic_fetch_sub_explicit(&_hak_stats_gauges.bytes_mapped, (int64_t)bytes, memory_order_relaxed);
    errno = ENOMEM;
    return false;
  }
  mapped_add(0);                                  /* the peak */
  return true;
}

static void mapped_undo(size_t bytes) {
  atomic_fetch_sub_explicit(&_hak_stats_gauges.bytes_mapped, (int64_t)bytes, memory_order_relaxed);
}

void _hak_os_limit_set(size_t bytes, bool hard) {
  atomic_store(&limit_hard, hard);
  atomic_store(&limit_bytes, bytes);
  atomic_store(&limit_bar, bytes);
}

size_t _hak_os_limit_get(bool *hard) {
  if (hard) *hard = atomic_load(&limit_hard);
  return atomic_load(&limit_bytes);
}

/* After a trim: the bar goes back to the limit when the mapped bytes are
 * under it. Returns true when the caller may map past the bar once (a soft
 * limit: the bar is raised, and the calling thread is let through until
 * _hak_os_limit_waive(false)). */
bool _hak_os_limit_relieve(void) {
  size_t limit = atomic_load(&limit_bytes);
  if (!limit) return false;
  size_t mapped = (size_t)atomic_load(&_hak_stats_gauges.bytes_mapped);
  if (atomic_load(&limit_hard)) { atomic_store(&limit_bar, limit); return false; }
  size_t raised = mapped + limit / HAK_LIMIT_STEP_DIV;
  atomic_store(&limit_bar, raised > limit ? raised : limit);
  return true;
}

void _hak_os_limit_waive(bool on) { limit_waived = on; }

/* ---- the cgroup's limit ------------------------------------------------------ */
/* Reads path into buf (NUL-terminated, at most len - 1 bytes); -1: none. */
static ssize_t read_small(const char *path, char *buf, size_t len) {
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -1;
  ssize_t got = 0, n;
  while ((size_t)got < len - 1 && (n = read(fd, buf + got, len - 1 - (size_t)got)) > 0) got += n;
  close(fd);
  buf[got] = 0;
  return got;
}

/* The number after key (a "Name:" of /proc/self/status, in kB); 0: none. */
static size_t status_kb(const char *text, const char *key) {
  const char *p = strstr(text, key);
  if (!p) return 0;
  p += strlen(key);
  while (*p == ' ' || *p == '\t') p++;
  size_t v = 0;
  while (*p >= '0' && *p <= '9' && v < SIZE_MAX / 10 / 1024) v = v * 10 + (size_t)(*p++ - '0');
  return v;
}

size_t _hak_os_peak_room(void) {
  char text[4096];
  if (read_small("/proc/self/status", text, sizeof text) <= 0) return 0;
  size_t hwm = status_kb(text, "VmHWM:"), rss = status_kb(text, "VmRSS:");
  return hwm > rss ? (hwm - rss) << 10 : 0;
}

/* memory.max of the cgroup directory dir: bytes, or 0 for "max" or none. */
static size_t memory_max(const char *dir) {
  char path[4096 + 32], text[64];
  size_t len = strlen(dir);
  if (len + sizeof "/memory.max" > sizeof path) return 0;
  memcpy(path, dir, len);
  memcpy(path + len, "/memory.max", sizeof "/memory.max");
  if (read_small(path, text, sizeof text) <= 0 || text[0] < '0' || text[0] > '9') return 0;
  size_t v = 0;
  for (const char *c = text; *c >= '0' && *c <= '9'; c++) v = v > SIZE_MAX / 10 ? SIZE_MAX : v * 10 + (size_t)(*c - '0');
  return v;
}

/* The v2 line of /proc/self/cgroup is "0::/path". Every directory from the
 * process's cgroup up to the root may set memory.max: the smallest holds. */
size_t _hak_os_cgroup_limit(const char *cgroup_file, const char *root) {
  char text[4096], dir[4096];
  if (read_small(cgroup_file, text, sizeof text) <= 0) return 0;
  const char *line = text;
  while (line && strncmp(line, "0::/", 4)) line = strchr(line, '\n') ? strchr(line, '\n') + 1 : NULL;
  if (!line) return 0;
  const char *path = line + 3, *end = strchr(path, '\n');
  size_t rlen = strlen(root), plen = end ? (size_t)(end - path) : strlen(path);
  if (rlen + plen >= sizeof dir) return 0;
  memcpy(dir, root, rlen);
  memcpy(dir + rlen, path, plen);
  size_t len = rlen + plen, least = 0;
  while (len > 0 && dir[len - 1] == '/') len--;     /* "0::/": the root itself */
  for (;;) {
    dir[len] = 0;
    size_t v = memory_max(dir);
    if (v && (!least || v < least)) least = v;
    if (len <= rlen) return least;
    while (len > rlen && dir[len - 1] != '/') len--;
    while (len > rlen && dir[len - 1] == '/') len--;
  }
}

/* HAKMEM_LIMIT_MB: a number of MiB, or "cgroup" (the option's value -1). */
void _hak_os_limit_init(void) {
  long mb = _hak_options_get(HAK_OPT_LIMIT_MB);
  size_t bytes = mb < 0 ? _hak_os_cgroup_limit("/proc/self/cgroup", "/sys/fs/cgroup") : (size_t)mb << 20;
  if (bytes) _hak_os_limit_set(bytes, _hak_options_get(HAK_OPT_LIMIT) == 1);
}

/* ---- mappings -------------------------------------------------------------- */
static void *map_any(size_t bytes) {
  void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  return p == MAP_FAILED ? NULL : p;
}

/* A mapping exactly at addr, never over an existing one. Kernels older than
 * 4.17 treat the flag as a hint: a mapping elsewhere is undone. */
static void *map_at(uintptr_t addr, size_t bytes) {
  void *p = mmap((void *)addr, bytes, PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
  if (p == MAP_FAILED) return NULL;
  if ((uintptr_t)p != addr) { munmap(p, bytes); errno = EEXIST; return NULL; }
  return p;
}

void *_hak_os_map_at(uintptr_t addr, size_t bytes) {
  check_pages((void *)addr, bytes);
  if (!mapped_take(bytes)) return NULL;
  void *p = map_at(addr, bytes);
  if (!p) mapped_undo(bytes);
  return p;
}

/* Tables (the span page table, the Large table): counted, never refused. */
void *_hak_os_map_table(size_t bytes) {
  void *p = map_any(bytes);
  if (p) mapped_add((int64_t)bytes);
  return p;
}

void *_hak_os_map_table_at(uintptr_t addr, size_t bytes) {
  void *p = map_at(addr, bytes);
  if (p) mapped_add((int64_t)bytes);
  return p;
}

/* bytes mapped at an address aligned to align (a power of two), the rest
 * of a bigger mapping given back; NULL when the kernel refuses. */
static void *map_any_aligned(size_t bytes, size_t align) {
  if (align <= kernel_page) return map_any(bytes);
  size_t span = bytes + align;
  if (span < bytes) return NULL;
  char *raw = map_any(span);
  if (!raw) return NULL;
  uintptr_t start = ((uintptr_t)raw + align - 1) & ~(uintptr_t)(align - 1);
  size_t head = start - (uintptr_t)raw, tail = span - head - bytes;
  if (head) munmap(raw, head);
  if (tail) munmap((char *)start + bytes, tail);
  return (void *)start;
}

/* bytes (whole OS pages) at an address aligned to align (a power of two,
 * at least the OS page). */
void *_hak_os_map_aligned(size_t bytes, size_t align) {
  HAK_ASSERT(align % _hak_os_page == 0 && bytes % _hak_os_page == 0);
  if (!mapped_take(bytes)) return NULL;
  void *p = map_any_aligned(bytes, align);
  if (!p) mapped_undo(bytes);
  return p;
}

void _hak_os_unmap(void *p, size_t bytes) {
  if (!p || !bytes) return;
  munmap(p, bytes);
  mapped_add(-(int64_t)bytes);
}

void _hak_os_purge(void *p, size_t bytes) {
  check_pages(p, bytes);
  if (!bytes) return;
  madvise(p, bytes, MADV_DONTNEED);     /* not MADV_FREE: see docs/experiments.md */
  atomic_fetch_add_explicit(&_hak_stats_gauges.bytes_purged, (int64_t)bytes, memory_order_relaxed);
  atomic_fetch_add_explicit(&_hak_stats_gauges.purge_calls, 1, memory_order_relaxed);
}

/* Faults in the pages of [p, p + bytes) now, in one call (Linux 5.14's
 * MADV_POPULATE_WRITE); false where the kernel has no such call or cannot. */
#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif
bool _hak_os_populate(void *p, size_t bytes) {
  check_pages(p, bytes);
  return bytes && madvise(p, bytes, MADV_POPULATE_WRITE) == 0;
}

/* Private pages back to the OS; they read 0 again (tables, not blocks: no
 * gauges). */
void _hak_os_zero(void *p, size_t bytes) {
  check_pages(p, bytes);
  if (bytes) madvise(p, bytes, MADV_DONTNEED);
}

/* p's old_bytes become new_bytes (whole OS pages), moved if need be; a
 * growth takes its new bytes of the limit. When hakmem's page is bigger
 * than the kernel's, the kernel would move it to an address aligned to its
 * own page only: it goes to a place of hakmem's alignment mapped first. */
void *_hak_os_remap(void *p, size_t old_bytes, size_t new_bytes) {
  check_pages(p, old_bytes | new_bytes);
  size_t grown = new_bytes > old_bytes ? new_bytes - old_bytes : 0;
  if (!mapped_take(grown)) return NULL;
  void *q;
  if (_hak_os_page > kernel_page && grown) {
    void *to = map_any_aligned(new_bytes, _hak_os_page);
    q = to ? mremap(p, old_bytes, new_bytes, MREMAP_MAYMOVE | MREMAP_FIXED, to) : MAP_FAILED;
    if (to && q == MAP_FAILED) munmap(to, new_bytes);
  } else {
    q = mremap(p, old_bytes, new_bytes, MREMAP_MAYMOVE);
  }
  if (q == MAP_FAILED) { mapped_undo(grown); return NULL; }
  if (new_bytes < old_bytes) mapped_add(-(int64_t)(old_bytes - new_bytes));
  return q;
}

/* Moves the pages of [from, from + bytes) to to, over what was mapped there
 * (page tables move; nothing is copied or faulted in): from's bytes are
 * unmapped. */
bool _hak_os_move(void *from, size_t bytes, void *to) {
  check_pages(from, bytes);
  check_pages(to, bytes);
  if (mremap(from, bytes, bytes, MREMAP_MAYMOVE | MREMAP_FIXED, to) == MAP_FAILED) return false;
  mapped_add(-(int64_t)bytes);
  return true;
}

#ifdef MREMAP_DONTUNMAP
/* Does a move keep its source mapped? Linux since 5.7 does; an emulator may
 * move the pages and then count the source unmapped (qemu-user 7.2 does:
 * mincore on it fails, and it may map something else there), or refuse
 * the flag. Tried once on a scratch mapping: 1 yes, -1 no, 0 not yet. */
static _Atomic int moves_keep_source;

static bool move_keeps_source(void) {
  int known = atomic_load_explicit(&moves_keep_source, memory_order_acquire);
  if (known) return known > 0;
  bool ok = false;
  char *a = map_any(2 * kernel_page);
  if (a) {
    unsigned char resident;
    a[0] = 1;
    ok = mremap(a, kernel_page, kernel_page, MREMAP_MAYMOVE | MREMAP_FIXED | MREMAP_DONTUNMAP,
                a + kernel_page) != MAP_FAILED &&
         mincore(a, kernel_page, &resident) == 0 && *(volatile char *)(a + kernel_page) == 1;
    munmap(a, 2 * kernel_page);
  }
  atomic_store_explicit(&moves_keep_source, ok ? 1 : -1, memory_order_release);
  return ok;
}
#endif

/* Moves the resident pages of [from, from + bytes) over [to, to + bytes),
 * both mapped and private: page tables move, nothing is copied, faulted in
 * or zeroed; from stays mapped and reads 0 (MREMAP_DONTUNMAP, Linux 5.7).
 * The kernel unmaps to before it checks the move, so a refused move
 * (an older kernel, the map count limit, RLIMIT_AS) maps fresh pages there
 * again. Returns 1 when moved, 0 when refused (or moves do not keep their
 * source here) with to mapped as before, -1 when to could not be mapped
 * again (left a hole). */
int _hak_os_move_pages(void *from, size_t bytes, void *to) {
  check_pages(from, bytes);
  check_pages(to, bytes);
#ifdef MREMAP_DONTUNMAP
  if (!move_keeps_source()) return 0;
  if (mremap(from, bytes, bytes, MREMAP_MAYMOVE | MREMAP_FIXED | MREMAP_DONTUNMAP, to) != MAP_FAILED)
    return 1;
  if (map_at((uintptr_t)to, bytes) || errno == EEXIST) return 0;
  return -1;
#else
  (void)from; (void)bytes; (void)to;
  return 0;
#endif
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

/* ---- metadata arena: bump allocation from 1 MiB chunks ------------------- */
/* Two kinds share each chunk: the metadata that is written when it is made,
 * from the bottom up, and the cold side arrays (struct hak_slab_cold), from
 * the top down, which stay zero until a slab needs its entry, so that
 * untouched ones leave whole pages never faulted in rather than gaps
 * between hot headers. One chunk for both keeps a small process's metadata
 * in one mapping. The first chunk lies at HAK_META_FIRST, after the first
 * chunks of blocks (region.c), when that address is free: a small process's
 * metadata and first blocks then share one page-table page, where a chunk
 * anywhere took one of its own, or two, as often as not (each a fault's
 * worth of the kernel's time at start, fork and exit: docs/experiments.md,
 * "The metadata beside the first chunks"). Not in the hardened build,
 * whose metadata stays at an address the kernel chose. */
#define HAK_META_CHUNK (1u << 20)
static struct { char *low, *high; } meta;     /* the current chunk's free gap */
static bool meta_first_tried;

/* A memory checker neither checks nor scans metadata (track.h). */
static void *meta_map(size_t bytes) {
  void *p = _hak_os_map_table(bytes);          /* counted, never refused */
  if (p) hak_track_meta(p, bytes);
  return p;
}

/* A chunk for the bump allocator: the first at HAK_META_FIRST if it can. */
static void *meta_chunk(void) {
  if (!HAK_HARDENED && !meta_first_tried) {
    meta_first_tried = true;
    void *p = _hak_os_map_table_at(HAK_META_FIRST, HAK_META_CHUNK);
    if (p) {
      hak_track_meta(p, HAK_META_CHUNK);
      return p;
    }
  }
  return meta_map(HAK_META_CHUNK);
}

static void *meta_alloc(size_t bytes, bool cold) {
  bytes = (bytes + HAK_CACHELINE - 1) & ~(size_t)(HAK_CACHELINE - 1);
  if (bytes >= HAK_META_CHUNK / 4) {            /* big: a mapping of its own */
    size_t rounded = (bytes + HAK_PAGE_MIN - 1) & ~(size_t)(HAK_PAGE_MIN - 1);   /* a table: any page */
    return meta_map(rounded);
  }
  hak_lock(&_hak_lock_set.meta);
  if ((size_t)(meta.high - meta.low) < bytes) {
    char *chunk = meta_chunk();
    if (!chunk) { hak_unlock(&_hak_lock_set.meta); return NULL; }
    meta.low = chunk;
    meta.high = chunk + HAK_META_CHUNK;
  }
  void *p = cold ? (meta.high -= bytes) : meta.low;
  if (!cold) meta.low += bytes;
  hak_unlock(&_hak_lock_set.meta);
  return p;
}

void *_hak_os_meta_alloc(size_t bytes) { return meta_alloc(bytes, false); }
void *_hak_os_meta_alloc_cold(size_t bytes) { return meta_alloc(bytes, true); }
