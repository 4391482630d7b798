/* heap.c — first-class heaps: hak_heap_new, the hak_heap_malloc family,
 * hak_heap_destroy (every block freed at once) and hak_heap_delete (the
 * heap goes, its blocks stay valid and are freed by free).
 *
 * A heap owns its memory, apart from the thread heaps: segments of HEAP_SEG
 * bytes, aligned to HEAP_SEG, each carved into blocks of one of the heap's
 * size classes (block k at base + k * size, so a block of a power-of-two
 * size is aligned to it), and a mapping of its own for every block above
 * HEAP_SMALL_MAX. None of it lies in a class region: the ownership map has
 * no entry for it, the inline free sends its blocks to the slow free
 * (api.c), and the slow free asks _hak_heap_free, which finds the segment
 * in the segment map (one entry per HEAP_SEG of address space) with two loads.
 *
 * Threads (mimalloc's rule): the thread that creates a heap owns it; only it
 * allocates from the heap, destroys or deletes it (another thread gets one
 * line on stderr and abort, in every build). Any thread frees its blocks
 * with free. The owner's frees go on the segment's free list; other
 * threads' on the heap's remote stack (xremote), which the owner gives back
 * to the segments when a class runs dry. A thread that exits deletes the
 * heaps it still owns (as mimalloc does): their blocks stay valid.
 *
 * Destroy and delete first detach every segment (seg->xheap: NULL, or the
 * orphans) and then wait until no remote free is in flight (xfreeing): a
 * remote free raises xfreeing, then checks that the segment is still its
 * heap's (both sequentially consistent, so either the free sees the
 * detached segment or the destroy sees the free). So a free racing with a
 * destroy either lands before it (the destroy frees that block with the
 * rest) or comes after it, a free of a block already freed: it finds no
 * heap and is reported as an invalid pointer (or counted and ignored,
 * HAKMEM_INVALID_FREE=ignore) as long as no new mapping took the address.
 * A deleted heap's segments with live blocks become orphans: their frees
 * take the heap lock, and a segment is given back when its last block goes.
 * Segments given back stay mapped, up to HEAP_CACHE_SEGS (seg_unmap_locked),
 * their segment-map entries pointing at a header whose xheap is NULL: the guard
 * (_hak_heap_holds) then knows a free there for an invalid pointer. */
#include "hakmem_internal.h"

#include <errno.h>
#include <pthread.h>
#include <sched.h>

#define HEAP_SEG_SHIFT 20
#define HEAP_SEG       ((size_t)1 << HEAP_SEG_SHIFT)
#define HEAP_LEAF      (1u << (HAK_REGION_SHIFT - HEAP_SEG_SHIFT))  /* segment-map entries per 4 GiB */
#define HEAP_NCLS      48                   /* 16..128 by 16, then 4 per doubling to 128 KiB */
#define HEAP_SMALL_MAX (128u * 1024)
#define HEAP_LARGE     0xffffu              /* seg->cls of a block of its own mapping */
#define HEAP_MAGIC     0x68616b6865617021ull

/* One segment, or one Large block's mapping. Its header lives in the
 * metadata arena and is reused (free_segs).
 * Invariants: carved <= capacity; used + |free| == carved; every block on
 * free is a block start below carved whose word 1 holds free_key; xheap ==
 * h (a live heap) => the segment is on exactly one of h's lists: class
 * cls's avail or full list (where says which), h's empty list (used == 0:
 * segments kept for any class, nempty of them), or h's large list;
 * xheap == &orphans => on orphan_segs, used > 0; xheap == NULL => neither
 * mapped in the segment map nor on any list (a free header, or being unmapped).
 * A Large block: capacity == carved == used == 1, size == bytes. */
struct heap_seg {
  _Atomic(struct hak_heap_s *) xheap; /* owning heap; &orphans; NULL        */
  uintptr_t base;                    /* first block                          */
  size_t bytes;                      /* the mapping                          */
  uint32_t size;                     /* block size (Large: 0, see bytes)     */
  uint32_t capacity, carved, used;   /* blocks: in all, carved (written by the
                                        owner, read by remote frees), out    */
  uint16_t cls;                      /* class, or HEAP_LARGE                 */
  uint8_t where;                      /* enum seg_where: its list in the heap */
  uint32_t empty_ms;                 /* when it went on the empty list       */
  uint64_t magic, magic_unit;        /* hak_block_test's constants for size  */
  void *free;                        /* free blocks, linked by word 0        */
  struct heap_seg *prev, *next;      /* the list it is on                    */
};

enum seg_where { SEG_AVAIL, SEG_FULL, SEG_EMPTY };
struct heap_class { struct heap_seg *avail, *full; };
#define HEAP_KEEP_EMPTY 4                   /* empty segments a heap keeps without delay */

/* A heap. Invariants: magic == HEAP_MAGIC while it is live; only the owner
 * touches cls and large; xremote holds blocks of h's segments with
 * free_key in word 1, linked by word 0. */
struct hak_heap_s {
  uint64_t magic;
  const void *owner;                 /* &_hak_thread_tls of the owning thread */
  struct heap_class cls[HEAP_NCLS];
  struct heap_seg *large;            /* its Large blocks                      */
  struct heap_seg *empty;            /* empty segments, for any class         */
  uint32_t nempty;
  _Atomic uintptr_t xremote;         /* blocks freed by other threads (MPSC)  */
  _Atomic uint32_t xfreeing;         /* remote frees in flight (kept across reuse) */
  struct hak_heap_s *prev_owned, *next_owned;   /* the owner's heaps; next_owned: free heaps too */
};

typedef _Atomic(struct heap_seg *) seg_entry;
/* The segment map: a leaf by 4 GiB slot (leaves: metadata, never freed).
 * Its root (512 KiB) is a mapping of its own, made by the first segment, so
 * a process without heaps maps none of it; never unmapped. */
static _Atomic(seg_entry *) *seg_root;
/* One past the highest slot with a leaf: a lookup at or above it (every
 * free of a block that is not a heap's, such as a Large block) reads no
 * entry. 0 until the root is mapped (stored after it, with release). */
static _Atomic uintptr_t seg_end;
static struct heap_seg *free_segs, *orphan_segs;
static struct hak_heap_s *free_heaps, orphans;
static uintptr_t free_key;           /* word 1 of a free block; never a program's value */
static pthread_key_t owned_key;      /* the thread's heaps, deleted at its exit */
static pthread_once_t owned_once = PTHREAD_ONCE_INIT;

/* ---- size classes --------------------------------------------------------- */
static uint32_t class_size(unsigned c) {
  if (c < 8) return 16u * (c + 1);
  unsigned b = 7 + (c - 8) / 4, q = (c - 8) % 4 + 1;
  return (1u << b) + q * (1u << (b - 2));
}

HAK_FAST unsigned class_of(size_t n) {          /* n <= HEAP_SMALL_MAX */
  if (n <= 128) return n ? (unsigned)((n - 1) >> 4) : 0;
  unsigned b = 63u - (unsigned)__builtin_clzll(n - 1);   /* 2^b < n <= 2^(b+1) */
  size_t step = (size_t)1 << (b - 2);
  unsigned q = (unsigned)((n - ((size_t)1 << b) + step - 1) / step);
  return 8 + (b - 7) * 4 + q - 1;
}
_Static_assert(HEAP_NCLS == 8 + 4 * 10, "classes up to HEAP_SMALL_MAX = 2^17");

/* ---- the segment map --------------------------------------------------------- */
static struct heap_seg *seg_lookup(uintptr_t a) {
  if (a >> HAK_REGION_SHIFT >= atomic_load_explicit(&seg_end, memory_order_acquire)) return NULL;
  seg_entry *leaf = atomic_load_explicit(&seg_root[a >> HAK_REGION_SHIFT], memory_order_acquire);
  if (!leaf) return NULL;
  return atomic_load_explicit(&leaf[(uint32_t)a >> HEAP_SEG_SHIFT], memory_order_acquire);
}

/* Points the entries of s's mapping at s (or at NULL). Heap lock held. */
static bool seg_map_set(const struct heap_seg *s, struct heap_seg *to) {
  if (!seg_root && !(seg_root = _hak_os_map_table(HAK_REGION_SLOTS * sizeof *seg_root))) return !to;
  for (uintptr_t a = s->base; a < s->base + s->bytes; a += HEAP_SEG) {
    seg_entry *leaf = atomic_load_explicit(&seg_root[a >> HAK_REGION_SHIFT], memory_order_relaxed);
    if (!leaf) {
      if (!to) continue;
      if (!(leaf = _hak_os_meta_alloc(HEAP_LEAF * sizeof *leaf))) return false;
      atomic_store_explicit(&seg_root[a >> HAK_REGION_SHIFT], leaf, memory_order_release);
      if (a >> HAK_REGION_SHIFT >= atomic_load_explicit(&seg_end, memory_order_relaxed))
        atomic_store_explicit(&seg_end, (a >> HAK_REGION_SHIFT) + 1, memory_order_release);
    }
    atomic_store_explicit(&leaf[(uint32_t)a >> HEAP_SEG_SHIFT], to, memory_order_release);
  }
  return true;
}

/* ---- lists ------------------------------------------------------------------- */
static void list_push(struct heap_seg **head, struct heap_seg *s) {
  s->prev = NULL;
  s->next = *head;
  if (*head) (*head)->prev = s;
  *head = s;
}

static void list_unlink(struct heap_seg **head, struct heap_seg *s) {
  if (s->prev) s->prev->next = s->next; else *head = s->next;
  if (s->next) s->next->prev = s->prev;
  s->prev = s->next = NULL;
}

static struct heap_seg **seg_list(struct hak_heap_s *h, struct heap_seg *s) {
  if (h == &orphans) return &orphan_segs;
  if (s->cls == HEAP_LARGE) return &h->large;
  if (s->where == SEG_EMPTY) return &h->empty;
  return s->where == SEG_FULL ? &h->cls[s->cls].full : &h->cls[s->cls].avail;
}

/* Debug builds: the segment's invariants (its free list walked). */
static void seg_check(const struct heap_seg *s) {
  if (!HAK_DEBUG || s->cls == HEAP_LARGE) return;
  HAK_ASSERT(s->carved <= s->capacity && s->used <= s->carved);
  uint32_t n = 0;
  for (void **b = s->free; b; b = hak_link_get(b), n++) {
    HAK_ASSERT((uintptr_t)b >= s->base && ((uintptr_t)b - s->base) % s->size == 0);
    HAK_ASSERT(((uintptr_t)b - s->base) / s->size < s->carved && b[1] == (void *)free_key);
  }
  HAK_ASSERT(s->used + n == s->carved);
}

/* ---- mapping and unmapping ------------------------------------------------- */
static void gauge_mapped(int64_t bytes) {
  _hak_stats_gauge_add(&_hak_stats_gauges.bytes_mapped, &_hak_stats_gauges.bytes_mapped_peak, bytes);
}

/* Segments given back (destroy, retire) keep their address space, up to
 * HEAP_CACHE_SEGS of them: the next heap's segment costs no mmap. The
 * pages of HEAP_CACHE_DIRTY of them stay too (no page faults for a heap
 * made and destroyed in a loop); the others' are purged. Heap lock. */
#define HEAP_CACHE_SEGS  16
#define HEAP_CACHE_DIRTY 4
static struct heap_seg *cached_dirty, *cached_clean;
static unsigned ncached, ndirty;

/* A header for a mapping of bytes at base, entered in the segment map, owned by h. */
static struct heap_seg *seg_create(struct hak_heap_s *h, size_t bytes, size_t align, bool large) {
  if (bytes == HEAP_SEG && align == HEAP_SEG && !large) {   /* Large blocks are fresh: zero */
    hak_lock(&_hak_lock_set.user_heaps);
    struct heap_seg **from = cached_dirty ? &cached_dirty : &cached_clean, *s = *from;
    if (s) {                                 /* its segment-map entries were kept */
      *from = s->next;
      ncached--;
      ndirty -= from == &cached_dirty;
      s->next = NULL;
      atomic_store_explicit(&s->xheap, h, memory_order_release);
    }
    hak_unlock(&_hak_lock_set.user_heaps);
    if (s) return s;
  }
  void *base = _hak_os_map_aligned(bytes, align);
  if (!base && hak_malloc_trim(0)) base = _hak_os_map_aligned(bytes, align);
  if (!base) return NULL;
  hak_lock(&_hak_lock_set.user_heaps);
  struct heap_seg *s = free_segs;
  if (s) free_segs = s->next;
  else s = _hak_os_meta_alloc(sizeof *s);
  if (s) {
    *s = (struct heap_seg){ .base = (uintptr_t)base, .bytes = bytes };
    atomic_init(&s->xheap, h);
    if (!seg_map_set(s, s)) {
      seg_map_set(s, NULL);
      s->next = free_segs;
      free_segs = s;
      s = NULL;
    }
  }
  hak_unlock(&_hak_lock_set.user_heaps);
  if (!s) { _hak_os_unmap(base, bytes); return NULL; }
  gauge_mapped((int64_t)bytes);
  return s;
}

/* Gives back a detached segment (xheap NULL, no free in flight): its pages
 * purged into the cache, or unmapped and its header kept for the next.
 * Heap lock held. */
static void seg_unmap_locked(struct heap_seg *s) {
  HAK_ASSERT(atomic_load_explicit(&s->xheap, memory_order_relaxed) == NULL);
  if (s->bytes == HEAP_SEG && s->cls != HEAP_LARGE && ncached < HEAP_CACHE_SEGS) {
    struct heap_seg **to = &cached_dirty;
    if (ndirty < HEAP_CACHE_DIRTY) ndirty++;
    else { _hak_os_purge((void *)s->base, s->bytes); to = &cached_clean; }
    s->next = *to;
    *to = s;
    ncached++;
    return;
  }
  _hak_os_unmap((void *)s->base, s->bytes);   /* then the map: while mapped, the guard */
  seg_map_set(s, NULL);                       /* sees heap memory and probes none of it */
  gauge_mapped(-(int64_t)s->bytes);
  s->next = free_segs;
  free_segs = s;
}

/* Waits until no remote free into h is in flight. */
static void heap_quiesce(struct hak_heap_s *h) {
  while (atomic_load(&h->xfreeing) != 0) sched_yield();
}

/* The owner gives back a segment of h: detached, freed of remote frees in
 * flight, unmapped. */
static void seg_retire(struct hak_heap_s *h, struct heap_seg *s) {
  list_unlink(seg_list(h, s), s);
  atomic_store(&s->xheap, NULL);
  heap_quiesce(h);
  hak_lock(&_hak_lock_set.user_heaps);
  seg_unmap_locked(s);
  hak_unlock(&_hak_lock_set.user_heaps);
}

/* Empty segments beyond the HEAP_KEEP_EMPTY newest go back once unused for
 * HAKMEM_PURGE_DELAY_MS (checked when another empties, and when a class
 * runs dry). */
static void heap_trim_empty(struct hak_heap_s *h, uint32_t now_ms) {
  uint32_t delay = (uint32_t)_hak_options_get(HAK_OPT_PURGE_DELAY_MS), i = 0;
  for (struct heap_seg *s = h->empty, *next; s; s = next, i++) {
    next = s->next;
    if (i >= HEAP_KEEP_EMPTY && now_ms - s->empty_ms >= delay) {
      h->nempty--;
      seg_retire(h, s);
    }
  }
}

/* ---- blocks ------------------------------------------------------------------- */
/* Heap lists link through word 0 by the link contract (hakmem_internal.h):
 * plain in the default build, encoded in the hardened one, where the next
 * block a segment's free list names must be a block start of the segment. */
static void *seg_next(const struct heap_seg *s, void *const *b) {
  void *next = hak_link_get(b);
  uintptr_t a = (uintptr_t)next;
  if (HAK_LINK_CHECKS && next &&
      (a < s->base || a - s->base >= s->bytes || (a - s->base) % s->size != 0))
    _hak_guard_bad_heap_link(b, next, s->size);
  return next;
}

HAK_FAST void *seg_pop(struct heap_seg *s) {
  void **b = s->free;
  if (b) {
    s->free = seg_next(s, b);
  } else if (s->carved < s->capacity) {      /* a segment kept empty is not fresh */
    b = (void **)(s->base + (size_t)s->carved * s->size);
    __atomic_store_n(&s->carved, s->carved + 1, __ATOMIC_RELAXED);   /* remote frees read it */
  } else {
    return NULL;
  }
  b[1] = NULL;                                /* not free */
  s->used++;
  return b;
}

/* Is p a block of s that is out (not free)? Double frees abort. */
static bool seg_block_out(const struct heap_seg *s, void *p, const char *call) {
  uintptr_t a = (uintptr_t)p;
  if (a < s->base || a - s->base >= s->bytes) return false;
  if (s->cls == HEAP_LARGE) {
    if (a != s->base) return false;
  } else if (!hak_block_test((uint32_t)(a - s->base), s->magic,
                             __atomic_load_n(&s->carved, __ATOMIC_RELAXED) * s->magic_unit)) {
    return false;
  }
  if (((void **)p)[1] == (void *)free_key)
    _hak_guard_double_free(p, call, s->cls == HEAP_LARGE ? s->bytes : s->size);
  return true;
}

/* A block back to its segment, by h's owner (or, for orphans, under the
 * heap lock). An empty segment goes back to the OS unless it is its
 * class's first with room (kept for the next allocations). */
static void seg_free(struct hak_heap_s *h, struct heap_seg *s, void **b) {
  if (s->cls != HEAP_LARGE) {
    hak_link_set(b, s->free);
    b[1] = (void *)free_key;
    s->free = b;
    if (s->where == SEG_FULL && h != &orphans) {   /* behind the first: the first stays */
      struct heap_seg **avail = &h->cls[s->cls].avail;
      list_unlink(&h->cls[s->cls].full, s);
      s->where = SEG_AVAIL;
      struct heap_seg *first = *avail;
      if (!first) {
        list_push(avail, s);
      } else {
        s->prev = first;
        s->next = first->next;
        if (first->next) first->next->prev = s;
        first->next = s;
      }
    }
  }
  if (--s->used != 0) return;
  if (h == &orphans) {
    list_unlink(&orphan_segs, s);
    atomic_store(&s->xheap, NULL);
    seg_unmap_locked(s);
  } else if (s->cls == HEAP_LARGE) {
    seg_retire(h, s);
  } else if (h->cls[s->cls].avail != s) {   /* kept for the next segment of any class */
    seg_check(s);
    list_unlink(&h->cls[s->cls].avail, s);
    s->where = SEG_EMPTY;
    s->empty_ms = _hak_os_now_ms();
    list_push(&h->empty, s);
    if (++h->nempty > HEAP_KEEP_EMPTY) heap_trim_empty(h, s->empty_ms);
  }
}

/* The remote stack's blocks back to their segments (the owner). */
static void heap_collect(struct hak_heap_s *h) {
  void **b = (void **)atomic_exchange_explicit(&h->xremote, 0, memory_order_acquire);
  for (void **prev = NULL; b;) {
    struct heap_seg *s = seg_lookup((uintptr_t)b);
    if (HAK_UNLIKELY(!s)) _hak_guard_bad_heap_link(prev, b, 0);   /* a forged remote link */
    void **next = hak_link_get(b);
    HAK_ASSERT(s && atomic_load_explicit(&s->xheap, memory_order_relaxed) == h);
    seg_free(h, s, b);
    prev = b;
    b = next;
  }
}

/* Delete: the remote stack's blocks back to their segments, which stay
 * (seg_adopt decides). Heap lock held. */
static void heap_take_remote(struct hak_heap_s *h) {
  void **b = (void **)atomic_exchange_explicit(&h->xremote, 0, memory_order_acquire);
  for (void **prev = NULL; b;) {
    struct heap_seg *s = seg_lookup((uintptr_t)b);
    if (HAK_UNLIKELY(!s)) _hak_guard_bad_heap_link(prev, b, 0);   /* a forged remote link */
    void **next = hak_link_get(b);
    hak_link_set(b, s->free);
    s->free = b;
    s->used--;
    prev = b;
    b = next;
  }
}

/* ---- allocation ---------------------------------------------------------------- */
static void heap_check_owner(const struct hak_heap_s *h, const char *call) {
  if (HAK_UNLIKELY(!h || h->magic != HEAP_MAGIC)) _hak_guard_bad_pointer(h, call, "not a live heap");
  if (HAK_UNLIKELY(h->owner != (const void *)&_hak_thread_tls))
    _hak_guard_bad_pointer(h, call, "a heap of another thread: only its owner allocates, destroys or deletes");
}

/* Class c is dry: the remote frees come back, full segments move aside,
 * and a new segment is mapped when none has room. */
static HAK_SLOW void *class_alloc_slow(struct hak_heap_s *h, unsigned c) {
  heap_collect(h);
  if (h->nempty > HEAP_KEEP_EMPTY) heap_trim_empty(h, _hak_os_now_ms());
  struct heap_class *k = &h->cls[c];
  for (struct heap_seg *s; (s = k->avail) != NULL; ) {
    void *b = seg_pop(s);
    if (b) return b;
    seg_check(s);
    list_unlink(&k->avail, s);
    s->where = SEG_FULL;
    list_push(&k->full, s);
  }
  struct heap_seg *s = h->empty;
  if (s) {
    list_unlink(&h->empty, s);
    h->nempty--;
  } else if (!(s = seg_create(h, HEAP_SEG, HEAP_SEG, false))) {
    errno = ENOMEM;
    return NULL;
  }
  uint32_t size = class_size(c);
  s->cls = (uint16_t)c;
  s->size = size;
  s->magic = UINT64_MAX / size + 1 + ((size & (size - 1)) == 0);   /* floor(2^64 / size) + 1 */
  s->magic_unit = s->magic * size;
  s->capacity = (uint32_t)(HEAP_SEG / size);
  s->carved = s->used = 0;                   /* a cached segment may come from a destroy */
  s->free = NULL;
  s->where = SEG_AVAIL;
  list_push(&k->avail, s);
  return seg_pop(s);
}

static void *class_alloc(struct hak_heap_s *h, unsigned c) {
  struct heap_seg *s = h->cls[c].avail;
  void *b = s ? seg_pop(s) : NULL;
  return HAK_LIKELY(b != NULL) ? b : class_alloc_slow(h, c);
}

/* A block of its own mapping, aligned to align (>= HEAP_SEG): zero. It has
 * at least one page, also for n == 0 (hak_heap_aligned_alloc(h, 2 MiB, 0)):
 * a mapping of 0 bytes would be no mapping at all, with no segment-map entry,
 * and its address would read as not hakmem's (as in large.c). */
static void *large_alloc(struct hak_heap_s *h, size_t n, size_t align) {
  size_t bytes = n ? hak_page_up(n) : _hak_os_page;
  if (n > PTRDIFF_MAX || bytes < n) { errno = ENOMEM; return NULL; }
  struct heap_seg *s = seg_create(h, bytes, align, true);
  if (!s) { errno = ENOMEM; return NULL; }
  s->cls = HEAP_LARGE;
  s->capacity = s->carved = s->used = 1;
  list_push(&h->large, s);
  return (void *)s->base;
}

/* ---- the API ------------------------------------------------------------------ */
static void heap_thread_exit(void *arg) {
  struct hak_heap_s *h = arg;
  while (h) {
    struct hak_heap_s *next = h->next_owned;
    hak_heap_delete(h);
    h = next;
  }
}

static void owned_key_create(void) { pthread_key_create(&owned_key, heap_thread_exit); }

HAK_API hak_heap_t *hak_heap_new(void) {
  _hak_thread_init();
  pthread_once(&owned_once, owned_key_create);
  hak_lock(&_hak_lock_set.user_heaps);
  if (!free_key) free_key = ((uintptr_t)&free_key * 0x9E3779B97F4A7C15ull ^ _hak_os_now_ns()) | 1;
  struct hak_heap_s *h = free_heaps;
  if (h) free_heaps = h->next_owned;
  else h = _hak_os_meta_alloc(sizeof *h);
  hak_unlock(&_hak_lock_set.user_heaps);
  if (!h) { errno = ENOMEM; return NULL; }
  /* Not xfreeing: a remote free that read h from a segment of the heap
   * that had this header before may still add and then subtract 1 (it
   * finds its segment moved); a 0 written between would leave it at -1. */
  memset(h, 0, offsetof(struct hak_heap_s, xfreeing));
  h->prev_owned = NULL;
  if (HAK_DEBUG)
    for (unsigned c = 0; c < HEAP_NCLS; c++) HAK_ASSERT(class_of(class_size(c)) == c && class_of(class_size(c) + 1) == c + 1);
  h->magic = HEAP_MAGIC;
  h->owner = &_hak_thread_tls;
  h->next_owned = pthread_getspecific(owned_key);
  if (h->next_owned) h->next_owned->prev_owned = h;
  pthread_setspecific(owned_key, h);
  return h;
}

/* h leaves its owner's list and is kept for the next hak_heap_new. */
static void heap_release(struct hak_heap_s *h) {
  if (h->prev_owned) h->prev_owned->next_owned = h->next_owned;
  else pthread_setspecific(owned_key, h->next_owned);
  if (h->next_owned) h->next_owned->prev_owned = h->prev_owned;
  h->magic = 0;
  hak_lock(&_hak_lock_set.user_heaps);
  h->next_owned = free_heaps;
  free_heaps = h;
  hak_unlock(&_hak_lock_set.user_heaps);
}

/* Calls fn on every segment of h. */
static void heap_each_seg(struct hak_heap_s *h, void (*fn)(struct hak_heap_s *, struct heap_seg *)) {
  for (unsigned c = 0; c <= HEAP_NCLS; c++) {
    struct heap_seg *lists[2] = { c < HEAP_NCLS ? h->cls[c].avail : h->large, c < HEAP_NCLS ? h->cls[c].full : h->empty };
    for (unsigned i = 0; i < 2; i++)
      for (struct heap_seg *s = lists[i], *next; s; s = next) { next = s->next; fn(h, s); }
  }
}

static void seg_detach(struct hak_heap_s *h, struct heap_seg *s) { (void)h; atomic_store(&s->xheap, NULL); }
static void seg_orphan(struct hak_heap_s *h, struct heap_seg *s) { (void)h; atomic_store(&s->xheap, &orphans); }
static void seg_destroy(struct hak_heap_s *h, struct heap_seg *s) { (void)h; seg_unmap_locked(s); }

/* Moves a segment of a deleted heap to the orphans (or unmaps it when its
 * blocks are all free). Heap lock held. */
static void seg_adopt(struct hak_heap_s *h, struct heap_seg *s) {
  (void)h;
  seg_check(s);
  s->where = SEG_AVAIL;
  if (s->used == 0) {
    atomic_store(&s->xheap, NULL);
    seg_unmap_locked(s);
  } else {
    list_push(&orphan_segs, s);
  }
}

HAK_API void hak_heap_destroy(hak_heap_t *h) {
  if (!h) return;
  heap_check_owner(h, "hak_heap_destroy");
  heap_each_seg(h, seg_detach);
  heap_quiesce(h);
  atomic_store_explicit(&h->xremote, 0, memory_order_relaxed);   /* their blocks go too */
  hak_lock(&_hak_lock_set.user_heaps);
  heap_each_seg(h, seg_destroy);
  hak_unlock(&_hak_lock_set.user_heaps);
  heap_release(h);
}

HAK_API void hak_heap_delete(hak_heap_t *h) {
  if (!h) return;
  heap_check_owner(h, "hak_heap_delete");
  hak_lock(&_hak_lock_set.user_heaps);
  heap_each_seg(h, seg_orphan);
  heap_quiesce(h);                          /* the remote frees that still saw h */
  heap_take_remote(h);
  heap_each_seg(h, seg_adopt);
  hak_unlock(&_hak_lock_set.user_heaps);
  heap_release(h);
}

HAK_API void *hak_heap_malloc(hak_heap_t *h, size_t n) {
  heap_check_owner(h, "hak_heap_malloc");
  if (n > HEAP_SMALL_MAX) return large_alloc(h, n, HEAP_SEG);
  return class_alloc(h, class_of(n));
}

HAK_API void *hak_heap_calloc(hak_heap_t *h, size_t count, size_t size) {
  size_t n;
  if (__builtin_mul_overflow(count, size, &n)) { errno = ENOMEM; return NULL; }
  heap_check_owner(h, "hak_heap_calloc");
  if (n > HEAP_SMALL_MAX) return large_alloc(h, n, HEAP_SEG);   /* fresh mappings are zero */
  void *p = class_alloc(h, class_of(n));
  if (p) memset(p, 0, n);
  return p;
}

HAK_API void *hak_heap_aligned_alloc(hak_heap_t *h, size_t align, size_t n) {
  if (!align || (align & (align - 1))) { errno = EINVAL; return NULL; }
  heap_check_owner(h, "hak_heap_aligned_alloc");
  if (n <= HEAP_SMALL_MAX && align <= HEAP_SMALL_MAX)      /* a class of a multiple of align */
    for (unsigned c = class_of(n); c < HEAP_NCLS; c++)
      if (class_size(c) % align == 0) return class_alloc(h, c);
  return large_alloc(h, n, align > HEAP_SEG ? align : HEAP_SEG);
}

/* As realloc: a block that must move moves into h; p may be any block. */
HAK_API void *hak_heap_realloc(hak_heap_t *h, void *p, size_t n) {
  if (!p) return hak_heap_malloc(h, n);
  if (n == 0) { hak_free(p); return NULL; }
  heap_check_owner(h, "hak_heap_realloc");
  size_t old = hak_malloc_usable_size(p);
  if (n <= old && n >= old / 2) return p;
  void *q = hak_heap_malloc(h, n);
  if (!q) return NULL;
  memcpy(q, p, old < n ? old : n);
  hak_free(p);
  return q;
}

/* ---- the slow free's hooks -------------------------------------------------- */
/* A free by a thread other than the owner: onto h's remote stack, unless
 * destroy or delete detached the segment first (REMOTE_MOVED: look again). */
enum { REMOTE_PUSHED, REMOTE_BAD, REMOTE_MOVED };
static int remote_free(struct hak_heap_s *h, struct heap_seg *s, void **b, const char *call) {
  atomic_fetch_add(&h->xfreeing, 1);
  int r = REMOTE_MOVED;
  if (atomic_load(&s->xheap) == h) {
    r = REMOTE_BAD;
    if (seg_block_out(s, b, call)) {
      b[1] = (void *)free_key;
      uintptr_t head = atomic_load_explicit(&h->xremote, memory_order_relaxed);
      do hak_link_set(b, (void *)head);
      while (!atomic_compare_exchange_weak_explicit(&h->xremote, &head, (uintptr_t)b,
                                                    memory_order_release, memory_order_relaxed));
      r = REMOTE_PUSHED;
    }
  }
  atomic_fetch_sub_explicit(&h->xfreeing, 1, memory_order_release);
  return r;
}

/* The slow free's question: is p a block of a heap? Then it is freed (true). */
bool _hak_heap_free(void *p, const char *call) {
  struct heap_seg *s = seg_lookup((uintptr_t)p);
  if (!s) return false;
  for (;;) {
    struct hak_heap_s *h = atomic_load_explicit(&s->xheap, memory_order_acquire);
    if (!h) return false;                   /* destroyed, or a header being reused */
    if (h == &orphans) {
      hak_lock(&_hak_lock_set.user_heaps);
      bool ours = atomic_load_explicit(&s->xheap, memory_order_relaxed) == &orphans &&
                  seg_block_out(s, p, call);
      if (ours) seg_free(&orphans, s, p);
      hak_unlock(&_hak_lock_set.user_heaps);
      return ours;                          /* else detached, or not a block */
    }
    if (h->owner == (const void *)&_hak_thread_tls) {
      if (!seg_block_out(s, p, call)) return false;
      seg_free(h, s, p);
      return true;
    }
    int r = remote_free(h, s, p, call);
    if (r != REMOTE_MOVED) return r == REMOTE_PUSHED;
  }
}

/* The usable size of a live heap block, else 0. */
size_t _hak_heap_usable(const void *p) {
  struct heap_seg *s = seg_lookup((uintptr_t)p);
  if (!s || !atomic_load_explicit(&s->xheap, memory_order_acquire)) return 0;
  if (!seg_block_out(s, (void *)p, "malloc_usable_size")) return 0;
  return s->cls == HEAP_LARGE ? s->bytes : s->size;
}

/* For the guard's messages: does a lie in memory of the heaps (a segment,
 * live or cached, or a Large block)? Then it is no C library block. */
bool _hak_heap_holds(uintptr_t a) {
  const struct heap_seg *s = seg_lookup(a);
  return s && a - s->base < s->bytes;
}
