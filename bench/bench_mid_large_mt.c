/* bench_mid_large_mt THREADS ITERS WS [MIN MAX [SEED]]
 *
 * THREADS threads, each churning its own WS slots for ITERS iterations with
 * blocks of 8-32 KiB by default (the L2 tier): a full slot has its block
 * checked and freed, an empty one gets a new block. Threads share nothing;
 * the benchmark measures how the allocator scales. Ops = THREADS * ITERS,
 * timed from a common start until the last thread is done. */
#include "bench_common.h"

#define USAGE \
    "bench_mid_large_mt THREADS ITERS WS [MIN MAX [SEED]]  (defaults: MIN 8192, MAX 32768, SEED 42)"

/* One thread's arguments, on a cache line of its own. */
typedef struct {
    _Alignas(64) pthread_barrier_t *start;
    uint64_t iters;
    size_t ws;
    bench_sizes sizes;
    bench_rng rng;
} worker_args;

static void *worker(void *arg) {
    worker_args *w = arg;
    bench_slot *slots = calloc(w->ws, sizeof *slots);
    if (!slots)
        bench_fail("calloc of %zu slots failed", w->ws);
    pthread_barrier_wait(w->start);
    bench_slots_churn(slots, w->ws, w->iters, &w->sizes, &w->rng);
    bench_slots_release(slots, w->ws);
    free(slots);
    return NULL;
}

int main(int argc, char **argv) {
    if (argc != 4 && argc != 6 && argc != 7)
        bench_usage_error("expected 3, 5 or 6 arguments", USAGE);
    uint64_t threads = bench_arg_u64(argv[1], "THREADS", USAGE);
    uint64_t iters = bench_arg_u64(argv[2], "ITERS", USAGE);
    uint64_t ws = bench_arg_u64(argv[3], "WS", USAGE);
    uint64_t min = argc > 4 ? bench_arg_u64(argv[4], "MIN", USAGE) : 8192;
    uint64_t max = argc > 4 ? bench_arg_u64(argv[5], "MAX", USAGE) : 32768;
    uint64_t seed = argc > 6 ? bench_arg_u64(argv[6], "SEED", USAGE) : 42;
    if (threads == 0 || threads > 1024 || ws == 0 || min == 0 || min > max || max > UINT32_MAX)
        bench_usage_error("need 1 <= THREADS <= 1024, WS > 0 and 0 < MIN <= MAX < 4 GiB", USAGE);

    worker_args args[threads];
    pthread_barrier_t start;
    for (uint64_t t = 0; t < threads; t++)
        args[t] = (worker_args){ &start, iters, ws, { min, max, NULL, 0 },
                                 bench_rng_make(seed, t) };
    double seconds = bench_run_team(&start, threads, worker, args, sizeof args[0]);

    bench_report("mid_large_mt", threads * iters, seconds, (unsigned)threads,
                 "iters=%" PRIu64 " ws=%" PRIu64 " min=%" PRIu64 " max=%" PRIu64 " seed=%" PRIu64,
                 iters, ws, min, max, seed);
    return 0;
}
