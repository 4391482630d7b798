/* region.c — class regions, SuperSlabs and the ownership map.
 *
 * Every class gets a 4 GiB-aligned slot of address space (a region) that it
 * fills from the bottom, one SuperSlab at a time, with fixed-address
 * mappings that never replace anything. The ownership map (_hak_map) has one
 * entry per slot; free validates a pointer with it in O(1) without touching
 * unmapped memory. SuperSlab headers live out of line in the region's
 * directory. All functions that change a class's regions run under that
 * class's pool lock; choosing a slot also takes slot_lock. */
#include "hakmem_internal.h"

#include <errno.h>

struct hak_map _hak_map;

/* A class's first region is its home slot, HAK_HOME_BASE + HAK_FRONT(cls):
 * 16 TiB up on x86-64, far from where Linux puts programs, libraries, heaps
 * and stacks. Other regions (a home slot taken by someone else, or full)
 * take slots from HAK_FIRST_OTHER up. Where the home slots are low (4 to 244
 * GiB), that is 16 TiB, or HAK_FIRST_SLOT (256 GiB) when 16 TiB is beyond a
 * small address space (39-bit aarch64) or ThreadSanitizer's ranges. */
#if HAK_HOME_BASE == 0 && !defined(__SANITIZE_THREAD__)
#define HAK_FIRST_OTHER     4096u
#else
#define HAK_FIRST_OTHER     HAK_FIRST_SLOT
#endif
#define HAK_SLOT_TRIES      256u
static hak_lock_t slot_lock;
static unsigned next_slot = HAK_FIRST_OTHER;

/* Bytes of r mapped so far, from its base. */
static uint64_t region_mapped(const struct hak_region *r) {
  return (uint64_t)__atomic_load_n(&r->ss_mapped, __ATOMIC_RELAXED) * _hak_classes[r->cls].ss_bytes;
}

/* Publishes the number of block starts below the end of r's mapped part. */
static void map_publish_end(struct hak_region *r, const struct hak_class *k) {
  uint64_t blocks = (region_mapped(r) + k->size - 1) / k->size;
  __atomic_store_n(&_hak_map.limit[r->slot], blocks * k->magic_unit, __ATOMIC_RELEASE);
}

const struct hak_region *_hak_region_holding(uintptr_t a) {
  if (a >> HAK_REGION_SHIFT >= HAK_REGION_SLOTS) return NULL;
  const struct hak_region *r = _hak_map.region[a >> HAK_REGION_SHIFT];
  return r && a < r->base + region_mapped(r) ? r : NULL;
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

static struct hak_superslab *ss_header(struct hak_region *r, uint32_t index) {
  const struct hak_class *k = &_hak_classes[r->cls];
  if (!dir_reserve(r, index)) return NULL;
  struct hak_superslab *ss = *dir_slot(r, index);
  if (ss) return ss;                           /* mapped before, header kept */
  ss = _hak_os_meta_alloc(sizeof *ss + k->ss_slabs * sizeof(struct hak_slab));
  if (!ss) return NULL;
  ss->base = r->base + (uint64_t)index * k->ss_bytes;
  ss->region = r;
  ss->index = index;
  ss->cls = r->cls;
  ss->nslabs = (uint16_t)k->ss_slabs;
  for (unsigned i = 0; i < k->ss_slabs; i++) {
    struct hak_slab *s = &ss->slabs[i];
    s->cls = r->cls;
    s->index = (uint8_t)i;
    s->ss = ss;
    s->start = ss->base + (uint64_t)i * k->slab_bytes;
    s->capacity = k->slab_blocks;
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
  struct hak_superslab *ss = ss_header(r, r->ss_mapped);
  if (!ss) { _hak_os_unmap((void *)at, k->ss_bytes); return NULL; }
  r->ss_mapped++;
  ss->free_slabs = ss->nslabs;
  ss->state = HAK_SS_EMPTY;
  ss->free_list = NULL;
  for (int i = ss->nslabs - 1; i >= 0; i--) {
    ss->slabs[i].state = HAK_SLAB_FREE;
    ss->slabs[i].dirty = 0;
    ss->slabs[i].recycled = 0;
    ss->slabs[i].next = ss->free_list;
    ss->free_list = &ss->slabs[i];
  }
  atomic_fetch_add(&_hak_gauges.ss_count[HAK_SS_EMPTY], 1);
  _hak_gauge_add(&_hak_gauges.bytes_mapped, &_hak_gauges.bytes_mapped_peak, (int64_t)k->ss_bytes);
  map_publish_end(r, k);
  return ss;
}

/* Claims a free 4 GiB slot for class cls and maps its first SuperSlab. */
static struct hak_region *region_open(unsigned cls) {
  const struct hak_class *k = &_hak_classes[cls];
  uint32_t ss_cap = (uint32_t)(HAK_REGION_BYTES / k->ss_bytes);
  struct hak_region *r = _hak_os_meta_alloc(sizeof *r);
  if (!r) return NULL;                         /* arena memory is not returned */
  hak_lock(&slot_lock);
  for (unsigned tries = 0; tries < HAK_SLOT_TRIES; tries++) {
    unsigned slot = tries == 0 ? HAK_HOME_BASE + HAK_FRONT(cls) : next_slot++;
    if (slot >= HAK_REGION_SLOTS) break;
    if (_hak_map.region[slot]) continue;
    uintptr_t base = (uintptr_t)slot << HAK_REGION_SHIFT;
    struct hak_superslab **dir = r->dir;       /* kept from a failed try */
    uint32_t dir_cap = r->dir_cap;
    *r = (struct hak_region){ .base = base, .slot = slot, .cls = (uint16_t)cls,
                              .ss_cap = ss_cap, .dir = dir, .dir_cap = dir_cap };
    if (region_grow(r)) {
      _hak_map.region[slot] = r;
      _hak_map.front[slot] = (uint8_t)HAK_FRONT(cls);
      HAK_ASSERT(slot >= HAK_FIRST_SLOT || slot == HAK_HOME_BASE + HAK_FRONT(cls));
      __atomic_store_n(&_hak_map.magic[slot], k->magic, __ATOMIC_RELEASE);
      map_publish_end(r, k);
      hak_unlock(&slot_lock);
      r->next = _hak_pools[cls].regions;
      _hak_pools[cls].regions = r;
      return r;
    }
    if (tries == 0) continue;                  /* the home slot is taken */
    if (errno == ENOMEM && tries == 1 && HAK_FIRST_OTHER > HAK_FIRST_SLOT) {
      /* Either out of memory or above the top of a small address space:
       * try once low before giving up. */
      next_slot = HAK_FIRST_SLOT;
      continue;
    }
    if (errno != EEXIST) break;                /* out of memory: give up now */
  }
  hak_unlock(&slot_lock);
  return NULL;
}

void _hak_region_set_state(struct hak_superslab *ss, unsigned state) {
  if (ss->state == state) return;
  atomic_fetch_sub(&_hak_gauges.ss_count[ss->state], 1);
  atomic_fetch_add(&_hak_gauges.ss_count[state], 1);
  ss->state = (uint8_t)state;
}

static void hot_push(struct hak_pool *pool, struct hak_superslab *ss) {
  if (ss->on_hot_list) return;
  ss->on_hot_list = 1;
  ss->next_hot = pool->hot;
  pool->hot = ss;
}

/* A free slab of class cls, from a SuperSlab with free slabs, mapping a new
 * SuperSlab (or opening a region) when there is none. Pool lock held. */
struct hak_slab *_hak_region_fresh_slab(unsigned cls) {
  struct hak_pool *pool = &_hak_pools[cls];
  struct hak_superslab **link = &pool->hot, *ss = NULL, *fallback = NULL;
  while (*link) {                              /* drop full ones, find a HOT one */
    struct hak_superslab *x = *link;
    if (x->free_slabs == 0) { x->on_hot_list = 0; *link = x->next_hot; continue; }
    if (x->state == HAK_SS_HOT) { ss = x; break; }
    if (!fallback || (fallback->state == HAK_SS_EMPTY && x->state == HAK_SS_DRAINING)) fallback = x;
    link = &x->next_hot;
  }
  if (!ss) ss = fallback;                      /* DRAINING (then EMPTY) only if no HOT */
  if (!ss) {
    for (struct hak_region *r = pool->regions; r && !ss; r = r->next)
      if (!r->full) ss = region_grow(r);
    if (!ss && region_open(cls)) ss = *dir_slot(pool->regions, 0);
    if (!ss) return NULL;
    hot_push(pool, ss);
  }
  struct hak_slab *s = ss->free_list;
  ss->free_list = s->next;
  ss->free_slabs--;
  if (s->recycled)
    atomic_fetch_add_explicit(&_hak_gauges.bytes_reused, (int64_t)_hak_classes[cls].slab_bytes, memory_order_relaxed);
  s->state = HAK_SLAB_ACTIVE;
  s->dirty = 0;
  s->next = NULL;
  _hak_region_set_state(ss, HAK_SS_HOT);
  return s;
}

/* An empty slab goes back to its SuperSlab. Pool lock held. */
void _hak_region_release_slab(struct hak_slab *s) {
  struct hak_superslab *ss = s->ss;
  HAK_ASSERT(s->state == HAK_SLAB_ACTIVE && s->used == 0);
  s->state = HAK_SLAB_FREE;
  s->free = NULL;
  s->nfree = 0;
  s->carved = 0;
  s->dirty = 1;
  s->recycled = 1;
  s->freed_ms = _hak_os_now_ms();
  s->next = ss->free_list;
  ss->free_list = s;
  ss->free_slabs++;
  if (ss->free_slabs == ss->nslabs) _hak_region_set_state(ss, HAK_SS_EMPTY);
  else if (ss->free_slabs * HAK_SS_DRAIN_DEN >= ss->nslabs * HAK_SS_DRAIN_NUM)
    _hak_region_set_state(ss, HAK_SS_DRAINING);
  hot_push(&_hak_pools[s->cls], ss);
}

/* The slab holding block address a of class cls (a already validated). */
struct hak_slab *_hak_region_slab_of(uintptr_t a, unsigned cls) {
  const struct hak_class *k = &_hak_classes[cls];
  struct hak_region *r = _hak_map.region[hak_map_slot(a)];
  uint64_t off = a - r->base;
  uint64_t ss_index = off / k->ss_bytes;
  struct hak_superslab *ss = *dir_slot(r, (uint32_t)ss_index);
  return &ss->slabs[(off - ss_index * k->ss_bytes) / k->slab_bytes];
}

static bool ss_clean(const struct hak_superslab *ss) {
  for (unsigned i = 0; i < ss->nslabs; i++)
    if (ss->slabs[i].dirty) return false;
  return true;
}

/* Unmaps the purged EMPTY SuperSlabs at the top of r (lowering its end
 * first), so the address space comes back too, not only the pages.
 * SuperSlabs below a live one stay mapped: free must be able to read any
 * address under end. Pool lock held. Returns the bytes unmapped. */
size_t _hak_region_shrink(struct hak_region *r) {
  const struct hak_class *k = &_hak_classes[r->cls];
  size_t released = 0;
  while (r->ss_mapped && (*dir_slot(r, r->ss_mapped - 1))->state == HAK_SS_EMPTY &&
         ss_clean(*dir_slot(r, r->ss_mapped - 1))) {
    struct hak_superslab *ss = *dir_slot(r, --r->ss_mapped);
    map_publish_end(r, k);
    _hak_os_unmap((void *)ss->base, k->ss_bytes);
    atomic_fetch_sub(&_hak_gauges.ss_count[HAK_SS_EMPTY], 1);
    _hak_gauge_add(&_hak_gauges.bytes_mapped, &_hak_gauges.bytes_mapped_peak, -(int64_t)k->ss_bytes);
    ss->free_list = NULL;
    ss->free_slabs = 0;
    released += k->ss_bytes;
  }
  if (released) r->full = false;
  return released;
}

/* Drops unmapped SuperSlabs from the pool's hot list. Pool lock held. */
void _hak_region_prune_hot(struct hak_pool *pool) {
  struct hak_superslab **link = &pool->hot;
  while (*link) {
    struct hak_superslab *ss = *link;
    if (ss->index >= ss->region->ss_mapped) { ss->on_hot_list = 0; *link = ss->next_hot; }
    else link = &ss->next_hot;
  }
}
