/* bench_batch THREADS ROUNDS [BATCH [MIN MAX [REMOTE_PCT [SEED]]]]
 *
 * Batch allocate-then-free in the shape of SmartHeap's sh8bench, written
 * from its published description: each of THREADS threads, ROUNDS times,
 * allocates a long batch of BATCH blocks (default 4000) of random sizes in
 * [MIN, MAX] (default 1-1000 B, as shbench's), writes them, then frees them in the
 * order they were allocated — except about REMOTE_PCT percent of them
 * (default 20), chosen at random, which it sends in one parcel to the next
 * thread; that thread checks and frees them at the start of its next round
 * (or at the end). A thread's cache of free blocks smaller than its batches
 * is refilled and spilled over and over. Ops: every malloc and free call,
 * including the parcels' own. */
#include <stdatomic.h>

#include "bench_common.h"

#define USAGE                                                                        \
    "bench_batch THREADS ROUNDS [BATCH [MIN MAX [REMOTE_PCT [SEED]]]]  (defaults: " \
    "BATCH 4000, MIN 1, MAX 1000, REMOTE_PCT 20, SEED 42)"

typedef struct {
    void *block;
    uint32_t size;
    uint8_t tag;
} parcel_item;

/* Blocks one thread sends another to free, linked on the receiver's inbox. */
typedef struct parcel {
    struct parcel *next;
    size_t count;
    parcel_item items[];
} parcel;

/* One thread's state, on a cache line of its own. */
typedef struct {
    _Alignas(64) _Atomic(parcel *) inbox; /* parcels sent to this thread */
    pthread_barrier_t *start, *finished;
    _Atomic(parcel *) *next_inbox;        /* the successor's inbox */
    uint64_t rounds;
    size_t batch, min, max;
    unsigned remote_pct;
    bench_rng rng;
    uint64_t ops;
} worker_args;

static uint8_t block_tag(uint64_t round, size_t index, size_t size) {
    return bench_slot_tag(index + (size_t)round * 3, size);
}

/* Checks and frees every block of every parcel waiting in the inbox. */
static void drain(worker_args *w) {
    parcel *p = atomic_exchange_explicit(&w->inbox, NULL, memory_order_acquire);
    while (p) {
        parcel *next = p->next;
        for (size_t i = 0; i < p->count; i++)
            bench_check_free(p->items[i].block, p->items[i].size, p->items[i].tag);
        w->ops += p->count + 1;
        free(p);
        p = next;
    }
}

static void send(worker_args *w, parcel *p) {
    p->next = atomic_load_explicit(w->next_inbox, memory_order_relaxed);
    while (!atomic_compare_exchange_weak_explicit(w->next_inbox, &p->next, p,
                                                  memory_order_release, memory_order_relaxed))
        ;
}

/* One round: allocate the batch, free it in order, send the chosen few. */
static void round_trip(worker_args *w, uint64_t round, bench_slot *blocks, bool *remote) {
    size_t remote_count = 0;
    for (size_t i = 0; i < w->batch; i++) {
        size_t size = bench_rng_size(&w->rng, w->min, w->max);
        blocks[i] = (bench_slot){ bench_malloc(size), (uint32_t)size };
        bench_fill(blocks[i].block, size, block_tag(round, i, size));
        remote[i] = bench_rng_below(&w->rng, 100) < w->remote_pct;
        remote_count += remote[i];
    }
    parcel *p = NULL;
    if (remote_count) {
        p = bench_malloc(sizeof *p + remote_count * sizeof p->items[0]);
        p->count = 0;
        w->ops++;
    }
    for (size_t i = 0; i < w->batch; i++) {
        uint8_t tag = block_tag(round, i, blocks[i].size);
        if (remote[i])
            p->items[p->count++] = (parcel_item){ blocks[i].block, blocks[i].size, tag };
        else
            bench_check_free(blocks[i].block, blocks[i].size, tag);
    }
    w->ops += w->batch + (w->batch - remote_count);
    if (p)
        send(w, p);
}

static void *worker(void *arg) {
    worker_args *w = arg;
    bench_slot *blocks = calloc(w->batch, sizeof *blocks);
    bool *remote = calloc(w->batch, sizeof *remote);
    if (!blocks || !remote)
        bench_fail("calloc of a batch of %zu failed", w->batch);
    pthread_barrier_wait(w->start);
    for (uint64_t round = 0; round < w->rounds; round++) {
        drain(w);
        round_trip(w, round, blocks, remote);
    }
    pthread_barrier_wait(w->finished); /* every parcel has been sent */
    drain(w);
    free(blocks);
    free(remote);
    return NULL;
}

int main(int argc, char **argv) {
    if (argc != 3 && argc != 4 && argc != 6 && argc != 7 && argc != 8)
        bench_usage_error("expected 2, 3, 5, 6 or 7 arguments", USAGE);
    uint64_t threads = bench_arg_u64(argv[1], "THREADS", USAGE);
    uint64_t rounds = bench_arg_u64(argv[2], "ROUNDS", USAGE);
    uint64_t batch = argc > 3 ? bench_arg_u64(argv[3], "BATCH", USAGE) : 4000;
    uint64_t min = argc > 4 ? bench_arg_u64(argv[4], "MIN", USAGE) : 1;
    uint64_t max = argc > 4 ? bench_arg_u64(argv[5], "MAX", USAGE) : 1000;
    uint64_t remote_pct = argc > 6 ? bench_arg_u64(argv[6], "REMOTE_PCT", USAGE) : 20;
    uint64_t seed = argc > 7 ? bench_arg_u64(argv[7], "SEED", USAGE) : 42;
    if (threads == 0 || threads > 1024 || batch == 0 || batch > (1u << 24) || min == 0 ||
        min > max || max > UINT32_MAX || remote_pct > 100)
        bench_usage_error("need 1 <= THREADS <= 1024, 1 <= BATCH <= 2^24, "
                          "0 < MIN <= MAX < 4 GiB and REMOTE_PCT <= 100", USAGE);

    worker_args *args = aligned_alloc(64, threads * sizeof *args);
    if (!args)
        bench_fail("aligned_alloc of %" PRIu64 " workers failed", threads);
    pthread_barrier_t start, finished;
    pthread_barrier_init(&finished, NULL, (unsigned)threads);
    for (uint64_t t = 0; t < threads; t++) {
        args[t] = (worker_args){ NULL, &start, &finished, &args[(t + 1) % threads].inbox, rounds,
                                 (size_t)batch, (size_t)min, (size_t)max, (unsigned)remote_pct,
                                 bench_rng_make(seed, t), 0 };
    }
    double seconds = bench_run_team(&start, threads, worker, args, sizeof args[0]);
    pthread_barrier_destroy(&finished);
    uint64_t ops = 0;
    for (uint64_t t = 0; t < threads; t++)
        ops += args[t].ops;
    free(args);

    bench_report("batch", ops, seconds, (unsigned)threads,
                 "rounds=%" PRIu64 " batch=%" PRIu64 " min=%" PRIu64 " max=%" PRIu64
                 " remote_pct=%" PRIu64 " seed=%" PRIu64,
                 rounds, batch, min, max, remote_pct, seed);
    return 0;
}
