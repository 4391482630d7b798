/* API conformance of every allocation function (POSIX / glibc manual
 * behaviour: errno, alignment, overflow, zero sizes, contents kept across
 * every tier boundary). Every check runs twice: through the standard names
 * (which are hakmem's, the program links -lhakmem) and through the hak_ names. */
#include "testing.h"
#include "hakmem.h"
#include <errno.h>
#include <limits.h>
#include <malloc.h>
#include <pthread.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>

/* C23 functions that glibc 2.36 does not have. Weak, so that this file still
 * links in the TSan build, where hakmem leaves the standard names alone (that
 * build runs only the test_hakapi_ tests); main checks they are there. */
void free_sized(void *ptr, size_t size) __attribute__((weak));
void free_aligned_sized(void *ptr, size_t alignment, size_t size) __attribute__((weak));

#define KiB ((size_t)1024)
#define MiB (1024 * KiB)

struct api {
    const char *name;
    void *(*malloc)(size_t);
    void (*free)(void *);
    void *(*calloc)(size_t, size_t);
    void *(*realloc)(void *, size_t);
    void *(*reallocarray)(void *, size_t, size_t);
    int (*posix_memalign)(void **, size_t, size_t);
    void *(*aligned_alloc)(size_t, size_t);
    void *(*memalign)(size_t, size_t);
    void *(*valloc)(size_t);
    void *(*pvalloc)(size_t);
    size_t (*usable_size)(const void *);
    void (*free_sized)(void *, size_t);
    void (*free_aligned_sized)(void *, size_t, size_t);
    int (*malloc_trim)(size_t);
    struct mallinfo2 (*mallinfo2)(void);
    struct mallinfo (*mallinfo)(void);
    int (*malloc_info)(int, FILE *);
    void (*malloc_stats)(void);
};

static size_t std_usable_size(const void *p) { return malloc_usable_size((void *)p); }

/* glibc marks mallinfo deprecated; hakmem gives it all the same. */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
static const struct api std_api = {
    "std", malloc, free, calloc, realloc, reallocarray, posix_memalign, aligned_alloc,
    memalign, valloc, pvalloc, std_usable_size, free_sized, free_aligned_sized,
    malloc_trim, mallinfo2, mallinfo, malloc_info, malloc_stats,
};
#pragma GCC diagnostic pop
static const struct api hak_api = {
    "hak", hak_malloc, hak_free, hak_calloc, hak_realloc, hak_reallocarray,
    hak_posix_memalign, hak_aligned_alloc, hak_memalign, hak_valloc, hak_pvalloc,
    hak_malloc_usable_size, hak_free_sized, hak_free_aligned_sized, hak_malloc_trim,
    hak_mallinfo2, hak_mallinfo, hak_malloc_info, hak_stats_print,
};

/* Sizes on both sides of every tier limit (tiny 2 KiB, L2 32/52 KiB, L2.5 1 MiB). */
static const size_t tier_sizes[] = {
    1, 16, 100, 2047, 2048, 2049, 8192, 32 * KiB, 32 * KiB + 1, 52 * KiB, 52 * KiB + 1,
    100000, MiB - 1, MiB, MiB + 1, 4 * MiB, 9000000,
};
#define N_TIER_SIZES (sizeof tier_sizes / sizeof tier_sizes[0])

/* Keeps the compiler from reasoning about a value (no folding of huge sizes). */
static size_t hide(size_t v) { __asm__ volatile("" : "+r"(v)); return v; }

static uint8_t pattern_byte(size_t i, unsigned seed) { return (uint8_t)(seed * 131u + i * 7u + (i >> 9)); }

static void fill(void *p, size_t n, unsigned seed)
{
    uint8_t *b = p;
    for (size_t i = 0; i < n; i++) b[i] = pattern_byte(i, seed);
}

/* The first offset below n whose byte is not the pattern's, or n. */
static size_t first_bad(const void *p, size_t n, unsigned seed)
{
    const uint8_t *b = p;
    for (size_t i = 0; i < n; i++)
        if (b[i] != pattern_byte(i, seed)) return i;
    return n;
}

static int is_aligned(const void *p, size_t a) { return ((uintptr_t)p & (a - 1)) == 0; }

static size_t min_align(size_t size) { return size >= 16 ? 16 : 8; }

static void test_zero_and_null(const struct api *a)
{
    void *p = a->malloc(0), *q = a->malloc(0);
    CHECKF(p && q && p != q, "%s: malloc(0) gave %p and %p", a->name, p, q);
    a->free(p);
    a->free(q);
    a->free(NULL);
    CHECK(a->usable_size(NULL) == 0);
    p = a->realloc(NULL, 100);
    CHECKF(p && a->usable_size(p) >= 100, "%s: realloc(NULL, 100)", a->name);
    a->free(p);
    void *c1 = a->calloc(0, 10), *c2 = a->calloc(10, 0);   /* NULL or unique: both allowed */
    CHECK(!c1 || !c2 || c1 != c2);
    a->free(c1);
    a->free(c2);
}

/* realloc(p, 0) frees p (glibc returns NULL; a unique pointer is allowed too).
 * Leaks are measured between an early and a late point, so blocks resting in
 * thread caches (which may count as in use) do not matter. */
static void test_realloc_zero(const struct api *a)
{
    size_t early = 0;
    for (int i = 0; i < 50000; i++) {
        if (i == 5000) early = a->mallinfo2().uordblks;
        void *p = a->malloc(100);
        void *q = a->realloc(p, 0);
        a->free(q);
    }
    size_t late = a->mallinfo2().uordblks;
    CHECKF(late < early + MiB, "%s: realloc(p, 0) leaks: in use %zu -> %zu bytes", a->name, early, late);
}

/* count blocks of one size: aligned, usable >= size, full usable size writable
 * without touching the neighbours. */
static void check_batch(const struct api *a, size_t size, int count)
{
    void *blocks[16];
    size_t usable[16];
    for (int i = 0; i < count; i++) {
        blocks[i] = a->malloc(size);
        if (!blocks[i]) { CHECKF(0, "%s: malloc(%zu) failed", a->name, size); count = i; break; }
        usable[i] = a->usable_size(blocks[i]);
        CHECKF(usable[i] >= size, "%s: usable %zu < request %zu", a->name, usable[i], size);
        CHECKF(is_aligned(blocks[i], min_align(size)), "%s: malloc(%zu) = %p misaligned", a->name, size, blocks[i]);
        fill(blocks[i], usable[i], (unsigned)(size + i));
    }
    for (int i = 0; i < count; i++) {
        CHECKF(first_bad(blocks[i], usable[i], (unsigned)(size + i)) == usable[i],
               "%s: block of %zu overwritten", a->name, size);
        a->free(blocks[i]);
    }
}

static void test_sizes(const struct api *a)
{
    for (size_t s = 1; s <= 8192; s++) check_batch(a, s, 8);
    for (size_t s = 8192; s <= 4 * MiB; s = s * 5 / 4 + 1) check_batch(a, s, 4);
    for (size_t i = 0; i < N_TIER_SIZES; i++) check_batch(a, tier_sizes[i], 4);
}

/* A NULL result with errno set to want (or, when want2 is non-zero, to want2);
 * arg is the varying size or alignment, printed on failure. */
static void check_null_errno(const struct api *a, const char *what, size_t arg, void *p, int err, int want, int want2)
{
    CHECKF(!p && (err == want || (want2 && err == want2)), "%s: %s [with %zu] gave %p, errno %d",
           a->name, what, arg, p, err);
    if (p) a->free(p);
}

#define EXPECT_NULL(a, expr, arg, want, want2) do { errno = 0; void *r_ = (expr); int e_ = errno; \
    check_null_errno(a, #expr, arg, r_, e_, want, want2); } while (0)

static void test_huge(const struct api *a)
{
    const size_t huge[] = { SIZE_MAX, (size_t)PTRDIFF_MAX + 1, (size_t)PTRDIFF_MAX, SIZE_MAX - 4095,
                            SIZE_MAX - 16, (size_t)1 << 47 };
    for (size_t i = 0; i < sizeof huge / sizeof huge[0]; i++) {
        size_t n = hide(huge[i]);
        EXPECT_NULL(a, a->malloc(n), n, ENOMEM, 0);
        EXPECT_NULL(a, a->calloc(1, n), n, ENOMEM, 0);
        EXPECT_NULL(a, a->aligned_alloc(64, n), n, ENOMEM, 0);
        EXPECT_NULL(a, a->aligned_alloc(4096, n), n, ENOMEM, 0);
        EXPECT_NULL(a, a->memalign(2 * MiB, n), n, ENOMEM, 0);
        EXPECT_NULL(a, a->valloc(n), n, ENOMEM, 0);
        EXPECT_NULL(a, a->pvalloc(n), n, ENOMEM, 0);
        void *out = NULL;
        CHECKF(a->posix_memalign(&out, 64, n) == ENOMEM, "%s: posix_memalign(64, %zu)", a->name, n);
    }
    const size_t half = hide(SIZE_MAX / 2 + 1), big = hide((size_t)1 << 32);
    EXPECT_NULL(a, a->calloc(half, 2), half, ENOMEM, 0);
    EXPECT_NULL(a, a->calloc(2, half), half, ENOMEM, 0);
    EXPECT_NULL(a, a->calloc(big, big), big, ENOMEM, 0);
    EXPECT_NULL(a, a->calloc(hide(SIZE_MAX), hide(SIZE_MAX)), SIZE_MAX, ENOMEM, 0);
    EXPECT_NULL(a, a->reallocarray(NULL, half, 2), half, ENOMEM, 0);
}

/* A failed realloc / reallocarray leaves the block as it was. */
static void test_realloc_failure(const struct api *a)
{
    for (size_t i = 0; i < N_TIER_SIZES; i++) {
        size_t size = tier_sizes[i];
        void *p = a->malloc(size);
        if (!p) { CHECK(p); continue; }
        fill(p, size, 77);
        EXPECT_NULL(a, a->realloc(p, hide(SIZE_MAX)), size, ENOMEM, 0);
        EXPECT_NULL(a, a->realloc(p, hide((size_t)PTRDIFF_MAX + 1)), size, ENOMEM, 0);
        EXPECT_NULL(a, a->reallocarray(p, hide(SIZE_MAX / 2 + 1), 2), size, ENOMEM, 0);
        EXPECT_NULL(a, a->reallocarray(p, 3, hide(SIZE_MAX / 3 + 1)), size, ENOMEM, 0);
        CHECKF(first_bad(p, size, 77) == size, "%s: failed realloc changed a block of %zu", a->name, size);
        CHECK(a->usable_size(p) >= size);
        a->free(p);
    }
}

static size_t next_pow2(size_t v)
{
    size_t p = 1;
    while (p < v) p <<= 1;
    return p;
}

static void test_bad_alignment(const struct api *a)
{
    const size_t bad[] = { 0, 1, 2, 4, 3, 12, 24, 40, 48, 96, 1000, 4095, SIZE_MAX, SIZE_MAX / 2 };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        size_t al = hide(bad[i]);
        void *out = NULL;
        int rc = a->posix_memalign(&out, al, 64);
        CHECKF(rc == EINVAL, "%s: posix_memalign(align %zu) returned %d", a->name, al, rc);
        if (al & (al - 1) || al == 0)
            EXPECT_NULL(a, a->aligned_alloc(al, 64), al, EINVAL, 0);
    }
    const size_t impossible[] = { (size_t)1 << 62, (size_t)1 << 63 };
    for (size_t i = 0; i < 2; i++) {
        size_t al = hide(impossible[i]);
        void *out = NULL;
        int rc = a->posix_memalign(&out, al, 16);
        CHECKF(rc == ENOMEM || rc == EINVAL, "%s: posix_memalign(align %zu) returned %d", a->name, al, rc);
        EXPECT_NULL(a, a->aligned_alloc(al, 16), al, ENOMEM, EINVAL);
        EXPECT_NULL(a, a->memalign(al, 16), al, ENOMEM, EINVAL);
    }
    /* memalign: glibc rounds a non-power-of-two alignment up; EINVAL is allowed too. */
    const size_t odd[] = { 3, 12, 24, 48, 96, 1000, 5000 };
    for (size_t i = 0; i < sizeof odd / sizeof odd[0]; i++) {
        errno = 0;
        void *p = a->memalign(hide(odd[i]), 100);
        int err = errno;
        CHECKF(p ? is_aligned(p, next_pow2(odd[i])) : err == EINVAL,
               "%s: memalign(%zu, 100) = %p errno %d", a->name, odd[i], p, err);
        if (p) { CHECK(a->usable_size(p) >= 100); fill(p, 100, 1); a->free(p); }
    }
}

enum align_fn { VIA_POSIX_MEMALIGN, VIA_ALIGNED_ALLOC, VIA_MEMALIGN };
static const char *const align_fn_name[] = { "posix_memalign", "aligned_alloc", "memalign" };

static void *alloc_aligned(const struct api *a, enum align_fn fn, size_t al, size_t size)
{
    void *p = NULL;
    switch (fn) {
    case VIA_POSIX_MEMALIGN: {
        int rc = a->posix_memalign(&p, al, size);
        CHECKF(rc == 0, "%s: posix_memalign(%zu, %zu) returned %d", a->name, al, size, rc);
        return rc == 0 ? p : NULL;
    }
    case VIA_ALIGNED_ALLOC: return a->aligned_alloc(al, size);
    case VIA_MEMALIGN: return a->memalign(al, size);
    }
    return NULL;
}

/* Three live blocks per (function, alignment, size), full usable size written. */
static void check_aligned(const struct api *a, enum align_fn fn, size_t al, size_t size)
{
    void *p[3];
    size_t usable[3];
    for (int i = 0; i < 3; i++) {
        p[i] = alloc_aligned(a, fn, al, size);
        usable[i] = p[i] ? a->usable_size(p[i]) : 0;
        CHECKF(p[i] && is_aligned(p[i], al) && usable[i] >= size,
               "%s: %s(align %zu, size %zu) = %p usable %zu", a->name, align_fn_name[fn], al, size, p[i], usable[i]);
        if (p[i]) fill(p[i], usable[i], (unsigned)(al + size + i));
    }
    for (int i = 0; i < 3; i++) {
        if (!p[i]) continue;
        CHECKF(first_bad(p[i], usable[i], (unsigned)(al + size + i)) == usable[i],
               "%s: aligned block (align %zu, size %zu) overwritten", a->name, al, size);
        if (fn == VIA_ALIGNED_ALLOC) a->free_aligned_sized(p[i], al, size);
        else a->free(p[i]);
    }
}

static void test_aligned(const struct api *a)
{
    for (size_t al = 1; al <= 4 * MiB; al <<= 1) {
        const size_t sizes[] = { 1, 24, al / 2 + 1, al, al + 1, 3 * al, 5000, 100000 };
        for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
            if (al >= sizeof(void *)) check_aligned(a, VIA_POSIX_MEMALIGN, al, sizes[s]);
            check_aligned(a, VIA_ALIGNED_ALLOC, al, sizes[s]);
            check_aligned(a, VIA_MEMALIGN, al, sizes[s]);
        }
    }
    void *p = (void *)1;
    int rc = a->posix_memalign(&p, 64, 0);      /* NULL or a unique pointer */
    CHECK(rc == 0 && is_aligned(p, 64));
    a->free(p);
}

static void test_valloc_pvalloc(const struct api *a)
{
    const size_t page = (size_t)sysconf(_SC_PAGESIZE);
    const size_t sizes[] = { 1, 100, page - 1, page, page + 1, 100000, MiB + 1, 3 * MiB };
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        size_t size = sizes[i], rounded = (size + page - 1) / page * page;
        void *v = a->valloc(size), *pv = a->pvalloc(size);
        CHECKF(v && is_aligned(v, page) && a->usable_size(v) >= size, "%s: valloc(%zu) = %p", a->name, size, v);
        CHECKF(pv && is_aligned(pv, page) && a->usable_size(pv) >= rounded,
               "%s: pvalloc(%zu) = %p usable %zu", a->name, size, pv, pv ? a->usable_size(pv) : 0);
        if (v) fill(v, size, 5);
        if (pv) fill(pv, rounded, 6);
        if (v) CHECK(first_bad(v, size, 5) == size);
        if (pv) CHECK(first_bad(pv, rounded, 6) == rounded);
        a->free(v);
        a->free(pv);
    }
    void *z = a->pvalloc(0);
    CHECK(!z || is_aligned(z, page));
    a->free(z);
}

static int all_zero(const void *p, size_t n)
{
    const uint8_t *b = p;
    for (size_t i = 0; i < n; i++)
        if (b[i]) return 0;
    return 1;
}

/* calloc memory is zero, also when it reuses dirty freed blocks. */
static void check_calloc_size(const struct api *a, size_t size)
{
    void *blocks[64];
    int count = (int)(32 * MiB / size < 64 ? 32 * MiB / size + 1 : 64);
    for (int round = 0; round < 3; round++) {
        for (int i = 0; i < count; i++) {
            blocks[i] = a->malloc(size);
            if (blocks[i]) memset(blocks[i], 0xA5, a->usable_size(blocks[i]));
        }
        for (int i = 0; i < count; i++) a->free(blocks[i]);
        for (int i = 0; i < count; i++) {
            blocks[i] = i & 1 ? a->calloc(size, 1) : a->calloc(1, size);
            CHECKF(blocks[i] && is_aligned(blocks[i], min_align(size)) && all_zero(blocks[i], size),
                   "%s: calloc(%zu) = %p misaligned or not zero", a->name, size, blocks[i]);
        }
        for (int i = 0; i < count; i++) a->free(blocks[i]);
    }
    for (int i = 0; i < 100; i++) {
        void *p = a->malloc(size);
        if (p) memset(p, 0xFF, a->usable_size(p));
        a->free(p);
        p = a->calloc(1, size);
        CHECKF(p && all_zero(p, size), "%s: calloc(%zu) after free not zero", a->name, size);
        a->free(p);
    }
}

static void test_calloc(const struct api *a)
{
    for (size_t i = 0; i < N_TIER_SIZES; i++) check_calloc_size(a, tier_sizes[i]);
    void *p = a->calloc(100, 37);
    CHECK(p && all_zero(p, 3700) && a->usable_size(p) >= 3700);
    a->free(p);
}

static void check_realloc_pair(const struct api *a, size_t from, size_t to)
{
    void *p = a->malloc(from);
    if (!p) { CHECKF(0, "%s: malloc(%zu)", a->name, from); return; }
    fill(p, from, (unsigned)from);
    void *q = a->realloc(p, to);
    size_t keep = from < to ? from : to;
    CHECKF(q && is_aligned(q, min_align(to)) && a->usable_size(q) >= to,
           "%s: realloc(%zu -> %zu) = %p", a->name, from, to, q);
    if (!q) { a->free(p); return; }
    CHECKF(first_bad(q, keep, (unsigned)from) == keep, "%s: realloc %zu -> %zu lost contents at %zu",
           a->name, from, to, first_bad(q, keep, (unsigned)from));
    fill(q, to, 3);
    a->free(q);
}

/* Grow one block from 1 B to 12 MiB and back, checking the kept prefix each step. */
static void test_realloc_chain(const struct api *a)
{
    void *p = NULL;
    size_t size = 0, next = 1;
    int shrinking = 0;
    while (next > 0) {
        void *q = a->realloc(p, next);
        size_t keep = size < next ? size : next;
        CHECKF(q && first_bad(q, keep, 9) == keep, "%s: realloc chain %zu -> %zu", a->name, size, next);
        if (!q) break;
        fill(q, next, 9);
        p = q;
        size = next;
        if (size > 12 * MiB) shrinking = 1;
        next = shrinking ? size * 3 / 4 : size * 4 / 3 + 1;
    }
    a->free(p);
}

/* Blocks from posix_memalign of every tier can be resized like any other. */
static void test_realloc_aligned(const struct api *a)
{
    const size_t aligns[] = { 64, 4096, 64 * KiB, 2 * MiB }, sizes[] = { 100, 5000, 100000, 2 * MiB };
    for (size_t i = 0; i < 4; i++) {
        for (size_t j = 0; j < 4; j++) {
            size_t size = sizes[j];
            void *p = NULL;
            if (a->posix_memalign(&p, aligns[i], size) != 0) { CHECK(p); continue; }
            fill(p, size, 11);
            void *q = a->realloc(p, size * 3);
            CHECKF(q && first_bad(q, size, 11) == size, "%s: realloc of a %zu-aligned block of %zu up",
                   a->name, aligns[i], size);
            if (!q) { a->free(p); continue; }
            void *r = a->realloc(q, size / 2);
            CHECKF(r && first_bad(r, size / 2, 11) == size / 2, "%s: realloc of a %zu-aligned block of %zu down",
                   a->name, aligns[i], size);
            a->free(r ? r : q);
        }
    }
}

static void test_realloc(const struct api *a)
{
    for (size_t i = 0; i < N_TIER_SIZES; i++)
        for (size_t j = 0; j < N_TIER_SIZES; j++) check_realloc_pair(a, tier_sizes[i], tier_sizes[j]);
    test_realloc_chain(a);
    test_realloc_aligned(a);
    void *p = a->reallocarray(NULL, 10, 10);
    CHECK(p && a->usable_size(p) >= 100);
    if (p) fill(p, 100, 4);
    void *q = a->reallocarray(p, 1000, 100);
    CHECK(q && first_bad(q, 100, 4) == 100 && a->usable_size(q) >= 100000);
    a->free(q ? q : p);
}

static void free_sized_round(const struct api *a)
{
    const size_t aligns[] = { 16, 64, 4096, 65536, 2 * MiB };
    for (size_t i = 0; i < N_TIER_SIZES; i++) {
        size_t s = tier_sizes[i], n = s / 3 + 1;
        a->free_sized(a->malloc(s), s);
        a->free_sized(a->calloc(3, n), 3 * n);
        a->free_sized(a->realloc(a->malloc(s / 2 + 1), s), s);
        for (size_t k = 0; k < sizeof aligns / sizeof aligns[0]; k++)
            a->free_aligned_sized(a->aligned_alloc(aligns[k], s), aligns[k], s);
    }
}

/* free_sized / free_aligned_sized really free: in-use bytes stop growing
 * (each round allocates about 130 MB). */
static void test_free_sized(const struct api *a)
{
    a->free_sized(NULL, 0);
    a->free_aligned_sized(NULL, 64, 0);
    free_sized_round(a);
    free_sized_round(a);
    size_t early = a->mallinfo2().uordblks;
    for (int round = 0; round < 10; round++) free_sized_round(a);
    size_t late = a->mallinfo2().uordblks;
    CHECKF(late < early + 4 * MiB, "%s: free_sized leaks: in use %zu -> %zu", a->name, early, late);
}

struct burst {
    const struct api *a;
    size_t total;                /* bytes requested */
    struct mallinfo2 allocated;  /* mallinfo2 with the burst allocated */
    struct mallinfo2 freed;      /* and after freeing it */
};

/* Allocates about 10 MB over every tier (4 MB of it Large), then frees it. */
static void *run_burst(void *arg)
{
    enum { SMALL = 5000, MID = 50, BIG = 10, LARGE = 2 };
    static void *blocks[SMALL + MID + BIG + LARGE];
    struct burst *b = arg;
    const struct api *a = b->a;
    int n = 0;
    b->total = 0;
    for (int i = 0; i < SMALL; i++, b->total += 200) blocks[n++] = a->malloc(200);
    for (int i = 0; i < MID; i++, b->total += 40 * KiB) blocks[n++] = a->malloc(40 * KiB);
    for (int i = 0; i < BIG; i++, b->total += 300 * KiB) blocks[n++] = a->malloc(300 * KiB);
    for (int i = 0; i < LARGE; i++, b->total += 2 * MiB) blocks[n++] = a->malloc(2 * MiB);
    b->allocated = a->mallinfo2();
    for (int i = 0; i < n; i++) a->free(blocks[i]);
    b->freed = a->mallinfo2();
    return NULL;
}

/* uordblks (bytes in use) grows by the burst and shrinks when it is freed,
 * at least by the Large blocks (blocks in thread caches may count as in use). */
static void test_mallinfo_trim(const struct api *a)
{
    struct burst b = { .a = a };
    struct mallinfo2 m0 = a->mallinfo2();
    run_burst(&b);
    CHECKF(b.allocated.uordblks >= m0.uordblks + b.total / 2, "%s: in use %zu -> %zu after allocating %zu",
           a->name, m0.uordblks, b.allocated.uordblks, b.total);
    CHECKF(b.allocated.arena >= b.allocated.uordblks, "%s: mapped %zu < in use %zu", a->name,
           b.allocated.arena, b.allocated.uordblks);
    CHECKF(b.allocated.hblkhd >= m0.hblkhd + 4 * MiB, "%s: large bytes %zu -> %zu", a->name, m0.hblkhd,
           b.allocated.hblkhd);
    CHECKF(b.freed.uordblks + b.total / 4 <= b.allocated.uordblks, "%s: in use %zu -> %zu after freeing %zu",
           a->name, b.allocated.uordblks, b.freed.uordblks, b.total);
    int rc = a->malloc_trim(0);
    CHECK(rc == 0 || rc == 1);
    CHECK(a->mallinfo2().arena <= b.freed.arena);
}

static int int_field(size_t v) { return v > INT_MAX ? INT_MAX : (int)v; }

/* The size="N" of the element that starts with tag in xml, or -1. */
static long long xml_size(const char *xml, const char *tag)
{
    const char *at = strstr(xml, tag);
    long long v;
    return at && sscanf(at + strlen(tag), " size=\"%lld\"", &v) == 1 ? v : -1;
}

/* A file's text (up to size - 1 bytes) from its start. */
static void file_text(FILE *f, char *text, size_t size)
{
    rewind(f);
    size_t got = fread(text, 1, size - 1, f);
    text[got] = 0;
}

/* glibc's reports give hakmem's figures: mallinfo those of mallinfo2 (at
 * most INT_MAX), malloc_info the same as XML (options must be 0), and
 * malloc_stats hakmem's counters report on stderr. */
static void test_reports(const struct api *a)
{
    void *volatile big = a->malloc(3 * MiB), *volatile small = a->malloc(100);
    struct mallinfo2 m2 = a->mallinfo2();
    struct mallinfo m = a->mallinfo();
    CHECKF(m.arena == int_field(m2.arena) && m.uordblks == int_field(m2.uordblks) &&
           m.fordblks == int_field(m2.fordblks) && m.hblkhd == int_field(m2.hblkhd),
           "%s: mallinfo %d %d %d %d, mallinfo2 %zu %zu %zu %zu", a->name, m.arena, m.uordblks,
           m.fordblks, m.hblkhd, m2.arena, m2.uordblks, m2.fordblks, m2.hblkhd);
    CHECK(m.hblkhd >= (int)(3 * MiB) && m.uordblks >= m.hblkhd);

    static char buf[4096], text[4096];
    FILE *f = tmpfile();
    CHECK(f != NULL);
    if (!f) return;
    setvbuf(f, buf, _IOFBF, sizeof buf);       /* the stream allocates nothing */
    m2 = a->mallinfo2();
    CHECK(a->malloc_info(0, f) == 0);
    file_text(f, text, sizeof text);
    CHECKF(strstr(text, "<malloc version=") == text && strstr(text, "</malloc>"), "%s: %s", a->name, text);
    CHECKF(xml_size(text, "<system type=\"current\"") == (long long)m2.arena &&
           xml_size(text, "<total type=\"in-use\"") == (long long)m2.uordblks &&
           xml_size(text, "<total type=\"free\"") == (long long)m2.fordblks &&
           xml_size(text, "<total type=\"mmap\"") == (long long)m2.hblkhd &&
           xml_size(text, "<system type=\"max\"") >= (long long)m2.arena,
           "%s: malloc_info against mallinfo2 %zu %zu %zu %zu: %s", a->name, m2.arena, m2.uordblks,
           m2.fordblks, m2.hblkhd, text);
    errno = 0;
    CHECK(a->malloc_info(1, f) == -1 && errno == EINVAL);
    errno = 0;
    CHECK(a->malloc_info(0, NULL) == -1 && errno == EINVAL);
    fclose(f);

    FILE *err = tmpfile();
    CHECK(err != NULL);
    if (!err) return;
    fflush(stderr);
    int saved = dup(2);
    CHECK(saved >= 0 && dup2(fileno(err), 2) == 2);
    a->malloc_stats();
    CHECK(dup2(saved, 2) == 2);
    close(saved);
    file_text(err, text, sizeof text);
    fclose(err);
    CHECKF(strstr(text, "statistics") && strstr(text, "in use"), "%s: malloc_stats printed: %.200s", a->name, text);
    a->free(big);
    a->free(small);
}

/* Run first, in a fresh process: once a thread has freed all it allocated
 * and exited (its caches flushed), nothing of it counts as in use. */
static void test_in_use_after_thread_exit(const struct api *a)
{
    struct burst b = { .a = a };
    size_t before = a->mallinfo2().uordblks;
    pthread_t t;
    CHECK(pthread_create(&t, NULL, run_burst, &b) == 0 && pthread_join(t, NULL) == 0);
    size_t after = a->mallinfo2().uordblks;
    CHECKF(after <= before + b.total / 10, "%s: in use %zu -> %zu after a thread allocated, freed %zu bytes "
           "and exited", a->name, before, after, b.total);
}

static void run_all(const struct api *a)
{
    test_zero_and_null(a);
    test_realloc_zero(a);
    test_sizes(a);
    test_huge(a);
    test_realloc_failure(a);
    test_bad_alignment(a);
    test_aligned(a);
    test_valloc_pvalloc(a);
    test_calloc(a);
    test_realloc(a);
    test_free_sized(a);
    test_mallinfo_trim(a);
    test_reports(a);
}

int main(void)
{
    test_in_use_after_thread_exit(&hak_api);
    CHECKF(free_sized && free_aligned_sized, "libhakmem does not define free_sized and free_aligned_sized");
    if (free_sized && free_aligned_sized) run_all(&std_api);
    run_all(&hak_api);
    TEST_END();
}
