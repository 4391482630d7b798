/* bench_threads THREADS ROUNDS SPAWNS [KB [SEED]]
 *
 * Thread churn with many threads alive at once: THREADS threads run at the
 * same time; each one, ROUNDS times, allocates about KB KiB (default 1024)
 * in blocks of a mixed size (70% 16..512 B, 25% 512 B..16 KiB, 5% 16..256
 * KiB), writes a pattern on every page, checks it and frees the blocks in
 * random order; then it exits and a new thread takes its place, until SPAWNS
 * threads (at least THREADS) have run. Each thread also leaves its last
 * round's 8 smallest blocks to its successor in the same place, which frees
 * them: blocks that outlive their thread, freed by another. Ops = every
 * malloc and free; the clock runs from the first thread's creation until
 * the last one is joined (the first THREADS are created before, and start
 * together). The result line adds minflt (minor page faults of
 * the process, getrusage) and sys_seconds (system time). */
#include "bench_common.h"

#include <sched.h>
#include <semaphore.h>
#include <stdatomic.h>

#define USAGE "bench_threads THREADS ROUNDS SPAWNS [KB [SEED]]  (defaults: KB 1024, SEED 42)"
#define HANDOFF 8u                            /* blocks a thread leaves to its successor */

/* One place a thread runs in: its successor reads what it left. */
typedef struct {
    _Alignas(64) bench_slot left[HANDOFF];
    uint64_t generation;
} place;

static struct {
    uint64_t rounds, kb, seed, spawns;
    place *places;
    pthread_barrier_t start;                  /* the first THREADS start together  */
    sem_t exited;                             /* posted by every thread as it ends */
    pthread_mutex_t lock;                     /* guards ended[]                    */
    size_t *ended, nended;                    /* places whose thread has ended     */
    _Atomic uint64_t ops;
} run;

static uint8_t tag_of(size_t size) { return (uint8_t)(size * 131u + 7u); }

static size_t pick_size(bench_rng *rng) {
    uint64_t r = bench_rng_below(rng, 100);
    if (r < 70) return bench_rng_size(rng, 16, 512);
    if (r < 95) return bench_rng_size(rng, 513, 16384);
    return bench_rng_size(rng, 16385, 256 * 1024);
}

/* One round: blocks up to about budget bytes, filled, then checked and freed
 * in random order; the last round keeps the HANDOFF smallest ones in *keep. */
static uint64_t one_round(bench_rng *rng, bench_slot *slots, size_t cap, bench_slot *keep) {
    size_t n = 0, bytes = 0, budget = run.kb * 1024;
    uint64_t ops = 0;
    while (bytes < budget && n < cap) {
        size_t size = pick_size(rng);
        slots[n].block = bench_malloc(size);
        slots[n].size = (uint32_t)size;
        bench_fill(slots[n].block, size, tag_of(size));
        bytes += size;
        n++;
        ops++;
    }
    sched_yield();                            /* hold them while the others run */
    for (size_t i = n; i > 1; i--) {          /* shuffle: free in random order */
        size_t j = (size_t)bench_rng_below(rng, i);
        bench_slot t = slots[i - 1];
        slots[i - 1] = slots[j];
        slots[j] = t;
    }
    for (size_t i = 0; i < n; i++) {
        bench_slot *s = &slots[i];
        if (keep && s->size <= 512) {
            unsigned k = 0;
            while (k < HANDOFF && keep[k].block) k++;
            if (k < HANDOFF) { keep[k] = *s; continue; }
        }
        bench_check_free(s->block, s->size, tag_of(s->size));
        ops++;
    }
    return ops;
}

static void *worker(void *arg) {
    place *pl = arg;
    uint64_t ops = 0;
    if (pl->generation == 0) pthread_barrier_wait(&run.start);
    for (unsigned k = 0; k < HANDOFF; k++)    /* what the predecessor left */
        if (pl->left[k].block) {
            bench_check_free(pl->left[k].block, pl->left[k].size, tag_of(pl->left[k].size));
            pl->left[k].block = NULL;
            ops++;
        }
    bench_rng rng = bench_rng_make(run.seed, (uint64_t)(pl - run.places) * 1000003u + pl->generation);
    size_t cap = run.kb * 1024 / 16 + 1;
    bench_slot *slots = bench_malloc(cap * sizeof *slots);
    ops++;
    for (uint64_t r = 0; r < run.rounds; r++)
        ops += one_round(&rng, slots, cap, r + 1 == run.rounds ? pl->left : NULL);
    free(slots);
    ops++;
    atomic_fetch_add(&run.ops, ops);
    pthread_mutex_lock(&run.lock);
    run.ended[run.nended++] = (size_t)(pl - run.places);
    pthread_mutex_unlock(&run.lock);
    sem_post(&run.exited);
    return NULL;
}

int main(int argc, char **argv) {
    if (argc < 4 || argc > 6) bench_usage_error("expected 3 to 5 arguments", USAGE);
    uint64_t threads = bench_arg_u64(argv[1], "THREADS", USAGE);
    run.rounds = bench_arg_u64(argv[2], "ROUNDS", USAGE);
    run.spawns = bench_arg_u64(argv[3], "SPAWNS", USAGE);
    run.kb = argc > 4 ? bench_arg_u64(argv[4], "KB", USAGE) : 1024;
    run.seed = argc > 5 ? bench_arg_u64(argv[5], "SEED", USAGE) : 42;
    if (threads == 0 || threads > 4096 || run.spawns < threads || run.rounds == 0 || run.kb == 0 || run.kb > 1 << 20)
        bench_usage_error("need 1 <= THREADS <= 4096, SPAWNS >= THREADS, ROUNDS > 0, 0 < KB <= 1 GiB", USAGE);

    run.places = calloc(threads, sizeof *run.places);
    pthread_t *ids = calloc(threads, sizeof *ids);
    run.ended = calloc(threads, sizeof *run.ended);
    pthread_mutex_init(&run.lock, NULL);
    if (!run.places || !ids || !run.ended) bench_fail("out of memory for %" PRIu64 " threads", threads);
    sem_init(&run.exited, 0, 0);
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setstacksize(&attr, 256 * 1024);

    pthread_barrier_init(&run.start, NULL, (unsigned)threads + 1);
    uint64_t started = 0;
    for (; started < threads; started++)
        if (pthread_create(&ids[started], &attr, worker, &run.places[started]) != 0)
            bench_fail("pthread_create failed");
    pthread_barrier_wait(&run.start);
    double begin = bench_now();
    /* A thread ended: join it and start its successor in its place. */
    for (; started < run.spawns; started++) {
        sem_wait(&run.exited);
        pthread_mutex_lock(&run.lock);
        size_t next = run.ended[--run.nended];
        pthread_mutex_unlock(&run.lock);
        pthread_join(ids[next], NULL);
        run.places[next].generation++;
        if (pthread_create(&ids[next], &attr, worker, &run.places[next]) != 0)
            bench_fail("pthread_create failed");
    }
    for (size_t i = 0; i < threads; i++) pthread_join(ids[i], NULL);
    double seconds = bench_now() - begin;

    uint64_t ops = atomic_load(&run.ops);
    for (size_t i = 0; i < threads; i++)      /* the last generation's blocks */
        for (unsigned k = 0; k < HANDOFF; k++)
            if (run.places[i].left[k].block) { bench_check_free(run.places[i].left[k].block, run.places[i].left[k].size, tag_of(run.places[i].left[k].size)); ops++; }
    struct rusage usage;
    getrusage(RUSAGE_SELF, &usage);
    bench_report("threads", ops, seconds, (unsigned)threads,
                 "rounds=%" PRIu64 " spawns=%" PRIu64 " kb=%" PRIu64 " seed=%" PRIu64 " minflt=%ld sys_seconds=%.3f",
                 run.rounds, run.spawns, run.kb, run.seed, usage.ru_minflt,
                 (double)usage.ru_stime.tv_sec + (double)usage.ru_stime.tv_usec * 1e-6);
    free(ids);
    free(run.ended);
    free(run.places);
    return 0;
}
