/* The span heap's purge spares the recent demand (span.c, pass_keep): free
 * runs stay resident, past the purge delay, while the heap handed out as
 * many pages in one of the last HAK_SPAN_DEMAND_PASSES passes, up to
 * HAK_SPAN_DEMAND_KEEP bytes:
 *  - runs freed after a burst are still resident one pass after it, and
 *    purged once the burst is HAK_SPAN_DEMAND_PASSES passes back;
 *  - after a burst bigger than the bound, the runs left resident add up to
 *    the bound, less one run at most.
 * The passes are called here with a time past every run's delay, and each
 * burst leaves its freed runs apart (a live block between two), so that
 * they do not merge into one run longer than what is spared. */
#include "span_burst.h"

static uint32_t late;                  /* past every free run's delay */

int main(void) {
  static void *live[2][SPAN_MOST];
  late = _hak_os_now_ms() + 3600u * 1000;

  /* 8 runs of 512 KiB: spared for the passes of the window, then purged. */
  span_burst(8, live[0]);
  const uint64_t freed = 8ull * SPAN_BLOCK;
  CHECKF(span_dirty() >= freed, "%llu KiB of dirty free runs after freeing %llu KiB",
         (unsigned long long)span_dirty() >> 10, (unsigned long long)freed >> 10);
  span_pass_at(late);          /* the pass that sees the burst (one of the burst's
                                * own slow paths may have run one already) */
  span_pass_at(late);
  CHECKF(span_dirty() >= freed, "one pass after a burst, %llu KiB of %llu KiB left resident",
         (unsigned long long)span_dirty() >> 10, (unsigned long long)freed >> 10);
  for (unsigned k = 2; k < HAK_SPAN_DEMAND_PASSES - 1; k++) span_pass_at(late);
  CHECKF(span_dirty() >= freed, "%u passes after a burst, %llu KiB left resident", HAK_SPAN_DEMAND_PASSES - 2,
         (unsigned long long)span_dirty() >> 10);
  span_pass_at(late);
  span_pass_at(late);          /* the burst has left the window */
  CHECKF(span_dirty() == 0, "%llu KiB still resident %u passes after the burst",
         (unsigned long long)span_dirty() >> 10, HAK_SPAN_DEMAND_PASSES);

  /* 32 runs (16 MiB): a pass later, no more than the bound stays. */
  span_burst(32, live[1]);
  span_pass_at(late);
  span_pass_at(late);
  uint64_t kept = span_dirty();
  CHECKF(kept <= HAK_SPAN_DEMAND_KEEP && kept + 2 * SPAN_BLOCK >= HAK_SPAN_DEMAND_KEEP,
         "after a 16 MiB burst, %llu KiB left resident (the bound: %u KiB)", (unsigned long long)kept >> 10,
         HAK_SPAN_DEMAND_KEEP >> 10);

  for (unsigned i = 0; i < 8; i++) hak_free(live[0][i]);
  for (unsigned i = 0; i < 32; i++) hak_free(live[1][i]);
  TEST_END();
}
