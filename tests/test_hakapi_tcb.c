/* The inline malloc's size table and the thread control block word it
 * relies on in the x86-64 glibc form (prim.h, HAK_TCB_ZERO): a size whose table entry is
 * not written yet reads %fs:HAK_TCB_ZERO as its list head, which glibc leaves
 * 0 in every thread. Checked here: that word reads 0 in a new thread; and
 * when it does not read 0 at initialization, hakmem writes the whole table at
 * once, so no malloc ever pops what that word holds. A constructor that runs
 * before hakmem's (this program links the static library) puts the address
 * of a decoy block there; malloc of every size must not return the decoy. */
#include <pthread.h>
#include <stdint.h>
#include "testing.h"
#include "hakmem.h"
#include "hakmem_internal.h"

#if HAK_PRIM_TP
static _Alignas(16) void *decoy[2];
static int initialized_before;

static void tcb_word_set(uint64_t w) {
  __asm__ volatile("movq %0, %%fs:%c1" : : "r"(w), "i"(HAK_TCB_ZERO) : "memory");
}

__attribute__((constructor(101))) static void poison(void) {
  initialized_before = _hak_thread_initialized();
  tcb_word_set((uint64_t)(uintptr_t)decoy);
}

static void *read_word(void *arg) {
  (void)arg;
  return (void *)(uintptr_t)(uint64_t)(uintptr_t)hak_prim_head(0);
}
#endif

int main(void) {
#if HAK_PRIM_TP
  CHECKF(!initialized_before, "hakmem was initialized before the test's constructor: nothing tested");
  CHECK((uint64_t)(uintptr_t)hak_prim_head(0) == (uint64_t)(uintptr_t)decoy);
  pthread_t t;
  void *word = decoy;
  CHECK(pthread_create(&t, NULL, read_word, NULL) == 0);
  CHECK(pthread_join(t, &word) == 0);
  CHECKF(word == NULL, "%%fs:%#x reads %p in a new thread, not 0", HAK_TCB_ZERO, word);
  size_t unwritten = 0;
  for (size_t i = 0; i < HAK_TABLE_ENTRIES; i++) unwritten += _hak_class_front_of_size[i] == 0;
  CHECKF(unwritten == 0, "%zu table entries not written", unwritten);
#endif
  /* Every size the table serves, and the largest class sizes' neighbours. */
  size_t decoys = 0, nulls = 0;
  for (size_t n = 0; n <= HAK_TABLE_MAX; n += n < 4096 ? 1 : 997) {
    void *p = hak_malloc(n);
    nulls += p == NULL;
#if HAK_PRIM_TP
    decoys += p == (void *)decoy;
    if (p == (void *)decoy) continue;
#endif
    if (p) ((char *)p)[n ? n - 1 : 0] = 1;
    hak_free(p);
  }
  CHECKF(decoys == 0, "malloc returned the decoy %zu times", decoys);
  CHECK(nulls == 0);
#if HAK_PRIM_TP
  tcb_word_set(0);
#endif
  TEST_END();
}
