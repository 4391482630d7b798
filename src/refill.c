/* refill.c — the refill stages of a slab class's thread front and the Tiny
 * warm pool. An empty list takes a batch of blocks from, in order: the
 * thread's current slab of the class (stage 1), a ready slab (one the
 * thread exhausted, which slab.c kept for it, and freed blocks into since),
 * a slab of its warm pool (stage 2: a few partly free slabs per Tiny class
 * the thread keeps for itself), an ownerless slab adopted from the shared
 * pool (stage 3), a fresh slab of a SuperSlab (stage 4). An exhausted
 * current slab is kept for the thread. At thread exit and malloc_trim the
 * current, warm and ready slabs are detached. */
#include "hakmem_internal.h"

/* Tiny slabs carve fresh blocks last: while a slab the thread can reach has
 * freed blocks (a warm slab with some, or an ownerless one in the shared
 * pool), a slab with nothing but uncarved room waits in the warm pool.
 * Carving makes new pages resident; a producer's blocks come back to its
 * slabs one remote free at a time (docs/experiments.md, "Carve last"). */

/* The index of the topmost warm slab of class c with freed blocks, or -1. */
static int warm_recycled(const struct hak_heap *h, unsigned c) {
  for (int i = h->warm_n[c] - 1; i >= 0; i--)
    if (_hak_slab_has_recycled(h->warm[c][i])) return i;
  return -1;
}

static bool pool_has_slabs(unsigned c) { return __atomic_load_n(&_hak_slab_pools[c].npartial, __ATOMIC_RELAXED) != 0; }

/* Should s (Tiny, cur) give only its freed blocks, and wait in the warm pool
 * for its carving while freed blocks are elsewhere? */
static bool carve_waits(const struct hak_heap *h, unsigned c, const struct hak_slab *s) {
  return c < HAK_NTINY && s->carved < s->capacity && h->warm_n[c] < _hak_options_get(HAK_OPT_WARM_POOL_CAP) &&
         (pool_has_slabs(c) || warm_recycled(h, c) >= 0 || _hak_slab_has_reclaimable(h, c));
}

/* Stage 2..4 of a refill: a ready slab, the warm pool (a slab with freed
 * blocks first, then an adopted one, then one to carve), else the shared
 * pool or a fresh slab, with a secondary prefill of the warm pool (Tiny)
 * when it ran empty. */
static struct hak_slab *next_slab(struct hak_heap *h, unsigned c) {
  struct hak_slab *ready = _hak_slab_reclaim(h, c);
  if (ready) return ready;
  if (c < HAK_NTINY && h->warm_n[c]) {
    int i = warm_recycled(h, c);
    if (i < 0 && pool_has_slabs(c)) {
      bool adopted;
      struct hak_slab *s = _hak_slab_acquire(h, c, false, &adopted);
      if (s) { h->stats.stage_shared[c]++; h->stats.slabs_adopted++; return s; }
    }
    if (i < 0) i = h->warm_n[c] - 1;
    struct hak_slab *s = h->warm[c][i];
    h->warm[c][i] = h->warm[c][--h->warm_n[c]];
    h->stats.warm_hits[c]++;
    h->stats.stage_warm[c]++;
    return s;
  }
  if (c < HAK_NTINY) h->stats.warm_misses[c]++;
  bool adopted;
  struct hak_slab *s = _hak_slab_acquire(h, c, true, &adopted);
  if (!s) return NULL;
  if (adopted) { h->stats.stage_shared[c]++; h->stats.slabs_adopted++; }
  else h->stats.stage_fresh[c]++;
  if (c < HAK_NTINY) {
    long cap = _hak_options_get(HAK_OPT_WARM_POOL_CAP), prefill = _hak_options_get(HAK_OPT_WARM_POOL_PREFILL);
    for (long i = 0; i < prefill && h->warm_n[c] < cap; i++) {
      struct hak_slab *w = _hak_slab_acquire(h, c, true, &adopted);
      if (!w) break;
      if (adopted) h->stats.slabs_adopted++;
      h->warm[c][h->warm_n[c]++] = w;
      h->stats.warm_prefills[c]++;
    }
  }
  return s;
}

/* Debug builds: h's current, warm and ready slabs of class c are its own
 * (struct hak_slab's xowner and ready rules), each once. */
static void check_owned(const struct hak_heap *h, unsigned c) {
  if (!HAK_DEBUG) return;
  const struct hak_slab *cur = h->cur[c];
  HAK_ASSERT(!cur || (atomic_load(&cur->xowner) == h && !cur->ready));
  for (const struct hak_slab *s = h->ready[c]; s; s = s->next)
    HAK_ASSERT(s->ready && s->cls == c && atomic_load(&s->xowner) == h && atomic_load(&s->xlisted) == 1 && s != cur);
  for (unsigned i = 0; c < HAK_NTINY && i < h->warm_n[c]; i++) {
    HAK_ASSERT(atomic_load(&h->warm[c][i]->xowner) == h && h->warm[c][i] != cur);
    for (unsigned j = 0; j < i; j++) HAK_ASSERT(h->warm[c][j] != h->warm[c][i]);
  }
}

/* Up to max blocks of class c from h's slabs (more, up to room, when a
 * slab's whole free list can go without a walk) onto *list. A take that got
 * blocks stops where its slab runs out: behind them, the next slab's list
 * could only be taken block by block, a cache miss each with nothing to
 * overlap it (batch_4t: 12% of its samples, on the link load), while the
 * next refill, with the list empty, takes it whole (docs/experiments.md,
 * "Spills and refills without extra walks"). */
static unsigned slabs_take(struct hak_heap *h, unsigned c, unsigned max, unsigned room, void **list) {
  unsigned got = 0;
  struct hak_slab *s = h->cur[c];
  if (s) h->stats.stage_current[c]++;
  bool waited = false;                  /* once a take: adopting may fail */
  while (got < max) {
    if (!s) {
      s = next_slab(h, c);
      if (!s) break;
      h->cur[c] = s;
    }
    bool wait = !waited && carve_waits(h, c, s);
    got += _hak_slab_pop(h, s, max - got, room - got, !wait, list);
    if (wait && got < max) {            /* s waits in the warm pool */
      h->warm[c][h->warm_n[c]++] = s;
      h->cur[c] = s = NULL;
      waited = true;
      continue;
    }
    if (got < max && got && s->carved < s->capacity) break;   /* carve limit: the rest next time */
    if (got < max) {                    /* s is exhausted */
      h->cur[c] = NULL;
      _hak_slab_keep(h, s);
      s = NULL;
      if (got) break;                   /* the next slab's list: whole, next time */
    }
  }
  return got;
}

/* About max blocks of class c for heap h's front, as a list linked through
 * word 0 (each with word 1 = free key): the class's first chunk while it
 * has blocks for h (region.c), else its slabs. Returns how many; 0 = out of
 * memory. */
unsigned _hak_refill_take(struct hak_heap *h, unsigned c, unsigned max, unsigned room, void **chain) {
  void *list = NULL;
  unsigned got = 0;
  if (!HAK_HARDENED && HAK_UNLIKELY(!HAK_RACY_LOAD(_hak_region_chunk_spent[c]))) {
    struct hak_heap *served = HAK_RACY_LOAD(_hak_region_chunk_heap);
    if (served == h || !served) got = _hak_region_chunk_take(h, c, max, &list);
  }
  if (!got) got = slabs_take(h, c, max, room, &list);
  h->stats.refills[c]++;
  _hak_stats_gauge_add(&_hak_stats_gauges.bytes_in_use, &_hak_stats_gauges.bytes_in_use_peak,
                       (int64_t)got * _hak_classes[c].size);
  *chain = list;
  check_owned(h, c);
  return got;
}

/* The current, warm and ready slabs of every class are detached (released
 * when empty, else left to the shared pool); kept ones stay kept. */
void _hak_refill_heap_flush(struct hak_heap *h) {
  for (unsigned c = 0; c < HAK_NCLS; c++) {
    _hak_slab_release_ready(h, c);
    if (h->cur[c]) { _hak_slab_detach(h, h->cur[c]); h->cur[c] = NULL; }
    if (c < HAK_NTINY)
      while (h->warm_n[c]) _hak_slab_detach(h, h->warm[c][--h->warm_n[c]]);
  }
}
