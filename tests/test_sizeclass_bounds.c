/* The size-class rule: every request of 64 B up to 1 MiB gets a block at most
 * 25% larger than the request (usable size <= 1.25 x request), and never a
 * smaller one. Every size from 1 to 64 KiB is tried, then a sample up to 1 MiB. */
#include "testing.h"
#include "hakmem.h"
#include <malloc.h>
#include <stdint.h>

#define KiB ((size_t)1024)
#define MiB (1024 * KiB)
#define MAX_REPORTED 20

static int reported;

/* One request through malloc or hak_malloc; returns 1 when it keeps the rule. */
static int size_ok(size_t size, int via_hak)
{
    void *p = via_hak ? hak_malloc(size) : malloc(size);
    size_t usable = p ? (via_hak ? hak_malloc_usable_size(p) : malloc_usable_size(p)) : 0;
    int ok = p && usable >= size && (size < 64 || usable * 4 <= size * 5);
    if (!ok && reported++ < MAX_REPORTED)
        fprintf(stderr, "%s(%zu) = %p, usable size %zu (allowed %zu..%zu)\n", via_hak ? "hak_malloc" : "malloc",
                size, p, usable, size, size < 64 ? SIZE_MAX : size * 5 / 4);
    if (via_hak) hak_free(p);
    else free(p);
    return ok;
}

int main(void)
{
    static const size_t edges[] = { 32 * KiB, 52 * KiB, 64 * KiB, 128 * KiB, 256 * KiB, 512 * KiB, MiB };
    int failed = 0;
    for (size_t size = 1; size <= 64 * KiB; size++) failed += !size_ok(size, 0);
    for (size_t size = 64 * KiB; size <= MiB; size += 509)     /* a prime stride */
        failed += !size_ok(size, 0) + !size_ok(size, 1);
    for (size_t i = 0; i < sizeof edges / sizeof edges[0]; i++)
        failed += !size_ok(edges[i] - 1, 0) + !size_ok(edges[i], 0) + !size_ok(edges[i], 1);
    CHECKF(failed == 0, "%d requests broke the 25%% rule (first %d listed above)", failed, MAX_REPORTED);
    TEST_END();
}
