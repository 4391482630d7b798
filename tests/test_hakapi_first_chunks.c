/* First chunks (region.c): a slab class's first blocks come from its chunk
 * in the first-chunk area, beside the other classes', for the first heap
 * that refills; the slow free finds their class, puts them on the list,
 * catches a double free and an interior pointer; spilled ones are handed
 * out again, never two live at one address; other threads' refills and a
 * retired class's never come from a chunk; a carve stays in one OS page;
 * HAKMEM_FIRST_CHUNKS=0 turns them off. The hardened build has none. */
#include "testing.h"
#include "hakmem.h"
#include "hakmem_internal.h"
#include <pthread.h>
#include <signal.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static bool in_area(const void *p) { return hak_chunk_holds((uintptr_t)p); }

/* The first block of every slab class with a chunk is a block of it, of its class,
 * with the class's usable size; freed, it is marked free and comes back
 * from the list. */
static void check_first_blocks(void) {
  for (unsigned c = 0; c < HAK_SPAN_FIRST; c++) {
    if (!_hak_class_serves(c)) continue;                /* an idle split class */
    size_t n = _hak_classes[c].size;
    if (n > HAK_MID_MAX) n = HAK_MID_MAX;
    void *p = hak_malloc(n);
    CHECKF(p != NULL, "C%u: malloc(%zu)", c, n);
    if (!p) continue;
    /* Every Tiny class has a chunk; with pages of 64 KiB the area's 1.25 MiB
     * may end before the largest classes. */
    CHECKF(in_area(p) || c >= HAK_NTINY, "C%u: first block %p not in the first-chunk area", c, p);
    if (!in_area(p)) { hak_free(p); continue; }
    CHECKF(hak_block_class(p) == (int)c, "C%u: the chunk says class %d", c, hak_block_class(p));
    CHECKF(_hak_region_chunk_class((uintptr_t)p + 8) == -1, "C%u: an interior address is a block", c);
    CHECK(hak_malloc_usable_size(p) == _hak_classes[c].size);
    memset(p, 0x5a, n);
    hak_free(p);
    CHECKF(((void **)p)[1] == HAK_FREE_KEY, "C%u: a freed chunk block is not marked free", c);
    void *q = hak_malloc(n);
    CHECKF(q == p, "C%u: the freed block %p did not come back first (%p)", c, p, q);
    hak_free(q);
  }
}

/* A carve writes each block it hands out, so it stays in the OS page where
 * it starts: a forked child that wants one block does not copy the
 * parent's next pages. First in the test: every class's chunk is whole.
 * Each class of 512 B and up (several blocks to a page at most) is asked
 * for 8 blocks from its fresh chunk; they come back to its stash. */
static void check_one_page_carve(void) {
  hak_free(hak_malloc(16));                           /* the heap, which the chunks serve */
  struct hak_heap *h = _hak_thread_tls.heap;
  const uintptr_t page = (uintptr_t)_hak_os_page;
  unsigned tried = 0;
  for (unsigned c = 0; c < HAK_SPAN_FIRST; c++) {
    if (_hak_classes[c].size < 512 || HAK_RACY_LOAD(_hak_region_chunk_spent[c])) continue;
    void *chain = NULL;
    unsigned got = _hak_region_chunk_take(h, c, 8, &chain);
    if (!got) continue;                               /* no chunk: past the area's end */
    tried++;
    void **b = chain, **tail = NULL;
    unsigned n = 0;
    for (; b; tail = b, b = hak_link_get(b), n++) {
      CHECKF((uintptr_t)b / page == (uintptr_t)chain / page, "C%u: block %u of a carve at %p, its first at %p",
             c, n, (void *)b, chain);
      CHECKF(n == 0 || (uintptr_t)b == (uintptr_t)tail + _hak_classes[c].size, "C%u: carve not in order", c);
    }
    CHECKF(n == got, "C%u: %u blocks on the chain, %u said", c, n, got);
    CHECKF(got == (unsigned)((page - (uintptr_t)chain % page + _hak_classes[c].size - 1) / _hak_classes[c].size) ||
           got == 8, "C%u: %u blocks of %u B carved from a fresh chunk (page %zu)", c, got, _hak_classes[c].size,
           (size_t)page);
    _hak_region_chunk_return(c, chain, tail, got);
  }
  CHECKF(tried > 0, "no class of 512 B or more has a chunk");
}

/* More blocks than a chunk holds, freed, then as many again: every live
 * block distinct, the chunk's blocks handed out again (from the lists and
 * the stash), and the rest from the class's own region. */
static int by_address(const void *a, const void *b) {
  uintptr_t x = *(const uintptr_t *)a, y = *(const uintptr_t *)b;
  return x < y ? -1 : x > y;
}

static void check_spill_and_reuse(void) {
  enum { N = 3000 };
  static void *p[N], *q[N];
  for (int i = 0; i < N; i++) { p[i] = hak_malloc(64); CHECK(p[i] != NULL); memset(p[i], 1, 64); }
  size_t first = 0;
  for (int i = 0; i < N; i++) first += in_area(p[i]);
  CHECKF(first > 0 && first < N, "%zu of %d blocks of 64 B in the area", first, N);
  for (int i = 0; i < N; i++) hak_free(p[i]);          /* the lists spill: the stash takes the chunk's */
  for (int i = 0; i < N; i++) { q[i] = hak_malloc(64); CHECK(q[i] != NULL); memset(q[i], 2, 64); }
  size_t again = 0;
  for (int i = 0; i < N; i++) again += in_area(q[i]);
  CHECKF(again > 0, "no chunk block handed out again");
  qsort(q, N, sizeof *q, by_address);
  for (int i = 1; i < N; i++) CHECKF(q[i] != q[i - 1], "two live blocks at %p", q[i]);
  for (int i = 0; i < N; i++) hak_free(q[i]);
}

/* A double free and an interior pointer of a chunk block: a diagnostic and
 * abort (the INVALID_FREE default), in a child. */
static void check_bad_frees(void) {
  for (int kind = 0; kind < 2; kind++) {
    pid_t pid = fork();
    if (pid == 0) {
      alarm(10);
      char *p = hak_malloc(32);
      if (!in_area(p)) _exit(3);
      if (kind == 0) { hak_free(p); hak_free(p); }
      else hak_free(p + 16);
      _exit(0);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    CHECKF(WIFSIGNALED(status) && WTERMSIG(status) == SIGABRT, "%s of a chunk block: status %#x",
           kind ? "an interior free" : "a double free", status);
  }
}

/* Another thread's blocks never come from a chunk; a chunk block it frees
 * is a block like any other. */
static void *other_thread(void *arg) {
  void **handed = arg;
  hak_free(*handed);
  void *mine[64];
  bool any = false;
  for (int i = 0; i < 64; i++) { mine[i] = hak_malloc(48); any |= in_area(mine[i]); }
  for (int i = 0; i < 64; i++) hak_free(mine[i]);
  *handed = any ? NULL : arg;
  return NULL;
}

static void check_one_heap(void) {
  void *handed = hak_malloc(48);
  CHECK(in_area(handed));
  pthread_t t;
  CHECK(pthread_create(&t, NULL, other_thread, &handed) == 0);
  pthread_join(t, NULL);
  CHECKF(handed != NULL, "another thread got a chunk block");
}

/* A class that keeps freeing its chunk's blocks retires the chunk: after
 * HAK_CHUNK_FREES slow frees, its blocks come from its region, and a
 * retired block is never handed out again. */
static void check_retire(void) {
  const size_t n = 1024;
  void *p = NULL;
  for (unsigned i = 0; i < 4 * HAK_CHUNK_FREES && (!p || in_area(p)); i++) {
    p = hak_malloc(n);
    CHECK(p != NULL);
    *(volatile char *)p = 1;
    if (!in_area(p)) break;
    hak_free(p);
  }
  CHECKF(p && !in_area(p), "1 KiB blocks still from the chunk after %u frees", 4 * HAK_CHUNK_FREES);
  enum { N = 200 };
  void *q[N];
  size_t back = 0;
  for (int i = 0; i < N; i++) { q[i] = hak_malloc(n); back += in_area(q[i]); }
  CHECKF(back == 0, "%zu blocks of a retired chunk handed out again", back);
  for (int i = 0; i < N; i++) hak_free(q[i]);
  hak_free(p);
}

/* In a child, after a fork, the chunks go on serving and taking frees. */
static void check_fork(void) {
  pid_t pid = fork();
  if (pid == 0) {
    void *p = hak_malloc(96);
    bool ok = p && in_area(p);
    hak_free(p);
    _exit(ok && hak_malloc(96) == p ? 0 : 1);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  CHECKF(WIFEXITED(status) && WEXITSTATUS(status) == 0, "a forked child's chunk block: status %#x", status);
}

int main(int argc, char **argv) {
  (void)argc;
  if (HAK_HARDENED) {
    void *p = hak_malloc(64);
    CHECKF(!in_area(p), "a chunk block in the hardened build");
    hak_free(p);
    TEST_END();
  }
  if (argc > 1 && strcmp(argv[1], "off") == 0) {
    bool any = false;
    for (int i = 0; i < 64; i++) { void *p = hak_malloc((size_t)(i + 1) * 16); any |= in_area(p); hak_free(p); }
    CHECKF(!any, "a chunk block with HAKMEM_FIRST_CHUNKS=0");
    TEST_END();
  }
  check_one_page_carve();
  check_first_blocks();
  check_spill_and_reuse();
  check_bad_frees();
  check_one_heap();
  check_retire();
  check_fork();
  pid_t pid = fork();
  if (pid == 0) {
    char *args[] = { argv[0], "off", NULL };
    setenv("HAKMEM_FIRST_CHUNKS", "0", 1);
    test_exec_self(args, NULL);
    _exit(99);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  CHECKF(WIFEXITED(status) && WEXITSTATUS(status) == 0, "with HAKMEM_FIRST_CHUNKS=0: status %#x", status);
  TEST_END();
}
