/* mid.c — the L2 (2 KiB .. 52 KiB) and L2.5 (.. 1 MiB) fronts: per thread and
 * class, a LIFO ring (an array) of free blocks. Allocation pops, free pushes
 * (hak_ring_pop / hak_ring_push, inline in hakmem_internal.h); this file is
 * the tier's slow path: an empty ring refills in one batch from the slab
 * engine, a full one spills its older half back in one batch.
 *
 * Capacities: POOL_L2_RING_CAP / POOL_L25_RING_CAP at build time, lowered
 * per pool (HAKMEM_L2_RING_CAP, HAKMEM_L25_RING_CAP) or per class
 * (HAKMEM_L2_RING_CAPS=24,32,...), and never above HAK_RING_MAX_BYTES of
 * blocks. (Adaptive capacities were measured and dropped: see
 * docs/experiments.md.) */
#include "hakmem_internal.h"

#include <errno.h>

#define HAK_MID_REFILL_BYTES (256u * 1024)
#define HAK_RING_MAX_BYTES   (2048u * 1024)
#define HAK_RING_MIN_CAP     2u

static unsigned build_cap(unsigned c) {
  return _hak_classes[c].tier == HAK_TIER_L2 ? POOL_L2_RING_CAP : POOL_L25_RING_CAP;
}

/* The i-th number of a comma-separated list, or 0. */
static unsigned list_item(const char *list, unsigned i) {
  if (!list) return 0;
  for (; i && *list; list++) if (*list == ',') i--;
  unsigned v = 0;
  for (; *list >= '0' && *list <= '9' && v < 100000; list++) v = v * 10 + (unsigned)(*list - '0');
  return v;
}

/* The capacity ceiling of class c's ring: per-class list, else the pool's
 * option; at most the build capacity and HAK_RING_MAX_BYTES of blocks. */
unsigned _hak_mid_ring_max(unsigned c) {
  bool l2 = _hak_classes[c].tier == HAK_TIER_L2;
  unsigned first = l2 ? HAK_NTINY : HAK_NTINY + HAK_NL2;
  unsigned cap = list_item(_hak_option_string(l2 ? HAK_OPT_L2_RING_CAPS : HAK_OPT_L25_RING_CAPS), c - first);
  if (!cap) cap = (unsigned)_hak_option(l2 ? HAK_OPT_L2_RING_CAP : HAK_OPT_L25_RING_CAP);
  if (cap > build_cap(c)) cap = build_cap(c);
  unsigned by_bytes = HAK_RING_MAX_BYTES / _hak_classes[c].size;
  if (by_bytes < HAK_RING_MIN_CAP) by_bytes = HAK_RING_MIN_CAP;
  if (cap > by_bytes) cap = by_bytes;
  return cap ? cap : 1;
}

/* Ring slots a heap needs for all mid classes. */
static size_t ring_slots(void) {
  size_t slots = 0;
  for (unsigned c = HAK_NTINY; c < HAK_NCLS; c++) slots += build_cap(c);
  return slots;
}

/* Rings of a heap: one array for all mid classes, allocated once per heap
 * (heaps are reused, so is their ring storage). */
void _hak_mid_heap_init(struct hak_heap *h) {
  if (!h->ring_storage) {
    h->ring_storage = _hak_os_meta_alloc(ring_slots() * sizeof(void *));
    if (!h->ring_storage) return;
    void **items = h->ring_storage;
    for (unsigned c = HAK_NTINY; c < HAK_NCLS; c++) {
      h->ring[c].items = items;
      items += build_cap(c);
    }
  }
  for (unsigned c = HAK_NTINY; c < HAK_NCLS; c++) {
    struct hak_ring *r = &h->ring[c];
    r->cap = (uint16_t)_hak_mid_ring_max(c);
    r->top = 0;
    _hak_tls.credit[c] = INT64_MIN / 2;          /* mid frees skip the Tiny lists */
  }
}

/* Bytes of ring state a thread carries (the seeds' "TLS KB per thread"). */
size_t _hak_mid_ring_bytes(void) {
  return ring_slots() * sizeof(void *) + (HAK_NCLS - HAK_NTINY) * sizeof(struct hak_ring);
}

/* Links items[0..n) into a chain (word 0) and returns it to the slabs. */
static void ring_return(struct hak_heap *h, unsigned c, void **items, unsigned n) {
  if (!n) return;
  for (unsigned i = 0; i + 1 < n; i++) ((void **)items[i])[0] = items[i + 1];
  ((void **)items[n - 1])[0] = NULL;
  _hak_slab_return(h, c, items[0]);
}

/* HAK_SLOW: pops the ring of class c, refilling it first when it is empty
 * (and creating the thread's heap on its first use). */
void *_hak_mid_alloc(unsigned c) {
  struct hak_heap *h = _hak_heap_get();
  if (!h || !h->ring[c].items) { errno = ENOMEM; return NULL; }
  struct hak_ring *r = &h->ring[c];
  void **b = hak_ring_pop(h, c);
  if (b) return b;
  h->stats.misses[c]++;
  void *chain;
  unsigned want = HAK_MID_REFILL_BYTES / _hak_classes[c].size;   /* batch bounded in bytes */
  if (want > r->cap / 2u) want = r->cap / 2u;
  if (want < 1) want = 1;
  unsigned n = _hak_slab_take(h, c, want, &chain);
  if (!n) { errno = ENOMEM; return NULL; }
  b = chain;
  for (void **x = b[0]; x; x = x[0]) r->items[r->top++] = x;
  b[1] = NULL;
  return b;
}

/* HAK_SLOW: pushes onto the ring of class c, spilling its older half first
 * when it is full (or sends the block home when the thread has no heap). */
void _hak_mid_free(void *p, unsigned c) {
  struct hak_heap *h = _hak_tls.heap;
  if (!h && !_hak_tls.exited) h = _hak_heap_get();
  if (!h || !h->ring[c].items) { _hak_slab_free_home(c, p); return; }   /* no front */
  struct hak_ring *r = &h->ring[c];
  if (r->top >= r->cap) {
    h->stats.spills[c]++;
    unsigned n = r->top - r->top / 2;             /* the older half, at least one */
    ring_return(h, c, r->items, n);
    memmove(r->items, r->items + n, (r->top - n) * sizeof(void *));
    r->top -= n;
  }
  hak_ring_push(h, c, p);
}

void _hak_mid_heap_flush(struct hak_heap *h) {
  if (!h->ring_storage) return;
  for (unsigned c = HAK_NTINY; c < HAK_NCLS; c++) {
    ring_return(h, c, h->ring[c].items, h->ring[c].top);
    h->ring[c].top = 0;
  }
}
