/* api.c — the hak_ API: every malloc-family function, routed by tier, with
 * errno, alignment, overflow and zero-size behaviour as POSIX and glibc
 * document them; plus the two out-of-line slow paths of malloc and free. */
#include "hakmem_internal.h"

#include <errno.h>

/* ---- routing ------------------------------------------------------------------ */
static void *route_alloc(size_t n) {
  if (n > HAK_MID_MAX) return _hak_large_alloc(n, 0, false);
  void *p = _hak_front_alloc_slow(_hak_class_of_size(n));   /* pops first */
  if (HAK_UNLIKELY(!p) && n > HAK_L2_MAX) p = _hak_large_alloc(n, 0, false);   /* span slot full or taken */
  return p;
}

/* Out of memory: everything cached and held in reserve goes back (this
 * thread's lists and slabs, cached Large ranges, free slabs, empty
 * SuperSlabs at the top of their regions, the span heap's free runs, their
 * address space included) before one more try. */
static void *large_alloc_retry(size_t n, size_t align, bool zero) {
  void *p = _hak_large_alloc(n, align, zero);
  if (HAK_UNLIKELY(!p) && hak_malloc_trim(0)) p = _hak_large_alloc(n, align, zero);
  if (HAK_UNLIKELY(!p)) errno = ENOMEM;
  return p;
}

/* HAK_SLOW: every malloc the inline path could not serve. Out of memory,
 * it gives back what it caches and tries once more. */
void *_hak_api_malloc_slow(size_t n) {
  struct hak_heap *h = _hak_thread_tls.heap;
  if (h) h->stats.malloc_slow++;
  _hak_purge_tick();
  if (n > PTRDIFF_MAX) { errno = ENOMEM; return NULL; }
  void *p = route_alloc(n);
  if (HAK_UNLIKELY(!p) && hak_malloc_trim(0)) p = route_alloc(n);
  /* Still none: a class that cannot map its next SuperSlab (2 MiB) can
   * still be served by a mapping of its own (whole pages: Large), as
   * route_alloc does for the sizes above L2. */
  if (HAK_UNLIKELY(!p) && n <= HAK_L2_MAX) p = _hak_large_alloc(n, 0, false);
  if (HAK_UNLIKELY(!p)) errno = ENOMEM;         /* whatever the trim's system calls left */
  return p;
}

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
  *f = HAK_RACY_LOAD(_hak_span_front[(uint32_t)a >> HAK_SPAN_STEP_SHIFT]);
  if (*f == 0 || (a & (HAK_SPAN_COLOR_STEP - 1)) != 0 || b[1] == key) return 0;
  if (!hak_home_push(*f + HAK_HOME_BASE, b)) return -1;
  b[1] = key;
#if HAK_FAST_STATS
  _hak_thread_tls.heap->stats.frees[*f - 1]++;
#endif
  return 1;
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
  if (c >= 0) { _hak_front_free_slow(p, (unsigned)c); return; }   /* spills first if full (a purge tick) */
  _hak_purge_tick();
  if (_hak_large_free(p, call)) return;
  _hak_guard_foreign_free(p, call);
}

/* HAK_SLOW: every free the inline path could not take. A span block goes
 * on its list (every span block comes here: its slot lies past the home
 * slots), or to the front's slow free when the list is full; everything
 * else is sorted by free_by_kind. */
void _hak_api_free_slow(void *p, const char *call) {
  unsigned f;
  int pushed = span_push(p, &f);
  if (HAK_LIKELY(pushed > 0)) return;
  if (pushed < 0) _hak_front_free_slow(p, f - 1);
  else free_by_kind(p, call);
}

/* ---- the API ------------------------------------------------------------------ */
HAK_API void *hak_malloc(size_t n) { return hak_malloc_inline(n); }
HAK_API void hak_free(void *p) { hak_free_inline(p); }

HAK_API void *hak_calloc(size_t count, size_t size) {
  size_t n;
  if (__builtin_mul_overflow(count, size, &n)) { errno = ENOMEM; return NULL; }
  if (n > HAK_MID_MAX) {
    if (n > PTRDIFF_MAX) { errno = ENOMEM; return NULL; }
    return large_alloc_retry(n, 0, true);         /* fresh mappings are zero */
  }
  void *p = hak_malloc_inline(n);
  if (p) memset(p, 0, n);
  return p;
}

HAK_API size_t hak_malloc_usable_size(const void *p) {
  if (!p) return 0;
  int c = live_class((void *)p, "malloc_usable_size");
  if (c >= 0) return _hak_classes[c].size;
  size_t large = _hak_large_usable(p);
  if (!large) large = _hak_heap_usable(p);
  return large ? large : _hak_guard_foreign_usable(p, "malloc_usable_size");
}

/* glibc's realloc(p, 0) frees p and returns NULL. */
HAK_API void *hak_realloc(void *p, size_t n) {
  if (!p) return hak_malloc(n);
  if (n == 0) { _hak_api_free_slow(p, "realloc"); return NULL; }
  if (n > PTRDIFF_MAX) { errno = ENOMEM; return NULL; }
  size_t old;
  int c = live_class(p, "realloc");
  if (c >= 0) {
    old = _hak_classes[c].size;
    if (n <= old && n >= old / 2) return p;       /* fits, not too wasteful */
  } else if ((old = _hak_large_usable(p)) != 0) {
    void *q = n > HAK_MID_MAX ? _hak_large_realloc(p, n) : NULL;
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
  int c = _hak_class_for_aligned(n, align);
  if (c >= 0) {                                  /* every block of c is aligned enough */
    void *p = _hak_front_alloc_slow((unsigned)c);
    if (HAK_UNLIKELY(!p) && hak_malloc_trim(0)) p = _hak_front_alloc_slow((unsigned)c);
    if (HAK_UNLIKELY(!p)) errno = ENOMEM;
    return p;
  }
  return large_alloc_retry(n, align, false);
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

HAK_API void *hak_valloc(size_t n) { return aligned_alloc_pow2(HAK_PAGE, n); }

HAK_API void *hak_pvalloc(size_t n) {
  size_t rounded = (n + HAK_PAGE - 1) & ~(size_t)(HAK_PAGE - 1);
  if (rounded < n) { errno = ENOMEM; return NULL; }
  return aligned_alloc_pow2(HAK_PAGE, rounded ? rounded : HAK_PAGE);
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
  struct hak_heap *h = _hak_thread_tls.heap;
  if (h) _hak_thread_flush(h);
  size_t released = _hak_purge_all();
  _hak_class_table_release();
  return released > 0;
}

HAK_API void hak_collect(void) { (void)hak_malloc_trim(0); }

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
