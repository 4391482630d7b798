/* large.c — Large blocks (> 1 MiB, or alignments no class can give): one
 * mapping per block, whole OS pages at an OS page boundary (a block of up
 * to 4 MiB a whole class, four per doubling: large_class_bytes), its metadata
 * out of band in a hash table keyed by the block address (the ownership
 * map of this tier: O(1), never touching the block). Freed blocks stay
 * resident in a cache of page ranges
 * bounded in bytes by the larger of HAKMEM_LARGE_CACHE_MB and
 * HAKMEM_LARGE_CACHE_LIVE_PCT of the live Large bytes, so a program that
 * keeps more in big buffers may keep more for their replacements; what is
 * not reused goes back after the purge delay, but as many bytes as the tier
 * handed out since the last pass stay (_hak_large_expire). A new block is
 * cut from the best fitting range; when no range is big enough for a block
 * above 4 MiB, cached ranges are moved (mremap, their pages with them) into
 * a fresh mapping of the block's size, so reuse costs no page faults
 * whatever the sizes. A block of up to 4 MiB (a class's in the default
 * build, its own size in the hardened one) that no range fits is a fresh
 * mapping, and the ranges stay for the next blocks of their classes: each
 * move holds the kernel's mmap lock for writing (every page fault of every
 * other thread waits) and flushes the range from every CPU's TLB; without
 * those moves bench_oversubscribed runs 17% faster at 8 threads and 13% at
 * one (docs/experiments.md, "Class-sized Large blocks not made of moved
 * ranges"). A growing realloc extends into the range after the block; with
 * nothing cached, it moves by mremap. Each range knows how far its pages
 * may have been written (dirty): calloc zeroes only that much. Fresh slabs
 * and span runs take cached ranges' resident pages (below), and a fresh
 * mapping takes free span runs' (large_fill). */
#include "hakmem_internal.h"

#include <errno.h>

/* A live block or a cached range: bytes is a multiple of the OS page, never
 * 0, and so is addr (every mapping is OS page aligned, os.c).
 * dirty: the bytes from addr that may be non-zero; beyond it the pages read
 * 0 (fresh). A live block is dirty whole (dirty == bytes): the program may
 * write every byte malloc_usable_size gives it, not only what it asked for.
 * moved: ranges of span runs' pages moved into its fresh mapping
 * (large_fill), each a kernel mapping of its own, counted in
 * HAKMEM_PAGE_MOVES' bound until unmapped; the count goes with the block,
 * to the cache, into merges, and stays with the part of a cut range that
 * stays cached (a part cut off and unmapped first leaves it counted: the
 * bound errs high). several: the bytes from addr that may span several
 * kernel mappings (large_fill moves ranges in from the start; beyond them
 * the block is one fresh mapping). The kernel resizes no such range, does
 * not move one before Linux 6.17, and a move of several that fails halfway
 * leaves holes another thread's mmap may fill: so a block with several
 * never grows by mremap, a range with several is never moved into another
 * block (cache_take_largest), and a range gives only pages past several
 * (_hak_large_give); cuts and merges keep the bound. */
struct large_entry { uintptr_t addr; size_t bytes; size_t dirty; uint32_t freed_ms; uint32_t moved; size_t several; };

/* The hardened build puts a guard page after every Large block: the last
 * OS page of its mapping (counted in bytes, not in the usable size) is
 * inaccessible while the block lives, so a write past the end of the
 * block faults; a freed block's range goes to the cache accessible again.
 * A realloc moves the block (the guard page stays with its range). */
#define HAK_LARGE_GUARD (HAK_HARDENED ? _hak_os_page : 0)

/* Live blocks: open addressing, linear probing, backward-shift deletion.
 * The first table, for the few Large blocks most programs have, comes from
 * the metadata arena (beside the rest of a small process's metadata, not a
 * mapping and a page-table page of its own) and stays there when a bigger
 * one replaces it; bigger ones are mappings. */
#define HAK_LARGE_TABLE_FIRST 64u
static struct large_entry *table;
static size_t table_cap, table_count, live_bytes;

#define HAK_LARGE_CACHE_SLOTS 32
static struct large_entry cache[HAK_LARGE_CACHE_SLOTS];
static unsigned cache_count;
static size_t cache_bytes;
static size_t taken_bytes;          /* bytes of blocks handed out since the last expiry pass */
static struct hak_purge_recent expired;   /* bytes the expiry passes unmapped lately (purge.c) */
static _Atomic bool may_give;       /* a cached range may be dirty: it may give pages (below) */

static size_t slot_of(uintptr_t addr, size_t cap) {
  return (size_t)(((addr >> 12) * 0x9E3779B97F4A7C15ull) >> 20) & (cap - 1);
}

static struct large_entry *table_find(uintptr_t addr) {
  if (!table) return NULL;
  for (size_t i = slot_of(addr, table_cap);; i = (i + 1) & (table_cap - 1)) {
    if (table[i].addr == addr) return &table[i];
    if (!table[i].addr) return NULL;
  }
}

static bool table_grow(void) {
  size_t cap = !table_cap ? HAK_LARGE_TABLE_FIRST : table_cap == HAK_LARGE_TABLE_FIRST ? 1024 : table_cap * 2;
  struct large_entry *t;
  if (!table_cap) t = _hak_os_meta_alloc(cap * sizeof *t);   /* zeroed, not scanned (track.h) */
  else if ((t = _hak_os_map_table(cap * sizeof *t))) hak_track_meta(t, cap * sizeof *t);   /* its addresses keep no leak reachable */
  if (!t) return false;
  for (size_t i = 0; i < table_cap; i++) {
    if (!table[i].addr) continue;
    size_t j = slot_of(table[i].addr, cap);
    while (t[j].addr) j = (j + 1) & (cap - 1);
    t[j] = table[i];
  }
  if (table_cap > HAK_LARGE_TABLE_FIRST) _hak_os_unmap(table, table_cap * sizeof *table);
  table = t;
  table_cap = cap;
  return true;
}

static bool table_insert(uintptr_t addr, size_t bytes, uint32_t moved, size_t several) {
  HAK_ASSERT(bytes >= _hak_os_page && (addr | bytes) % _hak_os_page == 0);   /* 0 would read as "not ours" */
  if ((table_count + 1) * 2 > table_cap && !table_grow()) return false;
  size_t i = slot_of(addr, table_cap);
  while (table[i].addr) i = (i + 1) & (table_cap - 1);
  table[i] = (struct large_entry){ addr, bytes, bytes, 0, moved, several };   /* a live block is dirty whole */
  table_count++;
  live_bytes += bytes;
  return true;
}

static void table_remove(struct large_entry *e) {
  size_t i = (size_t)(e - table);
  live_bytes -= e->bytes;
  for (size_t j = (i + 1) & (table_cap - 1); table[j].addr; j = (j + 1) & (table_cap - 1)) {
    size_t home = slot_of(table[j].addr, table_cap);
    /* Move j back into the hole at i unless its home lies in (i, j]. */
    if (((j - home) & (table_cap - 1)) >= ((j - i) & (table_cap - 1))) {
      table[i] = table[j];
      i = j;
    }
  }
  table[i].addr = 0;
  table_count--;
}

static struct hak_stats *thread_stats(void) {
  return _hak_thread_tls.heap ? &_hak_thread_tls.heap->stats : NULL;
}

/* The cache holds resident page ranges (freed blocks, their tails, split
 * remainders), oldest first. Lock held for all of these. */
static void cache_drop(unsigned i) {
  memmove(&cache[i], &cache[i + 1], (--cache_count - i) * sizeof cache[0]);
}

static size_t min_size(size_t a, size_t b) { return a < b ? a : b; }
static size_t max_size(size_t a, size_t b) { return a > b ? a : b; }

/* The head bytes of entry i leave the cache; the rest stays (with the moved
 * ranges' count). */
static struct large_entry cache_cut(unsigned i, size_t bytes) {
  struct large_entry *r = &cache[i];
  struct large_entry out = { r->addr, bytes, min_size(r->dirty, bytes), r->freed_ms, 0, min_size(r->several, bytes) };
  if (r->bytes > bytes) {
    r->dirty = r->dirty > bytes ? r->dirty - bytes : 0;
    r->several = r->several > bytes ? r->several - bytes : 0;
    r->addr += bytes;
    r->bytes -= bytes;
  } else {
    out.moved = r->moved;
    cache_drop(i);
  }
  cache_bytes -= bytes;
  atomic_fetch_sub(&_hak_stats_gauges.bytes_large_cached, (int64_t)bytes);
  return out;
}

/* The smallest entry with at least bytes at an address aligned to align. */
static int cache_best_fit(size_t bytes, size_t align) {
  int best = -1;
  for (unsigned i = 0; i < cache_count; i++)
    if (cache[i].bytes >= bytes && (cache[i].addr & (align - 1)) == 0 &&
        (best < 0 || cache[i].bytes < cache[best].bytes))
      best = (int)i;
  return best;
}

/* Cached ranges of one kernel mapping, largest first, until they hold bytes
 * (the last one cut to fit) or none is left: they leave the cache; returns
 * how many, in parts. */
static unsigned cache_take_largest(size_t bytes, struct large_entry *parts) {
  unsigned n = 0;
  for (size_t got = 0; got < bytes; got += parts[n++].bytes) {
    int big = -1;
    for (unsigned i = 0; i < cache_count; i++)
      if (!cache[i].several && (big < 0 || cache[i].bytes > cache[big].bytes)) big = (int)i;
    if (big < 0) break;
    parts[n] = cache_cut((unsigned)big, min_size(cache[big].bytes, bytes - got));
  }
  return n;
}

static int cache_find_at(uintptr_t addr, size_t bytes) {
  for (unsigned i = 0; i < cache_count; i++)
    if (cache[i].addr == addr && cache[i].bytes >= bytes) return (int)i;
  return -1;
}

static void unmap_block(struct large_entry e) {
  hak_track_mem_undefined((void *)e.addr, e.bytes);   /* no poison left for the next mapping there */
  _hak_os_unmap((void *)e.addr, e.bytes);
  if (e.moved) _hak_superslab_moved(-(long)e.moved, 0, 0);   /* their mappings went with it */
}

/* The bytes the cache may hold: the floor, or the share of the live Large
 * bytes when that is more (both 0: no cache). */
static size_t cache_bound(void) {
  size_t floor = (size_t)_hak_options_get(HAK_OPT_LARGE_CACHE_MB) << 20;
  size_t share = live_bytes / 100 * (size_t)_hak_options_get(HAK_OPT_LARGE_CACHE_LIVE_PCT);
  return max_size(floor, share);
}

/* Keeps a freed range when it fits the byte bound, evicting the oldest;
 * else unmaps it. Adjacent cached ranges merge with it, so fragments of one
 * block come back together. */
static void cache_put(struct large_entry put) {
  size_t bound = cache_bound();
  for (unsigned i = 0; i < cache_count;) {
    struct large_entry *r = &cache[i];
    if (r->addr + r->bytes == put.addr || put.addr + put.bytes == r->addr) {
      struct large_entry m = cache_cut(i, r->bytes);
      struct large_entry lo = m.addr < put.addr ? m : put, hi = m.addr < put.addr ? put : m;
      put.addr = lo.addr;
      put.bytes = lo.bytes + hi.bytes;
      put.dirty = hi.dirty ? lo.bytes + hi.dirty : lo.dirty;
      put.moved = lo.moved + hi.moved;
      put.several = hi.several ? lo.bytes + hi.several : lo.several;
      i = 0;                                      /* the merged range may touch another */
    } else {
      i++;
    }
  }
  if (put.bytes > bound) { unmap_block(put); return; }
  while (cache_count && (cache_count == HAK_LARGE_CACHE_SLOTS || cache_bytes + put.bytes > bound))
    unmap_block(cache_cut(0, cache[0].bytes));
  put.freed_ms = _hak_os_now_ms();
  cache[cache_count++] = put;
  if (put.dirty) atomic_store_explicit(&may_give, true, memory_order_relaxed);
  cache_bytes += put.bytes;
  atomic_fetch_add(&_hak_stats_gauges.bytes_large_cached, (int64_t)put.bytes);
}

/* Moves the parts, in order, to the start of the fresh mapping e (their
 * pages go with them; a part that cannot move is unmapped, its place stays
 * fresh); e->dirty: how far it may be dirty now. */
static void move_parts(struct large_entry *e, const struct large_entry *parts, unsigned n) {
  size_t off = 0;
  for (unsigned k = 0; k < n; off += parts[k++].bytes) {
    hak_track_mem_undefined((void *)parts[k].addr, parts[k].bytes);   /* unmapped by the move: */
    if (_hak_os_move((void *)parts[k].addr, parts[k].bytes, (void *)(e->addr + off))) {   /* no poison left */
      if (parts[k].dirty) e->dirty = off + parts[k].dirty;
    } else {
      unmap_block(parts[k]);
    }
  }
}

/* A fresh Large block whose pages all fault in while other classes' free
 * pages wait for the purge costs a program faults and peak RSS that a
 * segment allocator does not pay (python3's json.dumps: the 9.7 MB string
 * it joins faulted in while 3-4 MB of freed list arrays sat in the span
 * heap and the thread's span lists). So a fresh mapping above 4 MiB made
 * while the cache holds no range takes, from its start, the resident pages
 * of free span runs (page moves: mremap, no fault; the pages it got are
 * dirty, so calloc zeroes them), after the thread's span lists went back
 * to the span heap, where they can give. Not below: blocks of 1-4 MiB
 * (sqlite3's, lua's) took runs the span heap would have reused, and it
 * faulted fresh ones (sqlite3 faults +4%). Not while ranges are cached: a
 * program that churns Large blocks then moved the span heap's pages into
 * the Large cache (bench_oversubscribed peak RSS +6%). Not from free class
 * slabs: with them, plain_oom_mix (4 threads out of address space) found
 * live Tiny blocks "already free" in 1 run of 2 (docs/experiments.md): the
 * slabs' free keys, which a realloc of the Large block copied into a small
 * one; moved slab pages lose them now (_hak_slab_wipe_keys). *failed as
 * _hak_span_give's. */
static void large_fill(struct large_entry *e, int *failed) {
  unsigned budget = _hak_superslab_move_budget(), calls = 0;
  if (!budget) return;
  if (_hak_thread_tls.heap && _hak_front_spans_flush(_hak_thread_tls.heap)) _hak_span_offer();
  size_t got = _hak_span_give(e->addr, e->bytes - HAK_LARGE_GUARD, budget, &calls, failed);
  _hak_superslab_moved((long)calls, got, *failed);
  e->dirty = got;
  e->moved = calls;
  e->several = calls ? got : 0;
}

static void *fresh_mapping(size_t bytes, size_t align) {
  void *p = _hak_os_map_aligned(bytes, align);
  if (!p && _hak_large_trim()) p = _hak_os_map_aligned(bytes, align);   /* out of memory: drop the cache, retry */
  return p;
}

/* A fresh mapping for a block of bytes, made of the parts' pages where
 * there are parts, else, if fill, of free pages of the other tiers; e.addr
 * 0: out of memory (the parts are unmapped). */
static struct large_entry large_map(size_t bytes, size_t align, const struct large_entry *parts, unsigned n, bool fill) {
  struct large_entry e = { .addr = (uintptr_t)fresh_mapping(bytes, align), .bytes = bytes };
  if (!e.addr) {
    for (unsigned k = 0; k < n; k++) unmap_block(parts[k]);
    return e;
  }
  if (n) { move_parts(&e, parts, n); return e; }
  if (!fill) return e;
  int failed = 0;
  large_fill(&e, &failed);
  /* A refused move (out of address space: the kernel may unmap the target
   * before it refuses) can leave a hole in the block, which another
   * thread's mmap may take before os.c maps it again: unmapping the block
   * would unmap that thread's memory, and using it would hand it out
   * twice. So the block stays mapped and unused, and another is made,
   * unfilled. A refusal turns moves off (superslab.c): at most one. */
  if (failed) e = (struct large_entry){ .addr = (uintptr_t)fresh_mapping(bytes, align), .bytes = bytes };
  return e;
}

/* malloc gives a block of up to HAK_LARGE_CLASS_MAX a whole class, four
 * per doubling (1.25, 1.5, 1.75, 2, 2.5, 3, 3.5, 4 MiB: at most 25% over
 * the request, as below 1 MiB), so that a freed block serves the next
 * request of its class whole: no cut, no block made of moved ranges, no
 * system call (docs/experiments.md, "Large blocks of up to 4 MiB in
 * classes"). Larger blocks take whole pages, and so does a block that
 * realloc resizes in place or moves by mremap: one grown by steps would
 * otherwise leave each class's unwritten tail to be faulted in by the next
 * user of its range. The hardened build keeps whole pages: its guard page
 * follows the request's last page. */
#define HAK_LARGE_CLASS_MAX (4u << 20)
static size_t large_class_bytes(size_t bytes) {
  if (HAK_HARDENED || bytes <= HAK_MID_MAX || bytes > HAK_LARGE_CLASS_MAX) return bytes;
  unsigned k = 63u - (unsigned)__builtin_clzll((unsigned long long)(bytes - 1));   /* 2^k < bytes <= 2^(k+1) */
  size_t step = (size_t)1 << (k - 2);
  return (bytes + step - 1) & ~(step - 1);
}

/* A block has at least one OS page, also for n == 0 (a zero-size aligned
 * request): a block of 0 bytes would read as "not ours" (_hak_large_usable)
 * and its range would stay in the cache, to be handed out again. */
void *_hak_large_alloc(size_t n, size_t align, bool zero) {
  size_t page = _hak_os_page;
  if (align < page) align = page;
  size_t bytes = n ? large_class_bytes(hak_page_up(n)) : page;
  if (bytes < n || bytes + HAK_LARGE_GUARD > PTRDIFF_MAX) { errno = ENOMEM; return NULL; }
  bytes += HAK_LARGE_GUARD;
  struct large_entry e = { 0 }, parts[HAK_LARGE_CACHE_SLOTS];
  unsigned nparts = 0;
  hak_lock(&_hak_lock_set.large);
  bool fill = cache_count == 0 && bytes > HAK_LARGE_CLASS_MAX + HAK_LARGE_GUARD;   /* large_fill */
  int i = cache_best_fit(bytes, align);
  bool cached = i >= 0;
  if (cached) e = cache_cut((unsigned)i, bytes);
  else if (align == page && bytes > HAK_LARGE_CLASS_MAX + HAK_LARGE_GUARD)
    nparts = cache_take_largest(bytes, parts);     /* above 4 MiB: gather moved ranges */
  hak_unlock(&_hak_lock_set.large);
  size_t reused = cached ? bytes : 0;
  for (unsigned k = 0; k < nparts; k++) reused += parts[k].bytes;
  if (!cached) e = large_map(bytes, align, parts, nparts, fill);
  if (!e.addr) { errno = ENOMEM; return NULL; }
  atomic_fetch_add_explicit(&_hak_stats_gauges.bytes_reused, (int64_t)reused, memory_order_relaxed);
  if (zero) memset((void *)e.addr, 0, min_size(n, e.dirty));   /* past dirty the pages read 0 */
  if (HAK_LARGE_GUARD) (void)_hak_guard_pages((void *)(e.addr + e.bytes - HAK_LARGE_GUARD), HAK_LARGE_GUARD, true);
  hak_lock(&_hak_lock_set.large);
  bool ok = table_insert(e.addr, e.bytes, e.moved, e.several);
  taken_bytes += ok ? e.bytes : 0;
  /* Fresh pages: a range purged lately that was large enough would have
   * served the block (beyond HAK_LARGE_CLASS_MAX any ranges would: moves). */
  if (ok && !cached)
    _hak_purge_recent_fresh(&expired, e.bytes - reused, e.bytes > HAK_LARGE_CLASS_MAX + HAK_LARGE_GUARD ? 0 : e.bytes);
  hak_unlock(&_hak_lock_set.large);
  if (!ok) { unmap_block(e); errno = ENOMEM; return NULL; }
  _hak_stats_gauge_add(&_hak_stats_gauges.bytes_in_use, &_hak_stats_gauges.bytes_in_use_peak, (int64_t)e.bytes);
  _hak_stats_gauge_add(&_hak_stats_gauges.bytes_large, &_hak_stats_gauges.bytes_large_peak, (int64_t)e.bytes);
  struct hak_stats *st = thread_stats();
  if (st) { st->large_allocs++; st->large_cache_hits += reused != 0; }
  return (void *)e.addr;
}

/* Frees p if it is a live Large block; a block already in the cache is a
 * double free. Returns false when p is not a Large block at all. */
bool _hak_large_free(void *p, const char *call) {
  uintptr_t a = (uintptr_t)p;
  hak_lock(&_hak_lock_set.large);
  struct large_entry *e = table_find(a);
  if (!e) {
    int i = cache_find_at(a, 0);                  /* freed, and still cached */
    size_t bytes = i >= 0 ? cache[i].bytes : 0;
    hak_unlock(&_hak_lock_set.large);
    if (i >= 0) _hak_guard_double_free(p, call, bytes);
    return false;
  }
  struct large_entry freed = *e;
  size_t bytes = e->bytes;
  table_remove(e);
  if (HAK_LARGE_GUARD) (void)_hak_guard_pages((void *)(a + bytes - HAK_LARGE_GUARD), HAK_LARGE_GUARD, false);
  cache_put(freed);
  hak_unlock(&_hak_lock_set.large);
  _hak_stats_gauge_add(&_hak_stats_gauges.bytes_in_use, &_hak_stats_gauges.bytes_in_use_peak, -(int64_t)bytes);
  _hak_stats_gauge_add(&_hak_stats_gauges.bytes_large, &_hak_stats_gauges.bytes_large_peak, -(int64_t)bytes);
  struct hak_stats *st = thread_stats();
  if (st) st->large_frees++;
  return true;
}

size_t _hak_large_usable(const void *p) {
  hak_lock(&_hak_lock_set.large);
  struct large_entry *e = table_find((uintptr_t)p);
  size_t bytes = e ? e->bytes - HAK_LARGE_GUARD : 0;
  hak_unlock(&_hak_lock_set.large);
  return bytes;
}

/* The live block e takes bytes (a shrink or an extension in place). */
static void resize_in_place(struct large_entry *e, size_t bytes) {
  live_bytes += bytes - e->bytes;                 /* modulo 2^N: a shrink subtracts */
  e->bytes = bytes;
  e->dirty = bytes;
}

/* p is a live Large block; n > HAK_MID_MAX. A shrink leaves the tail in the
 * cache. A growth extends in place into a cached range right after the
 * block; else, when no cached range could take the whole block (a copy into
 * resident pages is cheaper than faulting in a fresh tail), mremap moves it.
 * NULL: the caller moves the block itself (allocate, copy, free). */
void *_hak_large_realloc(void *p, size_t n) {
  if (HAK_LARGE_GUARD) return NULL;               /* the guard page stays where it is: move */
  size_t page = _hak_os_page, bytes = hak_page_up(n);
  if (bytes < n || bytes > PTRDIFF_MAX) return NULL;
  hak_lock(&_hak_lock_set.large);
  struct large_entry *e = table_find((uintptr_t)p);
  size_t old = e->bytes, dirty = e->dirty;
  void *q = p;
  int i;
  if (bytes < old) {
    resize_in_place(e, bytes);
    size_t several = e->several > bytes ? e->several - bytes : 0;
    e->several = min_size(e->several, bytes);
    cache_put((struct large_entry){ (uintptr_t)p + bytes, old - bytes, dirty > bytes ? dirty - bytes : 0, 0, 0, several });
  } else if (bytes > old && (i = cache_find_at((uintptr_t)p + old, bytes - old)) >= 0) {
    struct large_entry ext = cache_cut((unsigned)i, bytes - old);
    e->moved += ext.moved;
    if (ext.several) e->several = old + ext.several;
    resize_in_place(e, bytes);
  } else if (bytes > old) {                  /* one kernel mapping: mremap may move it */
    q = !e->several && cache_best_fit(bytes, page) < 0 ? _hak_os_remap(p, old, bytes) : NULL;
    if (q) {
      uint32_t moved = e->moved;
      table_remove(e);
      table_insert((uintptr_t)q, bytes, moved, 0);   /* cannot fail: a slot was just freed */
    }
  }
  hak_unlock(&_hak_lock_set.large);
  if (!q) return NULL;
  int64_t delta = (int64_t)bytes - (int64_t)old;
  _hak_stats_gauge_add(&_hak_stats_gauges.bytes_in_use, &_hak_stats_gauges.bytes_in_use_peak, delta);
  _hak_stats_gauge_add(&_hak_stats_gauges.bytes_large, &_hak_stats_gauges.bytes_large_peak, delta);
  struct hak_stats *st = thread_stats();
  if (st && q != p) st->large_remaps++;
  return q;
}

/* The live Large block that contains a (for diagnostics: a scan). */
bool _hak_large_containing(uintptr_t a, uintptr_t *start, size_t *bytes) {
  bool found = false;
  hak_lock(&_hak_lock_set.large);
  for (size_t i = 0; i < table_cap && !found; i++) {
    if (table[i].addr && a - table[i].addr < table[i].bytes) {
      *start = table[i].addr;
      *bytes = table[i].bytes;
      found = true;
    }
  }
  hak_unlock(&_hak_lock_set.large);
  return found;
}

/* Whether range r, past the delay and not spared by the demand, stays as a
 * range freed lately (_hak_purge_young: younger than HAK_PURGE_YOUNG_DELAYS
 * base delays) within the *young bytes the pass may still keep, which it
 * takes. A program that sorts with a Large buffer now and then (sqlite3's
 * sorter grows one to 2 MiB, frees it, and grows another 0.4 s later)
 * would fault its pages in again at every sort; kept, they cost no peak
 * where other classes grow meanwhile, as those take the range's pages
 * (page moves). */
static bool young_held(const struct hak_purge_policy *pp, struct large_entry r, size_t *young) {
  if (!_hak_purge_young(pp, r.freed_ms) || r.bytes > *young) return false;
  *young -= r.bytes;
  return true;
}

/* Unmaps the cached ranges that stayed unused for the delay — but as many
 * bytes as the tier handed out since the last pass stay, the most recently
 * freed first: under that demand they are taken again within a pass, and
 * would otherwise come back as fresh mappings (mmap, mremap, page faults,
 * each taking the kernel's mmap lock). On an oversubscribed machine a
 * thread waits longer than the delay for its turn to run, so the delay
 * alone expired the cache of threads still churning (docs/experiments.md,
 * "Oversubscribed: Large ranges kept under demand"). When the demand stops,
 * the next pass expires them. Ranges freed lately stay too, up to
 * HAK_LARGE_YOUNG_KEEP bytes (young_held; docs/experiments.md, "Large
 * ranges freed lately kept for a second"). A range neither spares may
 * still stay for the learned delay (_hak_purge_due), which the ranges they
 * spare take none of. */
size_t _hak_large_expire(const struct hak_purge_policy *pp) {
  size_t released = 0;
  hak_lock(&_hak_lock_set.large);
  size_t keep = taken_bytes, largest = 0, young = HAK_LARGE_YOUNG_KEEP;
  taken_bytes = 0;
  for (unsigned i = cache_count; i-- > 0; ) {      /* newest first; a cut moves only those after i */
    if (!_hak_purge_aged(pp, cache[i].freed_ms)) continue;
    if (cache[i].bytes <= keep) { keep -= cache[i].bytes; continue; }
    if (young_held(pp, cache[i], &young)) continue;
    if (!_hak_purge_due(pp, cache[i].freed_ms, cache[i].bytes)) continue;
    struct large_entry r = cache_cut(i, cache[i].bytes);
    unmap_block(r);
    released += r.bytes;
    largest = max_size(largest, r.bytes);
  }
  _hak_purge_recent_add(&expired, released, largest, pp->now_ms);
  bool dirty = false;
  for (unsigned i = 0; i < cache_count; i++) dirty |= cache[i].dirty != 0;
  atomic_store_explicit(&may_give, dirty, memory_order_relaxed);
  hak_unlock(&_hak_lock_set.large);
  return released;
}

/* ---- pages that move to other classes (superslab.c) ----------------------
 * A cached range is a Large block's pages kept for the next Large block,
 * but a program that frees a big buffer and then grows its small blocks (a
 * parser done with its input text) faulted fresh pages in for those while
 * the buffer's pages waited for the purge. So fresh slabs and span runs
 * take the cached ranges' resident pages as they take free slabs' (mremap:
 * no fault, no zeroing), oldest range first and from the end of its dirty
 * part, which shrinks: the range stays cached, and calloc zeroes only what
 * is still dirty. A range gives from the moment it is cached, not only after
 * a pass as free slabs and span runs do (python3: 400 faults fewer; a Large
 * block that finds the range clean again faults what the recipient did not).
 * may_give: set when a dirty range is cached or a pass leaves one, cleared
 * by a recipient that finds none. */

/* Moves up to need bytes of the cached ranges' resident pages to at, whole OS
 * pages; only tries the lock. Returns the bytes moved; counts the moves in
 * *calls (up to budget); *failed as _hak_span_give's. */
size_t _hak_large_give(uintptr_t at, size_t need, unsigned budget, unsigned *calls, int *failed) {
  if (!atomic_load_explicit(&may_give, memory_order_relaxed) || !hak_trylock(&_hak_lock_set.large)) return 0;
  size_t moved = 0;
  for (unsigned i = 0; i < cache_count && moved < need && *calls < budget; i++) {
    struct large_entry *r = &cache[i];
    uintptr_t end = hak_page_up(r->addr + r->dirty), from = r->addr + r->several;   /* one mapping past several */
    size_t n = end > from ? min_size(end - from, need - moved) : 0;
    if (!n) continue;
    int k = _hak_os_move_pages((void *)(end - n), n, (void *)(at + moved));
    if (k <= 0) { *failed = k < 0 ? 2 : 1; break; }
    moved += n;
    ++*calls;
    r->dirty = end - n - r->addr;
  }
  if (moved < need && !*failed && *calls < budget)   /* nothing more until a dirty range comes */
    atomic_store_explicit(&may_give, false, memory_order_relaxed);
  hak_unlock(&_hak_lock_set.large);
  return moved;
}

/* Unmaps every cached range; returns the bytes released. */
size_t _hak_large_trim(void) {
  hak_lock(&_hak_lock_set.large);
  size_t released = cache_bytes;
  while (cache_count) unmap_block(cache_cut(0, cache[0].bytes));
  hak_unlock(&_hak_lock_set.large);
  return released;
}
