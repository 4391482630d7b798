/* larson SECONDS MIN MAX CHUNKS_PER_THREAD ROUNDS SEED THREADS
 *
 * The server benchmark of Larson & Krishnan ("Memory allocation for
 * long-running server applications", ISMM 1998), written from its published
 * description; mimalloc-bench runs it as `larson 5 8 1000 5000 100 4141 2`.
 *
 * The main thread first fills THREADS * CHUNKS_PER_THREAD slots with blocks
 * of random sizes in [MIN, MAX], shuffles them and churns them a while (not
 * timed). Each of THREADS threads then owns CHUNKS_PER_THREAD of those slots
 * and repeatedly frees the block of a random slot and allocates a new one of a
 * random size. After ROUNDS * CHUNKS_PER_THREAD replacements the thread
 * starts a successor thread that takes over its slots, live blocks included,
 * and exits: the next generation frees what the previous one allocated. After
 * SECONDS the workers stop; ops are malloc and free calls (two per
 * replacement) over the elapsed time. SECONDS may be fractional. pages= and
 * mixed_pages= (after the run): the 4 KiB pages holding live blocks, and
 * those holding blocks of more than one lineage. */
#include <stdatomic.h>

#include "bench_common.h"

#define USAGE "larson SECONDS MIN MAX CHUNKS_PER_THREAD ROUNDS SEED THREADS"

static atomic_bool stop_requested;

/* One chain of thread generations working on one share of the slots; a
 * cache line of its own, so lineages do not share one (false sharing would
 * measure the benchmark, not the allocator). */
typedef struct {
    _Alignas(64) bench_slot *all; /* every slot; tags use the index in this array */
    size_t first, count;      /* this lineage's share */
    uint64_t per_generation;  /* replacements before handing over */
    size_t min, max;
    bench_rng rng;
    uint64_t ops;             /* malloc + free calls made by all generations */
    uint64_t generations;
    atomic_bool finished;     /* set by the one generation that saw the stop */
} lineage;

static void replace_block(bench_slot *all, size_t index, size_t size) {
    bench_slot *s = &all[index];
    bench_check_free(s->block, s->size, bench_slot_tag(index, s->size));
    s->block = bench_malloc(size);
    s->size = (uint32_t)size;
    bench_fill(s->block, size, bench_slot_tag(index, size));
}

static void *generation(void *arg);

static void start_generation(lineage *line) {
    pthread_t id;
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    if (pthread_create(&id, &attr, generation, line) != 0)
        bench_fail("pthread_create failed");
    pthread_attr_destroy(&attr);
}

static void *generation(void *arg) {
    lineage *line = arg;
    if (!atomic_load_explicit(&stop_requested, memory_order_relaxed)) {
        line->generations++;
        for (uint64_t i = 0; i < line->per_generation; i++) {
            size_t index = line->first + (size_t)bench_rng_below(&line->rng, line->count);
            replace_block(line->all, index, bench_rng_size(&line->rng, line->min, line->max));
            line->ops += 2;
            if (atomic_load_explicit(&stop_requested, memory_order_relaxed))
                break;
        }
    }
    if (atomic_load(&stop_requested))
        atomic_store(&line->finished, true);
    else
        start_generation(line);
    return NULL;
}

/* Fills every slot, shuffles the blocks, then replaces 4 * count of them. */
static void warm_up(bench_slot *all, size_t count, size_t min, size_t max, bench_rng *rng) {
    for (size_t i = 0; i < count; i++) {
        size_t size = bench_rng_size(rng, min, max);
        all[i] = (bench_slot){ bench_malloc(size), (uint32_t)size };
    }
    for (size_t i = count; i > 1; i--) {
        size_t j = (size_t)bench_rng_below(rng, i);
        bench_slot tmp = all[j];
        all[j] = all[i - 1];
        all[i - 1] = tmp;
    }
    for (size_t i = 0; i < count; i++)
        bench_fill(all[i].block, all[i].size, bench_slot_tag(i, all[i].size));
    for (size_t i = 0; i < 4 * count; i++)
        replace_block(all, (size_t)bench_rng_below(rng, count), bench_rng_size(rng, min, max));
}

/* Locality: the 4 KiB pages that hold the start of a live block, and those
 * among them that hold blocks of more than one lineage (an allocator that
 * keeps each thread's blocks apart has none; interleaved lineages spread
 * each thread's working set over more pages and cache lines). Untimed. */
typedef struct { uintptr_t page; size_t lineage; } block_page;

static int by_page(const void *a, const void *b) {
    uintptr_t x = ((const block_page *)a)->page, y = ((const block_page *)b)->page;
    return x < y ? -1 : x > y;
}

static void count_pages(const bench_slot *all, size_t total, size_t chunks, size_t *pages,
                        size_t *mixed) {
    *pages = *mixed = 0;
    block_page *b = malloc(total * sizeof *b);
    if (!b)
        return;
    for (size_t i = 0; i < total; i++)
        b[i] = (block_page){ (uintptr_t)all[i].block >> 12, i / chunks };
    qsort(b, total, sizeof *b, by_page);
    for (size_t i = 0, j; i < total; i = j) {
        bool two = false;
        for (j = i + 1; j < total && b[j].page == b[i].page; j++)
            two |= b[j].lineage != b[i].lineage;
        ++*pages;
        *mixed += two;
    }
    free(b);
}

static void wait_finished(lineage *lines, size_t threads) {
    const struct timespec pause = { 0, 1000000 };
    for (size_t t = 0; t < threads; t++)
        while (!atomic_load(&lines[t].finished))
            nanosleep(&pause, NULL);
}

int main(int argc, char **argv) {
    if (argc != 8)
        bench_usage_error("expected 7 arguments", USAGE);
    double duration = bench_arg_seconds(argv[1], "SECONDS", USAGE);
    uint64_t min = bench_arg_u64(argv[2], "MIN", USAGE);
    uint64_t max = bench_arg_u64(argv[3], "MAX", USAGE);
    uint64_t chunks = bench_arg_u64(argv[4], "CHUNKS_PER_THREAD", USAGE);
    uint64_t rounds = bench_arg_u64(argv[5], "ROUNDS", USAGE);
    uint64_t seed = bench_arg_u64(argv[6], "SEED", USAGE);
    uint64_t threads = bench_arg_u64(argv[7], "THREADS", USAGE);
    if (min == 0 || min > max || max > UINT32_MAX || chunks == 0 || rounds == 0 || threads == 0 ||
        threads > 1024)
        bench_usage_error("need 0 < MIN <= MAX < 4 GiB, CHUNKS and ROUNDS > 0, "
                          "1 <= THREADS <= 1024", USAGE);

    size_t total = (size_t)(threads * chunks);
    bench_slot *all = calloc(total, sizeof *all);
    lineage *lines = aligned_alloc(64, threads * sizeof *lines);
    if (lines)
        memset(lines, 0, threads * sizeof *lines);
    if (!all || !lines)
        bench_fail("calloc of %zu slots failed", total);
    bench_rng main_rng = bench_rng_make(seed, 0);
    warm_up(all, total, min, max, &main_rng);

    double start = bench_now();
    for (uint64_t t = 0; t < threads; t++) {
        lines[t] = (lineage){ all, t * chunks, chunks, rounds * chunks, min, max,
                              bench_rng_make(seed, t + 1), 0, 0, false };
        start_generation(&lines[t]);
    }
    struct timespec run_time = { (time_t)duration, (long)((duration - (time_t)duration) * 1e9) };
    nanosleep(&run_time, NULL);
    atomic_store(&stop_requested, true);
    wait_finished(lines, threads);
    double seconds = bench_now() - start;

    uint64_t ops = 0, generations = 0;
    for (uint64_t t = 0; t < threads; t++) {
        ops += lines[t].ops;
        generations += lines[t].generations;
    }
    size_t pages, mixed;
    count_pages(all, total, (size_t)chunks, &pages, &mixed);
    bench_slots_release(all, total);
    free(all);
    free(lines);
    bench_report("larson", ops, seconds, (unsigned)threads,
                 "duration=%g min=%" PRIu64 " max=%" PRIu64 " chunks=%" PRIu64 " rounds=%" PRIu64
                 " seed=%" PRIu64 " generations=%" PRIu64 " pages=%zu mixed_pages=%zu",
                 duration, min, max, chunks, rounds, seed, generations, pages, mixed);
    return 0;
}
