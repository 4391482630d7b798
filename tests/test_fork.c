/* fork while other threads allocate and free: the main thread forks 200 times;
 * each child checks and frees blocks it inherited (its own and ones the
 * workers were passing around), allocates and frees a few thousand blocks of
 * every tier with content checks (some children also from a new thread) and
 * exits 0. A child that deadlocks is killed by its alarm, which fails the test. */
#include "testing.h"
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <sys/wait.h>
#include <unistd.h>

#define FORKS 200
#define WORKERS 3
#define SLOTS 64
#define OWN_BLOCKS 100

/* Each block starts with its size and seed; the rest is a pattern of both. */
struct tag {
    size_t size;
    uint64_t seed;
};

static _Atomic(struct tag *) slots[SLOTS];    /* blocks the workers pass around */
static atomic_int stop;
static struct tag *own[OWN_BLOCKS];

static uint64_t next_rand(uint64_t *s)
{
    *s ^= *s << 13; *s ^= *s >> 7; *s ^= *s << 17;
    return *s;
}

/* Mostly tiny, some mid and L2.5, a few large. */
static size_t random_size(uint64_t *rng)
{
    uint64_t r = next_rand(rng);
    switch (r % 100) {
    case 0: return 1024 * 1024 + r % (3 * 1024 * 1024);
    case 1: case 2: case 3: return 53248 + r % (200 * 1024);
    case 4: case 5: case 6: case 7: case 8: case 9: return 2049 + r % 51200;
    default: return sizeof(struct tag) + 1 + r % 2032;
    }
}

/* The pattern covers up to the first 4 KiB, and the last byte holds the seed. */
static size_t pattern_end(size_t size) { return size - 1 < 4096 ? size - 1 : 4096; }

static struct tag *make_block(size_t size, uint64_t seed)
{
    struct tag *t = malloc(size);
    if (!t) return NULL;
    t->size = size;
    t->seed = seed;
    unsigned char *b = (unsigned char *)t;
    for (size_t i = sizeof *t; i < pattern_end(size); i++) b[i] = (unsigned char)(seed + i);
    b[size - 1] = (unsigned char)seed;
    return t;
}

static int block_ok(const struct tag *t)
{
    const unsigned char *b = (const unsigned char *)t;
    for (size_t i = sizeof *t; i < pattern_end(t->size); i++)
        if (b[i] != (unsigned char)(t->seed + i)) return 0;
    return b[t->size - 1] == (unsigned char)t->seed;
}

static void *worker(void *arg)
{
    uint64_t rng = 0x9E3779B97F4A7C15u * (uintptr_t)arg + 1;
    struct tag *local[32] = { 0 };
    while (!atomic_load(&stop)) {
        uint64_t r = next_rand(&rng);
        struct tag **mine = &local[r % 32];
        if (*mine) {
            if (!block_ok(*mine)) { fprintf(stderr, "worker: block damaged\n"); abort(); }
            free(*mine);
        }
        *mine = make_block(random_size(&rng), r);
        if (r % 8 == 0) {        /* pass a block through a shared slot */
            struct tag *old = atomic_exchange(&slots[r / 8 % SLOTS], *mine);
            *mine = NULL;
            if (old && !block_ok(old)) { fprintf(stderr, "worker: shared block damaged\n"); abort(); }
            free(old);
        }
    }
    for (int i = 0; i < 32; i++) free(local[i]);
    return NULL;
}

/* The child's work: a few thousand blocks of every tier, contents checked. */
static void *child_work(void *arg)
{
    uint64_t rng = (uintptr_t)arg * 7919 + 3;
    struct tag *live[256] = { 0 };
    int bad = 0;
    for (int i = 0; i < 3000; i++) {
        struct tag **b = &live[next_rand(&rng) % 256];
        if (*b) { bad += !block_ok(*b); free(*b); }
        *b = make_block(random_size(&rng), rng);
        bad += *b == NULL;
    }
    for (int i = 0; i < 256; i++) {
        if (live[i]) { bad += !block_ok(live[i]); free(live[i]); }
    }
    return (void *)(intptr_t)bad;
}

/* Frees what the child inherited: half its own blocks and the shared ones. */
static int child_free_inherited(void)
{
    int bad = 0;
    for (int i = 0; i < OWN_BLOCKS; i++) bad += !block_ok(own[i]);
    for (int i = 0; i < OWN_BLOCKS; i += 2) free(own[i]);
    for (int i = 0; i < SLOTS; i++) {
        struct tag *t = atomic_exchange(&slots[i], NULL);
        if (t) { bad += !block_ok(t); free(t); }
    }
    return bad;
}

static void child_main(int n)
{
    signal(SIGALRM, SIG_DFL);
    alarm(30);
    int bad = child_free_inherited() + (int)(intptr_t)child_work((void *)(intptr_t)n);
    if (n % 10 == 0) {
        pthread_t t;
        void *res = (void *)1;
        if (pthread_create(&t, NULL, child_work, (void *)(intptr_t)(n + 1)) == 0) pthread_join(t, &res);
        bad += (int)(intptr_t)res;
    }
    _exit(bad ? 1 : 0);
}

static void on_timeout(int sig)
{
    (void)sig;
    static const char msg[] = "test_fork: timed out (deadlock?)\n";
    (void)!write(STDERR_FILENO, msg, sizeof msg - 1);
    _exit(2);
}

int main(void)
{
    signal(SIGALRM, on_timeout);
    alarm(300);
    uint64_t rng = 42;
    for (int i = 0; i < OWN_BLOCKS; i++) own[i] = make_block(random_size(&rng), (uint64_t)i);
    pthread_t workers[WORKERS];
    for (intptr_t i = 0; i < WORKERS; i++) pthread_create(&workers[i], NULL, worker, (void *)i);
    for (int n = 0; n < FORKS; n++) {
        pid_t pid = fork();
        if (pid == 0) child_main(n);
        CHECKF(pid > 0, "fork failed");
        int status = 0;
        if (pid > 0) waitpid(pid, &status, 0);
        CHECKF(pid > 0 && WIFEXITED(status) && WEXITSTATUS(status) == 0, "child %d: %s %d", n,
               WIFSIGNALED(status) ? "killed by signal" : "exit status",
               WIFSIGNALED(status) ? WTERMSIG(status) : WEXITSTATUS(status));
    }
    atomic_store(&stop, 1);
    for (int i = 0; i < WORKERS; i++) pthread_join(workers[i], NULL);
    for (int i = 0; i < SLOTS; i++) free(atomic_exchange(&slots[i], NULL));
    for (int i = 0; i < OWN_BLOCKS; i++) { CHECK(block_ok(own[i])); free(own[i]); }
    TEST_END();
}
