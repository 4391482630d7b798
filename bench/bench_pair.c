/* bench_pair SIZE N BATCH — the cost of one malloc + free pair: N blocks of
 * SIZE bytes, allocated BATCH at a time (BATCH mallocs, then the BATCH frees
 * in the same order), nothing else in the loop. Meant to be counted under
 * `valgrind --tool=callgrind` by `hakmem pairs`, which runs it twice, with N
 * and with N = 0, and divides the difference by N: what is left is the
 * allocator's instructions per pair (and the loop's own few), net of
 * start-up, of the first call's set-up and of the result line. */
#include "bench_common.h"

#define PAIR_MAX_BATCH 4096u

static const char *usage = "bench_pair SIZE N BATCH  (N a multiple of BATCH, BATCH 1..4096)";

int main(int argc, char **argv) {
    if (argc != 4)
        bench_usage_error("expected 3 arguments", usage);
    uint64_t size = bench_arg_u64(argv[1], "SIZE", usage);
    uint64_t n = bench_arg_u64(argv[2], "N", usage);
    uint64_t batch = bench_arg_u64(argv[3], "BATCH", usage);
    if (batch < 1 || batch > PAIR_MAX_BATCH)
        bench_usage_error("BATCH must be 1..4096", usage);
    if (n % batch)
        bench_usage_error("N must be a multiple of BATCH", usage);
    static void *blocks[PAIR_MAX_BATCH];
    uintptr_t mix = 0;
    double begin = bench_now();
    for (uint64_t done = 0; done < n; done += batch) {
        for (uint64_t j = 0; j < batch; j++) {
            blocks[j] = malloc(size);
            mix ^= (uintptr_t)blocks[j];
        }
        for (uint64_t j = 0; j < batch; j++)
            free(blocks[j]);
    }
    double seconds = bench_now() - begin;
    /* The addresses' parity keeps the compiler from dropping the loop. */
    bench_report("pair", 2 * n, seconds, 1, "size=%" PRIu64 " batch=%" PRIu64 " pairs=%" PRIu64
                 " parity=%u", size, batch, n, (unsigned)(mix & 1));
    return 0;
}
