/* front.c — the thread front of every class below Large (Tiny, L2 and
 * L2.5): per thread and class, a LIFO list of free blocks with a capacity
 * (the hot part lives in _hak_thread_tls, popped and pushed by the inline fast
 * paths in hakmem_internal.h). This file is its slow path: an empty list
 * refills from the slabs (refill.c) or the span heap (span.c) in one batch, a full one
 * spills half back in one batch, and thread exit returns everything.
 *
 * Capacities start at 0; the first refill of a class sets HAK_START_BYTES of
 * blocks, and the capacity doubles each time the list runs empty under
 * malloc and each time a full list takes a free, up to the class's maximum —
 * Tiny classes HAKMEM_TINY_CACHE_KB of blocks (64 to 1024), L2 / L2.5
 * classes their pool's ring capacity (below) — while all the thread's
 * capacities add up to at most HAKMEM_THREAD_CACHE_KB of blocks (the span
 * classes' capacities beyond 2 blocks each, to HAKMEM_SPAN_CACHE_KB). A list
 * that has only run empty, or only overflowed (a producer's, a consumer's),
 * stops at HAK_ONE_WAY_CAP blocks (one that only takes frees at
 * HAK_FREE_ONLY_CAP, and spills whole). So a class a thread uses little never
 * carves more than a few KiB of fresh blocks, and a thread that stops
 * allocating holds at most its budget. Beyond HAK_SHARE_THREADS live
 * threads, the budgets of that many threads are shared by all (grow). */
#include "hakmem_internal.h"

#include <errno.h>

static uint16_t max_cap[HAK_NCLS], start_cap[HAK_NCLS];
static size_t budget;                     /* bytes, from HAKMEM_THREAD_CACHE_KB */
static size_t span_budget;                /* bytes, from HAKMEM_SPAN_CACHE_KB   */

static void delay_init(void);             /* delayed reuse (hardened build), below */
static void delay_heap_init(struct hak_heap *h);

static bool spans(unsigned c) { return c >= HAK_SPAN_FIRST; }   /* a class of the span heap */

/* With HAKMEM_PROF set, every list's credit is kept HAK_PROF_CREDIT_BIAS
 * below its value (credit()), so no push of the inline free finds credit:
 * every free comes to _hak_front_free_slow, which charges the block to the
 * profiler as it goes on the list (prof.c), and the inline malloc only pops
 * blocks that were charged. 0 without profiling: the lists as always. */
static int64_t credit_bias;
static int64_t credit(unsigned c) { return HAK_CREDIT(c) + credit_bias; }

/* Bytes of a capacity of cap blocks of class c that count against the span
 * lists' budget: a span class's blocks beyond its start capacity. */
static size_t span_extra(unsigned c, unsigned cap) {
  return spans(c) && cap > start_cap[c] ? (size_t)(cap - start_cap[c]) * _hak_classes[c].size : 0;
}

#define HAK_TINY_CAP_MIN 64u
#define HAK_TINY_CAP_MAX 1024u
#define HAK_START_BYTES  4096u          /* a list starts with this capacity ... */
#define HAK_START_MIN    2u             /* ... and at least 2 blocks            */
#define HAK_REFILL_BYTES (256u * 1024)  /* a refill batch holds at most this    */

static unsigned tiny_cap(unsigned c) {
  unsigned cap = (unsigned)(_hak_options_get(HAK_OPT_TINY_CACHE_KB) * 1024 / _hak_classes[c].size);
  if (cap < HAK_TINY_CAP_MIN) cap = HAK_TINY_CAP_MIN;
  if (cap > HAK_TINY_CAP_MAX) cap = HAK_TINY_CAP_MAX;
  return cap;
}

/* ---- ring capacities: the L2 and L2.5 lists' maximums -------------------------
 * POOL_L2_RING_CAP / POOL_L25_RING_CAP at build time, lowered per pool
 * (HAKMEM_L2_RING_CAP, HAKMEM_L25_RING_CAP) or per class
 * (HAKMEM_L2_RING_CAPS=24,32,...), and never above HAK_RING_MAX_BYTES of
 * blocks (a span class: 2, and HAKMEM_SPAN_CACHE_KB for all of them
 * together). (Adaptive capacities were measured and dropped: see
 * docs/experiments.md.) */
#define HAK_RING_MAX_BYTES   (2048u * 1024)
#define HAK_RING_MIN_CAP     2u

static unsigned build_cap(unsigned c) {
  return _hak_classes[c].tier == HAK_TIER_L2 ? POOL_L2_RING_CAP : POOL_L25_RING_CAP;
}

/* The capacity of class c's ring: per-class list, else the pool's option;
 * at most the build capacity and HAK_RING_MAX_BYTES of blocks (a span
 * class: 2 blocks and HAKMEM_SPAN_CACHE_KB more), but 2 blocks if the pool
 * allows that. */
static unsigned ring_cap(unsigned c) {
  bool l2 = _hak_classes[c].tier == HAK_TIER_L2;
  unsigned first = l2 ? HAK_NTINY : HAK_NTINY + HAK_NL2;
  unsigned cap = _hak_options_list(l2 ? HAK_OPT_L2_RING_CAPS : HAK_OPT_L25_RING_CAPS, c - first);
  if (!cap) cap = (unsigned)_hak_options_get(l2 ? HAK_OPT_L2_RING_CAP : HAK_OPT_L25_RING_CAP);
  if (cap > build_cap(c)) cap = build_cap(c);
  size_t by_bytes = c >= HAK_SPAN_FIRST
                  ? HAK_RING_MIN_CAP + (size_t)_hak_options_get(HAK_OPT_SPAN_CACHE_KB) * 1024 / _hak_classes[c].size
                  : HAK_RING_MAX_BYTES / _hak_classes[c].size;
  if (by_bytes < HAK_RING_MIN_CAP) by_bytes = HAK_RING_MIN_CAP;
  if (cap > by_bytes) cap = (unsigned)by_bytes;
  return cap ? cap : 1;
}

/* Capacities from the options; at init, after them. */
void _hak_front_init(void) {
  credit_bias = _hak_options_get(HAK_OPT_PROF) ? HAK_PROF_CREDIT_BIAS : 0;
  budget = (size_t)_hak_options_get(HAK_OPT_THREAD_CACHE_KB) * 1024;
  span_budget = (size_t)_hak_options_get(HAK_OPT_SPAN_CACHE_KB) * 1024;
  for (unsigned c = 0; c < HAK_NCLS; c++) {
    unsigned cap = c < HAK_NTINY ? tiny_cap(c) : ring_cap(c);
    unsigned start = HAK_START_BYTES / _hak_classes[c].size;
    if (start < HAK_START_MIN) start = HAK_START_MIN;
    max_cap[c] = (uint16_t)cap;
    start_cap[c] = (uint16_t)(start < cap ? start : cap);
  }
  delay_init();
}

unsigned _hak_front_max_cap(unsigned c) { return max_cap[c]; }

/* Bytes of blocks a thread's lists of classes [first, last) may hold. */
size_t _hak_front_max_bytes(unsigned first, unsigned last) {
  size_t bytes = 0;
  for (unsigned c = first; c < last; c++) bytes += (size_t)max_cap[c] * _hak_classes[c].size;
  return bytes < budget ? bytes : budget;
}

/* Blocks for and from class c's list: the slab engine, or the span heap
 * (span.c) for the classes from HAK_SPAN_FIRST up. */
static unsigned take(struct hak_heap *h, unsigned c, unsigned max, unsigned room, void **chain) {
  if (spans(c)) { h->stats.refills[c]++; return _hak_span_take(c, max, chain); }
  return _hak_refill_take(h, c, max, room, chain);
}

/* The first n blocks of a chain of class c back to the slab engine or the
 * span heap; returns the rest of the chain. */
static void *give_back(struct hak_heap *h, unsigned c, void *chain, unsigned n) {
  if (!spans(c)) return _hak_slab_return(h, c, chain, n);
  void **last = chain;
  for (unsigned i = 1; i < n; i++) last = hak_link_next(last, c);
  void *rest = hak_link_next(last, c);
  hak_link_set(last, NULL);
  _hak_span_return(c, chain);
  return rest;
}

/* One block with no list to go on (no heap, or after thread exit). */
static void give_back_one(unsigned c, void *p) {
  void **b = p;
  hak_link_set(b, NULL);
  b[1] = HAK_FREE_KEY;
  (void)give_back(NULL, c, b, 1);
}

/* Every list empty, with no capacity until the class is first used. */
void _hak_front_heap_init(struct hak_heap *h) {
  h->cap_bytes = 0;
  h->first_free_returned = 0;
  h->span_cap_bytes = 0;
  h->idle_look_ms = _hak_os_now_ms();
  h->idle_calls = 0;
  for (unsigned c = 0; c < HAK_NCLS; c++) {
    h->cap[c] = 0;
    h->ways[c] = 0;
    h->seen_head[c] = NULL;
    HAK_CREDIT(c) = -credit_bias;
  }
  delay_heap_init(h);
}

static inline unsigned list_length(const void *list) {
  unsigned n = 0;
  for (void *const *b = list; b; b = hak_link_get(b)) n++;
  return n;
}

/* Class c's list goes back to its slabs, and its capacity to the thread's
 * budget: the list is as before the class's first use. */
static void drop_list(struct hak_heap *h, unsigned c) {
  void *list = HAK_LIST(c);
  unsigned n = (unsigned)(h->cap[c] - credit(c));   /* struct hak_tls's invariant */
  HAK_ASSERT(n == list_length(list));
  HAK_LIST(c) = NULL;
  HAK_CREDIT(c) = -credit_bias;
  if (credit_bias && list) _hak_prof_refund((size_t)n * _hak_classes[c].size);
  h->cap_bytes -= (size_t)h->cap[c] * _hak_classes[c].size;
  h->span_cap_bytes -= span_extra(c, h->cap[c]);
  h->cap[c] = 0;
  h->ways[c] = 0;
  if (list) (void)give_back(h, c, list, n);
}

/* A thread that stops using a class does not keep its list: at this
 * thread's slow paths, at most once per purge delay, every list that no
 * malloc or free touched since the last look goes back to the slabs (where
 * purging can reach it), and its capacity back to the thread's budget. The
 * kept slabs of such a class that blocks were freed into (its ready list)
 * are detached, so that purging reaches them too. */
#define HAK_IDLE_EVERY 16u              /* slow paths between two clock reads */

static void release_idle_lists(struct hak_heap *h) {
  if (++h->idle_calls < HAK_IDLE_EVERY) return;
  h->idle_calls = 0;
  uint32_t now = _hak_os_now_ms();
  if (now - h->idle_look_ms < (uint32_t)_hak_options_get(HAK_OPT_PURGE_DELAY_MS)) return;
  h->idle_look_ms = now;
  for (unsigned c = 0; c < HAK_NCLS; c++) {
    void *head = HAK_LIST(c);
    uint32_t events = (uint32_t)(h->stats.refills[c] + h->stats.spills[c]);
    if (events == h->seen_events[c] && !spans(c)) _hak_slab_release_ready(h, c);
    if (head && head == h->seen_head[c] && credit(c) == h->seen_credit[c] &&
        events == h->seen_events[c]) {
      drop_list(h, c);
      h->stats.idle_releases++;
      head = NULL;
    }
    h->seen_head[c] = head;
    h->seen_credit[c] = (int32_t)credit(c);
    h->seen_events[c] = events;
  }
}

/* cap_bytes and span_cap_bytes are the sums they are written to be
 * (struct hak_heap). */
static bool heap_sums_ok(const struct hak_heap *h) {
  size_t bytes = 0, span_bytes = 0;
  for (unsigned c = 0; c < HAK_NCLS; c++) {
    bytes += (size_t)h->cap[c] * _hak_classes[c].size;
    span_bytes += span_extra(c, h->cap[c]);
  }
  return bytes == h->cap_bytes && span_bytes == h->span_cap_bytes;
}
/* Debug builds: the invariants of the front of class c. */
#define CHECK_FRONT(h, c) \
  HAK_ASSERT(list_length(HAK_LIST(c)) + (uint64_t)credit(c) == (h)->cap[c] && \
             (h)->cap[c] <= max_cap[c] && (h)->cap_bytes <= budget && \
             (h)->span_cap_bytes <= span_budget && \
             ((h)->ways[c] == HAK_WAY_BOTH || (h)->cap[c] <= HAK_ONE_WAY_CAP) && \
             ((h)->ways[c] != HAK_WAY_FREE || (h)->cap[c] <= HAK_FREE_ONLY_CAP) && \
             _hak_thread_tls.head[0] == NULL && _hak_thread_tls.credit[0] == 0 && heap_sums_ok(h))

/* A thread's budget of list bytes (HAKMEM_THREAD_CACHE_KB, or the span
 * lists' HAKMEM_SPAN_CACHE_KB) while at most HAK_SHARE_THREADS threads
 * live; beyond, HAK_SHARE_THREADS budgets shared by all the live threads.
 * Lists hold blocks that no other thread can use: with a thousand threads
 * alive, each holding what one of a few threads may, the span lists alone
 * (2 blocks per class besides the budget) held over a GB, and the span
 * heap grew by that much, page fault by page fault (docs/experiments.md,
 * "A thousand threads"). */
#define HAK_SHARE_THREADS 32u

static size_t thread_share(size_t per_thread) {
  unsigned live = _hak_thread_heaps_live();
  return live <= HAK_SHARE_THREADS ? per_thread : per_thread * HAK_SHARE_THREADS / live;
}

/* Bytes of all of h's span lists' capacities, start capacities included. */
static size_t span_cap_all(const struct hak_heap *h) {
  size_t bytes = 0;
  for (unsigned c = HAK_SPAN_FIRST; c < HAK_NCLS; c++) bytes += (size_t)h->cap[c] * _hak_classes[c].size;
  return bytes;
}

/* The list of class c ran empty under malloc (way HAK_WAY_MALLOC), or was
 * full under free (HAK_WAY_FREE): its capacity goes from 0 to the start
 * capacity, else doubles, within the class's maximum (HAK_ONE_WAY_CAP until
 * the list was used both ways, HAK_FREE_ONLY_CAP while it only took frees)
 * and the thread's budget (shared beyond HAK_SHARE_THREADS live threads). */
static void grow(struct hak_heap *h, unsigned c, unsigned way) {
  size_t size = _hak_classes[c].size;
  unsigned cap = h->cap[c], want = cap ? 2 * cap : start_cap[c];
  unsigned limit = max_cap[c];
  h->ways[c] |= (uint8_t)way;
  if (h->ways[c] != HAK_WAY_BOTH && limit > HAK_ONE_WAY_CAP) limit = HAK_ONE_WAY_CAP;
  if (h->ways[c] == HAK_WAY_FREE && limit > HAK_FREE_ONLY_CAP) limit = HAK_FREE_ONLY_CAP;
  if (want > limit) want = limit;
  if (want <= cap) return;
  if (span_extra(c, want) > span_extra(c, cap)) {   /* within the span lists' budget */
    size_t span_room = (span_budget - h->span_cap_bytes) / size;
    unsigned most = (cap > start_cap[c] ? cap : start_cap[c]) + (unsigned)span_room;
    if (want > most) want = most;
    if (want <= cap) return;
  }
  if (spans(c) && _hak_thread_heaps_live() > HAK_SHARE_THREADS) {   /* many threads: start capacities count too */
    size_t share = thread_share(span_budget), held = span_cap_all(h);
    size_t most = cap + (share > held ? (share - held) / size : 0);
    if (want > most) want = (unsigned)most;
    if (want <= cap) return;
  }
  size_t thread_budget = thread_share(budget);
  if (h->cap_bytes >= thread_budget) return;
  size_t room = (thread_budget - h->cap_bytes) / size;
  if (want - cap > room) want = cap + (unsigned)room;
  h->span_cap_bytes += span_extra(c, want) - span_extra(c, cap);
  h->cap[c] = (uint16_t)want;
  h->cap_bytes += (want - cap) * size;
  HAK_CREDIT(c) += (int32_t)(want - cap);
}

/* Blocks a refill takes: half the capacity, at most HAK_REFILL_BYTES. */
static unsigned refill_batch(struct hak_heap *h, unsigned c) {
  unsigned n = h->cap[c] / 2;
  unsigned by_bytes = HAK_REFILL_BYTES / _hak_classes[c].size;
  if (n > by_bytes) n = by_bytes;
  return n ? n : 1;
}

/* HAK_SLOW: the list of class c is empty (or the thread has no heap yet). */
void *_hak_front_alloc_slow(unsigned c) {
  struct hak_heap *h = _hak_thread_heap();
  if (!h) { errno = ENOMEM; return NULL; }
#if HAK_HARDENED
  hak_delay_verify(h, c);
#endif
  release_idle_lists(h);
  void **b = HAK_LIST(c);
  if (!b) {
    h->stats.misses[c]++;
    grow(h, c, HAK_WAY_MALLOC);
    void *chain;
    unsigned max = refill_batch(h, c), room = h->cap[c] ? h->cap[c] : 1;
    if (HAK_UNLIKELY(credit_bias)) max = room = _hak_prof_refill_room(c, max);   /* up to the sample point */
    unsigned n = take(h, c, max, room, &chain);
    if (!n) { errno = ENOMEM; return NULL; }
    if (HAK_UNLIKELY(credit_bias)) _hak_prof_charge((size_t)(n - 1) * _hak_classes[c].size);
    b = chain;
    HAK_LIST(c) = hak_link_next(b, c);
    HAK_CREDIT(c) -= (int32_t)(n - 1);
  } else {
    h->stats.hits[c]++;
    HAK_LIST(c) = hak_link_next(b, c);
    HAK_CREDIT(c)++;
  }
  b[1] = NULL;
  CHECK_FRONT(h, c);
  return b;
}

/* The list of class c is full: its newest cap - cap/2 blocks (at least one),
 * or all of them when the list only takes frees, go back to the slabs in
 * one batch. (The newest, because they are the ones
 * in cache, and slab_return walks them: spilling the older half instead cost
 * the cross-thread producer/consumer benchmark 23%.) */
static void spill(struct hak_heap *h, unsigned c) {
  _hak_purge_tick();
  unsigned n = h->cap[c] - h->cap[c] / 2;
  if (h->ways[c] == HAK_WAY_FREE) n = h->cap[c];   /* no malloc would use the rest */
  HAK_LIST(c) = give_back(h, c, HAK_LIST(c), n);
  HAK_CREDIT(c) += (int32_t)n;
  h->stats.spills[c]++;
  if (credit_bias) _hak_prof_refund((size_t)n * _hak_classes[c].size);   /* charged, not allocated */
}

/* ---- delayed reuse (hardened build) -------------------------------------------
 * A block freed to a thread's list waits first in a ring of the class's
 * delay depth: it goes on the list (and can be handed out again) only after
 * that many other frees of its class by the thread. The depth is
 * HAK_DELAY_MAX blocks, fewer for big blocks (at most HAK_DELAY_BYTES of
 * them, at least 1): 16 up to 4 KiB, 2 at 32 KiB. The span classes (40 KiB
 * to 1 MiB) are not delayed: a block of each held by every thread is 5 MiB
 * a thread, which the thread budgets' sharing beyond HAK_SHARE_THREADS
 * would not bound (test_many_threads: 512 threads held 540 MiB with a block
 * of 8 span classes each). While a block waits, word 1 holds the free key
 * (a double free is caught as before) and word 0 holds 0: it is on no list,
 * so it holds no link (and no encoded NULL, which would show the secret to
 * a read after free). Every malloc of the class reads word 0 of all the
 * ring's blocks (hak_delay_verify: the inline pop and the slow path), and
 * so do the ring's exits (a block leaving the ring, thread exit,
 * malloc_trim) and process exit: one that is not 0 any more was written
 * after its free, and the malloc aborts before it returns. At thread exit
 * and malloc_trim the waiting blocks go back to their slabs. */
#if HAK_HARDENED
#define HAK_DELAY_BYTES (64u * 1024)
_Static_assert(HAK_DELAY_MAX <= 255, "a ring index fits a byte");
static uint8_t delay_depth[HAK_NCLS];

static void delay_init(void) {
  for (unsigned c = 0; c < HAK_NCLS; c++) {
    unsigned d = HAK_DELAY_BYTES / _hak_classes[c].size;
    delay_depth[c] = (uint8_t)(spans(c) ? 0 : d > HAK_DELAY_MAX ? HAK_DELAY_MAX : d ? d : 1);
  }
}

void *_hak_front_delay_none[2];

/* Leaves a ring slot: its block (NULL for an empty slot), whose word 0 must
 * still be 0. */
static void *delay_leave(void **b, unsigned c) {
  if (b == _hak_front_delay_none) return NULL;
  if (HAK_UNLIKELY(b[0] != NULL)) _hak_guard_written_after_free(b, c);
  return b;
}

void _hak_front_delay_written(const struct hak_heap *h, unsigned c) {
  for (unsigned i = 0; i < HAK_DELAY_MAX; i++) delay_leave(h->delayed[c][i], c);
  _hak_guard_assert_failed("a waiting block's word 0 is not 0", __FILE__, __LINE__);   /* it read one */
}

void _hak_front_delay_verify_all(const struct hak_heap *h) {
  for (unsigned c = 0; c < HAK_NCLS; c++) hak_delay_verify(h, c);
}

static void delay_heap_init(struct hak_heap *h) {
  for (unsigned c = 0; c < HAK_NCLS; c++)
    for (unsigned i = 0; i < HAK_DELAY_MAX; i++) h->delayed[c][i] = _hak_front_delay_none;
}

/* The depth of class c's ring now: beyond HAK_SHARE_THREADS live threads,
 * HAK_SHARE_THREADS threads' rings shared by all (at least 1 block), as the
 * lists' budgets are (grow): 1,000 threads each holding 64 KiB of blocks of
 * every class they use held 590 MiB in threads_1000. The slots past a
 * shrunk depth keep their blocks until the depth grows or the thread
 * exits. */
static unsigned delay_depth_now(unsigned c) {
  unsigned live = _hak_thread_heaps_live(), d = delay_depth[c];
  if (live <= HAK_SHARE_THREADS) return d;
  d = d * HAK_SHARE_THREADS / live;
  return d ? d : 1;
}

/* b (freed, class c) waits; returns the block it replaces in the ring, done
 * waiting, or NULL. */
static void *delay(struct hak_heap *h, unsigned c, void **b) {
  b[0] = NULL;
  b[1] = HAK_FREE_KEY;
  unsigned d = delay_depth_now(c), i = h->delay_next[c];
  if (i >= d) i = 0;
  void **out = h->delayed[c][i];
  h->delayed[c][i] = b;
  h->delay_next[c] = (uint8_t)(i + 1 == d ? 0 : i + 1);
  return delay_leave(out, c);
}

static void delay_flush(struct hak_heap *h, unsigned c) {
  for (unsigned i = 0; i < HAK_DELAY_MAX; i++) {
    void **b = delay_leave(h->delayed[c][i], c);
    h->delayed[c][i] = _hak_front_delay_none;
    if (b) { hak_link_set(b, NULL); (void)give_back(h, c, b, 1); }
  }
  h->delay_next[c] = 0;
}
#else
static void delay_init(void) {}
static void delay_heap_init(struct hak_heap *h) { (void)h; }
static void delay_flush(struct hak_heap *h, unsigned c) { (void)h; (void)c; }
#endif

/* HAK_SLOW: a valid, not-free block whose list had no credit left (or the
 * thread has no heap yet, or is exiting, or profiling is on). A push that
 * found no credit left it at -1 (hak_home_push); it goes back to 0 here
 * (with profiling, every push fails: its decrement is undone). The
 * hardened build sends every free of a list here, through the delay. */
void _hak_front_free_slow(void *p, unsigned c) {
  void **b = p;
  if (credit_bias) {
    HAK_CREDIT(c)++;
    struct hak_heap *h = _hak_thread_tls.heap;   /* profiling's common case: room, bytes left */
    if (!HAK_HARDENED && h && credit(c) > 0 && hak_prof_charge_inline(&h->prof, _hak_classes[c].size)) {
      HAK_CREDIT(c)--;
      hak_link_set(b, HAK_LIST(c));
      b[1] = HAK_FREE_KEY;
      HAK_LIST(c) = b;
      h->stats.frees[c]++;
      return;
    }
  } else if (HAK_CREDIT(c) < 0) {
    HAK_CREDIT(c) = 0;
  }
  struct hak_heap *h = _hak_thread_tls.heap;
  if (!h && !_hak_thread_tls.exited) h = _hak_thread_heap();
  if (!h) { give_back_one(c, p); return; }   /* exited, or no memory for a heap */
#if HAK_HARDENED
  if (delay_depth[c] && !(b = delay(h, c, b))) return;
#endif
  release_idle_lists(h);
  /* The thread's first free of a Tiny class, before its list ever held a
   * block, frees a block another thread allocated (or this one, through
   * another path): it goes back to its slab instead of onto the list,
   * where this thread's next malloc would take it and write on a cache line
   * the other thread's neighbouring blocks still use (passive false
   * sharing: Hoard's cache-scratch, docs/experiments.md). The thread's own
   * blocks then come from its own slabs. One remote free per class and
   * thread. */
  _Static_assert(HAK_NTINY <= HAK_FIRST_FREE_BITS, "a bit per Tiny class");
  if (c < HAK_NTINY && h->cap[c] == 0 && !(h->first_free_returned & (1u << c))) {
    h->first_free_returned |= 1u << c;
    give_back_one(c, b);
    return;
  }
  if (credit(c) <= 0) {
    grow(h, c, HAK_WAY_FREE);
    if (!h->cap[c]) { give_back_one(c, b); return; }   /* no budget for a list */
    if (credit(c) <= 0) spill(h, c);
  }
  /* Profiling: a block goes on the list only when the bytes left until the
   * sample point cover it; else back to its slab, so that the allocation
   * that crosses the point finds the list empty. */
  if (credit_bias && !_hak_prof_charge_push(_hak_classes[c].size)) { give_back_one(c, b); return; }
  HAK_CREDIT(c)--;
  hak_link_set(b, HAK_LIST(c));
  b[1] = HAK_FREE_KEY;
  HAK_LIST(c) = b;
  h->stats.frees[c]++;
  CHECK_FRONT(h, c);
}

/* A live block whose free tried no push (the slow free sorted it): the
 * slow free as after a failed push. */
void _hak_front_free_unpushed(void *p, unsigned c) {
  if (credit_bias) HAK_CREDIT(c)--;
  _hak_front_free_slow(p, c);
}

/* The span classes' lists go back to the span heap, where their pages can
 * move into a fresh Large block (large.c); their capacities start again. */
bool _hak_front_spans_flush(struct hak_heap *h) {
  bool any = false;
  for (unsigned c = HAK_SPAN_FIRST; c < HAK_NCLS; c++) {
    any |= HAK_LIST(c) != NULL;
    drop_list(h, c);
  }
  return any;
}

/* At thread exit and malloc_trim: every list back to its slabs, with its
 * capacity. */
void _hak_front_heap_flush(struct hak_heap *h) {
  for (unsigned c = 0; c < HAK_NCLS; c++) { delay_flush(h, c); drop_list(h, c); }
}
