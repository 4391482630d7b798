/* Bad input aborts with one line of diagnosis: free / realloc /
 * malloc_usable_size of a stack address, of a pointer into the middle of a
 * block and of garbage, and a double free of a cached block of every tier.
 * Each bad call runs in a forked child; the parent checks that the child died
 * of SIGABRT after writing exactly one line to stderr that starts with
 * "hakmem: " and names the call (or "double free") and the pointer (%p). */
#include "testing.h"
#include "hakmem.h"
#include <malloc.h>
#include <signal.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define KiB ((size_t)1024)
#define MiB (1024 * KiB)

/* Hides where a pointer comes from, so the compiler neither warns about nor
 * optimises the deliberate misuse. */
static void *launder(void *p) { __asm__ volatile("" : "+r"(p)); return p; }

static void call_free(void *p) { free(launder(p)); }
static void call_hak_free(void *p) { hak_free(launder(p)); }
static void call_realloc(void *p) { (void)!realloc(launder(p), 200); }
static void call_usable_size(void *p) { (void)!malloc_usable_size(launder(p)); }
static void call_double_free(void *p) { free(launder(p)); free(launder(p)); }

struct bad_call {
    void (*run)(void *);
    const char *expect;          /* what the line must contain besides the pointer */
};

static const struct bad_call bad_calls[] = {
    { call_free, "free(" }, { call_hak_free, "free(" }, { call_realloc, "realloc(" },
    { call_usable_size, "malloc_usable_size(" },
};

static int count_lines(const char *s)
{
    int lines = 0;
    for (; *s; s++) lines += *s == '\n';
    return lines;
}

static void expect_abort(void (*call)(void *), void *ptr, const char *expect, const char *what)
{
    char ptr_text[32], err[4096];
    snprintf(ptr_text, sizeof ptr_text, "%p", ptr);
    int status = test_in_child(call, ptr, STDERR_FILENO, err, sizeof err);
    size_t len = strlen(err);
    int aborted = WIFSIGNALED(status) && WTERMSIG(status) == SIGABRT;
    int one_line = len > 0 && err[len - 1] == '\n' && count_lines(err) == 1;
    int line_ok = one_line && strncmp(err, "hakmem: ", 8) == 0 && strstr(err, expect) && strstr(err, ptr_text);
    CHECKF(aborted, "%s %s: child %s %d", what, ptr_text,
           WIFSIGNALED(status) ? "killed by signal" : "exited with",
           WIFSIGNALED(status) ? WTERMSIG(status) : WEXITSTATUS(status));
    CHECKF(line_ok, "%s %s: expected one line \"hakmem: ...%s...%s...\", got \"%.*s\"",
           what, ptr_text, expect, ptr_text, (int)(len && err[len - 1] == '\n' ? len - 1 : len), err);
}

static void check_bad_pointer(void *ptr, const char *what)
{
    for (size_t i = 0; i < sizeof bad_calls / sizeof bad_calls[0]; i++)
        expect_abort(bad_calls[i].run, ptr, bad_calls[i].expect, what);
}

static void test_bad_pointers(void)
{
    char on_stack[64];
    check_bad_pointer(on_stack + 16, "stack address");
    check_bad_pointer((void *)0x1234560, "garbage");
    check_bad_pointer((void *)0xdeadbeefdeadbeef, "garbage");
    const size_t sizes[] = { 100, 100 * KiB, 4 * MiB };
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        char *p = malloc(sizes[i]);
        CHECK(p);
        if (!p) continue;
        char what[64];
        snprintf(what, sizeof what, "inside a block of %zu B", sizes[i]);
        check_bad_pointer(p + 8, what);
        check_bad_pointer(p + 16, what);
        if (sizes[i] >= 64 * KiB) {          /* a span block: 256 B steps, later pages */
            check_bad_pointer(p + 256, what);
            check_bad_pointer(p + 4096, what);
        }
        free(p);
    }
}

/* free twice in the child while the block still sits in a cache or free list. */
static void test_double_free(void)
{
    const size_t sizes[] = { 32, 8 * KiB, 100 * KiB, 4 * MiB };
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        void *p = malloc(sizes[i]);
        CHECK(p);
        if (!p) continue;
        char what[64];
        snprintf(what, sizeof what, "double free of %zu B", sizes[i]);
        expect_abort(call_double_free, p, "double free", what);
        free(p);
    }
}

int main(void)
{
    test_bad_pointers();
    test_double_free();
    TEST_END();
}
