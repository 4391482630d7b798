/* mid.c — the L2 (2 KiB .. 52 KiB) and L2.5 (.. 1 MiB) fronts: per thread and
 * class, a LIFO ring (an array) of free blocks. Allocation pops, free pushes;
 * an empty ring refills half its capacity from the slab engine in one batch,
 * a full one spills its older half back in one batch. Capacities are set per
 * pool: POOL_L2_RING_CAP / POOL_L25_RING_CAP at build time, lowered at run
 * time by HAKMEM_L2_RING_CAP / HAKMEM_L25_RING_CAP. */
#include "hakmem_internal.h"

#include <errno.h>

#define HAK_MID_REFILL_BYTES (256u * 1024)
#define HAK_RING_MAX_BYTES   (1024u * 1024)

static unsigned build_cap(unsigned c) {
  return _hak_classes[c].tier == HAK_TIER_L2 ? POOL_L2_RING_CAP : POOL_L25_RING_CAP;
}

/* The pool's capacity, and no more than HAK_RING_MAX_BYTES of blocks. */
static unsigned run_cap(unsigned c) {
  unsigned cap = (unsigned)_hak_option(_hak_classes[c].tier == HAK_TIER_L2 ? HAK_OPT_L2_RING_CAP
                                                                           : HAK_OPT_L25_RING_CAP);
  unsigned by_bytes = HAK_RING_MAX_BYTES / _hak_classes[c].size;
  if (by_bytes < 2) by_bytes = 2;
  return cap < by_bytes ? cap : by_bytes;
}

/* Rings of a heap: one array for all mid classes, allocated once per heap
 * (heaps are reused, so is their ring storage). */
void _hak_mid_heap_init(struct hak_heap *h) {
  if (!h->ring_storage) {
    size_t slots = 0;
    for (unsigned c = HAK_NTINY; c < HAK_NCLS; c++) slots += build_cap(c);
    h->ring_storage = _hak_os_meta_alloc(slots * sizeof(void *));
    if (!h->ring_storage) return;
    void **items = h->ring_storage;
    for (unsigned c = HAK_NTINY; c < HAK_NCLS; c++) {
      h->ring[c].items = items;
      items += build_cap(c);
    }
  }
  for (unsigned c = HAK_NTINY; c < HAK_NCLS; c++) {
    h->ring[c].top = 0;
    h->ring[c].cap = (uint16_t)run_cap(c);
  }
}

/* Links items[0..n) into a chain (word 0) and returns it to the slabs. */
static void ring_return(struct hak_heap *h, unsigned c, void **items, unsigned n) {
  if (!n) return;
  for (unsigned i = 0; i + 1 < n; i++) ((void **)items[i])[0] = items[i + 1];
  ((void **)items[n - 1])[0] = NULL;
  _hak_slab_return(h, c, items[0]);
}

/* HAK_SLOW for the mid tiers: both tiers' allocations land here. */
void *_hak_mid_alloc(unsigned c) {
  struct hak_heap *h = _hak_heap_get();
  if (!h || !h->ring[c].items) { errno = ENOMEM; return NULL; }
  struct hak_ring *r = &h->ring[c];
  void **b;
  if (HAK_LIKELY(r->top)) {
    b = r->items[--r->top];
    h->stats.hits[c]++;
  } else {
    h->stats.misses[c]++;
    void *chain;
    unsigned want = HAK_MID_REFILL_BYTES / _hak_classes[c].size;   /* batch bounded in bytes */
    if (want > r->cap / 2u) want = r->cap / 2u;
    if (want < 1) want = 1;
    unsigned n = _hak_slab_take(h, c, want, &chain);
    if (!n) { errno = ENOMEM; return NULL; }
    b = chain;
    for (void **x = b[0]; x; x = x[0]) r->items[r->top++] = x;
  }
  b[1] = NULL;
  return b;
}

void _hak_mid_free(void *p, unsigned c) {
  void **b = p;
  b[1] = (void *)_hak_free_key;
  struct hak_heap *h = _hak_tls.heap;
  if (!h && (_hak_tls.exited || !(h = _hak_heap_get()) || !h->ring[c].items)) {
    b[0] = NULL;                        /* no front: straight home */
    _hak_slab_return(NULL, c, b);
    return;
  }
  struct hak_ring *r = &h->ring[c];
  if (HAK_UNLIKELY(r->top >= r->cap)) {
    unsigned n = r->cap - r->cap / 2;   /* the older half, at least one */
    ring_return(h, c, r->items, n);
    memmove(r->items, r->items + n, (r->top - n) * sizeof(void *));
    r->top -= n;
    r->overflows++;
    h->stats.spills[c]++;
  }
  r->items[r->top++] = b;
  h->stats.frees[c]++;
}

void _hak_mid_heap_flush(struct hak_heap *h) {
  if (!h->ring_storage) return;
  for (unsigned c = HAK_NTINY; c < HAK_NCLS; c++) {
    ring_return(h, c, h->ring[c].items, h->ring[c].top);
    h->ring[c].top = 0;
  }
}
