/* The size-class table against the code that relies on it: geometry
 * (slabs are whole blocks, Tiny slabs whole OS pages, SuperSlabs whole OS
 * pages, whatever the OS page: tests/test_pagesize.sh runs this test with
 * HAKMEM_PAGE_SIZE 16384 and 65536; the span classes have none),
 * the divisibility constant free
 * uses to reject interior pointers, the size lookup tables (smallest
 * serving class that holds n, at most 25% larger from 64 B up), split
 * classes (idle until the sizes asked of their coarse class gather in
 * their part), and aligned classes. */
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>
#include "testing.h"

#include <pthread.h>
#include "hakmem.h"
#include "hakmem_internal.h"

/* The page, modulo 2 MiB, of the block a region of Tiny class c carves
 * first: its slab color and its carve color. */
static unsigned hot_page(unsigned c) {
  const struct hak_class *k = &_hak_classes[c];
  uint64_t off = (uint64_t)k->first_slab * k->slab_bytes + (uint64_t)k->carve_first * k->size;
  return (unsigned)(off % (2u << 20) / HAK_PAGE_MIN);
}

static void check_geometry(void) {
  const size_t page = _hak_os_page, mid_slab = 2 * page > 65536 ? 2 * page : 65536;
  for (unsigned c = 0; c < HAK_NCLS; c++) {
    const struct hak_class *k = &_hak_classes[c];
    CHECKF(k->size % 16 == 0, "C%u size %u not a multiple of 16", c, k->size);
    CHECKF(k->size < HAK_PAGE_MIN || k->size % HAK_PAGE_MIN != 0, "C%u: %u-byte blocks would all start at one 4 KiB offset", c, k->size);
    if (c) CHECKF(k->size > _hak_classes[c - 1].size, "C%u sizes not increasing", c);
    if (c >= HAK_SPAN_FIRST) {                  /* page runs of the span heap: no slabs */
      CHECKF(k->slab_blocks == 0 && k->slab_bytes == 0 && k->ss_slabs == 0 && k->ss_bytes == 0,
             "C%u: a span class with slab geometry", c);
      CHECKF(k->tier == (c < HAK_NTINY + HAK_NL2 ? HAK_TIER_L2 : HAK_TIER_L25), "C%u tier %u", c, k->tier);
      continue;
    }
    CHECKF(c >= HAK_NTINY || k->slab_bytes % page == 0, "C%u slab %u not whole pages", c, k->slab_bytes);
    CHECKF(k->slab_bytes >= 2 * page, "C%u slab %u below two pages", c, k->slab_bytes);
    CHECKF(k->ss_bytes % page == 0, "C%u SuperSlab %llu not whole pages", c, (unsigned long long)k->ss_bytes);
    CHECKF(k->slab_bytes == k->slab_blocks * k->size, "C%u slab not whole blocks", c);
    CHECKF(k->slab_blocks >= 4 && k->ss_slabs >= 1 && k->ss_slabs <= 255, "C%u geometry", c);
    /* A mid slab holds the blocks it needs (4, 64 KiB, two pages), or at
     * most twice that where a SuperSlab of such slabs ending on a page
     * boundary would pass 2 MiB (bigger pages; the 32-block color cycle
     * of the classes from 5 to 14 KiB: class.c). */
    size_t need = (4 * k->size > mid_slab ? 4 * k->size : mid_slab + k->size - 1) / k->size;
    CHECKF(c < HAK_NTINY || (k->slab_blocks >= need && k->slab_blocks <= 2 * need - 1),
           "C%u: %u blocks per mid slab", c, k->slab_blocks);
    CHECKF(k->slab_blocks < (1u << (64 - HAK_REMOTE_SHIFT)), "C%u: remote counts overflow", c);
    CHECKF(k->ss_bytes == (uint64_t)k->ss_slabs * k->slab_bytes, "C%u SuperSlab bytes", c);
    CHECKF(k->first_slab < k->ss_slabs, "C%u: slab color %u past its SuperSlab", c, k->first_slab);
    /* The Tiny classes' regions start carving on different pages modulo
     * 2 MiB, a SuperSlab (a TLB's sets: class.c, the slab color). */
    for (unsigned d = 0; c < HAK_NTINY && d < c; d++)
      CHECKF(hot_page(d) != hot_page(c), "C%u and C%u start carving on page %u of 2 MiB", d, c, hot_page(c));
    /* A home region holds 16 SuperSlabs or more with 4 KiB pages, 3 or
     * more with 64 KiB ones (C44's SuperSlab is 16 MiB there). */
    CHECKF(HAK_HOME_BYTES / k->ss_bytes >= (_hak_os_page == HAK_PAGE_MIN ? 16u : 3u),
           "C%u: a home region holds %llu SuperSlabs", c, (unsigned long long)(HAK_HOME_BYTES / k->ss_bytes));
    unsigned want_tier = c < HAK_NTINY ? HAK_TIER_TINY : c < HAK_NTINY + HAK_NL2 ? HAK_TIER_L2 : HAK_TIER_L25;
    CHECKF(k->tier == want_tier, "C%u tier %u", c, k->tier);
  }
  /* Each tier's last class holds the tier's largest request, and the first
   * class of the next tier holds more. */
  CHECK(_hak_classes[HAK_NTINY - 1].size == HAK_TINY_MAX);
  CHECK(_hak_classes[HAK_NTINY + HAK_NL2 - 1].size >= HAK_L2_MAX);
  CHECK(_hak_classes[HAK_NTINY + HAK_NL2 - 2].size < HAK_L2_MAX);
  CHECK(_hak_classes[HAK_NCLS - 1].size >= HAK_MID_MAX);
  CHECK(_hak_classes[HAK_NCLS - 2].size < HAK_MID_MAX);
}

/* The fast path's block test, hak_block_test(x, magic, K * magic_unit),
 * against "x % size == 0 and x / size < K": for every offset of the first 4
 * slabs and a sample of the whole 4 GiB (block starts and their neighbours),
 * with K from one block to a full region. */
static unsigned misjudged(const struct hak_class *k, uint64_t blocks) {
  uint64_t limit = blocks * k->magic_unit;
  unsigned bad = 0;
  for (uint64_t x = 0; x < 4ull * k->slab_bytes; x++)
    bad += hak_block_test((uint32_t)x, k->magic, limit) != (x % k->size == 0 && x / k->size < blocks);
  for (uint64_t a = 0; a < HAK_REGION_BYTES; a += 999983)
    for (uint64_t d = 0; d < 3; d++) {
      uint64_t start = (a / k->size + d) * k->size;
      for (uint64_t x = start - 1; x <= start + 1; x++)
        if (x < HAK_REGION_BYTES)
          bad += hak_block_test((uint32_t)x, k->magic, limit) != (x % k->size == 0 && x / k->size < blocks);
    }
  return bad;
}

static void check_divisibility(void) {
  for (unsigned c = 0; c < HAK_SPAN_FIRST; c++) {   /* the classes with regions */
    const struct hak_class *k = &_hak_classes[c];
    CHECKF(k->magic_unit >= 1 && k->magic_unit <= k->size, "C%u: magic_unit %llu", c,
           (unsigned long long)k->magic_unit);
    uint64_t most = (HAK_REGION_BYTES + k->size - 1) / k->size;
    uint64_t ks[] = { 0, 1, k->slab_blocks + 1, 2ull * k->ss_slabs * k->slab_blocks, most };
    for (unsigned i = 0; i < sizeof ks / sizeof ks[0]; i++) {
      unsigned bad = misjudged(k, ks[i]);
      CHECKF(bad == 0, "C%u (%u B), %llu blocks: %u offsets misjudged", c, k->size,
             (unsigned long long)ks[i], bad);
    }
  }
}

static void check_lookup(void) {
  unsigned bad = 0;
  for (size_t n = 0; n <= HAK_MID_MAX; n++) {
    unsigned c = _hak_class_of_size(n);
    uint32_t size = _hak_classes[c].size;
    int below = (int)c - 1;                           /* the serving class below c */
    while (below >= 0 && !_hak_class_serves((unsigned)below)) below--;
    bool smallest = _hak_class_serves(c) && (below < 0 || _hak_classes[below].size < n);
    bool tight = n < 64 || size * 4 <= n * 5;        /* at most 25% larger */
    bool table = n > HAK_TABLE_MAX || _hak_class_front_of_size[hak_table_index(n)] == hak_prim_entry(HAK_FRONT(c));  /* what the inline malloc reads */
    if (size < n || !smallest || !tight || !table) {
      if (bad++ < 5) fprintf(stderr, "n=%zu -> C%u (%u B)\n", n, c, size);
    }
  }
  CHECKF(bad == 0, "%u sizes map to a wrong class", bad);
  /* Blocks of 4 KiB and more start at 4096 / HAK_COLOR_PAD offsets in 4
   * KiB (their size and 4096 have HAK_COLOR_PAD as greatest common
   * divisor); a request of a power of two from 4 KiB up fits its class with
   * the pad spare (class.c: a buffer of exactly 8 KiB does not go up a
   * class). */
  for (unsigned c = 0; c < HAK_NCLS; c++) {
    uint32_t size = _hak_classes[c].size, g = HAK_PAGE_MIN;
    for (uint32_t r = size; r != 0; ) { uint32_t t = g % r; g = r; r = t; }
    CHECKF(size < HAK_PAGE_MIN || g == HAK_COLOR_PAD, "C%u: %u-byte blocks start at %u offsets in 4 KiB",
           c, size, HAK_PAGE_MIN / g);
  }
  for (size_t n = HAK_PAGE_MIN; n <= HAK_MID_MAX; n *= 2)
    CHECKF(_hak_classes[_hak_class_of_size(n)].size == n + HAK_COLOR_PAD,
           "a request of %zu bytes goes to a %u-byte class", n, _hak_classes[_hak_class_of_size(n)].size);
}

/* malloc_trim gives the table's whole OS pages back (they read 0 again, the
 * entries on the pages at its ends aside) and malloc writes them anew, 4 KiB
 * at a time. After check_lookup, every entry is written. */
static void check_table_release(void) {
  CHECK(hak_malloc_trim(0) >= 0);
  uintptr_t page = _hak_os_page, table = (uintptr_t)_hak_class_front_of_size;
  size_t first = (((table + page - 1) & ~(page - 1)) - table) / sizeof _hak_class_front_of_size[0];
  size_t last = (((table + sizeof _hak_class_front_of_size) & ~(page - 1)) - table) / sizeof _hak_class_front_of_size[0];
  CHECK(last > first + 1000);
  CHECK(hak_table_index(1000) < 1000);
  size_t written = 0;
  for (size_t n = first; n < last; n++) written += _hak_class_front_of_size[n] != 0;
  CHECKF(written == 0, "%zu entries still written after malloc_trim", written);
  void *p = hak_malloc(1000);
  CHECK(p != NULL);
  hak_free(p);
  unsigned c = _hak_class_of_size(1000);
  CHECK(_hak_class_front_of_size[hak_table_index(1000)] == hak_prim_entry(HAK_FRONT(c)));
  size_t other = (first > 8192 ? first : 8192) + 808; /* entry 9000 (144,000 B), or as far into the first whole page */
  CHECKF(_hak_class_front_of_size[other] == 0, "entry %zu", other);   /* another 4 KiB: not written */
}

static void check_aligned(void) {
  for (size_t align = 32; align <= HAK_MID_MAX; align *= 2) {
    for (size_t n = 1; n <= HAK_MID_MAX; n = n * 3 + 1) {
      int c = _hak_class_for_aligned(n, align);
      if (n > HAK_MID_MAX) continue;
      /* Classes above 2 KiB are HAK_COLOR_PAD off a multiple of 1 KiB (cache
       * colors): they give alignments up to it; Tiny classes up to 2 KiB.
       * The rest goes to a Large block. */
      if (align <= HAK_COLOR_PAD || (align <= HAK_TINY_MAX && n <= HAK_TINY_MAX))
        CHECKF(c >= 0, "no class for %zu B at %zu", n, align);
      if (c < 0) continue;
      CHECKF(_hak_classes[c].size >= n && _hak_classes[c].size % align == 0,
             "class %d for %zu B at %zu", c, n, align);
    }
  }
  CHECK(_hak_class_for_aligned(100, 2 * HAK_MID_MAX) == -1);
}

/* Each slab class's first region is its home region, 64 MiB of the home
 * slot beside the others, so the inline free finds the list from the home
 * index; a freed block is marked with HAK_FREE_KEY. */
static void check_home_slots(void) {
  for (unsigned c = 0; c < HAK_SPAN_FIRST - 1; c++) {   /* the last: check_home_taken */
    if (!_hak_class_serves(c)) continue;              /* an idle split class: check_split */
    size_t n = _hak_classes[c].size;
    if (n > HAK_MID_MAX) n = HAK_MID_MAX;             /* the last class has the color pad on top */
    CHECKF(_hak_class_of_size(n) == c, "C%u: %zu B is class %u", c, n, _hak_class_of_size(n));
    void *p = hak_malloc(n);
    CHECKF(p != NULL, "C%u: malloc(%zu)", c, n);
    if (!p) continue;
    uintptr_t t = (uintptr_t)p >> HAK_HOME_SHIFT;
    CHECKF(t == HAK_HOME_FIRST + HAK_FRONT(c), "C%u: block %p at home index %#lx, its home is %#lx", c, p,
           (unsigned long)t, (unsigned long)(HAK_HOME_FIRST + HAK_FRONT(c)));
    CHECKF((uintptr_t)p >> HAK_REGION_SHIFT == HAK_HOME_BASE, "C%u: block %p outside the home slot", c, p);
    CHECKF(hak_block_class(p) == (int)c, "C%u: the map says class %d", c, hak_block_class(p));
    hak_free(p);
    CHECKF(((void **)p)[1] == HAK_FREE_KEY, "C%u: a freed block is not marked free", c);
  }
}

/* A thread that frees a 1 MiB block and exits, holding a block above it. */
static void *big_then_exit(void *arg) {
  void **run = arg;
  run[0] = hak_malloc(HAK_MID_MAX);
  run[1] = hak_malloc(64 * 1024);
  hak_free(run[0]);
  return NULL;
}

/* Blocks of the span classes (40 KiB up) are runs of whole OS pages of the
 * span slot: not in the map (the inline free sends them to the slow path),
 * found by _hak_span_class, marked free in a list, reported as freed once
 * given back; and the pages one class gives back serve another class. */
static size_t page_round(size_t n) { return (n + _hak_os_page - 1) & ~(_hak_os_page - 1); }

static void check_span_blocks(void) {
  const size_t page = _hak_os_page;
  void *first = NULL;
  for (unsigned c = HAK_SPAN_FIRST; c < HAK_NCLS; c++) {
    size_t n = _hak_classes[c].size;
    if (n > HAK_MID_MAX) n = HAK_MID_MAX;
    void *p = hak_malloc(n);
    CHECKF(p != NULL, "C%u: malloc(%zu)", c, n);
    if (!p) continue;
    if (!first) first = p;
    CHECKF((uintptr_t)p >> HAK_REGION_SHIFT == (uintptr_t)HAK_SPAN_SLOT,
           "C%u: block %p is not in the span slot", c, p);
    CHECKF((uintptr_t)p % 256 == 0 && ((uintptr_t)p & (page - 1)) < HAK_SPAN_PAGE &&
           ((uintptr_t)p & (page - 1)) + _hak_classes[c].size <= page_round(_hak_classes[c].size),
           "C%u: block %p does not fit its run at its color", c, p);
    CHECKF(hak_block_class(p) == -1 && _hak_span_class(p) == (int)c, "C%u: span class %d", c, _hak_span_class(p));
    CHECK(_hak_span_class((char *)p + 256) == -1 && _hak_span_class((char *)p + HAK_SPAN_PAGE) == -1);
    memset(p, 0x5a, n);
    CHECK(hak_malloc_usable_size(p) == _hak_classes[c].size);
    hak_free(p);
    /* On its list it holds the free key; back in the heap (its list was
     * full) it starts no used block, and the heap wiped the key (span.c). */
    CHECKF(((void **)p)[1] == HAK_FREE_KEY || (_hak_span_class(p) < 0 && ((void **)p)[1] != HAK_FREE_KEY),
           "C%u: a freed block is neither marked free nor back in the heap", c);
  }
  CHECK(hak_malloc_trim(0) == 1);                     /* the rings go back to the heap, then the OS */
  CHECK(_hak_span_class(first) == -1);                 /* the top run left with its pages */
  pthread_t t;                                        /* its 1 MiB block goes to the heap at exit */
  void *run[2] = { NULL, NULL };
  CHECK(pthread_create(&t, NULL, big_then_exit, run) == 0 && pthread_join(t, NULL) == 0);
  CHECK(run[0] != NULL && run[1] != NULL);
  /* 4 KiB pages: 15 runs of 17 pages fit in its 257 (16 KiB: 13 of 5 in
   * 65; 64 KiB: 8 of 2 in 17). */
  size_t big = page_round(_hak_classes[HAK_NCLS - 1].size), small_run = page_round(_hak_classes[_hak_class_of_size(64 * 1024)].size);
  enum { K_MOST = 15 };
  int K = (int)(big / small_run);
  CHECK(K >= 8 && K <= K_MOST);
  if (K > K_MOST) K = K_MOST;
  uintptr_t lo = (uintptr_t)run[0] & ~(uintptr_t)(page - 1), hi = lo + big;
  void *small[K_MOST];
  unsigned inside = 0;
  for (int i = 0; i < K; i++) {
    small[i] = hak_malloc(64 * 1024);
    inside += (uintptr_t)small[i] >= lo && (uintptr_t)small[i] < hi;
  }
  CHECKF(inside == (unsigned)K, "%u of %d 64 KiB blocks reuse the pages a 1 MiB block gave back", inside, K);
  for (int i = 0; i < K; i++) hak_free(small[i]);
  hak_free(run[1]);
  CHECK(hak_malloc_trim(0) == 1);
}

/* Freeing a block that is no class region's (a Large block, mapped where the
 * kernel chose) reads no entry of the slot tables above the highest slot
 * of a region: a process that frees such blocks touches no page of them.
 * First in the test: no region outside the home slot exists yet, so the
 * slot tables are not even mapped. */
static void check_lookup_footprint(void) {
  void *p = hak_malloc(32u << 20);
  CHECK(p != NULL);
  hak_free(p);
  CHECKF(_hak_region_map.slot_end == 0, "a region above the home slot (%llu)",
         (unsigned long long)_hak_region_map.slot_end);
  CHECKF(_hak_region_map.slots == NULL, "slot tables mapped without a region outside the home slot (%p)",
         (void *)_hak_region_map.slots);
}

/* When someone else holds a class's home region, the class opens a region
 * in a slot above the home slot; its blocks are freed by the slow path, which finds
 * the class in the map, and a double free is still caught there (the
 * misuse tests check the message). The last slab class is used by nothing
 * before this test. */
static void check_home_taken(void) {
  unsigned c = HAK_SPAN_FIRST - 1;
  uintptr_t home = (uintptr_t)(HAK_HOME_FIRST + HAK_FRONT(c)) << HAK_HOME_SHIFT;
  void *taken = mmap((void *)home, HAK_PAGE_MIN, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
  CHECKF(taken == (void *)home, "could not take the home region of C%u at %#lx", c, (unsigned long)home);
  enum { N = 8 };
  void *p[N];
  for (int round = 0; round < 3; round++) {
    for (int i = 0; i < N; i++) {
      p[i] = hak_malloc(_hak_classes[c].size);
      CHECK(p[i] != NULL);
      if (!p[i]) return;
      memset(p[i], i + 1, 64);
      uintptr_t slot = (uintptr_t)p[i] >> HAK_REGION_SHIFT;
      CHECKF(slot >= HAK_FIRST_SLOT, "C%u block %p in slot %#lx, below the other regions", c, p[i],
             (unsigned long)slot);
      CHECK(hak_block_class(p[i]) == (int)c);
    }
    for (int i = 0; i < N; i++) {
      CHECK(((unsigned char *)p[i])[63] == i + 1);
      hak_free(p[i]);
      CHECK(((void **)p[i])[1] == HAK_FREE_KEY);
    }
  }
  munmap(taken, HAK_PAGE_MIN);
}

/* A class whose blocks outgrow its home region (64 MiB) goes on in a region
 * of a slot above the home slot: every block is a block of its class, the
 * next class's home region is untouched, and all of them free (the ones
 * past home by the slow path) and are marked free. */
static void check_home_full(void) {
  unsigned c = HAK_NTINY + 11;                        /* 16 KiB: 64 MiB is 4,000 blocks */
  size_t n = _hak_classes[c].size;
  size_t count = HAK_HOME_BYTES / n + 64;
  void **p = hak_malloc(count * sizeof *p);
  CHECK(p != NULL);
  if (!p) return;
  size_t home = 0, away = 0;
  for (size_t i = 0; i < count; i++) {
    p[i] = hak_malloc(n);
    CHECK(p[i] != NULL);
    if (!p[i]) { count = i; break; }
    uintptr_t a = (uintptr_t)p[i];
    CHECKF(hak_block_class(p[i]) == (int)c, "block %zu at %p: class %d", i, p[i], hak_block_class(p[i]));
    if (a >> HAK_HOME_SHIFT == HAK_HOME_FIRST + HAK_FRONT(c)) home++;
    else if (a >> HAK_REGION_SHIFT >= HAK_FIRST_SLOT) away++;
    else CHECKF(0, "block %zu at %p: neither home nor a slot of its own", i, p[i]);
    *(size_t *)((char *)p[i] + n - sizeof(size_t)) = i;
  }
  CHECKF(home > 0 && away > 0 && home + away == count, "%zu blocks at home, %zu away, of %zu", home, away, count);
  for (size_t i = 0; i < count; i++) {
    CHECK(*(size_t *)((char *)p[i] + n - sizeof(size_t)) == i);
    hak_free(p[i]);
    CHECK(((void **)p[i])[1] == HAK_FREE_KEY);
  }
  hak_free(p);
}

/* Split class i (C12 + 2i, 288 to 480 B) serves nothing until a thread's
 * slow paths see 3 in 4 of 256 requests of its coarse class (the next one)
 * fit it; sizes spread evenly over the coarse class's range never do. Then
 * the size table names its list for its sizes, and blocks of the coarse
 * class given out before stay valid. */
static void check_split(void) {
  for (unsigned i = 0; i < HAK_NSPLIT; i++) {
    unsigned s = HAK_SPLIT_FIRST + 2 * i, coarse = s + 1;
    size_t low = _hak_classes[s].size - 8, high = _hak_classes[s].size + 8;
    CHECKF(_hak_classes[s].size % 64 == 32 && _hak_classes[coarse].size == _hak_classes[s].size + 32,
           "C%u (%u B) is not a split class of C%u", s, _hak_classes[s].size, coarse);
    CHECKF(!_hak_class_serves(s) && _hak_class_of_size(low) == coarse, "C%u serves before any sample", s);
    for (unsigned k = 0; k < 4096; k++) _hak_class_split_sample(k % 2 ? low : high, coarse);
    CHECKF(!_hak_class_serves(s), "C%u serves after even samples", s);
  }
  /* C16 (416 B), by malloc's own slow paths: 400-byte requests. */
  void *before = hak_malloc(400);
  CHECK(before != NULL && hak_block_class(before) == HAK_SPLIT_FIRST + 5);
  static void *blocks[1 << 18];
  size_t n = 0;
  while (n < sizeof blocks / sizeof blocks[0] && !_hak_class_serves(HAK_SPLIT_FIRST + 4))
    blocks[n++] = hak_malloc(400);
  CHECKF(_hak_class_serves(HAK_SPLIT_FIRST + 4), "C16 idle after %zu mallocs of 400 B", n);
  CHECK(_hak_class_of_size(400) == HAK_SPLIT_FIRST + 4 && _hak_class_of_size(385) == HAK_SPLIT_FIRST + 4);
  CHECK(_hak_class_of_size(417) == HAK_SPLIT_FIRST + 5);
  CHECK(_hak_class_front_of_size[hak_table_index(400)] == hak_prim_entry(HAK_FRONT(HAK_SPLIT_FIRST + 4)));
  void *after = hak_malloc(400);
  CHECK(after != NULL && hak_block_class(after) == HAK_SPLIT_FIRST + 4);
  CHECK(hak_malloc_usable_size(before) == 448 && hak_malloc_usable_size(after) == 416);
  hak_free(before);
  hak_free(after);
  while (n) hak_free(blocks[--n]);
  for (unsigned i = 0; i < HAK_NSPLIT; i++)           /* the others stay idle */
    CHECKF(_hak_class_serves(HAK_SPLIT_FIRST + 2 * i) == (i == 2), "split class %u", i);
  /* The rest of the classes' checks hold with a split class serving. */
  check_home_slots();
  check_lookup();
}

int main(int argc, char **argv) {
  (void)argc;
  /* These checks are of the classes' regions: every block of a slab class
   * here comes from one, not from a first chunk (test_first_chunks). */
  const char *chunks = getenv("HAKMEM_FIRST_CHUNKS");
  if (!chunks || strcmp(chunks, "0") != 0) {
    setenv("HAKMEM_FIRST_CHUNKS", "0", 1);
    test_exec_self(argv, NULL);
    return 99;
  }
  _hak_thread_init();                                 /* the OS page, then the classes */
  check_lookup_footprint();
  check_home_taken();
  check_home_slots();
  check_home_full();
  check_span_blocks();
  check_geometry();
  check_divisibility();
  check_lookup();
  check_table_release();
  check_aligned();
  check_split();
  check_table_release();
  TEST_END();
}
