/* First-class heaps through the standard names (the -lhakmem path: malloc
 * and free are hakmem's): heap blocks of every tier are freed by free,
 * resized by realloc (which moves them to the default heap when they must
 * move) and measured by malloc_usable_size; and the misuses end in one
 * line on stderr and abort: allocating from another thread's heap, a
 * double free, a free after destroy, a destroyed heap used again. */
#include "testing.h"
#include "hakmem.h"
#include <malloc.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define KiB ((size_t)1024)
#define MiB (1024 * KiB)

static void *launder(void *p) { __asm__ volatile("" : "+r"(p)); return p; }

static void fill(unsigned char *p, size_t n, unsigned seed) {
    for (size_t i = 0; i < n; i++) p[i] = (unsigned char)(seed + i * 13);
}
static int intact(const unsigned char *p, size_t n, unsigned seed) {
    for (size_t i = 0; i < n; i++) if (p[i] != (unsigned char)(seed + i * 13)) return 0;
    return 1;
}

static void test_standard_names(void) {
    static const size_t sizes[] = { 1, 24, 100, 2000, 40000, 131072, 200000, 5 * MiB };
    hak_heap_t *h = hak_heap_new();
    for (unsigned i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        size_t n = sizes[i];
        unsigned char *p = hak_heap_malloc(h, n);
        CHECK(p != NULL);
        size_t usable = malloc_usable_size(p);
        CHECKF(usable >= n && usable <= n + n / 4 + test_page(), "usable %zu of %zu", usable, n);
        fill(p, n, i);
        unsigned char *q = realloc(p, n / 2 + 1 > usable / 2 ? n / 2 + 1 : usable / 2);  /* stays */
        CHECK(q == p && intact(q, n / 2 + 1, i));
        q = realloc(q, 3 * n + 64);                   /* moves out of the heap */
        CHECK(q != NULL && intact(q, n / 2 + 1, i));
        free(q);
        void *r = hak_heap_malloc(h, n);
        free(r);
    }
    hak_heap_destroy(h);
}

/* ---- misuse ---------------------------------------------------------------- */
struct misuse { void (*call)(void); const char *expect; };
static void run_misuse(void *m) { ((const struct misuse *)m)->call(); }

static hak_heap_t *other_heap;
static void *thread_malloc(void *arg) { (void)arg; return hak_heap_malloc(other_heap, 10); }
static void misuse_other_thread(void) {
    other_heap = hak_heap_new();
    pthread_t t;
    pthread_create(&t, NULL, thread_malloc, NULL);
    pthread_join(t, NULL);
}
static void misuse_double_free(void) {
    hak_heap_t *h = hak_heap_new();
    void *p = hak_heap_malloc(h, 48);
    hak_heap_malloc(h, 48);
    free(launder(p));
    free(launder(p));
}
static void misuse_free_after_destroy(void) {
    hak_heap_t *h = hak_heap_new();
    void *p = hak_heap_malloc(h, 48);
    hak_heap_destroy(h);
    free(launder(p));
}
static void misuse_destroyed_heap(void) {
    hak_heap_t *h = hak_heap_new();
    hak_heap_destroy(h);
    hak_heap_malloc(launder(h), 10);
}

static void test_misuse(void) {
    static const struct misuse cases[] = {
        { misuse_other_thread, "hak_heap_malloc(): invalid pointer" },
        { misuse_double_free, "free(): " },
        { misuse_free_after_destroy, "free(): invalid pointer" },
        { misuse_destroyed_heap, "not a live heap" },
    };
    /* After a destroy, the segment is kept mapped for the next heap (or unmapped when enough are). */
    static const char *const also[] = { "another thread", "already free", "heap's memory, not a live block", "hak_heap_malloc" };
    for (unsigned i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char err[4096];
        int status = test_in_child(run_misuse, (void *)&cases[i], STDERR_FILENO, err, sizeof err);
        CHECKF(WIFSIGNALED(status) && WTERMSIG(status) == SIGABRT, "case %u: status %#x", i, status);
        CHECKF(strncmp(err, "hakmem: ", 8) == 0 && strstr(err, cases[i].expect) && (strstr(err, also[i]) || (i == 2 && strstr(err, "not allocated by hakmem"))),
               "case %u: stderr \"%s\"", i, err);
        char *nl = strchr(err, '\n');
        CHECKF(nl && nl[1] == 0, "case %u: not one line: \"%s\"", i, err);
    }
}

int main(void) {
    test_standard_names();
    test_misuse();
    TEST_END();
}
