/* The span heap's purge tests (test_hakapi_span_demand,
 * test_hakapi_peak_hold): hakmem's clock frozen, bursts of freed runs,
 * passes called at a chosen time, and the dirty bytes they leave.
 *
 * The clock is frozen for the test program: a slow path runs a purge pass
 * only when 25 ms passed since the last one, so after the first none runs
 * during a burst, however slowly the build runs it (TSan, qemu), and each
 * burst is seen whole by the passes the test calls. */
#ifndef HAKMEM_SPAN_BURST_H
#define HAKMEM_SPAN_BURST_H

#include "testing.h"
#include "hakmem_internal.h"

#include <string.h>
#include <time.h>

int clock_gettime(clockid_t id, struct timespec *ts) {
  (void)id;
  ts->tv_sec = 1000;
  ts->tv_nsec = 0;
  return 0;
}

#define SPAN_BLOCK (512u * 1024u)
#define SPAN_MOST 64u

static inline uint64_t span_dirty(void) {
  struct hak_span_stats s;
  _hak_span_stats(&s);
  return s.dirty_bytes;
}

/* A purge pass (not forced) at time now, with the default delay. */
static inline void span_pass_at(uint32_t now) {
  uint32_t delay = (uint32_t)_hak_options_get(HAK_OPT_PURGE_DELAY_MS);
  struct hak_purge_policy pp = { .force = false, .now_ms = now, .delay_ms = delay, .base_ms = delay, .keep = 0 };
  _hak_span_purge(&pp);
}

/* 2n blocks of SPAN_BLOCK written; every second one freed and the thread's
 * span lists back to the span heap: n free runs apart (a live block between
 * two, so they do not merge). The others stay, in live. */
static inline void span_burst(unsigned n, void **live) {
  void *blocks[2 * SPAN_MOST];
  for (unsigned i = 0; i < 2 * n; i++) {
    blocks[i] = hak_malloc(SPAN_BLOCK);
    CHECK(blocks[i] != NULL);
    if (blocks[i]) memset(blocks[i], 0x5A, SPAN_BLOCK);
  }
  for (unsigned i = 0; i < n; i++) {
    live[i] = blocks[2 * i];
    hak_free(blocks[2 * i + 1]);
  }
  _hak_front_spans_flush(_hak_thread_tls.heap);
}

#endif
