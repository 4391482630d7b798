/* First-class heaps through the hak_ API (so the TSan build runs it too):
 * blocks of every size and alignment, freed by the owner and by other
 * threads; destroy gives the pages back (RSS drops) and frees racing with it
 * corrupt nothing; delete keeps blocks valid for other threads; a thread's
 * heaps outlive nothing of it but their blocks; 10,000 new/destroy cycles
 * leave no metadata or mappings behind. The test runs re-executed with
 * HAKMEM_INVALID_FREE=ignore (a free that comes after a destroy is an
 * invalid pointer, counted) and HAKMEM_PURGE_DELAY_MS=0. */
#include "testing.h"
#include "proc_status.h"
#include "hakmem_internal.h"
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>
#include <sys/wait.h>

#if defined(__SANITIZE_THREAD__)                      /* ThreadSanitizer's munmap and checks are slow */
#define CYCLES 300
#define SHARED 5000
#define RACE 500
#else
#define CYCLES 10000
#define SHARED 20000
#define RACE 2000
#endif
#define KiB ((size_t)1024)
#define MiB (1024 * KiB)

static void fill(unsigned char *p, size_t n, unsigned seed) {
    for (size_t i = 0; i < n; i++) p[i] = (unsigned char)(seed + i * 7);
}
static int intact(const unsigned char *p, size_t n, unsigned seed) {
    for (size_t i = 0; i < n; i++) if (p[i] != (unsigned char)(seed + i * 7)) return 0;
    return 1;
}
static size_t mapped(void) { return hak_mallinfo2().arena; }

static const size_t sizes[] = { 0, 1, 15, 16, 17, 100, 128, 129, 1000, 4096, 5000, 65536,
                                100 * 1024, 128 * 1024, 128 * 1024 + 1, 300 * 1024, 3 * MiB };
#define NSIZES (sizeof sizes / sizeof sizes[0])

static void test_blocks(void) {
    hak_heap_t *h = hak_heap_new();
    CHECK(h != NULL);
    void *p[NSIZES][8];
    for (size_t i = 0; i < NSIZES; i++)
        for (unsigned j = 0; j < 8; j++) {
            p[i][j] = hak_heap_malloc(h, sizes[i]);
            CHECK(p[i][j] != NULL && ((uintptr_t)p[i][j] & 15) == 0);
            CHECK(hak_malloc_usable_size(p[i][j]) >= sizes[i]);
            fill(p[i][j], sizes[i], (unsigned)(i * 8 + j));
        }
    for (size_t i = 0; i < NSIZES; i++)                 /* no block overwrote another */
        for (unsigned j = 0; j < 8; j++) CHECK(intact(p[i][j], sizes[i], (unsigned)(i * 8 + j)));
    for (size_t i = 0; i < NSIZES; i++)
        for (unsigned j = 0; j < 8; j += 2) hak_free(p[i][j]);
    /* calloc after dirty blocks came back: zero. */
    for (size_t i = 0; i < NSIZES; i++) {
        unsigned char *z = hak_heap_calloc(h, 1, sizes[i]);
        CHECK(z != NULL);
        size_t nonzero = 0;
        for (size_t k = 0; k < sizes[i]; k++) nonzero += z[k] != 0;
        CHECKF(nonzero == 0, "calloc of %zu: %zu bytes not zero", sizes[i], nonzero);
        hak_free(z);
    }
    CHECK(hak_heap_calloc(h, SIZE_MAX / 2, 3) == NULL);
    /* realloc keeps the contents, growing and shrinking, across the tiers. */
    unsigned char *r = hak_heap_realloc(h, NULL, 10);
    fill(r, 10, 3);
    for (size_t n = 20; n < 4 * MiB; n = n * 3 + 1) {
        size_t keep = n / 3;
        r = hak_heap_realloc(h, r, n);
        CHECK(r != NULL && intact(r, keep < 10 ? keep : 10, 3));
    }
    r = hak_heap_realloc(h, r, 5);
    CHECK(r != NULL && intact(r, 5, 3));
    unsigned char *d = hak_malloc(50);                 /* a default-heap block moves in */
    fill(d, 50, 9);
    d = hak_heap_realloc(h, d, 5000);
    CHECK(d != NULL && intact(d, 50, 9));
    hak_free(d);
    hak_free(r);
    /* aligned blocks, small and large. */
    for (size_t align = 1; align <= 4 * MiB; align *= 2) {
        void *a = hak_heap_aligned_alloc(h, align, 24);
        void *b = hak_heap_aligned_alloc(h, align, align * 3 / 2 + 1);
        CHECKF(a && ((uintptr_t)a & (align - 1)) == 0, "align %zu", align);
        CHECKF(b && ((uintptr_t)b & (align - 1)) == 0, "align %zu", align);
        hak_free(a);
        hak_free(b);
    }
    CHECK(hak_heap_aligned_alloc(h, 48, 10) == NULL);
    for (size_t i = 0; i < NSIZES; i++)
        for (unsigned j = 1; j < 8; j += 2) CHECK(intact(p[i][j], sizes[i], (unsigned)(i * 8 + j)));
    hak_heap_delete(h);                                /* the odd blocks stay valid */
    for (size_t i = 0; i < NSIZES; i++)
        for (unsigned j = 1; j < 8; j += 2) {
            CHECK(intact(p[i][j], sizes[i], (unsigned)(i * 8 + j)));
            CHECK(hak_malloc_usable_size(p[i][j]) >= sizes[i]);
            hak_free(p[i][j]);
        }
}

/* A zero-size block of an alignment only a mapping of its own gives (above
 * 128 KiB) is a page, not a mapping of 0 bytes: it had no seg_map entry,
 * and malloc_usable_size and free of it took it for not hakmem's (the
 * fuzzer's "invalid pointer" on a 1 MiB-aligned address). */
static void test_zero_size_large(void) {
    hak_heap_t *h = hak_heap_new();
    CHECK(h != NULL);
    void *kept[8];
    unsigned n = 0;
    for (size_t align = 256 * KiB; align <= 32 * MiB; align *= 2) {
        unsigned char *p = hak_heap_aligned_alloc(h, align, 0);
        CHECKF(p && ((uintptr_t)p & (align - 1)) == 0, "align %zu", align);
        CHECKF(hak_malloc_usable_size(p) >= 1, "align %zu: usable %zu", align, hak_malloc_usable_size(p));
        p[0] = 1;
        p[hak_malloc_usable_size(p) - 1] = 2;
        if (align <= 2 * MiB) { hak_free(p); continue; }
        kept[n++] = p;
    }
    hak_heap_delete(h);                                /* the kept blocks stay valid */
    for (unsigned i = 0; i < n; i++) {
        CHECK(hak_malloc_usable_size(kept[i]) >= 1 && ((unsigned char *)kept[i])[0] == 1);
        hak_free(kept[i]);
    }
    h = hak_heap_new();
    CHECK(hak_heap_aligned_alloc(h, 4 * MiB, 0) != NULL);
    hak_heap_destroy(h);                               /* and go with a destroy */
}

/* Segments emptied and kept serve other classes: rounds of 10,000 blocks
 * of alternating sizes, all freed each round, on one heap. */
static void test_empty_segments(void) {
    static void *p[10000];
    size_t before = mapped();
    hak_heap_t *h = hak_heap_new();
    for (unsigned round = 0; round < 8; round++) {
        size_t n = round % 2 ? 96 : 512 + 16 * round;
        for (unsigned i = 0; i < 10000; i++) { p[i] = hak_heap_malloc(h, n); fill(p[i], n, i + round); }
        for (unsigned i = 0; i < 10000; i++) CHECK(intact(p[i], n, i + round));
        for (unsigned i = 0; i < 10000; i++) hak_free(p[(i * 7919) % 10000]);
    }
    CHECKF(mapped() <= before + 8 * MiB, "an empty heap maps %zu bytes", mapped() - before);
    hak_heap_destroy(h);
    CHECK(mapped() <= before);
}

/* A live heap whose blocks were all freed keeps 4 empty segments (and its
 * first of the class); the others go back after the purge delay (0 here). */
static void test_empty_released(void) {
    enum { N = 40000 };                                /* 20 MiB of 512-byte blocks */
    static void *p[N];
    long rss0 = proc_status_kib("VmRSS");
    hak_heap_t *h = hak_heap_new();
    for (unsigned i = 0; i < N; i++) memset(p[i] = hak_heap_malloc(h, 512), 1, 512);
    long rss1 = proc_status_kib("VmRSS");
    for (unsigned i = 0; i < N; i++) hak_free(p[i]);
    long rss2 = proc_status_kib("VmRSS");
    CHECKF(rss1 - rss0 > 14 * 1024, "RSS grew by %ld KiB", rss1 - rss0);   /* 20 MiB, less cached pages */
#if !defined(__SANITIZE_THREAD__)                     /* TSan's shadow pages stay */
    CHECKF(rss2 - rss0 < 12 * 1024, "RSS %ld KiB above the start with every block free", rss2 - rss0);
#else
    (void)rss2;
#endif
    hak_heap_destroy(h);
}

/* Destroy: the pages go back (RSS and mapped bytes), the heap's blocks are
 * gone, and the default heap is untouched. */
static void test_destroy_rss(void) {
    unsigned char *mine = hak_malloc(1000);
    fill(mine, 1000, 5);
    size_t before = mapped();
    long rss0 = proc_status_kib("VmRSS");
    hak_heap_t *h = hak_heap_new();
    for (unsigned i = 0; i < 64 * 1024; i++) memset(hak_heap_malloc(h, 1000), 1, 1000);
    for (unsigned i = 0; i < 4; i++) memset(hak_heap_malloc(h, 4 * MiB), 1, 4 * MiB);
    long rss1 = proc_status_kib("VmRSS");
    CHECKF(rss1 - rss0 > 70 * 1024, "RSS grew by %ld KiB", rss1 - rss0);
    CHECK(mapped() >= before + 60 * MiB);             /* 78 MiB, less the cached segments */
    hak_heap_destroy(h);
    long rss2 = proc_status_kib("VmRSS");
    CHECKF(rss1 - rss2 > 70 * 1024, "RSS fell by %ld KiB only", rss1 - rss2);
    CHECKF(mapped() <= before, "mapped %zu after, %zu before", mapped(), before);
    CHECK(intact(mine, 1000, 5));
    hak_free(mine);
}

/* 10,000 heaps made and destroyed: no metadata, mappings or RSS left. */
static int count_maps(void) {
    int fd = open("/proc/self/maps", O_RDONLY), lines = 0;
    char buf[4096];
    ssize_t n;
    while ((n = read(fd, buf, sizeof buf)) > 0)
        for (ssize_t i = 0; i < n; i++) lines += buf[i] == '\n';
    close(fd);
    return lines;
}
static void cycles(unsigned n) {
    for (unsigned i = 0; i < n; i++) {
        hak_heap_t *h = hak_heap_new();
        void *p[21];
        for (unsigned k = 0; k < 20; k++) p[k] = hak_heap_malloc(h, 16u << (k % 14));
        p[20] = hak_heap_malloc(h, 2 * MiB);
        if (i % 2) {
            hak_heap_destroy(h);
        } else {                                        /* the last free of a segment unmaps it */
            hak_heap_delete(h);
            for (unsigned k = 0; k < 21; k++) hak_free(p[k]);
        }
    }
}
static void test_cycles(void) {
    cycles(CYCLES / 10);
    long vm0 = proc_status_kib("VmSize"), rss0 = proc_status_kib("VmRSS");
    int maps0 = count_maps();
    size_t mapped0 = mapped();
    cycles(CYCLES);
    long vm1 = proc_status_kib("VmSize"), rss1 = proc_status_kib("VmRSS");
    int maps1 = count_maps();
    /* qemu-user's own process is what /proc/self/status shows, and qemu
     * 7.2 keeps about 24 KiB for every 4 MiB mmap and munmap it emulates. */
    if (!getenv("HAK_TEST_EMULATOR"))
        CHECKF(vm1 - vm0 < 4096 && rss1 - rss0 < 2048, "VmSize +%ld KiB, RSS +%ld KiB", vm1 - vm0, rss1 - rss0);
    CHECKF(maps1 <= maps0 + 4, "%d mappings, %d before", maps1, maps0);
    CHECK(mapped() <= mapped0);
}

/* ---- threads ---------------------------------------------------------------- */
static void *shared[SHARED];
static size_t shared_size[SHARED];
static atomic_int next_shared, bad_blocks, invalid_total;

static size_t size_of(unsigned i) { return i % 97 == 0 ? 200 * 1024 : 16 + (i * 37) % 3000; }

/* Frees blocks of shared[] in turn with other threads; checks each first
 * unless the heap may be gone (racing). */
struct freer { int check; };
static atomic_int go = 1;                              /* 0: freers wait for it */
static void *freer_main(void *arg) {
    const struct freer *f = arg;
    hak_free(hak_malloc(8));                           /* the thread heap exists: its counters */
    uint64_t invalid0 = _hak_thread_tls.heap->stats.invalid_frees;
    while (!atomic_load(&go)) ;
    for (int i; (i = atomic_fetch_add(&next_shared, 1)) < SHARED; ) {
        if (f->check && !intact(shared[i], shared_size[i], (unsigned)i)) atomic_fetch_add(&bad_blocks, 1);
        hak_free(shared[i]);
    }
    atomic_fetch_add(&invalid_total, (int)(_hak_thread_tls.heap->stats.invalid_frees - invalid0));
    return NULL;
}

static void fill_shared(hak_heap_t *h) {
    for (unsigned i = 0; i < SHARED; i++) {
        shared_size[i] = size_of(i);
        shared[i] = hak_heap_malloc(h, shared_size[i]);
        fill(shared[i], shared_size[i], i);
    }
    atomic_store(&next_shared, 0);
}

/* Other threads free while the owner allocates again: their blocks come
 * back through the remote stack; nothing overlaps. */
static void test_remote_frees(void) {
    size_t before = mapped();
    hak_heap_t *h = hak_heap_new();
    fill_shared(h);
    pthread_t t[3];
    struct freer f = { 1 };
    for (int i = 0; i < 3; i++) pthread_create(&t[i], NULL, freer_main, &f);
    void *mine[SHARED / 4];
    for (unsigned i = 0; i < SHARED / 4; i++) {
        mine[i] = hak_heap_malloc(h, size_of(i));
        fill(mine[i], size_of(i), i + 1);
    }
    for (int i = 0; i < 3; i++) pthread_join(t[i], NULL);
    CHECK(atomic_load(&bad_blocks) == 0);
    for (unsigned i = 0; i < SHARED / 4; i++) CHECK(intact(mine[i], size_of(i), i + 1));
    fill_shared(h);                                    /* reuses the remote-freed blocks */
    for (unsigned i = 0; i < SHARED / 4; i++) CHECK(intact(mine[i], size_of(i), i + 1));
    for (unsigned i = 0; i < SHARED; i++) CHECK(intact(shared[i], shared_size[i], i));
    for (unsigned i = 0; i < SHARED; i++) hak_free(shared[i]);
    for (unsigned i = 0; i < SHARED / 4; i++) hak_free(mine[i]);
    hak_heap_destroy(h);
    /* The freers' first malloc may map a SuperSlab of the default heap. */
    CHECKF(mapped() <= before + 4 * MiB, "mapped %zu after, %zu before", mapped(), before);
}

/* Destroy while three threads free the heap's blocks: every free either
 * came first or is counted as an invalid pointer; nothing else breaks. */
static void test_destroy_racing_frees(void) {
    size_t before = mapped();
    for (int round = 0; round < 5; round++) {
        hak_heap_t *h = hak_heap_new();
        fill_shared(h);
        atomic_store(&invalid_total, 0);
        int first = SHARED - RACE;                     /* the last RACE blocks race */
        atomic_store(&next_shared, first);
        pthread_t t[3];
        struct freer f = { 0 };
        atomic_store(&go, 0);
        for (int i = 0; i < 3; i++) pthread_create(&t[i], NULL, freer_main, &f);
        usleep(1000);
        atomic_store(&go, 1);                          /* the frees start, and the destroy */
        for (int k = 0; k < round * RACE / 2; k++) sched_yield();
        hak_heap_destroy(h);
        for (int i = 0; i < 3; i++) pthread_join(t[i], NULL);
        CHECK(atomic_load(&invalid_total) <= RACE);
        CHECK(mapped() <= before);
    }
    unsigned char *p = hak_malloc(100);                /* the allocator works on */
    fill(p, 100, 1);
    CHECK(intact(p, 100, 1));
    hak_free(p);
}

/* Delete, then other threads free the blocks: they stay valid, and the last
 * free of a segment unmaps it. */
static void test_delete_then_remote_frees(void) {
    size_t before = mapped();
    hak_heap_t *h = hak_heap_new();
    fill_shared(h);
    hak_heap_delete(h);
    pthread_t t[3];
    struct freer f = { 1 };
    atomic_store(&bad_blocks, 0);
    for (int i = 0; i < 3; i++) pthread_create(&t[i], NULL, freer_main, &f);
    for (int i = 0; i < 3; i++) pthread_join(t[i], NULL);
    CHECK(atomic_load(&bad_blocks) == 0);
    CHECKF(mapped() <= before, "mapped %zu after, %zu before", mapped(), before);
}

/* A thread that exits with a heap: the heap is deleted, its blocks live on. */
static void *owner_main(void *arg) {
    (void)arg;
    hak_heap_t *h = hak_heap_new();
    hak_heap_t *gone = hak_heap_new();
    hak_heap_destroy(gone);
    fill_shared(h);
    return NULL;
}
static void test_owner_exit(void) {
    size_t before = mapped();
    pthread_t t;
    pthread_create(&t, NULL, owner_main, NULL);
    pthread_join(t, NULL);
    for (unsigned i = 0; i < SHARED; i++) {
        CHECK(intact(shared[i], shared_size[i], i));
        CHECK(hak_malloc_usable_size(shared[i]) >= shared_size[i]);
    }
    /* realloc moves them to the default heap. */
    size_t default0 = mapped();
    for (unsigned i = 1; i < SHARED; i += 1000) {     /* i % 97 != 0: small blocks */
        shared[i] = hak_realloc(shared[i], shared_size[i] * 2);
        CHECK(intact(shared[i], shared_size[i], i));
    }
    size_t grown = mapped() - default0;
    for (unsigned i = 0; i < SHARED; i++) hak_free(shared[i]);
    CHECKF(mapped() <= before + grown, "mapped %zu after, %zu before", mapped(), before);
}

int main(int argc, char **argv) {
    (void)argc;
    if (!getenv("HAKMEM_INVALID_FREE")) {
        setenv("HAKMEM_INVALID_FREE", "ignore", 1);
        setenv("HAKMEM_PURGE_DELAY_MS", "0", 1);       /* empty segments go back at once */
        test_exec_self(argv, NULL);
        return 99;
    }
    test_blocks();
    test_zero_size_large();
    test_empty_segments();
    test_empty_released();
    test_destroy_rss();
    test_cycles();
    test_remote_frees();
    test_destroy_racing_frees();
    test_delete_then_remote_frees();
    test_owner_exit();
    TEST_END();
}
