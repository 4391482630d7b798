/* bench_trim [MB] — memory back to the OS after a peak: allocates MB
 * (default 380) in 4 KiB..64 KiB blocks, frees it all, calls malloc_trim(0),
 * and prints VmRSS (KiB) before, at the peak, after the frees and after the
 * trim, as one result line. Run it under each allocator by LD_PRELOAD. */
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static long vm_rss_kib(void) {
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    long kib = -1;
    while (f && fgets(line, sizeof line, f))
        if (!strncmp(line, "VmRSS:", 6)) kib = atol(line + 6);
    if (f) fclose(f);
    return kib;
}

int main(int argc, char **argv) {
    long mb = argc > 1 ? atol(argv[1]) : 380;
    if (mb <= 0) { fprintf(stderr, "usage: bench_trim [MB]\n"); return 2; }
    size_t target = (size_t)mb << 20, total = 0, n = 0, cap = 1 << 16;
    void **blocks = malloc(cap * sizeof *blocks);
    long before = vm_rss_kib();
    unsigned seed = 1;
    while (total < target) {
        seed = seed * 1103515245u + 12345u;
        size_t size = 4096 + (seed >> 8) % (60 * 1024);
        if (n == cap) blocks = realloc(blocks, (cap *= 2) * sizeof *blocks);
        if (!blocks || !(blocks[n] = malloc(size))) { fprintf(stderr, "bench_trim: out of memory\n"); return 1; }
        memset(blocks[n++], 1, size);
        total += size;
    }
    long peak = vm_rss_kib();
    for (size_t i = 0; i < n; i++) free(blocks[i]);
    long freed = vm_rss_kib();
    int trimmed = malloc_trim(0);
    long after = vm_rss_kib();
    printf("bench=trim mb=%ld rss_before_kb=%ld rss_peak_kb=%ld rss_freed_kb=%ld rss_trimmed_kb=%ld trim_returned=%d\n",
           mb, before, peak, freed, after, trimmed);
    free(blocks);
    return 0;
}
