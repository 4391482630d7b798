/* Out of memory under an address-space limit: in a child with RLIMIT_AS set to
 * its current size + 256 MiB, each kind of allocation is repeated until it
 * returns NULL, which must come with errno ENOMEM and never a crash. After
 * freeing everything, the same kind of allocation works again. Each phase
 * runs in its own child, so phases do not share the limit. 100 KiB blocks
 * come from their size class again after a shortage in which the heap that
 * serves them could not start. The address space one tier freed serves
 * another: after the blocks of one tier fill the limit and most of them are
 * freed, a block of another tier that fits in what was freed succeeds
 * (hakmem gives back its free runs, cached ranges and empty SuperSlabs,
 * address space included, before it returns NULL). */
#include "testing.h"
#include "proc_status.h"
#include <errno.h>
#include <malloc.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#define KiB ((size_t)1024)
#define MiB (1024 * KiB)
#define HEADROOM (256 * MiB)

enum how { BY_MALLOC, BY_CALLOC, BY_MEMALIGN };

struct phase {
    const char *name;
    enum how how;
    size_t size;        /* 0: cycle through tiny sizes 16..2048 */
    size_t align;       /* BY_MEMALIGN only */
};

static const struct phase phases[] = {
    { "tiny 64 B", BY_MALLOC, 64, 0 },
    { "tiny 16..2048 B", BY_MALLOC, 0, 0 },
    { "mid 8 KiB", BY_MALLOC, 8 * KiB, 0 },
    { "calloc 100 KiB", BY_CALLOC, 100 * KiB, 0 },
    { "1 MiB", BY_MALLOC, MiB, 0 },
    { "64 MiB", BY_MALLOC, 64 * MiB, 0 },
    { "posix_memalign 64 KiB-aligned 5000 B", BY_MEMALIGN, 5000, 64 * KiB },
};

static size_t phase_size(const struct phase *ph, size_t i) { return ph->size ? ph->size : 16 + (i * 37) % 2033; }

static void *allocate(const struct phase *ph, size_t size)
{
    void *p = NULL;
    switch (ph->how) {
    case BY_MALLOC: return malloc(size);
    case BY_CALLOC: return calloc(1, size);
    case BY_MEMALIGN: {
        int rc = posix_memalign(&p, ph->align, size);
        errno = rc;              /* posix_memalign reports through its result */
        return rc ? NULL : p;
    }
    }
    return NULL;
}

/* Allocates until NULL, chaining the blocks through their first word;
 * returns the chain, and in *bytes the space obtained (an aligned block
 * counts as at least its alignment). */
static void *fill_until_null(const struct phase *ph, size_t *bytes)
{
    void *head = NULL;
    *bytes = 0;
    for (size_t i = 0;; i++) {
        size_t size = phase_size(ph, i);
        errno = 0;
        char *p = allocate(ph, size);
        if (!p) {
            int err = errno;
            CHECKF(err == ENOMEM, "%s: NULL after %zu bytes with errno %d, not ENOMEM", ph->name, *bytes, err);
            return head;
        }
        if (ph->how == BY_CALLOC)
            CHECKF(p[0] == 0 && p[size / 2] == 0 && p[size - 1] == 0, "%s: calloc memory not zero", ph->name);
        p[size - 1] = 1;
        memcpy(p, &head, sizeof head);
        head = p;
        *bytes += size > ph->align ? size : ph->align;
    }
}

static void free_chain(void *head)
{
    while (head) {
        void *next;
        memcpy(&next, head, sizeof next);
        free(head);
        head = next;
    }
}

static void run_phase(const struct phase *ph)
{
    size_t first, again;
    free_chain(fill_until_null(ph, &first));
    CHECKF(first >= HEADROOM / 4, "%s: only %zu bytes before NULL (limit leaves %zu)", ph->name, first, HEADROOM);
    free_chain(fill_until_null(ph, &again));
    CHECKF(again >= first / 2, "%s: after freeing, only %zu bytes again (first time %zu)", ph->name, again, first);
    void *p = malloc(100);
    CHECKF(p != NULL, "%s: malloc(100) fails after freeing everything", ph->name);
    free(p);
}

/* One block grows by realloc until NULL; the block must survive the failure. */
static void run_realloc_growth(void)
{
    size_t size = MiB;
    unsigned char *p = malloc(size);
    if (!p) { CHECKF(0, "realloc growth: malloc(1 MiB) failed"); return; }
    memset(p, 0x5A, size);
    for (;;) {
        size_t next = size + size / 2;
        errno = 0;
        unsigned char *q = realloc(p, next);
        if (!q) {
            CHECKF(errno == ENOMEM, "realloc growth: NULL at %zu bytes with errno %d", next, errno);
            break;
        }
        CHECKF(q[0] == 0x5A && q[size - 1] == 0x5A, "realloc growth: contents lost at %zu bytes", size);
        memset(q + size, 0x5A, next - size);
        p = q;
        size = next;
    }
    CHECKF(p[0] == 0x5A && p[size - 1] == 0x5A, "realloc growth: block damaged by the failed realloc");
    CHECKF(size >= HEADROOM / 4, "realloc growth: NULL already at %zu bytes", size);
    free(p);
    p = malloc(size / 2);
    CHECKF(p != NULL, "realloc growth: malloc(%zu) fails after freeing", size / 2);
    free(p);
}

/* The usable size of a 100 KiB block in a process whose memory was never
 * short: its size class's (read in a child, which keeps this one clean). */
static void print_usable_100k(void *unused)
{
    (void)unused;
    void *p = malloc(100 * KiB);
    dprintf(STDOUT_FILENO, "%zu", p ? malloc_usable_size(p) : 0);
}

static size_t class_usable_100k(void)
{
    char out[32];
    (void)test_in_child(print_usable_100k, NULL, STDOUT_FILENO, out, sizeof out);
    return (size_t)strtoull(out, NULL, 10);
}

/* The heap of the blocks from 40 KiB to 1 MiB reserves its page table at its
 * first use. With the address space full of 2 MiB blocks, 100 KiB blocks come
 * from mappings of their own or NULL; once the big blocks are freed, they
 * come from their size class again (the heap did not give up for good). */
static size_t usable_100k;

static void run_mid_after_shortage(void)
{
    const struct phase big = { "2 MiB", BY_MALLOC, 2 * MiB, 0 };
    size_t bytes;
    void *chain = fill_until_null(&big, &bytes);
    void *p = malloc(100 * KiB);
    CHECKF(p == NULL || malloc_usable_size(p) >= 100 * KiB, "100 KiB in a full address space: %p", p);
    free(p);
    free_chain(chain);
    p = malloc(100 * KiB);
    CHECKF(p != NULL && malloc_usable_size(p) == usable_100k,
           "100 KiB after the shortage: %p, usable %zu, its class gives %zu", p, p ? malloc_usable_size(p) : 0,
           usable_100k);
    if (p) memset(p, 1, 100 * KiB);
    free(p);
}

/* Fills the limit with blocks of `fill` bytes, frees all but every
 * keep-th one (keep 0: all), then asks for blocks of `want` bytes,
 * want_bytes of them in all: they fit in what was freed. */
struct reuse { const char *name; size_t fill; unsigned keep; size_t want, want_bytes; };

static const struct reuse reuses[] = {
    { "100 KiB blocks freed (1 in 8 kept), then 32 MiB", 100 * KiB, 8, 32 * MiB, 32 * MiB },
    { "100 KiB blocks freed (1 in 8 kept), then 64 B blocks", 100 * KiB, 8, 64, 32 * MiB },
    { "2 MiB blocks freed (1 in 2 kept), then 100 KiB blocks", 2 * MiB, 2, 100 * KiB, 48 * MiB },
    { "8 KiB blocks freed, then 32 MiB", 8 * KiB, 0, 32 * MiB, 32 * MiB },
    { "64 B blocks freed, then 32 MiB", 64, 0, 32 * MiB, 32 * MiB },
};

static void run_reuse(const struct reuse *r)
{
    const struct phase fill = { r->name, BY_MALLOC, r->fill, 0 };
    size_t bytes;
    void *chain = fill_until_null(&fill, &bytes), *kept = NULL;
    size_t freed = 0, i = 0;
    while (chain) {                       /* free all but every keep-th block */
        void *next;
        memcpy(&next, chain, sizeof next);
        if (r->keep && i++ % r->keep == 0) { memcpy(chain, &kept, sizeof kept); kept = chain; }
        else { free(chain); freed += r->fill; }
        chain = next;
    }
    CHECKF(freed >= 2 * r->want_bytes, "%s: only %zu bytes freed", r->name, freed);
    void *got = NULL;
    size_t total = 0;
    while (total < r->want_bytes) {
        errno = 0;
        char *p = malloc(r->want);
        if (!p) {
            CHECKF(0, "%s: NULL (errno %d) after %zu of %zu bytes, with %zu bytes freed", r->name, errno,
                   total, r->want_bytes, freed);
            break;
        }
        p[r->want - 1] = 1;
        memcpy(p, &got, sizeof got);
        got = p;
        total += r->want;
    }
    free_chain(got);
    free_chain(kept);
}

static void limit_address_space(void)
{
    long vm_kib = proc_status_kib("VmSize");
    struct rlimit lim;
    lim.rlim_cur = lim.rlim_max = (rlim_t)vm_kib * 1024 + HEADROOM;
    if (vm_kib <= 0 || setrlimit(RLIMIT_AS, &lim) != 0) { perror("setrlimit"); _exit(3); }
}

static const struct phase mid_after_shortage = { "100 KiB after a shortage", BY_MALLOC, 100 * KiB, 0 };

/* Runs one phase (or the realloc growth, ph == NULL; or reuse r) in a
 * limited child. */
static void in_child(const struct phase *ph, const struct reuse *r)
{
    pid_t pid = fork();
    if (pid == 0) {
        alarm(120);
        test_failures = 0;
        limit_address_space();
        if (r) run_reuse(r);
        else if (ph == &mid_after_shortage) run_mid_after_shortage();
        else if (ph) run_phase(ph);
        else run_realloc_growth();
        _exit(test_failures ? 1 : 0);
    }
    int status;
    waitpid(pid, &status, 0);
    const char *name = r ? r->name : ph ? ph->name : "realloc growth";
    CHECKF(WIFEXITED(status) && WEXITSTATUS(status) == 0, "%s: child %s %d", name,
           WIFSIGNALED(status) ? "killed by signal" : "exited with",
           WIFSIGNALED(status) ? WTERMSIG(status) : WEXITSTATUS(status));
}

int main(void)
{
    for (size_t i = 0; i < sizeof phases / sizeof phases[0]; i++) in_child(&phases[i], NULL);
    in_child(NULL, NULL);
    usable_100k = class_usable_100k();
    CHECKF(usable_100k >= 100 * KiB, "malloc_usable_size of 100 KiB: %zu", usable_100k);
    in_child(&mid_after_shortage, NULL);
    for (size_t i = 0; i < sizeof reuses / sizeof reuses[0]; i++) in_child(NULL, &reuses[i]);
    TEST_END();
}
