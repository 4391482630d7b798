/* The Large cache's expiry pass spares as many bytes as the tier handed out
 * since the last pass (large.c, _hak_large_expire): a range due by the
 * clock stays while that demand would take it again, and goes at the first
 * pass after the demand stopped; one too big for the demand goes at once;
 * what the demand spares takes none of the learned delay's hold; ranges
 * freed lately stay, up to a bound; a forced
 * trim drops everything. The passes are called directly with
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

/* A pass at now_ms with a base delay of base ms learned up to 100 times
 * that, which may spare *hold bytes more than the demand does. */
static size_t expire_held(uint32_t now_ms, uint32_t base, int64_t *hold) {
  struct hak_purge_policy pp = { false, now_ms, 100 * base, base, 0, hold };
  return _hak_large_expire(&pp);
}

/* Whether the ranges of blocks p (np bytes) and q (nq) may touch: a cached
 * range merges with a neighbour (large.c, cache_put). Large blocks are
 * page-aligned and at least a page apart when another block lies between. */
static bool touching(const char *p, size_t np, const char *q, size_t nq) {
  uintptr_t a = (uintptr_t)p, b = (uintptr_t)q;
  uintptr_t gap = a < b ? b - (a + np) : a - (b + nq);
  return gap < MiB;                              /* (wraps when they overlap: they do not) */
}

/* The demand spares its ranges first, and they take none of the learned
 * delay's hold: a 3 MiB range taken again since the last pass and an older
 * 4 MiB one both stay with a hold of 5 MiB, of which the 4 MiB one takes
 * its bytes. (Charged to the hold first, the 3 MiB range left it 2 MiB, too
 * little for the 4 MiB one, which the 3 MiB of demand does not cover.) */
static void demand_before_hold(uint32_t t, uint32_t delay) {
  enum { TRIES = 4 };
  char *b = _hak_large_alloc(4 * MiB, 0, false), *a = NULL, *other[TRIES] = { 0 };
  for (unsigned k = 0; k < TRIES && b; k++) {    /* an a away from b; the others stay live */
    char *p = _hak_large_alloc(3 * MiB, 0, false);
    if (!a && p && !touching(p, 3 * MiB, b, 4 * MiB)) a = p;
    else other[k] = p;
  }
  CHECK(b && a);
  if (!b || !a) return;
  CHECK(_hak_large_free(b, "free"));
  CHECK(_hak_large_free(a, "free"));
  expire(t, delay);                              /* spares both (their demand); the count restarts */
  churn(3 * MiB);                                /* a's range, taken and cached again */
  int64_t hold = 5 * MiB;
  CHECK(expire_held(t, delay, &hold) == 0);      /* a: the demand; b: the hold */
  CHECK(hold >= 0 && hold <= (int64_t)MiB);
  CHECK(cached() >= (int64_t)(7 * MiB));
  CHECK(expire(t + delay, delay) >= 7 * MiB);    /* no demand, no hold: both go */
  CHECK(cached() == 0);
  for (unsigned k = 0; k < TRIES; k++) if (other[k]) CHECK(_hak_large_free(other[k], "free"));
  _hak_large_trim();
}

/* A range freed less than HAK_PURGE_YOUNG_DELAYS delays ago stays, the
 * newest first, as far as HAK_LARGE_YOUNG_KEEP bytes; past the hold's
 * delays it goes. */
static void young_hold(uint32_t delay) {
  enum { TRIES = 4 };
  const size_t an = HAK_LARGE_YOUNG_KEEP - 2 * MiB;
  char *a = _hak_large_alloc(an, 0, false), *b = NULL, *other[TRIES] = { 0 };
  for (unsigned k = 0; k < TRIES && a; k++) {    /* a b away from a: their ranges cannot merge */
    char *p = _hak_large_alloc(3 * MiB, 0, false);
    if (!b && p && !touching(a, an, p, 3 * MiB)) b = p;
    else other[k] = p;                           /* live until the end */
  }
  CHECK(a && b);
  if (!a || !b) return;
  CHECK(_hak_large_free(a, "free"));
  CHECK(_hak_large_free(b, "free"));             /* the newest */
  uint32_t t0 = _hak_os_now_ms();                /* both freed by now: past the delay at t0 + delay */
  expire(t0, delay);                             /* too young to go; the demand's count restarts */
  CHECK(expire(t0 + 2 * delay, delay) >= an);    /* b stays, a does not fit beside it */
  CHECKF(cached() >= (int64_t)(3 * MiB) && cached() < (int64_t)an, "cached %lld KiB", (long long)cached() >> 10);
  CHECK(expire(t0 + HAK_PURGE_YOUNG_DELAYS * delay + 1000, delay) >= 3 * MiB);
  CHECK(cached() == 0);
  for (unsigned k = 0; k < TRIES; k++) if (other[k]) CHECK(_hak_large_free(other[k], "free"));
  _hak_large_trim();
}

int main(void) {
  hak_free(hak_malloc(1));                       /* initializes hakmem */
  _hak_large_trim();
  /* Every range due at t and past the young hold, under the learned one. */
  uint32_t t = _hak_os_now_ms() + 2000, delay = 50;
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

  demand_before_hold(t + 4 * delay, delay);
  young_hold(delay);

  churn(3 * MiB);
  CHECK(_hak_large_trim() >= 3 * MiB);           /* a forced trim spares nothing */
  CHECK(cached() == 0);
  TEST_END();
}
