/* bench_stress THREADS SCALE ITER [SPINNERS [SEED]]
 *
 * The shape of mimalloc's stress test (mimalloc-bench's "mstress"), written
 * from its published description: ITER rounds; each round starts THREADS
 * threads and joins them. Thread t makes 100 * SCALE * (t % 8 + 1) "work"
 * allocations and half as many "kept" ones, in a random mix:
 *   - a work block holds 1, 2, 4, 8 or 16 words, a kept one up to 64; about
 *     one block in 55 is 100 times larger, one in 550 1000 times and one in
 *     5000 10000 times (up to 5 MiB); every block is zero-allocated
 *     (calloc), filled with a pattern and checked when freed;
 *   - after each allocation, two times in three a random work block is
 *     freed, and one time in four a random work block is swapped with one
 *     of 1000 shared transfer slots, so blocks change threads;
 *   - the pointer array of the work blocks grows by realloc, 100,000
 *     entries (800 KB) at a time.
 * At its end a thread frees what it holds; between rounds the main thread
 * frees about half of the transfer slots, so some blocks outlive their
 * threads by a round. Threads die and are replaced every round, and the
 * threads of a round end at very different times (thread 7 does 8 times
 * thread 0's work): memory a thread frees at its exit waits for the next
 * round. SPINNERS CPU-bound threads (default 0) run beside them: a machine
 * busy with other work. Ops: every calloc, realloc and free call. */
#include <stdatomic.h>

#include "bench_common.h"

#define USAGE "bench_stress THREADS SCALE ITER [SPINNERS [SEED]]  (defaults: SPINNERS 0, SEED 42)"
#define TRANSFERS 1000u
#define GROW 100000u                          /* entries the work array grows by */

static const uint64_t cookie = 0xbf58476d1ce4e5b9ull;
static _Atomic(uint64_t *) transfer[TRANSFERS];
static _Atomic uint64_t total_ops;

/* A block of words w[i] = (n - i) ^ cookie: its length is in its first word. */
static uint64_t *block_new(size_t words, bench_rng *rng) {
    uint64_t draw = bench_rng_below(rng, 5000);
    if (draw == 0)
        words *= 10000;
    else if (draw < 10)
        words *= 1000;
    else if (draw < 100)
        words *= 100;
    uint64_t *b = calloc(words, sizeof *b);
    if (!b)
        bench_fail("calloc(%zu, 8) failed", words);
    for (size_t i = 0; i < words; i++)
        b[i] = (words - i) ^ cookie;
    return b;
}

/* Checks and frees b (NULL: nothing); returns the calls made. */
static uint64_t block_free(uint64_t *b) {
    if (!b)
        return 0;
    uint64_t words = b[0] ^ cookie;
    for (uint64_t i = 0; i < words; i++)
        if ((b[i] ^ cookie) != words - i)
            bench_fail("memory check failed: block %p, word %" PRIu64 " of %" PRIu64, (void *)b, i,
                       words);
    free(b);
    return 1;
}

typedef struct {
    size_t id;
    uint64_t scale, seed, round;
} worker_args;

static void *worker(void *arg) {
    const worker_args *a = arg;
    bench_rng rng = bench_rng_make(a->seed, a->round * 4096 + a->id);
    size_t work = 100 * a->scale * (a->id % 8 + 1), keep = work / 2;
    uint64_t **kept = calloc(keep ? keep : 1, sizeof *kept), **held = NULL, ops = 1;
    size_t nkept = 0, nheld = 0, cap = 0;
    if (!kept)
        bench_fail("calloc of the kept array failed");
    while (work || keep) {
        if (!keep || (work && bench_rng_below(&rng, 2) == 0)) {
            work--;
            if (nheld == cap) {
                cap += GROW;
                held = realloc(held, cap * sizeof *held);
                if (!held)
                    bench_fail("realloc of the work array failed");
                ops++;
            }
            held[nheld++] = block_new((size_t)1 << bench_rng_below(&rng, 5), &rng);
        } else {
            keep--;
            kept[nkept++] = block_new((size_t)1 << bench_rng_below(&rng, 7), &rng);
        }
        ops++;
        if (nheld && bench_rng_below(&rng, 3) < 2) {
            size_t i = (size_t)bench_rng_below(&rng, nheld);
            ops += block_free(held[i]);
            held[i] = NULL;
        }
        if (nheld && bench_rng_below(&rng, 4) == 0) {
            size_t i = (size_t)bench_rng_below(&rng, nheld);
            held[i] = atomic_exchange(&transfer[bench_rng_below(&rng, TRANSFERS)], held[i]);
        }
    }
    for (size_t i = 0; i < nkept; i++)
        ops += block_free(kept[i]);
    for (size_t i = 0; i < nheld; i++)
        ops += block_free(held[i]);
    free(kept);
    free(held);
    atomic_fetch_add(&total_ops, ops + 2);
    return NULL;
}

int main(int argc, char **argv) {
    if (argc < 4 || argc > 6)
        bench_usage_error("expected 3 to 5 arguments", USAGE);
    uint64_t threads = bench_arg_u64(argv[1], "THREADS", USAGE);
    uint64_t scale = bench_arg_u64(argv[2], "SCALE", USAGE);
    uint64_t iters = bench_arg_u64(argv[3], "ITER", USAGE);
    uint64_t spinners = argc > 4 ? bench_arg_u64(argv[4], "SPINNERS", USAGE) : 0;
    uint64_t seed = argc > 5 ? bench_arg_u64(argv[5], "SEED", USAGE) : 42;
    if (threads == 0 || threads > 1024 || scale == 0 || scale > 100000 || iters == 0 || spinners > 64)
        bench_usage_error("need 1 <= THREADS <= 1024, 1 <= SCALE <= 100000, ITER >= 1 and "
                          "SPINNERS <= 64", USAGE);

    bench_spinners_start(spinners);
    pthread_t ids[threads];
    worker_args args[threads];
    bench_rng rng = bench_rng_make(seed, 1u << 30);
    uint64_t main_ops = 0;
    double begin = bench_now();
    for (uint64_t round = 0; round < iters; round++) {
        for (uint64_t t = 0; t < threads; t++) {
            args[t] = (worker_args){ (size_t)t, scale, seed, round };
            if (pthread_create(&ids[t], NULL, worker, &args[t]) != 0)
                bench_fail("pthread_create failed");
        }
        for (uint64_t t = 0; t < threads; t++)
            pthread_join(ids[t], NULL);
        for (unsigned i = 0; i < TRANSFERS; i++)
            if (round + 1 == iters || bench_rng_below(&rng, 2) == 0)
                main_ops += block_free(atomic_exchange(&transfer[i], NULL));
    }
    double seconds = bench_now() - begin;
    uint64_t loops = bench_spinners_stop();
    bench_report("stress", atomic_load(&total_ops) + main_ops, seconds, (unsigned)threads,
                 "scale=%" PRIu64 " iter=%" PRIu64 " spinners=%" PRIu64 " seed=%" PRIu64
                 " spin_mloops=%" PRIu64,
                 scale, iters, spinners, seed, loops / 1000000);
    return 0;
}
