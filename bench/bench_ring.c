/* bench_ring THREADS BATCHES [BATCH [MIN MAX [SEED]]]
 *
 * Cross-thread producer/consumer with mixed sizes: THREADS threads stand in
 * a ring. Each allocates BATCHES batches of BATCH blocks (default 256) of
 * log-uniform sizes in [MIN, MAX] (default 16 B-8 KiB), writes each block's
 * pattern and hands the batch to the next thread in the ring, which checks
 * and frees every block: every free is a cross-thread free, and every
 * thread is producer and consumer at once (as in mimalloc-bench's xmalloc
 * and the producer/consumer tests of Hoard's suite). A thread waits only
 * when its successor has DEPTH batches not yet consumed, and while it waits
 * it consumes its own incoming batches, so the ring cannot deadlock.
 * Ops: THREADS * BATCHES * BATCH mallocs and as many frees. */
#include <sched.h>
#include <stdatomic.h>

#include "bench_common.h"

#define USAGE                                                                   \
    "bench_ring THREADS BATCHES [BATCH [MIN MAX [SEED]]]  (defaults: BATCH 256, " \
    "MIN 16, MAX 8192, SEED 42)"

enum { DEPTH = 4 }; /* batches in flight between two neighbours */

/* The batches one thread sends its successor: a single-producer,
 * single-consumer ring of DEPTH batch arrays, allocated once at the start. */
typedef struct {
    _Alignas(64) atomic_uint_fast64_t head; /* batches published */
    _Alignas(64) atomic_uint_fast64_t tail; /* batches consumed */
    _Alignas(64) bench_slot *batches[DEPTH];
} mailbox;

/* One thread's state, on a cache line of its own. */
typedef struct {
    _Alignas(64) pthread_barrier_t *start;
    mailbox *in, *out;
    uint64_t batches;
    size_t batch, min, max;
    bench_rng rng;
} worker_args;

static uint8_t block_tag(uint64_t sequence, size_t index, size_t size) {
    return bench_slot_tag((size_t)sequence * 7 + index, size);
}

static void produce(worker_args *w, uint64_t sequence) {
    bench_slot *items = w->out->batches[sequence % DEPTH];
    for (size_t i = 0; i < w->batch; i++) {
        size_t size = bench_rng_log_size(&w->rng, w->min, w->max);
        items[i] = (bench_slot){ bench_malloc(size), (uint32_t)size };
        bench_fill(items[i].block, size, block_tag(sequence, i, size));
    }
    atomic_store_explicit(&w->out->head, sequence + 1, memory_order_release);
}

static void consume(worker_args *w, uint64_t sequence) {
    bench_slot *items = w->in->batches[sequence % DEPTH];
    for (size_t i = 0; i < w->batch; i++)
        bench_check_free(items[i].block, items[i].size, block_tag(sequence, i, items[i].size));
    atomic_store_explicit(&w->in->tail, sequence + 1, memory_order_release);
}

static void backoff(unsigned *idle) {
    if (++*idle % 8 == 0)
        sched_yield();
#if defined(__x86_64__) || defined(__i386__)
    else
        __builtin_ia32_pause();
#endif
}

static void *worker(void *arg) {
    worker_args *w = arg;
    uint64_t sent = 0, received = 0;
    unsigned idle = 0;
    pthread_barrier_wait(w->start);
    while (sent < w->batches || received < w->batches) {
        bool progress = false;
        if (sent < w->batches &&
            sent - atomic_load_explicit(&w->out->tail, memory_order_acquire) < DEPTH) {
            produce(w, sent++);
            progress = true;
        }
        uint64_t ready = atomic_load_explicit(&w->in->head, memory_order_acquire);
        for (; received < ready; received++) {
            consume(w, received);
            progress = true;
        }
        if (progress)
            idle = 0;
        else
            backoff(&idle);
    }
    return NULL;
}

static mailbox *make_mailbox(size_t batch) {
    mailbox *m = aligned_alloc(64, sizeof *m);
    if (!m)
        bench_fail("aligned_alloc of a mailbox failed");
    atomic_init(&m->head, 0);
    atomic_init(&m->tail, 0);
    for (int d = 0; d < DEPTH; d++)
        if (!(m->batches[d] = calloc(batch, sizeof(bench_slot))))
            bench_fail("calloc of a batch of %zu failed", batch);
    return m;
}

static void free_mailbox(mailbox *m) {
    for (int d = 0; d < DEPTH; d++)
        free(m->batches[d]);
    free(m);
}

int main(int argc, char **argv) {
    if (argc != 3 && argc != 4 && argc != 6 && argc != 7)
        bench_usage_error("expected 2, 3, 5 or 6 arguments", USAGE);
    uint64_t threads = bench_arg_u64(argv[1], "THREADS", USAGE);
    uint64_t batches = bench_arg_u64(argv[2], "BATCHES", USAGE);
    uint64_t batch = argc > 3 ? bench_arg_u64(argv[3], "BATCH", USAGE) : 256;
    uint64_t min = argc > 4 ? bench_arg_u64(argv[4], "MIN", USAGE) : 16;
    uint64_t max = argc > 4 ? bench_arg_u64(argv[5], "MAX", USAGE) : 8192;
    uint64_t seed = argc > 6 ? bench_arg_u64(argv[6], "SEED", USAGE) : 42;
    if (threads < 2 || threads > 1024 || batch == 0 || batch > (1u << 24) || min == 0 ||
        min > max || max > UINT32_MAX)
        bench_usage_error("need 2 <= THREADS <= 1024, 1 <= BATCH <= 2^24 and "
                          "0 < MIN <= MAX < 4 GiB", USAGE);

    mailbox *boxes[threads];
    for (uint64_t t = 0; t < threads; t++)
        boxes[t] = make_mailbox((size_t)batch);
    worker_args args[threads];
    pthread_barrier_t start;
    for (uint64_t t = 0; t < threads; t++)
        args[t] = (worker_args){ &start, boxes[(t + threads - 1) % threads], boxes[t], batches,
                                 (size_t)batch, (size_t)min, (size_t)max,
                                 bench_rng_make(seed, t) };
    double seconds = bench_run_team(&start, threads, worker, args, sizeof args[0]);
    for (uint64_t t = 0; t < threads; t++)
        free_mailbox(boxes[t]);

    bench_report("ring", 2 * threads * batches * batch, seconds, (unsigned)threads,
                 "batches=%" PRIu64 " batch=%" PRIu64 " min=%" PRIu64 " max=%" PRIu64
                 " seed=%" PRIu64,
                 batches, batch, min, max, seed);
    return 0;
}
