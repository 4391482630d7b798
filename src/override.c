/* override.c — the standard names: malloc and friends, and C++ operator
 * new/delete (plain, sized, aligned, nothrow; Itanium C++ ABI names), so
 * hakmem replaces the C library's allocator under LD_PRELOAD or when linked.
 * malloc and free inline the fast paths; the rest forward to api.c. */
#include "hakmem_internal.h"

#include <errno.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>

/* C23 names the C library of this machine may not declare yet (glibc's
 * names that musl does not declare, pvalloc and the rest, come from
 * hakmem.h). */
void free_sized(void *p, size_t n);
void free_aligned_sized(void *p, size_t align, size_t n);

HAK_API void *malloc(size_t n) { return hak_malloc_inline(n); }
HAK_API void free(void *p) { hak_free_inline(p); }
HAK_API void *calloc(size_t count, size_t size) { return hak_calloc(count, size); }
HAK_API void *realloc(void *p, size_t n) { return hak_realloc(p, n); }
HAK_API void *reallocarray(void *p, size_t count, size_t size) { return hak_reallocarray(p, count, size); }
HAK_API int posix_memalign(void **out, size_t align, size_t n) { return hak_posix_memalign(out, align, n); }
HAK_API void *aligned_alloc(size_t align, size_t n) { return hak_aligned_alloc(align, n); }
HAK_API void *memalign(size_t align, size_t n) { return hak_memalign(align, n); }
HAK_API void *valloc(size_t n) { return hak_valloc(n); }
HAK_API void *pvalloc(size_t n) { return hak_pvalloc(n); }
HAK_API size_t malloc_usable_size(void *p) { return hak_malloc_usable_size(p); }
HAK_API void free_sized(void *p, size_t n) { hak_free_sized(p, n); }
HAK_API void free_aligned_sized(void *p, size_t align, size_t n) { hak_free_aligned_sized(p, align, n); }
HAK_API int malloc_trim(size_t pad) { return hak_malloc_trim(pad); }
HAK_API struct mallinfo2 mallinfo2(void) { return hak_mallinfo2(); }
/* glibc's reports: left to glibc they would describe glibc's own arenas,
 * which hold nothing under hakmem. mallopt stays glibc's: its settings are
 * glibc's (hakmem's are the HAKMEM_ options). */
HAK_API struct mallinfo mallinfo(void) { return hak_mallinfo(); }
HAK_API void malloc_stats(void) { hak_stats_print(); }
HAK_API int malloc_info(int options, FILE *fp) { return hak_malloc_info(options, fp); }

/* ---- C++ ---------------------------------------------------------------------- */
/* Out of memory in operator new: call the new-handler while there is one,
 * else throw std::bad_alloc (nothrow forms return NULL). The C++ runtime
 * functions are weak: a C program never needs them. */
typedef void (*new_handler_fn)(void);
extern new_handler_fn _ZSt15get_new_handlerv(void) __attribute__((weak));
extern void _ZSt17__throw_bad_allocv(void) __attribute__((weak, noreturn));

static void *new_failed(size_t n, size_t align, bool nothrow) {
  for (;;) {
    new_handler_fn handler = _ZSt15get_new_handlerv ? _ZSt15get_new_handlerv() : NULL;
    if (!handler) break;
    handler();
    void *p = align ? hak_aligned_alloc(align, n) : hak_malloc(n);
    if (p) return p;
  }
  if (nothrow) return NULL;
  if (_ZSt17__throw_bad_allocv) _ZSt17__throw_bad_allocv();
  _hak_guard_write("hakmem: operator new(%zu): out of memory\n", n);
  abort();
}

static inline void *cxx_new(size_t n) {
  void *p = hak_malloc_inline(n);
  return HAK_LIKELY(p != NULL) ? p : new_failed(n, 0, false);
}
static void *cxx_new_nothrow(size_t n) {
  void *p = hak_malloc_inline(n);
  return p ? p : new_failed(n, 0, true);
}
static void *cxx_new_aligned(size_t n, size_t align, bool nothrow) {
  void *p = hak_aligned_alloc(align, n);
  return p ? p : new_failed(n, align, nothrow);
}

/* The operators have no C declarations: they are ABI names. */
#pragma GCC diagnostic ignored "-Wmissing-prototypes"
#define NOTHROW_T const void *   /* const std::nothrow_t & */
HAK_API void *_Znwm(size_t n) { return cxx_new(n); }
HAK_API void *_Znam(size_t n) { return cxx_new(n); }
HAK_API void *_ZnwmRKSt9nothrow_t(size_t n, NOTHROW_T t) { (void)t; return cxx_new_nothrow(n); }
HAK_API void *_ZnamRKSt9nothrow_t(size_t n, NOTHROW_T t) { (void)t; return cxx_new_nothrow(n); }
HAK_API void *_ZnwmSt11align_val_t(size_t n, size_t a) { return cxx_new_aligned(n, a, false); }
HAK_API void *_ZnamSt11align_val_t(size_t n, size_t a) { return cxx_new_aligned(n, a, false); }
HAK_API void *_ZnwmSt11align_val_tRKSt9nothrow_t(size_t n, size_t a, NOTHROW_T t) { (void)t; return cxx_new_aligned(n, a, true); }
HAK_API void *_ZnamSt11align_val_tRKSt9nothrow_t(size_t n, size_t a, NOTHROW_T t) { (void)t; return cxx_new_aligned(n, a, true); }

HAK_API void _ZdlPv(void *p) { hak_free_inline(p); }
HAK_API void _ZdaPv(void *p) { hak_free_inline(p); }
HAK_API void _ZdlPvm(void *p, size_t n) { (void)n; hak_free_inline(p); }
HAK_API void _ZdaPvm(void *p, size_t n) { (void)n; hak_free_inline(p); }
HAK_API void _ZdlPvRKSt9nothrow_t(void *p, NOTHROW_T t) { (void)t; hak_free_inline(p); }
HAK_API void _ZdaPvRKSt9nothrow_t(void *p, NOTHROW_T t) { (void)t; hak_free_inline(p); }
HAK_API void _ZdlPvSt11align_val_t(void *p, size_t a) { (void)a; hak_free_inline(p); }
HAK_API void _ZdaPvSt11align_val_t(void *p, size_t a) { (void)a; hak_free_inline(p); }
HAK_API void _ZdlPvmSt11align_val_t(void *p, size_t n, size_t a) { (void)n; (void)a; hak_free_inline(p); }
HAK_API void _ZdaPvmSt11align_val_t(void *p, size_t n, size_t a) { (void)n; (void)a; hak_free_inline(p); }
HAK_API void _ZdlPvSt11align_val_tRKSt9nothrow_t(void *p, size_t a, NOTHROW_T t) { (void)a; (void)t; hak_free_inline(p); }
HAK_API void _ZdaPvSt11align_val_tRKSt9nothrow_t(void *p, size_t a, NOTHROW_T t) { (void)a; (void)t; hak_free_inline(p); }
