/* Foreign pointers (run by test_foreign.sh): this program is not linked with
 * hakmem. It allocates with the C library's malloc, then dlopens libhakmem.so
 * (argv[1]) with RTLD_LOCAL and hands those glibc blocks to hak_free,
 * hak_realloc and hak_malloc_usable_size. hakmem must give them back to the C
 * library instead of aborting. The program's own mallinfo2 is glibc's, since
 * hakmem is not in the global scope. Prints "foreign ok" and exits 0 on success. */
#include <dlfcn.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MB 1000000

static int failures;

static void check(int ok, const char *what)
{
    if (!ok) { printf("FAILED: %s\n", what); failures++; }
}

static void *symbol(void *lib, const char *name)
{
    void *s = dlsym(lib, name);
    if (!s) { printf("FAILED: dlsym(%s): %s\n", name, dlerror()); exit(1); }
    return s;
}

/* glibc's figure for bytes in use, wherever the block lives (heap or mmap). */
static size_t glibc_in_use(void)
{
    struct mallinfo2 m = mallinfo2();
    return m.uordblks + m.hblkhd;
}

int main(int argc, char **argv)
{
    if (argc != 2) { fprintf(stderr, "usage: plain_foreign LIBHAKMEM.so\n"); return 2; }
    char *big = malloc(MB), *small = malloc(100), *mid = malloc(5000);
    if (!big || !small || !mid) { printf("FAILED: glibc malloc\n"); return 1; }
    memset(big, 1, MB);
    for (int i = 0; i < 5000; i++) mid[i] = (char)(i * 7);
    strcpy(small, "foreign block");

    void *lib = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
    if (!lib) { printf("FAILED: dlopen: %s\n", dlerror()); return 1; }
    void (*hak_free)(void *) = (void (*)(void *))symbol(lib, "hak_free");
    void *(*hak_realloc)(void *, size_t) = (void *(*)(void *, size_t))symbol(lib, "hak_realloc");
    size_t (*hak_usable)(const void *) = (size_t (*)(const void *))symbol(lib, "hak_malloc_usable_size");

    check(hak_usable(mid) >= 5000, "hak_malloc_usable_size of a glibc block");
    size_t before = glibc_in_use();
    hak_free(big);
    size_t after = glibc_in_use();
    check(after + MB <= before, "hak_free of a 1 MB glibc block gives it back to glibc");
    printf("glibc in-use drop %s\n", after + MB <= before ? "ok" : "missing");

    char *grown = hak_realloc(mid, 200000);
    check(grown != NULL, "hak_realloc of a glibc block");
    int kept = 1;
    for (int i = 0; grown && i < 5000; i++) kept &= grown[i] == (char)(i * 7);
    check(kept, "hak_realloc of a glibc block keeps its contents");
    if (grown) memset(grown + 5000, 2, 200000 - 5000);
    hak_free(grown);
    check(strcmp(small, "foreign block") == 0, "untouched glibc block");
    hak_free(small);
    hak_free(NULL);

    void *again = malloc(MB);   /* glibc still works */
    check(again != NULL, "glibc malloc after the foreign frees");
    free(again);
    printf("%s\n", failures ? "foreign FAILED" : "foreign ok");
    return failures ? 1 : 0;
}
