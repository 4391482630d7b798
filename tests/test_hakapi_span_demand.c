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
#include "testing.h"
#include "hakmem_internal.h"

#include <string.h>
#include <time.h>

/* hakmem's clock, frozen for this program: a slow path runs a purge pass
 * only when 25 ms passed since the last one, so after the first none runs
 * during a burst, however slowly the build runs it (TSan, qemu), and each
 * burst's demand is seen whole by the passes called below. */
int clock_gettime(clockid_t id, struct timespec *ts) {
  (void)id;
  ts->tv_sec = 1000;
  ts->tv_nsec = 0;
  return 0;
}

#define KiB 1024u
#define BLOCK (512u * KiB)
#define MOST 64u

static uint32_t late;                  /* past every free run's delay */

static uint64_t dirty(void) {
  struct hak_span_stats s;
  _hak_span_stats(&s);
  return s.dirty_bytes;
}

static void pass(void) {
  struct hak_purge_policy pp = { false, late, (uint32_t)_hak_options_get(HAK_OPT_PURGE_DELAY_MS), 0 };
  _hak_span_purge(&pp);
}

/* 2n blocks of 512 KiB written; every second one freed, the thread's span
 * lists back to the span heap: n free runs apart. The others stay in live. */
static void burst(unsigned n, void **live) {
  void *blocks[2 * MOST];
  for (unsigned i = 0; i < 2 * n; i++) {
    blocks[i] = hak_malloc(BLOCK);
    CHECK(blocks[i] != NULL);
    if (blocks[i]) memset(blocks[i], 0x5A, BLOCK);
  }
  for (unsigned i = 0; i < n; i++) {
    live[i] = blocks[2 * i];
    hak_free(blocks[2 * i + 1]);
  }
  _hak_front_spans_flush(_hak_thread_tls.heap);
}

int main(void) {
  static void *live[2][MOST];
  late = _hak_os_now_ms() + 3600u * 1000;

  /* 8 runs of 512 KiB: spared for the passes of the window, then purged. */
  burst(8, live[0]);
  const uint64_t freed = 8ull * BLOCK;
  CHECKF(dirty() >= freed, "%llu KiB of dirty free runs after freeing %llu KiB",
         (unsigned long long)dirty() >> 10, (unsigned long long)freed >> 10);
  pass();                       /* the pass that sees the burst (one of the burst's
                                 * own slow paths may have run one already) */
  pass();
  CHECKF(dirty() >= freed, "one pass after a burst, %llu KiB of %llu KiB left resident",
         (unsigned long long)dirty() >> 10, (unsigned long long)freed >> 10);
  for (unsigned k = 2; k < HAK_SPAN_DEMAND_PASSES - 1; k++) pass();
  CHECKF(dirty() >= freed, "%u passes after a burst, %llu KiB left resident", HAK_SPAN_DEMAND_PASSES - 2,
         (unsigned long long)dirty() >> 10);
  pass();
  pass();                       /* the burst has left the window */
  CHECKF(dirty() == 0, "%llu KiB still resident %u passes after the burst", (unsigned long long)dirty() >> 10,
         HAK_SPAN_DEMAND_PASSES);

  /* 32 runs (16 MiB): a pass later, no more than the bound stays. */
  burst(32, live[1]);
  pass();
  pass();
  uint64_t kept = dirty();
  CHECKF(kept <= HAK_SPAN_DEMAND_KEEP && kept + 2 * BLOCK >= HAK_SPAN_DEMAND_KEEP,
         "after a 16 MiB burst, %llu KiB left resident (the bound: %u KiB)", (unsigned long long)kept >> 10,
         HAK_SPAN_DEMAND_KEEP >> 10);

  for (unsigned i = 0; i < 8; i++) hak_free(live[0][i]);
  for (unsigned i = 0; i < 32; i++) hak_free(live[1][i]);
  TEST_END();
}
