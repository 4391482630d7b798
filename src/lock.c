/* lock.c — every lock in one table (HAK_LOCKS in hakmem_internal.h): the
 * ranks, the waiting, the rank check of debug builds, the fork handlers and
 * the counts the reports print. A lock is a word taken with one
 * compare-and-swap; a thread that finds it held spins briefly, then sleeps
 * in the kernel until the holder unlocks (a futex: the holder may be
 * descheduled). Yielding in a loop instead cost a thousand threads on two
 * cores 420,000 sched_yield calls in a run of 2,000 threads, each a context
 * switch (docs/experiments.md, "A thousand threads"). */
#include "hakmem_internal.h"

#include <errno.h>
#if __has_include(<linux/futex.h>)
#include <linux/futex.h>
#else
/* The kernel's ABI (C libraries without the kernel's headers, musl's
 * toolchain on Debian): wait and wake on a word private to the process. */
#define FUTEX_WAIT_PRIVATE 128
#define FUTEX_WAKE_PRIVATE 129
#endif
#include <sys/syscall.h>
#include <unistd.h>

struct lock_entry {
  const char *name, *doc;
  hak_lock_t *first;
  unsigned count, rank;
  size_t stride;
};

struct hak_lock_set _hak_lock_set;

static const struct lock_entry table[HAK_LOCK_KINDS] = {
#define HAK_LOCK_ENTRY(id, name, first, count, stride, doc) \
  { name, doc, &(first), count, HAK_RANK_##id, stride },
  HAK_LOCKS(HAK_LOCK_ENTRY)
#undef HAK_LOCK_ENTRY
};

static hak_lock_t *lock_at(const struct lock_entry *e, unsigned i) {
  return (hak_lock_t *)((char *)e->first + (size_t)i * e->stride);
}

/* Only the debug build's order check reads a rank, so the others write
 * none: the pools' locks fill two pages of their own that a small program
 * may never take (`true`: 2 faults fewer; a fork takes them all anyway). */
void _hak_lock_init(void) {
  if (!HAK_DEBUG) return;
  for (unsigned k = 0; k < HAK_LOCK_KINDS; k++)
    for (unsigned i = 0; i < table[k].count; i++) lock_at(&table[k], i)->rank = (uint16_t)(table[k].rank + i);
}

static void futex(_Atomic int *word, int op, int value) {
  int saved = errno;                    /* a lock never changes errno (EAGAIN, EINTR) */
  syscall(SYS_futex, (int *)word, op, value, NULL, NULL, 0);
  errno = saved;
}

/* Spins 64 times, then marks the word 2 (a waiter may sleep) and sleeps
 * until an unlock wakes it; the lock then taken is marked 2 as well, since
 * other sleepers may remain. Counted contended by the new holder. */
static void lock_wait(hak_lock_t *l) {
  for (unsigned spins = 0; spins < 64; spins++) {
    int expected = 0;
    if (atomic_load_explicit(&l->held, memory_order_relaxed) == 0 &&
        atomic_compare_exchange_weak_explicit(&l->held, &expected, 1,
            memory_order_acquire, memory_order_relaxed))
      return;
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
  }
  while (atomic_exchange_explicit(&l->held, 2, memory_order_acquire) != 0)
    futex(&l->held, FUTEX_WAIT_PRIVATE, 2);
}

void _hak_lock_slow(hak_lock_t *l) {
  lock_wait(l);
  hak_lock_count(&l->contended);
}

void _hak_lock_wake(hak_lock_t *l) { futex(&l->held, FUTEX_WAKE_PRIVATE, 1); }

/* ---- rank order (debug builds) ----------------------------------------------
 * Each thread keeps a bit per rank it holds; a lock may be taken only when
 * no rank at or above its own is held. */
#define RANK_WORDS ((HAK_RANK_COUNT + 63) / 64)
static __thread uint64_t held_ranks[RANK_WORDS];

static const char *rank_name(unsigned rank) {
  unsigned k = 0;
  while (k + 1 < HAK_LOCK_KINDS && table[k + 1].rank <= rank) k++;
  return table[k].name;
}

void _hak_lock_order_take(const hak_lock_t *l) {
  unsigned r = l->rank;
  for (unsigned w = RANK_WORDS; w-- > r / 64; ) {
    uint64_t above = held_ranks[w] & (w == r / 64 ? ~0ull << (r % 64) : ~0ull);
    if (HAK_UNLIKELY(above)) {
      unsigned top = w * 64 + 63 - (unsigned)__builtin_clzll(above);
      _hak_guard_write("hakmem: lock order broken: taking %s (rank %u) while holding %s (rank %u)\n",
                       rank_name(r), r, rank_name(top), top);
      _hak_guard_assert_failed("lock rank order", __FILE__, __LINE__);
    }
  }
  held_ranks[r / 64] |= 1ull << (r % 64);
}

/* A trylock that succeeded: held, but it never waited, so no order to keep. */
void _hak_lock_order_tried(const hak_lock_t *l) {
  held_ranks[l->rank / 64] |= 1ull << (l->rank % 64);
}

void _hak_lock_order_drop(const hak_lock_t *l) {
  held_ranks[l->rank / 64] &= ~(1ull << (l->rank % 64));
}

/* ---- fork: every lock held across it, in rank order ------------------------ */
/* A process that never had a second thread has no other thread to hold a
 * lock across the fork (the forking thread holds none outside hakmem), so
 * it takes none: taking them wrote three pages of locks (the lone ones and
 * the pools') that the kernel had just shared between parent and child,
 * and each side copied all three at its next write (6 faults a fork; a
 * shell spawning its commands forks for each: docs/experiments.md,
 * "Starting processes"). Set by the prepare handler the first time the
 * process has had a second thread, and never written again (a write at
 * every fork would copy its page), read by the two others, before any
 * other thread can exist in either process. */
static bool fork_locks;

void _hak_lock_fork_prepare(void) {
  if (!fork_locks) {
    if (hak_prim_single_threaded()) return;
    fork_locks = true;
  }
  for (unsigned k = 0; k < HAK_LOCK_KINDS; k++)
    for (unsigned i = 0; i < table[k].count; i++) hak_lock(lock_at(&table[k], i));
}

void _hak_lock_fork_parent(void) {
  if (!fork_locks) return;
  for (unsigned k = HAK_LOCK_KINDS; k-- > 0; )
    for (unsigned i = table[k].count; i-- > 0; ) hak_unlock(lock_at(&table[k], i));
}

/* The child has only the forking thread, which holds every lock: each is
 * made free again. */
void _hak_lock_fork_child(void) {
  if (!fork_locks) return;
  for (unsigned k = HAK_LOCK_KINDS; k-- > 0; )
    for (unsigned i = table[k].count; i-- > 0; ) atomic_store(&lock_at(&table[k], i)->held, 0);
  memset(held_ranks, 0, sizeof held_ranks);
}

void _hak_lock_counts(struct hak_lock_counts out[HAK_LOCK_KINDS]) {
  for (unsigned k = 0; k < HAK_LOCK_KINDS; k++) {
    out[k] = (struct hak_lock_counts){ table[k].name, table[k].doc, 0, 0 };
    for (unsigned i = 0; i < table[k].count; i++) {
      hak_lock_t *l = lock_at(&table[k], i);
      out[k].acquired += atomic_load_explicit(&l->acquired, memory_order_relaxed);
      out[k].contended += atomic_load_explicit(&l->contended, memory_order_relaxed);
    }
  }
}
