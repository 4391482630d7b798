/* The hardened build (make HARDENED=1; README, "Hardened mode"), through
 * malloc and free: delayed reuse (a freed 48-byte block comes back only
 * after HAK_DELAY_MAX other frees of its class, and then at once), a
 * random carve order (every block of a fresh slab carved once, not in
 * address order, and in another order in another process), the guard page
 * after a Large block and at the end of a SuperSlab (a write there kills a
 * forked child with SIGSEGV), and a use-after-free write into a waiting
 * block caught at the next malloc of its class, or before: when it leaves
 * the delay, at malloc_trim, thread exit or process exit; a forged link
 * on a first-class heap's free list. The exploit program of issue 20 is
 * tests/test_hardened.sh. tests/run.sh runs this test in the hardened
 * build only. */
#include "testing.h"
#include "hakmem_internal.h"              /* HAK_DELAY_MAX, HAK_HOME_SHIFT, HAK_PAGE_MAX */

#include <malloc.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define KiB ((size_t)1024)
#define MiB (1024 * KiB)
/* 16-byte blocks: slabs of 64 KiB or two pages (class.c, HAK_SLAB_TARGET
 * and HAK_SLAB_MIN_PAGES), SuperSlabs of 2 MiB (HAK_SS_TARGET), the last
 * page of which is the guard. The page is the kernel's or HAKMEM_PAGE_SIZE's
 * (tests/test_pagesize.sh). */
#define SMALL        16u
#define SLAB_BYTES   (2 * page > 64 * KiB ? 2 * page : 64 * KiB)
#define SLAB_BLOCKS  ((unsigned)(SLAB_BYTES / SMALL))
#define SLAB_BLOCKS_MOST (2 * HAK_PAGE_MAX / SMALL)
#define SS_BYTES     (2 * MiB)
static size_t page;

static void *launder(void *p) { __asm__ volatile("" : "+r"(p)); return p; }
static uintptr_t region_base(const void *p) { return (uintptr_t)p >> HAK_HOME_SHIFT << HAK_HOME_SHIFT; }   /* a home region */

/* A freed block waits for HAK_DELAY_MAX other frees of its class (48 bytes:
 * the full depth), then is the next one handed out. */
static void test_delayed_reuse(void) {
  void *p = malloc(48);
  CHECK(p != NULL);
  free(launder(p));
  for (unsigned i = 0; i < HAK_DELAY_MAX; i++) {   /* i other frees so far */
    void *q = malloc(48);
    CHECKF(q != p, "the freed block came back after %u other frees", i);
    free(q);
  }
  CHECKF(malloc(48) == p, "after %u other frees the freed block is not the next handed out", HAK_DELAY_MAX);
}

/* Indices in their slab of the first n 16-byte blocks malloc hands out. */
static void first_blocks(unsigned *index, unsigned n) {
  for (unsigned i = 0; i < n; i++) {
    uintptr_t a = (uintptr_t)malloc(SMALL);
    index[i] = (unsigned)((a - region_base((void *)a)) % SLAB_BYTES / SMALL);
  }
}

/* Every block of the first slab once, not in address order. */
static void test_carve_once(void) {
  const unsigned N = 3 * SLAB_BLOCKS;
  static void *blocks[3 * SLAB_BLOCKS_MOST];
  static unsigned char seen[SLAB_BLOCKS_MOST];
  unsigned in_first = 0, adjacent = 0, twice = 0;
  for (unsigned i = 0; i < N; i++) blocks[i] = malloc(SMALL);
  uintptr_t first = region_base(blocks[0]);          /* slab 0 of the class's home region */
  unsigned prev = 0;
  for (unsigned i = 0; i < N; i++) {
    uintptr_t a = (uintptr_t)blocks[i];
    if (a - first >= SLAB_BYTES) continue;
    CHECKF((a - first) % SMALL == 0, "%p is not a block start", blocks[i]);
    unsigned k = (unsigned)((a - first) / SMALL);
    twice += seen[k]++ != 0;
    adjacent += in_first && (k == prev + 1 || k + 1 == prev);
    prev = k;
    in_first++;
  }
  CHECKF(in_first == SLAB_BLOCKS && twice == 0, "first slab: %u of %u blocks handed out, %u twice",
         in_first, (unsigned)SLAB_BLOCKS, twice);
  CHECKF(adjacent < SLAB_BLOCKS / 4, "%u of %u blocks handed out right after a neighbour", adjacent, in_first);
  for (unsigned i = 0; i < N; i++) free(blocks[i]);
}

/* Two processes carve a fresh slab in different orders (the child mode
 * "order" prints its first blocks' indices). */
static void exec_order(void *self) {
  char *const argv[] = { self, "order", NULL };
  test_exec_self(argv, NULL);
}

static void carve_order_of_child(const char *self, char *out, size_t size) {
  int status = test_in_child(exec_order, (void *)self, STDOUT_FILENO, out, size);
  CHECKF(WIFEXITED(status) && WEXITSTATUS(status) == 0 && out[0], "order child: status %d", status);
}

static int print_order(void) {
  unsigned index[16];
  first_blocks(index, 16);                          /* before stdio allocates */
  for (unsigned i = 0; i < 16; i++) printf("%u ", index[i]);
  printf("\n");
  return 0;
}

static void test_carve_differs(const char *self) {
  char a[256], b[256];
  carve_order_of_child(self, a, sizeof a);
  carve_order_of_child(self, b, sizeof b);
  CHECKF(strcmp(a, b) != 0, "two processes carved in the same order: %s", a);
}

/* write(p) in a forked child: how it ended (a signal number, or 0: it lived). */
static int write_in_child(volatile unsigned char *p) {
  pid_t pid = fork();
  if (pid == 0) {
    *p = 1;
    _exit(0);
  }
  int status;
  waitpid(pid, &status, 0);
  return WIFSIGNALED(status) ? WTERMSIG(status) : 0;
}

/* The byte after a Large block's usable size faults, the last one does not;
 * and so again for a block cut from a freed block's range. */
static void test_large_guard(void) {
  for (int round = 0; round < 2; round++) {
    size_t n = round ? 2 * MiB + 100 : 3 * MiB;
    unsigned char *p = malloc(n);
    CHECK(p != NULL);
    if (!p) return;
    size_t usable = malloc_usable_size(p);
    CHECKF(usable >= n && usable - n < page, "usable size %zu of %zu bytes", usable, n);
    memset(p, 0x5A, usable);
    CHECKF(write_in_child(p + usable - 1) == 0, "the last byte of a Large block faults");
    CHECKF(write_in_child(p + usable) == SIGSEGV, "a write past a Large block did not fault");
    free(p);
  }
}

/* The last page of the first SuperSlab of the 16-byte class faults. */
static void test_superslab_guard(void) {
  void *p = malloc(SMALL);
  uintptr_t base = region_base(p);
  CHECKF(write_in_child((unsigned char *)(base + SS_BYTES - page - 1)) == 0,
         "the byte before a SuperSlab's guard page faults");
  CHECKF(write_in_child((unsigned char *)(base + SS_BYTES - 1)) == SIGSEGV,
         "a SuperSlab's last page is not a guard page");
  free(p);
}

/* A write into a freed block while its reuse is delayed: abort with one
 * line naming the block and its class, at the first of these that comes:
 * the next malloc of its class, the free that takes it out of the ring,
 * malloc_trim, its thread's exit, process exit. Each in a forked child,
 * which exits with status 3 if it got past the point. */
enum catch_point { AT_MALLOC, AT_LEAVING, AT_TRIM, AT_THREAD_EXIT, AT_EXIT };
static const char *const catch_name[] = {"the next malloc", "leaving the ring", "malloc_trim",
                                         "thread exit", "process exit"};

static void *freed_and_written(void) {
  void **p = malloc(48);
  free(launder(p));
  ((void **volatile)p)[0] = (void *)0x1234;
  return p;
}

static void *thread_write(void *arg) { (void)arg; freed_and_written(); return NULL; }

static void write_then(void *point) {
  enum catch_point at = *(const enum catch_point *)point;
  void *held[HAK_DELAY_MAX];
  for (unsigned i = 0; i < HAK_DELAY_MAX; i++) held[i] = malloc(48);
  if (at == AT_THREAD_EXIT) {
    pthread_t t;
    if (pthread_create(&t, NULL, thread_write, NULL) == 0) pthread_join(t, NULL);
    _exit(3);
  }
  freed_and_written();
  switch (at) {
  case AT_MALLOC: launder(malloc(48)); break;
  case AT_LEAVING: for (unsigned i = 0; i < HAK_DELAY_MAX; i++) free(held[i]); break;
  case AT_TRIM: malloc_trim(0); break;
  case AT_EXIT: exit(0);
  case AT_THREAD_EXIT: break;
  }
  _exit(3);
}

static void test_written_after_free(enum catch_point at) {
  char err[512];
  int status = test_in_child(write_then, &at, STDERR_FILENO, err, sizeof err);
  CHECKF(WIFSIGNALED(status) && WTERMSIG(status) == SIGABRT, "%s: status %d", catch_name[at], status);
  CHECKF(strstr(err, "hakmem: free block 0x") == err && strstr(err, "(class ") &&
         strstr(err, "48-byte") && strstr(err, "written after free") && strchr(err, '\n') == err + strlen(err) - 1,
         "%s: message: %s", catch_name[at], err);
}

/* A first-class heap's free list is encoded too: issue 20's attack on
 * hak_heap_malloc (two blocks freed, the last one's first word pointed at a
 * static buffer) aborts at the pop with one line; the buffer never comes
 * out. In a forked child. */
static char target[64];
static void heap_attack(void *unused) {
  (void)unused;
  hak_heap_t *h = hak_heap_new();
  void **a = hak_heap_malloc(h, 48), **b = hak_heap_malloc(h, 48);
  free(a);
  free(b);
  ((void **)launder(b))[0] = target;
  for (int i = 0; i < 3; i++)
    if (hak_heap_malloc(h, 48) == (void *)target) _exit(4);   /* handed out: exploited */
}

static void test_heap_link(void) {
  char err[512];
  int status = test_in_child(heap_attack, NULL, STDERR_FILENO, err, sizeof err);
  CHECKF(WIFSIGNALED(status) && WTERMSIG(status) == SIGABRT, "heap link: status %d", status);
  CHECKF(strstr(err, "hakmem: corrupted free list: the link of free block 0x") == err &&
         strstr(err, "first-class heap's 48-byte blocks") && strchr(err, '\n') == err + strlen(err) - 1,
         "heap link: message: %s", err);
}

int main(int argc, char **argv) {
  page = test_page();
  if (argc > 1 && strcmp(argv[1], "order") == 0) return print_order();
  test_delayed_reuse();
  test_carve_once();
  test_carve_differs(argv[0]);
  test_large_guard();
  test_superslab_guard();
  for (enum catch_point at = AT_MALLOC; at <= AT_EXIT; at++) test_written_after_free(at);
  test_heap_link();
  TEST_END();
}
