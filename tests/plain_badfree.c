/* Frees pointers that no allocator handed out (a stack address, garbage,
 * pointers into the middle of blocks of three tiers, a page of a file
 * mapping past the file's end, where a load faults with SIGBUS though
 * /proc/self/maps shows the page readable), then keeps working and
 * prints "survived". test_invalid_ignore.sh runs it on hakmem with
 * HAKMEM_INVALID_FREE=ignore, where each bad free is a counted no-op, and
 * without it, where the first one aborts. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE                  /* the builds pass -D_GNU_SOURCE; a plain cc does not */
#endif
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

/* Hides where a pointer comes from, so the compiler neither warns about nor
 * optimises the deliberate misuse. */
static void *launder(void *p) { __asm__ volatile("" : "+r"(p)); return p; }

int main(void)
{
    char on_stack[64];
    const size_t sizes[] = { 100, 100 * 1024, 4 * 1024 * 1024 };
    char *blocks[3];
    for (int i = 0; i < 3; i++) {
        blocks[i] = malloc(sizes[i]);
        if (!blocks[i]) return 2;
        memset(blocks[i], 'a' + i, sizes[i]);
    }
    free(launder(on_stack + 16));
    free(launder((void *)0x1234560));
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    int fd = memfd_create("badfree", MFD_CLOEXEC);
    if (fd < 0 || ftruncate(fd, (off_t)page) != 0) return 2;
    char *file = mmap(NULL, 2 * page, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (file == MAP_FAILED) return 2;
    free(launder(file + page + 64));            /* its chunk header would fault */
    for (int i = 0; i < 3; i++) {
        free(launder(blocks[i] + 8));
        free(launder(blocks[i] + 16));
    }
    for (int i = 0; i < 3; i++) {
        for (size_t k = 0; k < sizes[i]; k++)
            if (blocks[i][k] != 'a' + i) { printf("block %d damaged\n", i); return 1; }
        free(blocks[i]);
    }
    void *p = malloc(1000);
    free(p);
    printf("survived\n");
    return 0;
}
