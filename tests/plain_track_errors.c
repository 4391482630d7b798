/* One memory error of a program, chosen by argv[1], for the memory checker
 * tests (test_valgrind.sh, test_asan.sh): they link this program with a
 * tracked hakmem (src/track.h) and expect the checker to report the error
 * as it does for the C library's malloc.
 *   use-after-free  reads a byte of a freed block of 40 bytes
 *   past-end        reads the byte just past a block of 40 bytes (inside its
 *                   48-byte size class: hakmem would not notice)
 *   next-block      reads the first byte past a block of 48 bytes, the start
 *                   of a block never handed out
 *   leak            loses the only pointers to a block of 40 bytes and to one
 *                   of 3000 bytes, the first of its slab (hakmem's metadata
 *                   holds that address: memcheck must not count it)
 *   double-free     frees a block twice
 *   uninit          branches on a byte malloc never wrote (memcheck only)
 * With -DPLAIN_TRACK_HAK_API the blocks come from the hak_ API (the ASan
 * build: ASan owns malloc). Built plain (glibc) by the Makefile. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#ifdef PLAIN_TRACK_HAK_API
#include "hakmem.h"
#define malloc hak_malloc
#define free hak_free
#endif

#define BLOCK 40

/* The compiler must not see through the errors (nor warn of them). */
static char *volatile sink;
static char *launder(char *p) { sink = p; return sink; }

static char *block(void) {
  char *p = malloc(BLOCK);
  if (!p) { perror("malloc"); exit(2); }
  memset(p, 'a', BLOCK);
  return p;
}

int main(int argc, char **argv) {
  const char *what = argc > 1 ? argv[1] : "";
  if (!strcmp(what, "use-after-free")) {
    char *p = block(), *q = launder(p);
    free(p);
    printf("read %d\n", q[3]);
  } else if (!strcmp(what, "past-end")) {
    char *p = block();
    printf("read %d\n", launder(p)[BLOCK]);
    free(p);
  } else if (!strcmp(what, "next-block")) {
    char *p = malloc(48);
    if (!p) return 2;
    memset(p, 'b', 48);
    printf("read %d\n", launder(p)[48]);
    free(p);
  } else if (!strcmp(what, "leak")) {
    char *keep = block();
    sink = block();                    /* the pointers are lost below */
    sink = malloc(3000);
    if (sink) sink[0] = 1;
    sink = NULL;
    free(keep);
  } else if (!strcmp(what, "double-free")) {
    char *p = block(), *q = launder(p);
    free(p);
    free(q);
  } else if (!strcmp(what, "uninit")) {
    char *p = launder(malloc(BLOCK));
    if (!p) return 2;
    if (p[5] == 'x') puts("x");
    free(p);
  } else {
    fprintf(stderr, "usage: %s use-after-free|past-end|next-block|leak|double-free|uninit\n", argv[0]);
    return 2;
  }
  return 0;
}
