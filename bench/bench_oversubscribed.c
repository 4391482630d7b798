/* bench_oversubscribed THREADS SPINNERS ITERS [SLOTS [SEED]]
 *
 * Allocator locks on a machine with more runnable threads than cores:
 * SPINNERS CPU-bound threads that never allocate spin from before the start
 * to the end, beside THREADS allocating threads. Each allocating thread
 * churns its own SLOTS slots (default 16) for ITERS iterations: a full slot
 * has its block checked and freed, an empty one gets a new block, half of
 * them small (16 B-1 KiB), the other half from the allocator's locked slow
 * paths — 40 KiB-1 MiB (70% of those) and 1-4 MiB. A block gets its tag in
 * its first and last bytes only, so the time is the allocator's and not that
 * of touching megabytes. A lock whose waiter spins or yields while the
 * holder is preempted burns the waiter's time slice; one that sleeps gives
 * it to the holder. The result is the allocating threads' rate (ops = THREADS
 * * ITERS over the time until the last of them is done); spin_mloops=N says
 * how much the spinners got done meanwhile (millions of loop turns). */
#include <sched.h>
#include <stdatomic.h>

#include "bench_common.h"

#define USAGE \
    "bench_oversubscribed THREADS SPINNERS ITERS [SLOTS [SEED]]  (defaults: SLOTS 16, SEED 42)"

#define KIB ((size_t)1024)
#define MIB (KIB * KIB)

/* One allocating thread's arguments, on a cache line of its own. */
typedef struct {
    _Alignas(64) pthread_barrier_t *start;
    uint64_t iters;
    size_t slot_count;
    bench_rng rng;
} worker_args;


static size_t pick_size(bench_rng *rng) {
    uint64_t r = bench_rng_below(rng, 100);
    if (r < 50)
        return bench_rng_log_size(rng, 16, KIB);
    if (r < 85)
        return bench_rng_log_size(rng, 40 * KIB, MIB);
    return bench_rng_size(rng, MIB + 1, 4 * MIB);
}

static void write_ends(void *block, size_t size, uint8_t tag) {
    unsigned char *p = block;
    p[0] = tag;
    p[size - 1] = (unsigned char)(tag ^ 0x5A);
}

static void check_free_ends(bench_slot *s, uint8_t tag) {
    const unsigned char *p = s->block;
    if (p[0] != tag || p[s->size - 1] != (unsigned char)(tag ^ 0x5A))
        bench_fail("memory check failed: block %p of %u bytes was overwritten", s->block, s->size);
    free(s->block);
    s->block = NULL;
}

static void *worker(void *arg) {
    worker_args *w = arg;
    bench_slot *slots = calloc(w->slot_count, sizeof *slots);
    if (!slots)
        bench_fail("calloc of %zu slots failed", w->slot_count);
    pthread_barrier_wait(w->start);
    for (uint64_t i = 0; i < w->iters; i++) {
        size_t index = (size_t)bench_rng_below(&w->rng, w->slot_count);
        bench_slot *s = &slots[index];
        if (s->block) {
            check_free_ends(s, bench_slot_tag(index, s->size));
        } else {
            size_t size = pick_size(&w->rng);
            *s = (bench_slot){ bench_malloc(size), (uint32_t)size };
            write_ends(s->block, size, bench_slot_tag(index, size));
        }
    }
    for (size_t i = 0; i < w->slot_count; i++)
        if (slots[i].block)
            check_free_ends(&slots[i], bench_slot_tag(i, slots[i].size));
    free(slots);
    return NULL;
}

int main(int argc, char **argv) {
    if (argc < 4 || argc > 6)
        bench_usage_error("expected 3 to 5 arguments", USAGE);
    uint64_t threads = bench_arg_u64(argv[1], "THREADS", USAGE);
    uint64_t spinners = bench_arg_u64(argv[2], "SPINNERS", USAGE);
    uint64_t iters = bench_arg_u64(argv[3], "ITERS", USAGE);
    uint64_t slot_count = argc > 4 ? bench_arg_u64(argv[4], "SLOTS", USAGE) : 16;
    uint64_t seed = argc > 5 ? bench_arg_u64(argv[5], "SEED", USAGE) : 42;
    if (threads == 0 || threads > 1024 || spinners > 1024 || slot_count == 0 ||
        slot_count > (1u << 20))
        bench_usage_error("need 1 <= THREADS <= 1024, SPINNERS <= 1024 and "
                          "1 <= SLOTS <= 2^20", USAGE);

    bench_spinners_start(spinners);
    worker_args args[threads];
    pthread_barrier_t start;
    for (uint64_t t = 0; t < threads; t++)
        args[t] = (worker_args){ &start, iters, (size_t)slot_count, bench_rng_make(seed, t) };
    double seconds = bench_run_team(&start, threads, worker, args, sizeof args[0]);
    uint64_t loops = bench_spinners_stop();

    bench_report("oversubscribed", threads * iters, seconds, (unsigned)threads,
                 "spinners=%" PRIu64 " iters=%" PRIu64 " slots=%" PRIu64 " seed=%" PRIu64
                 " spin_mloops=%" PRIu64,
                 spinners, iters, slot_count, seed, loops / 1000000);
    return 0;
}
