/* guard.c — bad input. A pointer that is not a live hakmem block gets here:
 * a block the C library's own malloc handed out (before hakmem was loaded,
 * or to a library that binds to the C library) goes back to the C library;
 * anything else — a stack address, a pointer into the middle of a block,
 * garbage, a block already freed — gets one line on stderr naming the call
 * and the pointer, then abort (or, for free with HAKMEM_INVALID_FREE=ignore,
 * a counted no-op). Nothing here allocates. */
#include "hakmem_internal.h"

#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/auxv.h>
#include <sys/mman.h>
#include <unistd.h>

/* Weak: a static program has no C library malloc to hand blocks back to. */
extern void __libc_free(void *p) __attribute__((weak));

static void vprint_fd(int fd, const char *fmt, va_list ap) {
  char buf[1024];
  int n = vsnprintf(buf, sizeof buf, fmt, ap);
  if (n < 0) return;
  if ((size_t)n >= sizeof buf) n = sizeof buf - 1;
  for (ssize_t off = 0, w; off < n; off += w)
    if ((w = write(fd, buf + off, (size_t)(n - off))) <= 0) return;
}

void _hak_guard_printf(int fd, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vprint_fd(fd, fmt, ap);
  va_end(ap);
}

void _hak_guard_write(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vprint_fd(2, fmt, ap);
  va_end(ap);
}

void _hak_guard_assert_failed(const char *what, const char *file, int line) {
  _hak_guard_write("hakmem: invariant broken: %s (%s:%d)\n", what, file, line);
  abort();
}

void _hak_guard_double_free(const void *p, const char *call, size_t size) {
  if (size) _hak_guard_write("hakmem: %s(): %p is already free (double free of a %zu-byte block)\n", call, p, size);
  else _hak_guard_write("hakmem: %s(): %p is already free (double free)\n", call, p);
  abort();
}

void _hak_guard_bad_pointer(const void *p, const char *call, const char *why) {
  _hak_guard_write("hakmem: %s(): invalid pointer %p (%s)\n", call, p, why);
  abort();
}

/* ---- the hardened build's links and guard pages -------------------------- */
/* The link secret (hakmem_internal.h, "free-list links"): the kernel's
 * AT_RANDOM bytes mixed with the clock and an address, so it differs from
 * run to run; set once at init, before any list exists. */
uintptr_t _hak_guard_link_secret;

void _hak_guard_init(void) {
  uint64_t k = (uint64_t)(uintptr_t)&_hak_guard_link_secret * 0xD6E8FEB86659FD93ull;
  const unsigned char *rnd = (const unsigned char *)getauxval(AT_RANDOM);
  if (rnd) { uint64_t r; memcpy(&r, rnd, sizeof r); k ^= r; }
  k ^= _hak_os_now_ns() * 0x94D049BB133111EBull;
  _hak_guard_link_secret = (uintptr_t)(k ^ k >> 31);
}

static const char *tier_name(unsigned c) {
  static const char *const names[] = { "Tiny", "L2", "L2.5", "Large" };
  return names[_hak_classes[c].tier];
}

void _hak_guard_bad_link(const void *b, const void *next, unsigned c) {
  _hak_guard_write("hakmem: corrupted free list: the link of free block %p (class %u, %u-byte %s blocks) "
                   "decodes to %p, not a block of its class (use after free?)\n",
                   b, c, _hak_classes[c].size, tier_name(c), next);
  abort();
}

void _hak_guard_bad_heap_link(const void *b, const void *next, size_t size) {
  if (size)
    _hak_guard_write("hakmem: corrupted free list: the link of free block %p (a first-class heap's %zu-byte blocks) "
                     "decodes to %p, not a block of its segment (use after free?)\n", b, size, next);
  else
    _hak_guard_write("hakmem: corrupted free list: the link of free block %p (a first-class heap's remote frees) "
                     "decodes to %p, not a block of any heap (use after free?)\n", b, next);
  abort();
}

void _hak_guard_written_after_free(const void *b, unsigned c) {
  _hak_guard_write("hakmem: free block %p (class %u, %u-byte %s blocks) was written after free "
                   "(its first word changed while its reuse was delayed)\n",
                   b, c, _hak_classes[c].size, tier_name(c));
  abort();
}

bool _hak_guard_pages(void *p, size_t bytes, bool on) {
  HAK_ASSERT(((uintptr_t)p | bytes) % _hak_os_page == 0);
  return mprotect(p, bytes, on ? PROT_NONE : PROT_READ | PROT_WRITE) == 0;
}

/* ---- where does an address live? ------------------------------------------ */
struct mapping { uintptr_t lo, hi; bool readable; char kind; };   /* kind: h heap, s stack, a anonymous, f file */

static uintptr_t parse_hex(const char **s) {
  uintptr_t v = 0;
  for (;; (*s)++) {
    char c = **s;
    unsigned d = c >= '0' && c <= '9' ? (unsigned)(c - '0') : c >= 'a' && c <= 'f' ? (unsigned)(c - 'a' + 10) : 16;
    if (d == 16) return v;
    v = v * 16 + d;
  }
}

static bool parse_maps_line(const char *line, uintptr_t a, struct mapping *m) {
  const char *s = line;
  m->lo = parse_hex(&s);
  if (*s++ != '-') return false;
  m->hi = parse_hex(&s);
  if (a < m->lo || a >= m->hi) return false;
  m->readable = s[1] == 'r';
  const char *path = strchr(s, '/'), *bracket = strchr(s, '[');
  m->kind = path ? 'f' : !bracket ? 'a' : !strncmp(bracket, "[heap]", 6) ? 'h'
          : !strncmp(bracket, "[stack", 6) ? 's' : 'f';
  return true;
}

/* The mapping that holds a, read from /proc/self/maps without allocating. */
static bool find_mapping(uintptr_t a, struct mapping *m) {
  int fd = open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  char buf[4096 + 1];
  size_t have = 0;
  bool found = false;
  for (;;) {
    ssize_t n = read(fd, buf + have, sizeof buf - 1 - have);
    if (n <= 0) break;
    have += (size_t)n;
    buf[have] = 0;
    char *line = buf, *nl;
    while ((nl = strchr(line, '\n')) != NULL) {
      *nl = 0;
      if (parse_maps_line(line, a, m)) { found = true; goto done; }
      line = nl + 1;
    }
    have = (size_t)(buf + have - line);
    memmove(buf, line, have);
    if (have == sizeof buf - 1) have = 0;      /* a line longer than the buffer */
  }
done:
  close(fd);
  return found;
}

static bool on_this_stack(uintptr_t a) {
  uintptr_t sp = (uintptr_t)__builtin_frame_address(0);
  return a + 65536 >= sp && a < sp + (8u << 20);
}

/* Copies the 16 bytes at a into out through a pipe: the kernel's copy
 * fails with EFAULT where a load would fault. Another thread may unmap what
 * /proc/self/maps showed a moment ago (a heap destroyed while a late free of
 * its block is judged here), so the probe below never loads it directly. */
static bool copy_if_mapped(uintptr_t a, uint64_t out[2]) {
  int fd[2];
  if (pipe2(fd, O_CLOEXEC) != 0) return false;
  bool ok = write(fd[1], (const void *)a, 16) == 16 && read(fd[0], out, 16) == 16;
  close(fd[0]);
  close(fd[1]);
  return ok;
}

/* Is a a block of the C library's malloc? Its chunk header is checked for
 * the shape glibc gives it: main heap, a chunk of its own mapping, or a
 * thread arena. Returns the usable size, or 0. */
static size_t libc_block_usable(uintptr_t a) {
  struct mapping m;
  uint64_t header[2];                               /* the chunk's prev_size (pad) and size words */
  if ((a & 15) || a < 4096 || !find_mapping(a - 16, &m) || !m.readable || a >= m.hi ||
      !copy_if_mapped(a - 16, header))
    return 0;
  uint64_t field = header[1], size = field & ~(uint64_t)7;
  uintptr_t chunk = a - 16;
  if (size < 32 || (size & 15) || chunk + size > m.hi) return 0;
  if (m.kind == 'h' && !(field & 2)) return size - 8;
  if (m.kind != 'a') return 0;
  if (field & 2) {                                /* mmapped chunk */
    uint64_t pad = header[0];
    uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);   /* the C library's page, whatever hakmem's */
    bool shaped = chunk - pad >= m.lo && ((chunk - pad) & (page - 1)) == 0 && ((pad + size) & (page - 1)) == 0;
    return shaped ? size - 16 : 0;
  }
  return (field & 4) ? size - 8 : 0;              /* thread arena chunk */
}

/* Why p is not a block start, when it lies in memory hakmem knows. */
static const char *describe(const void *p, char *buf, size_t len) {
  uintptr_t a = (uintptr_t)p;
  const struct hak_region *r = _hak_region_holding(a);
  if (r) {
    uint32_t size = _hak_classes[r->cls].size;
    uintptr_t start = r->base + (a - r->base) / size * size;
    snprintf(buf, len, "inside the %u-byte block at %#lx", size, (unsigned long)start);
    return buf;
  }
  uintptr_t start;
  size_t bytes;
  if (_hak_span_containing(a, &start, &bytes) || _hak_large_containing(a, &start, &bytes)) {
    snprintf(buf, len, "inside the %zu-byte block at %#lx", bytes, (unsigned long)start);
    return buf;
  }
  if (_hak_heap_holds(a)) return "in a first-class heap's memory, not a live block";
  if (on_this_stack(a)) return "a stack address";
  struct mapping m;
  if (a >= 4096 && find_mapping(a, &m) && m.kind == 's') return "a stack address";
  return NULL;
}

void _hak_guard_foreign_free(void *p, const char *call) {
  char buf[96];
  const char *why = describe(p, buf, sizeof buf);
  if (!why) {
    if (__libc_free && libc_block_usable((uintptr_t)p)) {
      if (_hak_thread_tls.heap) _hak_thread_tls.heap->stats.foreign_frees++;
      __libc_free(p);
      return;
    }
    why = "not allocated by hakmem";
  }
  if (_hak_options_get(HAK_OPT_INVALID_FREE)) {
    struct hak_heap *h = _hak_thread_heap();
    if (h) h->stats.invalid_frees++;
    _hak_guard_write("hakmem: %s(): invalid pointer %p (%s) ignored\n", call, p, why);
    return;
  }
  _hak_guard_bad_pointer(p, call, why);
}

size_t _hak_guard_foreign_usable(const void *p, const char *call) {
  char buf[96];
  const char *why = describe(p, buf, sizeof buf);
  size_t usable = why || !__libc_free ? 0 : libc_block_usable((uintptr_t)p);
  if (!usable) _hak_guard_bad_pointer(p, call, why ? why : "not allocated by hakmem");
  return usable;
}

/* A C library block moves into hakmem. */
void *_hak_guard_foreign_realloc(void *p, size_t n, const char *call) {
  size_t old = _hak_guard_foreign_usable(p, call);
  void *q = hak_malloc(n);
  if (!q) return NULL;
  memcpy(q, p, old < n ? old : n);
  if (_hak_thread_tls.heap) _hak_thread_tls.heap->stats.foreign_frees++;
  __libc_free(p);
  return q;
}
