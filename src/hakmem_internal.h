/* hakmem internal map: constants, the structures each layer owns, and the
 * cross-file functions grouped by the file that defines them.
 *
 * Files, bottom up (each file's cross-file names are _hak_<file>_...):
 *   lock.c      the lock table: ranks, waiting, debug rank checks, the fork
 *               handlers (every lock, in rank order), acquisition counts
 *   os.c        the OS page (HAKMEM_PAGE_SIZE), mmap/munmap/madvise,
 *               fixed-address mappings, the metadata arena
 *   class.c     the size classes, their geometry, the size table of malloc
 *   region.c    the ownership map and the class regions (64 MiB home regions
 *               side by side, then 4 GiB slots) that SuperSlabs are mapped
 *               into and unmapped from, at the top; the first chunks (each
 *               class's first blocks, side by side in one area)
 *   superslab.c the SuperSlab lifecycle (HOT, DRAINING, EMPTY): fresh slabs
 *               out, empty slabs back, its purge, and the page moves that
 *               give free slabs' resident pages to other classes
 *   slab.c      one slab: batches out and back, remote frees, detaching and
 *               adopting, exhausted slabs kept by their thread; the shared
 *               pool of ownerless slabs per class
 *   refill.c    the refill stages (current slab, warm pool, shared pool,
 *               fresh slab) and the Tiny warm pool
 *   front.c     the thread front of every class below Large: per-thread LIFO
 *               lists with a capacity (Tiny caps, the L2 / L2.5 ring caps),
 *               refilled and spilled in batches, idle lists released
 *   span.c      the span heap: blocks of 40 KiB to 1 MiB as page runs of one
 *               shared slot
 *   large.c     Large blocks (> 1 MiB): one mapping each, a range cache
 *               whose resident pages fresh slabs and span runs may take;
 *               a fresh mapping takes free span runs' pages
 *   heap.c      first-class heaps (hak_heap_new ...): segments and mappings
 *               of their own, found by the slow free; destroy and delete
 *   purge.c     when free memory goes back to the OS: SuperSlabs, span heap
 *               and Large cache, on a clock or forced (malloc_trim); the
 *               delay, lengthened by the refaults the tiers report
 *   thread.c    process init, per-thread heaps (creation, exit: flush and
 *               abandon); registers lock.c's fork handlers
 *   options.c   the options table (HAKMEM_* environment)
 *   stats.c     counters (per thread, merged at exit) and gauges; reports
 *   guard.c     bad pointers: diagnostics, foreign (C library) pointers
 *   prof.c      the sampling heap profiler (HAKMEM_PROF): charging on slow
 *               paths, sampled blocks, dumps, the leak report; its stack
 *               walk (glibc's backtrace, else the frame-pointer chain)
 *   api.c       the hak_ API and the slow paths of malloc and free
 *   override.c  the standard names (malloc, free, operator new, ...)
 *   prim.h      the fast path's accesses that depend on the architecture and
 *               the C library (thread list heads, credits, the TCB word): the
 *               x86-64 glibc form and its portable C twin, one contract
 *   track.h     what a memory checker is told about blocks (Valgrind
 *               memcheck, ASan, or nothing: the default), one contract
 *
 * Who owns each mechanism: SuperSlab superslab.c (mapped by region.c);
 * ownership map and first chunks region.c; thread front front.c (fast paths below); warm
 * pool refill.c; remote free, kept slabs and pages faulted in ahead
 * slab.c; rings
 * front.c; span heap span.c;
 * Large large.c; purge purge.c; thread exit thread.c; fork lock.c; locks lock.c;
 * options options.c; stats stats.c; bad pointers guard.c; heap profile prof.c;
 * free-list links this file (the link contract, below). The hardened build
 * (HAK_HARDENED, README "Hardened mode"): link secret and guard pages
 * guard.c, delayed reuse front.c, carve order slab.c, guard page placement
 * region.c and large.c.
 *
 * Fast paths are the HAK_FAST functions at the end of this file (always
 * inlined: malloc, free, and the thread front's list and credit under
 * them). Every rare case goes to an out-of-line slow path declared HAK_SLOW
 * (never inlined, cold): _hak_api_malloc_slow, _hak_api_free_slow (the
 * slow free: span blocks, then every other kind of pointer), the thread
 * front's _hak_front_alloc_slow and _hak_front_free_slow, _hak_lock_slow,
 * and the guard's reports of bad pointers. */
#ifndef HAKMEM_INTERNAL_H
#define HAKMEM_INTERNAL_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include "hakmem.h"
#include "track.h"      /* before the visibility pragma: the tools' own declarations */

/* Everything declared below is internal to the library (direct access, no
 * GOT); the public functions are marked HAK_API. */
#pragma GCC visibility push(hidden)

#define HAK_FAST    static inline __attribute__((always_inline))
#define HAK_SLOW    __attribute__((noinline, cold))
#define HAK_API     __attribute__((visibility("default")))
#define HAK_LIKELY(x)   __builtin_expect(!!(x), 1)
#define HAK_UNLIKELY(x) __builtin_expect(!!(x), 0)
#define HAK_CACHELINE 64
/* A zero table bigger than a page, written only where a program uses it (an
 * external variable without an initializer): in common storage, which the
 * linker lays out after every other zero variable. Between them, the tables
 * would put each layer's small state, written at start-up, on a page of its
 * own: a fault each in every process (docs/experiments.md, "The small state
 * on few pages"). */
#if defined(__GNUC__) && defined(__ELF__)
#define HAK_ZERO_TABLE __attribute__((common))
#else
#define HAK_ZERO_TABLE
#endif

#ifndef HAK_DEBUG
#define HAK_DEBUG 0
#endif
#ifndef HAK_FAST_STATS
#define HAK_FAST_STATS 0
#endif
#ifndef HAK_HARDENED                   /* 1: make HARDENED=1 (README, "Hardened mode") */
#define HAK_HARDENED 0
#endif
#ifndef HAK_SHARED_LIB                 /* 1: compiled for libhakmem.so (the Makefile) */
#define HAK_SHARED_LIB 0
#endif
#ifndef POOL_L2_RING_CAP
#define POOL_L2_RING_CAP 128
#endif
#ifndef POOL_L25_RING_CAP
#define POOL_L25_RING_CAP 16
#endif

/* Debug-build invariant check: one line naming the invariant, then abort. */
#define HAK_ASSERT(cond) do { if (HAK_DEBUG && HAK_UNLIKELY(!(cond))) \
    _hak_guard_assert_failed(#cond, __FILE__, __LINE__); } while (0)

/* ---- tiers and size classes ------------------------------------------ */
#define HAK_TINY_MAX     2048u              /* Tiny: 1 B .. 2 KiB            */
#define HAK_L2_MAX       (52u * 1024)       /* L2: .. 32 KiB + bridge to 52  */
#define HAK_MID_MAX      (1024u * 1024)     /* L2.5: .. 1 MiB; Large above   */
#define HAK_NTINY        29                 /* classes C0..C28               */
#define HAK_NL2          19
#define HAK_NL25         17
#define HAK_NCLS         (HAK_NTINY + HAK_NL2 + HAK_NL25)
/* Split classes (class.c): C12, C14, C16, C18 (288, 352, 416 and 480 B)
 * serve the lower part of the next class's sizes once a program's requests
 * of that class gather there. */
#define HAK_SPLIT_FIRST  12u
#define HAK_NSPLIT       4u
#define HAK_MIN_ALIGN    16u
/* Pages. The OS page, the unit of mmap, munmap, madvise and mprotect, is
 * known at init only: the kernel's, or a bigger power of two asked for by
 * HAKMEM_PAGE_SIZE (so a 4 KiB kernel runs hakmem as a 16 or 64 KiB one
 * would). os.c sets _hak_os_page once, before the classes; slow paths read
 * it. Every mapping, purge, guard page and Large block is whole OS pages at
 * an OS page boundary; every address hakmem fixes in advance (regions,
 * the span heap's runs and page table) is HAK_PAGE_MAX aligned; tables in
 * the library's own data (the size table, the span heap's front table) give
 * back the whole OS pages inside them (a 64 KiB alignment there put them in
 * a segment of their own, where Valgrind read no symbols). What must be a
 * constant stays one, in units of HAK_PAGE_MIN, and holds for every OS page
 * from HAK_PAGE_MIN to HAK_PAGE_MAX: class sizes and
 * their color pad, carve colors, the size table's fill unit, the span
 * heap's page table (span.c: its runs are whole OS pages). */
#define HAK_PAGE_MIN     4096u
#define HAK_PAGE_MAX     65536u
extern size_t _hak_os_page;            /* os.c: the OS page, set at init */
/* x rounded up / down to the OS page (up wraps to 0 past SIZE_MAX: callers
 * of sizes check the result against x). */
static inline uintptr_t hak_page_up(uintptr_t x) { return (x + _hak_os_page - 1) & ~(uintptr_t)(_hak_os_page - 1); }
static inline uintptr_t hak_page_down(uintptr_t x) { return x & ~(uintptr_t)(_hak_os_page - 1); }

enum hak_tier { HAK_TIER_TINY, HAK_TIER_L2, HAK_TIER_L25, HAK_TIER_LARGE };

/* Geometry of one size class (class.c fills it at init; test_sizeclass checks
 * it). Blocks of a class tile its regions with no gaps: block k of a region
 * is at base + k * size, so "is p one of the first K block starts" is one
 * multiply and one compare (hak_block_test). A slab is slab_blocks blocks,
 * at least two OS pages (a Tiny slab: a whole number of them); a SuperSlab
 * is ss_slabs slabs, a whole number of OS pages (it is mapped at once at a
 * multiple of its size), at most 256. The span classes
 * (HAK_SPAN_FIRST up) have no regions: size and tier only, the rest 0
 * (test_hakapi_classes checks both). */
struct hak_class {
  uint32_t size;          /* block size in bytes                               */
  uint32_t slab_blocks;   /* blocks per slab                                   */
  uint32_t slab_bytes;    /* slab_blocks * size; Tiny: whole OS pages          */
  uint32_t ss_slabs;      /* slabs per SuperSlab                               */
  uint64_t ss_bytes;      /* ss_slabs * slab_bytes                             */
  uint64_t magic;         /* floor(2^64 / size) + 1                            */
  uint64_t magic_unit;    /* magic * size mod 2^64, in [1, size]               */
  uint32_t carve_first;   /* block the first slab a region hands out carves first,
                             then on, wrapping (< slab_blocks); hak_slab_carve_first */
  uint32_t first_slab;    /* slab a region's first SuperSlab hands out first, then
                             on, wrapping (< ss_slabs): the class's slab color */
  uint8_t  tier;          /* enum hak_tier                                     */
};
extern struct hak_class _hak_classes[HAK_NCLS];
/* Thread fronts are indexed by front slot: class + 1. Slot 0 holds no
 * blocks, ever: its list is empty and it has no credit. */
#define HAK_FRONT(c)     ((c) + 1)
#define HAK_NFRONT       (HAK_NCLS + 1)
/* The sizes the inline malloc serves: every n up to HAK_TABLE_MAX (every
 * class size); the size table (_hak_class_front_of_size, after the thread
 * front below) names the list of each, one entry per HAK_TABLE_STEP bytes
 * of size: every class size is a multiple of the step (class.c checks it),
 * so the sizes of one entry, (n + step - 1) / step, share their class. The
 * step keeps the table small (256 KiB): one entry per byte (4 MiB) made
 * malloc of sizes spread over 40 KiB-1 MiB miss the cache and the TLB on
 * the table itself (docs/experiments.md, "The size table by 16 bytes"). */
#define HAK_TABLE_MAX    HAK_MID_MAX
#define HAK_TABLE_STEP   16u
#define HAK_TABLE_ENTRIES (HAK_TABLE_MAX / HAK_TABLE_STEP + 1)
_Static_assert(HAK_TABLE_MAX % HAK_TABLE_STEP == 0, "the last entry is the largest size's");
/* The entry of size n <= HAK_TABLE_MAX. */
static inline size_t hak_table_index(size_t n) { return (n + HAK_TABLE_STEP - 1) / HAK_TABLE_STEP; }
/* Blocks of 4 KiB and more are HAK_COLOR_PAD bytes off their class's round
 * size (class.c says which way and why). */
#ifndef HAK_COLOR_PAD
#define HAK_COLOR_PAD 128u
#endif

/* Is offset x (< 2^32) the start of one of a class's first K blocks, given
 * magic and limit = K * magic_unit? Write x = q * size + r. Modulo 2^64,
 * x * magic is q * magic_unit + r * magic. When r == 0 that is below limit
 * exactly when q < K. When r > 0 it is at least magic, which is above any
 * limit (K * size <= 2^32): the sum cannot wrap while magic > 2^32 + size,
 * true for every size below 2^30 (class_geometry asserts it). test_hakapi_
 * classes checks the test over every offset of the first slabs of every
 * class. */
static inline __attribute__((always_inline)) bool hak_block_test(uint32_t x, uint64_t magic, uint64_t limit) {
  return (uint64_t)x * magic < limit;
}

/* ---- the ownership map ------------------------------------------------- */
/* The address space is cut into 4 GiB slots; slot s is a >> 32 (< 2^16, so
 * addresses with high bits set have none). A slot that holds a class region
 * has magic = the class's divisibility constant, limit = K * magic_unit
 * where K is the number of block starts below the end of its mapped part,
 * and front = HAK_FRONT(its class); every other slot has limit = 0. So "a
 * is a block of ours" is one bound (s < slot_end) and hak_block_test(
 * (uint32_t)a, magic[s], limit[s]): no scan, and no read of unmapped memory.
 * Home regions: class c's first region is the 64 MiB at home index
 * HAK_HOME_FIRST + HAK_FRONT(c) (an address's home index is a >> 26) when
 * that address is free, so the inline free knows the list from the index.
 * The home regions of every class lie side by side in slot HAK_HOME_BASE;
 * home index i has its limit in home_word[i] and its magic in home_word[i +
 * HAK_HOME_SLOTS], for the same test on the offset a % 64 MiB. Below
 * HAK_HOME_FIRST the two overlap (a magic read there may be another index's
 * limit), which the limit 0 makes harmless; every home region's pair lies in
 * one 1 KiB run, one page of the process's. The words below HAK_HOME_FIRST
 * (free(NULL) reads word 0) are why the home slot is low: 128 KiB of zeros
 * in libhakmem.so's image at 1 TiB, where 16 TiB took 2 MiB, and an image
 * of 2 MiB or more is placed by the kernel on a 2 MiB boundary of its own,
 * away from the other libraries' page-table pages. For the same reason the
 * slot tables (1.5 MiB) are a mapping of their own, made when the first
 * region outside the home slot opens. Side by side, a process's classes
 * share the kernel's page-table pages: a region of its own 4 GiB slot each
 * cost every class a page-table page more (a PMD), which every process
 * allocated, fork copied and exit freed (docs/experiments.md, "Starting
 * processes"). Invariants: no region lies below slot
 * HAK_HOME_BASE; slot HAK_HOME_BASE holds the home regions only (its slot
 * entry stays limit 0); home index HAK_HOME_FIRST + f, f < HAK_HOME_SLOTS,
 * is class f - 1's home region, and every home index below HAK_HOME_FIRST
 * + 1 has limit 0, so the inline free's one compare needs no lower bound
 * (home index HAK_HOME_FIRST holds the first chunks, which the slow free
 * frees: region.c).
 * Other regions take 4 GiB slots from HAK_FIRST_SLOT up. */
#define HAK_REGION_SHIFT 32
#define HAK_REGION_BYTES (1ull << HAK_REGION_SHIFT)
#define HAK_REGION_SLOTS (1u << 16)
#if defined(__x86_64__) && !defined(__SANITIZE_THREAD__) && HAK_TRACK != 2
#define HAK_HOME_BASE    256u               /* 1 TiB: away from programs, libraries, JVM heaps */
#elif defined(__x86_64__) && !defined(__SANITIZE_THREAD__)
#define HAK_HOME_BASE    4096u              /* the ASan build: ASan's shadow and its gap reserve
                                             * 2 GiB to 16 TiB, where the span slot cannot map;
                                             * just past 16 TiB, it can */
#else
#define HAK_HOME_BASE    1u                 /* small address spaces, ThreadSanitizer's ranges */
#endif
#define HAK_HOME_SHIFT   26
#define HAK_HOME_BYTES   (1ull << HAK_HOME_SHIFT)
#define HAK_HOME_SLOTS   (1u << (HAK_REGION_SHIFT - HAK_HOME_SHIFT))   /* home regions in the home slot */
#define HAK_HOME_FIRST   ((uintptr_t)HAK_HOME_BASE << (HAK_REGION_SHIFT - HAK_HOME_SHIFT))
#define HAK_FIRST_SLOT   (HAK_HOME_BASE + 80u)
_Static_assert(HAK_NFRONT < 80, "the home slot and the span slot end below HAK_FIRST_SLOT");
struct hak_slot_map {                        /* by slot */
  uint64_t limit[HAK_REGION_SLOTS];
  uint64_t magic[HAK_REGION_SLOTS];
  uint8_t  front[HAK_REGION_SLOTS];
  struct hak_region *region[HAK_REGION_SLOTS];
};
struct hak_map {
  uint64_t home_word[HAK_HOME_FIRST + 2 * HAK_HOME_SLOTS];   /* by home index: limit, then magic */
  uint64_t slot_end;                         /* one past the highest slot of a region: no entry of a
                                              * slot at or above it is read (a Large block's, a foreign
                                              * pointer's); 0 until slots is mapped (stored after it,
                                              * with release) */
  struct hak_slot_map *slots;                /* mapped by the first region outside the home slot */
  struct hak_region *home[HAK_HOME_SLOTS];   /* by home index - HAK_HOME_FIRST */
};
extern struct hak_map _hak_region_map;

/* Word 1 of a block on a free list or in a cache holds HAK_FREE_KEY, a
 * value no program holds. In the shared library (HAK_SHARED_LIB, set by the
 * Makefile) it is the address of the map, which the inline free has in a
 * register already: libhakmem.so always lies at an address the kernel
 * chose, and the map is hidden, so no block holds it but by hakmem. The
 * static library may be linked into a program at a fixed address (a
 * non-PIE executable), where the map's address is a small constant that a
 * count or a size in a block could equal; there it is a random 64-bit value,
 * never 0, set at initialization (thread.c). Memory that serves blocks
 * at other offsets later must not keep it: a block given back to the span
 * heap loses it (span.c), and so do a free slab's blocks before its pages
 * move to another class (_hak_slab_wipe_keys), else a copy of those bytes
 * into word 1 of a live block reads as a double free
 * (test_hakapi_free_key). */
#if HAK_SHARED_LIB
#define HAK_FREE_KEY ((void *)&_hak_region_map)
#else
extern uint64_t _hak_thread_free_key;
#define HAK_FREE_KEY ((void *)_hak_thread_free_key)
#endif

/* ---- free-list links ---------------------------------------------------- */
/* Word 0 of a free block links it to the next block of its list (a thread
 * front, a slab's free or remote list, a chain in transit to them, the span
 * heap's returns). Every read and write of a link goes through this one
 * contract:
 *   hak_link_set(b, next)   b's link names next (NULL ends the list)
 *   hak_link_get(b)         the block b's link names (no check)
 *   hak_link_next(b, c)     the same, on a pop of a class-c list: checked
 * The default build stores the address itself. The hardened build
 * (HAK_HARDENED) stores next ^ (address of the link >> 12) ^ a per-process
 * secret (glibc's safe-linking, plus a secret from the kernel's random
 * bytes), so a use-after-free write of an address into word 0 decodes to an
 * address the program did not choose, and hak_link_next aborts with one
 * line naming the block and the class (_hak_guard_bad_link) when what it
 * decodes is not NULL and not a block start of class c (the ownership map;
 * a span block by _hak_span_front). HAK_LINK_CHECKS selects the form: the
 * hardened build's, alone, is what docs/experiments.md measured for the
 * default build ("Encoded free-list links"). */
#ifndef HAK_LINK_CHECKS
#define HAK_LINK_CHECKS HAK_HARDENED
#endif
extern uintptr_t _hak_guard_link_secret;      /* guard.c: set at init */
#if HAK_LINK_CHECKS
HAK_FAST void *hak_link_code(void *const *at, const void *v) {
  return (void *)((uintptr_t)v ^ ((uintptr_t)at >> 12) ^ _hak_guard_link_secret);
}
#else
HAK_FAST void *hak_link_code(void *const *at, const void *v) { (void)at; return (void *)v; }
#endif
HAK_FAST void hak_link_set(void **b, const void *next) { b[0] = hak_link_code(b, next); }
HAK_FAST void *hak_link_get(void *const *b) { return hak_link_code(b, b[0]); }

/* ---- slabs --------------------------------------------------------------- */
/* One slab: a run of blocks of one class, owned by at most one heap. Its
 * entry is one cache line in its SuperSlab's header (struct hak_slab: what
 * allocation, frees and the purge's scans read); the fields that only
 * releases, moves, adoption and carving ahead use live in a side array
 * (struct hak_slab_cold), which stays untouched, and not resident, until a
 * slab needs it. Its SuperSlab and its cold entry follow from its index
 * (hak_slab_ss, hak_slab_cold).
 * Invariants (checked in debug builds: _hak_slab_check by the owner, or
 * under the pool lock; the xowner rules where slabs change hands):
 *   carved <= capacity; used <= carved;
 *   ahead => populated >= carved and populated <= capacity;
 *   touched <= capacity, and FREE and not dirty => touched == 0 (pages
 *   purged, moved out or never used hold no free key: superslab.c);
 *   used + |free| == carved and |xremote| <= used (used counts blocks out
 *   of the slab: in a thread front, in the program, or freed by another
 *   thread onto xremote and not collected yet; |xremote| is the length in
 *   its high bits);
 *   every block on free/xremote is a block start inside this slab;
 *   xowner == NULL  =>  the slab is in no heap; xlisted == 1 then means it
 *   sits on its class's shared partial list (or is being adopted): every
 *   slab on that list has xowner == NULL and xlisted == 1;
 *   xowner == h  =>  the slab is h's current slab, in h's warm pool, or
 *   on h's ready list (outside _hak_slab_acquire, _hak_slab_detach and the
 *   keeping below, which make and break that link): a heap's current and
 *   warm slabs are its own, and a block returned to a slab of xowner h is
 *   returned to one of those;
 *   xowner == h | HAK_KEPT (slab.c)  =>  exhausted and kept for h: in no
 *   list, xlisted == 0 until the first free into it, which makes it h's
 *   again (on h's ready list) when h made it, else ownerless on the shared
 *   list (slab.c, "exhausted slabs kept by their thread");
 *   ready == 1 (owner)  =>  xowner == h, xlisted == 1, on h's ready list
 *   of its class. */
enum hak_slab_state { HAK_SLAB_FREE = 0, HAK_SLAB_ACTIVE = 1 };
struct hak_heap;
struct hak_superslab;
struct hak_slab {
  _Alignas(HAK_CACHELINE) void *free; /* local free list (owner or pool lock)  */
  _Atomic uintptr_t xremote;         /* frees by other threads (MPSC stack):
                                        the head's address in the low 48 bits,
                                        the stack's length in the high 16      */
  _Atomic(struct hak_heap *) xowner; /* owning heap, NULL when ownerless       */
  struct hak_slab *next;             /* shared partial list / SuperSlab free /
                                        its owner's ready list                 */
  struct hak_slab *prev;             /* its owner's ready list (owner)         */
  uintptr_t start;                   /* first block                            */
  /* The owner's word (and xlisted, atomic): no field the pool lock guards. */
  uint16_t used;                     /* blocks out of the slab                 */
  uint16_t carved;                   /* blocks carved so far (bump pointer)    */
  _Atomic uint8_t xlisted;           /* 0: ownerless and not on the shared list:
                                        the next remote free must list it      */
  uint8_t  ready;                    /* on its owner's ready list (owner)       */
  uint8_t  ahead;                    /* its pages are faulted in ahead of the
                                        carving (slab.c, default build)        */
  uint8_t  unused_owner;
  /* The pool lock's word and fields that never change: the purge reads state
   * and dirty together, and a compiler may load them as one word, so no
   * field another thread writes without the lock may share it. */
  uint16_t capacity;                 /* blocks in the slab (class.c: at most
                                        UINT16_MAX, as |xremote|'s count)      */
  uint8_t  index;                    /* index in its SuperSlab                 */
  uint8_t  cls;
  uint8_t  state;                    /* enum hak_slab_state (pool lock)        */
  uint8_t  dirty;                    /* FREE, pages maybe resident (pool lock) */
  uint8_t  recycled;                 /* was released since its SuperSlab was mapped */
  uint8_t  purged;                   /* its pages given back by a purge pass
                                        since it was last taken: FREE and not
                                        dirty (pool lock; debug builds check) */
};
_Static_assert(sizeof(struct hak_slab) == HAK_CACHELINE, "a slab's entry is one cache line");
_Static_assert(offsetof(struct hak_slab, used) % 8 == 0 && offsetof(struct hak_slab, capacity) % 8 == 0 &&
               offsetof(struct hak_slab, unused_owner) + 1 == offsetof(struct hak_slab, capacity),
               "the owner's fields and the pool lock's lie in two words of their own");
_Static_assert(HAK_NCLS <= UINT8_MAX, "a slab's class fits its byte");

/* The rest of a slab's state, zero until a slab needs it: a fresh
 * SuperSlab's side array is never written at its mapping. */
struct hak_slab_cold {
  struct hak_slab *next_released;    /* the pool's released stack (pool lock)  */
  /* The heap whose thread holds (or held) this slab's blocks: the one that
   * last owned it, or last returned blocks to it while it was ownerless. A
   * hint, compared and never followed (the heap may be gone): adoption
   * takes such a slab first (_hak_slab_acquire). */
  _Atomic(const struct hak_heap *) xaffine;
  uint32_t populated;                /* ahead: blocks (carve order) whose pages
                                        were faulted in ahead                  */
  uint32_t touched;                  /* blocks (carve order) its carvings reached
                                        since its pages were last clean: the
                                        ones that may hold the free key (pool
                                        lock while FREE)                       */
  uint32_t freed_ms;                 /* when it became FREE (pool lock)        */
  uint8_t  on_released;              /* on its pool's released stack (pool lock) */
  uint8_t  moved_out;                /* FREE and dirty: its first OS pages already
                                        moved to another class (pool lock)     */
  uint8_t  moved_in;                 /* ranges moved into it since its SuperSlab
                                        was mapped (its taker, then the pool
                                        lock; saturating)                      */
};
_Static_assert(sizeof(struct hak_slab_cold) == 32, "four cold entries a cache line");

#define HAK_REMOTE_SHIFT 48             /* class regions lie below 2^48 */
#define HAK_REMOTE_HEAD(x) ((void **)((x) & ((1ull << HAK_REMOTE_SHIFT) - 1)))
#define HAK_REMOTE_COUNT(x) ((uint32_t)((x) >> HAK_REMOTE_SHIFT))

/* ---- SuperSlabs and regions ------------------------------------------- */
/* A SuperSlab is ss_bytes of one class region, mapped at once and carved into
 * slabs. Its header lives out of line (the region directory finds it in
 * O(1)), so blocks tile the region without gaps.
 * Lifecycle (changed on slow paths only, pool lock): HOT serves new slabs;
 * DRAINING has at least HAK_SS_DRAIN_FREE of its slabs free and gets no new
 * slab while a HOT one of its class can give one, so it empties; EMPTY has
 * every slab free. Free slabs are purged (pages back to the OS) after
 * the purge delay (purge.c); EMPTY SuperSlabs beyond HAKMEM_EMPTY_KEEP are
 * unmapped when they sit at the top of their region.
 * Invariants: free_slabs == number of slabs with state FREE;
 * a slab's purged => state FREE and not dirty;
 * state == EMPTY <=> free_slabs == nslabs;
 * state == DRAINING => free_slabs * HAK_SS_DRAIN_DEN >= nslabs * HAK_SS_DRAIN_NUM. */
#define HAK_SS_DRAIN_NUM 3
#define HAK_SS_DRAIN_DEN 4
enum hak_ss_state { HAK_SS_HOT = 0, HAK_SS_DRAINING = 1, HAK_SS_EMPTY = 2, HAK_SS_NSTATES = 3 };
struct hak_superslab {
  uintptr_t base;
  struct hak_region *region;
  uint32_t index;                    /* in the region directory                */
  uint16_t cls;
  uint16_t nslabs;
  uint16_t free_slabs;               /* pool lock                              */
  uint8_t  state;                    /* enum hak_ss_state (pool lock)          */
  uint8_t  on_hot_list;              /* pool lock                              */
  struct hak_superslab *next_hot;    /* class's list of SuperSlabs with free slabs */
  struct hak_slab *free_list;        /* free slabs, linked by next (pool lock) */
  struct hak_slab_cold *cold;        /* cold[i]: slab i's cold entry           */
  struct hak_slab slabs[];           /* from the header's second cache line    */
};
_Static_assert(offsetof(struct hak_superslab, slabs) == HAK_CACHELINE, "slab entries start a cache line");

/* The SuperSlab whose header holds s. */
static inline struct hak_superslab *hak_slab_ss(const struct hak_slab *s) {
  return (struct hak_superslab *)((uintptr_t)(s - s->index) - offsetof(struct hak_superslab, slabs));
}
static inline struct hak_slab_cold *hak_slab_cold(const struct hak_slab *s) { return &hak_slab_ss(s)->cold[s->index]; }

/* A class region: its home region (64 MiB of the home slot) or one 4 GiB
 * slot, mapped from its base upwards one SuperSlab at a time. When it is
 * full (or the next address is taken) the class opens another region. */
struct hak_region {
  uintptr_t base;                    /* in slot HAK_HOME_BASE: a home region   */
  uint16_t cls;
  uint32_t ss_mapped;                /* SuperSlabs mapped so far (pool lock)   */
  uint32_t ss_cap;                   /* SuperSlabs that fit in the region      */
  bool     full;
  struct hak_region *next;           /* the class's regions                    */
  /* The directory: dir[i] is SuperSlab i's header, for i < dir_cap. It
   * starts small and doubles as the region grows (pool lock), so a region
   * of one SuperSlab costs a few cache lines of metadata, not a page. A
   * reader without the lock loads dir once: an address below the published
   * end has its entry in every directory published before that end, and
   * replaced directories stay valid (the arena never frees). */
  struct hak_superslab **_Atomic dir;
  uint32_t dir_cap;
};

/* The block s carves first: the class's carve color (class.c) for the first
 * slab a region hands out (its slab color, first_slab), where every class's
 * region starts at the same offset; block 0 for every other slab, which so
 * carves in one run of addresses. */
static inline uint32_t hak_slab_carve_first(const struct hak_slab *s) {
  const struct hak_class *k = &_hak_classes[s->cls];
  uint64_t first = (uint64_t)k->first_slab * k->slab_bytes;   /* its offset in the region */
  return s->start - hak_slab_ss(s)->region->base == first ? k->carve_first : 0;
}

/* ---- locks (lock.c) -------------------------------------------------------- */
/* A spin-then-sleep lock with a rank. A thread holding a lock takes only
 * locks of a higher rank (debug builds check it on every acquisition), and
 * fork takes every lock of HAK_LOCKS in rank order (in a process that has
 * had a second thread: lock.c). The holder counts its
 * acquisitions, and those that had to wait (relaxed stores: the counts are
 * read without the lock, by the reports). A waiter that spun long enough
 * sleeps in the kernel (a futex on held), and the unlock that finds held
 * at 2 wakes one. Taking or leaving a lock never changes errno. */
typedef struct {
  _Atomic int held;                  /* 0 free, 1 held, 2 held and maybe waited for */
  uint16_t rank;                     /* from HAK_LOCKS, set by _hak_lock_init (debug builds; 0 otherwise) */
  _Atomic uint64_t acquired;         /* written by the holder only             */
  _Atomic uint64_t contended;        /* acquisitions that found it held        */
} hak_lock_t;
HAK_SLOW void _hak_lock_slow(hak_lock_t *l);                 /* held: spin, then sleep  */
HAK_SLOW void _hak_lock_wake(hak_lock_t *l);                 /* wakes one sleeper       */
HAK_SLOW void _hak_lock_order_take(const hak_lock_t *l);     /* debug builds            */
HAK_SLOW void _hak_lock_order_drop(const hak_lock_t *l);
HAK_SLOW void _hak_lock_order_tried(const hak_lock_t *l);    /* held, no order check */
static inline void hak_lock_count(_Atomic uint64_t *n) {
  atomic_store_explicit(n, atomic_load_explicit(n, memory_order_relaxed) + 1, memory_order_relaxed);
}
static inline void hak_lock(hak_lock_t *l) {
  if (HAK_DEBUG) _hak_lock_order_take(l);
  int expected = 0;
  if (HAK_UNLIKELY(!atomic_compare_exchange_weak_explicit(&l->held, &expected, 1,
                   memory_order_acquire, memory_order_relaxed)))
    _hak_lock_slow(l);
  hak_lock_count(&l->acquired);
}
/* Takes l only if it is free; never waits, so any rank may be tried. */
static inline bool hak_trylock(hak_lock_t *l) {
  int expected = 0;
  if (!atomic_compare_exchange_strong_explicit(&l->held, &expected, 1,
                                               memory_order_acquire, memory_order_relaxed))
    return false;
  if (HAK_DEBUG) _hak_lock_order_tried(l);
  hak_lock_count(&l->acquired);
  return true;
}
static inline void hak_unlock(hak_lock_t *l) {
  if (HAK_DEBUG) _hak_lock_order_drop(l);
  if (HAK_UNLIKELY(atomic_exchange_explicit(&l->held, 0, memory_order_release) == 2)) _hak_lock_wake(l);
}

/* ---- the shared pool (one per class) ----------------------------------- */
/* Invariants (pool lock; checked in debug builds by the purge pass): a slab
 * is on released exactly when its on_released is 1, and every slab there
 * is of the pool's class (FREE or not: an entry taken again, purged or
 * unmapped since it was pushed stays until it comes up). */
struct hak_pool {
  hak_lock_t lock;
  struct hak_slab *partial;          /* ownerless slabs with free blocks       */
  uint32_t npartial;                 /* written under the lock, read as a hint */
  struct hak_superslab *hot;         /* SuperSlabs with free slabs             */
  /* Slabs released since they were last taken, newest first: the free slabs
   * whose pages are most likely resident. A fresh slab is one of these when
   * one is still dirty (superslab.c). */
  struct hak_slab *released;
  uint32_t taken;                    /* slabs taken since the last purge pass  */
  struct hak_region *regions;
} __attribute__((aligned(HAK_CACHELINE)));
extern struct hak_pool _hak_slab_pools[HAK_NCLS];

/* Every lock of hakmem, in rank order (a lock of count > 1 is an array, one
 * rank per element, stride bytes apart): X(id, name, first lock, count,
 * stride, what it guards). Nesting today: a pool lock takes the slot lock
 * (a new region), and either, or the span lock, takes the Large lock (out
 * of memory: the range cache is dropped); the heap registry's lock, a pool
 * lock, the slot lock or the Large lock (the Large table's first entries)
 * takes the metadata arena's. */
#define HAK_LOCKS(X) \
  X(TOTALS, "totals", _hak_lock_set.totals, 1, 0, "stats.c: the counters of exited threads") \
  X(HEAPS,  "heaps",  _hak_lock_set.heaps, 1, 0, "thread.c: the registry of thread heaps") \
  X(POOL,   "pool",   _hak_slab_pools[0].lock, HAK_NCLS, sizeof(struct hak_pool), \
    "slab.c: a class's shared pool, its SuperSlabs and regions (one per class)") \
  X(SPAN,   "span",   _hak_lock_set.span, 1, 0, "span.c: the span heap (every refill and spill of 40 KiB to 1 MiB)") \
  X(SLOT,   "slot",   _hak_lock_set.slot, 1, 0, "region.c: claiming a 4 GiB slot for a region; the first chunks") \
  X(LARGE,  "large",  _hak_lock_set.large, 1, 0, "large.c: Large blocks and the range cache (every Large free, every foreign-pointer probe)") \
  X(HEAP,   "user_heaps", _hak_lock_set.user_heaps, 1, 0, "heap.c: first-class heaps' segment map, free headers and heaps, orphan segments") \
  X(PROF,   "prof",   _hak_lock_set.prof, 1, 0, "prof.c: the heap profiler's sites and sampled blocks (HAKMEM_PROF only)") \
  X(META,   "meta",   _hak_lock_set.meta, 1, 0, "os.c: the metadata arena")
/* Every lock outside a structure (the pools' lie in _hak_slab_pools), a
 * cache line each, together on one page (the set is aligned to its size).
 * Fork takes and frees every lock (once the process has had a second
 * thread: lock.c): when each lay beside its module's data,
 * on a page of its own, parent and child each took a copy-on-write fault
 * per page at every fork (docs/experiments.md, "Page faults"). */
struct hak_lock_set {
  _Alignas(HAK_CACHELINE) hak_lock_t totals;   /* stats.c                       */
  _Alignas(HAK_CACHELINE) hak_lock_t heaps;    /* thread.c                      */
  _Alignas(HAK_CACHELINE) hak_lock_t span;     /* span.c                        */
  _Alignas(HAK_CACHELINE) hak_lock_t slot;     /* region.c                      */
  _Alignas(HAK_CACHELINE) hak_lock_t large;    /* large.c                       */
  _Alignas(HAK_CACHELINE) hak_lock_t user_heaps; /* heap.c: seg_map's leaves, free headers and heaps, orphans */
  _Alignas(HAK_CACHELINE) hak_lock_t prof;     /* prof.c                        */
  _Alignas(HAK_CACHELINE) hak_lock_t meta;     /* os.c                          */
} __attribute__((aligned(8 * HAK_CACHELINE)));
_Static_assert(sizeof(struct hak_lock_set) == 8 * HAK_CACHELINE && 8 * HAK_CACHELINE <= HAK_PAGE_MIN,
               "the lone locks share one page");
extern struct hak_lock_set _hak_lock_set;
enum hak_lock_rank {
#define HAK_LOCK_RANK(id, name, first, count, stride, doc) HAK_RANK_##id, HAK_RANK_##id##_LAST = HAK_RANK_##id + (count) - 1,
  HAK_LOCKS(HAK_LOCK_RANK)
#undef HAK_LOCK_RANK
  HAK_RANK_COUNT
};
enum hak_lock_kind {
#define HAK_LOCK_KIND(id, name, first, count, stride, doc) HAK_LOCK_##id,
  HAK_LOCKS(HAK_LOCK_KIND)
#undef HAK_LOCK_KIND
  HAK_LOCK_KINDS
};
/* The counts of one entry of the table, summed over its locks. */
struct hak_lock_counts { const char *name, *doc; uint64_t acquired, contended; };
void _hak_lock_init(void);                          /* the ranks (debug); first at init */
void _hak_lock_counts(struct hak_lock_counts out[HAK_LOCK_KINDS]);
void _hak_lock_fork_prepare(void);                  /* every lock, rank order (threaded) */
void _hak_lock_fork_parent(void);
void _hak_lock_fork_child(void);

/* ---- counters (stats.c) ------------------------------------------------ */
/* Per-thread counters, declared once here; stats.c generates the merge, the
 * report and the JSON from these lists. */
#define HAK_STATS_SCALARS(X) \
  X(malloc_slow,        "malloc calls that took a slow path") \
  X(free_slow,          "free calls that took a slow path") \
  X(remote_frees,       "blocks freed into a slab owned by another thread or none") \
  X(remote_collects,    "remote free lists taken by an owner in one exchange") \
  X(slabs_abandoned,    "slabs left ownerless (thread exit, malloc_trim, a class left idle)") \
  X(slabs_kept,         "exhausted slabs kept by their thread until a free into them") \
  X(slabs_reclaimed,    "kept slabs back in their thread's use after frees into them") \
  X(slabs_adopted,      "ownerless slabs adopted from the shared pool") \
  X(slabs_released,     "empty slabs returned to their SuperSlab") \
  X(large_allocs,       "Large blocks allocated") \
  X(large_cache_hits,   "Large blocks served from the mapping cache") \
  X(large_frees,        "Large blocks freed") \
  X(large_remaps,       "Large reallocs done by mremap") \
  X(invalid_frees,      "invalid pointers ignored (HAKMEM_INVALID_FREE=ignore)") \
  X(foreign_frees,      "C library blocks handed back to the C library") \
  X(threads_exited,     "thread heaps flushed and returned at thread exit") \
  X(idle_releases,      "lists a thread left untouched for a purge delay, returned with their capacity")

#define HAK_STATS_PER_CLASS(X) \
  X(hits,            "allocations served by the thread front (fast path)") \
  X(misses,          "allocations that had to refill the thread front") \
  X(stage_current,   "refill stage 1: blocks from the current slab (local + remote)") \
  X(stage_warm,      "refill stage 2: a slab from the warm pool") \
  X(stage_shared,    "refill stage 3: an ownerless slab from the shared pool") \
  X(stage_fresh,     "refill stage 4: a fresh slab from a SuperSlab") \
  X(carved,          "fresh blocks carved from slabs (they make pages resident)") \
  X(warm_hits,       "warm pool pops") \
  X(warm_misses,     "warm pool found empty") \
  X(warm_prefills,   "slabs loaded into the warm pool by a secondary prefill") \
  X(frees,           "frees taken by the thread front") \
  X(spills,          "front overflows spilled to the slabs") \
  X(refills,         "front refills")

struct hak_stats {
#define HAK_STAT_FIELD(name, doc) uint64_t name;
  HAK_STATS_SCALARS(HAK_STAT_FIELD)
#undef HAK_STAT_FIELD
#define HAK_STAT_ARRAY(name, doc) uint64_t name[HAK_NCLS];
  HAK_STATS_PER_CLASS(HAK_STAT_ARRAY)
#undef HAK_STAT_ARRAY
};

/* Process-wide gauges, changed on slow paths only, declared once:
 * X(name, PEAK or NONE (a name_peak gauge beside it), unit (KIB or COUNT),
 * label, doc); stats.c generates the report and the JSON from this list.
 * The SuperSlab counts per state are reported by state. */
#define HAK_GAUGES(X) \
  X(bytes_mapped,       PEAK, KIB,   "mapped",      "bytes mapped: class regions, the span heap, Large blocks, hakmem's tables and metadata") \
  X(bytes_in_use,       PEAK, KIB,   "in use",      "bytes of blocks out of slabs, span runs and Large blocks") \
  X(bytes_large,        PEAK, KIB,   "Large",       "bytes of live Large blocks") \
  X(bytes_large_cached, NONE, KIB,   "large cache", "bytes of freed Large ranges kept for reuse") \
  X(bytes_purged,       NONE, KIB,   "purged",      "bytes of free pages given back to the OS") \
  X(purge_calls,        NONE, COUNT, "purge calls", "madvise calls that gave pages back") \
  X(bytes_reused,       NONE, KIB,   "reused",      "released slabs, span pages and cached Large ranges handed out again") \
  X(bytes_moved,        NONE, KIB,   "moved",       "resident pages of free slabs and span runs moved to another class's fresh slab or span run (HAKMEM_PAGE_MOVES)") \
  X(bytes_regret,       NONE, KIB,   "refaulted",   "bytes a purge gave back that the program's demand faulted in again soon after (purge.c: they lengthen the purge delay)") \
  X(purge_delay_ms,     PEAK, COUNT, "purge delay ms", "the purge delay now, as the refaults have scaled HAKMEM_PURGE_DELAY_MS")
#define HAK_GAUGE_PEAK_FIELD_PEAK(name) _Atomic int64_t name##_peak;
#define HAK_GAUGE_PEAK_FIELD_NONE(name)
struct hak_gauges {
#define HAK_GAUGE_FIELD(name, peak, unit, label, doc) _Atomic int64_t name; HAK_GAUGE_PEAK_FIELD_##peak(name)
  HAK_GAUGES(HAK_GAUGE_FIELD)
#undef HAK_GAUGE_FIELD
  _Atomic int64_t ss_count[HAK_SS_NSTATES];
};
extern struct hak_gauges _hak_stats_gauges;

/* ---- per-thread state ---------------------------------------------------- */
/* The hot part, in initial-exec TLS: read by the inline fast paths.
 * The thread front of class c (every class below Large), at f = HAK_FRONT(c):
 * head[f] is a LIFO list of free blocks linked through word 0 (word 1 holds
 * _hak_thread_free_key while free) and credit[f] is how many more blocks it may
 * take. Invariants: |head[f]| + credit[f] == heap->cap[c] once the heap
 * exists, outside the moment between a fast free finding no credit and the
 * slow path restoring credit[f] from -1 to 0. Before the heap exists, and
 * after the thread's exit flush, head[f] == NULL and credit[f] == 0, so
 * both fast paths fall through to their slow paths. head[0] == NULL and
 * credit[0] == 0 always. With HAKMEM_PROF set, every credit[f] of a heap
 * is kept HAK_PROF_CREDIT_BIAS below that value (front.c), so every free
 * takes the slow path. */
struct hak_tls {
  void *head[HAK_NFRONT];
  int64_t credit[HAK_NFRONT];        /* 8 bytes: credit[f] lies a constant past head[f] */
  struct hak_heap *heap;             /* NULL until the thread's first slow path */
  bool exited;                       /* its heap was flushed at thread exit     */
};
/* The list and the credit of class c, for the slow paths. */
#define HAK_LIST(c)   (_hak_thread_tls.head[HAK_FRONT(c)])
#define HAK_CREDIT(c) (_hak_thread_tls.credit[HAK_FRONT(c)])
extern __thread struct hak_tls _hak_thread_tls __attribute__((tls_model("initial-exec")));
/* A dlopen()ed libhakmem gets its initial-exec TLS from what glibc keeps
 * spare for that (test_foreign.sh does it): in glibc 2.36 a library with
 * 1,700 bytes of it loads, one with 2,000 does not. */
_Static_assert(sizeof(struct hak_tls) <= 1088, "keep the thread front's TLS small");

/* The thread front's accesses that depend on the architecture and the C
 * library (the x86-64 glibc form and its portable twin): the contract is
 * written at the top of prim.h. */
#include "prim.h"

/* The size table: the list of every size n up to HAK_TABLE_MAX, at
 * hak_table_index(n). An entry is hak_prim_entry(f), f the size's front
 * slot; 0 until the slow path writes the table's page that holds it
 * (_hak_class_of_size),
 * and entry 0 reads an empty list, so the inline malloc of a size not seen
 * before takes the slow path; only the pages of sizes a program uses become
 * resident. */
extern hak_size_entry_t _hak_class_front_of_size[HAK_TABLE_ENTRIES];

#define HAK_DELAY_MAX 16u              /* hardened build: delayed reuse depth (front.c) */
#define HAK_WARM_MAX 32                /* build maximum of the warm pool cap    */
#define HAK_ONE_WAY_CAP 64u            /* blocks a list used one way may hold   */
#define HAK_FREE_ONLY_CAP 32u          /* ... when that way is free; it spills whole */
enum { HAK_WAY_MALLOC = 1, HAK_WAY_FREE = 2, HAK_WAY_BOTH = 3 };

/* The heap profiler's state of one thread (prof.c): the bytes its slow
 * paths may still hand out before the next sample, its random state (0:
 * not seeded), and whether it is inside the profiler (no sampling then). */
struct hak_prof_thread { int64_t left; uint64_t rng; bool busy; };
/* The common case of _hak_prof_charge_push, for the slow free: a seeded
 * thread outside the profiler with the bytes left; false: ask prof.c. */
static inline bool hak_prof_charge_inline(struct hak_prof_thread *t, int64_t bytes) {
  if (!t->rng || t->busy || t->left < bytes) return false;
  t->left -= bytes;
  return true;
}

/* The cold part: one heap per thread, from the metadata arena, reused after
 * the thread exits. */
struct hak_heap {
  /* Front capacities, grown on slow paths only. Invariants: cap[c] <= the
   * class's maximum (_hak_front_max_cap); cap_bytes == the sum of cap[c] * size
   * <= the thread budget (HAKMEM_THREAD_CACHE_KB). */
  uint16_t cap[HAK_NCLS];
  size_t cap_bytes;
  size_t span_cap_bytes;   /* the span classes' capacity beyond their start
                            * capacities, in bytes: <= HAKMEM_SPAN_CACHE_KB */
  /* How class c's list has been used since its capacity was last 0:
   * HAK_WAY_MALLOC when it ran empty under malloc, HAK_WAY_FREE when it was
   * full under free. A list used one way only (a producer's, a
   * consumer's) grows to at most HAK_ONE_WAY_CAP blocks (a consumer's
   * to HAK_FREE_ONLY_CAP, and spills whole: the same blocks per spill as
   * half of HAK_ONE_WAY_CAP, half as many held): it only passes
   * blocks along, and a big one would hold them out of reach of the thread
   * that reuses them (see docs/experiments.md). */
  uint8_t ways[HAK_NCLS];
  /* Tiny classes whose first free in this thread went back to its slab
   * (front.c: passive false sharing). */
  uint32_t first_free_returned;
#define HAK_FIRST_FREE_BITS 32
  /* Idle lists: at a slow path at least HAKMEM_PURGE_DELAY_MS after the
   * last look, a list whose head, credit and refill + spill count are what
   * that look saw was not touched in between; it goes back to the slabs
   * with its capacity. */
  uint32_t idle_look_ms;
  uint32_t idle_calls;                         /* slow paths since the last clock read */
  struct hak_stats stats;                      /* beside the fields every slow path writes */
  void *seen_head[HAK_NCLS];
  int32_t seen_credit[HAK_NCLS];
  uint32_t seen_events[HAK_NCLS];
  struct hak_slab *cur[HAK_NCLS];              /* slab feeding the front    */
  struct hak_slab *warm[HAK_NTINY][HAK_WARM_MAX]; /* Tiny warm pool: partly free slabs */
  uint8_t warm_n[HAK_NTINY];
  /* Each class's ready list: slabs this heap exhausted, kept, and freed
   * into since (slab.c; struct hak_slab's HAK_KEPT rule). Owner only;
   * empty outside a thread's life. */
  struct hak_slab *ready[HAK_NCLS];
  /* Split classes: slow-path requests of split i's coarse class seen
   * since the last decision, and how many of them split i could serve. */
  uint16_t split_seen[HAK_NSPLIT], split_low[HAK_NSPLIT];
  struct hak_prof_thread prof;
#if HAK_HARDENED
  void *delayed[HAK_NCLS][HAK_DELAY_MAX];      /* blocks waiting to be reused (front.c) */
  uint8_t delay_next[HAK_NCLS];                /* the ring slot the next free takes */
#endif
  struct hak_heap *next_all;                   /* registry of all heaps     */
  struct hak_heap *next_free;                  /* free heaps, for reuse     */
  bool live;
};

/* ---- os.c ------------------------------------------------------------------ */
/* Every mapping is counted in the bytes_mapped gauge. Mappings of blocks
 * are refused past the memory limit (NULL, errno ENOMEM); tables are not. */
/* Blocks' mappings, purges and remaps are whole OS pages at OS page
 * boundaries (debug builds check it); tables may be mapped anywhere. */
void   _hak_os_page_init(void);                   /* after the options, first */
void  *_hak_os_map_at(uintptr_t addr, size_t bytes); /* exactly there or NULL */
void  *_hak_os_map_aligned(size_t bytes, size_t align);   /* align >= the OS page */
void  *_hak_os_map_table(size_t bytes);           /* hakmem's own tables      */
void  *_hak_os_map_table_at(uintptr_t addr, size_t bytes);
void   _hak_os_unmap(void *p, size_t bytes);
void   _hak_os_purge(void *p, size_t bytes);     /* give pages back, keep range */
void   _hak_os_zero(void *p, size_t bytes);      /* the same for a table: reads 0 again */
bool   _hak_os_populate(void *p, size_t bytes);  /* fault the pages in now, in one call */
void  *_hak_os_remap(void *p, size_t old_bytes, size_t new_bytes);
bool   _hak_os_move(void *from, size_t bytes, void *to);  /* mremap to a fixed place */
int    _hak_os_move_pages(void *from, size_t bytes, void *to);  /* from stays mapped; 1, 0 or -1 */
void  *_hak_os_meta_alloc(size_t bytes);          /* zeroed, never freed      */
void  *_hak_os_meta_alloc_cold(size_t bytes);     /* as above, apart from it  */
uint64_t _hak_os_now_ns(void);
uint32_t _hak_os_now_ms(void);                    /* coarse, cheap            */
void   _hak_os_limit_set(size_t bytes, bool hard);  /* 0: no limit              */
size_t _hak_os_limit_get(bool *hard);
bool   _hak_os_limit_relieve(void);              /* after a trim; true: map past it once */
void   _hak_os_limit_waive(bool on);             /* this thread maps past the bar */
void   _hak_os_limit_init(void);                 /* from the options, at init */
/* The cgroup v2 memory.max of the process, the smallest along its path
 * (cgroup_file: /proc/self/cgroup; root: /sys/fs/cgroup); 0: no limit or
 * none found. Reads files with system calls only (no malloc). */
size_t _hak_os_cgroup_limit(const char *cgroup_file, const char *root);
/* Bytes between the process's resident set and its high-water mark
 * (VmRSS and VmHWM of /proc/self/status); 0 when they cannot be read.
 * System calls only. */
size_t _hak_os_peak_room(void);

/* ---- class.c --------------------------------------------------------------- */
void     _hak_class_init(void);
void     _hak_class_table_init(void);      /* after the classes */
void     _hak_class_table_release(void);   /* malloc_trim */
unsigned _hak_class_of_size(size_t n);               /* n <= HAK_MID_MAX      */
bool     _hak_class_serves(unsigned c);              /* not an idle split class */
void     _hak_class_split_sample(size_t n, unsigned c);  /* a slow-path request */
int      _hak_class_for_aligned(size_t n, size_t align); /* -1: none          */

/* ---- region.c -------------------------------------------------------------- */
struct hak_slab *_hak_region_slab_of(uintptr_t a, unsigned cls);
const struct hak_region *_hak_region_holding(uintptr_t a);   /* a in its mapped part; racy, for messages */
struct hak_superslab *_hak_region_grow_class(unsigned cls);  /* pool lock held */
bool _hak_region_any(void);                 /* some class has a region (racy) */
struct hak_superslab *_hak_region_top(const struct hak_region *r); /* pool lock held */
void   _hak_region_unmap_top(struct hak_region *r);          /* pool lock held */
/* First chunks (region.c says why): every slab class's first blocks, from a
 * chunk of the area at home index HAK_HOME_FIRST, beside the other classes'.
 * _hak_region_chunk_spent[c] (racy): no block to take; refills skip it, and
 * every refill of a heap other than _hak_region_chunk_heap (racy). */
#define HAK_CHUNK_BASE   ((uintptr_t)HAK_HOME_FIRST << HAK_HOME_SHIFT)
#define HAK_CHUNK_AREA   (5u << 18)         /* 1.25 MiB: the chunks' share of ... */
#define HAK_META_FIRST   (HAK_CHUNK_BASE + HAK_CHUNK_AREA)   /* ... the 2 MiB one page-table
                                             * page spans; the metadata arena's first chunk
                                             * (os.c) starts after them, its hot bottom in it */
#define HAK_CHUNK_BYTES  (16u << 10)        /* a chunk at least ...            */
#define HAK_CHUNK_BLOCKS 4u                 /* ... and at least this many blocks */
#define HAK_CHUNK_FREES  1024u              /* slow frees of a chunk's blocks before it retires */
_Static_assert(HAK_CHUNK_AREA < (2u << 20) && HAK_CHUNK_AREA % HAK_PAGE_MAX == 0 &&
               HAK_CHUNK_BASE % (2u << 20) == 0,
               "the area begins a page-table page's 2 MiB and leaves room in it, in whole pages");
static inline bool hak_chunk_holds(uintptr_t a) { return a >> HAK_HOME_SHIFT == HAK_HOME_FIRST; }
extern uint8_t _hak_region_chunk_spent[HAK_NCLS];
extern struct hak_heap *_hak_region_chunk_heap;   /* the one heap they serve; NULL: none yet */
unsigned _hak_region_chunk_take(struct hak_heap *h, unsigned c, unsigned max, void **chain);   /* 0: none */
void     _hak_region_chunk_return(unsigned c, void *head, void *tail, unsigned n);
bool     _hak_region_chunk_retire(unsigned c, void **b);   /* a slow free; true: b is stashed */
int      _hak_region_chunk_class(uintptr_t a);   /* -1: not a carved block start */

/* ---- superslab.c (pool lock held) --------------------------------------- */
void   _hak_superslab_mapped(struct hak_superslab *ss, bool kept);
struct hak_slab *_hak_superslab_fresh_slab(unsigned cls, bool *resident);
void   _hak_superslab_release_slab(struct hak_slab *s);
/* Page moves (no pool lock held; the span heap's recipient holds its own):
 * resident pages of free slabs and span runs into fresh slabs, runs and
 * Large mappings. */
bool   _hak_superslab_fill(struct hak_slab *s);   /* false: a hole, s is lost */
unsigned _hak_superslab_move_budget(void);        /* ranges a recipient may take now */
size_t _hak_superslab_give(uintptr_t at, size_t need, unsigned skip, unsigned budget, unsigned *calls, int *failed);
void   _hak_superslab_moved(long ranges, size_t bytes, int failed);   /* counts; ranges < 0: unmapped */
struct hak_purge_policy;
size_t _hak_superslab_purge(const struct hak_purge_policy *pp);   /* takes the pool locks */

/* ---- slab.c ---------------------------------------------------------------- */
unsigned _hak_slab_pop(struct hak_heap *h, struct hak_slab *s, unsigned want, unsigned room, bool carve_ok, void **list);
bool     _hak_slab_has_recycled(const struct hak_slab *s);
void    *_hak_slab_return(struct hak_heap *h, unsigned c, void *chain, unsigned n);   /* the rest */
void     _hak_slab_detach(struct hak_heap *h, struct hak_slab *s);
void     _hak_slab_keep(struct hak_heap *h, struct hak_slab *s);      /* s exhausted */
struct hak_slab *_hak_slab_reclaim(struct hak_heap *h, unsigned c);  /* a ready slab, or NULL */
bool     _hak_slab_has_reclaimable(const struct hak_heap *h, unsigned c);
void     _hak_slab_release_ready(struct hak_heap *h, unsigned c);     /* ready slabs detached */
struct hak_slab *_hak_slab_acquire(struct hak_heap *h, unsigned c, bool fresh_ok, bool *adopted);
void     _hak_slab_release_empty(struct hak_pool *pool);   /* pool lock held */
void     _hak_slab_check(const struct hak_slab *s);
void     _hak_slab_wipe_keys(const struct hak_slab *s, uintptr_t from, uintptr_t to);   /* pages leave its class */

/* ---- refill.c -------------------------------------------------------------- */
unsigned _hak_refill_take(struct hak_heap *h, unsigned c, unsigned max, unsigned room, void **chain);
void     _hak_refill_heap_flush(struct hak_heap *h);   /* current and warm slabs detached */

/* ---- purge.c --------------------------------------------------------------- */
/* What a purge pass may give back: free memory unused since now_ms -
 * delay_ms (the delay as the regret has scaled it), beyond keep empty
 * SuperSlabs per class; force: everything. base_ms: HAKMEM_PURGE_DELAY_MS;
 * hold: what the learned delay may still spare (NULL: nothing past base_ms). */
struct hak_purge_policy { bool force; uint32_t now_ms, delay_ms, base_ms; long keep; int64_t *hold; };
/* Whether bytes of free memory, free since freed_ms, go back in this pass:
 * after the base delay they do, unless the learned delay still spares them
 * and *pp->hold (the bytes in use when the pass began, less what it spared
 * so far) has room for them, which it then takes (purge.c). */
bool   _hak_purge_due(const struct hak_purge_policy *pp, uint32_t freed_ms, size_t bytes);
/* Whether memory free since freed_ms is past the base delay (or the pass is
 * forced): a tier's own rules that spare memory by demand look at it first,
 * then _hak_purge_due, so what those rules spare takes no hold. */
bool   _hak_purge_aged(const struct hak_purge_policy *pp, uint32_t freed_ms);
/* Whether memory free since freed_ms was freed lately: less than
 * HAK_PURGE_YOUNG_DELAYS base delays ago, the pass not forced. The span
 * heap holds such runs below the process's peak (span.c, held), the Large
 * cache up to HAK_LARGE_YOUNG_KEEP bytes of such ranges (large.c). */
bool   _hak_purge_young(const struct hak_purge_policy *pp, uint32_t freed_ms);
#define HAK_PURGE_YOUNG_DELAYS 20u
void   _hak_purge_init(void);             /* after the options        */
void   _hak_purge_tick(void);             /* slow paths call it       */
size_t _hak_purge_all(void);              /* malloc_trim, out of memory */
/* Regret: a tier faults in again, for the program's demand, bytes that a
 * purge pass gave back less than _hak_purge_regret_ms() ago (purge.c). */
void     _hak_purge_regret(size_t bytes);
uint32_t _hak_purge_regret_ms(void);
uint32_t _hak_purge_delay_now(void);      /* the delay as the refaults scaled it */
uint32_t _hak_purge_window_ms(void);      /* the window that scales it back down */
/* A tier that cannot tell which of its fresh pages it purged before (the
 * span heap, the Large cache) keeps what it purged lately and its largest
 * piece: fresh pages it faults in for a piece of need bytes count as regret
 * up to that, if a purged piece could have held it (need 0: any could);
 * under the tier's lock. */
struct hak_purge_recent { uint64_t bytes, largest; uint32_t ms; };
void _hak_purge_recent_add(struct hak_purge_recent *r, size_t purged, size_t largest, uint32_t now_ms);
void _hak_purge_recent_fresh(struct hak_purge_recent *r, size_t fresh, size_t need);

/* ---- front.c -------------------------------------------------------------- */
HAK_SLOW void *_hak_front_alloc_slow(unsigned c);          /* list empty, or no heap yet   */
HAK_SLOW void  _hak_front_free_slow(void *p, unsigned c);  /* list full, or no heap yet    */
void  _hak_front_free_unpushed(void *p, unsigned c);       /* the same, no push was tried  */
void  _hak_front_heap_init(struct hak_heap *h);
void  _hak_front_heap_flush(struct hak_heap *h);
bool  _hak_front_spans_flush(struct hak_heap *h);   /* span lists to the span heap; any? */
unsigned _hak_front_max_cap(unsigned c);
size_t _hak_front_max_bytes(unsigned first, unsigned last);  /* classes [first, last) */
void  _hak_front_init(void);                      /* after the options           */
#if HAK_HARDENED
/* Delayed reuse: a waiting block's word 0 is 0 (not a link: it is on no
 * list) until the program writes it. An empty ring slot names
 * _hak_front_delay_none, two words that stay 0, so that a check reads every
 * slot without a test. */
extern void *_hak_front_delay_none[2];
HAK_SLOW __attribute__((noreturn)) void _hak_front_delay_written(const struct hak_heap *h, unsigned c);
void  _hak_front_delay_verify_all(const struct hak_heap *h);   /* every class: at process exit */
#endif

/* ---- span.c ---------------------------------------------------------------- */
/* The span heap: blocks of the classes from HAK_SPAN_FIRST (the 40 KiB bridge
 * class) up to 1 MiB are page runs of one shared slot, so the pages one class
 * frees serve the others (see span.c). The rings of all span classes of a
 * thread together hold at most HAKMEM_SPAN_CACHE_KB of blocks, besides 2
 * blocks each (front.c; beyond 32 live threads, 32 threads' budgets shared
 * by all, the 2 blocks included): the heap serves any class with what the
 * rings would hold back. */
#define HAK_SPAN_FIRST      (HAK_NTINY + 16)
_Static_assert(HAK_SPAN_FIRST < HAK_HOME_SLOTS, "every class with regions has a home index in the home slot");
/* Its slot, and its pages: span pages of HAK_SPAN_PAGE bytes, a constant
 * (the slow free finds a block's class with a shift), whatever the OS page;
 * a run is a whole number of OS pages at an OS page boundary (span.c). A
 * block starts HAK_SPAN_COLOR_STEP * (span page % HAK_SPAN_COLORS) bytes
 * into its run's first span page (hak_span_start_offset; with OS pages of
 * 16 and 64 KiB runs start on fewer colors). _hak_span_front has a byte per
 * span page of the slot: HAK_FRONT(class) at the first span page of a used
 * run, 0 everywhere else (written under the heap's lock, read by the slow
 * free (api.c); 1 MiB of address space, 4 KiB of it resident per 16 MiB
 * of the heap: under an address-space limit every mapped byte counts, a
 * table of a byte per 256 B took 16 MiB). */
#define HAK_SPAN_SLOT       (HAK_HOME_BASE + HAK_NFRONT)   /* above the home slot: */
_Static_assert(HAK_SPAN_SLOT > HAK_HOME_BASE && HAK_SPAN_SLOT < HAK_FIRST_SLOT,
               "the inline free's first compare sends its blocks on");
#define HAK_SPAN_PAGE_SHIFT 12
#define HAK_SPAN_PAGE       (1u << HAK_SPAN_PAGE_SHIFT)
#define HAK_SPAN_PAGES      (1u << (HAK_REGION_SHIFT - HAK_SPAN_PAGE_SHIFT))
_Static_assert(HAK_SPAN_PAGE == HAK_PAGE_MIN, "an OS page is a whole number of span pages");
#define HAK_SPAN_COLORS     8u
#define HAK_SPAN_STEP_SHIFT 8
#define HAK_SPAN_COLOR_STEP (1u << HAK_SPAN_STEP_SHIFT)
/* By span page: HAK_FRONT(class) at a used run's first page, else 0
 * (span.c). A mapping of its own, made when the span heap opens (NULL
 * before, stored with release). */
extern uint8_t *_hak_span_front;
/* Where a block starts in its span page: o is an offset in the slot,
 * o >> HAK_SPAN_PAGE_SHIFT its span page; a block start has
 * o % HAK_SPAN_PAGE equal to this. */
static inline uint32_t hak_span_start_offset(uint32_t o) {
  return (o >> (HAK_SPAN_PAGE_SHIFT - HAK_SPAN_STEP_SHIFT)) & ((HAK_SPAN_COLORS - 1) << HAK_SPAN_STEP_SHIFT);
}
unsigned _hak_span_take(unsigned c, unsigned max, void **chain);  /* 0: out of memory */
void   _hak_span_return(unsigned c, void *chain);
int    _hak_span_class(const void *p);            /* -1: not a block start, -2: freed */
/* Word 2 of a span block that the heap hands out (_hak_span_take) holds
 * HAK_ZERO_MARK when every byte of its run but words 0 to 2 is zero (the
 * run was taken from pages not resident: fresh, purged or mapped again,
 * and no page move filled it), else NULL; the slow free (api.c
 * span_push) clears it before the block can be handed out again. So a
 * calloc that gets a block marked zeroes three words, not the block. */
#define HAK_ZERO_MARK ((void *)((uintptr_t)HAK_FREE_KEY ^ 1))
/* A malloc (not a calloc) that the slow path serves with a block marked
 * zero is about to write it: the pages under its first n bytes, at most
 * HAK_SPAN_FAULT_IN bytes, fault in now in one call rather than one trap a
 * page as the program writes them (span.c). */
void   _hak_span_fault_in(void *p, size_t n);
#define HAK_SPAN_FAULT_IN (128u * 1024)
bool   _hak_span_containing(uintptr_t a, uintptr_t *start, size_t *bytes);
size_t _hak_span_purge(const struct hak_purge_policy *pp);
bool   _hak_span_opened(void);            /* the span heap has pages (racy) */
/* A pass spares as many pages as the span heap handed out in one of the
 * last HAK_SPAN_DEMAND_PASSES passes, up to HAK_SPAN_DEMAND_KEEP bytes. */
#define HAK_SPAN_DEMAND_PASSES 16u
#define HAK_SPAN_DEMAND_KEEP   (8u << 20)
/* It also holds runs freed lately (_hak_purge_young) while the process is
 * below its peak resident set: as many bytes as fit in the room between
 * the two, less HAK_PEAK_HOLD_MARGIN. */
#define HAK_PEAK_HOLD_MARGIN   (1u << 20)
size_t _hak_span_give(uintptr_t at, size_t need, unsigned budget, unsigned *calls, int *failed);  /* page moves */
void   _hak_span_offer(void);                     /* free runs came back for a recipient */
struct hak_span_stats {
  uint64_t run_bytes;       /* pages in runs, used or free                  */
  uint64_t mapped_bytes;    /* pages mapped (runs and room above them)      */
  uint64_t free_runs, free_bytes;
  uint64_t dirty_bytes;     /* free pages not purged yet                    */
};
void   _hak_span_stats(struct hak_span_stats *out);  /* for the reports      */

/* ---- large.c --------------------------------------------------------------- */
void  *_hak_large_alloc(size_t n, size_t align, bool zero);
bool   _hak_large_free(void *p, const char *call);    /* false: not a large block */
size_t _hak_large_usable(const void *p);              /* 0: not a large block */
void  *_hak_large_realloc(void *p, size_t n);         /* NULL: move it yourself */
size_t _hak_large_trim(void);
size_t _hak_large_expire(const struct hak_purge_policy *pp);
/* A pass keeps up to HAK_LARGE_YOUNG_KEEP bytes of the ranges freed lately
 * (_hak_purge_young: 1 s at the default delay), newest first. */
#define HAK_LARGE_YOUNG_KEEP   (8u << 20)
size_t _hak_large_give(uintptr_t at, size_t need, unsigned budget, unsigned *calls, int *failed);  /* page moves */
bool   _hak_large_containing(uintptr_t a, uintptr_t *start, size_t *bytes);

/* ---- heap.c ---------------------------------------------------------------- */
/* Blocks of first-class heaps lie outside the class regions: the slow free
 * and usable size ask here after the classes. */
bool   _hak_heap_free(void *p, const char *call);     /* false: not a heap block */
size_t _hak_heap_usable(const void *p);               /* 0: not a heap block */
bool   _hak_heap_holds(uintptr_t a);                  /* a lies in a heap's segment or cached one */

/* ---- thread.c -------------------------------------------------------------- */
struct hak_heap *_hak_thread_heap(void);                 /* creates on first use  */
void   _hak_thread_flush(struct hak_heap *h);           /* all its caches back   */
unsigned _hak_thread_heaps_live(void);                  /* threads with a heap   */
void   _hak_thread_init(void);
bool   _hak_thread_initialized(void);
typedef void (*hak_thread_visit_fn)(struct hak_heap *h, void *arg);
void   _hak_thread_visit_heaps(hak_thread_visit_fn fn, void *arg); /* registry lock held */

/* ---- options.c ------------------------------------------------------------- */
/* The options table: X(name (env HAKMEM_<name>), kind, default, lo, hi,
 * words, doc).
 * Kinds say how a value is typed, parsed (once, at init) and printed:
 *   NUMBER  a decimal number, clamped to lo..hi with a warning
 *   BOOL    0 or 1 (a number clamped to 0..1)
 *   ENUM    one of its words ("abort|ignore"); the value is the word's
 *           index (a number lo..hi is taken too)
 *   NUMBER with words: a number, or word i, whose value is -1 - i
 *   LIST    comma-separated numbers, one per class from the tier's first
 *           (_hak_options_list); an empty item is 0
 *   REPORT  0, 1, or json:PATH (value 2; the path is _hak_options_path)
 *   PATH    a file name (value 1 when set; _hak_options_path) */
#define HAK_OPTIONS(X) \
  X(STATS,           REPORT,  0, 0, 1, NULL,    "1: print counters at exit; json:PATH: write them as JSON") \
  X(WARM_POOL_STATS, BOOL,    0, 0, 1, NULL,    "1: print the warm pool per class at exit") \
  X(WARM_POOL_CAP,   NUMBER, 16, 1, HAK_WARM_MAX, NULL, "slabs kept per class in the Tiny warm pool") \
  X(WARM_POOL_PREFILL, NUMBER, 3, 0, 16, NULL,  "extra slabs loaded when the warm pool runs empty") \
  X(TINY_CACHE_KB,   NUMBER, 64, 4, 1024, NULL, "KiB a Tiny free list may grow to per class and thread (64 to 1024 blocks; 64 for a list used one way, 32 if only to free)") \
  X(THREAD_CACHE_KB, NUMBER, 4096, 64, 1048576, NULL, "KiB of free blocks the lists of one thread may hold, all classes together") \
  X(SPAN_CACHE_KB,   NUMBER, 1024, 0, 1048576, NULL, "KiB of free blocks of 40 KiB to 1 MiB the lists of one thread may hold beyond 2 per class, those classes together") \
  X(L2_RING_CAP,     NUMBER, POOL_L2_RING_CAP, 1, POOL_L2_RING_CAP, NULL, "capacity an L2 ring may grow to, per class (lowers the build's)") \
  X(L25_RING_CAP,    NUMBER, POOL_L25_RING_CAP, 1, POOL_L25_RING_CAP, NULL, "capacity an L2.5 ring may grow to, per class (lowers the build's)") \
  X(L2_RING_CAPS,    LIST,    0, 0, 0, NULL,    "per-class L2 ring capacities, comma-separated from the smallest class (0: the pool's)") \
  X(L25_RING_CAPS,   LIST,    0, 0, 0, NULL,    "per-class L2.5 ring capacities, comma-separated (0: the pool's)") \
  X(LARGE_CACHE_MB,  NUMBER, 64, 0, 4096, NULL, "MiB of freed Large ranges the cache may always keep for reuse") \
  X(LARGE_CACHE_LIVE_PCT, NUMBER, 100, 0, 1000, NULL, "percent of the live Large bytes the cache may keep when that is more than HAKMEM_LARGE_CACHE_MB") \
  X(PURGE_DELAY_MS,  NUMBER, 50, 0, 60000, NULL, "ms before a free slab or cached Large range goes back to the OS, and an untouched thread list to the slabs") \
  X(EMPTY_KEEP,      NUMBER,  1, 0, 64, NULL,   "empty SuperSlabs per class kept committed for reuse") \
  X(FIRST_CHUNKS,    NUMBER, 1, 0, 1, NULL,     "1: each slab class's first blocks come from a chunk beside the other classes' (one mapping, one page-table page) before the class maps a region of its own; 0: from its region") \
  X(PAGE_MOVES,      NUMBER, 1024, 0, HAK_PAGE_MOVES_MAX, NULL, "page ranges moved from other classes' free slabs and free span runs into fresh slabs, span runs and Large mappings (span runs' only) that may be outstanding (each may cost two kernel mappings; 0: no moves)") \
  X(PAGE_SIZE,       NUMBER, -1, HAK_PAGE_MIN, HAK_PAGE_MAX, "kernel", "bytes of the page hakmem maps, purges and guards in: a power of two from the kernel's page to 65536 (kernel: the kernel's)") \
  X(LIMIT_MB,        NUMBER,  0, 0, 100000000, "cgroup", "MiB hakmem may keep mapped (0: no limit); cgroup: the memory.max of the process's cgroup v2") \
  X(LIMIT,           ENUM,    0, 0, 1, "soft|hard", "soft: past HAKMEM_LIMIT_MB hakmem trims before it maps more; hard: and then fails the allocation (ENOMEM)") \
  X(INVALID_FREE,    ENUM,    0, 0, 1, "abort|ignore", "abort: an invalid free aborts; ignore: it is counted and skipped") \
  X(PROF,            ENUM,    0, 0, 2, "0|1|leaks", "heap profiler: 1 samples allocations with their stacks and writes a profile at exit (hakmem prof FILE); leaks: a leak report at exit") \
  X(PROF_SAMPLE,     NUMBER, 524288, 1, 100000000, NULL, "bytes allocated per sample, on average (exponential intervals)") \
  X(PROF_SIGNAL,     ENUM,    0, 0, 31, HAK_SIGNAL_NAMES, "signal on which the profile is written to HAKMEM_PROF_FILE.N (by the next slow path)") \
  X(PROF_FILE,       PATH,    0, 0, 0, NULL,    "the profile's path (%p: the process id); default hakmem-prof.%p.heap") \
  X(PRINT_OPTIONS,   BOOL,    0, 0, 1, NULL,    "1: print this table with current values at start-up")
#define HAK_OPT_LIST_MAX HAK_NL2               /* items a LIST option holds */
#define HAK_PAGE_MOVES_MAX 16384               /* HAKMEM_PAGE_MOVES's maximum */
/* Linux's signal names in number order (the same on x86-64 and aarch64):
 * word i is signal i (prof.c checks three). */
#define HAK_SIGNAL_NAMES "0|SIGHUP|SIGINT|SIGQUIT|SIGILL|SIGTRAP|SIGABRT|SIGBUS|SIGFPE|SIGKILL|SIGUSR1|SIGSEGV|" \
  "SIGUSR2|SIGPIPE|SIGALRM|SIGTERM|SIGSTKFLT|SIGCHLD|SIGCONT|SIGSTOP|SIGTSTP|SIGTTIN|SIGTTOU|SIGURG|" \
  "SIGXCPU|SIGXFSZ|SIGVTALRM|SIGPROF|SIGWINCH|SIGIO|SIGPWR|SIGSYS"

enum hak_option_kind { HAK_KIND_NUMBER, HAK_KIND_BOOL, HAK_KIND_ENUM, HAK_KIND_LIST, HAK_KIND_REPORT, HAK_KIND_PATH };
enum hak_option_id {
#define HAK_OPT_ENUM_ID(name, kind, def, lo, hi, words, doc) HAK_OPT_##name,
  HAK_OPTIONS(HAK_OPT_ENUM_ID)
#undef HAK_OPT_ENUM_ID
  HAK_OPT_COUNT
};
void  _hak_options_init(void);
long  _hak_options_get(enum hak_option_id id);
unsigned _hak_options_list(enum hak_option_id id, unsigned i);  /* LIST: item i, or 0 */
const char *_hak_options_path(enum hak_option_id id);           /* REPORT, PATH: the path or NULL */
void  _hak_options_print(void);

/* ---- stats.c --------------------------------------------------------------- */
void  _hak_stats_merge_heap(struct hak_heap *h);   /* at thread exit          */
void  _hak_stats_at_exit(void);
void  _hak_stats_gauge_add(_Atomic int64_t *g, _Atomic int64_t *peak, int64_t delta);

/* ---- guard.c --------------------------------------------------------------- */
HAK_SLOW __attribute__((noreturn)) void _hak_guard_assert_failed(const char *what, const char *file, int line);
/* A pointer that is not a live hakmem block: hand it to the C library when it
 * is one of its blocks, else one line on stderr and abort (or ignore). */
HAK_SLOW void   _hak_guard_foreign_free(void *p, const char *call);
HAK_SLOW size_t _hak_guard_foreign_usable(const void *p, const char *call);
HAK_SLOW void  *_hak_guard_foreign_realloc(void *p, size_t n, const char *call);
HAK_SLOW __attribute__((noreturn)) void _hak_guard_double_free(const void *p, const char *call, size_t size); /* size 0: unknown */
HAK_SLOW __attribute__((noreturn)) void _hak_guard_bad_pointer(const void *p, const char *call, const char *why);
/* A free-list link that decodes to no block of the list's class, or a
 * delayed block whose link was written while it waited (hardened build). */
HAK_SLOW __attribute__((noreturn)) void _hak_guard_bad_link(const void *b, const void *next, unsigned c);
HAK_SLOW __attribute__((noreturn)) void _hak_guard_bad_heap_link(const void *b, const void *next, size_t size);
HAK_SLOW __attribute__((noreturn)) void _hak_guard_written_after_free(const void *b, unsigned c);
void   _hak_guard_init(void);                  /* the link secret; at init */
/* Hardened build: OS pages [p, p + bytes) made inaccessible (on) or
 * read-write again (off); false when the kernel refused. */
bool   _hak_guard_pages(void *p, size_t bytes, bool on);
/* printf to stderr / to fd through a stack buffer: never allocates. */
void   _hak_guard_write(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void   _hak_guard_printf(int fd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* ---- prof.c ---------------------------------------------------------------- */
enum hak_prof_mode { HAK_PROF_OFF, HAK_PROF_ON, HAK_PROF_LEAKS };
extern int _hak_prof_mode;                /* HAKMEM_PROF; slow paths test it */
HAK_SLOW void *_hak_prof_alloc(size_t n, size_t align, bool zero);   /* NULL: not sampled */
/* With HAKMEM_PROF set, front.c keeps every list's credit this far below
 * its value: the inline free never finds credit (struct hak_tls). */
#define HAK_PROF_CREDIT_BIAS ((int64_t)1 << 40)
unsigned _hak_prof_refill_room(unsigned c, unsigned max);
void  _hak_prof_charge(size_t bytes);            /* blocks put on a list     */
bool  _hak_prof_charge_push(size_t bytes);       /* false: no bytes left     */
void  _hak_prof_refund(size_t bytes);            /* blocks off a list unused */
HAK_SLOW void  _hak_prof_free(void *p);   /* p: no class block */
void  _hak_prof_moved(void *p, void *q);  /* a Large realloc moved p to q */

/* ---- api.c ----------------------------------------------------------------- */
HAK_SLOW void *_hak_api_malloc_slow(size_t n);
HAK_SLOW void  _hak_api_free_slow(void *p, const char *call);
#if HAK_TRACK
/* Tracked builds (track.h): every malloc and free, announced to the tool. */
void *_hak_api_malloc_tracked(size_t n);
void  _hak_api_free_tracked(void *p, const char *call);
#endif

/* ======================================================================= */
/* Fast paths                                                                */
/* ======================================================================= */

/* Map entries change while other threads read them (a region grows); an
 * aligned 64-bit load is atomic on every target hakmem supports, and a stale
 * entry only sends a free to the slow path, which looks again. The TSan
 * build says so with relaxed atomics (GCC addresses those less well, so the
 * release build keeps plain loads). */
#if defined(__SANITIZE_THREAD__)
#define HAK_RACY_LOAD(x) __atomic_load_n(&(x), __ATOMIC_RELAXED)
#else
#define HAK_RACY_LOAD(x) (x)
#endif
static inline uint64_t *hak_home_limit(uintptr_t i) { return &_hak_region_map.home_word[i]; }
static inline uint64_t *hak_home_magic(uintptr_t i) { return &_hak_region_map.home_word[i + HAK_HOME_SLOTS]; }

/* Is a the start of a block of a home region? *t is its home index (the
 * inline free's test: one bound, the block test on a's offset in it). */
HAK_FAST bool hak_home_is_block(uintptr_t a, uintptr_t *t) {
  uintptr_t i = *t = a >> HAK_HOME_SHIFT;
  return i < HAK_HOME_FIRST + HAK_HOME_SLOTS &&
         hak_block_test((uint32_t)(a & (HAK_HOME_BYTES - 1)), HAK_RACY_LOAD(*hak_home_magic(i)),
                        HAK_RACY_LOAD(*hak_home_limit(i)));
}

/* The slot tables when slot s is below slot_end (they exist then), else NULL. */
HAK_FAST const struct hak_slot_map *hak_map_slots(uintptr_t s) {
  return s < __atomic_load_n(&_hak_region_map.slot_end, __ATOMIC_ACQUIRE) ? _hak_region_map.slots : NULL;
}

/* Is a the start of a block of a region in a 4 GiB slot? *slot is the slot. */
HAK_FAST bool hak_map_is_block(uintptr_t a, uintptr_t *slot) {
  uintptr_t s = *slot = a >> HAK_REGION_SHIFT;
  const struct hak_slot_map *m = hak_map_slots(s);
  return m && hak_block_test((uint32_t)a, HAK_RACY_LOAD(m->magic[s]), HAK_RACY_LOAD(m->limit[s]));
}

/* The class of p when p is the start of a block in a class region, else -1. */
static inline int hak_block_class(const void *p) {
  uintptr_t i;
  if (hak_home_is_block((uintptr_t)p, &i)) return (int)(i - HAK_HOME_FIRST) - 1;
  if (i == HAK_HOME_FIRST) return _hak_region_chunk_class((uintptr_t)p);
  return hak_map_is_block((uintptr_t)p, &i) ? (int)_hak_region_map.slots->front[i] - 1 : -1;
}

/* The entry of offset o of the span slot: 0 before the heap opens. */
static inline unsigned hak_span_front_at(uint32_t o) {
  const uint8_t *f = __atomic_load_n(&_hak_span_front, __ATOMIC_ACQUIRE);
  return f ? HAK_RACY_LOAD(f[o >> HAK_SPAN_PAGE_SHIFT]) : 0;
}

/* Is a (not NULL) a block start of class c: of a region of c, or a span
 * block of c? The check of hak_link_next. */
HAK_FAST bool hak_link_plausible(uintptr_t a, unsigned c) {
  uintptr_t i;
  if (hak_home_is_block(a, &i)) return i == HAK_HOME_FIRST + HAK_FRONT(c);
  if (hak_map_is_block(a, &i)) return _hak_region_map.slots->front[i] == HAK_FRONT(c);
  uint32_t o = (uint32_t)a;
  return i == HAK_SPAN_SLOT && (o & (HAK_SPAN_PAGE - 1)) == hak_span_start_offset(o) &&
         hak_span_front_at(o) == HAK_FRONT(c);
}

HAK_FAST void *hak_link_next(void *const *b, unsigned c) {
  void *next = hak_link_get(b);
  if (HAK_LINK_CHECKS && HAK_UNLIKELY(next && !hak_link_plausible((uintptr_t)next, c)))
    _hak_guard_bad_link(b, next, c);
  return next;
}

/* Pushes b on list t - HAK_HOME_FIRST (t: a home index, so t >=
 * HAK_HOME_FIRST) when the list has credit, taking one; false when it has
 * none (its credit is -1 then, and the slow path puts it back to 0). */
HAK_FAST bool hak_home_push(uintptr_t t, void **b) {
  return hak_prim_home_push(t, b);
}

/* Frees b, a block already checked (its start, not free) whose list is
 * t - HAK_HOME_FIRST (t: a home index, as hak_home_push's): onto this
 * thread's list while the list has credit, marked free with key
 * (HAK_FREE_KEY, read once by the caller: the push's asm clobbers memory).
 * false when the list has none (its credit is -1 then), and always in the
 * hardened build, whose frees wait in the delay ring first. The inline
 * free, the span free and the first-chunk free share it. */
HAK_FAST bool hak_list_push(uintptr_t t, void **b, void *key) {
  if (HAK_HARDENED || !hak_home_push(t, b)) return false;
  b[1] = key;
#if HAK_FAST_STATS
  _hak_thread_tls.heap->stats.frees[t - HAK_HOME_FIRST - 1]++;   /* a list holds credit only once the heap exists */
#endif
  return true;
}

#if HAK_HARDENED
/* Hardened build, at every malloc of class c: has the program written a
 * block waiting in h's delay ring of c since its free (word 0 not 0 any
 * more)? One line naming the block and the class, and abort, before the
 * malloc returns. Every slot, unrolled: 2 instructions each. */
HAK_FAST void hak_delay_verify(const struct hak_heap *h, unsigned c) {
  uintptr_t written = 0;
#pragma GCC unroll 16
  for (unsigned i = 0; i < HAK_DELAY_MAX; i++) written |= *(const uintptr_t *)h->delayed[c][i];
  if (HAK_UNLIKELY(written != 0)) _hak_front_delay_written(h, c);
}
#endif

/* Pops the thread front's list whose table entry is e (hak_size_entry_t);
 * NULL when it is empty. The hardened build verifies the class's delay
 * ring first. */
HAK_FAST void *hak_list_pop(intptr_t e) {
  void **b = hak_prim_head(e);
  if (HAK_LIKELY(b != NULL)) {
#if HAK_HARDENED
    hak_delay_verify(_hak_thread_tls.heap, hak_prim_front(e) - 1);   /* a list holds blocks only once the heap exists */
#endif
    hak_prim_unlink(e, HAK_LINK_CHECKS ? hak_link_next(b, hak_prim_front(e) - 1) : b[0]);
    b[1] = NULL;                              /* not free any more */
#if HAK_FAST_STATS
    _hak_thread_tls.heap->stats.hits[hak_prim_front(e) - 1]++;   /* a list holds blocks only once the heap exists */
#endif
  }
  return b;
}

/* The inline malloc's list pop: the block, or NULL when the list is empty
 * or n is past the size table. calloc shares it, with a slow path of its
 * own (api.c). */
HAK_FAST void *hak_malloc_pop(size_t n) {
  if (HAK_LIKELY(n <= HAK_TABLE_MAX)) return hak_list_pop(HAK_RACY_LOAD(_hak_class_front_of_size[hak_table_index(n)]));
  return NULL;
}

/* HAK_FAST malloc: pop the thread front's list of the class. One branch
 * besides the size test (a size whose table entry is not written yet finds
 * an empty list: the TCB word in the x86-64 glibc form, slot 0 in the portable twin); everything else
 * is _hak_api_malloc_slow. */
HAK_FAST void *hak_malloc_inline(size_t n) {
#if HAK_TRACK
  return _hak_api_malloc_tracked(n);        /* no fast path: track.h */
#endif
  void *b = hak_malloc_pop(n);
  if (HAK_LIKELY(b != NULL)) return b;
  return _hak_api_malloc_slow(n);
}

/* HAK_FAST free: a block of a class's home region (home index t, list
 * t - HAK_HOME_FIRST) goes on this thread's list while the list has credit.
 * The checks (block start below the region's mapped end, not already free)
 * cost one compare each. A full list goes to the front's slow free;
 * anything else (span blocks, other regions, Large, foreign, bad pointers)
 * to _hak_api_free_slow. */
HAK_FAST void hak_free_inline(void *p) {
#if HAK_TRACK
  _hak_api_free_tracked(p, "free");         /* no fast path: track.h */
  return;
#endif
  uintptr_t t;
  if (HAK_LIKELY(hak_home_is_block((uintptr_t)p, &t))) {
    void **b = (void **)p;
    void *key = HAK_FREE_KEY;                 /* read once (the push's asm clobbers memory) */
    if (HAK_LIKELY(b[1] != key)) {
      if (HAK_LIKELY(hak_list_push(t, b, key))) return;
      _hak_front_free_slow(p, (unsigned)(t - HAK_HOME_FIRST - 1));   /* a home region: its class */
      return;
    }
  }
  _hak_api_free_slow(p, "free");
}

#pragma GCC visibility pop
#endif
