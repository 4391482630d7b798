/* Large blocks are reused without page faults: a block of up to 4 MiB
 * takes a whole class and serves the next request of its class; a block
 * above 4 MiB bigger than any cached range is made of the cached ranges'
 * pages (moved, not faulted in again; one of up to 4 MiB is not, and the
 * ranges stay for their classes), a churn of big buffers of random sizes
 * faults in few pages once the buffers are there, and calloc zeroes the
 * reused pages but leaves the fresh ones untouched. Contents are checked
 * everywhere: reused pages read as written, calloc'd ones as 0. The fault
 * counts run in a child with a purge delay of a minute, so a slow machine
 * cannot expire the cache in between. */
#include "testing.h"
#include "hakmem.h"   /* pvalloc and malloc_trim where the C library has none (musl) */

#include <malloc.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#define MiB ((size_t)1024 * 1024)
#define PAGE 4096

static long minflt(void) {
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  return ru.ru_minflt;
}

/* The first byte in [p, p + n) that is not c, or n. */
static size_t first_not(const unsigned char *p, size_t n, unsigned char c) {
  for (size_t i = 0; i < n; i++)
    if (p[i] != c) return i;
  return n;
}

/* Two 8 MiB blocks freed with a live one between them (so they do not
 * merge): a 16 MiB calloc is made of their pages, zeroed; a 24 MiB one of
 * 16 MiB of theirs and 8 MiB of fresh pages that calloc does not touch. */
static void test_gather(void) {
  unsigned char *a = malloc(8 * MiB), *b = malloc(4 * MiB), *c = malloc(8 * MiB);
  CHECK(a && b && c);
  if (!a || !b || !c) return;
  memset(a, 0xAB, 8 * MiB);
  memset(b, 0x11, 4 * MiB);
  memset(c, 0xCD, 8 * MiB);
  free(a);
  free(c);
  long before = minflt();
  unsigned char *d = calloc(1, 16 * MiB);
  CHECK(d != NULL);
  if (!d) return;
  size_t bad = first_not(d, 16 * MiB, 0);
  long faults = minflt() - before;
  CHECKF(bad == 16 * MiB, "16 MiB calloc of reused pages: byte %zu is not 0", bad);
  CHECKF(faults < 16 * (long)MiB / PAGE / 10, "16 MiB from two freed 8 MiB blocks: %ld page faults", faults);
  memset(d, 0xEF, 16 * MiB);
  free(d);

  before = minflt();
  unsigned char *e = calloc(1, 24 * MiB);
  long calloc_faults = minflt() - before;
  CHECK(e != NULL);
  if (!e) return;
  CHECKF(calloc_faults < 8 * (long)MiB / PAGE / 10, "calloc of 16 MiB reused + 8 MiB fresh: %ld page faults", calloc_faults);
  bad = first_not(e, 24 * MiB, 0);
  CHECKF(bad == 24 * MiB, "24 MiB calloc, partly reused: byte %zu is not 0", bad);
  bad = first_not(b, 4 * MiB, 0x11);
  CHECKF(bad == 4 * MiB, "the live block between them changed at byte %zu", bad);
  free(e);
  free(b);
}

/* A shrink leaves a dirty tail in the cache; calloc of it reads 0, and so
 * does calloc of a block that was used only up to its requested size. */
static void test_calloc_of_tails(void) {
  unsigned char *p = malloc(8 * MiB);
  CHECK(p != NULL);
  if (!p) return;
  memset(p, 0x5A, 8 * MiB);
  unsigned char *q = realloc(p, 3 * MiB);
  CHECK(q == p || HAK_HARDENED);                 /* the hardened build moves it (its guard page) */
  unsigned char *t = calloc(1, 5 * MiB);
  CHECK(t != NULL);
  if (t) CHECKF(first_not(t, 5 * MiB, 0) == 5 * MiB, "calloc of a shrunk block's tail is not 0");
  CHECKF(first_not(q, 3 * MiB, 0x5A) == 3 * MiB, "the shrunk block lost its contents");
  free(t);
  free(q);

  size_t odd = 3 * MiB + 1;                      /* the block is a page more than written */
  unsigned char *r = malloc(odd);
  CHECK(r != NULL);
  if (!r) return;
  memset(r, 0x77, odd);
  free(r);
  unsigned char *s = calloc(1, 3 * MiB + PAGE);
  CHECK(s != NULL);
  if (s) CHECKF(first_not(s, 3 * MiB + PAGE, 0) == 3 * MiB + PAGE, "calloc after a block of %zu bytes is not 0", odd);
  free(s);
}

/* A program may write every byte malloc_usable_size gives it, past what it
 * asked for: calloc of that block's pages reads 0 there too (the fuzzer's
 * seed 3 found calloc trusting the requested size as the written bound). */
static void test_calloc_after_usable_written(void) {
  malloc_trim(0);                                /* a fresh mapping: dirty only as written */
  size_t odd = 3 * MiB + 1;
  unsigned char *r = malloc(odd);
  CHECK(r != NULL);
  if (!r) return;
  size_t usable = malloc_usable_size(r);
  CHECK(usable >= 3 * MiB + PAGE);
  memset(r, 0x6B, usable);
  free(r);
  unsigned char *s = calloc(1, usable);
  CHECK(s != NULL);
  if (s) CHECKF(first_not(s, usable, 0) == usable, "calloc after a block written to its usable size: byte %zu is not 0", first_not(s, usable, 0));
  free(s);
}

/* Blocks of up to 4 MiB take whole classes, four per doubling: the usable
 * size is the class's (at most 25% over the request), and a freed block
 * serves the next request of its class at its address, without a page
 * fault. Larger blocks take whole pages; realloc sizes a block by pages. */
static void test_classes(void) {
#if !HAK_HARDENED                                  /* (its blocks are whole pages: test_hardened) */
  static const struct { size_t n, usable; } cases[] = {
    { MiB + 1, MiB + MiB / 4 }, { MiB + MiB / 4, MiB + MiB / 4 }, { 2 * MiB, 2 * MiB },
    { 2 * MiB + 1, 2 * MiB + MiB / 2 }, { 3 * MiB + 1, 3 * MiB + MiB / 2 }, { 4 * MiB, 4 * MiB },
  };
  for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
    void *p = malloc(cases[k].n);
    CHECK(p != NULL);
    size_t usable = p ? malloc_usable_size(p) : 0;
    CHECKF(usable == cases[k].usable, "malloc(%zu): usable size %zu, not the class's %zu", cases[k].n, usable, cases[k].usable);
    free(p);
  }
  void *big = malloc(4 * MiB + 1);                 /* past the classes: whole pages */
  size_t usable = big ? malloc_usable_size(big) : 0;
  CHECKF(usable > 4 * MiB && usable <= 4 * MiB + 64 * 1024, "malloc(4 MiB + 1): usable size %zu", usable);
  free(big);
  malloc_trim(0);                                  /* nothing cached but the block below */
  size_t first = MiB + 300 * 1024, second = MiB + 200 * 1024;   /* the 1.5 and 1.25 MiB classes */
  unsigned char *a = malloc(first);
  CHECK(a != NULL);
  if (!a) return;
  memset(a, 0x5A, first);
  free(a);
  long before = minflt();
  unsigned char *b = malloc(second);
  CHECKF(b == a, "a freed 1.5 MiB block did not serve the next (1.25 MiB-class) request at its address");
  if (!b) return;
  memset(b, 0x11, malloc_usable_size(b));
  long faults = minflt() - before;
  CHECKF(faults < 8, "a block reused whole: %ld page faults", faults);
  unsigned char *c = realloc(b, MiB + 100 * 1024);
  CHECKF(c && malloc_usable_size(c) < MiB + MiB / 4, "realloc did not size the block by pages");
  free(c);

  /* A block of up to 4 MiB that no cached range fits is a fresh mapping: the
   * cached ranges are not moved into it, and serve the next requests of
   * their class without a page fault. */
  malloc_trim(0);
  unsigned char *r1 = malloc(first), *r2 = malloc(first);
  CHECK(r1 != NULL && r2 != NULL);
  if (!r1 || !r2) return;
  memset(r1, 0x21, first);
  memset(r2, 0x22, first);
  free(r1);
  free(r2);                                        /* 3 MiB cached: no 3.5 MiB block fits */
  unsigned char *big3 = malloc(3 * MiB + 1);
  CHECK(big3 != NULL);
  before = minflt();
  unsigned char *r3 = malloc(second);
  CHECKF(r3 == r1 || r3 == r2, "a cached 1.5 MiB range went into a 3.5 MiB block: %p is neither %p nor %p",
         (void *)r3, (void *)r1, (void *)r2);
  if (r3) memset(r3, 0x23, malloc_usable_size(r3));
  faults = minflt() - before;
  CHECKF(faults < 8, "a cached range after a 3.5 MiB block: %ld page faults", faults);
  free(r3);
  free(big3);
#endif
}

/* 4 buffers of 5 to 25 MiB replaced at random, each written whole: once
 * they are there (and the cache has grown), fewer than one page in twenty
 * written faults in. */
static void test_churn(void) {
  enum { SLOTS = 4, WARM = 20, ROUNDS = 80 };
  unsigned char *slot[SLOTS];
  size_t size[SLOTS];
  uint64_t rng = 42;
  for (int i = 0; i < SLOTS; i++) slot[i] = NULL, size[i] = 0;
  long pages = 0, faults = 0;
  for (int round = 0; round < SLOTS + ROUNDS; round++) {
    int i = round < SLOTS ? round : (int)(rng % SLOTS);
    rng = rng * 6364136223846793005ull + 1442695040888963407ull;
    size_t n = 5 * MiB + (size_t)(rng >> 33) % (20 * MiB);
    if (slot[i]) {
      CHECKF(slot[i][0] == (unsigned char)i && slot[i][size[i] - 1] == (unsigned char)i, "slot %d damaged", i);
      free(slot[i]);
    }
    long before = minflt();
    slot[i] = malloc(n);
    CHECK(slot[i] != NULL);
    if (!slot[i]) return;
    memset(slot[i], i, n);
    size[i] = n;
    if (round >= SLOTS + WARM) { faults += minflt() - before; pages += (long)(n / PAGE); }
  }
  CHECKF(faults * 20 < pages, "churn: %ld page faults for %ld pages written", faults, pages);
  for (int i = 0; i < SLOTS; i++) free(slot[i]);
}

int main(int argc, char **argv) {
  if (argc > 1 && strcmp(argv[1], "child") == 0) {
    test_classes();
    test_gather();
    test_calloc_of_tails();
    test_calloc_after_usable_written();
    test_churn();
    TEST_END();
  }
  pid_t pid = fork();
  if (pid == 0) {
    char *args[] = { argv[0], "child", NULL };
    setenv("HAKMEM_PURGE_DELAY_MS", "60000", 1);   /* the rest of the environment stays */
    test_exec_self(args, NULL);
    _exit(99);
  }
  int status;
  waitpid(pid, &status, 0);
  CHECKF(WIFEXITED(status) && WEXITSTATUS(status) == 0, "child status %d", status);
  TEST_END();
}
