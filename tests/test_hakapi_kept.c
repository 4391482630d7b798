/* A slab its thread exhausted is kept for that thread (struct hak_slab's
 * HAK_KEPT rule, slab.c "exhausted slabs kept by their thread"):
 *  - kept, it is on no shared list: another heap cannot adopt it;
 *  - the first free into it by its owner makes it the owner's again (its
 *    ready list), and the owner's next reclaim takes it back;
 *  - the first free into it by another heap lists it in the shared pool,
 *    with that heap as the one that holds its blocks;
 *  - a ready slab its owner frees empty goes to the shared pool, where the
 *    purge releases it; the ready list of a class left idle goes there too;
 *  - threads that allocate, hand blocks to a consumer and exit, with
 *    malloc_trim beside them, never get a live block twice (the TSan build
 *    runs this part for the races of the first free with exit; hak_malloc
 *    and hak_free, as TSan's are malloc and free).
 * The heaps of the first part are stand-ins: a slab only records them. */
#include "testing.h"
#include "hakmem_internal.h"

#include <pthread.h>

static struct hak_heap heap_a, heap_b;

/* A fresh slab of class c made h's current one and carved out whole, its
 * blocks returned as a list; then exhausted, so it is kept for h. */
static struct hak_slab *exhaust_fresh(struct hak_heap *h, unsigned c, void **blocks)
{
    bool adopted = true;
    struct hak_slab *s = _hak_slab_acquire(h, c, true, &adopted);
    CHECK(s != NULL && !adopted);
    if (!s) return NULL;
    h->cur[c] = s;
    *blocks = NULL;
    while (_hak_slab_pop(h, s, s->capacity, s->capacity, true, blocks)) {}
    CHECK(s->carved == s->capacity && s->used == s->capacity);
    h->cur[c] = NULL;
    _hak_slab_keep(h, s);
    return s;
}

/* The first block of a list, unlinked: handed back alone (its two words
 * readable first: the ASan build poisons free blocks). */
static void *pop_block(void **list)
{
    void **b = *list;
    hak_track_mem_defined(b, 2 * sizeof(void *));
    *list = hak_link_get(b);
    hak_link_set(b, NULL);
    return b;
}

static struct hak_slab *adopt(struct hak_heap *h, unsigned c)
{
    bool adopted = false;
    struct hak_slab *s = _hak_slab_acquire(h, c, false, &adopted);
    CHECK(s == NULL || adopted);
    return s;
}

/* s, current for h again, gives its one free block back to h. */
static void *take_one(struct hak_heap *h, unsigned c, struct hak_slab *s)
{
    void *b = NULL;
    h->cur[c] = s;
    CHECK(_hak_slab_pop(h, s, 1, 1, true, &b) == 1);
    h->cur[c] = NULL;
    return b;
}

static void stand_ins(void)
{
    unsigned c = _hak_class_of_size(1152);   /* a class nothing else here uses */
    void *blocks;
    struct hak_slab *s = exhaust_fresh(&heap_a, c, &blocks);
    if (!s) return;

    /* Kept: unlisted, out of the shared pool's reach, not ready. */
    CHECK(atomic_load(&s->xowner) != &heap_a && atomic_load(&s->xowner) != NULL);
    CHECK(atomic_load(&s->xlisted) == 0 && !s->ready);
    CHECK(_hak_slab_reclaim(&heap_a, c) == NULL && adopt(&heap_b, c) == NULL);

    /* The owner frees into it: ready for the owner, not for anyone else. */
    _hak_slab_return(&heap_a, c, pop_block(&blocks), 1);
    CHECK(atomic_load(&s->xowner) == &heap_a && atomic_load(&s->xlisted) == 1);
    CHECK(heap_a.ready[c] == s && s->ready && _hak_slab_has_reclaimable(&heap_a, c));
    CHECK(adopt(&heap_b, c) == NULL);
    CHECKF(_hak_slab_reclaim(&heap_a, c) == s, "the owner's free did not make its slab ready");
    CHECK(!s->ready && heap_a.ready[c] == NULL);
    void *again = take_one(&heap_a, c, s);
    _hak_slab_keep(&heap_a, s);

    /* Another heap frees into it first: the shared pool, b's first. */
    _hak_slab_return(&heap_b, c, again, 1);
    CHECK(atomic_load(&s->xowner) == NULL && heap_a.ready[c] == NULL);
    CHECKF(_hak_slab_pools[c].partial == s, "a foreign free into a kept slab did not list it");
    CHECK(atomic_load(&hak_slab_cold(s)->xaffine) == &heap_b);
    CHECK(adopt(&heap_b, c) == s);
    again = take_one(&heap_b, c, s);
    _hak_slab_keep(&heap_b, s);
    CHECK(atomic_load(&s->xlisted) == 0);
    _hak_slab_return(&heap_b, c, again, 1);    /* b's again */
    CHECK(heap_b.ready[c] == s);
    _hak_slab_release_ready(&heap_b, c);       /* b leaves the class: to the pool */
    CHECK(heap_b.ready[c] == NULL && atomic_load(&s->xowner) == NULL && _hak_slab_pools[c].partial == s);
    CHECK(adopt(&heap_a, c) == s);
    _hak_slab_detach(&heap_a, s);              /* a free block: back to the pool */
    CHECK(adopt(&heap_a, c) == s);             /* a's from here on */

    /* The owner frees a ready slab empty: to the shared pool, where the
     * purge finds it. */
    void *all;
    struct hak_slab *u = exhaust_fresh(&heap_a, c, &all);
    if (!u) return;
    void *first = pop_block(&all);
    _hak_slab_return(&heap_a, c, all, u->capacity - 1);
    CHECK(heap_a.ready[c] == u);
    _hak_slab_return(&heap_a, c, first, 1);
    CHECKF(heap_a.ready[c] == NULL && _hak_slab_pools[c].partial == u, "a ready slab freed empty was not listed");
    CHECK(atomic_load(&u->xowner) == NULL);
    struct hak_pool *pool = &_hak_slab_pools[c];
    hak_lock(&pool->lock);
    _hak_slab_release_empty(pool);
    hak_unlock(&pool->lock);
    CHECK(pool->partial == NULL && u->state == HAK_SLAB_FREE);
}

/* ---- threads --------------------------------------------------------------- */
#define LIVE 0x4c495645u
#define GENERATIONS 24
#define PER_GENERATION 6000
#define ROUND 1500
#define QUEUE 1024

static pthread_mutex_t queue_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t queue_cond = PTHREAD_COND_INITIALIZER;
static void *queue[QUEUE];
static unsigned queue_n, producers_left;
static _Atomic unsigned twice, broken, kept_seen, reclaimed_seen;

static void *take_block(size_t size)
{
    unsigned *p = hak_malloc(size);
    if (!p) return NULL;
    if (p[2] == LIVE) atomic_fetch_add(&twice, 1);        /* handed out while live */
    p[2] = LIVE;
    return p;
}

static void give_block(unsigned *p)
{
    if (p[2] != LIVE) atomic_fetch_add(&broken, 1);
    p[2] = 0;
    hak_free(p);
}

static void enqueue(void *p)
{
    pthread_mutex_lock(&queue_lock);
    while (queue_n == QUEUE) pthread_cond_wait(&queue_cond, &queue_lock);
    queue[queue_n++] = p;
    pthread_cond_broadcast(&queue_cond);
    pthread_mutex_unlock(&queue_lock);
}

/* One generation: rounds of blocks of two classes, two thirds handed to
 * the consumer (whose first frees list kept slabs), a third freed by the
 * generation itself at the round's end (its kept slabs get ready, and the
 * next round reclaims them); then it exits while the consumer still frees
 * into its slabs. */
static void *producer(void *arg)
{
    unsigned seed = (unsigned)(uintptr_t)arg;
    unsigned *own[ROUND / 3 + 1];
    for (unsigned r = 0; r < PER_GENERATION / ROUND; r++) {
        unsigned n = 0;
        for (unsigned i = 0; i < ROUND; i++) {
            seed = seed * 1103515245u + 12345u;
            unsigned *p = take_block((seed >> 16) & 1 ? 96 : 3000);
            if (!p) { atomic_fetch_add(&broken, 1); continue; }
            if (i % 3 == 0) own[n++] = p;
            else enqueue(p);
        }
        while (n) give_block(own[--n]);
    }
    struct hak_heap *h = _hak_thread_tls.heap;
    if (h && h->stats.slabs_kept) atomic_fetch_add(&kept_seen, 1);
    if (h && h->stats.slabs_reclaimed) atomic_fetch_add(&reclaimed_seen, 1);
    pthread_mutex_lock(&queue_lock);
    producers_left--;
    pthread_cond_broadcast(&queue_cond);
    pthread_mutex_unlock(&queue_lock);
    return NULL;
}

static void *consumer(void *arg)
{
    (void)arg;
    unsigned freed = 0;
    for (;;) {
        pthread_mutex_lock(&queue_lock);
        while (queue_n == 0 && producers_left) pthread_cond_wait(&queue_cond, &queue_lock);
        if (queue_n == 0) { pthread_mutex_unlock(&queue_lock); break; }
        void *p = queue[--queue_n];
        pthread_cond_broadcast(&queue_cond);
        pthread_mutex_unlock(&queue_lock);
        give_block(p);
        if (++freed % 5000 == 0) hak_malloc_trim(0);
    }
    return NULL;
}

static void threads(void)
{
    producers_left = GENERATIONS;
    pthread_t cons, prod[2];
    CHECK(pthread_create(&cons, NULL, consumer, NULL) == 0);
    for (unsigned g = 0; g < GENERATIONS; g += 2) {   /* two at a time */
        for (unsigned k = 0; k < 2; k++)
            CHECK(pthread_create(&prod[k], NULL, producer, (void *)(uintptr_t)(g + k + 1)) == 0);
        for (unsigned k = 0; k < 2; k++) pthread_join(prod[k], NULL);
    }
    pthread_join(cons, NULL);
    CHECKF(atomic_load(&twice) == 0, "%u blocks handed out while live", atomic_load(&twice));
    CHECKF(atomic_load(&broken) == 0, "%u blocks lost their mark or failed", atomic_load(&broken));
    CHECKF(atomic_load(&kept_seen) == GENERATIONS, "%u of %u generations kept a slab", atomic_load(&kept_seen),
           GENERATIONS);
    CHECKF(atomic_load(&reclaimed_seen) == GENERATIONS, "%u of %u generations reclaimed a kept slab",
           atomic_load(&reclaimed_seen), GENERATIONS);
}

int main(int argc, char **argv)
{
    (void)argc;
    /* A producer that waits on a busy machine for longer than the purge
     * delay would see a class it used little as idle and give its ready
     * slabs up (front.c, release_idle_lists): a generation would then find
     * none to reclaim. That rule is not this test's: a long delay, by
     * running the test again with it. */
    if (!getenv("HAKMEM_PURGE_DELAY_MS")) {
        setenv("HAKMEM_PURGE_DELAY_MS", "60000", 1);
        test_exec_self(argv, NULL);
        return 99;
    }
    void *warm = hak_malloc(1);                /* initializes the classes and pools */
    CHECK(warm != NULL);
    stand_ins();
    hak_free(warm);
    threads();
    TEST_END();
}
