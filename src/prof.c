/* prof.c — the sampling heap profiler (HAKMEM_PROF=1, or leaks). About one
 * allocation per HAKMEM_PROF_SAMPLE bytes is sampled, at exponentially
 * distributed intervals (as tcmalloc and jemalloc do), with its call stack.
 *
 * The fast paths do not count bytes. Each thread keeps the bytes left until
 * its next sample (struct hak_prof_thread, in its heap), and every block is
 * charged before the inline malloc can hand it out: the allocation a slow
 * path serves (_hak_prof_alloc), the blocks a refill puts on the thread's
 * list (_hak_prof_refill_room bounds the batch to the bytes left,
 * _hak_prof_charge charges it), and every freed block the slow free puts
 * on the list (front.c keeps each list's credit HAK_PROF_CREDIT_BIAS below
 * its value while profiling, so every free is a slow free;
 * _hak_prof_charge_push refuses a block the bytes left do not cover, which
 * goes back to its slab). Spilled and released lists refund their blocks.
 * So the allocation that crosses the sample point always arrives in a slow
 * path, which samples exactly that one.
 *
 * A sampled block is served by a mapping of its own (large.c), which every
 * free sends to the slow free: free_by_kind (api.c) calls _hak_prof_free
 * before the Large free, and the sample leaves the live table. Estimates are
 * unbiased as tcmalloc's: a block of s bytes is sampled with probability
 * p = 1 - exp(-s / T), and stands for 1 / p blocks and n / p requested bytes.
 *
 * The profiler never allocates through malloc: its tables come from mmap,
 * the stack walk (stack_walk) is glibc's backtrace(), called once at init
 * (its first call loads libgcc_s, which allocates) and never while this
 * thread is inside the profiler (busy); elsewhere (musl) a walk of the
 * frame-pointer chain inside the thread's stack. Dumps are written at exit,
 * by hak_prof_dump, and on HAKMEM_PROF_SIGNAL: the handler only sets a
 * flag, and the next slow path of any thread writes the dump (PATH.N,
 * N = 1, 2, ...). */
#include "hakmem_internal.h"

#include <dlfcn.h>
#include <link.h>
#include <errno.h>
#if defined(__GLIBC__)
#include <execinfo.h>
#else
#include <pthread.h>
#endif
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <unistd.h>

_Static_assert(SIGUSR1 == 10 && SIGUSR2 == 12 && SIGPROF == 27, "HAK_SIGNAL_NAMES is in Linux's signal order");

int _hak_prof_mode;                           /* enum hak_prof_mode, set at init */

#define PROF_DEPTH     48                     /* frames kept per stack         */
#define PROF_WALK      (PROF_DEPTH + 8)       /* frames walked (hakmem's own dropped) */
#define PROF_MAX_INTERVAL_FACTOR 32           /* an interval is at most 32 T   */

/* One call stack (a site): its frames, and the estimates of every sample
 * taken there (total) and of those still live (filled by a dump). */
struct prof_site {
  uint64_t hash;
  uint32_t depth;
  uint64_t samples;                         /* sampled allocations, ever    */
  double total_bytes, total_count;          /* estimated, ever allocated    */
  double live_bytes, live_count;            /* estimated, at the last dump  */
  uint64_t live_samples;
  void *frames[PROF_DEPTH];
};

/* One live sampled block. */
struct prof_block { uintptr_t addr; uint32_t site; size_t bytes; double est_bytes, est_count; };

static struct prof_site *sites;               /* ids index it: never moves (reserved at init) */
static size_t sites_count;
static uint32_t *site_index;                  /* open addressing on hash: id + 1, 0 empty */
static size_t index_cap;
static struct prof_block *blocks;             /* open addressing on addr    */
static size_t blocks_cap, blocks_count;
static double interval;                       /* T, bytes                   */
static uintptr_t own_lo, own_hi;              /* libhakmem.so's code (0, 0: linked statically) */
static _Atomic int dump_requested;
static _Atomic unsigned dump_serial;

/* ---- arithmetic without libm ------------------------------------------------ */
/* ln x for x > 0: x = m * 2^e with m in [1, 2), ln m = 2 atanh((m-1)/(m+1)). */
static double ln(double x) {
  int e = 0;
  while (x >= 2.0) { x *= 0.5; e++; }
  while (x < 1.0) { x *= 2.0; e--; }
  double y = (x - 1.0) / (x + 1.0), y2 = y * y, term = y, sum = 0.0;
  for (int k = 1; k < 40; k += 2) { sum += term / k; term *= y2; }
  return 2.0 * sum + e * 0.69314718055994530942;
}

/* exp x for x <= 0 (the only use: 1 - exp(-s/T)). */
static double exp_neg(double x) {
  if (x < -700.0) return 0.0;
  int halvings = 0;
  while (x < -0.5) { x *= 0.5; halvings++; }
  double sum = 1.0, term = 1.0;
  for (int k = 1; k < 20; k++) { term *= x / k; sum += term; }
  while (halvings--) sum *= sum;
  return sum;
}

static uint64_t next_random(struct hak_prof_thread *t) {   /* xorshift64* */
  uint64_t x = t->rng;
  x ^= x >> 12; x ^= x << 25; x ^= x >> 27;
  t->rng = x;
  return x * 0x2545F4914F6CDD1Dull;
}

/* The bytes until the next sample: exponential with mean T. */
static int64_t draw_interval(struct hak_prof_thread *t) {
  if (interval <= 1.0) return 0;
  double u = ((double)(next_random(t) >> 11) + 1.0) / 9007199254740993.0;   /* (0, 1] */
  double d = -ln(u) * interval;
  if (d > interval * PROF_MAX_INTERVAL_FACTOR) d = interval * PROF_MAX_INTERVAL_FACTOR;
  return (int64_t)d;
}

/* The thread's sampling state, seeded on first use; NULL: no heap yet, or
 * this thread is inside the profiler. */
static struct hak_prof_thread *prof_thread(void) {
  struct hak_heap *h = _hak_thread_tls.heap;
  if (!h || h->prof.busy) return NULL;
  struct hak_prof_thread *t = &h->prof;
  if (!t->rng) {
    t->rng = ((uint64_t)(uintptr_t)h * 0x9E3779B97F4A7C15ull) ^ _hak_os_now_ns() ^ 0x5DEECE66Dull;
    if (!t->rng) t->rng = 1;
    t->left = draw_interval(t);
  }
  return t;
}

/* ---- tables (prof lock held) ------------------------------------------------- */
static size_t hash_slot(uint64_t key, size_t cap) { return (size_t)((key * 0x9E3779B97F4A7C15ull) >> 17) & (cap - 1); }

#define PROF_SITES_MAX (1u << 17)             /* sites reserved (address space only) */

static bool index_grow(void) {
  size_t cap = index_cap ? index_cap * 2 : 1024;
  uint32_t *t = _hak_os_map_table(cap * sizeof *t);
  if (!t) return false;
  for (size_t id = 0; id < sites_count; id++) {
    size_t j = hash_slot(sites[id].hash, cap);
    while (t[j]) j = (j + 1) & (cap - 1);
    t[j] = (uint32_t)id + 1;
  }
  if (site_index) _hak_os_unmap(site_index, index_cap * sizeof *site_index);
  site_index = t;
  index_cap = cap;
  return true;
}

static uint64_t stack_hash(void *const *frames, unsigned depth) {
  uint64_t h = 0xCBF29CE484222325ull ^ depth;
  for (unsigned i = 0; i < depth; i++) h = (h ^ (uintptr_t)frames[i]) * 0x100000001B3ull;
  return h;
}

/* The id of a stack's site, made on first sight; -1 when full or no memory. */
static long site_of(void *const *frames, unsigned depth) {
  uint64_t h = stack_hash(frames, depth);
  size_t i = index_cap ? hash_slot(h, index_cap) : 0;
  for (; index_cap && site_index[i]; i = (i + 1) & (index_cap - 1)) {
    const struct prof_site *s = &sites[site_index[i] - 1];
    if (s->hash == h && s->depth == depth && !memcmp(s->frames, frames, depth * sizeof *frames))
      return (long)site_index[i] - 1;
  }
  if (!sites || sites_count == PROF_SITES_MAX) return -1;
  if ((sites_count + 1) * 2 > index_cap) {
    if (!index_grow()) return -1;
    for (i = hash_slot(h, index_cap); site_index[i]; i = (i + 1) & (index_cap - 1)) {}
  }
  struct prof_site *s = &sites[sites_count];
  s->hash = h;
  s->depth = depth;
  memcpy(s->frames, frames, depth * sizeof *frames);
  site_index[i] = (uint32_t)++sites_count;
  return (long)sites_count - 1;
}

static bool blocks_grow(void) {
  size_t cap = blocks_cap ? blocks_cap * 2 : 1024;
  struct prof_block *t = _hak_os_map_table(cap * sizeof *t);
  if (!t) return false;
  for (size_t i = 0; i < blocks_cap; i++) {
    if (!blocks[i].addr) continue;
    size_t j = hash_slot(blocks[i].addr, cap);
    while (t[j].addr) j = (j + 1) & (cap - 1);
    t[j] = blocks[i];
  }
  if (blocks) _hak_os_unmap(blocks, blocks_cap * sizeof *blocks);
  blocks = t;
  blocks_cap = cap;
  return true;
}

static struct prof_block *block_find(uintptr_t addr) {
  if (!blocks_count) return NULL;
  for (size_t i = hash_slot(addr, blocks_cap); blocks[i].addr; i = (i + 1) & (blocks_cap - 1))
    if (blocks[i].addr == addr) return &blocks[i];
  return NULL;
}

/* Backward-shift deletion (as large.c's table). */
static void block_remove(struct prof_block *e) {
  size_t i = (size_t)(e - blocks);
  for (size_t j = (i + 1) & (blocks_cap - 1); blocks[j].addr; j = (j + 1) & (blocks_cap - 1)) {
    size_t home = hash_slot(blocks[j].addr, blocks_cap);
    if (((j - home) & (blocks_cap - 1)) >= ((j - i) & (blocks_cap - 1))) {
      blocks[i] = blocks[j];
      i = j;
    }
  }
  blocks[i].addr = 0;
  blocks_count--;
}

/* ---- sampling ------------------------------------------------------------------ */
/* The return addresses of the calling thread's stack, innermost first, at
 * most max: glibc's backtrace() (DWARF call frame information: no frame
 * pointers needed). Where the C library has none (musl), the chain of saved
 * frame pointers: each frame's word 0 is its caller's frame, word 1 the
 * return address. It sees the frames of code built with frame pointers
 * (-fno-omit-frame-pointer; a function without one is left out), and it
 * reads only inside the thread's stack: each next frame must lie above the
 * last and below the stack's top, so a frame-pointer register that holds
 * anything else ends the walk instead of a read. */
#if defined(__GLIBC__)
static int stack_walk(void **out, int max) { return backtrace(out, max); }
#else
static __thread uintptr_t stack_top;   /* the calling thread's, found once */

static uintptr_t thread_stack_top(void) {
  if (!stack_top) {
    pthread_attr_t attr;
    void *base;
    size_t size;
    if (pthread_getattr_np(pthread_self(), &attr) != 0) return 0;
    if (pthread_attr_getstack(&attr, &base, &size) == 0) stack_top = (uintptr_t)base + size;
    pthread_attr_destroy(&attr);
  }
  return stack_top;
}

static __attribute__((noinline)) int stack_walk(void **out, int max) {
  const uintptr_t top = thread_stack_top();
  uintptr_t fp = (uintptr_t)__builtin_frame_address(0);
  int n = 0;
  while (n < max && fp && fp % sizeof(void *) == 0 && fp + 2 * sizeof(void *) <= top) {
    const uintptr_t *frame = (const uintptr_t *)fp;
    if (!frame[1]) break;
    out[n++] = (void *)frame[1];
    if (frame[0] <= fp) break;           /* callers' frames lie above */
    fp = frame[0];
  }
  return n;
}
#endif

/* The stack of the allocation being sampled, without the profiler's frames
 * (this function and its caller) and, in the shared library, without
 * hakmem's own frames. Returns the depth. */
static __attribute__((noinline)) unsigned capture(void **out) {
  void *walk[PROF_WALK];
  int n = stack_walk(walk, PROF_WALK);
  int first = 2;
  while (first < n && (uintptr_t)walk[first] - own_lo < own_hi - own_lo) first++;
  unsigned depth = 0;
  for (int i = first; i < n && depth < PROF_DEPTH; i++) out[depth++] = walk[i];
  return depth;
}

/* A sampled block of n requested bytes, charged bytes: its site and its
 * estimates (1 / p blocks, n / p bytes) into the tables. */
static void record(void *p, size_t n, size_t bytes) {
  void *frames[PROF_DEPTH] = { NULL };
  unsigned depth = capture(frames);
  double prob = interval <= 1.0 ? 1.0 : 1.0 - exp_neg(-(double)bytes / interval);
  if (prob <= 0.0) prob = 1.0;
  double est_count = 1.0 / prob, est_bytes = (double)n / prob;
  hak_lock(&_hak_lock_set.prof);
  long id = site_of(frames, depth ? depth : 1);
  if (id >= 0 && ((blocks_count + 1) * 2 <= blocks_cap || blocks_grow())) {
    struct prof_site *s = &sites[id];
    s->samples++;
    s->total_bytes += est_bytes;
    s->total_count += est_count;
    size_t i = hash_slot((uintptr_t)p, blocks_cap);
    while (blocks[i].addr) i = (i + 1) & (blocks_cap - 1);
    blocks[i] = (struct prof_block){ (uintptr_t)p, (uint32_t)id, n, est_bytes, est_count };
    blocks_count++;
  }
  hak_unlock(&_hak_lock_set.prof);
}

static void dump_numbered(void);

static void poll_dump(void) {
  if (HAK_UNLIKELY(atomic_load_explicit(&dump_requested, memory_order_relaxed)) &&
      atomic_exchange(&dump_requested, 0))
    dump_numbered();
}

/* HAK_SLOW: a slow-path allocation of n bytes (aligned to align, zeroed
 * when zero) is charged; when it crosses the sample point it is sampled and
 * served here, by a mapping of its own. NULL: not sampled, serve it as
 * usual. */
void *_hak_prof_alloc(size_t n, size_t align, bool zero) {
  poll_dump();
  struct hak_prof_thread *t = prof_thread();
  if (!t) return NULL;
  size_t bytes = n > HAK_MID_MAX ? hak_page_up(n)
                                 : _hak_classes[_hak_class_of_size(n)].size;
  t->left -= (int64_t)bytes;
  if (t->left >= 0) return NULL;
  t->left = draw_interval(t);
  t->busy = true;
  void *p = _hak_large_alloc(n, align, zero);
  if (p) record(p, n, bytes);
  t->busy = false;
  return p;
}

/* How many blocks of class c a refill may put on the thread's list besides
 * the one it returns (charged already): at most max, and no more bytes than
 * are left until the sample point. */
unsigned _hak_prof_refill_room(unsigned c, unsigned max) {
  struct hak_prof_thread *t = prof_thread();
  if (!t || max <= 1) return max;
  int64_t extra = t->left > 0 ? t->left / (int64_t)_hak_classes[c].size : 0;
  return extra + 1 < (int64_t)max ? (unsigned)extra + 1 : max;
}

void _hak_prof_charge(size_t bytes) {
  struct hak_prof_thread *t = prof_thread();
  if (t) t->left -= (int64_t)bytes;
}

/* A freed block may go on the thread's list (charged) when the bytes left
 * until the sample point cover it. */
bool _hak_prof_charge_push(size_t bytes) {
  struct hak_prof_thread *t = prof_thread();
  if (!t) return true;
  if (t->left < (int64_t)bytes) return false;
  t->left -= (int64_t)bytes;
  return true;
}

/* Blocks that were charged on a list and left it unallocated (a spill, an
 * idle or flushed list). */
void _hak_prof_refund(size_t bytes) {
  struct hak_prof_thread *t = prof_thread();
  if (t) t->left += (int64_t)bytes;
}

/* HAK_SLOW: p (not a class block) is being freed: a sampled block leaves
 * the live table. */
void _hak_prof_free(void *p) {
  poll_dump();
  if (!__atomic_load_n(&blocks_count, __ATOMIC_RELAXED)) return;   /* a hint: no sample live */
  hak_lock(&_hak_lock_set.prof);
  struct prof_block *e = block_find((uintptr_t)p);
  if (e) block_remove(e);
  hak_unlock(&_hak_lock_set.prof);
}

/* A Large block moved by realloc from p to q (n bytes now): a sample keeps
 * its site and estimates at its new address. */
void _hak_prof_moved(void *p, void *q) {
  hak_lock(&_hak_lock_set.prof);
  struct prof_block *e = block_find((uintptr_t)p);
  if (e) {
    struct prof_block b = *e;
    block_remove(e);
    b.addr = (uintptr_t)q;
    size_t i = hash_slot(b.addr, blocks_cap);
    while (blocks[i].addr) i = (i + 1) & (blocks_cap - 1);
    blocks[i] = b;
    blocks_count++;
  }
  hak_unlock(&_hak_lock_set.prof);
}

/* ---- dumps ------------------------------------------------------------------- */
/* A buffered writer: formats through vsnprintf, never allocates. */
struct out { int fd; size_t n; bool failed; char buf[4096]; };

static void out_flush(struct out *o) {
  for (size_t off = 0; off < o->n;) {
    ssize_t w = write(o->fd, o->buf + off, o->n - off);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) { o->failed = true; break; }
    off += (size_t)w;
  }
  o->n = 0;
}

static __attribute__((format(printf, 2, 3))) void out_printf(struct out *o, const char *fmt, ...) {
  if (o->n > sizeof o->buf - 512) out_flush(o);
  va_list ap;
  va_start(ap, fmt);
  int k = vsnprintf(o->buf + o->n, sizeof o->buf - o->n, fmt, ap);
  va_end(ap);
  if (k > 0) o->n += (size_t)k < sizeof o->buf - o->n ? (size_t)k : sizeof o->buf - o->n - 1;
}

static unsigned long long rounded(double x) { return (unsigned long long)(x + 0.5); }

/* Every site's live estimates, from the live table (prof lock held). */
static void sum_live(void) {
  for (size_t id = 0; id < sites_count; id++) {
    sites[id].live_bytes = sites[id].live_count = 0.0;
    sites[id].live_samples = 0;
  }
  for (size_t i = 0; i < blocks_cap; i++) {
    if (!blocks[i].addr) continue;
    struct prof_site *s = &sites[blocks[i].site];
    s->live_bytes += blocks[i].est_bytes;
    s->live_count += blocks[i].est_count;
    s->live_samples++;
  }
}

/* The process's mappings, for symbolizing the addresses elsewhere. */
static void copy_maps(struct out *o) {
  int fd = open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return;
  out_flush(o);
  ssize_t r;
  while ((r = read(fd, o->buf, sizeof o->buf)) > 0 || (r < 0 && errno == EINTR)) {
    if (r < 0) continue;
    o->n = (size_t)r;
    out_flush(o);
  }
  close(fd);
}

/* The dump: a header, one line per site (its estimates, then its frames),
 * then /proc/self/maps after "maps". Format in tools/hakmem_tool/prof.py. */
static int dump_to(const char *path) {
  int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return -1;
  struct out o = { .fd = fd };
  out_printf(&o, "hakmem-prof 1\nsample_bytes %llu\npid %d\n", rounded(interval), (int)getpid());
  out_printf(&o, "# site live_bytes live_count total_bytes total_count live_samples samples frames...\n");
  hak_lock(&_hak_lock_set.prof);
  sum_live();
  for (size_t id = 0; id < sites_count; id++) {
    const struct prof_site *s = &sites[id];
    out_printf(&o, "site %llu %llu %llu %llu %llu %llu", rounded(s->live_bytes), rounded(s->live_count),
               rounded(s->total_bytes), rounded(s->total_count), (unsigned long long)s->live_samples,
               (unsigned long long)s->samples);
    for (unsigned k = 0; k < s->depth; k++) out_printf(&o, " %p", s->frames[k]);
    out_printf(&o, "\n");
  }
  hak_unlock(&_hak_lock_set.prof);
  out_printf(&o, "maps\n");
  copy_maps(&o);
  out_flush(&o);
  int saved = errno;
  if (close(fd) || o.failed) { errno = o.failed ? saved : errno; return -1; }
  return 0;
}

/* The dump's path: HAKMEM_PROF_FILE (default hakmem-prof.%p.heap), %p the
 * process id, then ".N" for the N-th signal dump (serial > 0). */
static void dump_path(char *buf, size_t len, unsigned serial) {
  const char *tmpl = _hak_options_path(HAK_OPT_PROF_FILE);
  if (!tmpl) tmpl = "hakmem-prof.%p.heap";
  size_t n = 0;
  for (const char *c = tmpl; *c && n + 24 < len; c++) {
    if (c[0] == '%' && c[1] == 'p') { n += (size_t)snprintf(buf + n, len - n, "%d", (int)getpid()); c++; }
    else buf[n++] = *c;
  }
  if (serial) n += (size_t)snprintf(buf + n, len - n, ".%u", serial);
  buf[n < len ? n : len - 1] = 0;
}

static void dump_numbered(void) {
  char path[4096];
  dump_path(path, sizeof path, atomic_fetch_add(&dump_serial, 1) + 1);
  if (dump_to(path)) _hak_guard_write("hakmem: cannot write the heap profile to %s (errno %d)\n", path, errno);
}

HAK_API int hak_prof_dump(const char *path) {
  if (!_hak_prof_mode) { errno = ENOENT; return -1; }
  char buf[4096];
  if (!path) { dump_path(buf, sizeof buf, 0); path = buf; }
  return dump_to(path);
}

/* ---- the leak report ------------------------------------------------------------ */
#define PROF_LEAK_SITES 20

static void print_frame(struct out *o, unsigned k, void *addr) {
  Dl_info info;
  if (dladdr(addr, &info) && info.dli_fname) {
    const char *obj = strrchr(info.dli_fname, '/') ? strrchr(info.dli_fname, '/') + 1 : info.dli_fname;
    if (info.dli_sname)
      out_printf(o, "    #%u %p %s+0x%lx (%s)\n", k, addr, info.dli_sname,
                 (unsigned long)((uintptr_t)addr - (uintptr_t)info.dli_saddr), obj);
    else
      out_printf(o, "    #%u %p (%s+0x%lx)\n", k, addr, *obj ? obj : "program",
                 (unsigned long)((uintptr_t)addr - (uintptr_t)info.dli_fbase));
  } else {
    out_printf(o, "    #%u %p\n", k, addr);
  }
}

/* The PROF_LEAK_SITES sites with the most live bytes, most first, copied
 * out (prof lock held); returns how many. */
static unsigned top_leaks(struct prof_site *top, double *bytes, double *count, size_t *leaking) {
  sum_live();
  *bytes = *count = 0;
  *leaking = 0;
  for (size_t id = 0; id < sites_count; id++)
    if (sites[id].live_samples) { *bytes += sites[id].live_bytes; *count += sites[id].live_count; (*leaking)++; }
  double above = 1e300;
  size_t above_id = (size_t)-1;
  unsigned shown = 0;
  for (; shown < PROF_LEAK_SITES && shown < *leaking; shown++) {
    size_t best = (size_t)-1;
    for (size_t id = 0; id < sites_count; id++) {       /* the next largest: no sort, no allocation */
      const struct prof_site *s = &sites[id];
      if (!s->live_samples) continue;
      bool after = s->live_bytes < above || (s->live_bytes == above && id > above_id);
      if (after && (best == (size_t)-1 || s->live_bytes > sites[best].live_bytes)) best = id;
    }
    if (best == (size_t)-1) break;
    top[shown] = sites[best];
    above = sites[best].live_bytes;
    above_id = best;
  }
  return shown;
}

/* At exit (HAKMEM_PROF=leaks): the sites whose sampled blocks are still
 * live, most bytes first, to stderr, symbolized with dladdr (exported
 * names, else object+offset; `hakmem prof` on a dump symbolizes
 * everything). dladdr takes the loader's lock: called without the prof
 * lock. */
static void leak_report(void) {
  static struct prof_site top[PROF_LEAK_SITES];
  double bytes, count;
  size_t leaking;
  hak_lock(&_hak_lock_set.prof);
  unsigned shown = top_leaks(top, &bytes, &count, &leaking);
  hak_unlock(&_hak_lock_set.prof);
  struct out o = { .fd = 2 };
  out_printf(&o, "hakmem: leak report: %zu site%s with live sampled blocks at exit, ~%llu bytes in ~%llu blocks (estimated, 1 sample per %llu bytes)\n",
             leaking, leaking == 1 ? "" : "s", rounded(bytes), rounded(count), rounded(interval));
  for (unsigned i = 0; i < shown; i++) {
    out_printf(&o, "hakmem: leak: ~%llu bytes in ~%llu blocks (%llu samples) allocated at:\n",
               rounded(top[i].live_bytes), rounded(top[i].live_count), (unsigned long long)top[i].live_samples);
    for (unsigned k = 0; k < top[i].depth; k++) print_frame(&o, k, top[i].frames[k]);
  }
  out_flush(&o);
}

/* ---- init and exit ------------------------------------------------------------- */
static void on_signal(int sig) {
  (void)sig;
  atomic_store(&dump_requested, 1);
}

/* dl_iterate_phdr: the executable segment that holds this code. */
static int find_own_code(struct dl_phdr_info *info, size_t size, void *arg) {
  (void)size; (void)arg;
  uintptr_t self = (uintptr_t)find_own_code;
  for (unsigned i = 0; i < info->dlpi_phnum; i++) {
    const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
    uintptr_t lo = info->dlpi_addr + ph->p_vaddr, hi = lo + ph->p_memsz;
    if (ph->p_type == PT_LOAD && (ph->p_flags & PF_X) && self - lo < hi - lo) {
      own_lo = lo;
      own_hi = hi;
      return 1;
    }
  }
  return 0;
}

/* After hakmem's init (malloc works): glibc's first backtrace() loads libgcc_s
 * (it allocates), the tables are reserved, the signal handler installed;
 * then sampling starts. */
__attribute__((constructor)) static void prof_init(void) {
  _hak_thread_init();
  long mode = _hak_options_get(HAK_OPT_PROF);
  if (!mode) return;
  void *warm[4];
  (void)stack_walk(warm, 4);
  interval = (double)_hak_options_get(HAK_OPT_PROF_SAMPLE);
  sites = _hak_os_map_table(PROF_SITES_MAX * sizeof *sites);
  if (!sites) { _hak_guard_write("hakmem: no memory for the heap profiler; profiling off\n"); return; }
  if (HAK_SHARED_LIB) dl_iterate_phdr(find_own_code, NULL);
  int sig = (int)_hak_options_get(HAK_OPT_PROF_SIGNAL);
  if (sig) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sa.sa_flags = SA_RESTART;
    sigemptyset(&sa.sa_mask);
    sigaction(sig, &sa, NULL);
  }
  _hak_prof_mode = (int)mode;
}

__attribute__((destructor)) static void prof_exit(void) {
  if (!_hak_prof_mode) return;
  if (_hak_prof_mode == HAK_PROF_LEAKS) leak_report();
  if (_hak_prof_mode == HAK_PROF_ON || _hak_options_path(HAK_OPT_PROF_FILE)) {
    char path[4096];
    dump_path(path, sizeof path, 0);
    if (dump_to(path)) _hak_guard_write("hakmem: cannot write the heap profile to %s (errno %d)\n", path, errno);
  }
}
