// Allocates through operator new and malloc until it fails or holds CAP MiB
// (argv[1]), then frees everything and allocates again. Run by
// test_limit.sh with LD_PRELOAD=libhakmem.so and HAKMEM_LIMIT_MB set.
// Prints: "new: bad_alloc after N MiB" or "new: cap", "malloc: ENOMEM after
// N MiB" or "malloc: cap", "again: ok" or "again: failed".
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>

static void *blocks[1 << 16];

int main(int argc, char **argv) {
  size_t cap = argc > 1 ? strtoul(argv[1], nullptr, 10) : 256, n = 0;
  try {
    for (; n < cap; n++) {
      blocks[n] = new char[1 << 20];
      memset(blocks[n], 1, 1 << 20);
    }
    printf("new: cap\n");
  } catch (const std::bad_alloc &) {
    printf("new: bad_alloc after %zu MiB\n", n);
  }
  for (size_t i = 0; i < n; i++) delete[] static_cast<char *>(blocks[i]);
  size_t k = 0, small = 0;
  for (; small < (cap << 20); small += 1000, k++) {
    errno = 0;
    void *p = malloc(1000);
    if (!p) break;
    memset(p, 2, 1000);
    if (k < (1 << 16)) blocks[k] = p;      // the rest is leaked until exit
  }
  if (small < (cap << 20)) printf("malloc: %s after %zu MiB\n", errno == ENOMEM ? "ENOMEM" : "other errno", small >> 20);
  else printf("malloc: cap\n");
  for (size_t i = 0; i < k && i < (1 << 16); i++) free(blocks[i]);
  char *again = static_cast<char *>(malloc(4 << 20));
  printf("again: %s\n", again ? "ok" : "failed");
  free(again);
  return 0;
}
