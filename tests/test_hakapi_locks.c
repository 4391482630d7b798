/* The lock table: ranks follow the table's order, one per lock (debug
 * builds; the others leave them 0); the lone locks share a page; each lock
 * counts its acquisitions and the ones that had to wait; fork leaves every
 * lock free in the child (a process that never had a second thread takes
 * none across it); and in debug builds taking a lock of lower rank
 * than one held aborts with a line naming both; a lock another thread
 * holds when fork is called is free in the child. */
#include "testing.h"
#include "hakmem_internal.h"
#include <pthread.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

static hak_lock_t *pool_lock(unsigned c) { return &_hak_slab_pools[c].lock; }

static void *hold_then_release(void *arg)
{
    hak_lock_t *l = arg;
    hak_lock(l);
    usleep(20000);                       /* the main thread waits meanwhile */
    hak_unlock(l);
    return NULL;
}

static uint64_t counts_of(const char *name, int contended)
{
    struct hak_lock_counts lk[HAK_LOCK_KINDS];
    _hak_lock_counts(lk);
    for (unsigned k = 0; k < HAK_LOCK_KINDS; k++)
        if (!strcmp(lk[k].name, name)) return contended ? lk[k].contended : lk[k].acquired;
    return UINT64_MAX;
}

int main(void)
{
    hak_free(hak_malloc(1));             /* initializes hakmem (and the ranks) */
    hak_free(hak_malloc(64));
    /* Ranks: table order, one per lock, in debug builds (their order check
     * reads them); the others write none, leaving the pools' pages alone
     * until a pool is used. */
    if (HAK_DEBUG) {
        CHECK(_hak_lock_set.totals.rank == HAK_RANK_TOTALS);
        CHECK(_hak_lock_set.heaps.rank == HAK_RANK_HEAPS);
        for (unsigned c = 0; c < HAK_NCLS; c++) CHECK(pool_lock(c)->rank == HAK_RANK_POOL + c);
        CHECK(_hak_lock_set.span.rank == HAK_RANK_POOL + HAK_NCLS);
        CHECK(_hak_lock_set.slot.rank > _hak_lock_set.span.rank);
        CHECK(_hak_lock_set.large.rank > _hak_lock_set.slot.rank);
        CHECK(_hak_lock_set.meta.rank == HAK_RANK_COUNT - 1);
    } else {
        CHECK(_hak_lock_set.meta.rank == 0 && pool_lock(HAK_NCLS - 1)->rank == 0);
    }
    /* The lone locks share a page (fork writes every lock). */
    CHECK((uintptr_t)&_hak_lock_set.totals / 4096 == (uintptr_t)&_hak_lock_set.meta / 4096);

    /* fork in a process that never had a second thread takes no lock, in
     * the parent or the child (where glibc says so: prim.h; elsewhere it
     * takes them all). */
    bool single = hak_prim_single_threaded();
    uint64_t pools = counts_of("pool", 0), taken = single ? 0 : HAK_NCLS;
    pid_t pid = fork();
    if (pid == 0) _exit(counts_of("pool", 0) == pools + taken ? 0 : 1);
    int status = 0;
    waitpid(pid, &status, 0);
    CHECKF(WIFEXITED(status) && WEXITSTATUS(status) == 0, "single-threaded fork: child status %#x", status);
    CHECKF(counts_of("pool", 0) == pools + taken, "single-threaded fork: %llu pool acquisitions, %llu before",
           (unsigned long long)counts_of("pool", 0), (unsigned long long)pools);

    /* Counts: one acquisition each; a wait is contended. */
    uint64_t acquired = counts_of("large", 0), contended = counts_of("large", 1);
    hak_lock(&_hak_lock_set.large);
    hak_unlock(&_hak_lock_set.large);
    CHECK(counts_of("large", 0) == acquired + 1);
    pthread_t t;
    pthread_create(&t, NULL, hold_then_release, &_hak_lock_set.large);
    while (atomic_load(&_hak_lock_set.large.held) == 0) sched_yield();
    hak_lock(&_hak_lock_set.large);
    hak_unlock(&_hak_lock_set.large);
    pthread_join(t, NULL);
    CHECK(counts_of("large", 0) == acquired + 3);
    CHECK(counts_of("large", 1) == contended + 1);

    /* fork: with a second thread once, every lock taken across it (each
     * pool lock once more), every lock free in the child, usable in rank
     * order. */
    CHECK(!hak_prim_single_threaded());
    pools = counts_of("pool", 0);
    pid = fork();
    if (pid == 0) {
        alarm(10);
        hak_lock(&_hak_lock_set.totals);
        hak_lock(pool_lock(3));
        hak_lock(&_hak_lock_set.large);
        hak_unlock(&_hak_lock_set.large);
        hak_unlock(pool_lock(3));
        hak_unlock(&_hak_lock_set.totals);
        hak_free(hak_malloc(100));
        _exit(0);
    }
    waitpid(pid, &status, 0);
    CHECKF(WIFEXITED(status) && WEXITSTATUS(status) == 0, "child status %#x", status);
    CHECK(counts_of("pool", 0) == pools + HAK_NCLS);

    /* Each lock of the table, held by another thread when fork is called:
     * fork waits for it, and the child finds it free. (Before the table,
     * the counters' and the slot lock were not taken by fork: a child
     * inherited them held and hung on its next thread exit or region.) */
    hak_lock_t *locks[] = { &_hak_lock_set.totals, &_hak_lock_set.heaps, pool_lock(5),
                            &_hak_lock_set.span, &_hak_lock_set.slot, &_hak_lock_set.large, &_hak_lock_set.meta };
    pthread_attr_t detached;             /* not joined: the child would count it a leak (TSan) */
    pthread_attr_init(&detached);
    pthread_attr_setdetachstate(&detached, PTHREAD_CREATE_DETACHED);
    for (unsigned i = 0; i < sizeof locks / sizeof locks[0]; i++) {
        pthread_create(&t, &detached, hold_then_release, locks[i]);
        while (atomic_load(&locks[i]->held) == 0) sched_yield();
        pid = fork();
        if (pid == 0) {
            alarm(10);
            hak_lock(locks[i]);
            hak_unlock(locks[i]);
            _exit(0);
        }
        waitpid(pid, &status, 0);
        CHECKF(WIFEXITED(status) && WEXITSTATUS(status) == 0, "lock %u held at fork: child status %#x", i, status);
    }

    /* The wrong order: aborts in a debug build, goes through otherwise. */
    pid = fork();
    if (pid == 0) {
        alarm(10);
        hak_lock(&_hak_lock_set.large);
        hak_lock(pool_lock(0));
        hak_unlock(pool_lock(0));
        hak_unlock(&_hak_lock_set.large);
        _exit(0);
    }
    waitpid(pid, &status, 0);
    if (HAK_DEBUG) CHECKF(WIFSIGNALED(status) && WTERMSIG(status) == SIGABRT, "child status %#x", status);
    else CHECKF(WIFEXITED(status) && WEXITSTATUS(status) == 0, "child status %#x", status);
    TEST_END();
}
