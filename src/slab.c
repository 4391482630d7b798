/* slab.c — the slab engine, shared by every tier below Large: the size-class
 * table, taking blocks out of slabs in batches (the refill stages: current
 * slab, warm pool, shared pool, fresh slab), returning blocks in batches
 * (local or remote), lock-free remote frees, detaching and adopting slabs,
 * and the shared pool that holds ownerless slabs. */
#include "hakmem_internal.h"

struct hak_class _hak_classes[HAK_NCLS];
_Alignas(HAK_PAGE) hak_size_entry_t _hak_front_of_size[HAK_TABLE_MAX + 1];
static bool size_table_whole;           /* written whole at start: never released */
struct hak_pool _hak_pools[HAK_NCLS];

/* Block sizes: four classes per doubling (at most 25% apart), plus the L2
 * bridge classes at 40, 46 and 52 KiB between 32 KiB and the L2.5 tier. */
static const uint32_t class_sizes[HAK_NCLS] = {
  /* Tiny  C0..C23 */
  16, 32, 48, 64, 80, 96, 112, 128, 160, 192, 224, 256, 320, 384, 448, 512,
  640, 768, 896, 1024, 1280, 1536, 1792, 2048,
  /* L2 */
  2560, 3072, 3584, 4096, 5120, 6144, 7168, 8192, 10240, 12288, 14336, 16384,
  20480, 24576, 28672, 32768, 40960, 47104, 53248,
  /* L2.5 */
  65536, 81920, 98304, 114688, 131072, 163840, 196608, 229376, 262144,
  327680, 393216, 458752, 524288, 655360, 786432, 917504, 1048576,
};
/* Every class region starts 4 GiB-aligned, so if slabs carved from their
 * first block, the blocks a thread uses most (the first carved, reused LIFO)
 * would sit at the same small offsets in every class and fight for the same
 * cache sets while the rest of the L2 stayed empty. A Tiny slab of class c
 * carves from the block HAK_CARVE_COLOR * c bytes in (modulo the slab),
 * wrapping around: 5 pages and 3 cache lines apart, the Tiny classes start
 * on 16 different pages of a 64 KiB slab and different L1 sets (see
 * docs/experiments.md; cachegrind on random_mixed: misses of a 512 KiB
 * cache 17x fewer). Mid classes have their per-block color pad instead. */
#define HAK_CARVE_COLOR (5u * HAK_PAGE + 3u * 64)

/* Blocks of 4 KiB and more would all start at the same offset in a page, so
 * the same bytes of different blocks would fall into the same cache sets;
 * HAK_COLOR_PAD bytes more per block rotate block starts through 16 offsets
 * (see docs/experiments.md). */

_Static_assert(sizeof class_sizes / sizeof class_sizes[0] == HAK_NCLS, "class table size");
_Static_assert(HAK_COLOR_PAD % 16 == 0, "blocks of 16 B or more are 16-byte aligned");

#define HAK_CARVE_BYTES   4096u          /* a Tiny refill carves at most this many bytes of fresh blocks */
#define HAK_SLAB_TARGET   (64u * 1024)   /* slabs are at least this big ...   */
#define HAK_SLAB_MIN_BLOCKS 4u           /* ... and hold at least 4 blocks    */
#define HAK_SS_TARGET     (2u << 20)     /* SuperSlabs about 2 MiB            */

static uint64_t gcd64(uint64_t a, uint64_t b) { while (b) { uint64_t t = a % b; a = b; b = t; } return a; }

/* Tiny slabs are whole pages. Colored classes cannot be (that would take 16
 * blocks): their slabs are HAK_SLAB_MIN_BLOCKS blocks or 64 KiB, and their
 * SuperSlabs, which are mapped, hold a multiple of the 16 blocks that end on
 * a page boundary. A free slab is purged by the whole pages inside it. The
 * span classes have no slabs (their blocks are page runs of the span heap,
 * mid.c): only their size and tier are set. */
static void class_geometry(unsigned c) {
  struct hak_class *k = &_hak_classes[c];
  uint32_t size = class_sizes[c] >= HAK_PAGE ? class_sizes[c] + HAK_COLOR_PAD : class_sizes[c];
  k->size = size;
  k->tier = c < HAK_NTINY ? HAK_TIER_TINY : c < HAK_NTINY + HAK_NL2 ? HAK_TIER_L2 : HAK_TIER_L25;
  if (c >= HAK_SPAN_FIRST) return;
  uint64_t want = size * (uint64_t)HAK_SLAB_MIN_BLOCKS;
  if (want < HAK_SLAB_TARGET) want = HAK_SLAB_TARGET;
  uint64_t cycle = HAK_PAGE / gcd64(size, HAK_PAGE);     /* blocks that end on a page boundary */
  uint64_t blocks = (want + size - 1) / size;
  if (c < HAK_NTINY) blocks = (blocks + cycle - 1) / cycle * cycle;
  uint64_t slab = blocks * size;
  uint64_t ss = slab >= HAK_SS_TARGET ? 1 : HAK_SS_TARGET / slab;
  uint64_t step = cycle / gcd64(blocks, cycle);          /* slabs per page-aligned run */
  ss = (ss + step - 1) / step * step;
  k->slab_blocks = (uint32_t)blocks;
  k->slab_bytes = (uint32_t)slab;
  k->ss_slabs = (uint32_t)ss;
  k->ss_bytes = ss * slab;
  k->magic = UINT64_MAX / size + 1 + ((size & (size - 1)) == 0);   /* floor(2^64 / size) + 1 */
  k->magic_unit = k->magic * size;
  HAK_ASSERT(k->magic_unit >= 1 && k->magic_unit <= size && k->magic > HAK_REGION_BYTES + size);
  k->carve_first = c < HAK_NTINY ? (uint32_t)((c * HAK_CARVE_COLOR) % slab / size) : 0;
  HAK_ASSERT(k->carve_first < k->slab_blocks);
}

void _hak_classes_init(void) {
  for (unsigned c = 0; c < HAK_NCLS; c++) class_geometry(c);
}

/* Writes the page of _hak_front_of_size that holds n. Threads that do it at
 * once write the same values. */
static void front_of_size_fill(size_t n) {
  size_t per_page = HAK_PAGE / sizeof _hak_front_of_size[0];
  size_t first = n / per_page * per_page, last = first + per_page - 1;
  if (last > HAK_TABLE_MAX) last = HAK_TABLE_MAX;
  unsigned c = 0;
  for (size_t m = first; m <= last; m++) {
    while (_hak_classes[c].size < m) c++;
    __atomic_store_n(&_hak_front_of_size[m], hak_size_entry(HAK_FRONT(c)), __ATOMIC_RELAXED);
  }
}

/* Where entry 0 would not read an empty list (the TCB word is not 0: a C
 * library that uses it), the whole table is written now, once. */
void _hak_size_table_init(void) {
#if HAK_TLS_ASM
  if (hak_tcb_zero_word() == 0) return;
  size_t per_page = HAK_PAGE / sizeof _hak_front_of_size[0];
  for (size_t n = 0; n <= HAK_TABLE_MAX; n += per_page) front_of_size_fill(n);
  size_table_whole = true;
#endif
}

/* malloc_trim: the table's pages go back to the OS and read 0 again (a
 * malloc that reads an entry meanwhile finds it written or 0; either is
 * right), to be written anew by the sizes the program still uses. The
 * table's last entry, alone on a page it shares with other data, stays. */
void _hak_size_table_release(void) {
  size_t whole_pages = sizeof _hak_front_of_size / HAK_PAGE * HAK_PAGE;   /* not the page after it */
  if (!size_table_whole) _hak_os_zero(_hak_front_of_size, whole_pages);
}

/* Initializes hakmem first: a malloc can come before any constructor, and
 * the class tables are written by the initialization. */
unsigned _hak_class_of_size(size_t n) {
  _hak_init();
  hak_size_entry_t e = __atomic_load_n(&_hak_front_of_size[n], __ATOMIC_RELAXED);
  if (HAK_UNLIKELY(e == 0)) {
    front_of_size_fill(n);
    e = __atomic_load_n(&_hak_front_of_size[n], __ATOMIC_RELAXED);   /* others may be filling it too */
  }
  return hak_entry_front(e) - 1;
}

/* The smallest class whose blocks hold n bytes and all start at a multiple
 * of align (regions are 4 GiB aligned, so that is: size % align == 0). */
int _hak_class_for_aligned(size_t n, size_t align) {
  if (n > HAK_MID_MAX || align > HAK_MID_MAX) return -1;
  for (unsigned c = _hak_class_of_size(n); c < HAK_NCLS; c++)
    if (_hak_classes[c].size % align == 0) return (int)c;
  return -1;
}

/* ---- one slab ------------------------------------------------------------ */
static inline uint64_t class_bytes(unsigned c, uint64_t blocks) {
  return blocks * _hak_classes[c].size;
}

/* Takes the remote free list and its length in one exchange and puts it on
 * the local list: no walk when the local list is empty. */
static void collect_remote(struct hak_heap *h, struct hak_slab *s) {
  uintptr_t x = atomic_exchange_explicit(&s->xremote, 0, memory_order_acquire);
  void **chain = HAK_REMOTE_HEAD(x);
  if (!chain) return;
  uint32_t n = HAK_REMOTE_COUNT(x);
  if (s->free) {
    void **tail = chain;
    while (tail[0]) tail = tail[0];
    tail[0] = s->free;
  }
  s->free = chain;
  s->nfree += n;
  HAK_ASSERT(n <= s->used);
  s->used -= n;                     /* (bytes_in_use dropped at the remote push) */
  if (h) h->stats.remote_collects++;
}

/* Moves up to want blocks of s onto *list: local free list, then remote
 * frees, then uncarved blocks — for a Tiny class at most HAK_CARVE_BYTES of
 * those per call (mimalloc extends a page by 4 KiB at a time), so a refill
 * does not carve blocks the thread may never use: they would be resident.
 * (Mid classes carve a whole batch: one block a refill cost mid_large_mt
 * 25%.) Nothing is carved when carve_ok is false. Every block leaves with
 * word 1 = free key.
 * A whole local list of at most room blocks goes in one step, without a
 * walk: the blocks of a list that came back from another thread are in
 * that thread's cache, and walking them costs a miss each. */
static unsigned slab_pop(struct hak_heap *h, struct hak_slab *s, unsigned want, unsigned room, bool carve_ok, void **list) {
  unsigned n = 0;
  if (!s->free && atomic_load_explicit(&s->xremote, memory_order_relaxed)) collect_remote(h, s);
  if (!*list && s->free && s->nfree <= room) {
    *list = s->free;
    n = s->nfree;
    s->free = NULL;
    s->nfree = 0;
  }
  while (n < want && s->free) {
    void **b = s->free;
    s->free = b[0];
    b[0] = *list;
    *list = b;
    s->nfree--;
    n++;
  }
  const uint32_t size = _hak_classes[s->cls].size;
  unsigned carve = n < want && carve_ok ? want - n : 0;
  if (s->cls < HAK_NTINY && carve > HAK_CARVE_BYTES / size) carve = HAK_CARVE_BYTES / size;
  const uint32_t first = _hak_classes[s->cls].carve_first;
  const unsigned recycled = n;
  for (; carve && s->carved < s->capacity; carve--) {
    uint32_t k = s->carved++ + first;
    if (k >= s->capacity) k -= s->capacity;
    void **b = (void **)(s->start + (uintptr_t)k * size);
    b[0] = *list;
    b[1] = HAK_FREE_KEY;
    *list = b;
    n++;
  }
  h->stats.carved[s->cls] += n - recycled;
  s->used += n;
  _hak_gauge_add(&_hak_gauges.bytes_in_use, &_hak_gauges.bytes_in_use_peak, (int64_t)class_bytes(s->cls, n));
  _hak_slab_check(s);
  return n;
}

/* Blocks s can give without carving: freed ones, local or remote. */
static bool slab_has_recycled(const struct hak_slab *s) {
  return s->free || atomic_load_explicit(&s->xremote, memory_order_relaxed);
}

static bool slab_has_free(const struct hak_slab *s) { return slab_has_recycled(s) || s->carved < s->capacity; }

/* npartial changes under the pool lock; the warm pool reads it without the
 * lock (a hint), so both sides use relaxed atomics (plain moves on x86). */
static inline void npartial_add(struct hak_pool *pool, int delta) {
  __atomic_store_n(&pool->npartial, pool->npartial + (uint32_t)delta, __ATOMIC_RELAXED);
}

static void partial_push(struct hak_slab *s) {
  struct hak_pool *pool = &_hak_pools[s->cls];
  hak_lock(&pool->lock);
  s->next = pool->partial;
  pool->partial = s;
  npartial_add(pool, 1);
  hak_unlock(&pool->lock);
}

/* The owner lets s go: released when empty, to the shared pool when it has
 * free blocks, else left unlisted so the next remote free lists it. */
void _hak_slab_detach(struct hak_heap *h, struct hak_slab *s) {
  HAK_ASSERT(atomic_load(&s->xowner) == h);
  collect_remote(h, s);
  _hak_slab_check(s);
  if (h) h->stats.slabs_abandoned++;
  if (s->used == 0) {
    atomic_store(&s->xowner, NULL);
    struct hak_pool *pool = &_hak_pools[s->cls];
    hak_lock(&pool->lock);
    _hak_region_release_slab(s);
    hak_unlock(&pool->lock);
    if (h) h->stats.slabs_released++;
    return;
  }
  atomic_store(&s->xowner, NULL);
  if (slab_has_free(s)) { partial_push(s); return; }
  /* Full: unlist, then look again (a remote free may have come in between;
   * whoever turns xlisted from 0 to 1 lists the slab). */
  atomic_store(&s->xlisted, 0);
  if (atomic_load(&s->xremote) && atomic_exchange(&s->xlisted, 1) == 0) partial_push(s);
}

/* A slab for heap h: an ownerless one from the shared pool (adopted), else a
 * fresh one; with fresh_ok false, only an adopted one. NULL when there is
 * none (out of memory, or no ownerless slab). */
struct hak_slab *_hak_slab_acquire(struct hak_heap *h, unsigned c, bool fresh_ok, bool *adopted) {
  struct hak_pool *pool = &_hak_pools[c];
  hak_lock(&pool->lock);
  struct hak_slab *s = pool->partial;           /* the newest ownerless slab */
  if (s) {
    pool->partial = s->next;
    npartial_add(pool, -1);
    s->next = NULL;
  }
  *adopted = s != NULL;
  if (!s && fresh_ok) s = _hak_region_fresh_slab(c);
  hak_unlock(&pool->lock);
  if (!s) return NULL;
  if (*adopted) {
    atomic_store(&s->xowner, h);
    return s;
  }
  s->free = NULL;
  s->nfree = 0;
  s->carved = 0;
  s->used = 0;
  atomic_store_explicit(&s->xremote, 0, memory_order_relaxed);
  atomic_store_explicit(&s->xlisted, 1, memory_order_relaxed);
  atomic_store(&s->xowner, h);
  return s;
}

/* Tiny slabs carve fresh blocks last: while a slab the thread can reach has
 * freed blocks (a warm slab with some, or an ownerless one in the shared
 * pool), a slab with nothing but uncarved room waits in the warm pool.
 * Carving makes new pages resident; a producer's blocks come back to its
 * slabs one remote free at a time (docs/experiments.md, "Carve last"). */

/* The index of the topmost warm slab of class c with freed blocks, or -1. */
static int warm_recycled(const struct hak_heap *h, unsigned c) {
  for (int i = h->warm_n[c] - 1; i >= 0; i--)
    if (slab_has_recycled(h->warm[c][i])) return i;
  return -1;
}

static bool pool_has_slabs(unsigned c) { return __atomic_load_n(&_hak_pools[c].npartial, __ATOMIC_RELAXED) != 0; }

/* Should s (Tiny, cur) give only its freed blocks, and wait in the warm pool
 * for its carving while freed blocks are elsewhere? */
static bool carve_waits(const struct hak_heap *h, unsigned c, const struct hak_slab *s) {
  return c < HAK_NTINY && s->carved < s->capacity && h->warm_n[c] < _hak_option(HAK_OPT_WARM_POOL_CAP) &&
         (pool_has_slabs(c) || warm_recycled(h, c) >= 0);
}

/* Stage 2..4 of a refill: the warm pool (a slab with freed blocks first,
 * then an adopted one, then one to carve), else the shared pool or a fresh
 * slab, with a secondary prefill of the warm pool (Tiny) when it ran empty. */
static struct hak_slab *next_slab(struct hak_heap *h, unsigned c) {
  if (c < HAK_NTINY && h->warm_n[c]) {
    int i = warm_recycled(h, c);
    if (i < 0 && pool_has_slabs(c)) {
      bool adopted;
      struct hak_slab *s = _hak_slab_acquire(h, c, false, &adopted);
      if (s) { h->stats.stage_shared[c]++; h->stats.slabs_adopted++; return s; }
    }
    if (i < 0) i = h->warm_n[c] - 1;
    struct hak_slab *s = h->warm[c][i];
    h->warm[c][i] = h->warm[c][--h->warm_n[c]];
    h->stats.warm_hits[c]++;
    h->stats.stage_warm[c]++;
    return s;
  }
  if (c < HAK_NTINY) h->stats.warm_misses[c]++;
  bool adopted;
  struct hak_slab *s = _hak_slab_acquire(h, c, true, &adopted);
  if (!s) return NULL;
  if (adopted) { h->stats.stage_shared[c]++; h->stats.slabs_adopted++; }
  else h->stats.stage_fresh[c]++;
  if (c < HAK_NTINY) {
    long cap = _hak_option(HAK_OPT_WARM_POOL_CAP), prefill = _hak_option(HAK_OPT_WARM_POOL_PREFILL);
    for (long i = 0; i < prefill && h->warm_n[c] < cap; i++) {
      struct hak_slab *w = _hak_slab_acquire(h, c, true, &adopted);
      if (!w) break;
      if (adopted) h->stats.slabs_adopted++;
      h->warm[c][h->warm_n[c]++] = w;
      h->stats.warm_prefills[c]++;
    }
  }
  return s;
}

/* About max blocks of class c for heap h's front (more, up to room, when a
 * slab's whole free list can go without a walk), as a list linked through
 * word 0 (each with word 1 = free key). Returns how many; 0 = out of memory. */
unsigned _hak_slab_take(struct hak_heap *h, unsigned c, unsigned max, unsigned room, void **chain) {
  unsigned got = 0;
  void *list = NULL;
  struct hak_slab *s = h->cur[c];
  if (s) h->stats.stage_current[c]++;
  bool waited = false;                  /* once a take: adopting may fail */
  while (got < max) {
    if (!s) {
      s = next_slab(h, c);
      if (!s) break;
      h->cur[c] = s;
    }
    bool wait = !waited && carve_waits(h, c, s);
    got += slab_pop(h, s, max - got, room - got, !wait, &list);
    if (wait && got < max) {            /* s waits in the warm pool */
      h->warm[c][h->warm_n[c]++] = s;
      h->cur[c] = s = NULL;
      waited = true;
      continue;
    }
    if (got < max && got && s->carved < s->capacity) break;   /* carve limit: the rest next time */
    if (got < max) {                    /* s is exhausted */
      h->cur[c] = NULL;
      _hak_slab_detach(h, s);
      s = NULL;
    }
  }
  h->stats.refills[c]++;
  *chain = list;
  return got;
}

/* Pushes the chain head..tail (n blocks of s) onto s's remote list, and lists
 * s in the shared pool if it was ownerless and unlisted. */
static void remote_push(struct hak_heap *h, struct hak_slab *s, void **head, void **tail, unsigned n) {
  uintptr_t old = atomic_load_explicit(&s->xremote, memory_order_relaxed), x;
  do {
    tail[0] = HAK_REMOTE_HEAD(old);
    x = (uintptr_t)head | (uintptr_t)(HAK_REMOTE_COUNT(old) + n) << HAK_REMOTE_SHIFT;
  } while (!atomic_compare_exchange_weak(&s->xremote, &old, x));
  if (atomic_load(&s->xlisted) == 0 && atomic_exchange(&s->xlisted, 1) == 0) partial_push(s);
  _hak_gauge_add(&_hak_gauges.bytes_in_use, &_hak_gauges.bytes_in_use_peak, -(int64_t)class_bytes(s->cls, n));
  if (h) h->stats.remote_frees += n;
}

/* Returns a chain of class-c blocks (linked through word 0, word 1 = key) to
 * their slabs: runs of blocks of one slab go in one step, onto the local list
 * when h owns the slab, else onto its remote list. h may be NULL. */
void _hak_slab_return(struct hak_heap *h, unsigned c, void *chain) {
  const uint32_t slab_bytes = _hak_classes[c].slab_bytes;
  while (chain) {
    void **head = chain, **tail = chain;
    struct hak_slab *s = _hak_region_slab_of((uintptr_t)head, c);
    unsigned n = 1;
    while (tail[0] && (uintptr_t)tail[0] - s->start < slab_bytes) { tail = tail[0]; n++; }
    chain = tail[0];
    if (h && atomic_load_explicit(&s->xowner, memory_order_relaxed) == h) {
      tail[0] = s->free;
      s->free = head;
      s->nfree += n;
      HAK_ASSERT(n <= s->used);
      s->used -= n;
      _hak_gauge_add(&_hak_gauges.bytes_in_use, &_hak_gauges.bytes_in_use_peak, -(int64_t)class_bytes(c, n));
      _hak_slab_check(s);
    } else {
      remote_push(h, s, head, tail, n);
    }
  }
}

/* ---- purging: memory back to the OS ------------------------------------------
 * Empty ownerless slabs go back to their SuperSlabs; free slabs that stayed
 * free for the purge delay give their pages back (MADV_DONTNEED), except in
 * the first HAKMEM_EMPTY_KEEP empty SuperSlabs, kept committed for reuse;
 * purged empty SuperSlabs at the top of a region are unmapped. force (for
 * malloc_trim and out of memory): no delay, nothing kept. */
struct purge_policy { bool force; uint32_t now_ms, delay_ms; long keep; };

/* A free slab whose pages may go now: dirty and free for the delay. */
static bool purge_due(const struct hak_slab *s, const struct purge_policy *pp) {
  return s->state == HAK_SLAB_FREE && s->dirty && (pp->force || pp->now_ms - s->freed_ms >= pp->delay_ms);
}

/* Purges ss's free slabs by runs of neighbours (due, or purged before), one
 * madvise per run over the whole pages inside it: slabs of the colored
 * classes are not page multiples, so purging slab by slab would leave the
 * pages two free slabs share resident (about 6% of a 16 KiB class). */
static size_t purge_superslab(struct hak_superslab *ss, const struct purge_policy *pp) {
  const struct hak_class *k = &_hak_classes[ss->cls];
  size_t released = 0;
  for (unsigned i = 0, j; i < ss->nslabs; i = j + 1) {
    bool due = false;
    for (j = i; j < ss->nslabs; j++) {
      const struct hak_slab *s = &ss->slabs[j];
      if (purge_due(s, pp)) due = true;
      else if (s->state != HAK_SLAB_FREE || s->dirty) break;
    }
    if (!due) continue;
    uintptr_t from = (ss->slabs[i].start + HAK_PAGE - 1) & ~(uintptr_t)(HAK_PAGE - 1);
    uintptr_t to = (ss->slabs[j - 1].start + k->slab_bytes) & ~(uintptr_t)(HAK_PAGE - 1);
    if (to > from) _hak_os_purge((void *)from, to - from);
    for (unsigned x = i; x < j; x++) {
      if (ss->slabs[x].dirty) released += k->slab_bytes;
      ss->slabs[x].dirty = 0;
    }
  }
  return released;
}

static size_t purge_class(unsigned c, const struct purge_policy *pp) {
  struct hak_pool *pool = &_hak_pools[c];
  size_t released = 0;
  hak_lock(&pool->lock);
  struct hak_slab **link = &pool->partial;
  while (*link) {
    struct hak_slab *s = *link;
    collect_remote(NULL, s);            /* the pool lock makes us its owner */
    if (s->used == 0) {
      *link = s->next;
      npartial_add(pool, -1);
      _hak_region_release_slab(s);
    } else {
      link = &s->next;
    }
  }
  long kept = 0;
  for (struct hak_superslab *ss = pool->hot; ss; ss = ss->next_hot) {
    if (ss->state == HAK_SS_EMPTY && !pp->force && kept < pp->keep) { kept++; continue; }
    released += purge_superslab(ss, pp);
  }
  for (struct hak_region *r = pool->regions; r; r = r->next) released += _hak_region_shrink(r);
  _hak_region_prune_hot(pool);
  hak_unlock(&pool->lock);
  return released;
}

size_t _hak_slab_purge(bool force) {
  struct purge_policy pp = { force, _hak_os_now_ms(), (uint32_t)_hak_option(HAK_OPT_PURGE_DELAY_MS),
                             _hak_option(HAK_OPT_EMPTY_KEEP) };
  size_t released = 0;
  for (unsigned c = 0; c < HAK_NCLS; c++) released += purge_class(c, &pp);
  return released;
}

/* Called from slow paths: at most every half delay, one thread runs a purge
 * pass over every class and expires cached Large ranges. Times are the
 * monotonic clock in ms modulo 2^32 (it wraps every 49.7 days of uptime),
 * so only differences are compared, unsigned: the time since the last pass
 * (0 at start, so the first pass comes at once, whatever the uptime). */
static _Atomic uint32_t last_purge_ms;

void _hak_purge_tick(void) {
  uint32_t now = _hak_os_now_ms(), last = atomic_load_explicit(&last_purge_ms, memory_order_relaxed);
  uint32_t delay = (uint32_t)_hak_option(HAK_OPT_PURGE_DELAY_MS);
  if (now - last <= delay / 2) return;
  if (!atomic_compare_exchange_strong(&last_purge_ms, &last, now)) return;
  _hak_slab_purge(false);
  _hak_span_purge(false);
  _hak_large_expire(now, delay);
}

/* Debug builds: the invariants written beside struct hak_slab. */
void _hak_slab_check(const struct hak_slab *s) {
  if (!HAK_DEBUG) return;
  const struct hak_class *k = &_hak_classes[s->cls];
  HAK_ASSERT(s->carved <= s->capacity && s->used <= s->carved);
  uint32_t nfree = 0;
  for (void **b = s->free; b; b = b[0]) {
    HAK_ASSERT((uintptr_t)b >= s->start && (uintptr_t)b < s->start + k->slab_bytes);
    HAK_ASSERT(((uintptr_t)b - s->start) % k->size == 0);
    HAK_ASSERT(++nfree <= s->carved);
  }
  HAK_ASSERT(nfree == s->nfree && s->used + nfree <= s->carved);
}

void _hak_slab_fork_prepare(void) { for (unsigned c = 0; c < HAK_NCLS; c++) hak_lock(&_hak_pools[c].lock); }
void _hak_slab_fork_parent(void)  { for (unsigned c = 0; c < HAK_NCLS; c++) hak_unlock(&_hak_pools[c].lock); }
void _hak_slab_fork_child(void)   { for (unsigned c = 0; c < HAK_NCLS; c++) atomic_store(&_hak_pools[c].lock.held, 0); }
