/* fork while other threads hold hakmem's less-used locks: two threads print
 * the statistics (hak_stats_print: the counters' lock, the heap registry,
 * the span heap's lock) and two start short threads that allocate and exit
 * (each exit merges its counters under the counters' lock and returns its
 * heap under the registry's). The main thread forks 300 times; each child
 * allocates, starts and ends threads (their exits take the same locks) and
 * prints the statistics itself, then exits 0. A lock the child inherited
 * held would never be released there: the child's alarm kills it, and the
 * test fails. (Before the lock table, fork did not take the counters' lock:
 * against that library 2 runs of 10 failed this way; test_hakapi_locks
 * checks every lock deterministically.) */
#include "testing.h"
#include "hakmem.h"
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define FORKS 300
#define PRINTERS 2
#define EXITERS 2

static atomic_int stop;

/* A few blocks of every tier below Large, written and freed. */
static void *short_life(void *arg)
{
    uintptr_t seed = (uintptr_t)arg;
    void *b[16];
    for (int i = 0; i < 16; i++) {
        size_t n = 16 + (seed * 7919 + (uintptr_t)i * 104729) % (i < 12 ? 4096 : 300000);
        b[i] = malloc(n);
        if (b[i]) memset(b[i], i, n < 64 ? n : 64);
    }
    for (int i = 0; i < 16; i++) free(b[i]);
    return NULL;
}

static void *printer(void *arg)
{
    (void)arg;
    while (!atomic_load(&stop)) hak_stats_print();
    return NULL;
}

static void *exiter(void *arg)
{
    uintptr_t n = (uintptr_t)arg;
    while (!atomic_load(&stop)) {
        pthread_t t;
        if (pthread_create(&t, NULL, short_life, (void *)n++) == 0) pthread_join(t, NULL);
    }
    return NULL;
}

/* The child: allocate, start and end threads, print the statistics. */
static void child_main(int n)
{
    signal(SIGALRM, SIG_DFL);
    alarm(20);
    short_life((void *)(uintptr_t)n);
    for (int i = 0; i < 3; i++) {
        pthread_t t;
        if (pthread_create(&t, NULL, short_life, (void *)(uintptr_t)(n + i)) != 0) _exit(3);
        pthread_join(t, NULL);
    }
    hak_stats_print();
    _exit(0);
}

int main(void)
{
    alarm(300);
    /* The statistics go to stderr: to /dev/null while the test runs. */
    int saved = dup(STDERR_FILENO), null = open("/dev/null", O_WRONLY);
    CHECK(saved >= 0 && null >= 0);
    dup2(null, STDERR_FILENO);
    pthread_t printers[PRINTERS], exiters[EXITERS];
    for (intptr_t i = 0; i < PRINTERS; i++) pthread_create(&printers[i], NULL, printer, (void *)i);
    for (intptr_t i = 0; i < EXITERS; i++) pthread_create(&exiters[i], NULL, exiter, (void *)(i << 20));
    int failed = -1, status = 0;
    for (int n = 0; n < FORKS && failed < 0; n++) {
        pid_t pid = fork();
        if (pid == 0) child_main(n);
        if (pid < 0 || waitpid(pid, &status, 0) != pid || !WIFEXITED(status) || WEXITSTATUS(status) != 0)
            failed = n;
    }
    atomic_store(&stop, 1);
    for (int i = 0; i < PRINTERS; i++) pthread_join(printers[i], NULL);
    for (int i = 0; i < EXITERS; i++) pthread_join(exiters[i], NULL);
    dup2(saved, STDERR_FILENO);
    CHECKF(failed < 0, "child %d: %s %d", failed, WIFSIGNALED(status) ? "killed by signal" : "exit status",
           WIFSIGNALED(status) ? WTERMSIG(status) : WEXITSTATUS(status));
    TEST_END();
}
