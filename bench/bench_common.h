/* Shared helpers of the benchmark programs (header-only, C and C++: each bench/NAME.c or .cc is
 * one program, built without hakmem and run under any allocator by LD_PRELOAD).
 *
 * Every program prints one result line on stdout, key=value pairs separated
 * by spaces, always starting with
 *   bench=NAME ops_per_sec=N peak_rss_kb=N seconds=S ops=N threads=N minflt=N
 * followed by the program's parameters (minflt: the process's minor page
 * faults so far, from getrusage). An "op" is one allocator call
 * (malloc, free or realloc). Exit status: 0 success, 1 a memory check or an
 * allocation failed, 2 bad arguments. */
#ifndef BENCH_COMMON_H
#define BENCH_COMMON_H

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#define BENCH_PAGE 4096u

/* ---- deterministic random numbers (splitmix64) ---------------------------- */

typedef struct {
    uint64_t state;
} bench_rng;

static inline uint64_t bench_rng_next(bench_rng *rng) {
    uint64_t z = (rng->state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* A generator for stream `stream` of seed `seed` (threads use their index). */
static inline bench_rng bench_rng_make(uint64_t seed, uint64_t stream) {
    bench_rng rng = { seed ^ (stream * 0xD1B54A32D192ED03ull) };
    bench_rng_next(&rng);
    return rng;
}

/* Uniform in [0, n): the high half of a 64x64-bit product (Lemire). */
static inline uint64_t bench_rng_below(bench_rng *rng, uint64_t n) {
    return (uint64_t)(((unsigned __int128)bench_rng_next(rng) * n) >> 64);
}

/* Uniform in [lo, hi]. */
static inline size_t bench_rng_size(bench_rng *rng, size_t lo, size_t hi) {
    return lo + (size_t)bench_rng_below(rng, (uint64_t)(hi - lo) + 1);
}

/* Log-uniform in [lo, hi] (1 <= lo <= hi): a power-of-two range picked
 * uniformly, then a size uniform inside it, so small sizes are as common
 * per doubling as large ones (each of 16-31 B, 32-63 B, ... 4-8 KiB gets
 * the same share of 16 B-8 KiB). */
static inline size_t bench_rng_log_size(bench_rng *rng, size_t lo, size_t hi) {
    unsigned first = 63u - (unsigned)__builtin_clzll(lo);
    unsigned last = 63u - (unsigned)__builtin_clzll(hi);
    unsigned bits = first + (unsigned)bench_rng_below(rng, last - first + 1);
    size_t from = (size_t)1 << bits, to = bits >= 63 ? SIZE_MAX : ((size_t)2 << bits) - 1;
    return bench_rng_size(rng, from < lo ? lo : from, to > hi ? hi : to);
}

/* ---- failing loudly ------------------------------------------------------- */

static inline void bench_fail(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fputs("bench: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    exit(1);
}

static inline void *bench_malloc(size_t size) {
    void *p = malloc(size);
    if (!p)
        bench_fail("malloc(%zu) failed", size);
    return p;
}

/* ---- memory pattern: a tag byte on every page and a closing byte ----------- */

/* Writes `tag` at offset 0 and at every page boundary inside the block, and
 * tag ^ 0xA5 in its last byte (of a block of two bytes or more), so each page
 * the block spans is touched. */
static inline void bench_fill(void *block, size_t size, uint8_t tag) {
    unsigned char *p = (unsigned char *)block;
    size_t last = size - 1;
    for (size_t off = 0; off < last; off += BENCH_PAGE)
        p[off] = tag;
    p[last] = last ? (unsigned char)(tag ^ 0xA5) : tag;
}

static inline bool bench_check(const void *block, size_t size, uint8_t tag) {
    const unsigned char *p = (const unsigned char *)block;
    size_t last = size - 1;
    for (size_t off = 0; off < last; off += BENCH_PAGE)
        if (p[off] != tag)
            return false;
    return p[last] == (last ? (unsigned char)(tag ^ 0xA5) : tag);
}

/* Checks the pattern and frees the block; exits on a mismatch. */
static inline void bench_check_free(void *block, size_t size, uint8_t tag) {
    if (!bench_check(block, size, tag))
        bench_fail("memory check failed: block %p of %zu bytes was overwritten", block, size);
    free(block);
}

/* ---- block sizes: uniform in a range, or picked from a table --------------- */

typedef struct {
    size_t min, max;     /* uniform in [min, max] when there is no table */
    const size_t *table; /* otherwise one of table[0 .. count), uniformly */
    size_t count;
} bench_sizes;

static inline size_t bench_sizes_pick(const bench_sizes *sizes, bench_rng *rng) {
    if (sizes->table)
        return sizes->table[bench_rng_below(rng, sizes->count)];
    return bench_rng_size(rng, sizes->min, sizes->max);
}

/* ---- a working set of slots, churned at random ----------------------------- */

typedef struct {
    void *block;
    uint32_t size;
} bench_slot;

static inline uint8_t bench_slot_tag(size_t index, size_t size) {
    return (uint8_t)(index * 131u + size);
}

/* Each iteration picks a random slot: a full slot has its block checked and
 * freed, an empty one gets a new block of a size drawn from `sizes`, with its
 * pattern written. One iteration is one allocator call. */
static inline void bench_slots_churn(bench_slot *slots, size_t count, uint64_t iters,
                                     const bench_sizes *sizes, bench_rng *rng) {
    for (uint64_t i = 0; i < iters; i++) {
        size_t index = (size_t)bench_rng_below(rng, count);
        bench_slot *s = &slots[index];
        if (s->block) {
            bench_check_free(s->block, s->size, bench_slot_tag(index, s->size));
            s->block = NULL;
        } else {
            size_t size = bench_sizes_pick(sizes, rng);
            s->block = bench_malloc(size);
            s->size = (uint32_t)size;
            bench_fill(s->block, size, bench_slot_tag(index, size));
        }
    }
}

/* Checks and frees every block still held. */
static inline void bench_slots_release(bench_slot *slots, size_t count) {
    for (size_t i = 0; i < count; i++)
        if (slots[i].block)
            bench_check_free(slots[i].block, slots[i].size, bench_slot_tag(i, slots[i].size));
}

/* ---- time, memory, arguments, result line ----------------------------------- */

static inline double bench_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Peak resident set size of the process in KiB: VmHWM of /proc/self/status.
 * (getrusage's ru_maxrss is the fallback only: Linux carries it over exec, so
 * it reports the launching process's peak when that was larger.) */
static inline long bench_peak_rss_kb(void) {
    long kb = -1;
    char line[256];
    FILE *status = fopen("/proc/self/status", "r");
    if (status) {
        while (kb < 0 && fgets(line, sizeof line, status))
            sscanf(line, "VmHWM: %ld kB", &kb);
        fclose(status);
    }
    if (kb < 0) {
        struct rusage usage;
        getrusage(RUSAGE_SELF, &usage);
        kb = usage.ru_maxrss;
    }
    return kb;
}

/* Minor page faults of the whole process so far (every thread, live or
 * joined). */
static inline long bench_minor_faults(void) {
    struct rusage usage;
    getrusage(RUSAGE_SELF, &usage);
    return usage.ru_minflt;
}

/* Runs fn(args + i * arg_size) in `count` threads. Each thread does its setup
 * and then waits on `start` (initialised here for count + 1 parties); the
 * clock runs from their common release until the last one has returned.
 * Returns the elapsed seconds. */
static inline double bench_run_team(pthread_barrier_t *start, size_t count, void *(*fn)(void *),
                                    void *args, size_t arg_size) {
    pthread_t ids[count];
    pthread_barrier_init(start, NULL, (unsigned)count + 1);
    for (size_t i = 0; i < count; i++)
        if (pthread_create(&ids[i], NULL, fn, (char *)args + i * arg_size) != 0)
            bench_fail("pthread_create failed");
    pthread_barrier_wait(start);
    double begin = bench_now();
    for (size_t i = 0; i < count; i++)
        pthread_join(ids[i], NULL);
    double seconds = bench_now() - begin;
    pthread_barrier_destroy(start);
    return seconds;
}

#ifndef __cplusplus
/* ---- CPU-bound threads beside a benchmark: a busy machine ------------------ */
#include <stdatomic.h>

#define BENCH_SPINNERS_MAX 1024u

/* One spinner's counter, on a cache line of its own. */
typedef struct {
    _Alignas(64) uint64_t loops;
} bench_spin_counter;

struct bench_spin_state {
    atomic_bool stop;
    size_t count;
    pthread_t ids[BENCH_SPINNERS_MAX];
    bench_spin_counter counters[BENCH_SPINNERS_MAX];
};

static inline struct bench_spin_state *bench_spin_state(void) {
    static struct bench_spin_state state;
    return &state;
}

static inline void *bench_spin(void *arg) {
    bench_spin_counter *c = arg;
    volatile uint64_t loops = 0;
    while (!atomic_load_explicit(&bench_spin_state()->stop, memory_order_relaxed))
        for (int i = 0; i < 1000; i++)
            loops++;
    c->loops = loops;
    return NULL;
}

/* Starts n (at most BENCH_SPINNERS_MAX) threads that spin without allocating
 * until bench_spinners_stop. */
static inline void bench_spinners_start(uint64_t n) {
    struct bench_spin_state *s = bench_spin_state();
    atomic_store(&s->stop, false);
    for (s->count = 0; s->count < n; s->count++) {
        s->counters[s->count].loops = 0;
        if (pthread_create(&s->ids[s->count], NULL, bench_spin, &s->counters[s->count]) != 0)
            bench_fail("pthread_create failed");
    }
}

/* Stops the spinners; returns their loop turns, all together. */
static inline uint64_t bench_spinners_stop(void) {
    struct bench_spin_state *s = bench_spin_state();
    atomic_store(&s->stop, true);
    uint64_t loops = 0;
    for (size_t i = 0; i < s->count; i++) {
        pthread_join(s->ids[i], NULL);
        loops += s->counters[i].loops;
    }
    s->count = 0;
    return loops;
}
#endif

/* Parses a whole non-negative decimal argument or exits with the usage text. */
static inline uint64_t bench_arg_u64(const char *text, const char *name, const char *usage) {
    char *end;
    errno = 0;
    unsigned long long value = strtoull(text, &end, 10);
    if (errno || end == text || *end || text[0] == '-') {
        fprintf(stderr, "bench: %s must be a non-negative integer, got '%s'\nusage: %s\n",
                name, text, usage);
        exit(2);
    }
    return value;
}

/* Parses a positive decimal number of seconds (fractions allowed). */
static inline double bench_arg_seconds(const char *text, const char *name, const char *usage) {
    char *end;
    errno = 0;
    double value = strtod(text, &end);
    if (errno || end == text || *end || !(value > 0)) {
        fprintf(stderr, "bench: %s must be a positive number of seconds, got '%s'\nusage: %s\n",
                name, text, usage);
        exit(2);
    }
    return value;
}

static inline void bench_usage_error(const char *message, const char *usage) {
    fprintf(stderr, "bench: %s\nusage: %s\n", message, usage);
    exit(2);
}

/* Prints the result line; `params_fmt` adds the program's own key=value pairs. */
static inline void bench_report(const char *name, uint64_t ops, double seconds, unsigned threads,
                                const char *params_fmt, ...) {
    va_list ap;
    printf("bench=%s ops_per_sec=%.0f peak_rss_kb=%ld seconds=%.6f ops=%" PRIu64
           " threads=%u minflt=%ld ",
           name, seconds > 0 ? (double)ops / seconds : 0.0, bench_peak_rss_kb(), seconds, ops,
           threads, bench_minor_faults());
    va_start(ap, params_fmt);
    vprintf(params_fmt, ap);
    va_end(ap);
    putchar('\n');
    fflush(stdout);
}

#endif
