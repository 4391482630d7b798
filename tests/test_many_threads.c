/* Many threads alive at once do not each keep a cache of their own: 512
 * threads start one after another and all stay alive to the end; each
 * allocates one block of each of 8 sizes from 128 to 256 KiB (1.5 MiB),
 * writes every page, frees them and waits. With each thread's lists keeping
 * what it freed (as with a few threads, 2 blocks per class), the next thread
 * could not reuse it and RSS grew by the whole 768 MiB; beyond 32 live
 * threads the lists' budgets are shared, so the freed blocks go back and
 * serve the next thread. RSS growth while the 512 wait: under 400 MiB (the
 * first 32 threads keep theirs: 48 MiB; 99 MiB in all, measured). Then
 * the lock of a shared structure, with more threads than cores contending
 * for it, loses no update: 64 threads take and give back span blocks of
 * one class while checking their contents. */
#include "testing.h"
#include "proc_status.h"
#include <pthread.h>
#include <semaphore.h>
#include <stdint.h>
#include <string.h>

#define THREADS 512
#define SIZES 8
#define LIMIT_KIB (400 * 1024)
#define CONTENDERS 64
#define ROUNDS 2000

static sem_t done, leave;

static size_t size_of(unsigned i) { return (128 + 16 * i) * 1024; }

static void *worker(void *arg)
{
    (void)arg;
    unsigned char *p[SIZES];
    for (unsigned i = 0; i < SIZES; i++) {
        p[i] = malloc(size_of(i));
        if (p[i]) for (size_t off = 0; off < size_of(i); off += 4096) p[i][off] = (unsigned char)i;
    }
    for (unsigned i = 0; i < SIZES; i++) free(p[i]);
    sem_post(&done);
    sem_wait(&leave);
    return NULL;
}

static void *contender(void *arg)
{
    unsigned tag = (unsigned)(uintptr_t)arg;
    for (unsigned r = 0; r < ROUNDS; r++) {
        unsigned char *p = malloc(100 * 1024);
        if (!p) { CHECKF(0, "malloc(100 KiB) failed"); return NULL; }
        memset(p, (int)tag, 100 * 1024);
        for (size_t off = 0; off < 100 * 1024; off += 997)
            if (p[off] != (unsigned char)tag) { CHECKF(0, "block of thread %u overwritten", tag); break; }
        free(p);
    }
    return NULL;
}

int main(void)
{
    static pthread_t ids[THREADS];
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setstacksize(&attr, 128 * 1024);
    sem_init(&done, 0, 0);
    sem_init(&leave, 0, 0);
    long before = proc_status_kib("VmRSS");
    unsigned started = 0;
    for (; started < THREADS; started++) {
        if (pthread_create(&ids[started], &attr, worker, NULL) != 0) break;
        sem_wait(&done);                  /* one at a time: each may reuse what the last freed */
    }
    CHECKF(started == THREADS, "only %u threads started", started);
    long grown = proc_status_kib("VmRSS") - before;
    fprintf(stderr, "RSS grew by %ld KiB with %u threads alive\n", grown, started);
    CHECKF(grown < LIMIT_KIB, "RSS grew by %ld KiB with %u threads alive (limit %d KiB)", grown, started, LIMIT_KIB);
    for (unsigned i = 0; i < started; i++) sem_post(&leave);
    for (unsigned i = 0; i < started; i++) pthread_join(ids[i], NULL);

    pthread_t contenders[CONTENDERS];
    for (unsigned i = 0; i < CONTENDERS; i++)
        CHECK(pthread_create(&contenders[i], &attr, contender, (void *)(uintptr_t)(i + 1)) == 0);
    for (unsigned i = 0; i < CONTENDERS; i++) pthread_join(contenders[i], NULL);
    TEST_END();
}
