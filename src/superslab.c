/* superslab.c — the SuperSlab lifecycle and its purge. A SuperSlab is mapped
 * at a region's top (region.c) with every slab free (EMPTY); it hands out
 * fresh slabs (HOT), takes empty slabs back (DRAINING once most are free,
 * EMPTY when all are), and the purge gives the pages of slabs that stayed
 * free for the purge delay back to the OS and unmaps purged EMPTY
 * SuperSlabs at the top of their region. Everything here runs under the
 * class's pool lock. */
#include "hakmem_internal.h"

/* Pages that move between classes (below): the classes a purge pass left
 * released slabs, the moved ranges still mapped as moved, and whether the
 * kernel refused a move (then none is tried again). */
static _Atomic uint64_t donor_classes;
static _Atomic long moved_ranges;
static _Atomic bool moves_refused;
_Static_assert(HAK_SPAN_FIRST <= 64, "one bit per slab class in donor_classes");

static long moves_cap(void) {
  return atomic_load_explicit(&moves_refused, memory_order_relaxed) ? 0 : _hak_options_get(HAK_OPT_PAGE_MOVES);
}

/* A purge pass left class cls released slabs (pool lock held), which may
 * give their pages. Set by the passes only and cleared by a recipient that
 * finds none, so classes that have none cost recipients one look per pass,
 * not one per fresh slab (marking at each release saved no faults:
 * docs/experiments.md, "More donors for page moves"). */
static void may_give(unsigned cls) {
  uint64_t bit = 1ull << cls;
  if (moves_cap() && !(atomic_load_explicit(&donor_classes, memory_order_relaxed) & bit))
    atomic_fetch_or_explicit(&donor_classes, bit, memory_order_relaxed);
}

static void set_state(struct hak_superslab *ss, unsigned state) {
  if (ss->state == state) return;
  atomic_fetch_sub(&_hak_stats_gauges.ss_count[ss->state], 1);
  atomic_fetch_add(&_hak_stats_gauges.ss_count[state], 1);
  ss->state = (uint8_t)state;
}

/* Debug builds: the invariants written beside struct hak_superslab, for a
 * mapped SuperSlab. */
static void ss_check(const struct hak_superslab *ss) {
  if (!HAK_DEBUG) return;
  unsigned free = 0;
  for (unsigned i = 0; i < ss->nslabs; i++) {
    const struct hak_slab *s = &ss->slabs[i];
    const uint32_t touched = ss->cold[i].touched;
    free += s->state == HAK_SLAB_FREE;
    HAK_ASSERT(touched <= s->capacity && (s->state != HAK_SLAB_FREE || s->dirty || !touched));
    HAK_ASSERT(!s->purged || (s->state == HAK_SLAB_FREE && !s->dirty));
  }
  HAK_ASSERT(ss->free_slabs == free);
  HAK_ASSERT((ss->state == HAK_SS_EMPTY) == (ss->free_slabs == ss->nslabs));
  HAK_ASSERT(ss->state != HAK_SS_DRAINING ||
             ss->free_slabs * HAK_SS_DRAIN_DEN >= ss->nslabs * HAK_SS_DRAIN_NUM);
}

/* ss was just mapped (region.c): every slab free and not resident. Its free
 * list runs in address order; a region's first SuperSlab starts it at the
 * class's slab color (class.c), wrapping once. A header kept from an earlier
 * mapping has its cold entries cleared (a new one's are zero and stay
 * untouched); a slab may still sit on the released stack, where the purge
 * and the takers drop it (on_released and its link stay as they are). */
void _hak_superslab_mapped(struct hak_superslab *ss, bool kept) {
  ss->free_slabs = ss->nslabs;
  ss->state = HAK_SS_EMPTY;
  ss->free_list = NULL;
  unsigned first = ss->index == 0 ? _hak_classes[ss->cls].first_slab : 0;
  for (unsigned n = ss->nslabs; n-- > 0;) {
    unsigned i = (n + first) % ss->nslabs;
    if (kept) {
      ss->cold[i].touched = 0;
      ss->cold[i].moved_in = 0;
      ss->cold[i].moved_out = 0;
    }
    ss->slabs[i].state = HAK_SLAB_FREE;
    ss->slabs[i].dirty = 0;
    ss->slabs[i].recycled = 0;
    ss->slabs[i].purged = 0;
    ss->slabs[i].next = ss->free_list;
    ss->free_list = &ss->slabs[i];
  }
  atomic_fetch_add(&_hak_stats_gauges.ss_count[HAK_SS_EMPTY], 1);
  ss_check(ss);
}

static void hot_push(struct hak_pool *pool, struct hak_superslab *ss) {
  if (ss->on_hot_list) return;
  ss->on_hot_list = 1;
  ss->next_hot = pool->hot;
  pool->hot = ss;
}

/* s, unlinked from ss's free list, becomes ACTIVE; ss gets state. */
static struct hak_slab *slab_take(struct hak_superslab *ss, struct hak_slab *s, unsigned state) {
  ss->free_slabs--;
  _hak_slab_pools[ss->cls].taken++;
  if (s->recycled)
    atomic_fetch_add_explicit(&_hak_stats_gauges.bytes_reused, (int64_t)_hak_classes[ss->cls].slab_bytes, memory_order_relaxed);
  /* Purged about a delay after it was freed, and wanted again within
   * another: a refault (purge.c). */
  if (s->purged && _hak_os_now_ms() - hak_slab_cold(s)->freed_ms < _hak_purge_delay_now() + _hak_purge_regret_ms())
    _hak_purge_regret(_hak_classes[ss->cls].slab_bytes);
  s->purged = 0;
  s->state = HAK_SLAB_ACTIVE;
  s->dirty = 0;
  s->next = NULL;
  set_state(ss, state);
  ss_check(ss);
  return s;
}

/* The newest released slab whose pages were not purged yet, unlinked from
 * its SuperSlab's free list (at most nslabs steps; usually its head), or
 * NULL. Entries taken again, purged or unmapped since they were pushed
 * leave the stack here.
 * Why: the SuperSlab order of _hak_superslab_fresh_slab (HOT first, so
 * DRAINING ones empty) hands out slabs without regard to their pages.
 * Under thread churn (many threads, each with its own slabs, exiting and
 * replaced) the slabs that exiting threads released waited in DRAINING
 * SuperSlabs until purged, while the new threads faulted in clean slabs of
 * HOT ones: with 1,000 threads alive, half of the fresh slabs were clean
 * and 60,000 dirty slabs were purged in a run of 2,000 threads
 * (docs/experiments.md, "A thousand threads"). Resident pages are reused
 * first (and the purge pass spares as many of them as the class took since
 * its last pass, below); the SuperSlab order still decides among the rest. */
static struct hak_slab *released_pop(struct hak_pool *pool) {
  struct hak_slab *s;
  while ((s = pool->released) != NULL) {
    struct hak_slab_cold *cold = hak_slab_cold(s);
    pool->released = cold->next_released;
    cold->on_released = 0;
    if (s->state == HAK_SLAB_FREE && s->dirty) break;
  }
  if (!s) return NULL;
  struct hak_slab **link = &hak_slab_ss(s)->free_list;
  while (*link != s) { HAK_ASSERT(*link != NULL); link = &(*link)->next; }
  *link = s->next;
  return s;
}

/* A free slab of class cls: a released one whose pages are resident
 * (*resident), else one from a SuperSlab with free slabs, mapping a new
 * SuperSlab (or opening a region) when there is none. */
struct hak_slab *_hak_superslab_fresh_slab(unsigned cls, bool *resident) {
  struct hak_pool *pool = &_hak_slab_pools[cls];
  struct hak_slab *s = released_pop(pool);
  *resident = s != NULL;
  if (s) {                                     /* a DRAINING SuperSlab stays one while it may */
    struct hak_superslab *from = hak_slab_ss(s);
    bool draining = (from->free_slabs - 1u) * HAK_SS_DRAIN_DEN >= from->nslabs * (unsigned)HAK_SS_DRAIN_NUM;
    return slab_take(from, s, from->state != HAK_SS_HOT && draining ? HAK_SS_DRAINING : HAK_SS_HOT);
  }
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
    if (!(ss = _hak_region_grow_class(cls))) return NULL;
    hot_push(pool, ss);
  }
  s = ss->free_list;
  ss->free_list = s->next;
  return slab_take(ss, s, HAK_SS_HOT);
}

/* An empty slab goes back to its SuperSlab. */
void _hak_superslab_release_slab(struct hak_slab *s) {
  struct hak_superslab *ss = hak_slab_ss(s);
  struct hak_slab_cold *cold = &ss->cold[s->index];
  HAK_ASSERT(s->state == HAK_SLAB_ACTIVE && s->used == 0);
  s->state = HAK_SLAB_FREE;
  s->free = NULL;
  if (s->carved > cold->touched) cold->touched = s->carved;   /* its blocks' keys stay until it is clean */
  s->carved = 0;
  s->dirty = 1;
  s->recycled = 1;
  cold->moved_out = 0;
  cold->freed_ms = _hak_os_now_ms();
  s->next = ss->free_list;
  ss->free_list = s;
  ss->free_slabs++;
  if (!cold->on_released) {
    struct hak_pool *pool = &_hak_slab_pools[s->cls];
    cold->on_released = 1;
    cold->next_released = pool->released;
    pool->released = s;
  }
  if (ss->free_slabs == ss->nslabs) set_state(ss, HAK_SS_EMPTY);
  else if (ss->free_slabs * HAK_SS_DRAIN_DEN >= ss->nslabs * HAK_SS_DRAIN_NUM)
    set_state(ss, HAK_SS_DRAINING);
  hot_push(&_hak_slab_pools[s->cls], ss);
  ss_check(ss);
}

/* ---- pages that move between classes ------------------------------------
 * A class region holds its class's blocks only, so the pages a class frees
 * could serve another class only through the OS: purged, then faulted in
 * and zeroed again. Instead, a fresh slab whose pages are not resident
 * takes the resident pages of other classes' free dirty slabs (newest
 * first): mremap(MREMAP_DONTUNMAP) moves their page tables over its own
 * range, with no fault and no zeroing; the donor's range stays mapped and
 * reads 0, as if purged. The span heap gives its free runs' pages the same
 * way, and takes class slabs' pages for the runs it hands out fresh
 * (span.c). A moved range may split the recipient's mapping in three, so
 * at most HAKMEM_PAGE_MOVES ranges are outstanding (they end when their
 * pages are unmapped); a refused move turns moves off. A recipient only
 * tries the donors' locks (a slab's holds none; the span heap's holds its
 * own), so no two wait on each other. */

/* The whole OS pages inside s, its SuperSlab's guard page excepted: pages
 * no other slab shares. */
static void slab_pages(const struct hak_slab *s, uintptr_t *from, uintptr_t *to) {
  uintptr_t end = s->start + _hak_classes[s->cls].slab_bytes;
  if (HAK_HARDENED && s->index == hak_slab_ss(s)->nslabs - 1) end -= _hak_os_page;
  *from = hak_page_up(s->start);
  *to = hak_page_down(end);
  if (*to < *from) *to = *from;
}

/* Moves up to need bytes of pool d's dirty released slabs (pool d locked) to
 * at, newest first, looking at 32 entries of the stack at most. Only
 * released slabs give: an empty slab still in the shared pool is its class's
 * own to reuse until a purge pass releases it. A released slab gives at
 * once: waiting half the purge delay kept a class's freed pages from the
 * others for half the time they stay resident, and programs whose size mix
 * shifts faulted pages in meanwhile (perl 5% more, size_shift 5%:
 * docs/experiments.md, "Pages that move at once"); where threads that exit
 * and are replaced reuse each other's slabs, moves are off
 * (HAK_MOVE_THREADS). A donor whose pages all went is clean and leaves the
 * stack; one that gave part of them keeps the rest for the next taker.
 * Returns the bytes moved; counts the moves in *calls (up to budget);
 * *failed: 1 when the kernel refused a move, 2 when a refused move left a
 * hole at at. */
static size_t move_from(unsigned d, uintptr_t at, size_t need, unsigned budget, unsigned *calls, int *failed) {
  struct hak_pool *pool = &_hak_slab_pools[d];
  size_t moved = 0;
  unsigned looked = 0;
  struct hak_slab *s, **link = &pool->released;
  while (moved < need && *calls < budget && looked++ < 32 && (s = *link) != NULL) {
    struct hak_slab_cold *cold = hak_slab_cold(s);
    if (s->state != HAK_SLAB_FREE || !s->dirty) {          /* taken or purged since: off the stack */
      *link = cold->next_released;
      cold->on_released = 0;
      continue;
    }
    uintptr_t from, to;
    slab_pages(s, &from, &to);
    from += (uintptr_t)cold->moved_out * _hak_os_page;
    size_t n = to > from ? to - from : 0;
    if (n > need - moved) n = need - moved;
    if (n) {
      _hak_slab_wipe_keys(s, from, from + n);
      int r = _hak_os_move_pages((void *)from, n, (void *)(at + moved));
      if (r <= 0) { *failed = r < 0 ? 2 : 1; break; }
      moved += n;
      ++*calls;
      if (from + n < to) { cold->moved_out = (uint8_t)(cold->moved_out + n / _hak_os_page); break; }
    }
    s->dirty = 0;                              /* every page gone: as if purged */
    cold->touched = 0;
    *link = cold->next_released;
    cold->on_released = 0;
  }
  if (!*link)                      /* walked to the end: nothing more to give until the next pass */
    atomic_fetch_and_explicit(&donor_classes, ~(1ull << d), memory_order_relaxed);
  return moved;
}

/* A move write-locks the mappings of both ranges (whole class regions, the
 * span heap) and the process's map lock while it runs, so every thread
 * that faults a page in there waits for it: with 1,000 threads on 2 cores
 * (bench_threads) the moves saved far fewer faults than the waits cost
 * (docs/experiments.md). Beyond HAK_MOVE_THREADS live threads, no moves. */
#define HAK_MOVE_THREADS 8u

/* How many ranges a recipient may move in now (at most 64); 0: none. */
unsigned _hak_superslab_move_budget(void) {
  if (_hak_thread_heaps_live() > HAK_MOVE_THREADS) return 0;
  long room = moves_cap() - atomic_load_explicit(&moved_ranges, memory_order_relaxed);
  return room <= 0 ? 0 : room < 64 ? (unsigned)room : 64;
}

/* A recipient moved ranges in (negative: ranges unmapped) and bytes; a
 * failure turns moves off. */
void _hak_superslab_moved(long ranges, size_t bytes, int failed) {
  if (ranges) atomic_fetch_add_explicit(&moved_ranges, ranges, memory_order_relaxed);
  if (bytes) atomic_fetch_add_explicit(&_hak_stats_gauges.bytes_moved, (int64_t)bytes, memory_order_relaxed);
  if (failed) atomic_store(&moves_refused, true);
}

/* Moves up to need bytes of the resident pages of free slabs of every
 * class but skip (HAK_NCLS or a span class: none) to at, whole OS pages; as move_from. */
size_t _hak_superslab_give(uintptr_t at, size_t need, unsigned skip, unsigned budget, unsigned *calls, int *failed) {
  uint64_t others = atomic_load_explicit(&donor_classes, memory_order_relaxed);
  if (skip < HAK_SPAN_FIRST) others &= ~(1ull << skip);
  size_t got = 0;
  while (others && got < need && !*failed && *calls < budget) {
    unsigned d = (unsigned)__builtin_ctzll(others);
    others &= others - 1;
    struct hak_pool *pool = &_hak_slab_pools[d];
    if (!hak_trylock(&pool->lock)) continue;
    got += move_from(d, at + got, need - got, budget, calls, failed);
    hak_unlock(&pool->lock);
  }
  return got;
}

/* s, a fresh slab of no resident pages, taken by the caller (no lock held),
 * gets as many resident pages as other classes, then the span heap, then the
 * Large range cache have free. false when a refused move left a hole in s: s is then kept out of
 * use. */
bool _hak_superslab_fill(struct hak_slab *s) {
  unsigned budget = _hak_superslab_move_budget(), calls = 0;
  if (!budget) return true;
  uintptr_t at, to;
  slab_pages(s, &at, &to);
  int failed = 0;
  size_t got = _hak_superslab_give(at, to - at, s->cls, budget, &calls, &failed);
  if (got < to - at && !failed && calls < budget) got += _hak_span_give(at + got, to - at - got, budget, &calls, &failed);
  if (got < to - at && !failed && calls < budget) got += _hak_large_give(at + got, to - at - got, budget, &calls, &failed);
  /* Ranges are counted as the slab will uncount them (its SuperSlab unmapped). */
  long ranges = 0;
  if (calls) {                                 /* a slab given nothing leaves its cold entry alone */
    struct hak_slab_cold *cold = hak_slab_cold(s);
    unsigned in = cold->moved_in + calls < UINT8_MAX ? cold->moved_in + calls : UINT8_MAX;
    ranges = (long)(in - cold->moved_in);
    cold->moved_in = (uint8_t)in;
  }
  _hak_superslab_moved(ranges, got, failed);
  return failed < 2;
}

/* ---- purging: memory back to the OS ------------------------------------------
 * Free slabs that stayed free for the purge delay give their pages back
 * (MADV_DONTNEED), except in the first HAKMEM_EMPTY_KEEP empty SuperSlabs,
 * kept committed for reuse; purged empty SuperSlabs at the top of a region
 * are unmapped. force (malloc_trim, out of memory): no delay, nothing kept. */

/* A free slab whose pages may go now: dirty and free for the delay. */
static bool purge_due(const struct hak_slab *s, size_t bytes, const struct hak_purge_policy *pp) {
  return s->state == HAK_SLAB_FREE && s->dirty && _hak_purge_due(pp, hak_slab_cold(s)->freed_ms, bytes);
}

/* Purges ss's free slabs by runs of neighbours (due, or purged before), one
 * madvise per run over the whole OS pages inside it: slabs of the colored
 * classes are not page multiples, so purging slab by slab would leave the
 * pages two free slabs share resident (about 6% of a 16 KiB class). */
static size_t purge_superslab(struct hak_superslab *ss, const struct hak_purge_policy *pp) {
  const struct hak_class *k = &_hak_classes[ss->cls];
  size_t released = 0;
  for (unsigned i = 0, j; i < ss->nslabs; i = j + 1) {
    bool due = false;
    for (j = i; j < ss->nslabs; j++) {
      const struct hak_slab *s = &ss->slabs[j];
      if (purge_due(s, k->slab_bytes, pp)) due = true;
      else if (s->state != HAK_SLAB_FREE || s->dirty) break;
    }
    if (!due) continue;
    uintptr_t from = hak_page_up(ss->base + (uintptr_t)i * k->slab_bytes);
    uintptr_t to = hak_page_down(ss->base + (uintptr_t)j * k->slab_bytes);
    if (to > from) _hak_os_purge((void *)from, to - from);
    for (unsigned x = i; x < j; x++) {
      if (!ss->slabs[x].dirty) continue;       /* purged before: its cold entry is clear */
      released += k->slab_bytes;
      ss->slabs[x].dirty = 0;
      ss->slabs[x].purged = 1;
      ss->cold[x].touched = 0;
    }
  }
  return released;
}

static bool ss_clean(const struct hak_superslab *ss) {
  for (unsigned i = 0; i < ss->nslabs; i++)
    if (ss->slabs[i].dirty) return false;
  return true;
}

/* Unmaps the purged EMPTY SuperSlabs at the top of r, so the address space
 * comes back too, not only the pages. SuperSlabs below a live one stay
 * mapped. Returns the bytes unmapped. */
static size_t shrink(struct hak_region *r) {
  size_t released = 0;
  struct hak_superslab *ss;
  while ((ss = _hak_region_top(r)) != NULL && ss->state == HAK_SS_EMPTY && ss_clean(ss)) {
    _hak_region_unmap_top(r);
    atomic_fetch_sub(&_hak_stats_gauges.ss_count[HAK_SS_EMPTY], 1);
    long moved = 0;
    for (unsigned i = 0; i < ss->nslabs; i++) moved += ss->cold[i].moved_in;
    _hak_superslab_moved(-moved, 0, 0);
    ss->free_list = NULL;
    ss->free_slabs = 0;
    released += _hak_classes[r->cls].ss_bytes;
  }
  return released;
}

/* Drops unmapped SuperSlabs from the pool's hot list. */
static void prune_hot(struct hak_pool *pool) {
  struct hak_superslab **link = &pool->hot;
  while (*link) {
    struct hak_superslab *ss = *link;
    if (ss->index >= ss->region->ss_mapped) { ss->on_hot_list = 0; *link = ss->next_hot; }
    else link = &ss->next_hot;
  }
}

/* As many released slabs as were taken since the last pass stay resident,
 * the newest first (they are taken first): under that demand they would be
 * taken again within a pass, and fault in again. When the demand stops,
 * the next pass purges them. Entries taken again or purged leave the stack. */
static void spare_released(struct hak_pool *pool, const struct hak_purge_policy *pp) {
  uint32_t spare = pp->force ? 0 : pool->taken;
  pool->taken = 0;
  for (struct hak_slab **at = &pool->released, *s; spare && (s = *at) != NULL; ) {
    struct hak_slab_cold *cold = hak_slab_cold(s);
    if (s->state == HAK_SLAB_FREE && s->dirty) { cold->freed_ms = pp->now_ms; spare--; at = &cold->next_released; }
    else { *at = cold->next_released; cold->on_released = 0; }
  }
}

/* Debug builds: the invariants written beside struct hak_pool (the stack's
 * side; a slab off the stack with on_released set would be pushed never). */
static void released_check(const struct hak_pool *pool, unsigned c) {
  if (!HAK_DEBUG) return;
  for (const struct hak_slab *s = pool->released; s; s = hak_slab_cold(s)->next_released)
    HAK_ASSERT(hak_slab_cold(s)->on_released == 1 && s->cls == c);
}

/* One class: empty ownerless slabs back to their SuperSlabs, the released
 * slabs the demand will take again spared, then the SuperSlabs' free slabs
 * purged, then the regions shrunk. */
static size_t purge_class(unsigned c, const struct hak_purge_policy *pp) {
  struct hak_pool *pool = &_hak_slab_pools[c];
  size_t released = 0;
  /* A class with no region yet has nothing to give back; its lock is not
   * written (after a fork, a write copies the pools' page). */
  if (!__atomic_load_n(&pool->regions, __ATOMIC_RELAXED)) return 0;
  hak_lock(&pool->lock);
  _hak_slab_release_empty(pool);
  spare_released(pool, pp);
  released_check(pool, c);
  long kept = 0;
  for (struct hak_superslab *ss = pool->hot; ss; ss = ss->next_hot) {
    if (ss->state == HAK_SS_EMPTY && !pp->force && kept < pp->keep) { kept++; continue; }
    released += purge_superslab(ss, pp);
  }
  for (struct hak_region *r = pool->regions; r; r = r->next) released += shrink(r);
  prune_hot(pool);
  if (pool->released) may_give(c);
  hak_unlock(&pool->lock);
  return released;
}

size_t _hak_superslab_purge(const struct hak_purge_policy *pp) {
  size_t released = 0;
  for (unsigned c = 0; c < HAK_NCLS; c++) released += purge_class(c, pp);
  return released;
}

