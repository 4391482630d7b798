/* Multi-threaded stress through the hak_ API (so it also runs in the TSan
 * build): THREADS threads allocate random sizes of every tier (mostly tiny,
 * some mid, few large), write a per-block pattern, and pass some blocks to
 * other threads through locked queues, which check the pattern and free them.
 * Three generations of threads run one after the other; the blocks a
 * generation leaves in the queues are freed by the next one.
 * Deterministic seeds; every block is checked before it is freed or resized. */
#include "testing.h"
#include "hakmem.h"
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>

#define THREADS 6
#define ROUNDS 3               /* generations of THREADS threads */
#define OPS 15000              /* per thread and round */
#define LIVE 512
#define QUEUE_CAP 1024
#define KiB ((size_t)1024)
#define MiB (1024 * KiB)

struct tag {
    size_t size;
    uint64_t seed;
};

struct queue {
    pthread_mutex_t lock;
    int count;
    struct tag *items[QUEUE_CAP];
};

static struct queue queues[THREADS];
static pthread_barrier_t all_done;
static atomic_int failures;

/* CHECK's counters are not thread-safe (TSan would say so): threads report here. */
static void fail(const char *fmt, ...)
{
    if (atomic_fetch_add(&failures, 1) >= 10) return;
    va_list ap;
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
}

static uint64_t next_rand(uint64_t *s)
{
    *s ^= *s << 13; *s ^= *s >> 7; *s ^= *s << 17;
    return *s;
}

static size_t random_size(uint64_t *rng)
{
    uint64_t r = next_rand(rng);
    unsigned pick = (unsigned)(r % 1000);
    r >>= 10;
    if (pick < 5) return MiB + 1 + r % (3 * MiB);          /* large */
    if (pick < 20) return 52 * KiB + 1 + r % (MiB - 52 * KiB); /* L2.5 */
    if (pick < 100) return 2 * KiB + 1 + r % (50 * KiB);    /* L2 */
    return sizeof(struct tag) + 1 + r % (2 * KiB - sizeof(struct tag));
}

/* Pattern positions: every byte after the tag up to 4 KiB, then one byte per
 * 4 KiB; the last byte holds the seed. */
static size_t next_pos(size_t i) { return i < 4096 ? i + 1 : i + 4096; }

static void write_pattern(struct tag *t)
{
    unsigned char *b = (unsigned char *)t;
    for (size_t i = sizeof *t; i < t->size - 1; i = next_pos(i)) b[i] = (unsigned char)(t->seed + i);
    b[t->size - 1] = (unsigned char)t->seed;
}

/* Checks the pattern below upto (the whole block when upto >= size). */
static void check_pattern(const struct tag *t, size_t upto)
{
    const unsigned char *b = (const unsigned char *)t;
    size_t end = upto < t->size - 1 ? upto : t->size - 1;
    int ok = 1;
    for (size_t i = sizeof *t; i < end && ok; i = next_pos(i)) ok = b[i] == (unsigned char)(t->seed + i);
    if (upto >= t->size) ok = ok && b[t->size - 1] == (unsigned char)t->seed;
    if (!ok) fail("block %p of %zu B (seed %llu) damaged", (void *)t, t->size, (unsigned long long)t->seed);
}

static struct tag *new_block(uint64_t *rng)
{
    size_t size = random_size(rng);
    uint64_t r = next_rand(rng);
    struct tag *t;
    if (r % 32 == 0) {
        t = hak_calloc(1, size);
        const unsigned char *b = (const unsigned char *)t;
        if (t && (b[0] || b[size / 2] || b[size - 1])) fail("hak_calloc(%zu) not zero", size);
    } else if (r % 32 == 1) {
        t = hak_aligned_alloc((size_t)16 << (r / 32 % 9), size);
        r &= ~(uint64_t)1;       /* an even seed: freed by hak_free, not hak_free_sized */
    } else {
        t = hak_malloc(size);
    }
    if (!t || hak_malloc_usable_size(t) < size) fail("allocation of %zu B: %p", size, (void *)t);
    if (!t) return NULL;
    t->size = size;
    t->seed = r;
    write_pattern(t);
    return t;
}

static void release(struct tag *t)
{
    check_pattern(t, SIZE_MAX);
    if (t->seed & 1) hak_free_sized(t, t->size);
    else hak_free(t);
}

static struct tag *resize(struct tag *t, uint64_t *rng)
{
    size_t size = random_size(rng);
    struct tag *n = hak_realloc(t, size);
    if (!n) { fail("hak_realloc(%zu) failed", size); return t; }
    check_pattern(n, size);
    n->size = size;
    n->seed = next_rand(rng);
    write_pattern(n);
    return n;
}

/* Hands t to thread `to`; frees it here when that queue is full. */
static void send(struct tag *t, int to)
{
    struct queue *q = &queues[to];
    pthread_mutex_lock(&q->lock);
    int sent = q->count < QUEUE_CAP;
    if (sent) q->items[q->count++] = t;
    pthread_mutex_unlock(&q->lock);
    if (!sent) release(t);
}

static void drain(int self)
{
    struct queue *q = &queues[self];
    struct tag *items[QUEUE_CAP];
    pthread_mutex_lock(&q->lock);
    int n = q->count;
    memcpy(items, q->items, (size_t)n * sizeof items[0]);
    q->count = 0;
    pthread_mutex_unlock(&q->lock);
    for (int i = 0; i < n; i++) release(items[i]);
}

/* The last round frees everything; earlier rounds hand their live blocks to
 * the queues, where the next round's threads free them: remote frees into the
 * slabs of threads that have exited. */
static void finish_round(int self, int last, struct tag **live)
{
    pthread_barrier_wait(&all_done);     /* nothing is sent after this in the last round */
    if (last) drain(self);
    for (int i = 0; i < LIVE; i++) {
        if (!live[i]) continue;
        if (last) release(live[i]);
        else send(live[i], (self + i) % THREADS);
    }
}

static void *run_thread(void *arg)
{
    int self = (int)((intptr_t)arg % THREADS), round = (int)((intptr_t)arg / THREADS);
    uint64_t rng = 0x2545F4914F6CDD1Du ^ ((uint64_t)(intptr_t)arg * 0x9E3779B97F4A7C15u);
    struct tag *live[LIVE] = { 0 };
    for (int op = 0; op < OPS; op++) {
        uint64_t r = next_rand(&rng);
        struct tag **slot = &live[r % LIVE];
        if (*slot && r / LIVE % 16 == 0) {
            *slot = resize(*slot, &rng);
            continue;
        }
        if (*slot && r / LIVE % 8 == 1) send(*slot, (int)(r / LIVE / 8 % THREADS));
        else if (*slot) release(*slot);
        *slot = new_block(&rng);
        if (op % 64 == 0) drain(self);
    }
    finish_round(self, round == ROUNDS - 1, live);
    return NULL;
}

int main(void)
{
    pthread_t threads[THREADS];
    pthread_barrier_init(&all_done, NULL, THREADS);
    for (int i = 0; i < THREADS; i++) pthread_mutex_init(&queues[i].lock, NULL);
    for (int round = 0; round < ROUNDS; round++) {
        for (intptr_t i = 0; i < THREADS; i++)
            pthread_create(&threads[i], NULL, run_thread, (void *)(round * THREADS + i));
        for (int i = 0; i < THREADS; i++) pthread_join(threads[i], NULL);
    }
    CHECKF(atomic_load(&failures) == 0, "%d failures (the first ones are listed above)", atomic_load(&failures));
    TEST_END();
}
