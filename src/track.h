/* track.h: what hakmem tells a memory checker about its blocks, behind one
 * small contract (mimalloc's track.h idea). Three forms, chosen at build time
 * by HAK_TRACK:
 *   HAK_TRACK_NONE (0, the default): every hook compiles to nothing, and the
 *     inline fast paths are the only paths of malloc and free;
 *   HAK_TRACK_VALGRIND (`make VALGRIND=1`, build-valgrind/): Valgrind client
 *     requests (<valgrind/memcheck.h>); they cost a few instructions when the
 *     program runs without Valgrind, and tell memcheck everything under it;
 *   HAK_TRACK_ASAN (`make SAN=address`, build-asan/): AddressSanitizer's
 *     poisoning (<sanitizer/asan_interface.h>). The library itself is built
 *     without instrumentation (it reads and writes free blocks, which are
 *     poisoned) and leaves malloc to ASan, as the TSan build does: the hak_
 *     API's blocks are the ones checked.
 * In a tracked build malloc and free skip the inline fast paths (they go to
 * _hak_api_malloc_tracked / _hak_api_free_tracked, api.c), calloc is malloc
 * and memset, and realloc always moves a block (as memcheck's own realloc
 * does), so every block is announced in one place, api.c.
 *
 * The contract (hooks take a block's start p):
 *   hak_track_enter() / hak_track_leave()
 *       hakmem's own code runs in between: its reads and writes of free
 *       blocks (list links, the free key) and of live blocks' first words
 *       (the double-free test) are not the program's errors. Memcheck:
 *       error reporting off for this thread (they nest); ASan: nothing (the
 *       library is not instrumented).
 *   hak_track_malloc(p, n, usable, zero)
 *       p is handed out: the program may use n bytes (read 0 when zero), the
 *       rest of its usable bytes are not the program's. The tools see the
 *       requested size n, as with the C library's malloc: a read at p[n] is
 *       reported, and a leak is reported with n.
 *   hak_track_free(p, usable)
 *       p is taken back (before hakmem touches it: another thread may get it
 *       the moment hakmem has it). Memcheck reports a double free here.
 *   hak_track_size(p, usable)
 *       the n that p was handed out with (usable when not tracked, or when
 *       the program runs without the tool).
 *   hak_track_meta(p, bytes)
 *       a fresh mapping of hakmem's metadata. Memcheck: no access, so it is
 *       not scanned for leaks (the block addresses it holds, a slab's first
 *       block, a Large block's entry, would keep a leaked block reachable);
 *       hakmem's own code reads it with reporting off and sees its values
 *       defined. ASan: nothing (its leak checker knows no hakmem block).
 *       Every reader of metadata is between hak_track_enter and _leave.
 *   hak_track_mem_noaccess(p, bytes)   the program may not touch the range
 *   hak_track_mem_undefined(p, bytes)  addressable, contents unknown (a range
 *                                      given back to the OS: no stale poison)
 *   hak_track_mem_defined(p, bytes)    addressable and initialized */
#ifndef HAKMEM_TRACK_H
#define HAKMEM_TRACK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define HAK_TRACK_NONE     0
#define HAK_TRACK_VALGRIND 1
#define HAK_TRACK_ASAN     2
#ifndef HAK_TRACK
#define HAK_TRACK HAK_TRACK_NONE
#endif

#if HAK_TRACK == HAK_TRACK_VALGRIND
/* ---- Valgrind memcheck ---------------------------------------------------- */
#include <valgrind/memcheck.h>

static inline void hak_track_enter(void) { VALGRIND_DISABLE_ERROR_REPORTING; }
static inline void hak_track_leave(void) { VALGRIND_ENABLE_ERROR_REPORTING; }
static inline void hak_track_meta(void *p, size_t bytes) { VALGRIND_MAKE_MEM_NOACCESS(p, bytes); }
static inline void hak_track_mem_noaccess(void *p, size_t bytes) { VALGRIND_MAKE_MEM_NOACCESS(p, bytes); }
static inline void hak_track_mem_undefined(void *p, size_t bytes) { VALGRIND_MAKE_MEM_UNDEFINED(p, bytes); }
static inline void hak_track_mem_defined(void *p, size_t bytes) { VALGRIND_MAKE_MEM_DEFINED(p, bytes); }
static inline void hak_track_malloc(void *p, size_t n, size_t usable, bool zero) {
  if (usable > n) VALGRIND_MAKE_MEM_NOACCESS((char *)p + n, usable - n);
  VALGRIND_MALLOCLIKE_BLOCK(p, n, 0, zero);
}
static inline void hak_track_free(void *p, size_t usable) {
  (void)usable;
  VALGRIND_FREELIKE_BLOCK(p, 0);
}
/* The first byte of the block memcheck does not let the program address is
 * its end; asked with reporting off, the question reports nothing. */
static inline size_t hak_track_size(const void *p, size_t usable) {
  VALGRIND_DISABLE_ERROR_REPORTING;
  uintptr_t bad = (uintptr_t)VALGRIND_CHECK_MEM_IS_ADDRESSABLE(p, usable);
  VALGRIND_ENABLE_ERROR_REPORTING;
  return bad ? bad - (uintptr_t)p : usable;
}

#elif HAK_TRACK == HAK_TRACK_ASAN
/* ---- AddressSanitizer ------------------------------------------------------ */
#include <sanitizer/asan_interface.h>   /* the functions: its macros need -fsanitize=address */

static inline void hak_track_enter(void) {}
static inline void hak_track_leave(void) {}
static inline void hak_track_meta(void *p, size_t bytes) { (void)p; (void)bytes; }
static inline void hak_track_mem_noaccess(void *p, size_t bytes) { __asan_poison_memory_region(p, bytes); }
static inline void hak_track_mem_undefined(void *p, size_t bytes) { __asan_unpoison_memory_region(p, bytes); }
static inline void hak_track_mem_defined(void *p, size_t bytes) { __asan_unpoison_memory_region(p, bytes); }
/* ASan's shadow has a granule of 8 bytes: a block's last granule is
 * addressable up to n, and poisoned from there. */
static inline void hak_track_malloc(void *p, size_t n, size_t usable, bool zero) {
  (void)zero;
  __asan_unpoison_memory_region(p, n);
  if (usable > n) __asan_poison_memory_region((char *)p + n, usable - n);
}
static inline void hak_track_free(void *p, size_t usable) { __asan_poison_memory_region(p, usable); }
static inline size_t hak_track_size(const void *p, size_t usable) {
  void *bad = __asan_region_is_poisoned((void *)p, usable);
  return bad ? (size_t)((uintptr_t)bad - (uintptr_t)p) : usable;
}

#else
/* ---- none -------------------------------------------------------------------- */
static inline void hak_track_enter(void) {}
static inline void hak_track_leave(void) {}
static inline void hak_track_meta(void *p, size_t bytes) { (void)p; (void)bytes; }
static inline void hak_track_mem_noaccess(void *p, size_t bytes) { (void)p; (void)bytes; }
static inline void hak_track_mem_undefined(void *p, size_t bytes) { (void)p; (void)bytes; }
static inline void hak_track_mem_defined(void *p, size_t bytes) { (void)p; (void)bytes; }
static inline void hak_track_malloc(void *p, size_t n, size_t usable, bool zero) {
  (void)p; (void)n; (void)usable; (void)zero;
}
static inline void hak_track_free(void *p, size_t usable) { (void)p; (void)usable; }
static inline size_t hak_track_size(const void *p, size_t usable) { (void)p; return usable; }
#endif

#endif
