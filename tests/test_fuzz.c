/* The differential fuzzer (fuzz_engine.h) linked with -lhakmem: the standard
 * names are hakmem's, free_sized and free_aligned_sized its hak_ forms (glibc
 * 2.36 has none). Without arguments: the short fixed-seed run of make test;
 * make fuzz runs it with --seconds. */
#include "fuzz_engine.h"
#include "hakmem.h"
#include <malloc.h>

static size_t usable(void *p) { return malloc_usable_size(p); }

int main(int argc, char **argv) {
  static const struct fz_api api = {
    .name = "hakmem -lhakmem",
    .malloc_fn = malloc, .free_fn = free, .calloc_fn = calloc, .realloc_fn = realloc,
    .reallocarray_fn = reallocarray, .posix_memalign_fn = posix_memalign,
    .aligned_alloc_fn = aligned_alloc, .memalign_fn = memalign, .valloc_fn = valloc,
    .pvalloc_fn = pvalloc, .usable_fn = usable,
    .free_sized_fn = hak_free_sized, .free_aligned_sized_fn = hak_free_aligned_sized,
    .usable_bound = 1,
  };
  return fz_main(argc, argv, &api);
}
