/* The L2 / L2.5 rings (the thread front's lists of the mid classes): LIFO
 * order, capacities that start small and grow to the pool's or the class's
 * run-time cap (clamped to the build's), lists used one way only (Tiny
 * too) kept small, the thread's byte budget, spills
 * of half when full, refills of a batch when empty, and mid blocks freed by
 * another thread, and the lists of a class the thread stops using given back
 * after a purge delay. Each configuration runs in a child started with its environment
 * (options are read once, at start-up). */
#include "testing.h"
#include "hakmem_internal.h"

#include <pthread.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define KiB 1024u

/* Blocks in the ring of class c: its current capacity less its credit. */
static unsigned ring_len(unsigned c) {
  unsigned len = _hak_thread_tls.heap->cap[c] - (unsigned)HAK_CREDIT(c);
  unsigned walked = 0;
  for (void **b = HAK_LIST(c); b; b = b[0]) walked++;
  CHECKF(walked == len, "C%u: %u blocks in the list, capacity less credit says %u", c, walked, len);
  return len;
}

/* Allocates and frees K blocks: the ring grows to its capacity, holds at
 * most that, every overflow beyond it spills (counted), allocation pops the
 * last block freed, and an empty ring refills with one batch. */
static void check_push_pop(size_t n, unsigned want_cap) {
  enum { K = 200 };
  static void *blocks[K];
  unsigned c = _hak_class_of_size(n);
  unsigned cap = _hak_front_max_cap(c);
  CHECKF(cap == want_cap, "%zu B: cap %u, want %u", n, cap, want_cap);
  for (int i = 0; i < K; i++) blocks[i] = hak_malloc(n);   /* the list used both ways */
  for (int i = 0; i < K; i++) hak_free(blocks[i]);
  while (ring_len(c)) { void *p = hak_malloc(n); CHECK(p != NULL); }
  for (int i = 0; i < K; i++) blocks[i] = hak_malloc(n);
  CHECKF(_hak_thread_tls.heap->cap[c] == cap, "%zu B: after %d mallocs the ring holds %u, want %u", n, K,
         _hak_thread_tls.heap->cap[c], cap);
  while (ring_len(c)) { void *p = hak_malloc(n); CHECK(p != NULL); }
  unsigned spills = (unsigned)_hak_thread_tls.heap->stats.spills[c];
  for (int i = 0; i < K; i++) { memset(blocks[i], i, n); hak_free(blocks[i]); }
  unsigned len = ring_len(c);
  CHECKF(len <= cap && len > 0, "%zu B: %u blocks in a ring of %u", n, len, cap);
  /* Every overflow spills cap - cap/2 blocks, so K frees into an empty ring
   * spill this often: */
  unsigned want_spills = K > cap ? (K - cap + (cap - cap / 2) - 1) / (cap - cap / 2) : 0;
  CHECKF(_hak_thread_tls.heap->stats.spills[c] - spills == want_spills, "%zu B: %u spills, want %u", n,
         (unsigned)(_hak_thread_tls.heap->stats.spills[c] - spills), want_spills);
  void *again = hak_malloc(n);
  CHECKF(again == blocks[K - 1], "%zu B: ring is not LIFO", n);
  hak_free(again);
  while (ring_len(c)) { void *p = hak_malloc(n); CHECK(p != NULL); }
  uint64_t misses = _hak_thread_tls.heap->stats.misses[c];
  void *p = hak_malloc(n);                       /* empty: one refill */
  CHECK(p != NULL && _hak_thread_tls.heap->stats.misses[c] == misses + 1);
  unsigned batch = 256 * KiB / _hak_classes[c].size;
  if (batch > cap / 2) batch = cap / 2;
  if (batch < 1) batch = 1;
  /* A refill takes the batch, or a slab's whole free list when that fits
   * the capacity (no walk over blocks another thread may have freed), or
   * fewer when its slab ran out: it does not go on to walk the next one's
   * list behind them (the slab is then no longer the current one). */
  unsigned room = cap > batch ? cap : batch;
  CHECKF(ring_len(c) + 1 <= room, "%zu B: refill left %u in the ring, want at most %u", n, ring_len(c), room - 1);
  CHECKF(ring_len(c) + 1 >= batch || _hak_thread_tls.heap->cur[c] == NULL,
         "%zu B: refill left %u in the ring, want %u or its slab used up", n, ring_len(c), batch - 1);
  hak_free(p);
}

/* A list used one way only stops short: a producer's, which only runs
 * empty, at HAK_ONE_WAY_CAP blocks; a consumer's, which only overflows, at
 * HAK_FREE_ONLY_CAP, spilling all it holds. Used both ways, it grows to the
 * class's cap. */
enum { ONE_WAY_N = 1000 };
static void *consume(void *arg) {
  void **blocks = arg;
  unsigned c = _hak_class_of_size(256);
  unsigned whole_spills = 0;
  for (int i = 0; i < ONE_WAY_N; i++) {
    unsigned before = _hak_thread_tls.heap ? ring_len(c) : 0;    /* no heap before its first free */
    hak_free(blocks[i]);
    CHECKF(ring_len(c) <= HAK_FREE_ONLY_CAP, "consumer: %u blocks held", ring_len(c));
    if (before == HAK_FREE_ONLY_CAP) {         /* full at its cap: spilled whole, then took the block */
      CHECKF(ring_len(c) == 1, "consumer: %u blocks after a spill, want 1", ring_len(c));
      whole_spills++;
    }
  }
  CHECK(whole_spills > 0);
  CHECKF(_hak_thread_tls.heap->cap[c] == HAK_FREE_ONLY_CAP, "consumer: capacity %u, want %u", _hak_thread_tls.heap->cap[c],
         HAK_FREE_ONLY_CAP);
  return NULL;
}

static void check_one_way(void) {
  static void *blocks[ONE_WAY_N];
  unsigned c = _hak_class_of_size(256);
  CHECK(_hak_front_max_cap(c) > 2 * HAK_ONE_WAY_CAP);
  for (int i = 0; i < ONE_WAY_N; i++) blocks[i] = hak_malloc(256);
  CHECKF(_hak_thread_tls.heap->cap[c] == HAK_ONE_WAY_CAP, "producer: capacity %u, want %u", _hak_thread_tls.heap->cap[c],
         HAK_ONE_WAY_CAP);
  pthread_t t;
  CHECK(pthread_create(&t, NULL, consume, blocks) == 0 && pthread_join(t, NULL) == 0);
  for (int i = 0; i < ONE_WAY_N; i++) blocks[i] = hak_malloc(256);
  for (int i = 0; i < ONE_WAY_N; i++) hak_free(blocks[i]);   /* now both ways */
  CHECKF(_hak_thread_tls.heap->cap[c] == _hak_front_max_cap(c), "both ways: capacity %u, want %u", _hak_thread_tls.heap->cap[c],
         _hak_front_max_cap(c));
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
  long before = atomic_load(&_hak_stats_gauges.bytes_in_use);
  for (int round = 0; round < 20; round++) {
    void *blocks[64];
    for (int i = 0; i < 64; i++) { blocks[i] = hak_malloc(8 * KiB); memset(blocks[i], i, 8 * KiB); }
    pthread_t t;
    CHECK(pthread_create(&t, NULL, free_all, blocks) == 0 && pthread_join(t, NULL) == 0);
  }
  long grown = atomic_load(&_hak_stats_gauges.bytes_in_use) - before;   /* this thread's ring at most */
  CHECKF(grown <= (long)(POOL_L2_RING_CAP * 8 * KiB), "bytes in use grew by %ld after the other threads freed everything", grown);
}

/* A class's first refill takes half its start capacity (4 KiB of blocks). */
static void check_start(void) {
  unsigned c = _hak_class_of_size(512);
  void *p = hak_malloc(512);
  CHECKF(_hak_thread_tls.heap->cap[c] == 4096 / 512, "512 B: start capacity %u, want 8", _hak_thread_tls.heap->cap[c]);
  CHECKF(ring_len(c) == 4096 / 512 / 2 - 1, "512 B: first refill left %u in the list, want 3", ring_len(c));
  hak_free(p);
}

/* HAKMEM_THREAD_CACHE_KB=256: after freeing 3 MiB of mid blocks, the
 * thread's lists hold at most 256 KiB; the rest went back to the slabs. */
static void check_budget(void) {
  enum { N = 100 };
  static void *blocks[3][N];
  static const size_t sizes[3] = { 8 * KiB, 12 * KiB, 16 * KiB };
  long before = atomic_load(&_hak_stats_gauges.bytes_in_use);
  for (int k = 0; k < 3; k++)
    for (int i = 0; i < N; i++) { blocks[k][i] = hak_malloc(sizes[k]); memset(blocks[k][i], 1, sizes[k]); }
  for (int k = 0; k < 3; k++)
    for (int i = 0; i < N; i++) hak_free(blocks[k][i]);
  size_t held = 0;
  for (unsigned c = 0; c < HAK_NCLS; c++) held += (size_t)ring_len(c) * _hak_classes[c].size;
  CHECKF(_hak_thread_tls.heap->cap_bytes <= 256 * KiB, "capacities add up to %zu B", _hak_thread_tls.heap->cap_bytes);
  CHECKF(held <= 256 * KiB, "the lists hold %zu B", held);
  long grown = atomic_load(&_hak_stats_gauges.bytes_in_use) - before;
  CHECKF(grown <= (long)(256 * KiB), "bytes in use grew by %ld", grown);
}

static void sleep_ms(long ms) {
  struct timespec ts = { 0, ms * 1000000 };
  nanosleep(&ts, NULL);
}

/* A class the thread stops using gives its list back (blocks and capacity)
 * at the thread's slow paths, once a purge delay (20 ms here) passed with
 * the list untouched; a class in use keeps its list. */
static void check_idle_release(void) {
  enum { N = 64, M = 300 };
  static void *a[N], *b[M];
  unsigned ca = _hak_class_of_size(256), cb = _hak_class_of_size(1000);
  for (int i = 0; i < N; i++) a[i] = hak_malloc(256);
  for (int i = 0; i < N; i++) hak_free(a[i]);
  CHECK(HAK_LIST(ca) != NULL && _hak_thread_tls.heap->cap[ca] > 0);
  uint64_t before = _hak_thread_tls.heap->stats.idle_releases;
  for (int look = 0; look < 4; look++) {
    sleep_ms(30);
    for (int round = 0; round < 40; round++) {   /* slow paths of class cb only */
      for (int i = 0; i < M; i++) b[i] = hak_malloc(1000 + (size_t)(i % 2) * 8);
      for (int i = 0; i < M; i++) hak_free(b[(i * 7) % M]);
    }
  }
  CHECKF(HAK_LIST(ca) == NULL && _hak_thread_tls.heap->cap[ca] == 0 && HAK_CREDIT(ca) == 0,
         "the unused class kept %u blocks of capacity", _hak_thread_tls.heap->cap[ca]);
  CHECK(_hak_thread_tls.heap->stats.idle_releases > before);
  CHECKF(_hak_thread_tls.heap->cap[cb] > 0, "the class in use lost its list");
}

/* The default capacity of a span class's ring (40 KiB up): the pool's, within
 * 2 blocks and HAKMEM_SPAN_CACHE_KB more. */
static unsigned span_cap(size_t n) {
  size_t by_bytes = 2 + (size_t)_hak_options_get(HAK_OPT_SPAN_CACHE_KB) * KiB / _hak_classes[_hak_class_of_size(n)].size;
  return by_bytes < POOL_L25_RING_CAP ? (unsigned)by_bytes : POOL_L25_RING_CAP;
}

/* HAKMEM_SPAN_CACHE_KB=512: after freeing 100 blocks each of three span
 * classes, the thread's span lists hold 2 blocks each and at most 512 KiB
 * more; the rest went back to the span heap. */
static void check_span_budget(void) {
  enum { N = 100 };
  static void *blocks[3][N];
  static const size_t sizes[3] = { 64 * KiB, 100 * KiB, 200 * KiB };
  size_t starts = 0;
  for (int k = 0; k < 3; k++) starts += 2 * (size_t)_hak_classes[_hak_class_of_size(sizes[k])].size;
  for (int round = 0; round < 2; round++) {       /* the lists used both ways: they grow */
    for (int k = 0; k < 3; k++)
      for (int i = 0; i < N; i++) { blocks[k][i] = hak_malloc(sizes[k]); memset(blocks[k][i], k, sizes[k]); }
    for (int k = 0; k < 3; k++)
      for (int i = 0; i < N; i++) hak_free(blocks[k][i]);
  }
  size_t held = 0;
  for (unsigned c = HAK_SPAN_FIRST; c < HAK_NCLS; c++) held += (size_t)ring_len(c) * _hak_classes[c].size;
  CHECKF(_hak_thread_tls.heap->span_cap_bytes <= 512 * KiB, "span capacities beyond the start add up to %zu B",
         _hak_thread_tls.heap->span_cap_bytes);
  CHECKF(held <= starts + 512 * KiB, "the span lists hold %zu B", held);
  CHECKF(held > starts, "the span lists did not grow past their start (%zu B)", held);
}

static int run(const char *mode) {
  hak_free(hak_malloc(8 * KiB));                  /* the heap exists from here */
  if (!strcmp(mode, "default")) {
    check_start();
    check_push_pop(8 * KiB, POOL_L2_RING_CAP);
    check_push_pop(100 * KiB, span_cap(100 * KiB));
    check_push_pop(1024 * KiB, 2);                /* 2, and no more within 1 MiB of span blocks */
    check_cross_thread();
    check_one_way();
  } else if (!strcmp(mode, "cap1")) {
    check_push_pop(8 * KiB, 1);
    check_push_pop(100 * KiB, 1);
  } else if (!strcmp(mode, "budget")) {
    check_budget();
  } else if (!strcmp(mode, "span-budget")) {
    check_span_budget();
  } else if (!strcmp(mode, "idle")) {
    check_idle_release();
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

/* Runs mode in a child with env1 and env2 (env2 may be NULL). Lists stay
 * put however slowly the build runs (no idle release) unless env1 or env2
 * sets the purge delay. */
static void in_child(const char *mode, const char *env1, const char *env2) {
  pid_t pid = fork();
  if (pid == 0) {
    char *envp[4];
    int n = 0;
    envp[n++] = (char *)env1;
    if (env2) envp[n++] = (char *)env2;
    if (strncmp(env1, "HAKMEM_PURGE_DELAY_MS=", 22) && (!env2 || strncmp(env2, "HAKMEM_PURGE_DELAY_MS=", 22)))
      envp[n++] = "HAKMEM_PURGE_DELAY_MS=60000";
    envp[n] = NULL;
    char *argv[] = { "test_hakapi_rings", (char *)mode, NULL };
    test_exec_self(argv, envp);
    _exit(99);
  }
  int status;
  waitpid(pid, &status, 0);
  CHECKF(WIFEXITED(status) && WEXITSTATUS(status) == 0, "%s (%s %s) failed", mode, env1, env2 ? env2 : "");
}

int main(int argc, char **argv) {
  if (argc > 1) return run(argv[1]);
  in_child("default", "HAKMEM_THREAD_CACHE_KB=65536", NULL);   /* no budget limit here */
  in_child("cap1", "HAKMEM_L2_RING_CAP=1", "HAKMEM_L25_RING_CAP=1");
  in_child("clamped", "HAKMEM_L2_RING_CAP=100000", NULL);
  in_child("budget", "HAKMEM_THREAD_CACHE_KB=256", NULL);
  in_child("span-budget", "HAKMEM_SPAN_CACHE_KB=512", NULL);
  in_child("per-class", "HAKMEM_L2_RING_CAPS=4,8,0", "HAKMEM_L25_RING_CAPS=3");
  in_child("idle", "HAKMEM_PURGE_DELAY_MS=20", NULL);
  TEST_END();
}
