/* The Large cache's expiry pass spares as many bytes as the tier handed out
 * since the last pass (large.c, _hak_large_expire): a range due by the
 * clock stays while that demand would take it again, and goes at the first
 * pass after the demand stopped; one too big for the demand goes at once;
 * a forced trim drops everything. The passes are called directly with
 * chosen times: no sleeping, and no purge clock (only malloc's and free's
 * slow paths tick it; _hak_large_alloc and _hak_large_free do not). */
#include "testing.h"
#include "hakmem_internal.h"

#define MiB ((size_t)1 << 20)

static int64_t cached(void) {
  return atomic_load_explicit(&_hak_stats_gauges.bytes_large_cached, memory_order_relaxed);
}

/* A Large block of n bytes, written at both ends, freed into the cache. */
static void churn(size_t n) {
  unsigned char *p = _hak_large_alloc(n, 0, false);
  CHECK(p != NULL);
  if (!p) return;
  p[0] = 1;
  p[n - 1] = 2;
  CHECK(_hak_large_free(p, "free"));
}

/* A pass at now_ms with a delay of delay ms (no learned delay: no hold). */
static size_t expire(uint32_t now_ms, uint32_t delay) {
  struct hak_purge_policy pp = { false, now_ms, delay, delay, 0, NULL };
  return _hak_large_expire(&pp);
}

int main(void) {
  hak_free(hak_malloc(1));                       /* initializes hakmem */
  _hak_large_trim();
  uint32_t t = _hak_os_now_ms() + 1000, delay = 50;  /* every range due at t */
  expire(t, delay);                              /* the count starts at 0 */

  churn(3 * MiB);                                /* 3 MiB handed out, then cached */
  CHECK(cached() >= (int64_t)(3 * MiB));
  CHECK(expire(t, delay) == 0);                  /* due, but the demand takes it again */
  CHECK(cached() >= (int64_t)(3 * MiB));
  CHECK(expire(t + delay, delay) >= 3 * MiB);    /* no demand since: expired */
  CHECK(cached() == 0);

  churn(8 * MiB);                                /* an 8 MiB range ... */
  expire(t + 2 * delay, delay);                  /* (spared: its own demand) */
  churn(2 * MiB);                                /* ... cut for 2 MiB and merged back */
  CHECK(expire(t + 3 * delay, delay) >= 8 * MiB);   /* 2 MiB of demand spares none of 8 */
  CHECK(cached() == 0);

  churn(3 * MiB);
  CHECK(_hak_large_trim() >= 3 * MiB);           /* a forced trim spares nothing */
  CHECK(cached() == 0);
  TEST_END();
}
