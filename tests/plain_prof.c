/* The heap profiler's test program (tests/test_prof.py runs it under
 * HAKMEM_PROF, preloaded or linked). Two allocation sites: site_big
 * allocates 100 MiB (64 B and 4 KiB blocks and two of 5 MiB), site_small
 * 10 MiB (the same mix, a tenth: two blocks of 512 KiB). Modes (argv[1]):
 *   live    both stay live until exit
 *   leak    site_big's blocks are freed, site_small's leak
 *   signal  both live; raise(SIGUSR2), then one more allocation (the dump
 *           is written by the next slow path), then exit
 *   dump    both live; hak_prof_dump(argv[2]) (found with dlsym), then exit
 *   churn   both live, then site_churn allocates and frees 64 MiB of 64 B
 *           blocks one at a time (the same block again and again)
 * It never links hakmem: the pointer arrays are static. */
#include <dlfcn.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MIB (1024u * 1024)
#define MAX_BLOCKS (1u << 21)

static void *big_blocks[MAX_BLOCKS], *small_blocks[MAX_BLOCKS / 8];
static size_t big_n, small_n;

/* bytes in blocks: 60% as 64 B blocks, 30% as 4 KiB, 10% as two blocks of
 * bytes / 20; the blocks are written so they are real. With
 * -DPLAIN_PROF_INLINE=1 it is inlined into both sites (as clang does at
 * -O1): the profile must name it and the site that holds it. */
#if PLAIN_PROF_INLINE
__attribute__((always_inline)) inline
#endif
static size_t allocate_mix(void **out, size_t bytes) {
  size_t n = 0, large = bytes / 10, page = bytes * 3 / 10, small = bytes - large - page;
  for (size_t got = 0; got < small; got += 64) { out[n] = malloc(64); memset(out[n++], 1, 64); }
  for (size_t got = 0; got < page; got += 4096) { out[n] = malloc(4096); memset(out[n++], 2, 64); }
  for (size_t got = 0; got < large; got += bytes / 20) { out[n] = malloc(bytes / 20); memset(out[n++], 3, 64); }
  return n;
}

__attribute__((noinline)) void site_big(void) { big_n = allocate_mix(big_blocks, 100 * (size_t)MIB); }
__attribute__((noinline)) void site_small(void) { small_n = allocate_mix(small_blocks, 10 * (size_t)MIB); }
__attribute__((noinline)) void site_churn(void) {
  for (size_t got = 0; got < 64 * (size_t)MIB; got += 64) {
    char *volatile p = malloc(64);
    p[0] = 1;
    free(p);
  }
}

int main(int argc, char **argv) {
  const char *mode = argc > 1 ? argv[1] : "live";
  site_big();
  site_small();
  if (!strcmp(mode, "leak")) {
    for (size_t i = 0; i < big_n; i++) free(big_blocks[i]);
  } else if (!strcmp(mode, "signal")) {
    raise(SIGUSR2);
    void *volatile p = malloc(3 * MIB);        /* a slow path: the dump is written here */
    free(p);
  } else if (!strcmp(mode, "churn")) {
    site_churn();
  } else if (!strcmp(mode, "dump")) {
    int (*dump)(const char *) = (int (*)(const char *))dlsym(RTLD_DEFAULT, "hak_prof_dump");
    if (!dump || argc < 3) { fprintf(stderr, "no hak_prof_dump\n"); return 2; }
    if (dump(argv[2])) { perror("hak_prof_dump"); return 1; }
  }
  printf("ok %zu %zu\n", big_n, small_n);
  return 0;
}
