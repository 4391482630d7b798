/* The differential fuzzer (fuzz_engine.h) linked with -lhakmem: the standard
 * names are hakmem's, free_sized and free_aligned_sized its hak_ forms (glibc
 * 2.36 has none). Without arguments: the short fixed-seed run of make test;
 * make fuzz runs it with --seconds. */
#include "fuzz_linked.h"

int main(int argc, char **argv) {
  static const struct fz_api api = FZ_LINKED_API("hakmem -lhakmem");
  return fz_main(argc, argv, &api);
}
