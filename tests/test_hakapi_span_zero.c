/* calloc of a span block (40 KiB .. 1 MiB) zeroes only its first three
 * words when its run was taken from pages not resident (HAK_ZERO_MARK in
 * word 2, span.c _hak_span_take):
 *  - a fresh block is marked, and callocs of fresh blocks fault in few of
 *    their pages (they are not written) yet read 0;
 *  - a block written and freed, by its thread or by another, loses the
 *    mark at the free (also when the program left word 2 as it was) and
 *    reads 0 from the next calloc that gets it;
 *  - after malloc_trim (runs purged, this thread's lists flushed) a block
 *    is marked again.
 * The debug build also checks, at every calloc that skips, that the block
 * reads 0 past those words (a read that faults the pages in: the fault
 * count is not checked there, nor under TSan). A tracking build
 * (HAK_TRACK) zeroes all. */
#include "testing.h"
#include "hakmem_internal.h"

#include <pthread.h>
#include <string.h>
#include <sys/resource.h>

#define SIZE (100u * 1024)
#define BIG  (512u * 1024)
#define BIGS 8

static bool all_zero(const unsigned char *p, size_t n) {
  for (size_t i = 0; i < n; i++) if (p[i]) return false;
  return true;
}

static bool marked(const void *p) { return ((void *const *)p)[2] == HAK_ZERO_MARK; }

/* A freed block lost its mark (not read in a tracking build: ASan poisons
 * free blocks). */
static bool unmarked_free(const void *p) { return HAK_TRACK || !marked(p); }

static long minor_faults(void) {
  struct rusage u;
  getrusage(RUSAGE_SELF, &u);
  return u.ru_minflt;
}

static void *free_it(void *p) { hak_free(p); return NULL; }

/* Callocs until it gets block want back (the thread's list hands out the
 * block freed last first), at most a few tries; NULL if it never did. */
static unsigned char *calloc_back(const void *want) {
  void *held[8];
  unsigned n = 0;
  unsigned char *p = NULL;
  while (n < 8 && (p = hak_calloc(1, SIZE)) != want) held[n++] = p;
  for (unsigned k = 0; k < n; k++) hak_free(held[k]);
  return p == want ? p : NULL;
}

/* Fresh callocs: few faults, all 0. */
static void fresh_callocs(void) {
  unsigned char *b[BIGS];
  long before = minor_faults();
  for (int i = 0; i < BIGS; i++) b[i] = hak_calloc(1, BIG);
  long faults = minor_faults() - before, pages = (long)(BIGS * (BIG / test_page()));
  fprintf(stderr, "%d fresh callocs of %u KiB: %ld faults for %ld pages\n", BIGS, BIG >> 10, faults, pages);
#if !defined(__SANITIZE_THREAD__)                /* TSan's shadow of fresh mappings faults too */
  if (!HAK_TRACK && !HAK_DEBUG) CHECKF(faults < pages / 4, "%ld faults", faults);   /* debug: calloc reads them */
#endif
  for (int i = 0; i < BIGS; i++) {
    CHECK(b[i] && all_zero(b[i], BIG));
    hak_free(b[i]);
  }
}

int main(void) {
  unsigned char *p = hak_malloc(SIZE);
  CHECK(p && (uintptr_t)p >> HAK_REGION_SHIFT == HAK_SPAN_SLOT);
  if (!p) TEST_END();
  CHECKF(marked(p), "a fresh span block is not marked as zero");
  CHECKF(all_zero(p + 3 * sizeof(void *), SIZE - 3 * sizeof(void *)), "a fresh span block is not 0");
  memset(p + 3 * sizeof(void *), 0x3c, SIZE - 3 * sizeof(void *));   /* the mark left as it was */
  pthread_t t;                                  /* freed by another thread */
  CHECK(pthread_create(&t, NULL, free_it, p) == 0);
  pthread_join(t, NULL);
  CHECK(unmarked_free(p));
  fresh_callocs();

  p = hak_calloc(1, SIZE);
  CHECK(p != NULL);
  if (!p) TEST_END();
  memset(p, 0xab, SIZE);                        /* written, freed by its thread */
  hak_free(p);
  CHECK(unmarked_free(p));
  unsigned char *q = calloc_back(p);
  CHECK(q == p);
  if (!q) TEST_END();
  CHECKF(all_zero(q, SIZE), "a calloc of a block written and freed is not all 0");

  memset(q, 0xcd, SIZE);                        /* written, freed by another thread */
  CHECK(pthread_create(&t, NULL, free_it, q) == 0);
  pthread_join(t, NULL);
  CHECK(unmarked_free(q));
  for (int k = 0; k < 64; k++) {                /* whichever blocks come back */
    unsigned char *r = hak_calloc(1, SIZE);
    CHECK(r != NULL && all_zero(r, SIZE));
    if (!r) break;
    memset(r, 0x5a, SIZE);
    hak_free(r);
  }

  hak_malloc_trim(0);                           /* purged runs: zero pages again */
  unsigned char *m = hak_malloc(SIZE);
  CHECK(m != NULL);
  if (!m) TEST_END();
  CHECKF(marked(m), "a block from purged runs is not marked as zero");
  memset(m + 3 * sizeof(void *), 0x77, SIZE - 3 * sizeof(void *));   /* marked, written past the mark, freed */
  hak_free(m);
  CHECK(unmarked_free(m));
  unsigned char *z = calloc_back(m);
  CHECK(z == m);
  if (z) CHECKF(all_zero(z, SIZE), "a calloc of a marked block, written and freed, is not all 0");
  hak_free(z);
  TEST_END();
}
