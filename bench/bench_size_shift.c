/* bench_size_shift [CYCLES [LIVE_MIB [TURNOVER [SEED]]]]
 *
 * A program whose size mix shifts: CYCLES times (default 40) it runs three
 * phases, each allocating blocks of log-uniform sizes in its own band:
 *   small   64 B-1 KiB,   medium   2-16 KiB,   large   100-500 KiB.
 * Live bytes stay near LIVE_MIB (default 32): while below it a phase
 * allocates a block of its mix, otherwise it frees a live block picked at
 * random, whatever phase made it, so each phase slowly replaces the last
 * one's blocks and the live mix moves from band to band. A phase ends after
 * allocating TURNOVER (default 2) times LIVE_MIB. Every block gets a tag
 * byte on each page, checked when it is freed. The memory a class frees
 * must serve the next phase's classes:
 * an allocator that keeps it per class pays in peak RSS, one that returns
 * it and faults fresh pages pays in minor faults (minflt=N). Ops: malloc and
 * free calls. */
#include "bench_common.h"

#define USAGE \
    "bench_size_shift [CYCLES [LIVE_MIB [TURNOVER [SEED]]]]  (defaults: 40, 32, 2, 42)"

#define KIB ((size_t)1024)

typedef struct {
    void *block;
    uint32_t size;
    uint8_t tag;
} live_block;

/* The live blocks, densely packed: a free swaps the last one into its hole. */
typedef struct {
    live_block *blocks;
    size_t count, capacity;
    size_t bytes;
    uint64_t serial; /* blocks allocated so far: gives each its tag */
} live_set;

typedef struct {
    const char *name;
    size_t min, max;
} phase;

static const phase phases[] = {
    { "small", 64, KIB },
    { "medium", 2 * KIB, 16 * KIB },
    { "large", 100 * KIB, 500 * KIB },
};

static void add_block(live_set *set, size_t size) {
    if (set->count == set->capacity) {
        set->capacity = set->capacity ? 2 * set->capacity : 1024;
        set->blocks = realloc(set->blocks, set->capacity * sizeof *set->blocks);
        if (!set->blocks)
            bench_fail("realloc of %zu live blocks failed", set->capacity);
    }
    live_block b = { bench_malloc(size), (uint32_t)size, bench_slot_tag(set->serial++, size) };
    bench_fill(b.block, size, b.tag);
    set->blocks[set->count++] = b;
    set->bytes += size;
}

static void remove_block(live_set *set, size_t index) {
    live_block b = set->blocks[index];
    bench_check_free(b.block, b.size, b.tag);
    set->blocks[index] = set->blocks[--set->count];
    set->bytes -= b.size;
}

/* One phase; returns the allocator calls it made. */
static uint64_t run_phase(live_set *set, const phase *p, size_t live, size_t budget,
                          bench_rng *rng) {
    uint64_t ops = 0;
    size_t allocated = 0;
    while (allocated < budget) {
        if (set->bytes < live) {
            size_t size = bench_rng_log_size(rng, p->min, p->max);
            add_block(set, size);
            allocated += size;
        } else {
            remove_block(set, (size_t)bench_rng_below(rng, set->count));
        }
        ops++;
    }
    return ops;
}

int main(int argc, char **argv) {
    if (argc > 5)
        bench_usage_error("expected 0 to 4 arguments", USAGE);
    uint64_t cycles = argc > 1 ? bench_arg_u64(argv[1], "CYCLES", USAGE) : 40;
    uint64_t live_mib = argc > 2 ? bench_arg_u64(argv[2], "LIVE_MIB", USAGE) : 32;
    uint64_t turnover = argc > 3 ? bench_arg_u64(argv[3], "TURNOVER", USAGE) : 2;
    uint64_t seed = argc > 4 ? bench_arg_u64(argv[4], "SEED", USAGE) : 42;
    if (live_mib == 0 || live_mib > (1u << 20) || turnover == 0 || turnover > 1000)
        bench_usage_error("need 1 <= LIVE_MIB <= 2^20 and 1 <= TURNOVER <= 1000", USAGE);

    size_t live = (size_t)live_mib << 20;
    live_set set = { 0 };
    bench_rng rng = bench_rng_make(seed, 0);
    uint64_t ops = 0;
    double start = bench_now();
    for (uint64_t c = 0; c < cycles; c++)
        for (size_t p = 0; p < sizeof phases / sizeof phases[0]; p++)
            ops += run_phase(&set, &phases[p], live, live * turnover, &rng);
    while (set.count) {
        remove_block(&set, set.count - 1);
        ops++;
    }
    double seconds = bench_now() - start;
    free(set.blocks);

    bench_report("size_shift", ops, seconds, 1,
                 "cycles=%" PRIu64 " live_mib=%" PRIu64 " turnover=%" PRIu64 " seed=%" PRIu64,
                 cycles, live_mib, turnover, seed);
    return 0;
}
