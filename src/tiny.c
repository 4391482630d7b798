/* tiny.c — the Tiny front (<= 2 KiB): per-thread free lists per class (the
 * hot part lives in _hak_tls, popped and pushed by the inline fast paths in
 * hakmem_internal.h) and their slow paths: refill from the slab engine in one
 * batch, spill half a full list back to the slabs in one batch. */
#include "hakmem_internal.h"

#include <errno.h>

static uint16_t tiny_cap[HAK_NTINY];

#define HAK_TINY_CAP_MIN 64u
#define HAK_TINY_CAP_MAX 1024u

/* List capacities from HAKMEM_TINY_CACHE_KB; at init, after the options. */
void _hak_tiny_init(void) {
  for (unsigned c = 0; c < HAK_NTINY; c++) {
    unsigned cap = (unsigned)(_hak_option(HAK_OPT_TINY_CACHE_KB) * 1024 / _hak_classes[c].size);
    if (cap < HAK_TINY_CAP_MIN) cap = HAK_TINY_CAP_MIN;
    if (cap > HAK_TINY_CAP_MAX) cap = HAK_TINY_CAP_MAX;
    tiny_cap[c] = (uint16_t)cap;
  }
}

unsigned _hak_tiny_cap(unsigned c) { return tiny_cap[c]; }

void _hak_tiny_heap_init(struct hak_heap *h) {
  (void)h;
  for (unsigned c = 0; c < HAK_NTINY; c++) _hak_tls.credit[c] = (int64_t)_hak_tiny_cap(c);
}

/* Detaches the first n blocks of the list of class c. */
static void *list_cut(unsigned c, unsigned n) {
  void **head = _hak_tls.head[c], **last = head;
  for (unsigned i = 1; i < n && last[0]; i++) last = last[0];
  _hak_tls.head[c] = last[0];
  last[0] = NULL;
  return head;
}

static unsigned list_length(const void *list) {
  unsigned n = 0;
  for (void *const *b = list; b; b = b[0]) n++;
  return n;
}

/* HAK_SLOW: the list of class c is empty (or the thread has no heap yet). */
void *_hak_tiny_alloc_slow(unsigned c) {
  struct hak_heap *h = _hak_heap_get();
  if (!h) { errno = ENOMEM; return NULL; }
  void **b = _hak_tls.head[c];
  if (!b) {
    h->stats.misses[c]++;
    void *chain;
    unsigned n = _hak_slab_take(h, c, _hak_tiny_cap(c) / 2, &chain);
    if (!n) { errno = ENOMEM; return NULL; }
    b = chain;
    _hak_tls.head[c] = b[0];
    _hak_tls.credit[c] -= (int64_t)(n - 1);
  } else {
    h->stats.hits[c]++;
    _hak_tls.head[c] = b[0];
    _hak_tls.credit[c]++;
  }
  b[1] = NULL;
  HAK_ASSERT(list_length(_hak_tls.head[c]) + (unsigned)_hak_tls.credit[c] == _hak_tiny_cap(c));
  return b;
}

/* HAK_SLOW: a valid, not-free Tiny block whose list had no credit left (or
 * the thread has no heap yet, or is exiting). */
void _hak_tiny_free_slow(void *p, unsigned c) {
  void **b = p;
  struct hak_heap *h = _hak_tls.heap;
  if (!h && !_hak_tls.exited) h = _hak_heap_get();
  if (!h) { _hak_slab_free_home(c, p); return; }   /* exited, or no memory for a heap */
  if (_hak_tls.credit[c] <= 0) {
    unsigned n = _hak_tiny_cap(c) / 2;
    _hak_slab_return(h, c, list_cut(c, n));
    _hak_tls.credit[c] += (int64_t)n;
    h->stats.spills[c]++;
  }
  _hak_tls.credit[c]--;
  b[0] = _hak_tls.head[c];
  b[1] = (void *)_hak_free_key;
  _hak_tls.head[c] = b;
  h->stats.frees[c]++;
  HAK_ASSERT(list_length(_hak_tls.head[c]) + (unsigned)_hak_tls.credit[c] == _hak_tiny_cap(c));
}

/* At thread exit: every list back to its slabs. */
void _hak_tiny_heap_flush(struct hak_heap *h) {
  for (unsigned c = 0; c < HAK_NTINY; c++) {
    void *list = _hak_tls.head[c];
    _hak_tls.head[c] = NULL;
    _hak_tls.credit[c] = 0;
    if (list) _hak_slab_return(h, c, list);
  }
}
