/* Thread churn: 5000 short threads, run in generations of 2 to 8 at a time.
 * Each thread frees the blocks the previous generation left for it (checking
 * their contents), allocates and frees tiny and mid blocks, and leaves some
 * for the next generation. Per-thread state that leaked would make RSS grow
 * with the number of threads: RSS after all 5000 must stay within 32 MiB of
 * RSS after the first 500. */
#include "testing.h"
#include "proc_status.h"
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>

#define TOTAL_THREADS 5000
#define WARM_THREADS 500
#define MAX_BATCH 8
#define BLOCKS 100
#define HANDOFF 30
#define MARGIN_KIB (32 * 1024)

struct block {
    size_t size;
    uint64_t seed;
};

struct inbox {
    int count;
    struct block *items[HANDOFF];
};

struct job {
    int index, batch;
    uint64_t seed;
    struct inbox *in;            /* the previous generation's boxes (MAX_BATCH) */
    struct inbox *out;           /* this thread's box for the next generation */
};

static atomic_int damaged;

static uint64_t next_rand(uint64_t *s)
{
    *s ^= *s << 13; *s ^= *s >> 7; *s ^= *s << 17;
    return *s;
}

/* Tiny (up to 2 KiB) nine times out of ten, otherwise mid (up to 52 KiB). */
static size_t random_size(uint64_t *rng)
{
    uint64_t r = next_rand(rng);
    if (r % 10 == 0) return 2049 + r / 10 % (50 * 1024);
    return sizeof(struct block) + 1 + r / 10 % 2032;
}

static struct block *make_block(uint64_t *rng)
{
    size_t size = random_size(rng);
    struct block *b = malloc(size);
    if (!b) { atomic_fetch_add(&damaged, 1); return NULL; }
    b->size = size;
    b->seed = next_rand(rng);
    memset(b + 1, (int)(b->seed & 0xff), size - sizeof *b);
    return b;
}

static void check_and_free(struct block *b)
{
    if (!b) return;
    const unsigned char *bytes = (const unsigned char *)(b + 1);
    size_t n = b->size - sizeof *b;
    if (bytes[0] != (b->seed & 0xff) || bytes[n / 2] != (b->seed & 0xff) || bytes[n - 1] != (b->seed & 0xff))
        atomic_fetch_add(&damaged, 1);
    free(b);
}

static void *run_job(void *arg)
{
    struct job *job = arg;
    for (int box = job->index; box < MAX_BATCH; box += job->batch) {
        for (int i = 0; i < job->in[box].count; i++) check_and_free(job->in[box].items[i]);
        job->in[box].count = 0;
    }
    struct block *mine[BLOCKS];
    uint64_t rng = job->seed;
    for (int round = 0; round < 3; round++) {
        for (int i = 0; i < BLOCKS; i++) mine[i] = make_block(&rng);
        for (int i = 0; i < BLOCKS; i += 1 + (int)(next_rand(&rng) % 3)) { check_and_free(mine[i]); mine[i] = NULL; }
        for (int i = BLOCKS - 1; i >= 0; i--) {
            if (mine[i] && job->out->count < HANDOFF && round == 2) job->out->items[job->out->count++] = mine[i];
            else check_and_free(mine[i]);
        }
    }
    return NULL;
}

/* Runs one generation of `batch` threads; returns how many ran. */
static int run_generation(int gen, int batch, struct inbox in[MAX_BATCH], struct inbox out[MAX_BATCH])
{
    pthread_t threads[MAX_BATCH];
    struct job jobs[MAX_BATCH];
    int started = 0;
    for (int i = 0; i < batch; i++) {
        jobs[i] = (struct job){ i, batch, (uint64_t)gen * 131 + (uint64_t)i + 1, in, &out[i] };
        if (pthread_create(&threads[started], NULL, run_job, &jobs[i]) == 0) started++;
    }
    for (int i = 0; i < started; i++) pthread_join(threads[i], NULL);
    CHECKF(started == batch, "generation %d: only %d of %d threads started", gen, started, batch);
    return started;
}

int main(void)
{
    static struct inbox boxes[2][MAX_BATCH];
    long rss_warm = -1;
    int threads = 0;
    for (int gen = 0; threads < TOTAL_THREADS; gen++) {
        int batch = 2 + gen % (MAX_BATCH - 1);
        int ran = run_generation(gen, batch, boxes[gen % 2], boxes[(gen + 1) % 2]);
        if (ran == 0) break;
        if (threads < WARM_THREADS && threads + ran >= WARM_THREADS) rss_warm = proc_status_kib("VmRSS");
        threads += ran;
    }
    for (int g = 0; g < 2; g++)
        for (int b = 0; b < MAX_BATCH; b++)
            for (int i = 0; i < boxes[g][b].count; i++) check_and_free(boxes[g][b].items[i]);
    long rss_end = proc_status_kib("VmRSS");
    fprintf(stderr, "VmRSS after %d threads: %ld KiB; after %d: %ld KiB\n", WARM_THREADS, rss_warm, threads, rss_end);
    CHECK(rss_warm > 0 && rss_end > 0);
    CHECKF(rss_end <= rss_warm + MARGIN_KIB, "RSS grew by %ld KiB over %d threads", rss_end - rss_warm,
           threads - WARM_THREADS);
    CHECKF(atomic_load(&damaged) == 0, "%d blocks damaged or not allocated", atomic_load(&damaged));
    TEST_END();
}
