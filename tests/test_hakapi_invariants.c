/* The debug build checks struct hak_slab's invariants as written: a slab
 * whose counts say used + |free| < carved (a block lost: the old check
 * allowed it, with <=) or whose remote count is not its list's length fails
 * _hak_slab_check; the slab of a live block passes it. Release builds
 * check nothing: the test then only runs the passing case. */
#include "testing.h"
#include "hakmem_internal.h"
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

/* Runs _hak_slab_check on s after change (in a child); its exit status. */
static int check_in_child(struct hak_slab *s, int change)
{
    pid_t pid = fork();
    if (pid == 0) {
        alarm(10);
        if (change == 1) s->used--;
        if (change == 2) s->xremote = (uintptr_t)(s->used + 1) << HAK_REMOTE_SHIFT;
        _hak_slab_check(s);
        _exit(0);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    return status;
}

int main(void)
{
    /* A slab's block: past the class's first chunk (region.c), whose blocks
     * have no slab. */
    enum { MOST = 4096 };
    static void *first[MOST];
    size_t n = 0;
    void *p = hak_malloc(48);
    while (p && hak_chunk_holds((uintptr_t)p) && n < MOST) { first[n++] = p; p = hak_malloc(48); }
    CHECK(p != NULL && !hak_chunk_holds((uintptr_t)p));
    int c = hak_block_class(p);
    CHECK(c >= 0);
    struct hak_slab *s = _hak_region_slab_of((uintptr_t)p, (unsigned)c);
    CHECK((uintptr_t)p >= s->start && hak_slab_ss(s)->cls == (unsigned)c);
    CHECK(&hak_slab_ss(s)->slabs[s->index] == s && (uintptr_t)s % HAK_CACHELINE == 0);
    CHECK(s->used >= 1 && s->used <= s->carved);
    int ok = check_in_child(s, 0);
    CHECKF(WIFEXITED(ok) && WEXITSTATUS(ok) == 0, "a sound slab: status %#x", ok);
    if (HAK_DEBUG) {
        int lost = check_in_child(s, 1), remote = check_in_child(s, 2);
        CHECKF(WIFSIGNALED(lost) && WTERMSIG(lost) == SIGABRT, "a lost block: status %#x", lost);
        CHECKF(WIFSIGNALED(remote) && WTERMSIG(remote) == SIGABRT, "a wrong remote count: status %#x", remote);
    }
    hak_free(p);
    while (n) hak_free(first[--n]);
    TEST_END();
}
