/* Zero-size requests with every alignment, through every function of the
 * aligned family: each returns a unique, valid, freeable block whose usable
 * size is at least the alignment's smallest block, and a Large range in the
 * cache is never handed out twice (the valloc(0) then malloc(2 MiB) repro:
 * both returned the cached range's address while both were live). */
#include "testing.h"
#include "hakmem.h"   /* pvalloc and malloc_trim where the C library has none (musl) */

#include <errno.h>
#include <malloc.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MAX_SHIFT 22   /* alignments 16 B .. 4 MiB */

static int aligned(const void *p, size_t a) { return ((uintptr_t)p & (a - 1)) == 0; }

/* p is a live block of ours: usable, writable, reallocatable, freeable. */
static void check_block(void *p, size_t align, const char *what) {
  CHECKF(p != NULL, "%s align %zu: NULL (errno %d)", what, align, errno);
  if (!p) return;
  CHECKF(aligned(p, align), "%s align %zu: %p misaligned", what, align, p);
  size_t u = malloc_usable_size(p);
  CHECKF(u >= 1, "%s align %zu: usable size 0", what, align);
  memset(p, 0x5a, u);
}

static void zero_size_every_alignment(void) {
  for (int s = 4; s <= MAX_SHIFT; s++) {
    size_t a = (size_t)1 << s;
    void *p = NULL;
    errno = 0;
    int rc = posix_memalign(&p, a, 0);
    CHECKF(rc == 0, "posix_memalign(%zu, 0) = %d", a, rc);
    check_block(p, a, "posix_memalign");
    void *q = aligned_alloc(a, 0);
    check_block(q, a, "aligned_alloc");
    void *r = memalign(a, 0);
    check_block(r, a, "memalign");
    CHECKF(p != q && q != r && p != r, "align %zu: %p %p %p not distinct", a, p, q, r);
    /* realloc of a zero-size aligned block moves it and keeps it valid */
    q = realloc(q, 100);
    CHECKF(q != NULL, "realloc of aligned_alloc(%zu, 0)", a);
    free(p); free(q); free(r);
  }
  size_t page = (size_t)sysconf(_SC_PAGESIZE);
  void *v = valloc(0), *w = pvalloc(0);
  check_block(v, page, "valloc");
  check_block(w, page, "pvalloc");
  CHECK(v != w);
  CHECKF(malloc_usable_size(w) >= page, "pvalloc(0) usable %zu < a page", malloc_usable_size(w));
  free(v); free(w);
}

/* The repro of the issue: a cached Large range must not serve a zero-size
 * block and a later malloc at the same address. */
static void cached_range_not_handed_out_twice(void) {
  free(malloc(2 << 20));
  void *z = valloc(0);
  char *q = malloc(2 << 20);
  CHECKF(z != NULL && q != NULL, "valloc(0) %p malloc(2 MiB) %p", z, q);
  CHECKF(z != q, "valloc(0) and malloc(2 MiB) both returned %p", z);
  if (q) memset(q, 1, 2 << 20);
  q = realloc(q, 3 << 20);
  CHECK(q != NULL);
  CHECK(malloc_usable_size(z) >= 1);
  free(q);
  free(z);
  /* the same with every alignment of the Large tier */
  for (int s = 12; s <= MAX_SHIFT; s++) {
    size_t a = (size_t)1 << s;
    free(malloc(4 << 20));
    void *p = aligned_alloc(a, 0);
    char *big = malloc(4 << 20);
    CHECKF(p && big && (uintptr_t)p - (uintptr_t)big >= (4u << 20),
           "align %zu: zero block %p inside live block %p", a, p, (void *)big);
    check_block(p, a, "aligned_alloc after a Large free");
    free(big);
    free(p);
  }
}

/* Many zero-size blocks at once are all distinct. */
static void many_distinct(void) {
  enum { N = 64 };
  void *p[N];
  for (int i = 0; i < N; i++) p[i] = aligned_alloc((size_t)1 << (12 + i % 8), 0);
  for (int i = 0; i < N; i++)
    for (int j = 0; j < i; j++) CHECKF(p[i] != p[j], "blocks %d and %d both %p", i, j, p[i]);
  for (int i = 0; i < N; i++) free(p[i]);
}

int main(void) {
  zero_size_every_alignment();
  cached_range_not_handed_out_twice();
  many_distinct();
  TEST_END();
}
