/* The memory limit (hak_set_limit, HAKMEM_LIMIT_MB; os.c counts, api.c
 * trims and retries):
 *   - the cgroup v2 parser, on a fake /proc/self/cgroup and cgroup tree:
 *     "max" is no limit, the smallest memory.max along the path holds;
 *   - hard: allocations of every tier past the limit return NULL with errno
 *     ENOMEM, hakmem never has more mapped than the limit (beyond its
 *     tables), and after frees a block of another tier fits again; the
 *     same from 4 threads at once;
 *   - soft: a program that frees and reallocates, each round in other size
 *     classes, keeps its mapped bytes near the limit (without the limit
 *     they grow round after round), and no allocation fails. */
#include "testing.h"
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "hakmem.h"
#include "hakmem_internal.h"

#define MiB ((size_t)1 << 20)
#define TABLE_SLACK (2 * MiB)   /* tables and metadata: counted, never refused */

static char dir[64];

static void put(const char *rel, const char *text) {
    char path[256];
    snprintf(path, sizeof path, "%s/%s", dir, rel);
    FILE *f = fopen(path, "w");
    CHECK(f != NULL);
    if (!f) return;
    fputs(text, f);
    fclose(f);
}

static size_t cgroup(const char *proc_text) {
    char proc[256], root[256];
    put("proc_cgroup", proc_text);
    snprintf(proc, sizeof proc, "%s/proc_cgroup", dir);
    snprintf(root, sizeof root, "%s/fs", dir);
    return _hak_os_cgroup_limit(proc, root);
}

static void test_cgroup_parser(void) {
    snprintf(dir, sizeof dir, "/tmp/hak_cgroup_%d", (int)getpid());
    char path[256];
    const char *dirs[] = { "", "/fs", "/fs/user.slice", "/fs/user.slice/app.scope" };
    for (unsigned i = 0; i < 4; i++) {
        snprintf(path, sizeof path, "%s%s", dir, dirs[i]);
        mkdir(path, 0700);
    }
    put("fs/user.slice/app.scope/memory.max", "max\n");
    put("fs/user.slice/memory.max", "max\n");
    CHECK(cgroup("0::/user.slice/app.scope\n") == 0);               /* max all the way */
    put("fs/user.slice/memory.max", "104857600\n");
    CHECK(cgroup("0::/user.slice/app.scope\n") == 100 * MiB);       /* a parent's limit */
    put("fs/user.slice/app.scope/memory.max", "52428800\n");
    CHECK(cgroup("0::/user.slice/app.scope\n") == 50 * MiB);        /* the smallest */
    CHECK(cgroup("12:memory:/user.slice\n0::/user.slice/app.scope/\n") == 50 * MiB);  /* v1 lines first */
    CHECK(cgroup("12:memory:/user.slice\n") == 0);                  /* cgroup v1 only */
    CHECK(cgroup("0::/elsewhere\n") == 0);                          /* no memory.max */
    put("fs/memory.max", "1073741824");
    CHECK(cgroup("0::/\n") == 1024 * MiB);                          /* a container's root */
    CHECK(_hak_os_cgroup_limit("/nonexistent/cgroup", "/nonexistent") == 0);
    const char *files[] = { "fs/user.slice/app.scope/memory.max", "fs/user.slice/memory.max",
                            "fs/memory.max", "proc_cgroup" };
    for (unsigned i = 0; i < 4; i++) { snprintf(path, sizeof path, "%s/%s", dir, files[i]); unlink(path); }
    for (int i = 3; i >= 0; i--) { snprintf(path, sizeof path, "%s%s", dir, dirs[i]); rmdir(path); }
}

static size_t mapped(void) { return (size_t)atomic_load(&_hak_stats_gauges.bytes_mapped); }

/* Sizes of every tier: Tiny, L2, the span heap, Large. */
static const size_t sizes[] = { 64, 8192, 100 * 1024, 3 * MiB };
#define MAX_BLOCKS 1000000

struct fill { size_t size, limit, got; unsigned n, nulls; int bad_errno; void **blocks; };

/* Allocates blocks of f->size until the limit refuses one. */
static void *fill(void *arg) {
    struct fill *f = arg;
    f->n = 0; f->got = 0; f->bad_errno = 0;
    while (f->n < MAX_BLOCKS) {
        errno = 0;
        void *p = hak_malloc(f->size);
        if (!p) { f->nulls++; if (errno != ENOMEM) f->bad_errno = errno; break; }
        memset(p, 1, f->size < 4096 ? f->size : 4096);
        f->blocks[f->n++] = p;
        f->got += f->size;
    }
    return NULL;
}

static void empty(struct fill *f) {
    for (unsigned i = 0; i < f->n; i++) hak_free(f->blocks[i]);
    f->n = 0;
}

static void test_hard(void) {
    hak_malloc_trim(0);
    size_t limit = mapped() + 48 * MiB;
    hak_set_limit(limit, 1);
    int hard = 0;
    CHECK(hak_limit(&hard) == limit && hard == 1);
    static void *blocks[MAX_BLOCKS];
    struct fill f = { .blocks = blocks };
    for (unsigned t = 0; t < 4; t++) {
        f.size = sizes[t];
        fill(&f);
        fprintf(stderr, "size %zu: %u blocks, %zu mapped, limit %zu\n", f.size, f.n, mapped() >> 20, limit >> 20);
        CHECKF(f.nulls == t + 1 && f.bad_errno == 0, "size %zu: %u NULLs, errno %d", f.size, f.nulls, f.bad_errno);
        CHECKF(mapped() <= limit + TABLE_SLACK, "size %zu: %zu mapped", f.size, mapped());
        CHECKF(f.got >= 24 * MiB, "size %zu: only %zu bytes before the limit", f.size, f.got);
        errno = 0;
        CHECK(hak_calloc(1, 8 * MiB) == NULL && errno == ENOMEM);
        CHECK(hak_aligned_alloc(4096, 64 * MiB) == NULL && errno == ENOMEM);
        /* Under the limit again: any other tier's block fits in what was freed. */
        empty(&f);
        for (unsigned u = 0; u < 4; u++) {
            void *p = hak_malloc(sizes[u] * (u == 3 ? 8 : 1));
            CHECKF(p != NULL, "after %zu-byte blocks, %zu bytes", f.size, sizes[u]);
            hak_free(p);
        }
    }
    hak_set_limit(0, 0);
}

/* Four threads fill the limit at once: the limit holds for their sum. */
static void test_hard_threads(void) {
    struct fill f[4];
    pthread_t th[4];
    for (unsigned t = 0; t < 4; t++) {
        f[t] = (struct fill){ .size = sizes[t] };
        f[t].blocks = calloc(MAX_BLOCKS, sizeof(void *));   /* before the limit */
    }
    hak_malloc_trim(0);
    size_t limit = mapped() + 64 * MiB;
    hak_set_limit(limit, 1);
    for (unsigned t = 0; t < 4; t++) pthread_create(&th[t], NULL, fill, &f[t]);
    for (unsigned t = 0; t < 4; t++) pthread_join(th[t], NULL);
    CHECKF(mapped() <= limit + 2 * TABLE_SLACK, "%zu mapped over a limit of %zu", mapped(), limit);
    for (unsigned t = 0; t < 4; t++) {
        CHECK(f[t].nulls == 1 && f[t].bad_errno == 0);
        empty(&f[t]);
    }
    hak_set_limit(0, 0);
    for (unsigned t = 0; t < 4; t++) free(f[t].blocks);
}

/* Rounds of 24 MiB in classes the earlier rounds did not use, all freed:
 * the highest mapped bytes seen after a round's allocations. */
static size_t churn(size_t limit, bool *all_served) {
    static void *blocks[MAX_BLOCKS];
    size_t high = 0;
    *all_served = true;
    for (unsigned round = 0; round < 24; round++) {
        size_t size = 48 + 80 * (size_t)round * (round + 1);        /* 48 B .. 44 KiB */
        unsigned n = 0;
        for (size_t got = 0; got < 24 * MiB && n < MAX_BLOCKS; got += size) {
            void *p = hak_malloc(size);
            if (!p) { *all_served = false; break; }
            memset(p, 1, size);
            blocks[n++] = p;
        }
        if (mapped() > high) high = mapped();
        for (unsigned i = 0; i < n; i++) hak_free(blocks[i]);
    }
    (void)limit;
    return high;
}

static void test_soft(void) {
    hak_malloc_trim(0);
    size_t base = mapped(), limit = base + 40 * MiB;
    bool served;
    size_t unlimited = churn(0, &served) - base;
    CHECK(served);
    hak_malloc_trim(0);
    base = mapped();
    limit = base + 40 * MiB;
    hak_set_limit(limit, 0);
    size_t limited = churn(limit, &served);
    CHECK(served);
    /* The bar rises by a sixteenth of the limit when a trim cannot get
     * under it; here every round's 24 MiB fits, so it never has to. */
    CHECKF(limited <= limit + limit / 16 + TABLE_SLACK,
           "soft limit %zu MiB: %zu MiB mapped (without the limit: %zu MiB above the start)",
           limit >> 20, limited >> 20, unlimited >> 20);
    fprintf(stderr, "soft limit %zu MiB: at most %zu MiB mapped; without it %zu MiB more than at the start\n",
            limit >> 20, limited >> 20, unlimited >> 20);
    /* A soft limit never fails: a block bigger than the limit is served. */
    void *big = hak_malloc(limit + 8 * MiB);
    CHECK(big != NULL);
    hak_free(big);
    hak_set_limit(0, 0);
}

int main(void) {
    test_cgroup_parser();
    test_soft();
    test_hard();
    test_hard_threads();
    TEST_END();
}
