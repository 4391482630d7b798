/* The purge delay learns from refaults (purge.c, learn):
 *  - a Large block freed, given back by the passes past the delay and asked
 *    for again at once doubles the delay each round, up to 16 base delays,
 *    and its fresh pages count as refaulted (bytes_regret);
 *  - a block asked for again only _hak_purge_regret_ms() after the pass
 *    that gave its range back counts nothing (a longer delay would not have
 *    kept it), and each window of _hak_purge_window_ms() without refaults
 *    halves the delay, back to the base;
 *  - the learned delay spares memory past the base delay only as far as
 *    the bytes in use: with the delay at 16x, a freed block larger than
 *    what stays in use (and than the Large cache keeps as freed lately,
 *    HAK_LARGE_YOUNG_KEEP) goes back after the base delay (_hak_purge_due
 *    checked alone, then through the passes).
 * hakmem's clock is the test's (clock_gettime below), moved by hand; every
 * move runs a purge pass (a tick at the new time). */
#include "testing.h"
#include "hakmem_internal.h"

#include <string.h>
#include <time.h>

static uint64_t now_ms = 1000000;

int clock_gettime(clockid_t id, struct timespec *ts) {
  (void)id;
  ts->tv_sec = (time_t)(now_ms / 1000);
  ts->tv_nsec = (long)(now_ms % 1000) * 1000000;
  return 0;
}

static void pass_after(uint32_t ms) {
  now_ms += ms;
  _hak_purge_tick();
}

static int64_t refaulted(void) { return atomic_load(&_hak_stats_gauges.bytes_regret); }

#define BLOCK (2u << 20)   /* Large: past the span heap's 1 MiB */

/* The time after which a freed range is neither under the delay nor one
 * the Large cache keeps as freed lately (HAK_PURGE_YOUNG_DELAYS base delays). */
static uint32_t past_holds(void) {
  uint32_t young = HAK_PURGE_YOUNG_DELAYS * (uint32_t)_hak_options_get(HAK_OPT_PURGE_DELAY_MS);
  return (_hak_purge_delay_now() > young ? _hak_purge_delay_now() : young) + 1;
}

/* A block written and freed, then two passes: the first, past the delay,
 * spares what was handed out since the last pass, the second, past the
 * holds, gives it back. */
static void round_trip(void) {
  char *p = hak_malloc(BLOCK);
  CHECK(p != NULL);
  if (!p) return;
  memset(p, 0x5A, BLOCK);
  hak_free(p);
  pass_after(_hak_purge_delay_now() + 1);
  pass_after(past_holds());
}

static int64_t cached(void) { return atomic_load(&_hak_stats_gauges.bytes_large_cached); }

/* _hak_purge_due with a base delay of 50 ms learned up to 200 ms and 10
 * bytes of hold. */
static void due_alone(void) {
  int64_t hold = 10;
  struct hak_purge_policy pp = { false, 1000, 200, 50, 0, &hold };
  CHECK(!_hak_purge_due(&pp, 1000 - 30, 100));   /* younger than the base delay */
  CHECK(!_hak_purge_due(&pp, 1000 - 60, 4));     /* the learned delay spares it: the hold has room */
  CHECK(hold == 6);
  CHECK(_hak_purge_due(&pp, 1000 - 60, 8));      /* no room left for it */
  CHECK(hold == 6);
  CHECK(_hak_purge_due(&pp, 1000 - 200, 1));     /* past the learned delay */
  CHECK(hold == 6);
  pp.hold = NULL;
  CHECK(_hak_purge_due(&pp, 1000 - 60, 1));      /* no hold: the base delay */
  pp.force = true;
  CHECK(_hak_purge_due(&pp, 1000, 1));           /* forced: everything, at once */
}

int main(void) {
  due_alone();
  const uint32_t base = (uint32_t)_hak_options_get(HAK_OPT_PURGE_DELAY_MS);
  CHECK(base > 0);
  round_trip();                                   /* the first pass opens a window */
  CHECKF(_hak_purge_delay_now() == base, "delay %u ms before any refault (base %u)", _hak_purge_delay_now(), base);

  /* Freed, given back, asked for again: the delay doubles up to 16x. */
  int64_t before = refaulted();
  for (unsigned k = 1; k <= 6; k++) {
    round_trip();
    uint32_t want = base << (k < 4 ? k : 4);
    CHECKF(_hak_purge_delay_now() == want, "round %u: delay %u ms, want %u", k, _hak_purge_delay_now(), want);
  }
  CHECKF(refaulted() - before >= 6 * (int64_t)BLOCK, "%lld KiB refaulted over 6 rounds of %u KiB",
         (long long)(refaulted() - before) >> 10, BLOCK >> 10);
  CHECK(atomic_load(&_hak_stats_gauges.purge_delay_ms) == (int64_t)base * 16);

  /* At 16x: a block freed for good, more than the bytes in use, goes back
   * after the base delay (the second pass: the first spares what was
   * handed out since the pass before). */
  CHECK(atomic_load(&_hak_stats_gauges.bytes_in_use) < (int64_t)BLOCK);
  const size_t big = HAK_LARGE_YOUNG_KEEP + BLOCK;   /* more than the cache keeps as freed lately */
  char *p = hak_malloc(big);
  CHECK(p != NULL);
  if (p) memset(p, 0x5A, big);
  hak_free(p);
  pass_after(base + 1);
  pass_after(base + 1);
  CHECKF(cached() == 0, "%lld KiB still cached after two base delays at a delay of %u ms",
         (long long)cached() >> 10, _hak_purge_delay_now());

  /* Asked for again only past the refault window: no refaults, and the
   * delay halves at each window's end. */
  for (unsigned k = 1; k <= 5; k++) {
    pass_after(_hak_purge_window_ms() + 1);
    before = refaulted();
    round_trip();
    CHECKF(refaulted() == before, "round %u: %lld KiB counted refaulted after the window", k,
           (long long)(refaulted() - before) >> 10);
  }
  pass_after(_hak_purge_window_ms() + 1);
  CHECKF(_hak_purge_delay_now() == base, "delay %u ms after windows without refaults (base %u)",
         _hak_purge_delay_now(), base);
  CHECK(atomic_load(&_hak_stats_gauges.purge_delay_ms_peak) == (int64_t)base * 16);
  TEST_END();
}
