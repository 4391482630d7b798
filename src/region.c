/* region.c — the ownership map and the class regions.
 *
 * Every class gets a home region, 64 MiB of the home slot beside the other
 * classes' (hakmem_internal.h, the ownership map), and when that is full
 * (or its address taken) further regions of a 4 GiB-aligned slot each. It
 * fills each from the bottom, one SuperSlab at a time, with fixed-address
 * mappings that never replace anything. The ownership map (_hak_region_map)
 * has one entry per slot and per home region; free validates a pointer with it in O(1) without touching
 * unmapped memory. SuperSlab headers live out of line in the region's
 * directory; this file maps and unmaps SuperSlabs at a region's top, and
 * superslab.c runs their lifecycle. All functions that change a class's
 * regions run under that class's pool lock; choosing a slot also takes
 * the slot lock. */
#include "hakmem_internal.h"

#include <errno.h>

HAK_ZERO_TABLE struct hak_map _hak_region_map;

/* The home slot is HAK_HOME_BASE: 1 TiB up on x86-64, far from where Linux
 * puts programs, libraries, heaps and stacks. Other regions (a home region
 * taken by someone else, or full) take slots from HAK_FIRST_OTHER up: 16 TiB,
 * or HAK_FIRST_SLOT (1.3 TiB on x86-64, 324 GiB where the home slot is at
 * 4 GiB) when 16 TiB is beyond a small address space (39-bit aarch64) or
 * ThreadSanitizer's ranges. */
#if HAK_HOME_BASE < 4096u && !defined(__SANITIZE_THREAD__)
#define HAK_FIRST_OTHER     4096u
#else
#define HAK_FIRST_OTHER     HAK_FIRST_SLOT
#endif
#define HAK_SLOT_TRIES      256u
static unsigned next_slot = HAK_FIRST_OTHER;
/* Some class has a region (regions are never closed). Read by every purge
 * tick, so it lies among the region layer's small state, which a process
 * writes anyway: the pools' region lists, read in its place, were pages of
 * zeros that each process faulted in. */
static bool any_region;

/* Bytes of r mapped so far, from its base. */
static uint64_t region_mapped(const struct hak_region *r) {
  return (uint64_t)__atomic_load_n(&r->ss_mapped, __ATOMIC_RELAXED) * _hak_classes[r->cls].ss_bytes;
}

/* Is r a home region? They alone lie in slot HAK_HOME_BASE. */
static bool region_home(const struct hak_region *r) { return r->base >> HAK_REGION_SHIFT == HAK_HOME_BASE; }

/* The map entry of r's limit: its home index's or its slot's. */
static uint64_t *map_limit(const struct hak_region *r) {
  return region_home(r) ? hak_home_limit(r->base >> HAK_HOME_SHIFT)
                        : &_hak_region_map.slots->limit[r->base >> HAK_REGION_SHIFT];
}

/* Publishes the number of block starts below the end of r's mapped part. */
static void map_publish_end(struct hak_region *r, const struct hak_class *k) {
  uint64_t blocks = (region_mapped(r) + k->size - 1) / k->size;
  __atomic_store_n(map_limit(r), blocks * k->magic_unit, __ATOMIC_RELEASE);
}

/* The region whose slot or home region holds a, or NULL (mapped or not). */
static struct hak_region *region_at(uintptr_t a) {
  uintptr_t t = a >> HAK_HOME_SHIFT;
  if (t - HAK_HOME_FIRST < HAK_HOME_SLOTS) return _hak_region_map.home[t - HAK_HOME_FIRST];
  const struct hak_slot_map *m = hak_map_slots(a >> HAK_REGION_SHIFT);
  return m ? m->region[a >> HAK_REGION_SHIFT] : NULL;
}

const struct hak_region *_hak_region_holding(uintptr_t a) {
  const struct hak_region *r = region_at(a);
  return r && a >= r->base && a < r->base + region_mapped(r) ? r : NULL;
}

static inline struct hak_superslab **dir_slot(const struct hak_region *r, uint32_t index) {
  return &atomic_load_explicit(&r->dir, memory_order_acquire)[index];
}

#define HAK_DIR_FIRST 8u                 /* directory entries of a new region */

/* Makes room for entry index in r's directory. Pool lock held. */
static bool dir_reserve(struct hak_region *r, uint32_t index) {
  if (index < r->dir_cap) return true;
  uint32_t cap = r->dir_cap ? r->dir_cap : HAK_DIR_FIRST;
  while (cap <= index) cap *= 2;
  if (cap > r->ss_cap) cap = r->ss_cap;
  struct hak_superslab **dir = _hak_os_meta_alloc(cap * sizeof *dir);
  if (!dir) return false;
  struct hak_superslab **old = atomic_load_explicit(&r->dir, memory_order_relaxed);
  for (uint32_t i = 0; i < r->dir_cap; i++) dir[i] = old[i];
  atomic_store_explicit(&r->dir, dir, memory_order_release);
  r->dir_cap = cap;
  return true;
}

static struct hak_superslab *ss_header(struct hak_region *r, uint32_t index, bool *kept) {
  const struct hak_class *k = &_hak_classes[r->cls];
  if (!dir_reserve(r, index)) return NULL;
  struct hak_superslab *ss = *dir_slot(r, index);
  *kept = ss != NULL;
  if (ss) return ss;                           /* mapped before, header kept */
  ss = _hak_os_meta_alloc(sizeof *ss + k->ss_slabs * sizeof(struct hak_slab));
  struct hak_slab_cold *cold = _hak_os_meta_alloc_cold(k->ss_slabs * sizeof *cold);
  if (!ss || !cold) return NULL;               /* out of memory: the arena keeps what it gave */
  ss->base = r->base + (uint64_t)index * k->ss_bytes;
  ss->region = r;
  ss->index = index;
  ss->cls = r->cls;
  ss->nslabs = (uint16_t)k->ss_slabs;
  ss->cold = cold;
  for (unsigned i = 0; i < k->ss_slabs; i++) {
    struct hak_slab *s = &ss->slabs[i];
    s->cls = (uint8_t)r->cls;
    s->index = (uint8_t)i;
    s->start = ss->base + (uint64_t)i * k->slab_bytes;
    s->capacity = (uint16_t)k->slab_blocks;
    if (HAK_HARDENED && i == k->ss_slabs - 1)    /* its last OS page is the guard (region_grow) */
      s->capacity = (uint16_t)((k->slab_bytes - _hak_os_page) / k->size);   /* slabs are 2 pages or more */
  }
  *dir_slot(r, index) = ss;
  return ss;
}

/* Maps the region's next SuperSlab; NULL when the region is full, the next
 * address is taken, or the kernel refuses (out of memory, RLIMIT_AS). */
static struct hak_superslab *region_grow(struct hak_region *r) {
  const struct hak_class *k = &_hak_classes[r->cls];
  if (r->full || r->ss_mapped >= r->ss_cap) { r->full = true; return NULL; }
  uintptr_t at = r->base + region_mapped(r);
  void *mapped = _hak_os_map_at(at, k->ss_bytes);
  if (!mapped && errno == ENOMEM && _hak_large_trim())     /* out of memory: drop the Large cache, retry */
    mapped = _hak_os_map_at(at, k->ss_bytes);
  if (!mapped) {
    if (errno == EEXIST) r->full = true;
    return NULL;
  }
  bool kept;
  struct hak_superslab *ss = ss_header(r, r->ss_mapped, &kept);
  if (!ss) { _hak_os_unmap((void *)at, k->ss_bytes); return NULL; }
  hak_track_mem_noaccess((void *)at, k->ss_bytes);   /* no block handed out yet (track.h) */
  /* Hardened build: the SuperSlab's last OS page is a guard page (no block
   * reaches into it: its last slab holds fewer blocks), so a run past the
   * end of a SuperSlab's blocks faults. A kernel that refuses (the map
   * count limit) leaves the page unused only. */
  if (HAK_HARDENED) (void)_hak_guard_pages((void *)(at + k->ss_bytes - _hak_os_page), _hak_os_page, true);
  r->ss_mapped++;
  _hak_superslab_mapped(ss, kept);
  map_publish_end(r, k);
  return ss;
}

/* Publishes r, just opened with its first SuperSlab, in the map. Slot lock held. */
static void region_publish(struct hak_region *r, const struct hak_class *k) {
  if (region_home(r)) {
    uintptr_t t = r->base >> HAK_HOME_SHIFT;
    _hak_region_map.home[t - HAK_HOME_FIRST] = r;
    __atomic_store_n(hak_home_magic(t), k->magic, __ATOMIC_RELEASE);
  } else {
    uintptr_t slot = r->base >> HAK_REGION_SHIFT;
    struct hak_slot_map *m = _hak_region_map.slots;
    m->region[slot] = r;
    m->front[slot] = (uint8_t)HAK_FRONT(r->cls);
    __atomic_store_n(&m->magic[slot], k->magic, __ATOMIC_RELEASE);
    if (slot >= _hak_region_map.slot_end) __atomic_store_n(&_hak_region_map.slot_end, slot + 1, __ATOMIC_RELEASE);
  }
  map_publish_end(r, k);
}

/* The slot tables exist (mapped by the first region outside the home
 * slot, never unmapped); false when the kernel refuses. Slot lock held. */
static bool slots_map(void) {
  if (_hak_region_map.slots) return true;
  _hak_region_map.slots = _hak_os_map_table(sizeof *_hak_region_map.slots);
  return _hak_region_map.slots != NULL;
}

/* Opens a region for class cls, its home region first, else a free 4 GiB
 * slot, and maps its first SuperSlab. */
static struct hak_region *region_open(unsigned cls) {
  const struct hak_class *k = &_hak_classes[cls];
  struct hak_region *r = _hak_os_meta_alloc(sizeof *r);
  if (!r) return NULL;                         /* arena memory is not returned */
  hak_lock(&_hak_lock_set.slot);
  for (unsigned tries = 0; tries < HAK_SLOT_TRIES; tries++) {
    bool home = tries == 0;
    unsigned slot = home ? HAK_FRONT(cls) : next_slot++;
    if (!home && slot >= HAK_REGION_SLOTS) break;
    if (!home && slot >= HAK_HOME_BASE && slot <= HAK_SPAN_SLOT) continue;   /* the home and span slots */
    if (!home && !slots_map()) break;
    if (home ? _hak_region_map.home[slot] != NULL : _hak_region_map.slots->region[slot] != NULL) continue;
    uintptr_t base = home ? (HAK_HOME_FIRST + slot) << HAK_HOME_SHIFT : (uintptr_t)slot << HAK_REGION_SHIFT;
    uint64_t bytes = home ? HAK_HOME_BYTES : HAK_REGION_BYTES;
    struct hak_superslab **dir = r->dir;       /* kept from a failed try */
    uint32_t dir_cap = r->dir_cap;
    *r = (struct hak_region){ .base = base, .cls = (uint16_t)cls,
                              .ss_cap = (uint32_t)(bytes / k->ss_bytes), .dir = dir, .dir_cap = dir_cap };
    if (region_grow(r)) {
      HAK_ASSERT(home || slot >= HAK_FIRST_SLOT);
      region_publish(r, k);
      hak_unlock(&_hak_lock_set.slot);
      return r;
    }
    if (home) continue;                        /* the home region is taken */
    if (errno == ENOMEM && tries == 1 && HAK_FIRST_OTHER > HAK_FIRST_SLOT) {
      /* Either out of memory or above the top of a small address space:
       * try once low before giving up. */
      next_slot = HAK_FIRST_SLOT;
      continue;
    }
    if (errno != EEXIST) break;                /* out of memory: give up now */
  }
  hak_unlock(&_hak_lock_set.slot);
  return NULL;
}

/* Maps a new SuperSlab of class cls: the next one of a region with room
 * (the home region first: its blocks' frees are the inline free's), else
 * the first of a new region, which goes after the others. NULL when out of
 * memory or address space. Pool lock held. */
struct hak_superslab *_hak_region_grow_class(unsigned cls) {
  struct hak_pool *pool = &_hak_slab_pools[cls];
  struct hak_region **end = &pool->regions;
  for (struct hak_region *r = pool->regions; r; end = &r->next, r = r->next)
    if (!r->full) {
      struct hak_superslab *ss = region_grow(r);
      if (ss) return ss;
    }
  struct hak_region *r = region_open(cls);
  if (!r) return NULL;
  __atomic_store_n(end, r, __ATOMIC_RELAXED);   /* the purge reads pool->regions unlocked */
  if (!__atomic_load_n(&any_region, __ATOMIC_RELAXED)) __atomic_store_n(&any_region, true, __ATOMIC_RELAXED);
  return *dir_slot(r, 0);
}

bool _hak_region_any(void) { return __atomic_load_n(&any_region, __ATOMIC_RELAXED); }

/* The slab holding block address a of class cls (a already validated). */
struct hak_slab *_hak_region_slab_of(uintptr_t a, unsigned cls) {
  const struct hak_class *k = &_hak_classes[cls];
  struct hak_region *r = region_at(a);
  uint64_t off = a - r->base;
  uint64_t ss_index = off / k->ss_bytes;
  struct hak_superslab *ss = *dir_slot(r, (uint32_t)ss_index);
  return &ss->slabs[(off - ss_index * k->ss_bytes) / k->slab_bytes];
}

/* The topmost mapped SuperSlab of r, or NULL. Pool lock held. */
struct hak_superslab *_hak_region_top(const struct hak_region *r) {
  return r->ss_mapped ? *dir_slot(r, r->ss_mapped - 1) : NULL;
}

/* Unmaps r's topmost SuperSlab, lowering the region's end first: free must
 * be able to read any address below the end. Its header stays in the
 * directory for the next time that SuperSlab is mapped. Pool lock held. */
void _hak_region_unmap_top(struct hak_region *r) {
  const struct hak_class *k = &_hak_classes[r->cls];
  struct hak_superslab *ss = *dir_slot(r, --r->ss_mapped);
  map_publish_end(r, k);
  _hak_os_unmap((void *)ss->base, k->ss_bytes);
  r->full = false;
}

/* ---- first chunks ----------------------------------------------------------
 * A program that uses a class for a few blocks only (every short program a
 * shell starts: a `sort` uses 19 classes, most for one page) paid for each
 * class a mapping of its own, a page-table page and the kernel's work for
 * both at fork and exit; a window of page table costs about as much as a
 * page fault here (docs/experiments.md, "First chunks"). So each slab
 * class's first blocks come from its first chunk: HAK_CHUNK_BYTES or
 * HAK_CHUNK_BLOCKS blocks (whichever is more) of whole OS pages, side by
 * side with the other classes' in the first-chunk area, the HAK_CHUNK_AREA
 * bytes at home index HAK_HOME_FIRST, which no class has. The area is one
 * mapping, made at the first refill, in one page-table page.
 * Its blocks never join a slab: a chain spilled from a list gives them to
 * their class's stash (_hak_slab_return), and a refill takes the stash
 * first, then carves the chunk; only when both are empty does the class's
 * home region serve. The chunks serve one heap, the first to refill from
 * them (the main thread's, as a rule): blocks of several threads side by
 * side would share cache lines for as long as they live, and a worker's
 * first free would come back to it from the stash (test_reuse).
 * The inline free sends them to the slow free (their home index's limit
 * stays 0), which finds the class in the byte table chunk_front. That
 * costs a free about 45 instructions more, which a class that keeps
 * cycling its first blocks would pay for good: after HAK_CHUNK_FREES slow
 * frees of its chunk's blocks a class retires its chunk (by then it has
 * paid about one page-table window), and each of its blocks freed from
 * then on goes to the stash for good, so that its lists serve only blocks
 * the inline free takes. Not in the hardened build (its carve order, guard
 * pages and delayed reuse work on slabs), nor with HAKMEM_FIRST_CHUNKS=0.
 * Invariants (slot lock): carved[c] <= blocks[c]; the stash holds stashed
 * blocks, each a carved block of c's chunk, free (word 1 the free key);
 * spent[c] == 0 whenever c is not retired and has a stashed or uncarved
 * block, and spent[c] == 1 once c is retired; chunk_front[g] is
 * HAK_FRONT(c) for every HAK_PAGE_MIN granule g of c's chunk, 0 past the
 * chunks, and is written once, before the area holds a block. */
struct chunk {
  uint32_t at;                       /* its offset in the area (not its address:
                                      * a tool scanning for leaks would take it
                                      * for a pointer to its first block)       */
  uint32_t blocks;                   /* the chunk's blocks; 0: the class has none */
  uint32_t carved;                   /* handed out so far, in address order (racy reads) */
  void    *stash;                    /* spilled blocks, linked through word 0  */
  uint32_t stashed;
  uint8_t  retired;                  /* its blocks leave the lists (racy reads) */
  uint32_t frees;                    /* slow frees of its blocks (relaxed atomic) */
};
static struct chunk chunks[HAK_SPAN_FIRST];
static uint8_t chunk_front[HAK_CHUNK_AREA / HAK_PAGE_MIN];
static int area_state;               /* 0 not yet, 1 mapped, -1 none (slot lock) */
uint8_t _hak_region_chunk_spent[HAK_NCLS];
struct hak_heap *_hak_region_chunk_heap;   /* the heap the chunks serve (set once, slot lock) */

/* Lays the chunks out, smallest class first, while they fit the area. */
static size_t area_layout(void) {
  const size_t page = _hak_os_page;
  size_t at = 0;
  for (unsigned c = 0; c < HAK_SPAN_FIRST; c++) {
    const struct hak_class *k = &_hak_classes[c];
    size_t bytes = (size_t)HAK_CHUNK_BLOCKS * k->size;
    if (bytes < HAK_CHUNK_BYTES) bytes = HAK_CHUNK_BYTES;
    bytes = (bytes + page - 1) & ~(page - 1);
    if (at + bytes > HAK_CHUNK_AREA) break;
    chunks[c].at = (uint32_t)at;
    chunks[c].blocks = (uint32_t)(bytes / k->size);
    for (size_t g = at / HAK_PAGE_MIN; g < (at + bytes) / HAK_PAGE_MIN; g++)
      __atomic_store_n(&chunk_front[g], (uint8_t)HAK_FRONT(c), __ATOMIC_RELAXED);
    at += bytes;
  }
  return at;
}

/* Maps the area at the first take: 1 when it holds chunks, else -1 for good
 * (the option off, the hardened build, the address taken, out of memory).
 * Slot lock held. */
static int area_open(void) {
  if (HAK_HARDENED || !_hak_options_get(HAK_OPT_FIRST_CHUNKS)) return -1;
  size_t bytes = area_layout();
  if (!bytes || !_hak_os_map_at(HAK_CHUNK_BASE, bytes)) {
    memset(chunk_front, 0, sizeof chunk_front);
    memset(chunks, 0, sizeof chunks);
    return -1;
  }
  hak_track_mem_noaccess((void *)HAK_CHUNK_BASE, bytes);   /* no block handed out yet (track.h) */
  return 1;
}

/* Debug builds: the invariants above, for class c. Slot lock held. */
static void chunk_check(unsigned c) {
  if (!HAK_DEBUG) return;
  const struct chunk *ch = &chunks[c];
  HAK_ASSERT(ch->carved <= ch->blocks);
  uint32_t n = 0;
  for (void *const *b = ch->stash; b; b = hak_link_get(b), n++) {
    HAK_ASSERT(_hak_region_chunk_class((uintptr_t)b) == (int)c && b[1] == HAK_FREE_KEY);
    HAK_ASSERT(n < ch->stashed);
  }
  HAK_ASSERT(n == ch->stashed);
  HAK_ASSERT(ch->retired ? _hak_region_chunk_spent[c] == 1
                         : !_hak_region_chunk_spent[c] || (!ch->stash && ch->carved == ch->blocks));
}

/* Up to max blocks of class c for heap h from its stash, then its chunk, as a list
 * linked through word 0 (word 1 the free key), in *chain; how many. 0 marks
 * the class spent until a spill stashes a block. The carve stops at the end
 * of the OS page where it starts, as mimalloc's free-list extension does: it
 * writes each block it hands out, and a forked shell's child that wanted one
 * block of 4 KiB wrote four pages, three of them copies of the parent's
 * (docs/experiments.md, "libhakmem.so's image under 2 MiB"). */
unsigned _hak_region_chunk_take(struct hak_heap *h, unsigned c, unsigned max, void **chain) {
  hak_lock(&_hak_lock_set.slot);
  if (!area_state) {
    area_state = area_open();
    __atomic_store_n(&_hak_region_chunk_heap, h, __ATOMIC_RELAXED);
  }
  if (h != _hak_region_chunk_heap) {
    hak_unlock(&_hak_lock_set.slot);
    *chain = NULL;
    return 0;
  }
  struct chunk *ch = &chunks[c];
  const uint32_t size = _hak_classes[c].size;
  void *head = ch->stash, **tail = NULL;
  unsigned got = 0;
  for (void **b = head; got < max && b; b = hak_link_get(b)) { tail = b; got++; }
  if (tail) {
    ch->stash = hak_link_get(tail);
    ch->stashed -= got;
  }
  uintptr_t page_end = 0;
  for (; got < max && ch->carved < ch->blocks; got++) {
    void **b = (void **)(HAK_CHUNK_BASE + ch->at + (uintptr_t)ch->carved * size);
    if (!page_end) page_end = hak_page_down((uintptr_t)b) + _hak_os_page;
    else if ((uintptr_t)b >= page_end) break;
    hak_link_set(b, NULL);
    b[1] = HAK_FREE_KEY;
    if (tail) hak_link_set(tail, b);
    else head = b;
    tail = b;
    __atomic_store_n(&ch->carved, ch->carved + 1, __ATOMIC_RELEASE);   /* a block start now */
  }
  if (tail) hak_link_set(tail, NULL);
  if (!ch->stash && ch->carved == ch->blocks) __atomic_store_n(&_hak_region_chunk_spent[c], 1, __ATOMIC_RELAXED);
  chunk_check(c);
  hak_unlock(&_hak_lock_set.slot);
  *chain = got ? head : NULL;
  return got;
}

/* The chain head..tail, n blocks of class c's chunk, goes on its stash. */
void _hak_region_chunk_return(unsigned c, void *head, void *tail, unsigned n) {
  hak_lock(&_hak_lock_set.slot);
  struct chunk *ch = &chunks[c];
  hak_link_set(tail, ch->stash);
  ch->stash = head;
  ch->stashed += n;
  if (!ch->retired) __atomic_store_n(&_hak_region_chunk_spent[c], 0, __ATOMIC_RELAXED);
  chunk_check(c);
  hak_unlock(&_hak_lock_set.slot);
}

/* The slow free of b, a live block of class c's chunk: true when c's chunk
 * is retired (now, or by this free: the HAK_CHUNK_FREES-th) and b went to
 * its stash for good; false: b goes on a list. */
bool _hak_region_chunk_retire(unsigned c, void **b) {
  struct chunk *ch = &chunks[c];
  if (!__atomic_load_n(&ch->retired, __ATOMIC_RELAXED) &&
      __atomic_fetch_add(&ch->frees, 1, __ATOMIC_RELAXED) < HAK_CHUNK_FREES)
    return false;
  b[1] = HAK_FREE_KEY;
  hak_lock(&_hak_lock_set.slot);
  __atomic_store_n(&ch->retired, 1, __ATOMIC_RELAXED);
  __atomic_store_n(&_hak_region_chunk_spent[c], 1, __ATOMIC_RELAXED);
  hak_link_set(b, ch->stash);
  ch->stash = b;
  ch->stashed++;
  chunk_check(c);
  hak_unlock(&_hak_lock_set.slot);
  _hak_stats_gauge_add(&_hak_stats_gauges.bytes_in_use, &_hak_stats_gauges.bytes_in_use_peak,
                       -(int64_t)_hak_classes[c].size);
  return true;
}

/* The class of a, a block start in a first chunk (carved: handed out once
 * at least), else -1. No lock: a chunk's offset and front are written before
 * its first block is carved, and carved only grows. */
int _hak_region_chunk_class(uintptr_t a) {
  uintptr_t o = a - HAK_CHUNK_BASE;
  if (o >= HAK_CHUNK_AREA) return -1;
  unsigned f = __atomic_load_n(&chunk_front[o / HAK_PAGE_MIN], __ATOMIC_RELAXED);
  if (!f) return -1;
  const struct chunk *ch = &chunks[f - 1];
  const struct hak_class *k = &_hak_classes[f - 1];
  uint64_t limit = (uint64_t)__atomic_load_n(&ch->carved, __ATOMIC_ACQUIRE) * k->magic_unit;
  return hak_block_test((uint32_t)(o - ch->at), k->magic, limit) ? (int)f - 1 : -1;
}
