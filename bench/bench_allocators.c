/* bench_allocators --scenario NAME [--iterations N] [--threads T] [--seed S]
 *
 * Scenarios that cover the allocator's tiers; ITERATIONS counts per thread
 * (per producer/consumer pair for prodcons), THREADS run the scenario side by
 * side (default 1):
 *   mixed          256 slots churned at random with the seeds' mix of sizes:
 *                  16 B, 512 B, 1 KiB, 8 KiB and 128 KiB, equally often;
 *   mid64k         64 slots churned with 64 KiB-heavy sizes: half exactly
 *                  64 KiB, the rest 32, 48, 80 and 128 KiB;
 *   large_realloc  4 slots of large blocks: a new block gets 1-2 MiB, a held
 *                  one grows by realloc by 25-100% until it passes 16 MiB and
 *                  is freed; content is checked across every realloc;
 *   prodcons       a producer allocates 16-1024 B blocks and passes them
 *                  through a bounded queue to a consumer that checks and
 *                  frees them: every free is a cross-thread free.
 * An op is one malloc, realloc or free call. */
#include <sched.h>
#include <stdatomic.h>

#include "bench_common.h"

#define USAGE                                                                      \
    "bench_allocators --scenario mixed|mid64k|large_realloc|prodcons "             \
    "[--iterations N] [--threads T] [--seed S]"

#define KIB ((size_t)1024)
#define MIB (KIB * KIB)
#define QUEUE_CAPACITY 1024
#define QUEUE_BATCH 64

/* A single-producer single-consumer ring of blocks in flight. */
typedef struct {
    _Alignas(64) atomic_size_t head; /* next slot the producer writes */
    _Alignas(64) atomic_size_t tail; /* next slot the consumer reads */
    _Alignas(64) bench_slot items[QUEUE_CAPACITY];
} queue;

/* One thread's state, on a cache line of its own (no false sharing between
 * workers). */
typedef struct {
    _Alignas(64) pthread_barrier_t *start;
    uint64_t iters;
    bench_rng rng;
    queue *queue;  /* prodcons: shared by a producer (even index) and a consumer */
    bool producer;
    uint64_t ops;
} worker;

typedef struct {
    const char *name;
    uint64_t default_iters;
    bool paired; /* each unit of --threads is a producer and a consumer */
    void (*body)(worker *w);
} scenario;

/* ---- mixed and mid64k: a churned working set ---------------------------------- */

static void churn(worker *w, size_t slot_count, const size_t *table, size_t table_len) {
    bench_slot *slots = calloc(slot_count, sizeof *slots);
    if (!slots)
        bench_fail("calloc of %zu slots failed", slot_count);
    bench_sizes sizes = { 0, 0, table, table_len };
    bench_slots_churn(slots, slot_count, w->iters, &sizes, &w->rng);
    bench_slots_release(slots, slot_count);
    free(slots);
    w->ops = w->iters;
}

static void run_mixed(worker *w) {
    static const size_t mix[] = { 16, 512, 1 * KIB, 8 * KIB, 128 * KIB };
    churn(w, 256, mix, sizeof mix / sizeof mix[0]);
}

static void run_mid64k(worker *w) {
    static const size_t mix[] = { 64 * KIB, 64 * KIB, 64 * KIB, 64 * KIB,
                                  32 * KIB, 48 * KIB, 80 * KIB, 128 * KIB };
    churn(w, 64, mix, sizeof mix / sizeof mix[0]);
}

/* ---- large_realloc: large blocks grown by realloc ------------------------------- */

/* One call on a slot: allocate a block, grow it, or (past the limit) free it. */
static void large_step(bench_slot *s, uint8_t tag, bench_rng *rng) {
    const size_t limit = 16 * MIB;
    if (!s->block) {
        s->size = (uint32_t)bench_rng_size(rng, 1 * MIB, 2 * MIB);
        s->block = bench_malloc(s->size);
        bench_fill(s->block, s->size, tag);
        return;
    }
    size_t grown = s->size + s->size / 100 * bench_rng_size(rng, 25, 100);
    if (grown > limit) {
        bench_check_free(s->block, s->size, tag);
        s->block = NULL;
        return;
    }
    void *moved = realloc(s->block, grown);
    if (!moved)
        bench_fail("realloc(%zu) failed", grown);
    if (!bench_check(moved, s->size, tag))
        bench_fail("memory check failed: realloc from %u to %zu bytes lost content", s->size,
                   grown);
    s->block = moved;
    s->size = (uint32_t)grown;
    bench_fill(s->block, s->size, tag);
}

static void run_large_realloc(worker *w) {
    enum { slot_count = 4 };
    bench_slot slots[slot_count] = { 0 };
    for (uint64_t i = 0; i < w->iters; i++) {
        size_t index = (size_t)bench_rng_below(&w->rng, slot_count);
        large_step(&slots[index], (uint8_t)(0x3C + index), &w->rng);
    }
    for (size_t i = 0; i < slot_count; i++)
        if (slots[i].block)
            bench_check_free(slots[i].block, slots[i].size, (uint8_t)(0x3C + i));
    w->ops = w->iters;
}

/* ---- prodcons: cross-thread frees through a bounded queue ----------------------- */

static void backoff(unsigned *spins) {
    if (++*spins % 64 == 0)
        sched_yield();
}

/* Both sides publish their index every QUEUE_BATCH items and before they
 * wait, so blocks cross in batches and whoever waits has published all. */
static void produce(worker *w) {
    queue *q = w->queue;
    size_t tail_seen = 0;
    for (size_t head = 0; head < w->iters; head++) {
        size_t size = bench_rng_size(&w->rng, 16, 1024);
        bench_slot item = { bench_malloc(size), (uint32_t)size };
        bench_fill(item.block, size, bench_slot_tag(head, size));
        unsigned spins = 0;
        while (head - tail_seen == QUEUE_CAPACITY) {
            atomic_store_explicit(&q->head, head, memory_order_release);
            backoff(&spins);
            tail_seen = atomic_load_explicit(&q->tail, memory_order_acquire);
        }
        q->items[head % QUEUE_CAPACITY] = item;
        if ((head + 1) % QUEUE_BATCH == 0)
            atomic_store_explicit(&q->head, head + 1, memory_order_release);
    }
    atomic_store_explicit(&q->head, w->iters, memory_order_release);
    w->ops = w->iters;
}

static void consume(worker *w) {
    queue *q = w->queue;
    size_t head_seen = 0;
    for (size_t tail = 0; tail < w->iters; tail++) {
        unsigned spins = 0;
        while (tail == head_seen) {
            atomic_store_explicit(&q->tail, tail, memory_order_release);
            backoff(&spins);
            head_seen = atomic_load_explicit(&q->head, memory_order_acquire);
        }
        bench_slot item = q->items[tail % QUEUE_CAPACITY];
        bench_check_free(item.block, item.size, bench_slot_tag(tail, item.size));
        if ((tail + 1) % QUEUE_BATCH == 0)
            atomic_store_explicit(&q->tail, tail + 1, memory_order_release);
    }
    w->ops = w->iters;
}

static void run_prodcons(worker *w) {
    if (w->producer)
        produce(w);
    else
        consume(w);
}

/* ---- driver ------------------------------------------------------------------------ */

static const scenario scenarios[] = {
    { "mixed", 2000000, false, run_mixed },
    { "mid64k", 1000000, false, run_mid64k },
    { "large_realloc", 2000, false, run_large_realloc },
    { "prodcons", 2000000, true, run_prodcons },
};

static const scenario *find_scenario(const char *name) {
    for (size_t i = 0; i < sizeof scenarios / sizeof scenarios[0]; i++)
        if (strcmp(scenarios[i].name, name) == 0)
            return &scenarios[i];
    bench_usage_error("unknown scenario", USAGE);
    return NULL;
}

static const scenario *current;

static void *worker_main(void *arg) {
    worker *w = arg;
    pthread_barrier_wait(w->start);
    current->body(w);
    return NULL;
}

static queue *make_queue(void) {
    queue *q = aligned_alloc(64, sizeof *q);
    if (!q)
        bench_fail("aligned_alloc of a queue failed");
    atomic_init(&q->head, 0);
    atomic_init(&q->tail, 0);
    return q;
}

/* Sets up the workers (a queue per pair for prodcons) and runs them. */
static double run_scenario(worker *workers, size_t count, uint64_t iters, uint64_t seed) {
    static pthread_barrier_t start;
    for (size_t i = 0; i < count; i++) {
        queue *q = NULL;
        if (current->paired)
            q = i % 2 == 0 ? make_queue() : workers[i - 1].queue;
        workers[i] = (worker){ &start, iters, bench_rng_make(seed, i), q, i % 2 == 0, 0 };
    }
    double seconds = bench_run_team(&start, count, worker_main, workers, sizeof *workers);
    for (size_t i = 0; current->paired && i < count; i += 2)
        free(workers[i].queue);
    return seconds;
}

int main(int argc, char **argv) {
    const char *name = NULL;
    uint64_t iters = 0, units = 1, seed = 42;
    for (int i = 1; i < argc; i += 2) {
        if (i + 1 >= argc)
            bench_usage_error("every option takes a value", USAGE);
        if (strcmp(argv[i], "--scenario") == 0)
            name = argv[i + 1];
        else if (strcmp(argv[i], "--iterations") == 0)
            iters = bench_arg_u64(argv[i + 1], "--iterations", USAGE);
        else if (strcmp(argv[i], "--threads") == 0)
            units = bench_arg_u64(argv[i + 1], "--threads", USAGE);
        else if (strcmp(argv[i], "--seed") == 0)
            seed = bench_arg_u64(argv[i + 1], "--seed", USAGE);
        else
            bench_usage_error("unknown option", USAGE);
    }
    if (!name)
        bench_usage_error("--scenario is required", USAGE);
    current = find_scenario(name);
    if (units == 0 || units > 512)
        bench_usage_error("need 1 <= THREADS <= 512", USAGE);
    if (iters == 0)
        iters = current->default_iters;

    size_t count = (size_t)units * (current->paired ? 2 : 1);
    worker *workers = aligned_alloc(64, count * sizeof *workers);
    if (workers)
        memset(workers, 0, count * sizeof *workers);
    if (!workers)
        bench_fail("calloc of %zu workers failed", count);
    double seconds = run_scenario(workers, count, iters, seed);
    uint64_t ops = 0;
    for (size_t i = 0; i < count; i++)
        ops += workers[i].ops;
    free(workers);
    bench_report("allocators", ops, seconds, (unsigned)count,
                 "scenario=%s iters=%" PRIu64 " seed=%" PRIu64, name, iters, seed);
    return 0;
}
