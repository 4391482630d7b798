/* A program without memory errors that uses every allocation call, for the
 * memory checker tests (test_valgrind.sh, test_asan.sh): linked with a
 * tracked hakmem (src/track.h), the checker must report nothing (no false
 * positive from hakmem's free lists, size classes, realloc, calloc,
 * aligned blocks, Large blocks, threads) and no leak. Prints a checksum.
 * With -DPLAIN_TRACK_HAK_API the blocks come from the hak_ API (the ASan
 * build: ASan owns malloc). Built plain (glibc) by the Makefile. */
#include <malloc.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#ifdef PLAIN_TRACK_HAK_API
#include "hakmem.h"
#define malloc hak_malloc
#define calloc hak_calloc
#define realloc hak_realloc
#define free hak_free
#define posix_memalign hak_posix_memalign
#define malloc_usable_size hak_malloc_usable_size
#endif

#define SLOTS 64

static void fail(const char *what) { fprintf(stderr, "FAIL: %s\n", what); exit(1); }

/* Blocks of every tier, written whole, checked, resized and freed in an
 * order that reuses freed blocks. */
static uint64_t churn(unsigned seed) {
  static const size_t sizes[] = { 1, 8, 24, 40, 100, 256, 1000, 2048, 4000, 9000,
                                  33000, 60000, 200000, 1100000, 3000000 };
  char *slot[SLOTS] = { 0 };
  size_t len[SLOTS] = { 0 };
  uint64_t sum = 0;
  for (unsigned i = 0; i < 600; i++) {
    seed = seed * 1103515245u + 12345u;
    unsigned k = (seed >> 8) % SLOTS;
    size_t n = sizes[(seed >> 16) % (sizeof sizes / sizeof sizes[0])];
    if (slot[k]) {
      for (size_t j = 0; j < len[k]; j += 97) sum += (unsigned char)slot[k][j];
      if ((seed >> 4) & 1) {
        char *q = realloc(slot[k], n);
        if (!q) fail("realloc");
        if (n > len[k]) memset(q + len[k], 'r', n - len[k]);
        slot[k] = q; len[k] = n;
        continue;
      }
      free(slot[k]);
      slot[k] = NULL;
      continue;
    }
    if ((seed >> 5) & 1) {
      slot[k] = calloc(1, n);
      if (!slot[k]) fail("calloc");
      for (size_t j = 0; j < n; j += 61) if (slot[k][j]) fail("calloc gave a byte that is not 0");
    } else {
      slot[k] = malloc(n);
      if (!slot[k]) fail("malloc");
      memset(slot[k], (int)(i & 0x7f), n);
    }
    len[k] = n;
  }
  for (unsigned k = 0; k < SLOTS; k++) free(slot[k]);
  return sum;
}

static void *thread_main(void *arg) {
  uint64_t *out = arg;
  *out = churn((unsigned)*out);
  return NULL;
}

int main(void) {
  uint64_t sum = churn(1);
  void *a = NULL;
  if (posix_memalign(&a, 4096, 5000) || ((uintptr_t)a & 4095)) fail("posix_memalign");
  memset(a, 1, 5000);
  free(a);
  char *u = malloc(100);
  if (!u) fail("malloc");
  size_t usable = malloc_usable_size(u);
  if (usable < 100) fail("malloc_usable_size below the request");
  memset(u, 2, usable);                /* every usable byte is the program's */
  free(u);
  pthread_t t[2];
  uint64_t out[2] = { 7, 11 };
  for (int i = 0; i < 2; i++) if (pthread_create(&t[i], NULL, thread_main, &out[i])) fail("pthread_create");
  for (int i = 0; i < 2; i++) pthread_join(t[i], NULL);
  printf("checksum %llu\n", (unsigned long long)(sum + out[0] + out[1]));
  return 0;
}
