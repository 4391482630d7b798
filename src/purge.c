/* purge.c — when memory goes back to the OS, across the three places that
 * hold free memory: SuperSlabs (superslab.c), the span heap (span.c) and the
 * Large range cache (large.c). Each slow path ticks the clock; every half
 * purge delay, but at least every HAK_PURGE_PASS_MS, one thread runs a pass
 * that gives back what stayed free for HAKMEM_PURGE_DELAY_MS (keeping
 * HAKMEM_EMPTY_KEEP empty SuperSlabs per class committed). Each of the three
 * also spares as much as it handed out since the last pass (released slabs,
 * span pages, Large ranges; the span heap the most of any of its last
 * HAK_SPAN_DEMAND_PASSES passes, up to HAK_SPAN_DEMAND_KEEP bytes, for a
 * compiler's bursts; and, below the process's peak resident set, runs
 * freed less than HAK_PEAK_HOLD_DELAYS delays ago that fit under that
 * peak: span.c, held): a thread of an oversubscribed machine waits
 * longer than the delay for its turn to run, and what the current demand
 * takes again would come back as page faults and mappings. malloc_trim and
 * out-of-memory retries run a forced pass: no delay, nothing kept. */
#include "hakmem_internal.h"

static struct hak_purge_policy policy(bool force, uint32_t now_ms) {
  return (struct hak_purge_policy){ force, now_ms, (uint32_t)_hak_options_get(HAK_OPT_PURGE_DELAY_MS),
                                    _hak_options_get(HAK_OPT_EMPTY_KEEP) };
}

/* Everything free goes back now; returns the bytes released. */
size_t _hak_purge_all(void) {
  struct hak_purge_policy pp = policy(true, _hak_os_now_ms());
  return _hak_superslab_purge(&pp) + _hak_span_purge(&pp) + _hak_large_trim();
}

/* Times are the monotonic clock in ms modulo 2^32 (it wraps every 49.7 days
 * of uptime), so only differences are compared, unsigned: the time since the
 * last pass (0 at start, so the first pass comes at once, whatever the
 * uptime). */
static _Atomic uint32_t last_purge_ms;

/* A pass also releases the shared pools' empty slabs and marks the classes
 * whose free pages may move to another class (superslab.c), so its interval
 * is bounded whatever the delay: a longer delay keeps freed pages resident
 * longer, not away from the other classes (docs/experiments.md, "Purge
 * passes at least every 25 ms"). */
#define HAK_PURGE_PASS_MS 25u

void _hak_purge_tick(void) {
  uint32_t now = _hak_os_now_ms(), last = atomic_load_explicit(&last_purge_ms, memory_order_relaxed);
  uint32_t delay = (uint32_t)_hak_options_get(HAK_OPT_PURGE_DELAY_MS);
  uint32_t every = delay / 2 < HAK_PURGE_PASS_MS ? delay / 2 : HAK_PURGE_PASS_MS;
  if (now - last <= every) return;
  if (!atomic_compare_exchange_strong(&last_purge_ms, &last, now)) return;
  struct hak_purge_policy pp = policy(false, now);
  _hak_superslab_purge(&pp);
  pp.now_ms = _hak_os_now_ms();
  _hak_span_purge(&pp);
  _hak_large_expire(now, delay);
}
