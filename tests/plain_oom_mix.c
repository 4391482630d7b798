/* plain_oom_mix THREADS STEPS SLOTS SEED — a seeded workload that runs out
 * of address space and goes on: each thread churns its own SLOTS slots for
 * STEPS steps; an empty slot gets malloc of a size from 0 to 8 MiB (mostly
 * small: 60% up to 1 KiB, 25% to 64 KiB, 10% to 1 MiB, 5% to 8 MiB), a full
 * one is freed or realloc'ed to a new size. A NULL result (errno must be
 * ENOMEM; a failed realloc leaves its block as it was) is counted and the
 * run goes on. Every block carries its size and seed in its first and last
 * bytes, checked before it is freed or moved. Prints one line:
 *   fails=N mallocs=N reallocs=N frees=N
 * test_ulimit.sh runs it under `ulimit -v` for glibc and hakmem and
 * compares the failure counts. Exit status 1: a check failed. */
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct slot { unsigned char *p; size_t size; unsigned char tag; };

struct worker {
    pthread_t id;
    uint64_t rng;
    unsigned long steps, nslots;
    unsigned long fails, mallocs, reallocs, frees, bad;
};

static uint64_t next_rand(uint64_t *s)
{
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static size_t random_size(uint64_t *rng)
{
    uint64_t r = next_rand(rng) % 100, x = next_rand(rng);
    if (r < 60) return x % 1025;
    if (r < 85) return 1024 + x % (63 * 1024 + 1);
    if (r < 95) return 65536 + x % (960 * 1024 + 1);
    return (1u << 20) + x % (7u * 1024 * 1024 + 1);
}

static void mark(struct slot *s)
{
    if (s->size == 0) return;
    s->p[0] = s->tag;
    if (s->size > 1) s->p[s->size - 1] = (unsigned char)(s->tag ^ 0x5A);
}

static int intact(const struct slot *s, size_t size)
{
    if (size == 0) return 1;
    return s->p[0] == s->tag && (size < s->size || s->size < 2 || s->p[s->size - 1] == (unsigned char)(s->tag ^ 0x5A));
}

/* errno as the allocator left it. clang (14) takes malloc and realloc for
 * functions that write no memory the program sees, errno included, and
 * folds a read of errno after them to the 0 stored before: the barrier
 * makes it load errno again. */
static int errno_now(void)
{
    __asm__ volatile("" ::: "memory");
    return errno;
}

static void step(struct worker *w, struct slot *s)
{
    if (!s->p) {
        size_t size = random_size(&w->rng);
        errno = 0;
        s->p = malloc(size);
        w->mallocs++;
        if (!s->p) { w->fails++; w->bad += errno_now() != ENOMEM; return; }
        s->size = size;
        s->tag = (unsigned char)next_rand(&w->rng);
        mark(s);
        return;
    }
    if (!intact(s, s->size)) w->bad++;
    if (next_rand(&w->rng) % 2) {
        free(s->p);
        s->p = NULL;
        w->frees++;
        return;
    }
    size_t size = random_size(&w->rng);
    errno = 0;
    unsigned char *q = realloc(s->p, size);
    w->reallocs++;
    if (!q) {
        if (size == 0) { s->p = NULL; return; }       /* realloc(p, 0) may free p */
        w->fails++;
        w->bad += errno_now() != ENOMEM || !intact(s, s->size);
        return;
    }
    struct slot moved = { q, s->size, s->tag };
    if (!intact(&moved, size < s->size ? size : s->size)) w->bad++;
    s->p = q;
    s->size = size;
    mark(s);
}

static void *run(void *arg)
{
    struct worker *w = arg;
    struct slot *slots = calloc(w->nslots, sizeof *slots);
    if (!slots) { w->bad++; return NULL; }
    for (unsigned long i = 0; i < w->steps; i++) step(w, &slots[next_rand(&w->rng) % w->nslots]);
    for (unsigned long i = 0; i < w->nslots; i++) free(slots[i].p);
    free(slots);
    return NULL;
}

int main(int argc, char **argv)
{
    if (argc != 5) { fprintf(stderr, "usage: plain_oom_mix THREADS STEPS SLOTS SEED\n"); return 2; }
    unsigned long threads = strtoul(argv[1], NULL, 10), steps = strtoul(argv[2], NULL, 10);
    unsigned long nslots = strtoul(argv[3], NULL, 10), seed = strtoul(argv[4], NULL, 10);
    if (threads == 0 || threads > 64 || nslots == 0) { fprintf(stderr, "plain_oom_mix: bad arguments\n"); return 2; }
    struct worker w[64];
    memset(w, 0, sizeof w);
    for (unsigned long t = 0; t < threads; t++) {
        w[t].rng = seed * 1000003u + t;
        w[t].steps = steps;
        w[t].nslots = nslots;
    }
    if (threads == 1) run(&w[0]);
    else {
        for (unsigned long t = 0; t < threads; t++)
            if (pthread_create(&w[t].id, NULL, run, &w[t]) != 0) { fprintf(stderr, "pthread_create failed\n"); return 1; }
        for (unsigned long t = 0; t < threads; t++) pthread_join(w[t].id, NULL);
    }
    unsigned long fails = 0, mallocs = 0, reallocs = 0, frees = 0, bad = 0;
    for (unsigned long t = 0; t < threads; t++) {
        fails += w[t].fails; mallocs += w[t].mallocs; reallocs += w[t].reallocs;
        frees += w[t].frees; bad += w[t].bad;
    }
    printf("fails=%lu mallocs=%lu reallocs=%lu frees=%lu\n", fails, mallocs, reallocs, frees);
    if (bad) { fprintf(stderr, "plain_oom_mix: %lu checks failed\n", bad); return 1; }
    return 0;
}
