/* The differential fuzzer (fuzz_engine.h) through the hak_ names only, linked
 * with the static library: the form the TSan build runs (there malloc is
 * TSan's, hak_malloc hakmem's), so hakmem's cross-thread paths run under TSan
 * with random workloads. Arguments as test_fuzz's; without them the short
 * fixed-seed run of make test (fewer operations under TSan, 5-15x slower). */
#include "fuzz_engine.h"
#include "fuzz_heaps.h"
#include "hakmem.h"

static size_t usable(void *p) { return hak_malloc_usable_size(p); }

int main(int argc, char **argv) {
  static const struct fz_api api = {
    .name = "hakmem hak_ API",
    .malloc_fn = hak_malloc, .free_fn = hak_free, .calloc_fn = hak_calloc, .realloc_fn = hak_realloc,
    .reallocarray_fn = hak_reallocarray, .posix_memalign_fn = hak_posix_memalign,
    .aligned_alloc_fn = hak_aligned_alloc, .memalign_fn = hak_memalign, .valloc_fn = hak_valloc,
    .pvalloc_fn = hak_pvalloc, .usable_fn = usable,
    .free_sized_fn = hak_free_sized, .free_aligned_sized_fn = hak_free_aligned_sized,
    .usable_bound = 1, FZ_HEAP_API,
  };
#if defined(__SANITIZE_THREAD__)
  if (argc == 1) {
    char *short_run[] = { argv[0], "--ops", "8000", NULL };
    return fz_main(3, short_run, &api);
  }
#endif
  return fz_main(argc, argv, &api);
}
