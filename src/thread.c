/* thread.c — thread lifecycle: process init, one heap per thread (created on
 * the thread's first slow path, flushed and returned at its exit, then
 * reused), and the registration of the fork handlers (lock.c: every lock
 * held across fork, made free in the child). */
#include "hakmem_internal.h"

#include <pthread.h>
#include <sched.h>
#include <sys/auxv.h>

__thread struct hak_tls _hak_thread_tls __attribute__((tls_model("initial-exec")));
#if !HAK_SHARED_LIB
uint64_t _hak_thread_free_key;
#endif

static pthread_key_t heap_key;
static _Atomic int init_state;                 /* 0 no, 1 running, 2 done */
static struct hak_heap *heaps_all, *heaps_free;
static _Atomic unsigned heaps_live;            /* threads with a heap now */

unsigned _hak_thread_heaps_live(void) { return atomic_load_explicit(&heaps_live, memory_order_relaxed); }

static void thread_exit(void *arg);

#if !HAK_SHARED_LIB
/* The free key of the static library marks blocks that are free (word 1).
 * It must be unknowable to the program: the kernel's AT_RANDOM bytes, mixed
 * with an address. */
static uint64_t make_free_key(void) {
  uint64_t k = (uint64_t)(uintptr_t)&heap_key * 0x9E3779B97F4A7C15ull;
  const unsigned char *rnd = (const unsigned char *)getauxval(AT_RANDOM);
  if (rnd) { uint64_t r; memcpy(&r, rnd + 8, sizeof r); k ^= r; }
  k ^= _hak_os_now_ns() * 0xBF58476D1CE4E5B9ull;
  return k | 1;                                /* never 0 (NULL) */
}
#endif

bool _hak_thread_initialized(void) { return atomic_load_explicit(&init_state, memory_order_acquire) == 2; }

/* Nothing here may call malloc before init_state is 2: pthread_atfork may,
 * and by then a recursive malloc finds hakmem ready. */
void _hak_thread_init(void) {
  if (HAK_LIKELY(_hak_thread_initialized())) return;
  int expected = 0;
  if (!atomic_compare_exchange_strong(&init_state, &expected, 1)) {
    while (!_hak_thread_initialized()) sched_yield();
    return;
  }
  _hak_lock_init();
  _hak_options_init();
  _hak_os_page_init();
  _hak_class_init();
  _hak_class_table_init();
  _hak_os_limit_init();
  _hak_front_init();
  _hak_purge_init();
  _hak_guard_init();
#if !HAK_SHARED_LIB
  _hak_thread_free_key = make_free_key();
#endif
  pthread_key_create(&heap_key, thread_exit);
  atomic_store_explicit(&init_state, 2, memory_order_release);
  pthread_atfork(_hak_lock_fork_prepare, _hak_lock_fork_parent, _hak_lock_fork_child);
  if (_hak_options_get(HAK_OPT_PRINT_OPTIONS)) _hak_options_print();
}

/* Both read and write metadata (track.h). Process exit: the hardened build
 * verifies the exiting thread's delay rings (the other threads may still
 * run: their rings are theirs). */
__attribute__((constructor)) static void hak_boot(void) {
  hak_track_enter();
  _hak_thread_init();
  hak_track_leave();
}
__attribute__((destructor)) static void hak_shutdown(void) {
  hak_track_enter();
#if HAK_HARDENED
  if (_hak_thread_tls.heap) _hak_front_delay_verify_all(_hak_thread_tls.heap);
#endif
  _hak_stats_at_exit();
  hak_track_leave();
}

static struct hak_heap *heap_create(void) {
  _hak_thread_init();
  hak_lock(&_hak_lock_set.heaps);
  struct hak_heap *h = heaps_free;
  if (h) {
    heaps_free = h->next_free;
  } else if ((h = _hak_os_meta_alloc(sizeof *h)) != NULL) {
    h->next_all = heaps_all;
    heaps_all = h;
  }
  if (h) { h->live = true; atomic_fetch_add_explicit(&heaps_live, 1, memory_order_relaxed); }
  hak_unlock(&_hak_lock_set.heaps);
  if (!h) return NULL;
  _hak_front_heap_init(h);
  _hak_thread_tls.heap = h;
  _hak_thread_tls.exited = false;
  pthread_setspecific(heap_key, h);
  return h;
}

struct hak_heap *_hak_thread_heap(void) {
  struct hak_heap *h = _hak_thread_tls.heap;
  return HAK_LIKELY(h != NULL) ? h : heap_create();
}

/* Everything h caches goes back: the front's lists to their slabs, then
 * the current and warm slabs are detached (released when empty, else left to
 * the shared pool). The lists are left empty, without capacity, as before
 * the thread first used them. */
void _hak_thread_flush(struct hak_heap *h) {
  _hak_front_heap_flush(h);
  _hak_refill_heap_flush(h);
}

/* Thread exit: caches back to the slabs, slabs detached (ownerless slabs with
 * free blocks go to the shared pool, where other threads adopt them; kept
 * ones go there at the next free into them), the counters merged, the heap
 * returned for the next thread. */
static void thread_exit(void *arg) {
  struct hak_heap *h = arg;
  if (!h || h != _hak_thread_tls.heap) return;
  hak_track_enter();                         /* free blocks and metadata (track.h) */
  _hak_thread_flush(h);
  h->stats.threads_exited++;
  _hak_stats_merge_heap(h);
  _hak_thread_tls.heap = NULL;
  _hak_thread_tls.exited = true;
  hak_lock(&_hak_lock_set.heaps);
  h->live = false;
  atomic_fetch_sub_explicit(&heaps_live, 1, memory_order_relaxed);
  h->next_free = heaps_free;
  heaps_free = h;
  hak_unlock(&_hak_lock_set.heaps);
  hak_track_leave();
}

void _hak_thread_visit_heaps(hak_thread_visit_fn fn, void *arg) {
  hak_lock(&_hak_lock_set.heaps);
  for (struct hak_heap *h = heaps_all; h; h = h->next_all)
    if (h->live) fn(h, arg);
  hak_unlock(&_hak_lock_set.heaps);
}
