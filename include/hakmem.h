/* hakmem — a general-purpose memory allocator for Linux.
 *
 * Use it as a drop-in malloc (LD_PRELOAD=libhakmem.so, or link -lhakmem: the
 * standard names malloc, free, ... are overridden), or call the hak_ names
 * below directly. Every hak_ function behaves like its standard namesake,
 * errno included. */
#ifndef HAKMEM_H
#define HAKMEM_H

#include <stddef.h>
#include <stdio.h>    /* FILE */
#if defined(__GLIBC__)
#include <malloc.h>   /* struct mallinfo2, struct mallinfo */
#else
/* C libraries that do not have glibc's mallinfo structs (musl): glibc's
 * layouts, which hak_mallinfo2 and hak_mallinfo (and, under the standard
 * names, mallinfo2 and mallinfo) return. */
struct mallinfo2 {
  size_t arena, ordblks, smblks, hblks, hblkhd, usmblks, fsmblks, uordblks, fordblks, keepcost;
};
struct mallinfo {
  int arena, ordblks, smblks, hblks, hblkhd, usmblks, fsmblks, uordblks, fordblks, keepcost;
};
#endif

#ifdef __cplusplus
extern "C" {
#endif

#define HAKMEM_VERSION "0.1.0"

void  *hak_malloc(size_t size);
void   hak_free(void *ptr);
void  *hak_calloc(size_t count, size_t size);
void  *hak_realloc(void *ptr, size_t size);
void  *hak_reallocarray(void *ptr, size_t count, size_t size);
int    hak_posix_memalign(void **out, size_t alignment, size_t size);
void  *hak_aligned_alloc(size_t alignment, size_t size);
void  *hak_memalign(size_t alignment, size_t size);
void  *hak_valloc(size_t size);
void  *hak_pvalloc(size_t size);
size_t hak_malloc_usable_size(const void *ptr);
void   hak_free_sized(void *ptr, size_t size);
void   hak_free_aligned_sized(void *ptr, size_t alignment, size_t size);

/* Releases cached and empty memory it can reach; returns 1 when it released
 * something (as glibc's malloc_trim). */
int    hak_malloc_trim(size_t pad);
/* Same as hak_malloc_trim(0), without the return value. */
void   hak_collect(void);
/* hakmem's own figures in glibc's struct: arena = bytes mapped,
 * uordblks = bytes in use (blocks held by the program or thread caches),
 * fordblks = mapped but not in use, hblkhd = live Large blocks (mmapped). */
struct mallinfo2 hak_mallinfo2(void);
/* The same figures in glibc's older struct of ints, each at most INT_MAX. */
struct mallinfo hak_mallinfo(void);
/* The same figures as glibc's malloc_info XML on fp (options must be 0):
 * total in-use, free and mmap (live Large blocks) sizes, the large cache,
 * system current and max (bytes mapped, and its peak). Returns 0, or -1
 * with errno set (EINVAL: options not 0, or fp NULL). */
int    hak_malloc_info(int options, FILE *fp);

/* First-class heaps (as mimalloc's mi_heap_*): a heap owns its memory, apart
 * from malloc's, so that all its blocks can be freed at once.
 *   hak_heap_new      a heap owned by the calling thread; NULL (ENOMEM)
 *   hak_heap_malloc, hak_heap_calloc, hak_heap_aligned_alloc, hak_heap_realloc
 *                     as their standard namesakes, the block taken from the
 *                     heap (realloc: a block that must move moves into it)
 *   hak_heap_destroy  frees every block of the heap at once, gives its pages
 *                     back to the OS, and the heap goes
 *   hak_heap_delete   the heap goes; its live blocks stay valid
 * Every block of a heap is a malloc block: free, realloc and
 * malloc_usable_size take it, from any thread (realloc moves it to the
 * default heap when it must move). Only the thread that created a heap
 * allocates from it, destroys or deletes it; another thread gets one line
 * on stderr and abort. A thread's heaps are deleted when it exits. A free
 * of a block after its heap's destroy is a use-after-free (reported as an
 * invalid pointer while the address is not reused); frees racing with a
 * destroy are safe: each lands before it or is reported so. */
typedef struct hak_heap_s hak_heap_t;
hak_heap_t *hak_heap_new(void);
void  *hak_heap_malloc(hak_heap_t *heap, size_t size);
void  *hak_heap_calloc(hak_heap_t *heap, size_t count, size_t size);
void  *hak_heap_realloc(hak_heap_t *heap, void *ptr, size_t size);
void  *hak_heap_aligned_alloc(hak_heap_t *heap, size_t alignment, size_t size);
void   hak_heap_destroy(hak_heap_t *heap);
void   hak_heap_delete(hak_heap_t *heap);

/* Prints the counters report (as HAKMEM_STATS=1 does at exit) to stderr;
 * malloc_stats() prints the same. */
void   hak_stats_print(void);
/* Writes the counters as JSON to path; returns 0, or -1 with errno set. */
int    hak_stats_write_json(const char *path);
/* The memory limit: hakmem keeps at most bytes mapped (blocks, and its
 * own tables and metadata; 0: no limit). Past a soft limit it gives back
 * every free page and cached range, ignoring the purge delay, before it
 * maps more, and maps more when that was not enough; past a hard limit
 * (hard != 0) the allocation then fails: NULL with errno ENOMEM (operator
 * new throws std::bad_alloc). The environment sets it at start-up:
 * HAKMEM_LIMIT_MB=N or =cgroup (the cgroup v2 memory.max of the process),
 * HAKMEM_LIMIT=soft|hard. Blocks already mapped stay valid when a limit
 * is set below what is mapped. Returns 0. */
int    hak_set_limit(size_t bytes, int hard);
/* The limit in bytes (0: none); *hard (when not NULL) = 1 for a hard one. */
size_t hak_limit(int *hard);

/* Heap profile (HAKMEM_PROF=1 or leaks): writes the live sampled blocks by
 * allocation site, their estimated bytes and counts, and the process's
 * mappings to path (NULL: HAKMEM_PROF_FILE); read it with `hakmem prof
 * PATH`. Returns 0, or -1 with errno set (ENOENT: profiling is off). */
int    hak_prof_dump(const char *path);

#if !defined(__GLIBC__)
/* glibc's names that hakmem defines under the standard names (LD_PRELOAD or
 * -lhakmem) and other C libraries (musl) do not declare: a program written
 * for glibc that calls them finds them here. */
void  *pvalloc(size_t size);
int    malloc_trim(size_t pad);
struct mallinfo2 mallinfo2(void);
struct mallinfo mallinfo(void);
void   malloc_stats(void);
int    malloc_info(int options, FILE *fp);
#endif

#ifdef __cplusplus
}
#endif
#endif
