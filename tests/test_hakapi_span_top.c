/* The span heap's top (span.c, span_unmap_top): a purged free run at the
 * top leaves the heap, but up to SPAN_GROW (2 MiB) of address space above
 * the top stays mapped, so that the next growth does not map it again and
 * fault the page table's pages back in; a forced pass (malloc_trim, out of
 * memory) unmaps everything above the top.
 *  - a 512 KiB run freed at the top and purged by a pass: still mapped;
 *  - 8 MiB freed at the top and purged: the 2 MiB above the top mapped,
 *    what lies past them not;
 *  - a forced pass: nothing above the top mapped.
 * mincore() tells mapped (0) from unmapped (-1, ENOMEM). */
#include "span_burst.h"

#include <errno.h>
#include <sys/mman.h>
#include <unistd.h>

#define TOP_KEPT (2u << 20)

/* The kernel's page holding a (one byte of result: one kernel page). */
static bool mapped(uintptr_t a) {
  unsigned char v[1];
  uintptr_t page = a & ~(uintptr_t)(sysconf(_SC_PAGESIZE) - 1);
  if (mincore((void *)page, 1, v) == 0) return true;
  CHECKF(errno == ENOMEM, "mincore: errno %d", errno);
  return false;
}

/* Passes late enough for every free run's delay, and enough of them for
 * the demand window (pass_keep) to forget what the test handed out. */
static void passes_late(void) {
  uint32_t late = _hak_os_now_ms() + 3600u * 1000;
  for (unsigned k = 0; k < HAK_SPAN_DEMAND_PASSES + 2; k++) span_pass_at(late);
}

static void span_pass_forced(void) {
  struct hak_purge_policy pp = { .force = true, .now_ms = _hak_os_now_ms(), .keep = 0 };
  _hak_span_purge(&pp);
}

int main(void) {
  enum { big = 16 };
  void *base = hak_malloc(SPAN_BLOCK);          /* below everything the test frees */
  void *top = hak_malloc(SPAN_BLOCK);
  CHECK(base != NULL && top != NULL);
  if (!base || !top) TEST_END();
  memset(top, 0x5A, SPAN_BLOCK);
  uintptr_t t = (uintptr_t)top;
  hak_free(top);
  _hak_front_spans_flush(_hak_thread_tls.heap);
  passes_late();
  CHECKF(span_dirty() == 0, "%llu KiB still resident after the passes", (unsigned long long)span_dirty() >> 10);
  CHECKF(mapped(t) && mapped(t + SPAN_BLOCK - 1), "the purged top run's 512 KiB unmapped");

  void *blocks[big];
  for (unsigned i = 0; i < big; i++) {
    blocks[i] = hak_malloc(SPAN_BLOCK);
    CHECK(blocks[i] != NULL);
    if (blocks[i]) memset(blocks[i], 0x3C, SPAN_BLOCK);
  }
  uintptr_t first = (uintptr_t)blocks[0], last = (uintptr_t)blocks[big - 1];
  CHECKF(last > first + (big - 2) * (uintptr_t)SPAN_BLOCK, "the blocks are not side by side at the top");
  for (unsigned i = 0; i < big; i++) hak_free(blocks[i]);
  _hak_front_spans_flush(_hak_thread_tls.heap);
  passes_late();
  CHECKF(span_dirty() == 0, "%llu KiB still resident after the passes", (unsigned long long)span_dirty() >> 10);
  CHECKF(mapped(first) && mapped(first + TOP_KEPT / 2), "the 2 MiB above the top unmapped");
  CHECKF(!mapped(last), "8 MiB above the top still mapped");

  span_pass_forced();
  CHECKF(!mapped(first), "a forced pass left the address space above the top mapped");
  hak_free(base);
  TEST_END();
}
