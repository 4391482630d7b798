/* The differential fuzzer under libFuzzer (clang -fsanitize=fuzzer, built and
 * run by make fuzz): the input bytes are the call sequence (each number the
 * engine draws is taken from the next bytes), single-threaded, no fork; the
 * allocator is hakmem, linked (-lhakmem). A failed check aborts, so libFuzzer
 * keeps the input that found it (replay: build/fuzz/fuzz_libfuzzer FILE). */
#include "fuzz_engine.h"
#include "hakmem.h"
#include <malloc.h>

static size_t usable(void *p) { return malloc_usable_size(p); }

static const struct fz_api api = {
  .name = "hakmem libFuzzer",
  .malloc_fn = malloc, .free_fn = free, .calloc_fn = calloc, .realloc_fn = realloc,
  .reallocarray_fn = reallocarray, .posix_memalign_fn = posix_memalign,
  .aligned_alloc_fn = aligned_alloc, .memalign_fn = memalign, .valloc_fn = valloc,
  .pvalloc_fn = pvalloc, .usable_fn = usable,
  .free_sized_fn = hak_free_sized, .free_aligned_sized_fn = hak_free_aligned_sized,
  .usable_bound = 1,
};

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static long operations;

static void report(void) { printf("fuzz: %s: %ld operations, nothing found\n", api.name, operations); }

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  (void)argc; (void)argv;
  fz_probe_classes(&api);
  atexit(report);
  return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static struct fz_run run;
  operations += fz_run_bytes(&run, &api, data, size);
  return 0;
}
