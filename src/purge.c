/* purge.c — when memory goes back to the OS, across the three places that
 * hold free memory: SuperSlabs (superslab.c), the span heap (span.c) and the
 * Large range cache (large.c). Each slow path ticks the clock; every half
 * purge delay, but at least every HAK_PURGE_PASS_MS, one thread runs a pass
 * that gives back what stayed free for the purge delay (HAKMEM_PURGE_DELAY_MS,
 * lengthened while the program faults in again what the passes gave back:
 * below), keeping HAKMEM_EMPTY_KEEP empty SuperSlabs per class committed. Each of the three
 * also spares as much as it handed out since the last pass (released slabs,
 * span pages, Large ranges; the span heap the most of any of its last
 * HAK_SPAN_DEMAND_PASSES passes, up to HAK_SPAN_DEMAND_KEEP bytes, for a
 * compiler's bursts; and, below the process's peak resident set, runs
 * freed less than HAK_PURGE_YOUNG_DELAYS delays ago that fit under that
 * peak: span.c, held): a thread of an oversubscribed machine waits
 * longer than the delay for its turn to run, and what the current demand
 * takes again would come back as page faults and mappings. malloc_trim and
 * out-of-memory retries run a forced pass: no delay, nothing kept. */
#include "hakmem_internal.h"

/* A pass also releases the shared pools' empty slabs and marks the classes
 * whose free pages may move to another class (superslab.c), so its interval
 * is bounded whatever the delay: a longer delay keeps freed pages resident
 * longer, not away from the other classes (docs/experiments.md, "Purge
 * passes at least every 25 ms"). */
#define HAK_PURGE_PASS_MS 25u

static uint32_t base_delay(void) { return (uint32_t)_hak_options_get(HAK_OPT_PURGE_DELAY_MS); }

/* ---- the delay learns from refaults ---------------------------------------
 * A purge that the program's demand faults in again soon after cost a page
 * fault per page and bought nothing: threads that exit and are replaced
 * (mimalloc's stress test: a round's first threads exit long before its
 * last), a server between bursts, phases that come back. Each tier reports
 * the bytes it faults in again less than _hak_purge_regret_ms() (a delay)
 * after a pass gave them back, so that a delay twice as long would have
 * kept them (_hak_purge_regret): a purged slab taken again (superslab.c),
 * fresh span pages or a fresh Large block that a run or range purged that
 * lately could have held (span.c, large.c). When that regret reaches
 * HAK_REGRET_MIN and half of what the passes purged since the window
 * opened, the delay doubles (up to HAK_REGRET_MAX_SHIFT times); a window of
 * _hak_purge_window_ms() that ends with less regret than an eighth of what
 * it purged halves it again. So memory freed and taken back stays
 * resident, as far as the bytes in use (_hak_purge_due), and a peak freed
 * for good, larger than that, still goes back after the base delay. */
#define HAK_REGRET_MAX_SHIFT 4u
#define HAK_REGRET_MIN       (1u << 20)
#define HAK_REGRET_WINDOW_DELAYS 20u
/* Two passes may overlap (a slow pass, a thread of an oversubscribed
 * machine); their updates of the window race harmlessly: at worst one
 * window's purges or regret count in the next. */
static _Atomic uint64_t regret;           /* bytes since the window opened  */
static _Atomic uint64_t window_purged;    /* bytes the passes purged since  */
static _Atomic uint32_t window_ms;        /* when it opened                 */
static _Atomic unsigned delay_shift;

void _hak_purge_regret(size_t bytes) {
  atomic_fetch_add_explicit(&regret, bytes, memory_order_relaxed);
  atomic_fetch_add_explicit(&_hak_stats_gauges.bytes_regret, (int64_t)bytes, memory_order_relaxed);
}
uint32_t _hak_purge_window_ms(void) { return base_delay() * HAK_REGRET_WINDOW_DELAYS; }

void _hak_purge_recent_add(struct hak_purge_recent *r, size_t purged, size_t largest, uint32_t now_ms) {
  if (!purged) return;
  if (now_ms - r->ms >= _hak_purge_regret_ms()) r->bytes = r->largest = 0;
  r->bytes += purged;
  if (largest > r->largest) r->largest = largest;
  r->ms = now_ms;
}

void _hak_purge_recent_fresh(struct hak_purge_recent *r, size_t fresh, size_t need) {
  if (!r->bytes || !fresh || need > r->largest) return;
  if (_hak_os_now_ms() - r->ms >= _hak_purge_regret_ms()) { r->bytes = r->largest = 0; return; }
  size_t n = fresh < r->bytes ? fresh : (size_t)r->bytes;
  r->bytes -= n;
  _hak_purge_regret(n);
}

static uint32_t scaled_delay(void) {
  return base_delay() << atomic_load_explicit(&delay_shift, memory_order_relaxed);
}

uint32_t _hak_purge_delay_now(void) { return scaled_delay(); }
uint32_t _hak_purge_regret_ms(void) { return scaled_delay() + HAK_PURGE_PASS_MS; }

static void set_shift(unsigned shift) {
  int64_t before = (int64_t)scaled_delay();
  atomic_store_explicit(&delay_shift, shift, memory_order_relaxed);
  _hak_stats_gauge_add(&_hak_stats_gauges.purge_delay_ms, &_hak_stats_gauges.purge_delay_ms_peak,
                       (int64_t)scaled_delay() - before);
}

/* After a pass that purged purged bytes: the delay's next scale. */
static void learn(uint32_t now, size_t purged) {
  uint64_t p = atomic_fetch_add_explicit(&window_purged, purged, memory_order_relaxed) + purged;
  uint64_t g = atomic_load_explicit(&regret, memory_order_relaxed);
  uint32_t age = now - atomic_load_explicit(&window_ms, memory_order_relaxed);
  unsigned shift = atomic_load_explicit(&delay_shift, memory_order_relaxed);
  if (p && g >= HAK_REGRET_MIN && 2 * g >= p && age >= scaled_delay()) {
    if (shift < HAK_REGRET_MAX_SHIFT) set_shift(shift + 1);
  } else if (age < _hak_purge_window_ms()) {
    return;
  } else if (shift && 8 * g < p) {
    set_shift(shift - 1);
  }
  atomic_fetch_sub_explicit(&regret, g, memory_order_relaxed);   /* a new window */
  atomic_fetch_sub_explicit(&window_purged, p, memory_order_relaxed);
  atomic_store_explicit(&window_ms, now, memory_order_relaxed);
}

void _hak_purge_init(void) {
  _hak_stats_gauge_add(&_hak_stats_gauges.purge_delay_ms, &_hak_stats_gauges.purge_delay_ms_peak, scaled_delay());
}

static struct hak_purge_policy policy(bool force, uint32_t now_ms, int64_t *hold) {
  return (struct hak_purge_policy){ force, now_ms, force ? 0 : scaled_delay(), base_delay(),
                                    _hak_options_get(HAK_OPT_EMPTY_KEEP), hold };
}

bool _hak_purge_aged(const struct hak_purge_policy *pp, uint32_t freed_ms) {
  return pp->force || pp->now_ms - freed_ms >= pp->base_ms;
}

bool _hak_purge_young(const struct hak_purge_policy *pp, uint32_t freed_ms) {
  return !pp->force && pp->now_ms - freed_ms < pp->base_ms * HAK_PURGE_YOUNG_DELAYS;
}

/* The learned delay spares memory freed more than a base delay ago only as
 * far as the bytes the program has in use: memory freed and taken again is
 * the working set changing hands (threads that exit and are replaced), and
 * that much stays; a peak freed for good is larger than what stays in use,
 * and goes back after the base delay whatever the delay has learned. */
bool _hak_purge_due(const struct hak_purge_policy *pp, uint32_t freed_ms, size_t bytes) {
  if (!_hak_purge_aged(pp, freed_ms)) return false;
  if (pp->force) return true;
  uint32_t age = pp->now_ms - freed_ms;
  if (age >= pp->delay_ms || !pp->hold || *pp->hold < (int64_t)bytes) return true;
  *pp->hold -= (int64_t)bytes;
  return false;
}

/* Everything free goes back now; returns the bytes released. */
size_t _hak_purge_all(void) {
  struct hak_purge_policy pp = policy(true, _hak_os_now_ms(), NULL);
  return _hak_superslab_purge(&pp) + _hak_span_purge(&pp) + _hak_large_trim();
}

/* Times are the monotonic clock in ms modulo 2^32 (it wraps every 49.7 days
 * of uptime), so only differences are compared, unsigned: the time since the
 * last pass (0 at start, so the first pass comes at once, whatever the
 * uptime). */
static _Atomic uint32_t last_purge_ms;

/* Could a pass give anything back: a class region, the span heap's pages or
 * a cached Large range? (Racy reads: a stale answer only moves the pass to
 * a later tick.) A process with none of them, such as a shell's child that
 * takes a few blocks of the first chunks and exits, then writes nothing: a
 * pass writes the purge state, the Large lock and the Large state, three
 * pages that each cost a copy after a fork (docs/experiments.md, "The
 * metadata beside the first chunks"). */
static bool anything_held(void) {
  return atomic_load_explicit(&_hak_stats_gauges.bytes_large_cached, memory_order_relaxed) > 0 ||
         _hak_span_opened() || _hak_region_any();
}

void _hak_purge_tick(void) {
  if (!anything_held()) return;                 /* before the clock: its code and page too */
  uint32_t now = _hak_os_now_ms(), last = atomic_load_explicit(&last_purge_ms, memory_order_relaxed);
  uint32_t delay = base_delay();
  uint32_t every = delay / 2 < HAK_PURGE_PASS_MS ? delay / 2 : HAK_PURGE_PASS_MS;
  if (now - last <= every) return;
  if (!atomic_compare_exchange_strong(&last_purge_ms, &last, now)) return;
  int64_t hold = atomic_load_explicit(&_hak_stats_gauges.bytes_in_use, memory_order_relaxed);
  struct hak_purge_policy pp = policy(false, now, &hold);
  size_t purged = _hak_superslab_purge(&pp);
  pp.now_ms = _hak_os_now_ms();
  purged += _hak_span_purge(&pp);
  purged += _hak_large_expire(&pp);
  learn(pp.now_ms, purged);
}
