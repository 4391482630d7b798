/* Slab pages faulted in ahead of the carving (slab.c, carve_blocks):
 *  - a heap's first fresh slab of a Tiny class is not marked ahead: a
 *    refill carves at most 4 KiB of it, and the pages past the carved
 *    blocks stay out of memory;
 *  - once the heap has carved a whole slab of the class, its next fresh
 *    slab is marked ahead: carving one block faults in the pages of the
 *    next HAK_POPULATE_BYTES (32 KiB) of blocks at once, and not the pages
 *    past them;
 *  - the hardened build marks no slab ahead;
 *  - slab order: a class region hands out the slab of the class's slab
 *    color first, then the next one up;
 *  - carve order (default build): that first slab carves from the class's
 *    carve color, wrapping once; any other slab carves from block 0 in one
 *    run of increasing addresses.
 *  - span blocks (span.c _hak_span_fault_in): a malloc served from fresh
 *    pages has the pages under its first HAK_SPAN_FAULT_IN (128 KiB) bytes
 *    in when it returns, before a write, and not the pages past them; a
 *    calloc's stay out (not checked in the debug build, which reads the
 *    block to check its zeros, nor in a tracking build, which zeroes all).
 * Where the kernel (or an emulator) does not fault pages in on
 * MADV_POPULATE_WRITE, the residency checks are skipped and said so.
 * The heap is a stand-in: the slab engine only reads its counters and
 * compares it as an owner. */
#include "testing.h"
#include "hakmem_internal.h"

#include <sys/mman.h>
#include <unistd.h>

static struct hak_heap heap;

/* Whether the kernel page holding a is resident (one page: mincore writes a
 * byte a kernel page, and hakmem's page may be several, HAKMEM_PAGE_SIZE). */
static bool resident(uintptr_t a) {
  unsigned char v = 0;
  uintptr_t kernel_page = (uintptr_t)sysconf(_SC_PAGESIZE);
  return mincore((void *)(a & ~(kernel_page - 1)), kernel_page, &v) == 0 && (v & 1);
}

/* Does _hak_os_populate fault pages in here? */
static bool populate_works(void) {
  size_t bytes = 4 * _hak_os_page;
  void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) return false;
  bool ok = _hak_os_populate(p, bytes) && resident((uintptr_t)p + 3 * _hak_os_page);
  munmap(p, bytes);
  return ok;
}

/* The address of the block at carve index i of s (hak_slab_carve_first). */
static uintptr_t carve_addr(const struct hak_slab *s, uint32_t i) {
  uint32_t k = (i + hak_slab_carve_first(s)) % s->capacity;
  return s->start + (uintptr_t)k * _hak_classes[s->cls].size;
}

/* The first carve index from i on whose block starts on a page past the
 * end of block i - 1's page, or capacity. */
static uint32_t next_page_block(const struct hak_slab *s, uint32_t i) {
  uint32_t size = _hak_classes[s->cls].size;
  uintptr_t end = hak_page_up(carve_addr(s, i - 1) + size);
  for (; i < s->capacity; i++)
    if (carve_addr(s, i) >= end && carve_addr(s, i) - carve_addr(s, i - 1) == size) return i;
  return s->capacity;
}

/* A fresh slab of class c for the stand-in heap, made its current one. */
static struct hak_slab *fresh(unsigned c) {
  bool adopted = true;
  struct hak_slab *s = _hak_slab_acquire(&heap, c, true, &adopted);
  CHECK(s != NULL && !adopted);
  heap.cur[c] = s;
  return s;
}

/* Pages [from, to) of a block, every one resident (or none, want false). */
static bool pages_are(const char *p, size_t from, size_t to, bool want) {
  for (size_t o = from; o < to; o += _hak_os_page)
    if (resident((uintptr_t)p + o) != want) return false;
  return true;
}

static void check_span(bool works) {
  size_t small = 100 * 1024, big = 512 * 1024, table = 200 * 1024;
  char *a = hak_malloc(small), *b = hak_malloc(big), *z = hak_calloc(1, table);
  CHECK(a && b && z);
  CHECK((uintptr_t)a >> HAK_REGION_SHIFT == HAK_SPAN_SLOT && (uintptr_t)b >> HAK_REGION_SHIFT == HAK_SPAN_SLOT);
  if (works) {
    CHECKF(pages_are(a, 0, small, true), "a fresh 100 KiB span block's pages are not all in after malloc");
    CHECKF(pages_are(b, 0, HAK_SPAN_FAULT_IN, true), "a fresh 512 KiB block's first 128 KiB are not in after malloc");
    CHECKF(pages_are(b, 2 * HAK_SPAN_FAULT_IN, big, false), "a fresh 512 KiB block's pages past 256 KiB are in before any write");
    if (!HAK_DEBUG && !HAK_TRACK)
      CHECKF(pages_are(z, 2 * _hak_os_page, table, false), "a calloc of fresh pages faulted them in");
  }
  for (size_t o = 0; o < table; o += 4096) CHECK(z[o] == 0);
  hak_free(a);
  hak_free(b);
  hak_free(z);
}

int main(void) {
  void *warm = hak_malloc(1);                  /* initializes the classes and pools */
  CHECK(warm != NULL);
  unsigned c = _hak_class_of_size(448);        /* a Tiny class nothing else here uses */
  CHECK(c < HAK_NTINY);
  uint32_t size = _hak_classes[c].size;
  bool works = populate_works();
  if (!works) printf("MADV_POPULATE_WRITE faults nothing in here: residency not checked\n");

  /* The first fresh slab: not ahead; a one-block take carves one block. */
  struct hak_slab *first = fresh(c);
  if (!first) TEST_END();
  CHECK(!first->ahead);
  void *list = NULL;
  CHECK(_hak_slab_pop(&heap, first, 1, 1, true, &list) == 1);
  CHECK(HAK_HARDENED || list == (void *)carve_addr(first, 0));   /* hardened: a random order */
  CHECK(hak_slab_cold(first)->populated == 0);   /* not ahead: its cold entry untouched */
  uint32_t past = next_page_block(first, 1);
  if (works && !HAK_HARDENED && past < first->capacity)
    CHECKF(!resident(carve_addr(first, past)), "a page past the carving of a slab not ahead is resident");

  /* After a whole slab's worth carved: the next fresh slab is ahead (not
   * in the hardened build), and one block faults in 32 KiB of them. */
  heap.stats.carved[c] = _hak_classes[c].slab_blocks;
  struct hak_slab *second = fresh(c);
  if (!second) TEST_END();
  CHECK(second != first);
  CHECK(second->ahead == !HAK_HARDENED);
  list = NULL;
  CHECK(_hak_slab_pop(&heap, second, 1, 1, true, &list) == 1);
  if (!HAK_HARDENED) {
    uint32_t want = 32 * 1024 / size < second->capacity ? 32 * 1024 / size : second->capacity;
    CHECKF(hak_slab_cold(second)->populated == want, "populated %u blocks, want %u", hak_slab_cold(second)->populated, want);
    for (uint32_t i = 0; works && i < hak_slab_cold(second)->populated; i++)
      CHECKF(resident(carve_addr(second, i)), "block %u of the populated run is not resident", i);
    past = next_page_block(second, hak_slab_cold(second)->populated);
    if (works && past < second->capacity)
      CHECKF(!resident(carve_addr(second, past)), "a page past the populated run is resident");
  }

  /* Slab order: the class's region (nothing else used the class) hands out
   * the slab of its slab color first, then the next one up. Carve order:
   * that slab from the carve color, the next from block 0 and up, every
   * block once. */
  const struct hak_class *k = &_hak_classes[c];
  uint64_t first_off = first->start & (HAK_HOME_BYTES - 1);   /* its home region */
  CHECKF(first_off == (uint64_t)k->first_slab * k->slab_bytes,
         "the region's first slab is at offset %llu, not at slab %u",
         (unsigned long long)first_off, k->first_slab);
  CHECK(second->start == first->start + k->slab_bytes || k->first_slab + 1 == k->ss_slabs);
  if (!HAK_HARDENED) {
    CHECK(hak_slab_carve_first(first) == k->carve_first);
    CHECK(hak_slab_carve_first(second) == 0);
    CHECKF(list == (void *)second->start, "the second slab carved %p first, not its block 0 %p",
           list, (void *)second->start);
    uintptr_t prev = (uintptr_t)list;
    unsigned n = 0, ordered = 0;
    while (second->carved < second->capacity) {   /* a block a pop: no read of a free block (ASan) */
      void *one = NULL;
      if (_hak_slab_pop(&heap, second, 1, 1, true, &one) != 1) break;
      ordered += (uintptr_t)one == prev + size;
      prev = (uintptr_t)one;
      n++;
    }
    const unsigned want = second->capacity - 1u;
    CHECKF(n == want && ordered == n, "%u blocks after the first (%u in address order), want %u", n, ordered, want);
  }
  check_span(works);
  TEST_END();
}
