/* The L2 / L2.5 rings: LIFO order, capacity per pool and per class at run
 * time (clamped to the build's), spill of the older half when full, refill
 * of a batch when empty, and mid blocks freed by another
 * thread. Each configuration runs in a child started with its environment
 * (options are read once, at start-up). */
#include "testing.h"
#include "hakmem_internal.h"

#include <pthread.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define KiB 1024u

static struct hak_ring *ring_of(size_t n) {
  return &_hak_tls.heap->ring[_hak_class_of_size(n)];
}

/* Frees k blocks into an empty ring: it holds at most its capacity, every
 * overflow spills (counted), and allocation pops the last block freed. */
static void check_push_pop(size_t n, unsigned want_cap) {
  enum { K = 200 };
  static void *blocks[K];
  unsigned c = _hak_class_of_size(n);
  for (int i = 0; i < K; i++) blocks[i] = hak_malloc(n);
  struct hak_ring *r = ring_of(n);
  CHECKF(r->cap == want_cap, "%zu B: cap %u, want %u", n, r->cap, want_cap);
  for (int i = 0; i < K; i++) { memset(blocks[i], i, n); hak_free(blocks[i]); }
  CHECKF(r->top <= r->cap && r->top > 0, "%zu B: top %u cap %u", n, r->top, r->cap);
  CHECKF(_hak_tls.heap->stats.spills[c] > 0, "%zu B: no spill counted", n);
  void *again = hak_malloc(n);
  CHECKF(again == blocks[K - 1], "%zu B: ring is not LIFO", n);
  hak_free(again);
  while (r->top) { void *p = hak_malloc(n); CHECK(p != NULL); }
  uint64_t misses = _hak_tls.heap->stats.misses[c];
  void *p = hak_malloc(n);                       /* empty: one refill */
  CHECK(p != NULL && _hak_tls.heap->stats.misses[c] == misses + 1);
  unsigned batch = 256 * KiB / _hak_classes[c].size;
  if (batch > r->cap / 2) batch = r->cap / 2;
  if (batch < 1) batch = 1;
  CHECKF(r->top == batch - 1, "%zu B: refill left %u in the ring, want %u", n, r->top, batch - 1);
  hak_free(p);
}

static void *free_all(void *arg) {
  void **blocks = arg;
  for (int i = 0; i < 64; i++) {
    unsigned char *b = blocks[i];
    for (size_t j = 0; j < 8 * KiB; j += 512) CHECK(b[j] == (unsigned char)i);
    hak_free(b);
  }
  return NULL;
}

/* Mid blocks allocated here and freed by another thread come back. */
static void check_cross_thread(void) {
  long before = atomic_load(&_hak_gauges.bytes_in_use);
  for (int round = 0; round < 20; round++) {
    void *blocks[64];
    for (int i = 0; i < 64; i++) { blocks[i] = hak_malloc(8 * KiB); memset(blocks[i], i, 8 * KiB); }
    pthread_t t;
    CHECK(pthread_create(&t, NULL, free_all, blocks) == 0 && pthread_join(t, NULL) == 0);
  }
  long grown = atomic_load(&_hak_gauges.bytes_in_use) - before;   /* this thread's ring at most */
  CHECKF(grown <= (long)(POOL_L2_RING_CAP * 8 * KiB), "bytes in use grew by %ld after the other threads freed everything", grown);
}

static int run(const char *mode) {
  hak_free(hak_malloc(8 * KiB));                  /* the heap exists from here */
  if (!strcmp(mode, "default")) {
    check_push_pop(8 * KiB, POOL_L2_RING_CAP);
    check_push_pop(100 * KiB, POOL_L25_RING_CAP);
    check_push_pop(1024 * KiB, 2);                /* bounded to 2 MiB of blocks */
    check_cross_thread();
  } else if (!strcmp(mode, "cap1")) {
    check_push_pop(8 * KiB, 1);
    check_push_pop(100 * KiB, 1);
  } else if (!strcmp(mode, "clamped")) {
    check_push_pop(8 * KiB, POOL_L2_RING_CAP);
  } else if (!strcmp(mode, "per-class")) {
    check_push_pop(2560, 4);                      /* first L2 class */
    check_push_pop(3072, 8);
    check_push_pop(3584, POOL_L2_RING_CAP);       /* 0: the pool's */
    check_push_pop(65536, 3);                     /* first L2.5 class */
  }
  return test_failures != 0;
}

static void in_child(const char *mode, const char *env1, const char *env2) {
  pid_t pid = fork();
  if (pid == 0) {
    char *envp[] = { (char *)env1, (char *)env2, NULL };
    char *argv[] = { "test_hakapi_rings", (char *)mode, NULL };
    execve("/proc/self/exe", argv, envp);
    _exit(99);
  }
  int status;
  waitpid(pid, &status, 0);
  CHECKF(WIFEXITED(status) && WEXITSTATUS(status) == 0, "%s (%s %s) failed", mode, env1, env2 ? env2 : "");
}

int main(int argc, char **argv) {
  if (argc > 1) return run(argv[1]);
  in_child("default", "X=1", NULL);
  in_child("cap1", "HAKMEM_L2_RING_CAP=1", "HAKMEM_L25_RING_CAP=1");
  in_child("clamped", "HAKMEM_L2_RING_CAP=100000", NULL);
  in_child("per-class", "HAKMEM_L2_RING_CAPS=4,8,0", "HAKMEM_L25_RING_CAPS=3");
  TEST_END();
}
