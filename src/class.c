/* class.c — the size classes and the size table: block sizes (four per
 * doubling, the L2 bridge classes, the color pad of 4 KiB and more), each
 * class's geometry (slab and SuperSlab sizes, the divisibility constant of
 * the ownership map, the carve color), and the table malloc's inline path
 * reads to find a size's thread-front list, written a page at a time. */
#include "hakmem_internal.h"

struct hak_class _hak_classes[HAK_NCLS];
/* Aligned to 4 KiB only: an alignment of 64 KiB put it in a segment of its
 * own, and Valgrind read no symbols of a program linked with hakmem.a. */
HAK_ZERO_TABLE _Alignas(HAK_PAGE_MIN) hak_size_entry_t _hak_class_front_of_size[HAK_TABLE_ENTRIES];
static bool size_table_whole;           /* written whole at start: never released */

/* Block sizes: four classes per doubling (at most 25% apart), eight from
 * 256 to 512 B, plus the L2 bridge classes at 40, 46 and 52 KiB between
 * 32 KiB and the L2.5 tier, and 1152: a 1 KiB buffer behind a header of its
 * own (sqlite's temporary b-tree pages behind its 8-byte size prefix, 1,032
 * bytes) took a 1,280-byte block, and at sqlite's peak 14 MB of them cost
 * 3.4 MB (docs/experiments.md, "A class for 1 KiB and a header"). Between
 * 256 and 512 B, where a program's records often are (jq's values of 272
 * and 392 bytes, 250,000 live at its peak, took 320 and 448), the classes
 * are 32 bytes apart, as tcmalloc's, but the ones in between (the split
 * classes, below) serve only a program whose sizes gather in them
 * (docs/experiments.md, "Split classes from 256 to 512 B"). */
static const uint32_t class_sizes[HAK_NCLS] = {
  /* Tiny  C0..C28 */
  16, 32, 48, 64, 80, 96, 112, 128, 160, 192, 224, 256, 288, 320, 352, 384,
  416, 448, 480, 512, 640, 768, 896, 1024, 1152, 1280, 1536, 1792, 2048,
  /* L2 */
  2560, 3072, 3584, 4096, 5120, 6144, 7168, 8192, 10240, 12288, 14336, 16384,
  20480, 24576, 28672, 32768, 40960, 47104, 53248,
  /* L2.5 */
  65536, 81920, 98304, 114688, 131072, 163840, 196608, 229376, 262144,
  327680, 393216, 458752, 524288, 655360, 786432, 917504, 1048576,
};
/* Every class region starts 64 MiB-aligned, so if slabs carved from their
 * first block, the blocks a thread uses most (the first carved, reused LIFO)
 * would sit at the same small offsets in every class and fight for the same
 * cache sets while the rest of the L2 stayed empty. The first slab a Tiny
 * class's region hands out (its slab color, below) carves from the block
 * HAK_CARVE_COLOR * color_index(c) bytes in (modulo the slab), wrapping
 * around: 5 times
 * 4 KiB and 3 cache lines apart, the Tiny classes start on 16 different
 * 4 KiB of a 64 KiB slab and different L1 sets (docs/experiments.md;
 * cachegrind on random_mixed: misses of a 512 KiB cache 17x fewer). Later
 * slabs carve from block 0 in one run of addresses (hak_slab_carve_first):
 * a wrap in every slab broke, twice a slab, the runs a program reads back
 * in the order it allocated them (a parsed document), and cost xmllint 5%.
 * Mid classes have their per-block color pad instead. Both are about
 * caches, not the OS page: constants. */
#define HAK_CARVE_COLOR (5u * HAK_PAGE_MIN + 3u * 64)

/* The same holds for the TLB, whose sets are picked by the low bits of the
 * page number: the hot first pages of every class, each at the bottom of
 * its region, would share a few sets while the rest stayed empty (30
 * areas of 256 KiB read at random, 4 GiB apart: 3.1 ns a read; each 64 KiB
 * further along than the last: 1.0 ns, as side by side). So a region's
 * first SuperSlab hands out its slabs from the one that holds its byte
 * HAK_SLAB_COLOR * color_index(c) (modulo the SuperSlab) on, wrapping once:
 * class c's hot pages start about color_index(c) * 176 KiB in, and the
 * carve color above moves each within its slab. 176, not 192 (the first
 * measure): with 25 Tiny classes (29 now) and 16 KiB OS pages, whose Tiny
 * slabs are not all 64 KiB, 192 put two classes on one page;
 * test_hakapi_classes checks it at every page size test_pagesize.sh runs. */
#define HAK_SLAB_COLOR (11u * 16 * 1024)

/* Blocks of 4 KiB and more would all start at the same offset in 4 KiB, so
 * the same bytes of different blocks would fall into the same cache sets;
 * sizes HAK_COLOR_PAD bytes off their round size (a multiple of 1 KiB)
 * rotate block starts through 32 offsets (see docs/experiments.md: 128
 * where 256 cost gawk 1% more peak RSS at the same speed; 64 would drop
 * aligned requests of 128 B to Large blocks). A power of two gets the pad
 * on top, so that requests of exactly 4, 8, 16 or 32 KiB, the usual
 * buffers, stay in their class; the slab classes between take it off: a
 * request is rarely their exact size, and each one below the class's last
 * 128 bytes then takes 256 bytes less (the program suite's request counts;
 * gawk's 4,800 and 11,200-byte node pools, 1.9 MB at its peak). The span
 * classes keep it on top (their blocks are runs of whole pages either way). */
static uint32_t class_block_size(unsigned c) {
  uint32_t round = class_sizes[c];
  if (round < HAK_PAGE_MIN) return round;
  bool pad_on_top = (round & (round - 1)) == 0 || c >= HAK_SPAN_FIRST;
  return pad_on_top ? round + HAK_COLOR_PAD : round - HAK_COLOR_PAD;
}

_Static_assert(sizeof class_sizes / sizeof class_sizes[0] == HAK_NCLS, "class table size");
_Static_assert(HAK_COLOR_PAD % 16 == 0 && (HAK_COLOR_PAD & (HAK_COLOR_PAD - 1)) == 0,
               "padded blocks are aligned to the pad, a power of two of 16 B or more");
_Static_assert(HAK_COLOR_PAD % HAK_TABLE_STEP == 0, "padded sizes stay multiples of the size table's step");

#define HAK_SLAB_TARGET   (64u * 1024)   /* slabs are at least this big ...   */
#define HAK_SLAB_MIN_BLOCKS 4u           /* ... hold at least 4 blocks ...    */
#define HAK_SLAB_MIN_PAGES  2u           /* ... and two OS pages: a hardened
                                            SuperSlab's last page (its guard)
                                            leaves its last slab blocks      */
#define HAK_SS_TARGET     (2u << 20)     /* SuperSlabs about 2 MiB            */
/* A slab's block counts are 16 bits (struct hak_slab): the most blocks a
 * slab holds, 16-byte ones in the largest of the sizes above. */
_Static_assert((HAK_SLAB_TARGET > HAK_SLAB_MIN_PAGES * HAK_PAGE_MAX ? HAK_SLAB_TARGET : HAK_SLAB_MIN_PAGES * HAK_PAGE_MAX) / 16
               <= UINT16_MAX, "a slab's blocks fit its 16-bit counts");

/* The split classes (HAK_SPLIT_FIRST + 2i: 288, 352, 416, 480 B; their
 * policy is below, after the size table). */
static bool is_split(unsigned c) {
  return c >= HAK_SPLIT_FIRST && c < HAK_SPLIT_FIRST + 2 * HAK_NSPLIT && (c - HAK_SPLIT_FIRST) % 2 == 0;
}

/* A class's place in the colors below: the split classes come after the
 * other Tiny classes, so that every other class keeps the colors it had
 * before there were split classes (with them in size order, the blocks of
 * 512 B, 1 KiB and up moved to other cache sets, and bench_allocators'
 * mixed lost 1.4%). */
static unsigned color_index(unsigned c) {
  if (is_split(c)) return HAK_NTINY - HAK_NSPLIT + (c - HAK_SPLIT_FIRST) / 2;
  unsigned below = c <= HAK_SPLIT_FIRST ? 0 : (c - HAK_SPLIT_FIRST + 1) / 2;
  return c - (below < HAK_NSPLIT ? below : HAK_NSPLIT);
}

static uint64_t gcd64(uint64_t a, uint64_t b) { while (b) { uint64_t t = a % b; a = b; b = t; } return a; }

/* A colored class whose slab of blocks blocks would make the smallest
 * SuperSlab (lcm(blocks, cycle) blocks) more than HAK_SS_TARGET (the cycle
 * is 32 blocks with 4 KiB pages, up to 512 with 64 KiB ones; with 4 KiB
 * pages five of the 5-14 KiB classes come here) takes slabs of a divisor or a
 * multiple of the cycle (a power of two), so that its SuperSlabs are as
 * small as the page allows: cycle blocks. */
static uint64_t ss_blocks_fewer(uint64_t blocks, uint64_t cycle) {
  if (blocks > cycle) return (blocks + cycle - 1) / cycle * cycle;
  uint64_t b = 1;
  while (b < blocks) b *= 2;
  return b;
}

/* Tiny slabs are whole OS pages. Colored classes cannot be (that would take
 * 32 blocks of 4 KiB pages, 512 of 64 KiB ones): their slabs are
 * HAK_SLAB_MIN_BLOCKS blocks or 64 KiB, and their SuperSlabs, which are
 * mapped, hold a multiple of the blocks that end on an OS page boundary
 * (the cycle). A free slab is purged by the whole OS pages inside it. The
 * geometry follows the OS page (read at init); the sizes do not. The span
 * classes have no slabs (their blocks are page runs of the span heap,
 * span.c): only their size and tier are set. */
static void class_geometry(unsigned c) {
  struct hak_class *k = &_hak_classes[c];
  uint32_t size = class_block_size(c);
  uint64_t page = _hak_os_page;
  k->size = size;
  HAK_ASSERT(size % HAK_TABLE_STEP == 0);                 /* the size table's entries hold one class */
  k->tier = c < HAK_NTINY ? HAK_TIER_TINY : c < HAK_NTINY + HAK_NL2 ? HAK_TIER_L2 : HAK_TIER_L25;
  if (c >= HAK_SPAN_FIRST) return;
  uint64_t want = size * (uint64_t)HAK_SLAB_MIN_BLOCKS;
  if (want < HAK_SLAB_TARGET) want = HAK_SLAB_TARGET;
  if (want < HAK_SLAB_MIN_PAGES * page) want = HAK_SLAB_MIN_PAGES * page;
  uint64_t cycle = page / gcd64(size, page);             /* blocks that end on a page boundary */
  uint64_t blocks = (want + size - 1) / size;
  if (c < HAK_NTINY) blocks = (blocks + cycle - 1) / cycle * cycle;
  else if (blocks * cycle / gcd64(blocks, cycle) * size > HAK_SS_TARGET)
    blocks = ss_blocks_fewer(blocks, cycle);
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
  k->carve_first = c < HAK_NTINY ? (uint32_t)((color_index(c) * HAK_CARVE_COLOR) % slab / size) : 0;
  k->first_slab = (uint32_t)(color_index(c) * (uint64_t)HAK_SLAB_COLOR % k->ss_bytes / slab);
  HAK_ASSERT(k->carve_first < k->slab_blocks && k->first_slab < k->ss_slabs);
  /* The invariants of struct hak_class that depend on the OS page. */
  HAK_ASSERT(k->ss_bytes % page == 0 && ss <= 256 && slab >= HAK_SLAB_MIN_PAGES * page);
  HAK_ASSERT(k->ss_bytes <= HAK_HOME_BYTES);             /* a home region holds one */
  HAK_ASSERT(blocks <= UINT16_MAX);                      /* struct hak_slab's counts */
  HAK_ASSERT(c >= HAK_NTINY || slab % page == 0);
}

void _hak_class_init(void) {
  HAK_ASSERT(_hak_os_page >= HAK_PAGE_MIN && _hak_os_page <= HAK_PAGE_MAX);   /* _hak_os_page_init first */
  for (unsigned c = 0; c < HAK_NCLS; c++) class_geometry(c);
}

/* ---- split classes ---------------------------------------------------------
 * Classes 32 bytes apart cut the rounding of sizes from 256 to 512 B by
 * half, but a program whose sizes spread evenly over them (larson) holds
 * twice the partly used slabs: its peak RSS rose 16% and its time fell 3%
 * when every size used them (docs/experiments.md, "Split classes from 256
 * to 512 B"). So each split class (HAK_SPLIT_FIRST + 2i: 288, 352, 416,
 * 480) is idle at first, its sizes served by the class above (its coarse
 * class). A thread's slow paths sample the sizes asked of the coarse class;
 * when at least HAK_SPLIT_LOW of HAK_SPLIT_SAMPLES would fit the split
 * class (a program's records of one size: jq's 272 and 392-byte values,
 * 250,000 live at its peak), the split class serves its sizes from then on,
 * in every thread: the size table's entries for them name its list. Blocks
 * of the coarse class stay valid for those sizes, so a thread that reads
 * an entry before the change only gets a bigger block. */
#define HAK_SPLIT_SAMPLES 256u
#define HAK_SPLIT_LOW     192u
static _Atomic uint32_t split_active;     /* bit i: split class i serves */

bool _hak_class_serves(unsigned c) {
  return !is_split(c) || (atomic_load_explicit(&split_active, memory_order_relaxed) >> ((c - HAK_SPLIT_FIRST) / 2) & 1);
}

/* The smallest serving class whose blocks hold n bytes (n <= HAK_MID_MAX). */
static unsigned class_serving(size_t n) {
  unsigned c = 0;
  while (_hak_classes[c].size < n || !_hak_class_serves(c)) c++;
  return c;
}

static void split_activate(unsigned i) {
  unsigned s = HAK_SPLIT_FIRST + 2 * i;
  if (atomic_fetch_or(&split_active, 1u << i) & (1u << i)) return;
  size_t lo = hak_table_index(_hak_classes[s - 1].size + 1), hi = hak_table_index(_hak_classes[s].size);
  for (size_t k = lo; k <= hi; k++)          /* entries not written yet: their fill sees the bit */
    if (__atomic_load_n(&_hak_class_front_of_size[k], __ATOMIC_RELAXED))
      __atomic_store_n(&_hak_class_front_of_size[k], hak_prim_entry(HAK_FRONT(s)), __ATOMIC_RELAXED);
}

/* A slow-path malloc of n bytes, served by class c. */
void _hak_class_split_sample(size_t n, unsigned c) {
  struct hak_heap *h = _hak_thread_tls.heap;
  if (!h || !is_split(c - 1) || _hak_class_serves(c - 1)) return;
  unsigned i = (c - 1 - HAK_SPLIT_FIRST) / 2;
  h->split_low[i] += n <= _hak_classes[c - 1].size;
  if (++h->split_seen[i] < HAK_SPLIT_SAMPLES) return;
  if (h->split_low[i] >= HAK_SPLIT_LOW) split_activate(i);
  h->split_seen[i] = h->split_low[i] = 0;
}

/* The table is written 4 KiB at a time, whatever the OS page. */
#define HAK_TABLE_FILL (HAK_PAGE_MIN / sizeof _hak_class_front_of_size[0])
_Static_assert(sizeof _hak_class_front_of_size > 2 * HAK_PAGE_MAX, "the table has whole pages to give back");

/* Writes the 4 KiB of _hak_class_front_of_size that hold entry i (the
 * sizes up to i * HAK_TABLE_STEP). Threads that do it at once write the
 * same values. */
static void front_of_size_fill(size_t i) {
  size_t per_page = HAK_TABLE_FILL;
  size_t first = i / per_page * per_page, last = first + per_page - 1;
  if (last >= HAK_TABLE_ENTRIES) last = HAK_TABLE_ENTRIES - 1;
  unsigned c = 0;
  for (size_t m = first; m <= last; m++) {
    while (_hak_classes[c].size < m * HAK_TABLE_STEP || !_hak_class_serves(c)) c++;
    __atomic_store_n(&_hak_class_front_of_size[m], hak_prim_entry(HAK_FRONT(c)), __ATOMIC_RELAXED);
  }
}

/* Where entry 0 would not read an empty list (prim.h: in the x86-64 glibc
 * form, the TCB word is not 0, a C library that uses it), the whole table is
 * written now, once. */
void _hak_class_table_init(void) {
  if (hak_prim_head(0) == NULL) return;
  size_t per_page = HAK_TABLE_FILL;
  for (size_t i = 0; i < HAK_TABLE_ENTRIES; i += per_page) front_of_size_fill(i);
  size_table_whole = true;
}

/* malloc_trim: the table's whole OS pages go back to the OS and read 0
 * again (a malloc that reads an entry meanwhile finds it written or 0;
 * either is right), to be written anew by the sizes the program still
 * uses. The entries on the pages at its ends, shared with other data,
 * stay. */
void _hak_class_table_release(void) {
  uintptr_t from = (uintptr_t)_hak_class_front_of_size;
  uintptr_t a = hak_page_up(from), b = hak_page_down(from + sizeof _hak_class_front_of_size);
  if (!size_table_whole) _hak_os_zero((void *)a, b - a);
}

/* Initializes hakmem first: a malloc can come before any constructor, and
 * the class tables are written by the initialization. */
unsigned _hak_class_of_size(size_t n) {
  _hak_thread_init();
  size_t i = hak_table_index(n);
  hak_size_entry_t e = __atomic_load_n(&_hak_class_front_of_size[i], __ATOMIC_RELAXED);
  if (HAK_UNLIKELY(e == 0)) {
    front_of_size_fill(i);
    /* Not read back: a malloc_trim in another thread (one out of memory)
     * may have zeroed the page again, and entry 0 is no class (it read as
     * class 139 and divided by 0 under `ulimit -v` with 4 threads). */
    return class_serving(n);
  }
  unsigned c = hak_prim_front(e) - 1;
  HAK_ASSERT(c < HAK_NCLS && _hak_classes[c].size >= n && _hak_class_serves(c));   /* the entry's sizes fit its class */
  return c;
}

/* The smallest class whose blocks hold n bytes and all start at a multiple
 * of align (regions are 64 MiB aligned, so that is: size % align == 0). */
int _hak_class_for_aligned(size_t n, size_t align) {
  if (n > HAK_MID_MAX || align > HAK_MID_MAX) return -1;
  for (unsigned c = _hak_class_of_size(n); c < HAK_NCLS; c++)
    if (_hak_classes[c].size % align == 0 && _hak_class_serves(c)) return (int)c;
  return -1;
}
