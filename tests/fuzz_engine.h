/* The differential fuzzer's engine, shared by test_fuzz (linked with
 * -lhakmem), plain_fuzz (any allocator, chosen by LD_PRELOAD) and the
 * libFuzzer target (fuzz_libfuzzer.c).
 *
 * Random sequences of every API call (malloc, calloc, realloc and
 * reallocarray to and from every tier, the aligned family with alignments up
 * to 1 MiB and size 0 with every alignment, malloc_usable_size, free_sized,
 * free_aligned_sized, the error cases; where the API has them, first-class
 * heaps: their malloc and aligned_alloc, destroy and delete, a heap per
 * slot owned by the slot's thread) run against a shadow model:
 * - contents: every block is filled over its whole usable size with a
 *   pattern derived from its id, verified before free and realloc (realloc:
 *   the old prefix), on receipt from another thread, at random, and in the
 *   child of a fork;
 * - alignment (16 for blocks of 16 B or more, the requested one for the
 *   aligned family, a page for valloc/pvalloc);
 * - usable size >= request, unchanged while the block lives, and at most
 *   1.25x the request for malloc/calloc/realloc of 64 B .. 1 MiB (README);
 * - non-overlap: the usable ranges of all live blocks of all threads are
 *   kept in one interval set (a treap), each new block must fit in a gap.
 * Threads ("slots") hand blocks to each other through queues and free the
 * others' blocks; a slot's thread exits after a random number of operations
 * and is replaced (its blocks freed, left to its successor or handed out);
 * the main thread forks once in the middle: the child checks every live block
 * of every slot, goes on with the model alone and exits.
 *
 * Randomness comes from a seeded generator (one stream per slot and thread
 * generation, so a seed replays each thread's operations) or, under
 * libFuzzer, from the input bytes. The model's memory comes from mmap, never
 * from the allocator under test. A failed check prints one line naming the
 * seed and exits (or aborts, under libFuzzer). */
#ifndef HAKMEM_FUZZ_ENGINE_H
#define HAKMEM_FUZZ_ENGINE_H

#include <errno.h>
#include <pthread.h>
#include <semaphore.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* ---- the API under test ------------------------------------------------- */
struct fz_api {
  const char *name;
  void *(*malloc_fn)(size_t);
  void (*free_fn)(void *);
  void *(*calloc_fn)(size_t, size_t);
  void *(*realloc_fn)(void *, size_t);
  void *(*reallocarray_fn)(void *, size_t, size_t);
  int (*posix_memalign_fn)(void **, size_t, size_t);
  void *(*aligned_alloc_fn)(size_t, size_t);
  void *(*memalign_fn)(size_t, size_t);
  void *(*valloc_fn)(size_t);
  void *(*pvalloc_fn)(size_t);
  size_t (*usable_fn)(void *);
  void (*free_sized_fn)(void *, size_t);                    /* NULL: absent */
  void (*free_aligned_sized_fn)(void *, size_t, size_t);    /* NULL: absent */
  int usable_bound;   /* check hakmem's usable sizes: the 25% rule (64 B .. 1 MiB),
                         and at least 1 byte for a request of 0 */
  /* First-class heaps (NULL: absent), the handle as void *. */
  void *(*heap_new_fn)(void);
  void *(*heap_malloc_fn)(void *, size_t);
  void *(*heap_aligned_alloc_fn)(void *, size_t, size_t);
  void (*heap_destroy_fn)(void *);
  void (*heap_delete_fn)(void *);
};

#define FZ_KIB ((size_t)1024)
#define FZ_MIB (FZ_KIB * 1024)
#define FZ_MAX_SIZE (8 * FZ_MIB)
#define FZ_MAX_ALIGN_SHIFT 20          /* alignments up to 1 MiB */
#define FZ_MAX_SLOTS 16
#define FZ_SLOT_BLOCKS 1024            /* live blocks a slot may hold */
#define FZ_QUEUE_BLOCKS 512            /* blocks waiting in a slot's queue */
#define FZ_SLOT_BYTES (24 * FZ_MIB)    /* live bytes a slot may hold */
#define FZ_CLASSES_MAX 8192

enum fz_kind { FZ_MALLOC, FZ_CALLOC, FZ_REALLOC, FZ_ALIGNED_ALLOC, FZ_POSIX_MEMALIGN,
               FZ_MEMALIGN, FZ_VALLOC, FZ_PVALLOC, FZ_KINDS };
static const char *const fz_kind_name[FZ_KINDS] = {
  "malloc", "calloc", "realloc", "aligned_alloc", "posix_memalign", "memalign", "valloc", "pvalloc" };

struct fz_block {
  unsigned char *p;
  size_t req, usable, align;
  uint64_t id;
  int kind;
  uint64_t heap;        /* the serial of the heap it lies in, 0: none */
};

/* ---- randomness: a seeded generator or the fuzzer's input bytes ---------- */
struct fz_rng {
  uint64_t s;
  const uint8_t *data;   /* non-NULL: take the numbers from these bytes */
  size_t len, pos;
  int exhausted;
};

static uint64_t fz_mix(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

static uint64_t fz_next(struct fz_rng *r) {
  if (!r->data) { r->s = fz_mix(r->s); return r->s; }
  uint64_t v = 0;
  for (int i = 0; i < 3; i++) {
    if (r->pos >= r->len) { r->exhausted = 1; break; }
    v = v << 8 | r->data[r->pos++];
  }
  return fz_mix(v);   /* spread the bytes; equal inputs give equal runs */
}
static uint64_t fz_below(struct fz_rng *r, uint64_t n) { return n ? fz_next(r) % n : 0; }

/* ---- the run ------------------------------------------------------------- */
struct fz_node;
struct fz_slot {
  pthread_mutex_t mu;             /* guards blocks, queue and the counters */
  struct fz_block *blocks;        /* live blocks this slot owns */
  size_t n, bytes;
  struct fz_block *queue;         /* blocks other slots handed to this one */
  size_t qn;
  pthread_t thread;
  atomic_int running;
  int generation;
  void *heap;                     /* the slot's heap, owned by heap_owner */
  pthread_t heap_owner;
  uint64_t heap_serial;
  int heap_handed;                /* a block of it went to a queue: delete it, never destroy */
};

struct fz_run {
  const struct fz_api *api;
  uint64_t seed;
  int nslots, forked, in_child, abort_on_fail;
  size_t phantoms;                /* fork child: blocks in the set but in no model */
  int trace;                      /* FUZZ_TRACE=1: every call on stderr */
  long ops_target;
  atomic_long ops_done;
  atomic_ulong next_id, next_heap;
  long threads_started, max_live;
  struct fz_slot slots[FZ_MAX_SLOTS];
  sem_t exited;                   /* posted by each slot thread as it ends */
  pthread_mutex_t set_mu;         /* guards the interval set */
  struct fz_node *root, *free_nodes;
  size_t set_count;
};

static size_t fz_classes[FZ_CLASSES_MAX];
static size_t fz_nclasses;
static size_t fz_page;

static void *fz_map(size_t bytes) {
  void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) { perror("fuzz: mmap"); _exit(2); }
  return p;
}

/* One line on stderr (no malloc: the allocator may be what is broken), then
 * exit: a failure of a check is the result; going on would only cascade. */
__attribute__((format(printf, 2, 3)))
static void fz_fail(struct fz_run *run, const char *fmt, ...) {
  char line[512];
  char seed[48] = "the input's call sequence";
  if (!run->abort_on_fail) snprintf(seed, sizeof seed, "seed %llu", (unsigned long long)run->seed);
  int k = snprintf(line, sizeof line, "fuzz: FAIL (%s, %s%s): ", run->api->name, seed,
                   run->in_child ? ", fork child" : "");
  va_list ap;
  va_start(ap, fmt);
  if (k > 0 && (size_t)k < sizeof line) k += vsnprintf(line + k, sizeof line - (size_t)k, fmt, ap);
  va_end(ap);
  if (k < 0 || (size_t)k >= sizeof line - 1) k = (int)sizeof line - 2;
  line[k++] = '\n';
  if (write(2, line, (size_t)k) < 0) { /* nothing more to do */ }
  if (run->abort_on_fail) abort();
  _exit(1);
}

/* ---- the interval set: a treap of [lo, hi) keyed by lo ------------------- */
struct fz_node { uintptr_t lo, hi; uint64_t prio; struct fz_node *l, *r; };

static void fz_split(struct fz_node *t, uintptr_t key, struct fz_node **a, struct fz_node **b) {
  if (!t) { *a = *b = NULL; return; }
  if (t->lo < key) { fz_split(t->r, key, &t->r, b); *a = t; }
  else { fz_split(t->l, key, a, &t->l); *b = t; }
}
static struct fz_node *fz_merge(struct fz_node *a, struct fz_node *b) {
  if (!a) return b;
  if (!b) return a;
  if (a->prio > b->prio) { a->r = fz_merge(a->r, b); return a; }
  b->l = fz_merge(a, b->l);
  return b;
}

/* Adds [p, p + len); fails the run if it overlaps a live block. */
static void fz_set_insert(struct fz_run *run, const void *p, size_t len, int kind) {
  uintptr_t lo = (uintptr_t)p, hi = lo + (len ? len : 1);
  pthread_mutex_lock(&run->set_mu);
  struct fz_node *a, *b, *x;
  fz_split(run->root, lo, &a, &b);
  for (x = a; x && x->r; x = x->r) {}
  if (x && x->hi > lo)
    fz_fail(run, "%s returned %p (%zu usable bytes) inside the live block [%p, %p)",
            fz_kind_name[kind], p, len, (void *)x->lo, (void *)x->hi);
  for (x = b; x && x->l; x = x->l) {}
  if (x && x->lo < hi)
    fz_fail(run, "%s returned %p (%zu usable bytes), overlapping the live block [%p, %p)",
            fz_kind_name[kind], p, len, (void *)x->lo, (void *)x->hi);
  struct fz_node *n = run->free_nodes;
  if (!n) fz_fail(run, "interval set full");
  run->free_nodes = n->r;
  n->lo = lo; n->hi = hi; n->prio = fz_mix(lo ^ run->set_count); n->l = n->r = NULL;
  run->root = fz_merge(fz_merge(a, n), b);
  run->set_count++;
  pthread_mutex_unlock(&run->set_mu);
}

static void fz_set_remove(struct fz_run *run, const void *p) {
  uintptr_t lo = (uintptr_t)p;
  pthread_mutex_lock(&run->set_mu);
  struct fz_node *a, *b, *m, *c;
  fz_split(run->root, lo, &a, &b);
  fz_split(b, lo + 1, &m, &c);
  if (!m) fz_fail(run, "model: %p not in the interval set", p);
  m->r = run->free_nodes;
  run->free_nodes = m;
  run->root = fz_merge(a, c);
  run->set_count--;
  pthread_mutex_unlock(&run->set_mu);
}

/* ---- contents ------------------------------------------------------------ */
/* Word k of block id's pattern: a per-block start plus k times an odd
 * constant (no two words of a block alike, cheap enough for 8 MiB blocks). */
#define FZ_STEP 0x9E3779B97F4A7C15ull
static uint64_t fz_base(uint64_t id) { return fz_mix(id ^ 0xB10Cull); }

static void fz_fill(unsigned char *p, size_t len, uint64_t id) {
  uint64_t w = fz_base(id);
  size_t k = 0;
  for (; k + 8 <= len; k += 8, w += FZ_STEP) memcpy(p + k, &w, 8);
  if (k < len) memcpy(p + k, &w, len - k);
}

/* Checks the first len bytes of p against id's pattern; returns the offset of
 * the first wrong byte, or SIZE_MAX. */
static size_t fz_first_bad(const unsigned char *p, size_t len, uint64_t id) {
  uint64_t w = fz_base(id), v;
  size_t k = 0;
  for (; k + 8 <= len; k += 8, w += FZ_STEP) {
    memcpy(&v, p + k, 8);
    if (v != w) break;
  }
  for (size_t i = k; i < len; i++)
    if (p[i] != (unsigned char)((w + (i - k) / 8 * FZ_STEP) >> (i % 8 * 8))) return i;
  return SIZE_MAX;
}

static void fz_verify(struct fz_run *run, const struct fz_block *b, size_t len, const char *when) {
  size_t bad = fz_first_bad(b->p, len, b->id);
  if (bad != SIZE_MAX)
    fz_fail(run, "%s: byte %zu of the %zu-byte %s block %p (usable %zu, id %llu) changed",
            when, bad, b->req, fz_kind_name[b->kind], (void *)b->p, b->usable,
            (unsigned long long)b->id);
}

/* ---- sizes and alignments -------------------------------------------------- */
/* The class table by probing: the usable size of malloc(s) is its class's
 * size, and the next class starts one byte above. Works for any allocator.
 * Up to the first Large size (Large sizes are drawn apart: a page apart,
 * their boundaries would crowd out the small ones). */
static void fz_probe_classes(const struct fz_api *api) {
  fz_page = (size_t)sysconf(_SC_PAGESIZE);     /* or hakmem's, when HAKMEM_PAGE_SIZE asks for more */
  const char *forced = getenv("HAKMEM_PAGE_SIZE");
  if (forced && (size_t)atol(forced) > fz_page) fz_page = (size_t)atol(forced);
  fz_nclasses = 0;
  for (size_t s = 1; s <= FZ_MIB + 1 && fz_nclasses < FZ_CLASSES_MAX;) {
    void *p = api->malloc_fn(s);
    if (!p) break;
    size_t u = api->usable_fn(p);
    api->free_fn(p);
    if (u < s) u = s;
    fz_classes[fz_nclasses++] = u;
    s = u + 1;
  }
}

/* Sizes from 0 to 8 MiB, skewed to small, with every class boundary. */
static size_t fz_size(struct fz_rng *r) {
  uint64_t k = fz_below(r, 100);
  if (k < 3) return fz_below(r, 17);
  if (k < 40) return 1 + fz_below(r, 256);
  if (k < 56) return 257 + fz_below(r, 2048 - 256);
  if (k < 66) return 2049 + fz_below(r, 52 * FZ_KIB - 2048);
  if (k < 72) return 52 * FZ_KIB + 1 + fz_below(r, FZ_MIB - 52 * FZ_KIB);
  if (k < 74) return FZ_MIB + 1 + fz_below(r, FZ_MIB);
  if (k < 75) return 2 * FZ_MIB + 1 + fz_below(r, FZ_MAX_SIZE - 2 * FZ_MIB);
  if (fz_nclasses == 0) return 1;
  size_t c = fz_classes[fz_below(r, fz_nclasses)];
  return c - 1 + fz_below(r, 3);   /* one below, at, one above the boundary */
}

static size_t fz_alignment(struct fz_rng *r, unsigned min_shift) {
  unsigned shift = fz_below(r, 2) ? 3 + (unsigned)fz_below(r, 4)
                                  : (unsigned)fz_below(r, FZ_MAX_ALIGN_SHIFT + 1);
  if (shift < min_shift) shift = min_shift;
  return (size_t)1 << shift;
}

/* The alignment malloc owes a block of n bytes: 16 from 16 bytes up. */
static size_t fz_natural_align(size_t n) {
  size_t a = 1;
  while (a < 16 && a * 2 <= n) a *= 2;
  return a;
}

/* ---- the model's blocks ---------------------------------------------------- */
static void fz_add(struct fz_slot *s, const struct fz_block *b) {
  pthread_mutex_lock(&s->mu);
  s->blocks[s->n++] = *b;
  s->bytes += b->usable;
  pthread_mutex_unlock(&s->mu);
}

/* Takes block i out of the slot's model (the caller then owns it). */
static struct fz_block fz_take(struct fz_slot *s, size_t i) {
  pthread_mutex_lock(&s->mu);
  struct fz_block b = s->blocks[i];
  s->blocks[i] = s->blocks[--s->n];
  s->bytes -= b.usable;
  pthread_mutex_unlock(&s->mu);
  return b;
}

/* The block just admitted (the slot's last) lies in heap (a serial). */
static void fz_heap_mark(struct fz_slot *s, uint64_t heap) {
  pthread_mutex_lock(&s->mu);
  s->blocks[s->n - 1].heap = heap;
  pthread_mutex_unlock(&s->mu);
}

static int fz_room(const struct fz_slot *s, size_t n) {
  return s->n < FZ_SLOT_BLOCKS && s->bytes + n <= FZ_SLOT_BYTES;
}

/* Checks a block the allocator just returned, fills it and enters it in the
 * model: need is the least usable size it owes, n the request; bounded: the
 * 25% rule applies (a fresh block of malloc, calloc or realloc; a realloc
 * that shrinks in place may keep its block). */
static void fz_admit(struct fz_run *run, struct fz_slot *s, void *p, size_t n, size_t need,
                     size_t align, int kind, int bounded) {
  const struct fz_api *api = run->api;
  if (!p) fz_fail(run, "%s(%zu, alignment %zu) returned NULL (errno %d)", fz_kind_name[kind], n, align, errno);
  if ((uintptr_t)p & (align - 1))
    fz_fail(run, "%s(%zu) returned %p, not aligned to %zu", fz_kind_name[kind], n, p, align);
  size_t u = api->usable_fn(p);
  if (run->trace) fprintf(stderr, "%s(%zu, align %zu) = %p usable %zu\n", fz_kind_name[kind], n, align, p, u);
  if (u < need || (u == 0 && api->usable_bound))   /* musl's usable size of malloc(0) is 0 */
    fz_fail(run, "%s(%zu, alignment %zu) = %p: usable size %zu < %zu", fz_kind_name[kind], n, align, p, u,
            need ? need : 1);
  /* With pages above 4 KiB, a block of its own mapping (a first-class
   * heap's above 128 KiB) may be whole pages. */
  size_t bound = n + n / 4, pages = (n + fz_page - 1) / fz_page * fz_page;
  if (fz_page > 4096 && n >= fz_page && pages > bound) bound = pages;
  if (api->usable_bound && bounded && n >= 64 && n <= FZ_MIB && u > bound)
    fz_fail(run, "%s(%zu) = %p: usable size %zu is more than 25%% above the request", fz_kind_name[kind], n, p, u);
  if (kind == FZ_CALLOC)
    for (size_t i = 0; i < n; i++)
      if (((unsigned char *)p)[i]) fz_fail(run, "calloc(%zu) = %p: byte %zu is not zero", n, p, i);
  struct fz_block b = { p, n, u, align, atomic_fetch_add(&run->next_id, 1), kind, 0 };
  fz_fill(b.p, u, b.id);
  fz_set_insert(run, p, u, kind);
  fz_add(s, &b);
}

/* Checks a block leaving the model (contents, usable size unchanged) and
 * takes it out of the interval set: the caller frees or reallocates it. */
static void fz_retire(struct fz_run *run, const struct fz_block *b, const char *why) {
  fz_verify(run, b, b->usable, why);
  size_t u = run->api->usable_fn(b->p);
  if (u != b->usable)
    fz_fail(run, "%s: malloc_usable_size of the %zu-byte %s block %p is %zu, was %zu", why, b->req,
            fz_kind_name[b->kind], (void *)b->p, u, b->usable);
  fz_set_remove(run, b->p);
}

/* Frees a block by free, free_sized or free_aligned_sized, as its kind allows. */
static void fz_release(struct fz_run *run, struct fz_rng *r, const struct fz_block *b) {
  const struct fz_api *api = run->api;
  fz_retire(run, b, "free");
  uint64_t how = fz_below(r, 3);
  if (run->trace) fprintf(stderr, "free %p (%s %zu, usable %zu) way %d\n", (void *)b->p, fz_kind_name[b->kind],
                          b->req, b->usable, (int)how);
  if (how == 0 && b->kind <= FZ_REALLOC && api->free_sized_fn)
    api->free_sized_fn(b->p, b->req);
  else if (how == 0 && b->kind == FZ_ALIGNED_ALLOC && api->free_aligned_sized_fn)
    api->free_aligned_sized_fn(b->p, b->align, b->req);
  else
    api->free_fn(b->p);
}

/* ---- operations ------------------------------------------------------------ */
static void fz_op_free(struct fz_run *run, struct fz_slot *s, struct fz_rng *r) {
  if (s->n == 0) return;
  struct fz_block b = fz_take(s, fz_below(r, s->n));
  fz_release(run, r, &b);
}

static void fz_op_alloc(struct fz_run *run, struct fz_slot *s, struct fz_rng *r, int kind) {
  const struct fz_api *api = run->api;
  size_t n = fz_size(r), align = fz_natural_align(n), need = n;
  if (kind >= FZ_ALIGNED_ALLOC && fz_below(r, 8) == 0) n = 0;   /* size 0, every alignment */
  if (!fz_room(s, n + fz_page)) { fz_op_free(run, s, r); return; }
  void *p = NULL;
  errno = 0;
  switch (kind) {
  case FZ_MALLOC: p = api->malloc_fn(n); break;
  case FZ_CALLOC: {
    size_t each = 1 + fz_below(r, 24), count = n / each;
    n = need = count * each;
    align = fz_natural_align(n);
    p = fz_below(r, 2) ? api->calloc_fn(count, each) : api->calloc_fn(each, count);
    break;
  }
  case FZ_ALIGNED_ALLOC: align = fz_alignment(r, 0); need = n; p = api->aligned_alloc_fn(align, n); break;
  case FZ_POSIX_MEMALIGN: {
    align = fz_alignment(r, 3); need = n;
    int rc = api->posix_memalign_fn(&p, align, n);
    if (rc) fz_fail(run, "posix_memalign(%zu, %zu) = %d", align, n, rc);
    break;
  }
  case FZ_MEMALIGN: align = fz_alignment(r, 0); need = n; p = api->memalign_fn(align, n); break;
  case FZ_VALLOC: align = fz_page; need = n; p = api->valloc_fn(n); break;
  case FZ_PVALLOC:
    /* pvalloc(0): glibc 2.36 gives a minimum chunk, hakmem a page
     * (test_zero_aligned): the model asks only for a valid block. */
    align = fz_page; need = (n + fz_page - 1) / fz_page * fz_page;
    p = api->pvalloc_fn(n);
    break;
  }
  fz_admit(run, s, p, n, need, align, kind, kind <= FZ_CALLOC);
}

/* realloc or reallocarray of a live block (or of NULL) to a size of any tier;
 * the old contents up to the smaller size must come along. */
static void fz_op_realloc(struct fz_run *run, struct fz_slot *s, struct fz_rng *r) {
  const struct fz_api *api = run->api;
  size_t n = fz_size(r);
  if (s->n == 0 || fz_below(r, 10) == 0) {
    if (!fz_room(s, n)) { fz_op_free(run, s, r); return; }
    fz_admit(run, s, api->realloc_fn(NULL, n), n, n, fz_natural_align(n), FZ_REALLOC, 1);
    return;
  }
  struct fz_block b = fz_take(s, fz_below(r, s->n));
  if (!fz_room(s, n)) n = fz_below(r, 4096);
  fz_retire(run, &b, "realloc");
  void *q;
  errno = 0;
  if (fz_below(r, 5) == 0) {
    size_t each = 1 + fz_below(r, 8), count = n / each;
    n = count * each;
    q = api->reallocarray_fn(b.p, count, each);
  } else {
    q = api->realloc_fn(b.p, n);
  }
  if (run->trace) fprintf(stderr, "realloc %p (%s %zu, usable %zu) to %zu = %p\n", (void *)b.p,
                          fz_kind_name[b.kind], b.req, b.usable, n, q);
  if (!q && n == 0) return;   /* realloc(p, 0) freed p (glibc's rule) */
  if (!q) fz_fail(run, "realloc(%p, %zu) of a %zu-byte %s block returned NULL (errno %d)", (void *)b.p, n,
                  b.req, fz_kind_name[b.kind], errno);
  struct fz_block moved = b;
  moved.p = q;
  fz_verify(run, &moved, b.req < n ? b.req : n, "after realloc");
  int in_place = q == (void *)b.p && n <= b.usable;
  fz_admit(run, s, q, n, n, fz_natural_align(n), FZ_REALLOC, !in_place);
  if (q == (void *)b.p && b.heap) fz_heap_mark(s, b.heap);   /* still in its heap */
}

static void fz_op_check(struct fz_run *run, struct fz_slot *s, struct fz_rng *r) {
  if (s->n == 0) return;
  const struct fz_block *b = &s->blocks[fz_below(r, s->n)];
  fz_verify(run, b, b->usable, "random check");
  size_t u = run->api->usable_fn(b->p);
  if (u != b->usable)
    fz_fail(run, "malloc_usable_size of the %zu-byte %s block %p is %zu, was %zu", b->req,
            fz_kind_name[b->kind], (void *)b->p, u, b->usable);
}

/* Hands a block to another slot's queue: that slot's thread frees it or keeps it. */
static void fz_op_handoff(struct fz_run *run, struct fz_slot *s, struct fz_rng *r) {
  if (s->n == 0) return;
  struct fz_slot *t = &run->slots[fz_below(r, (uint64_t)run->nslots)];
  struct fz_block b = fz_take(s, fz_below(r, s->n));
  if (b.heap && b.heap == s->heap_serial) s->heap_handed = 1;
  pthread_mutex_lock(&t->mu);
  int queued = t->qn < FZ_QUEUE_BLOCKS;
  if (queued) t->queue[t->qn++] = b;
  pthread_mutex_unlock(&t->mu);
  if (!queued) fz_release(run, r, &b);
}

/* Takes what other slots handed over: checks each block, frees half of them
 * at once (a free from a thread other than the allocating one), keeps the rest. */
static void fz_drain(struct fz_run *run, struct fz_slot *s, struct fz_rng *r) {
  struct fz_block got[64];
  size_t k = 0;
  pthread_mutex_lock(&s->mu);
  while (s->qn && k < 64) got[k++] = s->queue[--s->qn];
  pthread_mutex_unlock(&s->mu);
  for (size_t i = 0; i < k; i++) {
    fz_verify(run, &got[i], got[i].usable, "received from another thread");
    if (fz_below(r, 2) && fz_room(s, got[i].usable)) fz_add(s, &got[i]);
    else fz_release(run, r, &got[i]);
  }
}

/* The error cases: NULL with ENOMEM or EINVAL, and the block given to a
 * failing realloc left as it was. */
static void fz_op_invalid(struct fz_run *run, struct fz_slot *s, struct fz_rng *r) {
  const struct fz_api *api = run->api;
  void *p = (void *)&p;
  const char *what = "malloc(SIZE_MAX)";
  int rc;
  errno = 0;
  switch (fz_below(r, 6)) {
  case 0: p = api->malloc_fn(SIZE_MAX - fz_below(r, 4096)); break;
  case 1:
    what = "calloc with an overflowing product";
    p = api->calloc_fn(SIZE_MAX / 2 + 1 + fz_below(r, 1000), 2 + fz_below(r, 16));
    break;
  case 2:
    rc = api->posix_memalign_fn(&p, fz_below(r, 2) ? 24 : 0, 8 + fz_below(r, 100));
    if (rc != EINVAL) fz_fail(run, "posix_memalign with a bad alignment returned %d, not EINVAL", rc);
    return;
  case 3:
    what = "memalign(alignment, SIZE_MAX - 4 MiB)";
    p = api->memalign_fn((size_t)1 << (4 + fz_below(r, 17)), SIZE_MAX - FZ_MIB * 4);
    break;
  default: {
    if (s->n == 0) return;
    const struct fz_block *b = &s->blocks[fz_below(r, s->n)];
    what = "realloc(p, SIZE_MAX) or reallocarray overflowing";
    p = fz_below(r, 2) ? api->realloc_fn(b->p, SIZE_MAX - fz_below(r, 4096))
                       : api->reallocarray_fn(b->p, SIZE_MAX / 4 + 1, 8);
    fz_verify(run, b, b->usable, "after a failed realloc");
    break;
  }
  }
  if (p != NULL || errno != ENOMEM)
    fz_fail(run, "%s returned %p (errno %d), not NULL with ENOMEM", what, p, errno);
}

/* First-class heaps: the slot's heap (made on first use by the slot's
 * thread, which owns it) serves malloc and aligned_alloc; destroy takes its
 * blocks out of the model (unless one went to a queue: then delete, which
 * keeps them). A heap the thread left at exit was deleted by the allocator. */
static void fz_heap_end(struct fz_run *run, struct fz_slot *s, struct fz_rng *r) {
  const struct fz_api *api = run->api;
  if (s->heap_handed || fz_below(r, 2)) {
    if (run->trace) fprintf(stderr, "heap_delete %p\n", s->heap);
    api->heap_delete_fn(s->heap);
  } else {
    for (size_t i = s->n; i-- > 0; )
      if (s->blocks[i].heap == s->heap_serial) {
        struct fz_block b = fz_take(s, i);
        fz_retire(run, &b, "heap_destroy");
      }
    if (run->trace) fprintf(stderr, "heap_destroy %p\n", s->heap);
    api->heap_destroy_fn(s->heap);
  }
  s->heap = NULL;
}

static void fz_op_heap(struct fz_run *run, struct fz_slot *s, struct fz_rng *r) {
  const struct fz_api *api = run->api;
  if (!api->heap_new_fn) { fz_op_free(run, s, r); return; }
  if (s->heap && !pthread_equal(s->heap_owner, pthread_self())) s->heap = NULL;   /* the fork's child */
  if (!s->heap) {
    if (!(s->heap = api->heap_new_fn())) fz_fail(run, "heap_new returned NULL");
    s->heap_owner = pthread_self();
    s->heap_serial = atomic_fetch_add(&run->next_heap, 1) + 1;
    s->heap_handed = 0;
    return;
  }
  uint64_t k = fz_below(r, 10);
  if (k >= 8) { fz_heap_end(run, s, r); return; }
  size_t n = fz_size(r), align = k < 6 ? fz_natural_align(n) : fz_alignment(r, 0);
  if (!fz_room(s, n + fz_page)) { fz_op_free(run, s, r); return; }
  errno = 0;
  void *p = k < 6 ? api->heap_malloc_fn(s->heap, n) : api->heap_aligned_alloc_fn(s->heap, align, n);
  fz_admit(run, s, p, n, n, align, k < 6 ? FZ_MALLOC : FZ_ALIGNED_ALLOC, k < 6);
  fz_heap_mark(s, s->heap_serial);
}

static void fz_step(struct fz_run *run, struct fz_slot *s, struct fz_rng *r) {
  uint64_t k = fz_below(r, 100);
  if (k < 18) fz_op_alloc(run, s, r, FZ_MALLOC);
  else if (k < 24) fz_op_alloc(run, s, r, FZ_CALLOC);
  else if (k < 27) fz_op_alloc(run, s, r, FZ_ALIGNED_ALLOC);
  else if (k < 30) fz_op_alloc(run, s, r, FZ_POSIX_MEMALIGN);
  else if (k < 32) fz_op_alloc(run, s, r, FZ_MEMALIGN);
  else if (k < 33) fz_op_alloc(run, s, r, FZ_VALLOC);
  else if (k < 34) fz_op_alloc(run, s, r, FZ_PVALLOC);
  else if (k < 47) fz_op_realloc(run, s, r);
  else if (k < 77) fz_op_free(run, s, r);
  else if (k < 80) fz_op_heap(run, s, r);
  else if (k < 88) fz_op_check(run, s, r);
  else if (k < 95) fz_op_handoff(run, s, r);
  else if (k < 99) fz_drain(run, s, r);
  else fz_op_invalid(run, s, r);
}

/* ---- slots, threads and the run ------------------------------------------- */
struct fz_thread_arg { struct fz_run *run; int slot; long budget; uint64_t seed; };
static struct fz_thread_arg fz_args[FZ_MAX_SLOTS];

/* A slot's thread ends by freeing its blocks, leaving them to its successor,
 * or handing them to the other slots. */
static void fz_slot_exit(struct fz_run *run, struct fz_slot *s, struct fz_rng *r) {
  uint64_t how = fz_below(r, 3);
  while (how != 1 && s->n) {
    if (how == 0 || run->nslots == 1) fz_op_free(run, s, r);
    else fz_op_handoff(run, s, r);
  }
}

static void *fz_slot_main(void *arg) {
  struct fz_thread_arg *a = arg;
  struct fz_run *run = a->run;
  struct fz_slot *s = &run->slots[a->slot];
  struct fz_rng r = { .s = a->seed };
  long done = 0;
  for (; done < a->budget; done++) {
    fz_step(run, s, &r);
    if ((done & 63) == 63) atomic_fetch_add(&run->ops_done, 64);
  }
  atomic_fetch_add(&run->ops_done, done & 63);
  fz_slot_exit(run, s, &r);
  s->heap = NULL;                 /* deleted by the allocator at the thread's exit */
  atomic_store(&s->running, 0);
  sem_post(&run->exited);
  return NULL;
}

static void fz_slot_start(struct fz_run *run, int i, struct fz_rng *r) {
  struct fz_slot *s = &run->slots[i];
  long per = run->ops_target / run->nslots / 4 + 1;
  fz_args[i] = (struct fz_thread_arg){ run, i, 100 + (long)fz_below(r, (uint64_t)per),
                                       fz_mix(run->seed * 1000003u + (uint64_t)i * 7919u + (uint64_t)s->generation) };
  s->generation++;
  atomic_store(&s->running, 1);
  if (pthread_create(&s->thread, NULL, fz_slot_main, &fz_args[i]) != 0) fz_fail(run, "pthread_create failed");
  run->threads_started++;
}

static void fz_run_init(struct fz_run *run, const struct fz_api *api, uint64_t seed, int nslots, long ops) {
  static struct fz_node *nodes;
  static struct fz_block *arrays;
  const size_t per_slot = FZ_SLOT_BLOCKS + FZ_QUEUE_BLOCKS, nnodes = FZ_MAX_SLOTS * per_slot + 4096;
  if (!nodes) nodes = fz_map(nnodes * sizeof *nodes);
  if (!arrays) arrays = fz_map(FZ_MAX_SLOTS * per_slot * sizeof *arrays);
  memset(run, 0, sizeof *run);
  run->api = api; run->seed = seed; run->nslots = nslots; run->ops_target = ops;
  run->trace = getenv("FUZZ_TRACE") && atoi(getenv("FUZZ_TRACE"));
  atomic_init(&run->next_id, seed << 32);
  pthread_mutex_init(&run->set_mu, NULL);
  sem_init(&run->exited, 0, 0);
  for (size_t i = 0; i < nnodes; i++) nodes[i].r = i + 1 < nnodes ? &nodes[i + 1] : NULL;
  run->free_nodes = nodes;
  for (int i = 0; i < FZ_MAX_SLOTS; i++) {
    pthread_mutex_init(&run->slots[i].mu, NULL);
    run->slots[i].blocks = arrays + (size_t)i * per_slot;
    run->slots[i].queue = run->slots[i].blocks + FZ_SLOT_BLOCKS;
  }
}

/* Frees every block of every slot, queued ones too, and deletes the heaps
 * this thread owns (a slot thread's heap went with its thread); the
 * interval set must then be empty. A heap left open would outlive the run:
 * libFuzzer runs every input in one thread of one process, and its heaps
 * piled up until mmap failed (vm.max_map_count) after 380,000 inputs. */
static void fz_run_finish(struct fz_run *run, struct fz_rng *r) {
  for (int i = 0; i < run->nslots; i++) {
    struct fz_slot *s = &run->slots[i];
    while (s->qn) { struct fz_block b = s->queue[--s->qn]; fz_release(run, r, &b); }
    while (s->n) fz_op_free(run, s, r);
    if (s->heap && pthread_equal(s->heap_owner, pthread_self())) {
      run->api->heap_delete_fn(s->heap);
      s->heap = NULL;
    }
  }
  if (run->set_count != run->phantoms)
    fz_fail(run, "model: %zu blocks left in the interval set", run->set_count - run->phantoms);
}

/* The child of the fork: checks every block it inherited, goes on alone with
 * the whole model (freeing blocks of threads it does not have) and exits. */
static void fz_child(struct fz_run *run, struct fz_rng *r) {
  run->in_child = 1;
  /* Blocks other threads were between the allocator and the model at the
   * fork stay in the set: the child never frees them. */
  run->phantoms = run->set_count;
  for (int i = 0; i < run->nslots; i++) {
    struct fz_slot *s = &run->slots[i];
    run->phantoms -= s->n + s->qn;
    for (size_t k = 0; k < s->n; k++) fz_verify(run, &s->blocks[k], s->blocks[k].usable, "inherited by the fork child");
    for (size_t k = 0; k < s->qn; k++) fz_verify(run, &s->queue[k], s->queue[k].usable, "queued, inherited by the fork child");
  }
  for (long k = 0; k < 3000; k++) fz_step(run, &run->slots[fz_below(r, (uint64_t)run->nslots)], r);
  fz_run_finish(run, r);
  _exit(0);
}

/* Forks while the other slots' threads run (some inside the allocator): the
 * model's locks are held across the fork, so the child's copy is whole. */
static void fz_fork(struct fz_run *run, struct fz_rng *r) {
  for (int i = 0; i < run->nslots; i++) pthread_mutex_lock(&run->slots[i].mu);
  pthread_mutex_lock(&run->set_mu);
  pid_t pid = fork();
  pthread_mutex_unlock(&run->set_mu);
  for (int i = run->nslots - 1; i >= 0; i--) pthread_mutex_unlock(&run->slots[i].mu);
  if (pid < 0) fz_fail(run, "fork failed (errno %d)", errno);
  if (pid == 0) fz_child(run, r);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {}
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
    fz_fail(run, "the fork child failed (status %#x)", status);
  run->forked = 1;
}

/* One seed: nslots threads, replaced as they end, until ops operations ran;
 * one fork in the middle when do_fork. Returns the operations run. */
static long fz_run_seed(struct fz_run *run, const struct fz_api *api, uint64_t seed, int nslots, long ops,
                        int do_fork) {
  fz_run_init(run, api, seed, nslots, ops);
  struct fz_rng r = { .s = fz_mix(seed ^ 0x5eedull) };
  long fork_at = ops * (30 + (long)fz_below(&r, 40)) / 100;
  for (int i = 0; i < nslots; i++) fz_slot_start(run, i, &r);
  for (int live = nslots; live > 0;) {
    while (sem_wait(&run->exited) < 0 && errno == EINTR) {}
    for (int i = 0; i < nslots; i++) {
      struct fz_slot *s = &run->slots[i];
      if (s->generation == 0 || atomic_load(&s->running)) continue;
      pthread_join(s->thread, NULL);
      if (atomic_load(&run->ops_done) < ops) fz_slot_start(run, i, &r);
      else { s->generation = 0; live--; }
    }
    if (do_fork && !run->forked && atomic_load(&run->ops_done) >= fork_at) fz_fork(run, &r);
  }
  fz_run_finish(run, &r);
  return atomic_load(&run->ops_done);
}

/* The libFuzzer form: one slot, no threads, every number from the input. */
static inline long fz_run_bytes(struct fz_run *run, const struct fz_api *api, const uint8_t *data, size_t len) {
  fz_run_init(run, api, 0, 1, 0);
  run->abort_on_fail = 1;
  struct fz_rng r = { .data = data, .len = len };
  long k = 0;
  for (; k < 100000 && !r.exhausted; k++) fz_step(run, &run->slots[0], &r);
  r.data = NULL;   /* the rest (how blocks are freed) from the generator */
  fz_run_finish(run, &r);
  return k;
}

/* ---- the command line ------------------------------------------------------ */
static double fz_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static void fz_usage(const char *prog) {
  fprintf(stderr,
          "usage: %s [--seed N] [--ops N] [--threads N] [--seconds S] [--no-fork]\n"
          "  no --seed and no --seconds: the fixed seeds 1, 2, 3 (the short run of make test)\n"
          "  --seconds S: random seeds for S seconds, each printed first (replay with --seed N)\n", prog);
  exit(2);
}

static inline int fz_main(int argc, char **argv, const struct fz_api *api) {
  static struct fz_run run;
  uint64_t seed = 0;
  int have_seed = 0, threads = 4, do_fork = 1;
  long ops = 60000;
  double seconds = 0;
  for (int i = 1; i < argc; i++) {
    const char *v = i + 1 < argc ? argv[i + 1] : NULL;
    if (!strcmp(argv[i], "--no-fork")) { do_fork = 0; continue; }
    if (!v) fz_usage(argv[0]);
    if (!strcmp(argv[i], "--seed")) { seed = strtoull(v, NULL, 0); have_seed = 1; }
    else if (!strcmp(argv[i], "--ops")) ops = atol(v);
    else if (!strcmp(argv[i], "--threads")) threads = atoi(v);
    else if (!strcmp(argv[i], "--seconds")) seconds = atof(v);
    else fz_usage(argv[0]);
    i++;
  }
  if (threads < 1 || threads > FZ_MAX_SLOTS || ops < 1) fz_usage(argv[0]);
  setvbuf(stdout, NULL, _IOLBF, 0);
  fz_probe_classes(api);
  printf("fuzz: %s, %zu class boundaries probed, %d threads, %ld operations a seed\n", api->name,
         fz_nclasses, threads, ops);
  double start = fz_now();
  long total = 0, seeds = 0, spawned = 0;
  if (seconds <= 0) {
    uint64_t first = have_seed ? seed : 1, last = have_seed ? seed : 3;
    for (uint64_t s = first; s <= last; s++, seeds++) {
      total += fz_run_seed(&run, api, s, threads, ops, do_fork);
      spawned += run.threads_started;
      printf("fuzz: seed %llu ok\n", (unsigned long long)s);
    }
  } else {
    uint64_t base = have_seed ? seed : (uint64_t)time(NULL) * 1000003u ^ (uint64_t)getpid();
    for (; fz_now() - start < seconds; seeds++) {
      uint64_t s = fz_mix(base + (uint64_t)seeds) >> 16;
      printf("fuzz: seed %llu\n", (unsigned long long)s);
      fflush(stdout);
      total += fz_run_seed(&run, api, s, threads, ops, do_fork);
      spawned += run.threads_started;
    }
  }
  printf("fuzz: %s: %ld seeds, %ld operations, %ld threads, %.1f s, nothing found\n", api->name, seeds,
         total, spawned, fz_now() - start);
  return 0;
}
#endif
