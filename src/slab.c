/* slab.c — one slab, shared by every class below the span heap: taking
 * blocks out of a slab in a batch (local free list, remote frees, carving),
 * returning blocks in batches (local, or lock-free remote frees), detaching
 * and adopting slabs, the exhausted slabs kept for their thread, and the
 * shared pool of each class that holds ownerless slabs (its lock also
 * guards the class's SuperSlabs and regions). The refill stages that
 * choose the slab are in refill.c. */
#include "hakmem_internal.h"

HAK_ZERO_TABLE struct hak_pool _hak_slab_pools[HAK_NCLS];
#define HAK_CARVE_BYTES   4096u          /* a Tiny refill carves at most this many bytes of fresh blocks */

/* Debug builds: s (class c) is h's current slab or in its warm pool. */
static bool heap_holds(const struct hak_heap *h, unsigned c, const struct hak_slab *s) {
  if (h->cur[c] == s) return true;
  for (unsigned i = 0; c < HAK_NTINY && i < h->warm_n[c]; i++)
    if (h->warm[c][i] == s) return true;
  return false;
}

/* ---- one slab ------------------------------------------------------------ */
static inline uint64_t class_bytes(unsigned c, uint64_t blocks) {
  return blocks * _hak_classes[c].size;
}

/* Takes the remote free list and its length in one exchange onto the empty
 * local list (the owner, when its local list ran dry: no walk). */
static void collect_remote(struct hak_heap *h, struct hak_slab *s) {
  HAK_ASSERT(!s->free);
  uintptr_t x = atomic_exchange_explicit(&s->xremote, 0, memory_order_acquire);
  void **chain = HAK_REMOTE_HEAD(x);
  if (!chain) return;
  uint32_t n = HAK_REMOTE_COUNT(x);
  s->free = chain;
  HAK_ASSERT(n <= s->used);
  s->used -= n;                     /* (bytes_in_use dropped at the remote push) */
  if (h) h->stats.remote_collects++;
}

/* True when every block out of s has come back by remote frees (used counts
 * them until they are collected), and then takes them: s is empty, and its
 * release resets its lists, so the remote chain is dropped unwalked. The
 * caller owns s (its owner detaching it, or the pool lock for an ownerless
 * one). A slab that is not empty is left as it is: its next owner collects
 * its remote frees when its local list runs dry. (Collecting here linked
 * the remote chain behind a non-empty local list, a walk of the chain, a
 * cache miss a block: 3.4% of jq's time, whose own frees into its full,
 * ownerless slabs are remote frees.) */
static bool all_remote(const struct hak_slab *s) {
  return HAK_REMOTE_COUNT(atomic_load_explicit(&s->xremote, memory_order_acquire)) == s->used;
}

static bool take_if_empty(struct hak_slab *s) {
  if (!all_remote(s)) return false;
  if (s->used) {
    uintptr_t x = atomic_exchange_explicit(&s->xremote, 0, memory_order_acquire);
    HAK_ASSERT(HAK_REMOTE_COUNT(x) == s->used);     /* no block of s is out to be freed again */
    s->used = 0;
  }
  return true;
}

/* The order a slab carves its blocks in. The default build carves in
 * address order from hak_slab_carve_first (block 0 but in the first slab
 * of a region), wrapping. The hardened build walks one block at a time
 * (k: the index of block s->carved), chunk after chunk of HAK_CARVE_CHUNK
 * blocks (at least 4 KiB of them), in address order, and the blocks of a
 * chunk in a random order: from a random block with a random stride prime
 * to the chunk's length (neither 1 nor -1 where there is another), both
 * from the slab's address, the chunk and the process's secret. So the next
 * fresh block cannot be told in advance, and each block is carved once;
 * the chunks keep the pages a refill makes resident those of the default
 * build (a random order over the whole slab made every page of a fresh slab
 * resident at once: threads_1000 peaked at 0.4 to 1.7 GiB against 0.07 to
 * 0.18). */
#if HAK_HARDENED
struct carve_walk { uint32_t k, base, n, first, stride, j; };
#define HAK_CARVE_CHUNK_MIN 16u

static uint32_t gcd32(uint32_t a, uint32_t b) {
  while (b) { uint32_t t = a % b; a = b; b = t; }
  return a;
}

/* w for the chunk that holds block s->carved. */
static void carve_chunk(const struct hak_slab *s, struct carve_walk *w) {
  uint32_t size = _hak_classes[s->cls].size, m = HAK_CARVE_BYTES / size;
  if (m < HAK_CARVE_CHUNK_MIN) m = HAK_CARVE_CHUNK_MIN;
  uint32_t q = s->carved / m, n = s->capacity - q * m;
  w->base = q * m;
  w->n = n = n < m ? n : m;
  uint64_t r = (uint64_t)(s->start ^ _hak_guard_link_secret ^ (uintptr_t)q << 48) * 0x9E3779B97F4A7C15ull;
  r ^= r >> 29;
  r *= 0xBF58476D1CE4E5B9ull;
  r ^= r >> 32;
  w->stride = 1;
  for (uint32_t i = 0, t = n > 4 ? 2 + (uint32_t)(r >> 32) % (n - 3) : 1; n > 4 && i < n; i++) {
    if (gcd32(t, n) == 1) { w->stride = t; break; }
    t = t + 1 <= n - 2 ? t + 1 : 2;
  }
  w->first = (uint32_t)r % n;
  w->j = s->carved - w->base;
  w->k = w->base + (uint32_t)((w->first + (uint64_t)w->j * w->stride) % n);
}
static void carve_begin(const struct hak_slab *s, struct carve_walk *w) { carve_chunk(s, w); }
/* After s->carved++ (below the capacity). */
static void carve_next(const struct hak_slab *s, struct carve_walk *w) {
  if (++w->j == w->n) carve_chunk(s, w);
  else w->k = w->base + (uint32_t)((w->first + (uint64_t)w->j * w->stride) % w->n);
}

/* Carves up to m more blocks of s (m >= 1, s not fully carved) onto the
 * front of *list, chained in carve order. Returns the blocks carved. */
static unsigned carve_blocks(struct hak_slab *s, uint32_t size, unsigned m, void **list) {
  struct carve_walk w;
  void **head = NULL, **tail = NULL;
  unsigned n = 0;
  carve_begin(s, &w);
  for (;;) {
    void **b = (void **)(s->start + (uintptr_t)w.k * size);
    b[1] = HAK_FREE_KEY;
    if (tail) hak_link_set(tail, b);
    else head = b;
    tail = b;
    n++;
    if (++s->carved == s->capacity || n == m) break;
    carve_next(s, &w);
  }
  hak_link_set(tail, *list);
  *list = head;
  return n;
}
#else
/* A slab marked ahead (a fresh Tiny slab of a class its thread has carved a
 * whole slab of: it will likely carve this one whole too) faults in the pages
 * of its next HAK_POPULATE_BYTES of blocks in one madvise(MADV_POPULATE_WRITE)
 * when its carving reaches them, instead of one page fault at a time while
 * the program runs: xmllint +3.6% (docs/experiments.md, "Slab pages faulted
 * in ahead of the carving"). The first slab of a class, and a resident one,
 * fault as before, so a class a thread uses little makes no page resident
 * that it would not; the cost is at most HAK_POPULATE_BYTES less a page a
 * slab. (Faulting the whole slab in at once gained xmllint 5.4% but left the
 * pages of slabs that wait in the warm pool resident: lua +6.4% peak RSS.) */
#define HAK_POPULATE_BYTES (32u * 1024)

/* The pages of the blocks of carve order [from, to) of s, faulted in now. */
static void populate_range(const struct hak_slab *s, uint32_t size, uint32_t from, uint32_t to) {
  uint32_t cf = hak_slab_carve_first(s), split = s->capacity - cf;   /* carve index of block 0 */
  for (int part = 0; part < 2 && from < to; part++) {
    uint32_t end = from < split ? (to < split ? to : split) : to;
    uint32_t k = from < split ? from + cf : from - split;
    uintptr_t lo = hak_page_down(s->start + (uintptr_t)k * size);
    uintptr_t hi = hak_page_up(s->start + (uintptr_t)(k + (end - from)) * size);
    (void)_hak_os_populate((void *)lo, hi - lo);
    from = end;
  }
}

/* Carves up to m more blocks of s (m >= 1, s not fully carved) onto the
 * front of *list in address order from block carved + hak_slab_carve_first,
 * wrapping once at the capacity: one or two runs of neighbours, each block
 * linked to the next (slab_pop's hottest loop when a program allocates a
 * large batch: xmllint carves 800 thousand blocks), an ahead slab's pages
 * faulted in first. Returns the blocks carved. */
static unsigned carve_blocks(struct hak_slab *s, uint32_t size, unsigned m, void **list) {
  uint32_t left = s->capacity - s->carved;
  unsigned n = m < left ? m : left;
  HAK_ASSERT(n >= 1);                       /* m >= 1 and s not fully carved: tail is set below */
  if (s->ahead) {
    struct hak_slab_cold *cold = hak_slab_cold(s);
    if (s->carved + n > cold->populated) {
      uint32_t to = s->carved + n, step = HAK_POPULATE_BYTES / size;
      if (to < cold->populated + step) to = cold->populated + step;
      if (to > s->capacity) to = s->capacity;
      populate_range(s, size, cold->populated, to);
      cold->populated = to;
    }
  }
  uint32_t k = s->carved + hak_slab_carve_first(s);
  if (k >= s->capacity) k -= s->capacity;
  void **head = (void **)(s->start + (uintptr_t)k * size), **tail = NULL;
  for (unsigned done = 0; done < n; ) {
    unsigned run = s->capacity - k < n - done ? s->capacity - k : n - done;
    char *b = (char *)(s->start + (uintptr_t)k * size), *last = b + (uintptr_t)(run - 1) * size;
    if (tail) hak_link_set(tail, b);
    for (; b < last; b += size) {
      ((void **)b)[1] = HAK_FREE_KEY;
      hak_link_set((void **)b, b + size);
    }
    ((void **)last)[1] = HAK_FREE_KEY;
    tail = (void **)last;
    done += run;
    k = 0;
  }
  hak_link_set(tail, *list);
  *list = head;
  s->carved += n;
  return n;
}
#endif

/* The blocks of carve order [0, t) of s include block k (the hardened
 * build: k lies in a chunk that its walk reached, which holds them). */
static bool carved_within(const struct hak_slab *s, uint32_t k, uint32_t t) {
#if HAK_HARDENED
  uint32_t size = _hak_classes[s->cls].size, m = HAK_CARVE_BYTES / size;
  if (m < HAK_CARVE_CHUNK_MIN) m = HAK_CARVE_CHUNK_MIN;
  return k / m < (t + m - 1) / m;
#else
  uint32_t cf = hak_slab_carve_first(s);
  return (k >= cf ? k - cf : k + s->capacity - cf) < t;
#endif
}

/* Word 1 of every block of s (a free slab) whose word 1 lies in [from, to)
 * and that a carving reached since its pages were last clean (touched)
 * loses the free key: those pages go to another class (superslab.c), whose
 * blocks lie at other offsets. A key left inside one of those, copied to
 * word 1 of a live block (realloc copies a block's bytes; a program may
 * copy uninitialized ones), made that block's free abort as a double free:
 * plain_oom_mix's freed Tiny slabs gave their pages to the span heap, whose
 * freed runs gave them to a Large block, which realloc copied into a
 * 768-byte one (test_hakapi_free_key). Blocks never carved are not
 * touched: their pages may not be resident. */
void _hak_slab_wipe_keys(const struct hak_slab *s, uintptr_t from, uintptr_t to) {
  const uint32_t touched = hak_slab_cold(s)->touched;
  if (!touched) return;
  uint32_t size = _hak_classes[s->cls].size;
  uintptr_t first = s->start + sizeof(void *);        /* word 1 of block 0 */
  uint32_t k = from > first ? (uint32_t)((from - first + size - 1) / size) : 0;
  for (; k < s->capacity; k++) {
    void **b = (void **)(s->start + (uintptr_t)k * size);
    if ((uintptr_t)(b + 2) > to) break;
    if (carved_within(s, k, touched)) b[1] = NULL;
  }
}

/* Moves up to want blocks of s onto *list: local free list, then remote
 * frees, then uncarved blocks — for a Tiny class at most HAK_CARVE_BYTES of
 * those per call (mimalloc extends a page by 4 KiB at a time), so a refill
 * does not carve blocks the thread may never use: they would be resident.
 * (Mid classes carve a whole batch: one block a refill cost mid_large_mt
 * 25%.) Nothing is carved when carve_ok is false. Every block leaves with
 * word 1 = free key. Fresh blocks are handed out in carve order (address
 * order in the default build): the run is chained head first, not pushed
 * block by block, so a program that walks its blocks in the order it got
 * them walks memory upwards, as the hardware's stream prefetchers expect
 * (docs/experiments.md, "Fresh blocks in address order": xmllint +30%).
 * A whole local list of at most room blocks goes in one step, without a
 * walk: the blocks of a list that came back from another thread are in
 * that thread's cache, and walking them costs a miss each. */
unsigned _hak_slab_pop(struct hak_heap *h, struct hak_slab *s, unsigned want, unsigned room, bool carve_ok, void **list) {
  unsigned n = 0;
  HAK_ASSERT(atomic_load(&s->xowner) == h && heap_holds(h, s->cls, s));
  if (!s->free && atomic_load_explicit(&s->xremote, memory_order_relaxed)) collect_remote(h, s);
  const unsigned local = s->carved - s->used;   /* blocks on free */
  if (!*list && s->free && local <= room) {
    *list = s->free;
    n = local;
    s->free = NULL;
  }
  while (n < want && s->free) {
    void **b = s->free;
    s->free = hak_link_next(b, s->cls);
    hak_link_set(b, *list);
    *list = b;
    n++;
  }
  const uint32_t size = _hak_classes[s->cls].size;
  unsigned carve = n < want && carve_ok ? want - n : 0;
  if (s->cls < HAK_NTINY && carve > HAK_CARVE_BYTES / size) carve = HAK_CARVE_BYTES / size;
  const unsigned recycled = n;
  if (carve && s->carved < s->capacity) n += carve_blocks(s, size, carve, list);
  h->stats.carved[s->cls] += n - recycled;
  s->used += n;                     /* (bytes_in_use: the refill adds its whole take) */
  _hak_slab_check(s);
  return n;
}

/* Blocks s can give without carving: freed ones, local or remote. */
bool _hak_slab_has_recycled(const struct hak_slab *s) {
  return s->free || atomic_load_explicit(&s->xremote, memory_order_relaxed);
}

static bool slab_has_free(const struct hak_slab *s) { return _hak_slab_has_recycled(s) || s->carved < s->capacity; }

/* npartial changes under the pool lock; the warm pool reads it without the
 * lock (a hint), so both sides use relaxed atomics (plain moves on x86). */
static inline void npartial_add(struct hak_pool *pool, int delta) {
  __atomic_store_n(&pool->npartial, pool->npartial + (uint32_t)delta, __ATOMIC_RELAXED);
}

static void partial_push(struct hak_slab *s) {
  struct hak_pool *pool = &_hak_slab_pools[s->cls];
  HAK_ASSERT(atomic_load(&s->xowner) == NULL && atomic_load(&s->xlisted) == 1);
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
  _hak_slab_check(s);
  if (h) h->stats.slabs_abandoned++;
  atomic_store_explicit(&hak_slab_cold(s)->xaffine, h, memory_order_relaxed);
  if (take_if_empty(s)) {
    atomic_store(&s->xowner, NULL);
    struct hak_pool *pool = &_hak_slab_pools[s->cls];
    hak_lock(&pool->lock);
    _hak_superslab_release_slab(s);
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

/* ---- exhausted slabs kept by their thread --------------------------------
 * A slab its owner exhausted is kept for it: ownerless in all but its
 * owner's name (xowner is the owner's address with bit 0 set, HAK_KEPT),
 * unlisted, until the first free into it. When that free is the owner's
 * own, the slab comes back to the owner (its ready list, taken before any
 * other slab at the next refill), so only the thread that filled the slab
 * refills its holes. Detached instead, an exhausted slab was listed by the
 * owner's own free and adopted by whichever thread refilled next, which put
 * its blocks between the first thread's live ones: in larson 70 thousand
 * slabs changed hands in 2 s and most pages held blocks of two threads
 * (docs/experiments.md, "Exhausted slabs kept by their thread"). When the
 * first free is another thread's, the slab goes to the shared pool as a
 * detached one did: its blocks are out in other threads' lists, and a
 * slab kept for an owner that rarely refills would hold its holes from
 * every thread (bench_ring at 8 threads: twice the peak RSS). Every free
 * into a kept slab, the owner's too, is a remote push: the owner keeps no
 * list of them, so a thread exits without a look at its kept slabs, and a
 * free into one of a heap that was reused brings it to the heap's new
 * thread. */
#define HAK_KEPT ((uintptr_t)1)

static struct hak_heap *kept_tag(struct hak_heap *h) { return (struct hak_heap *)((uintptr_t)h | HAK_KEPT); }

/* The ready lists (owner): doubly linked through next and prev, so that a
 * slab freed empty leaves at once. */
static void ready_link(struct hak_heap *h, struct hak_slab *s) {
  struct hak_slab **head = &h->ready[s->cls];
  s->prev = NULL;
  s->next = *head;
  if (*head) (*head)->prev = s;
  *head = s;
  s->ready = 1;
}

static void ready_unlink(struct hak_heap *h, struct hak_slab *s) {
  if (s->prev) s->prev->next = s->next;
  else h->ready[s->cls] = s->next;
  if (s->next) s->next->prev = s->prev;
  s->next = s->prev = NULL;
  s->ready = 0;
}

/* The owner keeps s, exhausted (no free block, fully carved), instead of
 * detaching it. The tag is in place before xlisted is 0: whoever turns
 * xlisted back to 1 reads it (notice). */
void _hak_slab_keep(struct hak_heap *h, struct hak_slab *s) {
  HAK_ASSERT(atomic_load(&s->xowner) == h && !s->ready && !s->free && s->carved == s->capacity);
  h->stats.slabs_kept++;
  atomic_store(&s->xowner, kept_tag(h));
  atomic_store(&s->xlisted, 0);
  if (atomic_load(&s->xremote) && atomic_exchange(&s->xlisted, 1) == 0) {
    atomic_store(&s->xowner, h);     /* a free came in meanwhile: s stays h's */
    ready_link(h, s);
  }
}

/* s, listed by the caller (xlisted 1), goes ownerless to the shared
 * pool, with holder's thread as the one that holds its blocks (NULL: no
 * hint). */
static void to_pool(struct hak_slab *s, struct hak_heap *holder) {
  if (holder) atomic_store_explicit(&hak_slab_cold(s)->xaffine, holder, memory_order_relaxed);
  atomic_store(&s->xowner, NULL);
  partial_push(s);
}

/* The owner freed into its ready slab s: when that emptied it, s goes to
 * the shared pool, where an empty slab waits for the purge (or the next
 * refill) as a detached one did, so a thread that frees a peak gives it
 * back. (Released to its SuperSlab at once, a slab emptied and refilled
 * in turn faulted its pages in again: lua +6.7% faults, +3.1% peak RSS.) */
static void ready_freed(struct hak_heap *h, struct hak_slab *s) {
  if (!all_remote(s)) return;
  ready_unlink(h, s);
  to_pool(s, h);
}

/* A free by h (NULL: a thread without a heap) turned s's xlisted from 0 to
 * 1: s was ownerless and goes to the shared list, or kept, and goes back to
 * its owner when h is the owner, else to the shared list, with h's thread
 * as the one that holds its blocks (the adoption hint). */
static void notice(struct hak_heap *h, struct hak_slab *s) {
  uintptr_t o = (uintptr_t)atomic_load(&s->xowner);
  if (o & HAK_KEPT) {
    if (h && (struct hak_heap *)(o & ~HAK_KEPT) == h) {
      atomic_store(&s->xowner, h);
      ready_link(h, s);
      ready_freed(h, s);             /* a run of all its blocks */
      return;
    }
    to_pool(s, h);
    return;
  }
  HAK_ASSERT(!o);
  partial_push(s);
}

bool _hak_slab_has_reclaimable(const struct hak_heap *h, unsigned c) { return h->ready[c] != NULL; }

/* A kept slab of h and class c that h freed into, back in use (the caller
 * makes it current), or NULL. */
static struct hak_slab *ready_pop(struct hak_heap *h, unsigned c) {
  struct hak_slab *s = h->ready[c];
  if (!s) return NULL;
  HAK_ASSERT(s->ready && atomic_load(&s->xowner) == h && atomic_load(&s->xlisted) == 1 && _hak_slab_has_recycled(s));
  ready_unlink(h, s);
  return s;
}

struct hak_slab *_hak_slab_reclaim(struct hak_heap *h, unsigned c) {
  struct hak_slab *s = ready_pop(h, c);
  if (s) h->stats.slabs_reclaimed++;
  return s;
}

/* Class c's ready list detached (each slab released when empty, else to
 * the shared pool): a class the thread left idle, malloc_trim, exit. */
void _hak_slab_release_ready(struct hak_heap *h, unsigned c) {
  for (struct hak_slab *s; (s = ready_pop(h, c)) != NULL; ) _hak_slab_detach(h, s);
}

/* Adoption looks at this many of the newest ownerless slabs for one whose
 * blocks the adopting thread holds (xaffine), so that every thread's blocks
 * stay in slabs of their own, as in a heap of pages per thread. Taken by
 * age alone, a slab held other threads' live blocks between the adopter's:
 * in larson each thread's blocks then spread over more pages and cache
 * lines (docs/experiments.md, "Adoption by affinity"). */
#define HAK_ADOPT_LOOK 16u

/* The link to the slab of the shared pool h should adopt: the first of the
 * newest HAK_ADOPT_LOOK whose blocks h holds, else the newest (NULL when
 * the pool is empty). Pool lock held. */
static struct hak_slab **adopt_link(struct hak_pool *pool, const struct hak_heap *h) {
  struct hak_slab **link = &pool->partial;
  for (unsigned k = 0; k < HAK_ADOPT_LOOK && *link; k++, link = &(*link)->next)
    if (atomic_load_explicit(&hak_slab_cold(*link)->xaffine, memory_order_relaxed) == h) return link;
  return &pool->partial;
}

/* A slab for heap h: an ownerless one from the shared pool (adopted: its
 * own blocks' first, else the newest), else a fresh one; with fresh_ok
 * false, only an adopted one. NULL when there is none (out of memory, or
 * no ownerless slab). */
struct hak_slab *_hak_slab_acquire(struct hak_heap *h, unsigned c, bool fresh_ok, bool *adopted) {
  struct hak_pool *pool = &_hak_slab_pools[c];
  hak_lock(&pool->lock);
  struct hak_slab **link = adopt_link(pool, h), *s = *link;
  if (s) {
    HAK_ASSERT(atomic_load(&s->xowner) == NULL && atomic_load(&s->xlisted) == 1);
    *link = s->next;
    npartial_add(pool, -1);
    s->next = NULL;
  }
  *adopted = s != NULL;
  bool resident = true;
  if (!s && fresh_ok) s = _hak_superslab_fresh_slab(c, &resident);
  hak_unlock(&pool->lock);
  if (!s) return NULL;
  if (!resident && !_hak_superslab_fill(s)) return NULL;   /* lost: never handed out */
  if (*adopted) {
    atomic_store(&s->xowner, h);
    return s;
  }
  /* A fresh Tiny slab of a class its thread has already carved a whole
   * slab of faults its pages in ahead of the carving (carve_blocks). */
  s->ahead = !HAK_HARDENED && !resident && h && c < HAK_NTINY && h->stats.carved[c] >= _hak_classes[c].slab_blocks;
  if (s->ahead) hak_slab_cold(s)->populated = 0;
  s->free = NULL;
  s->carved = 0;
  s->used = 0;
  atomic_store_explicit(&s->xremote, 0, memory_order_relaxed);
  atomic_store_explicit(&s->xlisted, 1, memory_order_relaxed);
  atomic_store(&s->xowner, h);
  return s;
}

/* Pushes the chain head..tail (n blocks of s) onto s's remote list, and
 * makes s reachable if it was unlisted (ownerless or kept: notice). */
static void remote_push(struct hak_heap *h, struct hak_slab *s, void **head, void **tail, unsigned n) {
  uintptr_t old = atomic_load_explicit(&s->xremote, memory_order_relaxed), x;
  do {
    hak_link_set(tail, HAK_REMOTE_HEAD(old));
    x = (uintptr_t)head | (uintptr_t)(HAK_REMOTE_COUNT(old) + n) << HAK_REMOTE_SHIFT;
  } while (!atomic_compare_exchange_weak(&s->xremote, &old, x));
  if (atomic_load(&s->xlisted) == 0 && atomic_exchange(&s->xlisted, 1) == 0) notice(h, s);
  if (h) h->stats.remote_frees += n;
}

/* Returns the first n blocks of a class-c chain (linked through word 0,
 * word 1 = key) to their slabs, and the rest of the chain: runs of blocks of
 * one slab go in one step, onto the local list when h owns the slab, else
 * onto its remote list (a first chunk's blocks onto its stash). h may be
 * NULL. One walk finds both the runs and the
 * cut (a spill walked its blocks twice: the cut took 10% of batch_4t's
 * samples). The bytes in use drop by all n first, in one atomic add (one a
 * run took 5.2% of batch_4t's samples: a spill of blocks from many slabs
 * is a run a block, its four threads on one gauge). Both in
 * docs/experiments.md, "Spills and refills without extra walks". */
void *_hak_slab_return(struct hak_heap *h, unsigned c, void *chain, unsigned n_all) {
  const uint32_t slab_bytes = _hak_classes[c].slab_bytes;
  _hak_stats_gauge_add(&_hak_stats_gauges.bytes_in_use, &_hak_stats_gauges.bytes_in_use_peak, -(int64_t)class_bytes(c, n_all));
  for (unsigned left = n_all; left; ) {
    void **head = chain, **tail = chain;
    HAK_ASSERT(head);
    unsigned n = 1;
    void **next = hak_link_next(tail, c);
    if (HAK_UNLIKELY(hak_chunk_holds((uintptr_t)head))) {   /* a first chunk's: its stash (region.c) */
      while (n < left && next && hak_chunk_holds((uintptr_t)next)) { tail = next; n++; next = hak_link_next(tail, c); }
      chain = next;
      left -= n;
      _hak_region_chunk_return(c, head, tail, n);
      continue;
    }
    struct hak_slab *s = _hak_region_slab_of((uintptr_t)head, c);
    while (n < left && next && (uintptr_t)next - s->start < slab_bytes) { tail = next; n++; next = hak_link_next(tail, c); }
    chain = next;
    left -= n;
    const struct hak_heap *owner = atomic_load_explicit(&s->xowner, memory_order_relaxed);
    if (h && owner == h) {
      HAK_ASSERT(heap_holds(h, c, s) || s->ready);
      hak_link_set(tail, s->free);
      s->free = head;
      HAK_ASSERT(n <= s->used);
      s->used -= n;
      _hak_slab_check(s);
      if (s->ready) ready_freed(h, s);
    } else {
      if (h && !owner) {                               /* h's thread holds its blocks */
        struct hak_slab_cold *cold = hak_slab_cold(s);
        if (atomic_load_explicit(&cold->xaffine, memory_order_relaxed) != h)
          atomic_store_explicit(&cold->xaffine, h, memory_order_relaxed);
      }
      remote_push(h, s, head, tail, n);
    }
  }
  return chain;
}

/* Empty slabs on the shared pool's list go back to their SuperSlabs (the
 * purge: the pool lock held makes us their owner). */
void _hak_slab_release_empty(struct hak_pool *pool) {
  struct hak_slab **link = &pool->partial;
  while (*link) {
    struct hak_slab *s = *link;
    HAK_ASSERT(atomic_load(&s->xowner) == NULL && atomic_load(&s->xlisted) == 1);
    if (take_if_empty(s)) {
      *link = s->next;
      npartial_add(pool, -1);
      _hak_superslab_release_slab(s);
    } else {
      link = &s->next;
    }
  }
}

/* Debug builds: the invariants written beside struct hak_slab. */
/* The blocks of the chain from b are block starts inside s; how many. */
static uint32_t chain_check(const struct hak_slab *s, void *const *b, uint32_t most) {
  const struct hak_class *k = &_hak_classes[s->cls];
  uint32_t n = 0;
  for (; b; b = hak_link_get(b)) {
    HAK_ASSERT((uintptr_t)b >= s->start && (uintptr_t)b < s->start + k->slab_bytes);
    HAK_ASSERT(((uintptr_t)b - s->start) % k->size == 0);
    HAK_ASSERT(++n <= most);
  }
  return n;
}

/* Debug builds: the invariants written beside struct hak_slab that one
 * slab shows (the owner, or the pool lock, calls it: blocks pushed on
 * xremote meanwhile are not taken off, so a snapshot of it stays valid). */
void _hak_slab_check(const struct hak_slab *s) {
  if (!HAK_DEBUG) return;
  HAK_ASSERT(s->carved <= s->capacity && s->used <= s->carved);
  if (s->ahead) {
    const uint32_t populated = hak_slab_cold(s)->populated;
    HAK_ASSERT(populated <= s->capacity && populated >= s->carved);
  }
  HAK_ASSERT(chain_check(s, s->free, s->carved) == (uint32_t)(s->carved - s->used));
  uintptr_t x = atomic_load_explicit(&s->xremote, memory_order_acquire);
  HAK_ASSERT(chain_check(s, (void *const *)HAK_REMOTE_HEAD(x), s->used) == HAK_REMOTE_COUNT(x));
  HAK_ASSERT(HAK_REMOTE_COUNT(x) <= s->used);
}

