/* Below the process's peak resident set, the span heap's purge holds runs
 * freed less than HAK_PURGE_YOUNG_DELAYS purge delays ago (span.c, held):
 *  - _hak_os_peak_room reads the room between the resident set and its
 *    high-water mark: 64 MiB written and unmapped leave at least most of it;
 *  - with that room, runs freed past the delay (and past the recent demand's
 *    window) stay resident while they are younger than the hold;
 *  - once older, the next pass purges them;
 *  - a freed peak fills the room itself: past the delay no more than the
 *    recent demand spares (HAK_SPAN_DEMAND_KEEP) stays resident.
 * hakmem's clock is frozen (span_burst.h), and the passes are called with
 * the times each check needs. */
#include "span_burst.h"

#include <sys/mman.h>

#define MiB (1024u * 1024u)
#define RUNS 8u

/* The runs of a burst, past the delay and the demand's window: held while
 * younger than the hold, purged after. */
static void check_hold(uint32_t now, uint32_t delay, uint64_t freed) {
  for (unsigned k = 0; k <= HAK_SPAN_DEMAND_PASSES; k++) span_pass_at(now + delay + 1);
  CHECKF(span_dirty() >= freed, "below the peak, %llu KiB of %llu KiB freed runs resident past the delay",
         (unsigned long long)span_dirty() >> 10, (unsigned long long)freed >> 10);
  span_pass_at(now + delay * HAK_PURGE_YOUNG_DELAYS);
  CHECKF(span_dirty() == 0, "%llu KiB still resident %u delays after their free",
         (unsigned long long)span_dirty() >> 10, HAK_PURGE_YOUNG_DELAYS);
}

int main(void) {
  static void *live[RUNS], *peak[SPAN_MOST];
  const uint32_t now = _hak_os_now_ms(), delay = (uint32_t)_hak_options_get(HAK_OPT_PURGE_DELAY_MS);
  CHECK(delay > 0);

  /* A freed peak fills the room itself: the demand's bound at most stays. */
  span_burst(SPAN_MOST, peak);                     /* 32 MiB freed, 32 MiB live */
  for (unsigned k = 0; k <= HAK_SPAN_DEMAND_PASSES; k++) span_pass_at(now + delay + 1);
  CHECKF(span_dirty() <= HAK_SPAN_DEMAND_KEEP, "a freed 32 MiB peak: %llu KiB resident past the delay",
         (unsigned long long)span_dirty() >> 10);
  span_pass_at(now + delay * HAK_PURGE_YOUNG_DELAYS);
  for (unsigned i = 0; i < SPAN_MOST; i++) hak_free(peak[i]);
  _hak_front_spans_flush(_hak_thread_tls.heap);
  span_pass_at(now + delay * HAK_PURGE_YOUNG_DELAYS);
  CHECKF(span_dirty() == 0, "%llu KiB resident after the peak's last blocks went", (unsigned long long)span_dirty() >> 10);

  /* Room made by hand: 64 MiB written, then unmapped. */
  size_t big = 64u * MiB;
  char *m = mmap(NULL, big, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  CHECK(m != MAP_FAILED);
  if (m == MAP_FAILED) TEST_END();
  memset(m, 1, big);
  munmap(m, big);
  size_t room = _hak_os_peak_room();
  CHECKF(room >= big / 2, "%zu KiB between the resident set and its peak after 64 MiB went", room >> 10);

  span_burst(RUNS, live);
  check_hold(now, delay, (uint64_t)RUNS * SPAN_BLOCK);

  for (unsigned i = 0; i < RUNS; i++) hak_free(live[i]);
  TEST_END();
}
