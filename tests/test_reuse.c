/* Freed memory is reused: a steady workload's RSS stops growing.
 *  - the same working set of every tier (about 100 MB) is allocated and freed
 *    100 times, in a different order each time;
 *  - a window of blocks is renewed one block at a time (free, then malloc
 *    of the same size), in a different order each pass;
 *  - 64 MiB blocks are allocated, touched and freed 20 times, first all of the
 *    same size, then each a little larger.
 * RSS at the end must stay within a small margin of RSS after the warm-up;
 * for the working set, the peak (VmHWM): its RSS after the frees depends on
 * what the purge passes gave back just then (a busy machine's CI run saw
 * 109 MB after the warm-up and 123 MB at the end, while the peak grows by
 * 2-4 MB). */
#include "testing.h"
#include "proc_status.h"
#include <pthread.h>
#include <stdint.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define KiB ((size_t)1024)
#define MiB (1024 * KiB)
#define WORKING_SET 2000
#define WINDOW 4000
#define ROUNDS 100
#define WARM_ROUNDS 10
#define MARGIN_KIB (10 * 1024L)

static uint64_t next_rand(uint64_t *s)
{
    *s ^= *s << 13; *s ^= *s >> 7; *s ^= *s << 17;
    return *s;
}

/* 80% tiny, 15% L2, 4% L2.5, 1% large. */
static size_t random_size(uint64_t *rng)
{
    uint64_t r = next_rand(rng);
    unsigned pick = (unsigned)(r % 100);
    r /= 100;
    if (pick < 1) return MiB + 1 + r % (3 * MiB);
    if (pick < 5) return 52 * KiB + 1 + r % (MiB - 52 * KiB);
    if (pick < 20) return 2 * KiB + 1 + r % (50 * KiB);
    return 8 + r % (2 * KiB - 7);
}

/* Writes one byte per page and both ends, so the whole block is resident. */
static void touch(unsigned char *p, size_t size, unsigned char v)
{
    for (size_t i = 0; i < size; i += 4096) p[i] = v;
    p[size - 1] = v;
}

static int touched(const unsigned char *p, size_t size, unsigned char v)
{
    for (size_t i = 0; i < size; i += 4096)
        if (p[i] != v) return 0;
    return p[size - 1] == v;
}

static void shuffle(size_t *order, size_t n, uint64_t *rng)
{
    for (size_t i = n - 1; i > 0; i--) {
        size_t j = next_rand(rng) % (i + 1), t = order[i];
        order[i] = order[j];
        order[j] = t;
    }
}

static void check_rss(const char *what, const char *field, long warm, long end, long margin)
{
    fprintf(stderr, "%s: %s %ld KiB after warm-up, %ld KiB at the end\n", what, field, warm, end);
    CHECKF(warm > 0 && end <= warm + margin, "%s: RSS grew by %ld KiB (allowed %ld)", what, end - warm, margin);
}

static void test_working_set(void)
{
    static size_t sizes[WORKING_SET], order[WORKING_SET];
    static unsigned char *blocks[WORKING_SET];
    uint64_t rng = 12345;
    for (size_t i = 0; i < WORKING_SET; i++) { sizes[i] = random_size(&rng); order[i] = i; }
    long warm = 0;
    int bad = 0;
    for (int round = 1; round <= ROUNDS; round++) {
        shuffle(order, WORKING_SET, &rng);
        for (size_t i = 0; i < WORKING_SET; i++) {
            size_t k = order[i];
            blocks[k] = malloc(sizes[k]);
            if (blocks[k]) touch(blocks[k], sizes[k], (unsigned char)(k + round));
            else bad++;
        }
        shuffle(order, WORKING_SET, &rng);
        for (size_t i = 0; i < WORKING_SET; i++) {
            size_t k = order[i];
            if (blocks[k]) bad += !touched(blocks[k], sizes[k], (unsigned char)(k + round));
            free(blocks[k]);
        }
        if (round == WARM_ROUNDS) warm = proc_status_kib("VmHWM");
    }
    CHECKF(bad == 0, "working set: %d blocks failed or were damaged", bad);
    check_rss("working set", "VmHWM", warm, proc_status_kib("VmHWM"), MARGIN_KIB);
}

/* Each pass replaces every block once, in a new order: the block is freed
 * and one of the same size allocated, so the bytes in use stay constant. */
static void test_window(void)
{
    static unsigned char *slots[WINDOW];
    static size_t sizes[WINDOW], order[WINDOW];
    uint64_t rng = 777;
    for (size_t i = 0; i < WINDOW; i++) { sizes[i] = random_size(&rng); order[i] = i; }
    long warm = 0;
    int bad = 0;
    for (int pass = 1; pass <= ROUNDS; pass++) {
        shuffle(order, WINDOW, &rng);
        for (size_t j = 0; j < WINDOW; j++) {
            size_t i = order[j];
            if (slots[i]) bad += !touched(slots[i], sizes[i], (unsigned char)(i + pass - 1));
            free(slots[i]);
            slots[i] = malloc(sizes[i]);
            if (slots[i]) touch(slots[i], sizes[i], (unsigned char)(i + pass));
            else bad++;
        }
        if (pass == WARM_ROUNDS) warm = proc_status_kib("VmRSS");
    }
    long end = proc_status_kib("VmRSS");
    for (size_t i = 0; i < WINDOW; i++) free(slots[i]);
    CHECKF(bad == 0, "window: %d blocks failed or were damaged", bad);
    check_rss("sliding window", "VmRSS", warm, end, MARGIN_KIB);
}

/* 20 blocks of `size + i * step`, each touched and freed before the next. */
static void large_rounds(const char *what, size_t size, size_t step, long margin_kib)
{
    long before = proc_status_kib("VmRSS");
    for (size_t i = 0; i < 20; i++) {
        size_t n = size + i * step;
        unsigned char *p = malloc(n);
        CHECKF(p != NULL, "%s: malloc(%zu) failed", what, n);
        if (!p) continue;
        touch(p, n, 1);
        free(p);
    }
    check_rss(what, "VmRSS", before, proc_status_kib("VmRSS"), margin_kib);
}

#define HANDOFF 1000
static void *handoff[HANDOFF];

static void *free_all(void *arg)
{
    (void)arg;
    for (size_t i = 0; i < HANDOFF; i++) free(handoff[i]);
    return NULL;
}

static int cmp_page(const void *x, const void *y)
{
    uintptr_t a = *(const uintptr_t *)x, b = *(const uintptr_t *)y;
    return (a > b) - (a < b);
}

/* A producer's blocks come back through another thread's frees (remote
 * frees, some into slabs it still owns, some into ownerless ones). Its next
 * allocations take the pages those blocks held before any other: new pages
 * would be made resident. (Whether a block is handed out from a freed list
 * or carved again does not matter: a purge pass, every 25 ms whatever the
 * delay, gives the shared pool's empty slabs back to their SuperSlab,
 * whose next slab of the class is one of them, resident as before.) */
static void test_remote_blocks_before_fresh(void)
{
    static uintptr_t pages[2 * HANDOFF];
    size_t npages = 0;
    for (size_t i = 0; i < HANDOFF; i++) handoff[i] = malloc(1000);
    for (size_t i = 0; i < HANDOFF; i++) {
        pages[npages++] = (uintptr_t)handoff[i] / 4096;
        pages[npages++] = ((uintptr_t)handoff[i] + 999) / 4096;
    }
    qsort(pages, npages, sizeof pages[0], cmp_page);
    pthread_t t;
    CHECK(pthread_create(&t, NULL, free_all, NULL) == 0);
    pthread_join(t, NULL);
    size_t elsewhere = 0;
    for (size_t i = 0; i < HANDOFF - 100; i++) {
        handoff[i] = malloc(1000);
        uintptr_t first = (uintptr_t)handoff[i] / 4096, last = ((uintptr_t)handoff[i] + 999) / 4096;
        elsewhere += !bsearch(&first, pages, npages, sizeof pages[0], cmp_page) ||
                     !bsearch(&last, pages, npages, sizeof pages[0], cmp_page);
    }
    CHECKF(elsewhere == 0, "%zu of %d blocks on pages the %d freed ones did not use", elsewhere, HANDOFF - 100, HANDOFF);
    for (size_t i = 0; i < HANDOFF - 100; i++) free(handoff[i]);
}

/* Runs test_remote_blocks_before_fresh in a child with a purge delay of a
 * minute: the freed pages stay resident however slowly the build runs (a
 * purge would give them back to the OS, and taking them again would fault
 * them in like new ones). */
static void remote_blocks_in_child(void)
{
    pid_t pid = fork();
    if (pid == 0) {
        char *argv[] = { "test_reuse", "remote-blocks", NULL };
        char *envp[] = { "HAKMEM_PURGE_DELAY_MS=60000", NULL };
        test_exec_self(argv, envp);
        _exit(99);
    }
    int status;
    waitpid(pid, &status, 0);
    CHECKF(WIFEXITED(status) && WEXITSTATUS(status) == 0, "remote blocks before fresh ones: child status %d", status);
}

/* Passive false sharing (Hoard's cache-scratch): the main thread hands
 * each worker one of its small blocks, neighbours on one cache line; a
 * worker frees it, then allocates its own block of that size. The handed
 * block goes back to the main thread's slab rather than to the worker's
 * list, so the worker's block is not the handed one (else the workers
 * would write next to each other's blocks for as long as they run). */
#define HANDED 4
static unsigned char *handed[HANDED], *taken[HANDED];

static void *free_handed_then_malloc(void *arg)
{
    size_t i = (size_t)(uintptr_t)arg;
    free(handed[i]);
    taken[i] = malloc(8);
    if (taken[i]) memset(taken[i], (int)i, 8);
    return NULL;
}

static void test_handed_blocks_go_home(void)
{
    for (size_t i = 0; i < HANDED; i++) handed[i] = malloc(8);
    pthread_t t[HANDED];
    for (size_t i = 0; i < HANDED; i++)
        CHECK(pthread_create(&t[i], NULL, free_handed_then_malloc, (void *)(uintptr_t)i) == 0);
    for (size_t i = 0; i < HANDED; i++) pthread_join(t[i], NULL);
    for (size_t i = 0; i < HANDED; i++) {
        CHECKF(taken[i] && taken[i] != handed[i], "worker %zu got back the block it was handed", i);
        for (size_t j = 0; j < HANDED; j++)
            CHECKF(taken[i] != handed[j], "worker %zu got main's block %zu", i, j);
    }
    for (size_t i = 0; i < HANDED; i++) free(taken[i]);
}

int main(int argc, char **argv)
{
    if (argc > 1 && strcmp(argv[1], "remote-blocks") == 0) {
        test_remote_blocks_before_fresh();
        TEST_END();
    }
    remote_blocks_in_child();
    test_handed_blocks_go_home();
    test_working_set();
    test_window();
    large_rounds("20 x 64 MiB", 64 * MiB, 0, 80 * 1024L);
    large_rounds("20 x 64 MiB growing", 64 * MiB, MiB, 256 * 1024L);
    TEST_END();
}
