/* mid.c — the L2 (2 KiB .. 52 KiB) and L2.5 (.. 1 MiB) pools' ring
 * capacities. A class's ring is its thread-front list (front.c): per
 * thread, LIFO, refilled and spilled in batches; this file decides how many
 * blocks it may hold.
 *
 * Capacities: POOL_L2_RING_CAP / POOL_L25_RING_CAP at build time, lowered
 * per pool (HAKMEM_L2_RING_CAP, HAKMEM_L25_RING_CAP) or per class
 * (HAKMEM_L2_RING_CAPS=24,32,...), and never above HAK_RING_MAX_BYTES of
 * blocks. (Adaptive capacities were measured and dropped: see
 * docs/experiments.md.) */
#include "hakmem_internal.h"

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

/* The capacity of class c's ring: per-class list, else the pool's option;
 * at most the build capacity and HAK_RING_MAX_BYTES of blocks. */
unsigned _hak_mid_ring_cap(unsigned c) {
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
