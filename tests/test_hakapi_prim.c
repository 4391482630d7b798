/* The contract of prim.h, in the form this build selected (the x86-64 glibc
 * form, or the portable twin: `make PORTABLE=1`, ThreadSanitizer, other
 * targets): entries name front slots and back; entry 0 reads an empty list
 * in every thread; a push takes credit and links the old head through word
 * 0; a push without credit fails and leaves the credit at -1; an unlink after
 * a pop restores the head and gives the credit back. Each list is checked
 * through the primitives against _hak_thread_tls itself, in a thread of its
 * own, with every other list left as it was. */
#include <pthread.h>
#include <stdint.h>
#include <string.h>
#include "testing.h"
#include "hakmem.h"
#include "hakmem_internal.h"

#if defined(__x86_64__) && defined(__GLIBC__) && !defined(__SANITIZE_THREAD__) && !HAK_PORTABLE
#define EXPECT_TP 1
#else
#define EXPECT_TP 0
#endif

static void check_entries(void) {
  CHECK(HAK_PRIM_TP == EXPECT_TP);
  size_t bad_front = 0, bad_order = 0, zero = 0;
  for (unsigned f = 1; f < HAK_NFRONT; f++) {
    intptr_t e = hak_prim_entry(f), before = hak_prim_entry(f - 1);
    zero += e == 0;
    bad_front += hak_prim_front(e) != f;
    bad_order += e <= before;
  }
  CHECKF(zero == 0, "%zu front slots have entry 0 (the unwritten entry)", zero);
  CHECKF(bad_front == 0, "%zu entries do not name their front slot back", bad_front);
  CHECKF(bad_order == 0, "%zu entries are not above the previous slot's", bad_order);
}

/* Every other list and credit, and the rest of the struct, as they were. */
static bool others_unchanged(const struct hak_tls *saved, unsigned f) {
  for (unsigned g = 0; g < HAK_NFRONT; g++)
    if (g != f && (_hak_thread_tls.head[g] != saved->head[g] || _hak_thread_tls.credit[g] != saved->credit[g]))
      return false;
  return _hak_thread_tls.heap == saved->heap && _hak_thread_tls.exited == saved->exited;
}

static void check_list(unsigned f) {
  struct hak_tls saved;
  memcpy(&saved, &_hak_thread_tls, sizeof saved);
  void *b1[2] = {(void *)1, NULL}, *b2[2] = {(void *)2, NULL};
  intptr_t e = hak_prim_entry(f);
  uintptr_t s = HAK_HOME_FIRST + f;
  _hak_thread_tls.head[f] = NULL;
  _hak_thread_tls.credit[f] = 1;
  CHECK(hak_prim_head(e) == NULL);
  CHECK(hak_prim_home_push(s, b1));                   /* takes the one credit */
  CHECK(hak_link_get(b1) == NULL && _hak_thread_tls.head[f] == b1 && _hak_thread_tls.credit[f] == 0);
  CHECK(hak_prim_head(e) == b1);
  CHECK(!hak_prim_home_push(s, b2));                  /* no credit: refused */
  CHECK(_hak_thread_tls.head[f] == b1 && _hak_thread_tls.credit[f] == -1 && b2[0] == (void *)2);
  _hak_thread_tls.credit[f] = 1;                      /* what the slow path would give */
  CHECK(hak_prim_home_push(s, b2));
  CHECK(hak_link_get(b2) == b1 && hak_prim_head(e) == b2 && _hak_thread_tls.credit[f] == 0);
  void **b = hak_prim_head(e);                        /* the pop: head, then unlink */
  hak_prim_unlink(e, hak_link_get(b));
  CHECK(b == b2 && _hak_thread_tls.head[f] == b1 && _hak_thread_tls.credit[f] == 1);
  b = hak_prim_head(e);
  hak_prim_unlink(e, hak_link_get(b));
  CHECK(b == b1 && hak_prim_head(e) == NULL && _hak_thread_tls.credit[f] == 2);
  CHECKF(others_unchanged(&saved, f), "front slot %u: another list or credit changed", f);
  _hak_thread_tls.head[f] = saved.head[f];
  _hak_thread_tls.credit[f] = saved.credit[f];
}

static void *thread_checks(void *arg) {
  (void)arg;
  CHECK(hak_prim_head(0) == NULL);                    /* entry 0: an empty list here too */
  check_entries();
  for (unsigned f = 1; f < HAK_NFRONT; f++) check_list(f);
  return NULL;
}

int main(void) {
  fprintf(stderr, "prim.h form: %s\n", HAK_PRIM_TP ? "x86-64 glibc (%fs)" : "portable twin");
  void *p = hak_malloc(100);                          /* initializes hakmem and this thread's heap */
  CHECK(p != NULL);
  CHECK(hak_prim_head(0) == NULL);
  check_entries();
  unsigned c = _hak_class_of_size(100);               /* the table names the list malloc used */
  CHECK(_hak_class_front_of_size[hak_table_index(100)] == hak_prim_entry(HAK_FRONT(c)));
  hak_free(p);
  if (!HAK_HARDENED) {                                /* (the hardened build delays the free) */
    CHECK(hak_prim_head(hak_prim_entry(HAK_FRONT(c))) == p);   /* the free went on that list */
    CHECK(hak_malloc(100) == p);                      /* and malloc pops it */
    hak_free(p);
  }
  for (unsigned f = 1; f < HAK_NFRONT; f++) check_list(f);   /* a thread with a heap */
  pthread_t t;                                        /* and a thread without a heap; */
  int created = pthread_create(&t, NULL, thread_checks, NULL);   /* CHECK counts after the join */
  int joined = created == 0 ? pthread_join(t, NULL) : -1;
  CHECK(created == 0 && joined == 0);
  TEST_END();
}
