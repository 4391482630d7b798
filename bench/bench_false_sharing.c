/* bench_false_sharing thrash|scratch THREADS ITERATIONS [SIZE [REPETITIONS [SEED]]]
 *
 * Allocator-induced false sharing, after the cache-thrash and cache-scratch
 * benchmarks of Berger et al. (Hoard, ASPLOS 2000), written from their
 * published description. Each of THREADS threads repeats ITERATIONS times:
 * allocate a block of SIZE bytes (default 8), write every byte of it and read
 * it back REPETITIONS times (default 20000) in a tight loop, free it.
 *   thrash   the threads allocate independently: an allocator that carves
 *            blocks for different threads out of one cache line makes their
 *            writes fight over it (active false sharing);
 *   scratch  first the main thread allocates one block per thread, one
 *            after another (so neighbours share cache lines), and hands one
 *            to each thread, which frees it before its loop: an allocator
 *            that reuses a freed block for the thread that freed it puts the
 *            threads' objects on those shared lines (passive false sharing).
 * With no false sharing the time is the writes' alone, the same under every
 * allocator; a cache line bounced between cores makes each write cost a
 * transfer. Every byte is checked as it is read back. Ops: the malloc and
 * free calls (2 * THREADS * ITERATIONS, plus 2 * THREADS for scratch's
 * handed-over blocks); writes=N on the result line counts the byte writes. */
#include "bench_common.h"

#define USAGE                                                                   \
    "bench_false_sharing thrash|scratch THREADS ITERATIONS [SIZE [REPETITIONS " \
    "[SEED]]]  (defaults: SIZE 8, REPETITIONS 20000, SEED 42)"

/* One thread's arguments, on a cache line of its own. */
typedef struct {
    _Alignas(64) pthread_barrier_t *start;
    unsigned char *handed; /* scratch: the main thread's block, freed first */
    uint64_t iterations, repetitions;
    size_t size;
    bench_rng rng;
} worker_args;

/* REPETITIONS passes over the block, each writing every byte and reading it
 * back; the bytes of one pass are base + pass + k. */
static void hammer(volatile unsigned char *block, size_t size, uint64_t repetitions,
                   unsigned char base) {
    for (uint64_t pass = 0; pass < repetitions; pass++) {
        unsigned char value = (unsigned char)(base + pass);
        for (size_t k = 0; k < size; k++) {
            block[k] = (unsigned char)(value + k);
            if (block[k] != (unsigned char)(value + k))
                bench_fail("memory check failed: block %p changed under its owner",
                           (void *)block);
        }
    }
}

static void *worker(void *arg) {
    worker_args *w = arg;
    pthread_barrier_wait(w->start);
    if (w->handed) {
        if (!bench_check(w->handed, w->size, (uint8_t)w->size))
            bench_fail("memory check failed: a handed-over block was overwritten");
        free(w->handed);
    }
    for (uint64_t i = 0; i < w->iterations; i++) {
        unsigned char *block = bench_malloc(w->size);
        hammer(block, w->size, w->repetitions, (unsigned char)bench_rng_next(&w->rng));
        free(block);
    }
    return NULL;
}

int main(int argc, char **argv) {
    if (argc < 4 || argc > 7)
        bench_usage_error("expected 3 to 6 arguments", USAGE);
    bool scratch = strcmp(argv[1], "scratch") == 0;
    if (!scratch && strcmp(argv[1], "thrash") != 0)
        bench_usage_error("the mode is thrash or scratch", USAGE);
    uint64_t threads = bench_arg_u64(argv[2], "THREADS", USAGE);
    uint64_t iterations = bench_arg_u64(argv[3], "ITERATIONS", USAGE);
    uint64_t size = argc > 4 ? bench_arg_u64(argv[4], "SIZE", USAGE) : 8;
    uint64_t repetitions = argc > 5 ? bench_arg_u64(argv[5], "REPETITIONS", USAGE) : 20000;
    uint64_t seed = argc > 6 ? bench_arg_u64(argv[6], "SEED", USAGE) : 42;
    if (threads == 0 || threads > 1024 || size == 0 || size > (1u << 20))
        bench_usage_error("need 1 <= THREADS <= 1024 and 1 <= SIZE <= 1 MiB", USAGE);

    worker_args args[threads];
    pthread_barrier_t start;
    for (uint64_t t = 0; t < threads; t++) {
        unsigned char *handed = NULL;
        if (scratch) {
            handed = bench_malloc(size);
            bench_fill(handed, size, (uint8_t)size);
        }
        args[t] = (worker_args){ &start, handed, iterations, repetitions, (size_t)size,
                                 bench_rng_make(seed, t) };
    }
    double seconds = bench_run_team(&start, threads, worker, args, sizeof args[0]);

    uint64_t ops = 2 * threads * iterations + (scratch ? 2 * threads : 0);
    bench_report(scratch ? "cache_scratch" : "cache_thrash", ops, seconds, (unsigned)threads,
                 "mode=%s iterations=%" PRIu64 " size=%" PRIu64 " repetitions=%" PRIu64
                 " seed=%" PRIu64 " writes=%" PRIu64,
                 argv[1], iterations, size, repetitions, seed,
                 threads * iterations * repetitions * size);
    return 0;
}
