/* The fuzzer's calls when hakmem is linked (-lhakmem), shared by test_fuzz.c
 * and fuzz_libfuzzer.c: the standard names are hakmem's, free_sized and
 * free_aligned_sized its hak_ forms (glibc 2.36 has neither). */
#ifndef FUZZ_LINKED_H
#define FUZZ_LINKED_H

#include "fuzz_engine.h"
#include "fuzz_heaps.h"
#include "hakmem.h"
#include <malloc.h>

static size_t fz_linked_usable(void *p) { return malloc_usable_size(p); }

#define FZ_LINKED_API(label) {                                                        \
    .name = (label),                                                                  \
    .malloc_fn = malloc, .free_fn = free, .calloc_fn = calloc, .realloc_fn = realloc, \
    .reallocarray_fn = reallocarray, .posix_memalign_fn = posix_memalign,            \
    .aligned_alloc_fn = aligned_alloc, .memalign_fn = memalign, .valloc_fn = valloc,  \
    .pvalloc_fn = pvalloc, .usable_fn = fz_linked_usable,                             \
    .free_sized_fn = hak_free_sized, .free_aligned_sized_fn = hak_free_aligned_sized, \
    .usable_bound = 1, FZ_HEAP_API,                                                   \
  }

#endif
