/* No stale free key in reused memory. Word 1 of a free block holds the free
 * key; a live block whose word 1 equals it is taken for a double free.
 * 1. The span heap reuses the pages of one class's freed blocks for blocks
 *    of any other class, so a freed 48 KiB block's key stayed in the
 *    interior of the 640 KiB block cut from its pages. A realloc that
 *    copies that interior (to a Large block, whose ranges are cut and moved
 *    by page, then back to a small block) or a program that copies
 *    uninitialized bytes put the key in word 1 of a live block, and its
 *    next free aborted with "is already free" (plain_oom_mix under
 *    `ulimit -v` with 4 threads, about 1 run in 10 with
 *    HAKMEM_PURGE_DELAY_MS=0).
 *    Here: 48 KiB blocks are freed until their list spills them to the span
 *    heap, then 640 KiB blocks reuse those pages; no 256-byte step of their
 *    interiors (where a block of any span class starts) may hold the key in
 *    its word 1, and a small block that copies each step's first 16 bytes
 *    must free cleanly.
 * 2. Page moves (HAKMEM_PAGE_MOVES, superslab.c) carry a freed Tiny slab's
 *    pages, a key in every block, to a span run, whose freed run gives them
 *    to a fresh Large block: plain_oom_mix realloc'ed such a block to 768
 *    bytes, copying the key with it (1 run in about 170). Here, in a child
 *    with moves on and a purge delay of 2 s: a thread frees 8 MiB of
 *    768-byte blocks and exits, a purge pass releases their slabs (free
 *    and dirty: they may give), 100 KiB blocks take their pages, are freed,
 *    and a 6 MiB block takes those; no word of the 100 KiB blocks or of
 *    the 6 MiB block may hold the key, nor a 768-byte realloc of the big
 *    one. A kernel that does not move pages moves nothing (the child prints
 *    what moved). */
#include "testing.h"
#include "hakmem_internal.h"

#include <pthread.h>
#include <string.h>
#include <time.h>

#define SMALL_N 96
#define BIG_N   8

static void check_span_reuse(void)
{
    size_t small = 48 * 1024, big = 640 * 1024;
    void *a[SMALL_N], *b[BIG_N];
    for (int i = 0; i < SMALL_N; i++) { a[i] = hak_malloc(small); CHECK(a[i] != NULL); }
    for (int i = 0; i < SMALL_N; i++) hak_free(a[i]);      /* most spill to the span heap */
    for (int i = 0; i < BIG_N; i++) { b[i] = hak_malloc(big); CHECK(b[i] != NULL); }
    unsigned covered = 0, stale = 0;
    for (int i = 0; i < BIG_N; i++) {
        if (!b[i]) continue;
        uintptr_t lo = (uintptr_t)b[i], hi = lo + big;
        for (int k = 0; k < SMALL_N; k++) covered += (uintptr_t)a[k] > lo && (uintptr_t)a[k] + 16 <= hi;
        for (uintptr_t at = lo + HAK_SPAN_COLOR_STEP; at + 16 <= hi; at += HAK_SPAN_COLOR_STEP) {
            void **w = (void **)at;
            if (w[1] == HAK_FREE_KEY) stale++;
            void **s = hak_malloc(16);
            CHECK(s != NULL);
            if (!s) continue;
            memcpy(s, w, 16);                          /* a copy of uninitialized bytes */
            if (s[1] == HAK_FREE_KEY) { s[1] = NULL; hak_free(s); continue; }   /* would abort */
            hak_free(s);
        }
    }
    CHECKF(covered > 0, "no 640 KiB block reused the pages of a freed 48 KiB block: the test saw nothing");
    CHECKF(stale == 0, "%u stale free keys inside live blocks", stale);
    for (int i = 0; i < BIG_N; i++) hak_free(b[i]);
}

#define MOVE_FILL (8u << 20)
#define SPAN_SIZE (100u * 1024)
#define BIG_SIZE  (6u << 20)

/* Words of [p, p + bytes) that hold the free key. */
static unsigned keys_in(const void *p, size_t bytes)
{
    unsigned n = 0;
    for (const void *const *w = p; (const char *)(w + 1) <= (const char *)p + bytes; w++) n += *w == HAK_FREE_KEY;
    return n;
}

static void *fill_and_free(void *arg)
{
    (void)arg;
    size_t n = MOVE_FILL / 768;
    void **b = hak_malloc(n * sizeof *b);
    if (!b) return NULL;
    for (size_t i = 0; i < n; i++) b[i] = hak_malloc(768);
    for (size_t i = 0; i < n; i++) hak_free(b[i]);
    hak_free(b);
    return NULL;
}

static void sleep_ms(long ms)
{
    struct timespec t = { ms / 1000, (ms % 1000) * 1000000L };
    nanosleep(&t, NULL);
}

static void check_moved_pages(void)
{
    pthread_t t;
    CHECK(pthread_create(&t, NULL, fill_and_free, NULL) == 0);
    pthread_join(t, NULL);
    sleep_ms(200);                       /* past the pass interval, short of the delay */
    hak_free(hak_malloc(3000));          /* a slow path: a purge pass releases the empty slabs */
    sleep_ms(200);
    int64_t moved0 = atomic_load(&_hak_stats_gauges.bytes_moved);
    enum { N = MOVE_FILL / SPAN_SIZE };
    void *s[N];
    unsigned stale_span = 0, stale_big = 0;
    for (int i = 0; i < N; i++) {
        s[i] = hak_malloc(SPAN_SIZE);
        CHECK(s[i] != NULL);
        if (s[i]) stale_span += keys_in(s[i], SPAN_SIZE);
    }
    for (int i = 0; i < N; i++) hak_free(s[i]);
    void *big = hak_malloc(BIG_SIZE);
    CHECK(big != NULL);
    if (!big) return;
    stale_big = keys_in(big, BIG_SIZE);
    int64_t moved = atomic_load(&_hak_stats_gauges.bytes_moved) - moved0;
    void **q = hak_realloc(big, 768);
    CHECK(q != NULL);
    if (!q) return;
    bool copied = q[1] == HAK_FREE_KEY;
    if (copied) q[1] = NULL;             /* else its free aborts */
    hak_free(q);
    fprintf(stderr, "768 B -> 100 KiB -> 6 MiB: %lld KiB moved; keys: %u in the 100 KiB blocks, %u in the 6 MiB one\n",
            (long long)moved / 1024, stale_span, stale_big);
    CHECKF(stale_span == 0, "%u stale free keys in the 100 KiB blocks", stale_span);
    CHECKF(stale_big == 0, "%u stale free keys in the 6 MiB block", stale_big);
    CHECKF(!copied, "a realloc of the 6 MiB block copied the free key into a 768-byte block");
}

int main(int argc, char **argv)
{
    if (argc > 1 && strcmp(argv[1], "moves") == 0) { check_moved_pages(); TEST_END(); }
    check_span_reuse();
    static const char *const moves[] = { "HAKMEM_PAGE_MOVES=4096", "HAKMEM_PURGE_DELAY_MS=2000", NULL };
    int rc = test_rerun(argv[0], "moves", moves);
    CHECKF(rc == 0, "page moves: the child's checks above (exit status %d)", rc);
    TEST_END();
}
