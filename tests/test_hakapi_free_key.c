/* No stale free key in reused memory. Word 1 of a free block holds the free
 * key; a live block whose word 1 equals it is taken for a double free. The
 * span heap reuses the pages of one class's freed blocks for blocks of
 * any other class, so a freed 48 KiB block's key stayed in the interior of
 * the 640 KiB block cut from its pages. A realloc that copies that
 * interior (to a Large block, whose ranges are cut and moved by page, then
 * back to a small block) or a program that copies uninitialized bytes put
 * the key in word 1 of a live block, and its next free aborted with "is
 * already free" (plain_oom_mix under `ulimit -v` with 4 threads, about 1
 * run in 10 with HAKMEM_PURGE_DELAY_MS=0).
 * Here: 48 KiB blocks are freed until their list spills them to the span
 * heap, then 640 KiB blocks reuse those pages; no 256-byte step of their
 * interiors (where a block of any span class starts) may hold the key in
 * its word 1, and a small block that copies each step's first 16 bytes
 * must free cleanly. */
#include "testing.h"
#include "hakmem_internal.h"

#define SMALL_N 96
#define BIG_N   8

int main(void)
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
    TEST_END();
}
