/* bench_random_mixed ITERS WS [MIN MAX [SEED]]
 *
 * Random allocation and free over WS live slots in one thread: each
 * iteration picks a random slot; a full slot has its block checked and freed,
 * an empty one gets a block of a random size in [MIN, MAX] (default
 * 16-1040 B) with its pattern written. One iteration is one op. */
#include "bench_common.h"

#define USAGE "bench_random_mixed ITERS WS [MIN MAX [SEED]]  (defaults: MIN 16, MAX 1040, SEED 42)"

int main(int argc, char **argv) {
    if (argc != 3 && argc != 5 && argc != 6)
        bench_usage_error("expected 2, 4 or 5 arguments", USAGE);
    uint64_t iters = bench_arg_u64(argv[1], "ITERS", USAGE);
    uint64_t ws = bench_arg_u64(argv[2], "WS", USAGE);
    uint64_t min = argc > 3 ? bench_arg_u64(argv[3], "MIN", USAGE) : 16;
    uint64_t max = argc > 3 ? bench_arg_u64(argv[4], "MAX", USAGE) : 1040;
    uint64_t seed = argc > 5 ? bench_arg_u64(argv[5], "SEED", USAGE) : 42;
    if (ws == 0 || min == 0 || min > max || max > UINT32_MAX)
        bench_usage_error("need WS > 0 and 0 < MIN <= MAX < 4 GiB", USAGE);

    bench_slot *slots = calloc(ws, sizeof *slots);
    if (!slots)
        bench_fail("calloc of %" PRIu64 " slots failed", ws);
    bench_rng rng = bench_rng_make(seed, 0);

    double start = bench_now();
    bench_sizes sizes = { min, max, NULL, 0 };
    bench_slots_churn(slots, ws, iters, &sizes, &rng);
    double seconds = bench_now() - start;

    bench_slots_release(slots, ws);
    free(slots);
    bench_report("random_mixed", iters, seconds, 1,
                 "iters=%" PRIu64 " ws=%" PRIu64 " min=%" PRIu64 " max=%" PRIu64 " seed=%" PRIu64,
                 iters, ws, min, max, seed);
    return 0;
}
