/* bench_heap API SIZE N BATCH — first-class heaps against malloc: N blocks
 * of SIZE bytes, BATCH at a time, from
 *   malloc    malloc, then free (whatever allocator is preloaded)
 *   hak       hak_heap_malloc on one heap, then free (LD_PRELOAD=libhakmem.so)
 *   hak-arena hak_heap_malloc on a new heap per batch, then hak_heap_destroy
 *   mi        mi_heap_malloc on one heap, then mi_free (LD_PRELOAD=libmimalloc.so.2)
 *   mi-arena  mi_heap_malloc on a new heap per batch, then mi_heap_destroy
 * The heap functions are looked up at run time (dlsym), so this program,
 * like every bench/ program, links no allocator. Not in the default suite:
 * a measurement for heaps alone. ops counts the mallocs and frees (a destroy
 * counts as BATCH frees). */
#include "bench_common.h"

#include <dlfcn.h>

#define HEAP_MAX_BATCH 65536u

static const char *usage = "bench_heap malloc|hak|hak-arena|mi|mi-arena SIZE N BATCH  (N a multiple of BATCH)";

struct heap_api {
    void *(*heap_new)(void);
    void *(*heap_malloc)(void *, size_t);
    void (*heap_destroy)(void *);
    void (*block_free)(void *);
};

static void *need(const char *name) {
    void *f = dlsym(RTLD_DEFAULT, name);
    if (!f) bench_fail("%s not found: preload the allocator that has it", name);
    return f;
}

static void std_free(void *p) { free(p); }

int main(int argc, char **argv) {
    if (argc != 5) bench_usage_error("expected 4 arguments", usage);
    const char *api = argv[1];
    uint64_t size = bench_arg_u64(argv[2], "SIZE", usage);
    uint64_t n = bench_arg_u64(argv[3], "N", usage);
    uint64_t batch = bench_arg_u64(argv[4], "BATCH", usage);
    if (batch < 1 || batch > HEAP_MAX_BATCH || n % batch) bench_usage_error("BATCH 1..65536 dividing N", usage);
    bool hak = !strncmp(api, "hak", 3), mi = !strncmp(api, "mi", 2) && strcmp(api, "malloc");
    bool arena = strstr(api, "-arena") != NULL;
    if (!hak && !mi && strcmp(api, "malloc")) bench_usage_error("unknown API", usage);
    struct heap_api h = { 0 };
    if (hak || mi) {
        h.heap_new = need(hak ? "hak_heap_new" : "mi_heap_new");
        h.heap_malloc = need(hak ? "hak_heap_malloc" : "mi_heap_malloc");
        h.heap_destroy = need(hak ? "hak_heap_destroy" : "mi_heap_destroy");
        h.block_free = hak ? std_free : (void (*)(void *))need("mi_free");
    }
    static void *blocks[HEAP_MAX_BATCH];
    uintptr_t mix = 0;
    void *heap = (hak || mi) && !arena ? h.heap_new() : NULL;
    double begin = bench_now();
    for (uint64_t done = 0; done < n; done += batch) {
        if (arena) heap = h.heap_new();
        for (uint64_t j = 0; j < batch; j++) {
            blocks[j] = heap ? h.heap_malloc(heap, size) : malloc(size);
            if (!blocks[j]) bench_fail("out of memory");
            mix ^= (uintptr_t)blocks[j];
        }
        if (arena) { h.heap_destroy(heap); continue; }
        for (uint64_t j = 0; j < batch; j++) heap ? h.block_free(blocks[j]) : free(blocks[j]);
    }
    double seconds = bench_now() - begin;
    if (heap && !arena) h.heap_destroy(heap);
    bench_report("heap", 2 * n, seconds, 1, "api=%s size=%" PRIu64 " batch=%" PRIu64 " parity=%u",
                 api, size, batch, (unsigned)(mix & 1));
    return 0;
}
