/* The differential fuzzer under libFuzzer (clang -fsanitize=fuzzer, built and
 * run by make fuzz): the input bytes are the call sequence (each number the
 * engine draws is taken from the next bytes), single-threaded, no fork; the
 * allocator is hakmem, linked (-lhakmem). A failed check aborts, so libFuzzer
 * keeps the input that found it (replay: build/fuzz/fuzz_libfuzzer FILE). */
#include "fuzz_linked.h"

static const struct fz_api api = FZ_LINKED_API("hakmem libFuzzer");

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
