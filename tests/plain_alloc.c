/* A small program that allocates in every tier from a few threads and prints
 * a checksum of what it wrote. test_static.sh links it with libhakmem.a and
 * compares its output with this plain (glibc) build. */
#include <malloc.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define THREADS 4
#define SLOTS 1000

static uint64_t next_rand(uint64_t *s)
{
    *s ^= *s << 13; *s ^= *s >> 7; *s ^= *s << 17;
    return *s;
}

static size_t random_size(uint64_t *rng)
{
    uint64_t r = next_rand(rng);
    if (r % 200 == 0) return 1048577 + r % 3000000;
    if (r % 20 == 0) return 2049 + r % 200000;
    return 1 + r % 2048;
}

/* Allocates, fills, resizes and frees; returns a checksum of the contents. */
static void *work(void *arg)
{
    uint64_t rng = (uintptr_t)arg + 1, sum = 0;
    unsigned char *slot[SLOTS] = { 0 };
    size_t size[SLOTS] = { 0 };
    for (int i = 0; i < 100000; i++) {
        size_t k = next_rand(&rng) % SLOTS;
        if (slot[k]) sum = sum * 31 + slot[k][0] + slot[k][size[k] - 1];
        size_t n = random_size(&rng);
        if (i % 10 == 0 && slot[k]) {
            slot[k] = realloc(slot[k], n);
        } else {
            free(slot[k]);
            slot[k] = i % 10 == 1 ? calloc(1, n) : malloc(n);
        }
        if (!slot[k]) { fprintf(stderr, "allocation of %zu failed\n", n); exit(1); }
        size[k] = n;
        memset(slot[k], (int)(n & 0xff), n < 4096 ? n : 4096);
        slot[k][n - 1] = (unsigned char)i;
    }
    for (int k = 0; k < SLOTS; k++) free(slot[k]);
    return (void *)(uintptr_t)sum;
}

/* Linked statically, this runs before hakmem's own constructor: blocks of
 * every tier taken before hakmem is initialized must be as big as asked. */
static const size_t early_sizes[] = { 24, 1000, 5000, 40000, 70000, 300000, 2000000 };
static unsigned char *early[sizeof early_sizes / sizeof early_sizes[0]];

__attribute__((constructor(101))) static void allocate_early(void)
{
    for (size_t i = 0; i < sizeof early_sizes / sizeof early_sizes[0]; i++) {
        early[i] = malloc(early_sizes[i]);
        if (!early[i] || malloc_usable_size(early[i]) < early_sizes[i]) {
            fprintf(stderr, "early malloc(%zu) gave a smaller block\n", early_sizes[i]);
            exit(1);
        }
        memset(early[i], (int)i, early_sizes[i]);
    }
}

int main(void)
{
    for (size_t i = 0; i < sizeof early_sizes / sizeof early_sizes[0]; i++) {
        size_t n = early_sizes[i];
        if (early[i][0] != i || early[i][n - 1] != i) { fprintf(stderr, "early block %zu changed\n", i); return 1; }
        free(early[i]);
    }
    pthread_t threads[THREADS];
    for (uintptr_t t = 0; t < THREADS; t++) pthread_create(&threads[t], NULL, work, (void *)t);
    for (int t = 0; t < THREADS; t++) {
        void *sum;
        pthread_join(threads[t], &sum);
        printf("thread %d checksum %llu\n", t, (unsigned long long)(uintptr_t)sum);
    }
    return 0;
}
