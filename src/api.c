/* api.c — the hak_ API: every malloc-family function, routed by tier, with
 * errno, alignment, overflow and zero-size behaviour as POSIX and glibc
 * document them; plus the two out-of-line slow paths of malloc and free. */
#include "hakmem_internal.h"

#include <errno.h>
#include <limits.h>

/* ---- routing ------------------------------------------------------------------ */
/* written: a malloc, whose caller writes the block (a span block of fresh
 * pages faults them in at once, span.c); a calloc's stay out until used. */
static void *route_alloc(size_t n, bool written) {
  if (n > HAK_MID_MAX) return _hak_large_alloc(n, 0, false);
  unsigned c = _hak_class_of_size(n);
  _hak_class_split_sample(n, c);
  void *p = _hak_front_alloc_slow(c);   /* pops first */
  if (HAK_UNLIKELY(!p) && n > HAK_L2_MAX) p = _hak_large_alloc(n, 0, false);   /* span slot full or taken */
  else if (p && written && c >= HAK_SPAN_FIRST) _hak_span_fault_in(p, n);
  return p;
}

/* One allocation of the slow paths: a class block (cls >= 0: every block
 * of the class honours align), else n bytes routed by size (align 0, not
 * zeroed; written as route_alloc's) or a Large block. */
struct request { size_t n, align; int cls; bool zero, written; };

static void *request_try(const struct request *r) {
  if (r->cls >= 0) return _hak_front_alloc_slow((unsigned)r->cls);
  if (!r->align && !r->zero) return route_alloc(r->n, r->written);
  return _hak_large_alloc(r->n, r->align, r->zero);
}

/* Out of memory, or past the memory limit (os.c refuses the mapping):
 * everything cached and held in reserve goes back (this thread's lists and
 * slabs, cached Large ranges, free slabs, empty SuperSlabs at the top of
 * their regions, the span heap's free runs, their address space included)
 * before one more try. Still none under a soft limit: the block is mapped
 * past it. Still none: a class that cannot map its next SuperSlab (2 MiB)
 * or span pages can still be served by a mapping of its own (whole pages:
 * Large), as route_alloc does for the sizes above L2. */
static HAK_SLOW void *request_retry(const struct request *r) {
  bool trimmed = hak_malloc_trim(0);
  void *p = trimmed ? request_try(r) : NULL;
  bool own = r->cls >= 0 || r->n <= HAK_L2_MAX;
  if (!p && _hak_os_limit_relieve()) {
    _hak_os_limit_waive(true);
    p = request_try(r);
    _hak_os_limit_waive(false);
  }
  if (!p && own) p = _hak_large_alloc(r->n, r->align, r->zero);
  if (!p) errno = ENOMEM;                       /* whatever the trim's system calls left */
  return p;
}

static void *request_alloc(const struct request *r) {
  if (HAK_UNLIKELY(_hak_prof_mode)) {             /* charged; sampled when it crosses */
    void *s = _hak_prof_alloc(r->n, r->align, r->zero);
    if (s) return s;
  }
  void *p = request_try(r);
  return HAK_LIKELY(p) ? p : request_retry(r);
}

static void *malloc_slow(size_t n, bool written) {
  struct hak_heap *h = _hak_thread_tls.heap;
  if (h) h->stats.malloc_slow++;
  _hak_purge_tick();
  if (n > PTRDIFF_MAX) { errno = ENOMEM; return NULL; }
  return request_alloc(&(struct request){ n, 0, -1, false, written });
}

/* HAK_SLOW: every malloc the inline path could not serve. */
void *_hak_api_malloc_slow(size_t n) { return malloc_slow(n, true); }

#if !HAK_TRACK
/* A calloc's list pop missed (HAK_SLOW as the malloc's). Tracked builds
 * have no list pop: their calloc is malloc and memset. */
static HAK_SLOW void *calloc_slow(size_t n) { return malloc_slow(n, false); }
#endif

/* A live block of ours: its class (>= 0), or -1 when p is not a class block
 * start. A class block that is free is a double free of call. */
static int live_class(void *p, const char *call) {
  int c = hak_block_class(p);
  if (c < 0) c = _hak_span_class(p);
  if (c == -2) _hak_guard_double_free(p, call, 0);
  if (c >= 0 && HAK_UNLIKELY(((void **)p)[1] == HAK_FREE_KEY))
    _hak_guard_double_free(p, call, _hak_classes[c].size);
  return c;
}

/* Debug builds: a span block marked zero reads 0 past word 2. */
static void span_zero_check(const void *p) {
  if (!HAK_DEBUG) return;
  int c = _hak_span_class(p);
  HAK_ASSERT(c >= 0);
  const uint64_t *w = p, *end = (const uint64_t *)((uintptr_t)p + _hak_classes[c].size);
  for (w += 3; w < end; w++) HAK_ASSERT(*w == 0);
}

/* The first step of the slow free: a used span block (span.c) goes on this
 * thread's list while the list has credit, with the checks of the inline
 * free (block start, not already free). 1: pushed; -1: a valid, not-free
 * block whose list had no credit (its credit is -1 now, and *f its front
 * slot); 0: anything else. */
static inline int span_push(void *p, unsigned *f) {
  uintptr_t a = (uintptr_t)p;
  if (a >> HAK_REGION_SHIFT != HAK_SPAN_SLOT) return 0;
  void **b = p;
  void *key = HAK_FREE_KEY;
  uint32_t o = (uint32_t)a;
  *f = hak_span_front_at(o);
  if (*f == 0 || (o & (HAK_SPAN_PAGE - 1)) != hak_span_start_offset(o) || b[1] == key) return 0;
  b[2] = NULL;                                  /* no longer known to be zero */
  return hak_list_push(*f + HAK_HOME_FIRST, b, key) ? 1 : -1;
}

/* A pointer that is not a span block with room on its list: a live block
 * of a class goes to the front's slow free (a block of a region other than
 * its class's home, or a span block whose list is full), then a Large
 * block, then the guard (a C library block, or a bad pointer). Out of line:
 * the span push before it saves no registers. */
static __attribute__((noinline)) void free_by_kind(void *p, const char *call) {
  if (!p) return;
  struct hak_heap *h = _hak_thread_tls.heap;
  if (h) h->stats.free_slow++;
  if (_hak_heap_free(p, call)) return;         /* a block of a first-class heap (heap.c) */
  int c = live_class(p, call);
  if (c >= 0) { _hak_front_free_unpushed(p, (unsigned)c); return; }   /* spills first if full (a purge tick) */
  _hak_purge_tick();
  if (HAK_UNLIKELY(_hak_prof_mode)) _hak_prof_free(p);   /* a sampled block leaves the profile */
  if (_hak_large_free(p, call)) return;
  _hak_guard_foreign_free(p, call);
}

/* A block of a first chunk (region.c), every one of which the inline free
 * sends here: onto this thread's list with the inline free's checks, or to
 * its stash for good once its chunk is retired; anything else that lies in
 * the first-chunk area goes to free_by_kind. */
static __attribute__((noinline)) void chunk_free(void *p, const char *call) {
  void **b = p;
  int c = _hak_region_chunk_class((uintptr_t)p);
  if (c < 0 || b[1] == HAK_FREE_KEY) { free_by_kind(p, call); return; }
  if (_hak_region_chunk_retire((unsigned)c, b)) return;
  if (!hak_list_push(HAK_FRONT((unsigned)c) + HAK_HOME_FIRST, b, HAK_FREE_KEY)) _hak_front_free_slow(p, (unsigned)c);
}

/* HAK_SLOW: every free the inline path could not take. A span block goes
 * on its list (every span block comes here: its slot lies past the home
 * slots), or to the front's slow free when the list is full; a first
 * chunk's block to chunk_free; everything else is sorted by free_by_kind. */
void _hak_api_free_slow(void *p, const char *call) {
  unsigned f;
  int pushed = span_push(p, &f);
  if (HAK_LIKELY(pushed > 0)) return;
  if (pushed < 0) _hak_front_free_slow(p, f - 1);
  else if (hak_chunk_holds((uintptr_t)p)) chunk_free(p, call);
  else free_by_kind(p, call);
}

/* ---- tracked builds (track.h) ---------------------------------------------------- */
/* The usable bytes of a block of ours, live or free (a free one is a double
 * free the tool reports); 0 when p is not a block of ours. */
static size_t owned_bytes(const void *p) {
  int c = hak_block_class(p);
  if (c < 0) c = _hak_span_class(p);
  if (c >= 0) return _hak_classes[c].size;
  if (c == -2) return 1;                         /* a free span block: poisoned already */
  return _hak_large_usable(p);
}

/* p, from hakmem's own code, is handed out to the program with n bytes (a
 * block of 0 bytes has 1: its usable size is never 0). */
static inline void *handed_out(void *p, size_t n, bool zero) {
  if (HAK_TRACK && p) {
    hak_track_enter();
    size_t usable = owned_bytes(p);
    hak_track_leave();
    hak_track_malloc(p, n ? n : 1, usable, zero);
  }
  return p;
}

#if HAK_TRACK
void *_hak_api_malloc_tracked(size_t n) {
  hak_track_enter();
  void *p = _hak_api_malloc_slow(n);
  hak_track_leave();
  return handed_out(p, n, false);
}

/* The tool hears of the free first: once hakmem has the block, another
 * thread may get it. A pointer that is not ours is hakmem's to judge. */
void _hak_api_free_tracked(void *p, const char *call) {
  if (!p) return;
  hak_track_enter();
  size_t usable = owned_bytes(p);
  hak_track_leave();
  if (usable) hak_track_free(p, usable);
  hak_track_enter();
  _hak_api_free_slow(p, call);
  hak_track_leave();
}

/* realloc always moves a block of ours: the tool knows its size, hakmem
 * does not. A first-class heap's block (not tracked: README) moves too,
 * with all its usable bytes. */
static void *realloc_tracked(void *p, size_t n) {
  hak_track_enter();
  size_t usable = owned_bytes(p), heap = usable ? 0 : _hak_heap_usable(p);
  void *q = usable || heap ? NULL : _hak_guard_foreign_realloc(p, n, "realloc");
  hak_track_leave();
  if (!usable && !heap) return q;
  if (n > PTRDIFF_MAX) { errno = ENOMEM; return NULL; }
  size_t old = usable ? hak_track_size(p, usable) : heap;
  q = hak_malloc(n);
  if (!q) return NULL;
  memcpy(q, p, old < n ? old : n);
  _hak_api_free_tracked(p, "realloc");
  return q;
}
#endif

/* ---- the API ------------------------------------------------------------------ */
HAK_API void *hak_malloc(size_t n) { return hak_malloc_inline(n); }
HAK_API void hak_free(void *p) { hak_free_inline(p); }

HAK_API void *hak_calloc(size_t count, size_t size) {
  size_t n;
  if (__builtin_mul_overflow(count, size, &n)) { errno = ENOMEM; return NULL; }
  if (n > HAK_MID_MAX && !HAK_TRACK) {             /* tracked: malloc and memset */
    if (n > PTRDIFF_MAX) { errno = ENOMEM; return NULL; }
    return request_alloc(&(struct request){ n, 0, -1, true, false });   /* Large zeroes only dirty bytes */
  }
#if HAK_TRACK
  void *p = hak_malloc_inline(n);
#else
  void *p = hak_malloc_pop(n);
  if (!p) p = calloc_slow(n);
#endif
  if (!p) return p;
  if (!HAK_TRACK && n > HAK_SPAN_PAGE && ((void **)p)[2] == HAK_ZERO_MARK &&
      (uintptr_t)p >> HAK_REGION_SHIFT == HAK_SPAN_SLOT) {   /* fresh pages (span.c) */
    span_zero_check(p);
    n = 3 * sizeof(void *);
  }
  memset(p, 0, n);
  return p;
}

static size_t usable_size(const void *p) {
  int c = live_class((void *)p, "malloc_usable_size");
  if (c >= 0) return _hak_classes[c].size;
  size_t large = _hak_large_usable(p);
  if (!large) large = _hak_heap_usable(p);
  return large ? large : _hak_guard_foreign_usable(p, "malloc_usable_size");
}

/* Tracked builds: the size the block was asked with, as the tools' own
 * malloc_usable_size says. */
HAK_API size_t hak_malloc_usable_size(const void *p) {
  if (!p) return 0;
  hak_track_enter();
  size_t usable = usable_size(p), owned = HAK_TRACK ? owned_bytes(p) : 0;
  hak_track_leave();
  return owned ? hak_track_size(p, usable) : usable;
}

/* glibc's realloc(p, 0) frees p and returns NULL. */
HAK_API void *hak_realloc(void *p, size_t n) {
  if (!p) return hak_malloc(n);
#if HAK_TRACK
  if (n == 0) { _hak_api_free_tracked(p, "realloc"); return NULL; }
  return realloc_tracked(p, n);
#endif
  if (n == 0) { _hak_api_free_slow(p, "realloc"); return NULL; }
  if (n > PTRDIFF_MAX) { errno = ENOMEM; return NULL; }
  size_t old;
  int c = live_class(p, "realloc");
  if (c >= 0) {
    old = _hak_classes[c].size;
    if (n <= old && n >= old / 2) return p;       /* fits, not too wasteful */
  } else if ((old = _hak_large_usable(p)) != 0) {
    void *q = n > HAK_MID_MAX ? _hak_large_realloc(p, n) : NULL;
    if (q && HAK_UNLIKELY(_hak_prof_mode) && q != p) _hak_prof_moved(p, q);
    if (q) return q;
  } else if ((old = _hak_heap_usable(p)) != 0) {   /* moves to the thread's heap when it must move */
    if (n <= old && n >= old / 2) return p;
  } else {
    return _hak_guard_foreign_realloc(p, n, "realloc");
  }
  void *q = hak_malloc(n);
  if (!q) return NULL;
  memcpy(q, p, old < n ? old : n);
  _hak_api_free_slow(p, "realloc");
  return q;
}

HAK_API void *hak_reallocarray(void *p, size_t count, size_t size) {
  size_t n;
  if (__builtin_mul_overflow(count, size, &n)) { errno = ENOMEM; return NULL; }
  return hak_realloc(p, n);
}

static bool power_of_two(size_t x) { return x && !(x & (x - 1)); }

/* align is a power of two. */
static void *aligned_alloc_pow2(size_t align, size_t n) {
  if (align <= HAK_MIN_ALIGN) return hak_malloc(n);
  if (n > PTRDIFF_MAX) { errno = ENOMEM; return NULL; }
  hak_track_enter();
  void *p;
  int c = _hak_class_for_aligned(n, align);
  p = request_alloc(&(struct request){ n, align, c, false, false });   /* c >= 0: every block of c is aligned enough */
  hak_track_leave();
  return handed_out(p, n, false);
}

HAK_API int hak_posix_memalign(void **out, size_t align, size_t n) {
  if (!power_of_two(align) || align % sizeof(void *)) return EINVAL;
  int saved = errno;
  void *p = aligned_alloc_pow2(align, n);
  errno = saved;
  if (!p) return ENOMEM;
  *out = p;
  return 0;
}

HAK_API void *hak_aligned_alloc(size_t align, size_t n) {
  if (!power_of_two(align)) { errno = EINVAL; return NULL; }
  return aligned_alloc_pow2(align, n);
}

/* glibc rounds an alignment that is not a power of two up to one. */
HAK_API void *hak_memalign(size_t align, size_t n) {
  if (align > ((size_t)1 << (sizeof(size_t) * 8 - 2))) { errno = EINVAL; return NULL; }
  size_t a = 1;
  while (a < align) a <<= 1;
  return aligned_alloc_pow2(a, n);
}

/* The page of valloc and pvalloc is the OS page (HAKMEM_PAGE_SIZE's, when
 * set). */
HAK_API void *hak_valloc(size_t n) {
  _hak_thread_init();
  return aligned_alloc_pow2(_hak_os_page, n);
}

HAK_API void *hak_pvalloc(size_t n) {
  _hak_thread_init();
  size_t page = _hak_os_page, rounded = hak_page_up(n);
  if (rounded < n) { errno = ENOMEM; return NULL; }
  return aligned_alloc_pow2(page, rounded ? rounded : page);
}

HAK_API void hak_free_sized(void *p, size_t n) { (void)n; hak_free_inline(p); }

HAK_API void hak_free_aligned_sized(void *p, size_t align, size_t n) {
  (void)align; (void)n;
  hak_free_inline(p);
}

/* Everything this thread caches goes back to the slabs; empty slabs and
 * SuperSlabs and cached Large mappings go back to the OS. */
HAK_API int hak_malloc_trim(size_t pad) {
  (void)pad;
  hak_track_enter();
  struct hak_heap *h = _hak_thread_tls.heap;
  if (h) _hak_thread_flush(h);
  size_t released = _hak_purge_all();
  _hak_class_table_release();
  hak_track_leave();
  return released > 0;
}

HAK_API void hak_collect(void) { (void)hak_malloc_trim(0); }

HAK_API int hak_set_limit(size_t bytes, int hard) {
  _hak_thread_init();
  _hak_os_limit_set(bytes, hard != 0);
  return 0;
}

HAK_API size_t hak_limit(int *hard) {
  _hak_thread_init();
  bool h;
  size_t bytes = _hak_os_limit_get(&h);
  if (hard) *hard = h;
  return bytes;
}

HAK_API struct mallinfo2 hak_mallinfo2(void) {
  struct mallinfo2 mi;
  memset(&mi, 0, sizeof mi);
  size_t mapped = (size_t)atomic_load(&_hak_stats_gauges.bytes_mapped);
  size_t in_use = (size_t)atomic_load(&_hak_stats_gauges.bytes_in_use);
  mi.arena = mapped;
  mi.uordblks = in_use;
  mi.fordblks = mapped > in_use ? mapped - in_use : 0;
  mi.hblkhd = (size_t)atomic_load(&_hak_stats_gauges.bytes_large);
  return mi;
}

/* glibc's older struct has int fields: each is hak_mallinfo2's, at most
 * INT_MAX (glibc's own wrap past 2 GiB and read as small numbers). */
static int int_field(size_t v) { return v > INT_MAX ? INT_MAX : (int)v; }

HAK_API struct mallinfo hak_mallinfo(void) {
  struct mallinfo2 m2 = hak_mallinfo2();
  struct mallinfo mi;
  memset(&mi, 0, sizeof mi);
  mi.arena = int_field(m2.arena);
  mi.uordblks = int_field(m2.uordblks);
  mi.fordblks = int_field(m2.fordblks);
  mi.hblkhd = int_field(m2.hblkhd);
  return mi;
}
