/* The fuzzer's first-class heap calls when hakmem is linked (test_fuzz,
 * test_hakapi_fuzz, the libFuzzer target): hak_heap_* with the engine's
 * void * handle. */
#ifndef FUZZ_HEAPS_H
#define FUZZ_HEAPS_H

#include "hakmem.h"

static inline void *fz_heap_new(void) { return hak_heap_new(); }
static inline void *fz_heap_malloc(void *h, size_t n) { return hak_heap_malloc(h, n); }
static inline void *fz_heap_aligned_alloc(void *h, size_t align, size_t n) { return hak_heap_aligned_alloc(h, align, n); }
static inline void fz_heap_destroy(void *h) { hak_heap_destroy(h); }
static inline void fz_heap_delete(void *h) { hak_heap_delete(h); }

#define FZ_HEAP_API                                                                   \
    .heap_new_fn = fz_heap_new, .heap_malloc_fn = fz_heap_malloc,                     \
    .heap_aligned_alloc_fn = fz_heap_aligned_alloc, .heap_destroy_fn = fz_heap_destroy, \
    .heap_delete_fn = fz_heap_delete

#endif
