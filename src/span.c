/* span.c — the span heap. Blocks of the span classes (HAK_SPAN_FIRST, the
 * 40 KiB bridge class, up to 1 MiB) are not carved from class regions: each
 * is a run of whole OS pages in one shared slot, taken from and given back to one page heap, so the pages
 * one class frees serve any other class at once (with a region per class,
 * every class kept the memory of its own peak: docs/experiments.md). A free
 * run merges with its free neighbours and waits in a bucket by length; its
 * pages go back to the OS after the purge delay, or at malloc_trim, and a
 * purged free run at the top gives back its address space too. The threads'
 * rings (front.c) sit in front of the heap as for every class.
 *
 * The heap counts in span pages (HAK_SPAN_PAGE, 4 KiB: the page table has
 * an entry per span page, the slow free finds a class by a constant shift),
 * and every run starts and ends on an OS page boundary: its start and
 * length are multiples of span.unit span pages (1 with 4 KiB OS pages, 16
 * with 64 KiB ones), so each run is mapped, purged and unmapped by itself.
 * A block starts 256 * (span page % 8) bytes into its run's first span page
 * (the cache colors that class regions give blocks by their pad; with OS
 * pages of 32 KiB and more, one color), so a run holds its class's size and
 * the last color's offset (class_pages).
 *
 * The slot is HAK_SPAN_SLOT, above the home slot, so free's
 * inline path sends span blocks on at its first compare, to the slow path
 * whose first step (span_push, api.c) finds the block's class in
 * _hak_span_front. Every change is made under the span lock; the
 * page table is read without it only to check a pointer the caller holds (a
 * live run does not change under its owner) or to describe a bad one. */
#include "hakmem_internal.h"

#include <errno.h>
#include <string.h>

#define SPAN_GROW        (2u << 20)          /* bytes mapped at a time            */
#define SPAN_GROW_PAGES  (SPAN_GROW >> HAK_SPAN_PAGE_SHIFT)
#define SPAN_BUCKETS     258u                /* free runs of 1..257 OS pages; [0]: longer */
#define SPAN_NONE        UINT32_MAX
#define SPAN_BATCH_MAX   64u                 /* runs one take hands out           */

enum { SPAN_UNSET = 0, SPAN_FREE = 1, SPAN_USED = 2 };

/* One entry per span page of the slot, 8 bytes: a used run writes its
 * first and last entries only, so the table pages a heap of used runs
 * makes resident are a third of what 24-byte entries made (memcached's
 * slab pages of 1 MiB: docs/experiments.md, "memcached's peak RSS").
 * Invariants (span_check, debug builds): a run's first and last entries
 * hold its length and state, the last one with tail set when the run is
 * longer than a span page, and its inner entries are unset; runs tile span
 * pages [0, top); a run's start and length are multiples of span.unit; no
 * two free runs touch; a free run is on the bucket of its length; the
 * _hak_span_front entry of a run's first page i (front_of(i)) is
 * HAK_FRONT(class) when the run is used, else 0, and every other entry is
 * 0; an unmapped run is free and not dirty, and runs lie below mapped, in
 * pages both tables map. */
struct span_page {
  uint32_t len;             /* run length in span pages                     */
  uint8_t  state;           /* SPAN_FREE / SPAN_USED                        */
  uint8_t  tail;            /* the last entry of a run of 2 pages or more   */
  uint8_t  dirty;           /* free run: some of its pages may be resident  */
  uint8_t  unmapped;        /* free run: its pages are not mapped (given
                             * back when a mapping failed); mapped again
                             * when taken                                  */
};
_Static_assert(sizeof(struct span_page) == 8, "a page table entry is 8 bytes");

/* A free run's own fields, at its first span page's index in span.free
 * (meaningless for used runs, which never write them): its bucket's list,
 * when it was freed, and, when dirty, the span pages at its end whose pages
 * moved to a class slab (superslab.c), less than its length. */
struct span_free {
  uint32_t next, prev;
  uint32_t freed_ms;
  uint32_t moved;
};

/* The heap's first page: the start of its slot, fixed at build time. */
#define SPAN_BASE ((uintptr_t)HAK_SPAN_SLOT << HAK_REGION_SHIFT)

static struct {
  _Atomic bool opened;
  struct span_page *page;   /* the page table                               */
  struct span_free *free;   /* the free runs' fields, by the same index     */
  uint32_t table_mapped;    /* entries of both mapped so far                */
  _Atomic uint32_t top;     /* span pages in runs                           */
  uint32_t mapped;          /* span pages mapped                            */
  uint64_t taken;           /* span pages handed out since the last purge pass */
  struct hak_purge_recent purged;   /* bytes purged lately (purge.c's regret) */
  uint64_t demand[HAK_SPAN_DEMAND_PASSES];   /* taken, in each of the last passes */
  unsigned demand_at;       /* the slot of demand the next pass fills       */
  uint32_t unit;            /* span pages per OS page (a power of two)      */
  unsigned unit_shift;      /* its log2                                     */
  uint32_t bucket[SPAN_BUCKETS];
  uint64_t nonempty[(SPAN_BUCKETS + 63) / 64];
  uint32_t moved_n;         /* entries of _hak_span_moved_at in use           */
  /* A purge pass left dirty free runs, which may give their pages;
   * cleared by a recipient that finds none (as superslab.c's donor
   * classes), so a fresh slab costs no walk of the runs when none can
   * give (xmllint: 6,600 instructions a fresh slab before). */
  _Atomic bool may_give;
} span;

/* Where the ranges of class slabs' pages moved into runs start (page moves,
 * superslab.c counts them until their pages are unmapped): at most
 * HAKMEM_PAGE_MOVES, unordered. Under the span lock. */
HAK_ZERO_TABLE uint32_t _hak_span_moved_at[HAK_PAGE_MOVES_MAX];

uint8_t *_hak_span_front;                /* hakmem_internal.h; at the slot's top (span_open) */

/* The entry of _hak_span_front of a run at span page i. */
static uint8_t *front_of(uint32_t i) { return &_hak_span_front[i]; }

/* Free runs are on the bucket of their length in OS pages. */
static unsigned bucket_of(uint32_t len) {
  uint32_t pages = len >> span.unit_shift;
  return pages < SPAN_BUCKETS ? pages : 0;
}

static void bucket_insert(uint32_t i) {
  struct span_free *e = &span.free[i];
  unsigned b = bucket_of(span.page[i].len);
  e->prev = SPAN_NONE;
  e->next = span.bucket[b];
  if (e->next != SPAN_NONE) span.free[e->next].prev = i;
  span.bucket[b] = i;
  span.nonempty[b / 64] |= 1ull << (b % 64);
}

static void bucket_remove(uint32_t i) {
  struct span_free *e = &span.free[i];
  unsigned b = bucket_of(span.page[i].len);
  if (e->prev != SPAN_NONE) span.free[e->prev].next = e->next;
  else span.bucket[b] = e->next;
  if (e->next != SPAN_NONE) span.free[e->next].prev = e->prev;
  if (span.bucket[b] == SPAN_NONE) span.nonempty[b / 64] &= ~(1ull << (b % 64));
}

/* Entries are written with relaxed atomics: a racy reader (a bad pointer's
 * check) sees old or new values, never torn ones. */
static void entry_set(uint32_t i, uint32_t len, unsigned state, bool tail) {
  struct span_page *e = &span.page[i];
  __atomic_store_n(&e->len, len, __ATOMIC_RELAXED);
  __atomic_store_n(&e->tail, (uint8_t)tail, __ATOMIC_RELAXED);
  __atomic_store_n(&e->state, (uint8_t)state, __ATOMIC_RELAXED);
}

/* A run of state at page i; front: HAK_FRONT(its class) for a used run, 0. */
static void run_set(uint32_t i, uint32_t len, unsigned state, unsigned front) {
  entry_set(i, len, state, false);
  if (len > 1) entry_set(i + len - 1, len, state, true);
  __atomic_store_n(front_of(i), (uint8_t)front, __ATOMIC_RELAXED);
}

static void run_clear(uint32_t i, uint32_t len) {
  __atomic_store_n(front_of(i), 0, __ATOMIC_RELAXED);
  entry_set(i, 0, SPAN_UNSET, false);
  if (len > 1) entry_set(i + len - 1, 0, SPAN_UNSET, false);
}

static void free_run_set(uint32_t i, uint32_t len, bool dirty, uint32_t freed_ms) {
  run_set(i, len, SPAN_FREE, 0);
  span.page[i].dirty = dirty;
  span.page[i].unmapped = 0;
  span.free[i].freed_ms = freed_ms;
  span.free[i].moved = 0;
  bucket_insert(i);
}

/* The slot's last SPAN_TABLES_PAGES span pages hold the tables: the front
 * table (_hak_span_front, 1 MiB, mapped whole when the heap opens), then
 * the page table and the free runs' fields, each mapped SPAN_TABLE_GROW
 * entries at a time as the runs grow (their 24 MiB counted against an
 * address-space limit). They start, as the runs' mappings (SPAN_GROW at a
 * time) end, on a 2 MiB boundary, so the first pages of the front and page
 * tables share one page-table page of the kernel's. */
#define SPAN_FRONT_BYTES  ((size_t)HAK_SPAN_PAGES)
#define SPAN_PAGE_BYTES   ((size_t)HAK_SPAN_PAGES * sizeof(struct span_page))
#define SPAN_TABLE_BYTES  ((size_t)HAK_SPAN_PAGES * (sizeof(struct span_page) + sizeof(struct span_free)))
#define SPAN_TABLES_ALIGN ((size_t)2 << 20)
#define SPAN_TABLES_PAGES ((uint32_t)((SPAN_FRONT_BYTES + SPAN_TABLE_BYTES + SPAN_TABLES_ALIGN - 1) / \
                                      SPAN_TABLES_ALIGN * SPAN_TABLES_ALIGN / HAK_SPAN_PAGE))
#define SPAN_RUN_PAGES    (HAK_SPAN_PAGES - SPAN_TABLES_PAGES)   /* span pages runs may take */
#define SPAN_TABLE_GROW   8192u                                 /* entries */
_Static_assert(((uint64_t)SPAN_RUN_PAGES << HAK_SPAN_PAGE_SHIFT) % SPAN_TABLES_ALIGN == 0 &&
               SPAN_TABLES_ALIGN % HAK_PAGE_MAX == 0 && SPAN_FRONT_BYTES % HAK_PAGE_MAX == 0 &&
               SPAN_FRONT_BYTES < SPAN_TABLES_ALIGN && SPAN_PAGE_BYTES % HAK_PAGE_MAX == 0 &&
               HAK_SPAN_PAGES % SPAN_TABLE_GROW == 0 &&
               SPAN_TABLE_GROW * sizeof(struct span_page) % HAK_PAGE_MAX == 0 &&
               SPAN_TABLE_GROW * sizeof(struct span_free) % HAK_PAGE_MAX == 0 && SPAN_GROW % HAK_PAGE_MAX == 0,
               "the span heap's mappings are whole OS pages; the tables start in one 2 MiB window");

/* Maps the front table and sets up the heap; false when the kernel refuses. */
static bool span_open(void) {
  if (atomic_load_explicit(&span.opened, memory_order_relaxed)) return true;
  uintptr_t tables = SPAN_BASE + ((uintptr_t)SPAN_RUN_PAGES << HAK_SPAN_PAGE_SHIFT);
  if (!_hak_os_map_table_at(tables, SPAN_FRONT_BYTES)) return false;
  span.unit = (uint32_t)(_hak_os_page >> HAK_SPAN_PAGE_SHIFT);
  span.unit_shift = (unsigned)__builtin_ctz(span.unit);
  span.page = (struct span_page *)(tables + SPAN_FRONT_BYTES);
  span.free = (struct span_free *)(tables + SPAN_FRONT_BYTES + SPAN_PAGE_BYTES);
  for (unsigned b = 0; b < SPAN_BUCKETS; b++) span.bucket[b] = SPAN_NONE;
  __atomic_store_n(&_hak_span_front, (uint8_t *)tables, __ATOMIC_RELEASE);
  atomic_store_explicit(&span.opened, true, memory_order_release);
  return true;
}

/* Both tables' entries of pages [0, end) are mapped. */
static bool table_map_to(uint32_t end) {
  uint32_t have = span.table_mapped;
  uint32_t need = end > HAK_SPAN_PAGES - SPAN_TABLE_GROW ? HAK_SPAN_PAGES
                                                        : (end + SPAN_TABLE_GROW - 1) / SPAN_TABLE_GROW * SPAN_TABLE_GROW;
  if (need <= have) return true;
  size_t page_bytes = (size_t)(need - have) * sizeof *span.page, free_bytes = (size_t)(need - have) * sizeof *span.free;
  if (!_hak_os_map_table_at((uintptr_t)&span.page[have], page_bytes)) return false;
  if (!_hak_os_map_table_at((uintptr_t)&span.free[have], free_bytes)) {
    _hak_os_unmap(&span.page[have], page_bytes);
    return false;
  }
  span.table_mapped = need;
  return true;
}

/* Span pages up to end are mapped (SPAN_GROW at a time, at fixed addresses). */
static bool span_map_to(uint32_t end) {
  if (end <= span.mapped) return true;
  if (end > SPAN_RUN_PAGES) return false;
  uint64_t bytes = ((uint64_t)(end - span.mapped) << HAK_SPAN_PAGE_SHIFT) + SPAN_GROW - 1;
  bytes -= bytes % SPAN_GROW;
  uint64_t room = (uint64_t)(SPAN_RUN_PAGES - span.mapped) << HAK_SPAN_PAGE_SHIFT;
  if (bytes > room) bytes = room;
  if (!table_map_to(span.mapped + (uint32_t)(bytes >> HAK_SPAN_PAGE_SHIFT))) return false;
  uintptr_t at = SPAN_BASE + ((uintptr_t)span.mapped << HAK_SPAN_PAGE_SHIFT);
  if (!_hak_os_map_at(at, bytes) &&
      !(errno == ENOMEM && _hak_large_trim() && _hak_os_map_at(at, bytes))) return false;
  hak_track_mem_noaccess((void *)at, bytes);       /* no block handed out yet (track.h) */
  span.mapped += (uint32_t)(bytes >> HAK_SPAN_PAGE_SHIFT);
  return true;
}

/* The free run that best fits len span pages (whole OS pages): the
 * shortest non-empty bucket from len's up, else the first long enough among
 * the longest runs. */
static uint32_t best_fit(uint32_t len) {
  for (unsigned b = len >> span.unit_shift; b < SPAN_BUCKETS; b = (b / 64 + 1) * 64) {
    uint64_t bits = span.nonempty[b / 64] >> (b % 64);
    if (bits) return span.bucket[b + (unsigned)__builtin_ctzll(bits)];
  }
  for (uint32_t j = span.bucket[0]; j != SPAN_NONE; j = span.free[j].next)
    if (span.page[j].len >= len) return j;
  return SPAN_NONE;
}

static uintptr_t page_addr(uint32_t i) { return SPAN_BASE + ((uintptr_t)i << HAK_SPAN_PAGE_SHIFT); }

/* Span pages [i, i + len) of an unmapped free run are mapped again. */
static bool pages_remap(uint32_t i, uint32_t len) {
  if (!_hak_os_map_at(page_addr(i), (size_t)len << HAK_SPAN_PAGE_SHIFT)) return false;
  hak_track_mem_noaccess((void *)page_addr(i), (size_t)len << HAK_SPAN_PAGE_SHIFT);
  return true;
}

/* Span pages [i, i + len) are unmapped, and the moved ranges that start
 * there end. */
static void pages_unmap(uint32_t i, uint32_t len) {
  _hak_os_unmap((void *)page_addr(i), (size_t)len << HAK_SPAN_PAGE_SHIFT);
  long ranges = 0;
  for (uint32_t k = 0; k < span.moved_n; )
    if (_hak_span_moved_at[k] - i < len) { _hak_span_moved_at[k] = _hak_span_moved_at[--span.moved_n]; ranges++; }
    else k++;
  if (ranges) _hak_superslab_moved(-ranges, 0, 0);
}

/* A range moved in at span page i: noted unless one starting there is
 * (it replaced that one); false when the note is full. */
static bool moved_note(uint32_t i) {
  for (uint32_t k = 0; k < span.moved_n; k++)
    if (_hak_span_moved_at[k] == i) return true;
  if (span.moved_n == HAK_PAGE_MOVES_MAX) return false;
  _hak_span_moved_at[span.moved_n++] = i;
  return true;
}

/* Span pages [i, i + len), about to be handed out and not resident, take
 * the resident pages of class slabs (superslab.c), then of cached Large
 * ranges (large.c), one range at a time, each marked where it starts;
 * *moved: the bytes moved in (not zero). false when a refused move left a
 * hole. */
static bool run_fill(uint32_t i, uint32_t len, size_t *moved) {
  unsigned budget = _hak_superslab_move_budget(), calls = 0;
  size_t need = (size_t)len << HAK_SPAN_PAGE_SHIFT, got = 0;
  long marked = 0;
  int failed = 0;
  while (got < need && !failed && calls < budget) {
    unsigned before = calls;
    size_t n = _hak_superslab_give(page_addr(i) + got, need - got, HAK_NCLS, calls + 1, &calls, &failed);
    if (calls == before && !failed) n = _hak_large_give(page_addr(i) + got, need - got, calls + 1, &calls, &failed);
    if (calls == before) break;
    uint32_t at = i + (uint32_t)(got >> HAK_SPAN_PAGE_SHIFT), had = span.moved_n;
    if (!moved_note(at)) failed = 1;         /* cannot happen under the cap: stop */
    marked += span.moved_n - had;
    got += n;
  }
  _hak_superslab_moved(marked, got, failed);
  *moved = got;
  return failed < 2;
}

/* A used run of len span pages for class c, or SPAN_NONE when the slot is full
 * or the kernel refuses; *zero: its pages read 0 (none was resident, none
 * moved in). */
static uint32_t run_alloc(uint32_t len, unsigned c, bool *zero) {
  uint32_t i = best_fit(len), fresh = SPAN_NONE;   /* where its pages are not resident */
  if (i != SPAN_NONE) {
    struct span_page e = span.page[i];
    struct span_free f = span.free[i];
    if (!e.dirty) fresh = i;
    if (e.unmapped && !pages_remap(i, len)) return SPAN_NONE;
    bucket_remove(i);
    run_clear(i, e.len);
    if (e.len > len) {                       /* the rest, with the moved pages at its end */
      free_run_set(i + len, e.len - len, e.dirty, f.freed_ms);
      span.page[i + len].unmapped = e.unmapped;
      span.free[i + len].moved = f.moved < e.len - len ? f.moved : 0;
    }
    if (!e.dirty) atomic_fetch_add(&_hak_stats_gauges.bytes_reused, (int64_t)len << HAK_SPAN_PAGE_SHIFT);
  } else {                                   /* at the top, with the free run that ends there */
    uint32_t top = atomic_load_explicit(&span.top, memory_order_relaxed), have = 0;
    i = top;
    if (top && span.page[top - 1].state == SPAN_FREE) {
      have = span.page[top - 1].len;
      i = top - have;
    }
    fresh = have && span.page[i].dirty ? top : i;
    if (have && span.page[i].unmapped) {     /* map its pages back first */
      if (!pages_remap(i, have)) return SPAN_NONE;
      span.page[i].unmapped = 0;
    }
    if (!span_map_to(i + len)) return SPAN_NONE;
    if (have) { bucket_remove(i); run_clear(i, have); }
    atomic_store_explicit(&span.top, i + len, memory_order_release);
  }
  run_set(i, len, SPAN_USED, HAK_FRONT(c));
  span.page[i].unmapped = 0;                 /* mapped again above, or never unmapped */
  span.taken += len;
  size_t moved = 1;
  if (fresh != SPAN_NONE && fresh < i + len) {
    _hak_purge_recent_fresh(&span.purged, (size_t)(i + len - fresh) << HAK_SPAN_PAGE_SHIFT,
                            (size_t)len << HAK_SPAN_PAGE_SHIFT);
    if (!run_fill(fresh, i + len - fresh, &moved)) return SPAN_NONE;   /* a hole: the run is never handed out */
  }
  *zero = fresh == i && moved == 0;
  return i;
}

/* Used run i becomes free at now_ms, merged with free neighbours. A free
 * run is mapped or unmapped as a whole: one that merges with an unmapped
 * neighbour gives its own pages (and a mapped neighbour's) back too. */
static void run_free(uint32_t i, uint32_t now_ms) {
  uint32_t len = span.page[i].len, start = i, total = len;
  uint32_t before = 0, after = 0;
  bool before_hole = false, after_hole = false;
  run_clear(i, len);
  if (start && span.page[start - 1].state == SPAN_FREE) {
    before = span.page[start - 1].len;
    start -= before;
    before_hole = span.page[start].unmapped;
    bucket_remove(start);
    run_clear(start, before);
    total += before;
  }
  uint32_t next = i + len;
  if (next < atomic_load_explicit(&span.top, memory_order_relaxed) && span.page[next].state == SPAN_FREE) {
    after = span.page[next].len;
    after_hole = span.page[next].unmapped;
    bucket_remove(next);
    run_clear(next, after);
    total += after;
  }
  if (!before_hole && !after_hole) { free_run_set(start, total, true, now_ms); return; }
  if (before && !before_hole) pages_unmap(start, before);
  pages_unmap(i, len);
  if (after && !after_hole) pages_unmap(next, after);
  free_run_set(start, total, false, now_ms);
  span.page[start].unmapped = 1;
}

/* Debug builds: the invariants written beside struct span_page. */
static void span_check(void) {
  if (!HAK_DEBUG) return;
  uint32_t top = atomic_load_explicit(&span.top, memory_order_relaxed);
  bool last_free = false;
  HAK_ASSERT(top <= span.mapped && span.mapped <= span.table_mapped);
  for (uint32_t i = 0; i < top; ) {
    const struct span_page *e = &span.page[i], *last = &span.page[i + e->len - 1];
    HAK_ASSERT(e->len >= 1 && i + e->len <= top && !e->tail);
    HAK_ASSERT(i % span.unit == 0 && e->len % span.unit == 0);   /* whole OS pages */
    HAK_ASSERT(e->state == SPAN_FREE || e->state == SPAN_USED);
    HAK_ASSERT(e->len == 1 || (last->len == e->len && last->state == e->state && last->tail));
    HAK_ASSERT((e->state == SPAN_USED) == (*front_of(i) != 0));
    HAK_ASSERT(!e->unmapped || (e->state == SPAN_FREE && !e->dirty));
    HAK_ASSERT(e->state != SPAN_FREE || !span.free[i].moved || (e->dirty && span.free[i].moved < e->len));
    HAK_ASSERT(!(last_free && e->state == SPAN_FREE));
    if (e->len > 2) HAK_ASSERT(span.page[i + 1].state == SPAN_UNSET);
    if (e->state == SPAN_FREE) {
      uint32_t j = span.bucket[bucket_of(e->len)];
      while (j != SPAN_NONE && j != i) j = span.free[j].next;
      HAK_ASSERT(j == i);
    }
    last_free = e->state == SPAN_FREE;
    i += e->len;
  }
}

/* The span pages of a block of class c: whole OS pages that hold the block
 * at the last color's offset (a block starts up to that far into its run). */
static uint32_t class_pages(unsigned c) {
  size_t run = hak_page_up(_hak_classes[c].size + (HAK_SPAN_COLORS - 1) * HAK_SPAN_COLOR_STEP);
  return (uint32_t)(run >> HAK_SPAN_PAGE_SHIFT);
}

static uintptr_t block_at(uint32_t i) {
  uint32_t o = i << HAK_SPAN_PAGE_SHIFT;
  return SPAN_BASE + o + hak_span_start_offset(o);
}

/* Up to max blocks of span class c as a list linked through word 0, each with
 * word 1 = the free key and word 2 = HAK_ZERO_MARK or NULL. Returns how many
 * (0: out of memory). */
unsigned _hak_span_take(unsigned c, unsigned max, void **chain) {
  uint32_t runs[SPAN_BATCH_MAX], pages = class_pages(c);
  bool zero[SPAN_BATCH_MAX];
  unsigned got = 0;
  if (max > SPAN_BATCH_MAX) max = SPAN_BATCH_MAX;
  hak_lock(&_hak_lock_set.span);
  if (!span_open()) max = 0;                 /* out of memory, or the slot's top is taken */
  while (got < max && (runs[got] = run_alloc(pages, c, &zero[got])) != SPAN_NONE) got++;
  span_check();
  hak_unlock(&_hak_lock_set.span);
  void *list = NULL;
  for (unsigned k = got; k-- > 0; ) {         /* outside the lock: fresh pages fault in here */
    void **b = (void **)block_at(runs[k]);
    hak_link_set(b, list);
    b[1] = HAK_FREE_KEY;
    b[2] = zero[k] ? HAK_ZERO_MARK : NULL;
    list = b;
  }
  _hak_stats_gauge_add(&_hak_stats_gauges.bytes_in_use, &_hak_stats_gauges.bytes_in_use_peak,
                 (int64_t)got * _hak_classes[c].size);
  *chain = list;
  return got;
}

/* The first n bytes of block p, at most HAK_SPAN_FAULT_IN, faulted in now
 * when p is marked zero (its run's pages were not resident): the program
 * writes a block it mallocs, and one madvise costs less than a trap for
 * each page (clang++'s arenas, docs/experiments.md, "Span blocks of fresh
 * pages faulted in at malloc"). The bound keeps what a block with room to
 * grow (a table, a buffer) makes resident ahead of its writes small. Word
 * 0 to 2's page is in already (_hak_span_take wrote them). */
void _hak_span_fault_in(void *p, size_t n) {
  if (((void **)p)[2] != HAK_ZERO_MARK) return;
  uintptr_t from = hak_page_up((uintptr_t)p + 3 * sizeof(void *));
  uintptr_t to = hak_page_up((uintptr_t)p + (n < HAK_SPAN_FAULT_IN ? n : HAK_SPAN_FAULT_IN));
  if (to > from) (void)_hak_os_populate((void *)from, to - from);
}

/* A chain of blocks of span class c (linked through word 0) back to the heap.
 * Each block's free key is wiped: its pages go to blocks of any class, and a
 * key left inside one of those, copied to word 1 of a live block (realloc
 * copies a block's bytes; a Large range is cut and moved by page), made
 * that block's free abort as a double free (test_hakapi_free_key). */
void _hak_span_return(unsigned c, void *chain) {
  int64_t n = 0;
  uint32_t now = _hak_os_now_ms();
  hak_lock(&_hak_lock_set.span);
  for (void **b = chain, **next; b; b = next, n++) {
    next = hak_link_next(b, c);
    b[1] = NULL;
    b[2] = NULL;
    uint32_t i = (uint32_t)(((uintptr_t)b - SPAN_BASE) >> HAK_SPAN_PAGE_SHIFT);
    HAK_ASSERT((uintptr_t)b == block_at(i) && span.page[i].state == SPAN_USED && *front_of(i) == HAK_FRONT(c));
    run_free(i, now);
  }
  span_check();
  hak_unlock(&_hak_lock_set.span);
  _hak_stats_gauge_add(&_hak_stats_gauges.bytes_in_use, &_hak_stats_gauges.bytes_in_use_peak, -n * _hak_classes[c].size);
}

/* The page of a within the heap's runs (racy; for checks and messages). */
static bool page_of(uintptr_t a, uint32_t *i) {
  uintptr_t off = a - SPAN_BASE;
  if (!atomic_load_explicit(&span.opened, memory_order_acquire) ||
      off >= (uintptr_t)atomic_load_explicit(&span.top, memory_order_acquire) << HAK_SPAN_PAGE_SHIFT)
    return false;
  *i = (uint32_t)(off >> HAK_SPAN_PAGE_SHIFT);
  return true;
}

/* p's class when p is a used block start of the span heap; -1 when p is not
 * in it or not a block start; -2 when p starts a free run (freed before). */
int _hak_span_class(const void *p) {
  uint32_t i;
  if (!page_of((uintptr_t)p, &i) || (uintptr_t)p != block_at(i)) return -1;
  unsigned front = __atomic_load_n(front_of(i), __ATOMIC_RELAXED);
  if (front) return (int)front - 1;
  return __atomic_load_n(&span.page[i].state, __ATOMIC_RELAXED) == SPAN_FREE &&
         !__atomic_load_n(&span.page[i].tail, __ATOMIC_RELAXED) ? -2 : -1;
}

/* For messages: the used block whose run holds a (racy). */
bool _hak_span_containing(uintptr_t a, uintptr_t *start, size_t *bytes) {
  uint32_t i;
  if (!page_of(a, &i)) return false;
  while (i && __atomic_load_n(&span.page[i].state, __ATOMIC_RELAXED) == SPAN_UNSET) i--;
  const struct span_page *e = &span.page[i];
  uint32_t len = __atomic_load_n(&e->len, __ATOMIC_RELAXED);
  if (__atomic_load_n(&e->tail, __ATOMIC_RELAXED)) {
    if (len == 0 || len - 1 > i) return false;
    i -= len - 1;
    e = &span.page[i];
  }
  unsigned front = __atomic_load_n(front_of(i), __ATOMIC_RELAXED);
  if (__atomic_load_n(&e->state, __ATOMIC_RELAXED) != SPAN_USED || front == 0) return false;
  *start = block_at(i);
  *bytes = _hak_classes[(front - 1) % HAK_NCLS].size;
  return a >= *start && a < *start + *bytes;
}

/* The whole OS pages of a table's entries from from, and up to to's page's
 * end (the entries past to are unused: 0) but not past end, the table's
 * end, back to the OS. */
static void purge_entries(const void *from, const void *to, const void *end) {
  uintptr_t a = hak_page_up((uintptr_t)from), b = hak_page_up((uintptr_t)to), most = hak_page_down((uintptr_t)end);
  if (b > most) b = most;
  if (b > a) _hak_os_zero((void *)a, b - a);
}

/* A purged free run at the top goes back to the OS with its address space
 * (an address-space limit counts it), as do the mapped pages above the top —
 * but for up to SPAN_GROW of them (none when forced), which hold no
 * resident page: the heap's next growth would map them again at once, and
 * their table pages, purged, would fault in again (clang++: 41 unmaps and
 * maps of the top a run, 47 table purges; docs/experiments.md, "The span
 * heap keeps its top's address space"). A run given back already (unmapped)
 * leaves a hole: then nothing above the top stays. */
static void span_unmap_top(bool force) {
  uint32_t top = atomic_load_explicit(&span.top, memory_order_relaxed), unmap_from = top;
  if (top && span.page[top - 1].state == SPAN_FREE) {
    uint32_t len = span.page[top - 1].len, start = top - len;
    if (span.page[start].dirty) return;
    if (!span.page[start].unmapped) unmap_from = start;   /* else given back already */
    bucket_remove(start);
    run_clear(start, len);
    atomic_store_explicit(&span.top, start, memory_order_release);
    top = start;
  }
  uint32_t kept = top;                      /* [top, kept) stays mapped */
  if (!force && unmap_from == top)
    kept = span.mapped - top > SPAN_GROW_PAGES ? top + SPAN_GROW_PAGES : span.mapped;
  if (span.mapped > kept) {                 /* their page table and front entries (all 0) */
    uint32_t from = unmap_from > kept ? unmap_from : kept;
    if (span.mapped > from) pages_unmap(from, span.mapped - from);
    purge_entries(&span.page[kept], &span.page[span.mapped], &span.page[HAK_SPAN_PAGES]);
    purge_entries(front_of(kept), front_of(span.mapped), front_of(HAK_SPAN_PAGES));
    span.mapped = kept;
  }
}

/* Records this pass's demand and returns the pages the pass spares (span
 * lock held): what the heap handed out since the last pass, or, if more,
 * the most it handed out in one of the last HAK_SPAN_DEMAND_PASSES passes,
 * up to HAK_SPAN_DEMAND_KEEP bytes. A compiler's
 * demand comes in bursts a few passes apart (a function's arenas): runs
 * purged between two bursts fault in again at the next (docs/experiments.md,
 * "The span heap spares the demand of the last 16 passes"). The bound
 * keeps what a freed peak holds past the delay small. */
static uint64_t pass_keep(void) {
  span.demand[span.demand_at++ % HAK_SPAN_DEMAND_PASSES] = span.taken;
  uint64_t recent = 0, bound = HAK_SPAN_DEMAND_KEEP >> HAK_SPAN_PAGE_SHIFT;
  for (unsigned k = 0; k < HAK_SPAN_DEMAND_PASSES; k++) if (span.demand[k] > recent) recent = span.demand[k];
  if (recent > bound) recent = bound;
  return recent > span.taken ? recent : span.taken;
}

/* Below the process's peak resident set, the pages of a run freed less
 * than HAK_PURGE_YOUNG_DELAYS delays ago add to that peak only if the process
 * climbs past it before the run is taken again: a pass holds such runs as
 * long as they fit in *room, the bytes between the resident set and its
 * high-water mark less HAK_PEAK_HOLD_MARGIN (read at the pass's first such
 * run; -1 until then). Right after a peak is freed its own pages fill
 * that room, not purged yet: the peak goes back after the delay as before,
 * but for what the recent demand spares, which may then stay held; the runs
 * of a later, lower burst wait for the next (clang++: 1.8% fewer faults at
 * the same peak RSS, docs/experiments.md, "Span runs held below the
 * process's peak RSS"). */
static bool held(const struct hak_purge_policy *pp, uint32_t i, int64_t *room) {
  const struct span_page *e = &span.page[i];
  if (!_hak_purge_young(pp, span.free[i].freed_ms)) return false;
  if (*room < 0) {
    size_t r = _hak_os_peak_room();
    *room = r > HAK_PEAK_HOLD_MARGIN ? (int64_t)(r - HAK_PEAK_HOLD_MARGIN) : 0;
  }
  int64_t bytes = (int64_t)e->len << HAK_SPAN_PAGE_SHIFT;
  if (bytes > *room) return false;
  *room -= bytes;
  return true;
}

/* Free runs' pages back to the OS: those free for the delay, or (force)
 * every free run unmapped, address space and all (an address-space limit
 * counts it; run_alloc maps it again)
 * — but as many pages as pass_keep says stay, the shortest runs first (the
 * ones best fit takes first): under that demand they would be taken again
 * soon, and fault in again. (A thousand threads on two cores: a freed run
 * waits long past the delay for a thread to run and take it;
 * docs/experiments.md, "A thousand threads".) When the demand stops, the
 * pass HAK_SPAN_DEMAND_PASSES later purges. Runs that the demand and held()
 * leave to the pass may still stay for the learned delay (_hak_purge_due);
 * those two rules come first, so what they spare takes none of its hold. */
bool _hak_span_opened(void) { return atomic_load_explicit(&span.opened, memory_order_relaxed); }

size_t _hak_span_purge(const struct hak_purge_policy *pp) {
  if (!atomic_load_explicit(&span.opened, memory_order_acquire)) return 0;
  size_t released = 0;
  hak_lock(&_hak_lock_set.span);
  uint64_t keep = pp->force ? 0 : pass_keep();
  int64_t room = -1;
  size_t largest = 0;                       /* the longest run purged */
  bool left_dirty = false;
  span.taken = 0;
  for (unsigned b = 1; b <= SPAN_BUCKETS; b++)          /* bucket 0 (the longest) last */
    for (uint32_t i = span.bucket[b % SPAN_BUCKETS]; i != SPAN_NONE; i = span.free[i].next) {
      struct span_page *e = &span.page[i];
      struct span_free *f = &span.free[i];
      if (pp->force && !e->unmapped) {      /* its address space too (out of memory, malloc_trim) */
        pages_unmap(i, e->len);
        if (e->dirty) released += (size_t)e->len << HAK_SPAN_PAGE_SHIFT;
        e->unmapped = 1;
        e->dirty = 0;
        f->moved = 0;
        continue;
      }
      if (!e->dirty || !_hak_purge_aged(pp, f->freed_ms)) { left_dirty |= e->dirty; continue; }
      if (e->len <= keep) { keep -= e->len; left_dirty = true; continue; }
      if (held(pp, i, &room)) { left_dirty = true; continue; }
      if (!_hak_purge_due(pp, f->freed_ms, (size_t)e->len << HAK_SPAN_PAGE_SHIFT)) { left_dirty = true; continue; }
      _hak_os_purge((void *)(SPAN_BASE + ((uintptr_t)i << HAK_SPAN_PAGE_SHIFT)), (size_t)e->len << HAK_SPAN_PAGE_SHIFT);
      if ((size_t)e->len << HAK_SPAN_PAGE_SHIFT > largest) largest = (size_t)e->len << HAK_SPAN_PAGE_SHIFT;
      released += (size_t)(e->len - f->moved) << HAK_SPAN_PAGE_SHIFT;
      e->dirty = 0;
      f->moved = 0;
    }
  if (!pp->force) _hak_purge_recent_add(&span.purged, released, largest, pp->now_ms);
  span_unmap_top(pp->force);
  atomic_store_explicit(&span.may_give, left_dirty, memory_order_relaxed);
  span_check();
  hak_unlock(&_hak_lock_set.span);
  return released;
}

/* Pages that move between classes (superslab.c): a recipient's walk. */
struct span_give {
  uintptr_t at;                      /* where the pages go                  */
  size_t need, moved;                /* bytes asked for, bytes moved so far */
  unsigned budget, looked, *calls;   /* moves allowed; runs looked at; moves made */
  int *failed;                       /* as _hak_span_give's                 */
};

static bool give_more(const struct span_give *g) {
  return g->moved < g->need && !*g->failed && g->looked < 64 && *g->calls < g->budget;
}

/* The highest non-empty bucket in [1, lim), else 0. */
static unsigned nonempty_below(unsigned lim) {
  while (lim > 1) {
    unsigned w = (lim - 1) / 64;
    uint64_t bits = span.nonempty[w] & (~0ull >> (63 - (lim - 1) % 64));
    if (w == 0) bits &= ~1ull;
    if (bits) return w * 64 + 63 - (unsigned)__builtin_clzll(bits);
    lim = w * 64;
  }
  return 0;
}

/* Moves the pages of bucket b's free dirty runs, from their ends. */
static void give_bucket(struct span_give *g, unsigned b) {
  for (uint32_t i = span.bucket[b]; i != SPAN_NONE && give_more(g); i = span.free[i].next) {
    struct span_page *e = &span.page[i];
    struct span_free *f = &span.free[i];
    g->looked++;
    if (!e->dirty || e->unmapped) continue;
    uint32_t left = e->len - f->moved;
    size_t n = (size_t)left << HAK_SPAN_PAGE_SHIFT;
    if (n > g->need - g->moved) n = g->need - g->moved;
    int r = _hak_os_move_pages((void *)(page_addr(i + left) - n), n, (void *)(g->at + g->moved));
    if (r <= 0) { *g->failed = r < 0 ? 2 : 1; return; }
    g->moved += n;
    ++*g->calls;
    f->moved += (uint32_t)(n >> HAK_SPAN_PAGE_SHIFT);
    if (f->moved == e->len) { e->dirty = 0; f->moved = 0; }
  }
}

/* Up to need bytes of the resident pages of free dirty runs move to at
 * (whole OS pages), the longest runs first and from their
 * ends (best fit hands out a run's start and the shortest runs first).
 * Only tries the span lock, and looks at 64 runs at most. Returns the
 * bytes moved; counts the moves in *calls (up to budget); *failed: 1 when
 * the kernel refused a move, 2 when a refused move left a hole at at. */
size_t _hak_span_give(uintptr_t at, size_t need, unsigned budget, unsigned *calls, int *failed) {
  if (!atomic_load_explicit(&span.may_give, memory_order_relaxed) || !hak_trylock(&_hak_lock_set.span)) return 0;
  struct span_give g = { at, need, 0, budget, 0, calls, failed };
  give_bucket(&g, 0);                                   /* bucket 0 (the longest) first */
  for (unsigned b = SPAN_BUCKETS; give_more(&g) && (b = nonempty_below(b)) != 0; ) give_bucket(&g, b);
  if (give_more(&g))                                    /* nothing more until the next pass */
    atomic_store_explicit(&span.may_give, false, memory_order_relaxed);
  span_check();
  hak_unlock(&_hak_lock_set.span);
  return g.moved;
}

/* Runs were just freed for a recipient to take (large.c): it may look
 * before the next pass. */
void _hak_span_offer(void) {
  atomic_store_explicit(&span.may_give, true, memory_order_relaxed);
}

void _hak_span_stats(struct hak_span_stats *out) {
  memset(out, 0, sizeof *out);
  if (!atomic_load_explicit(&span.opened, memory_order_acquire)) return;
  hak_lock(&_hak_lock_set.span);
  out->run_bytes = (uint64_t)atomic_load_explicit(&span.top, memory_order_relaxed) << HAK_SPAN_PAGE_SHIFT;
  out->mapped_bytes = (uint64_t)span.mapped << HAK_SPAN_PAGE_SHIFT;
  for (unsigned b = 0; b < SPAN_BUCKETS; b++)
    for (uint32_t i = span.bucket[b]; i != SPAN_NONE; i = span.free[i].next) {
      uint64_t bytes = (uint64_t)span.page[i].len << HAK_SPAN_PAGE_SHIFT;
      out->free_runs++;
      out->free_bytes += bytes;
      if (span.page[i].dirty) out->dirty_bytes += bytes;
    }
  hak_unlock(&_hak_lock_set.span);
}
