/* stats.c — counters. Each heap counts in its own struct hak_stats without
 * atomics; a heap's counters are merged into the process totals at thread
 * exit, and live heaps are added in at process exit. The field lists are
 * the X-macros in hakmem_internal.h: the merge, the report and the JSON are
 * generated from them. Gauges (bytes, SuperSlab states) are process-wide
 * atomics changed on slow paths. */
#include "hakmem_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <unistd.h>

struct hak_gauges _hak_stats_gauges;
HAK_ZERO_TABLE struct hak_stats _hak_stats_totals;   /* the exited threads' counters, under the totals lock */

static const char *const ss_state_names[HAK_SS_NSTATES] = { "hot", "draining", "empty" };

void _hak_stats_gauge_add(_Atomic int64_t *g, _Atomic int64_t *peak, int64_t delta) {
  int64_t now = atomic_fetch_add_explicit(g, delta, memory_order_relaxed) + delta;
  int64_t seen = atomic_load_explicit(peak, memory_order_relaxed);
  while (now > seen && !atomic_compare_exchange_weak_explicit(peak, &seen, now,
                                                              memory_order_relaxed, memory_order_relaxed)) {}
}

static void stats_add(struct hak_stats *dst, const struct hak_stats *src) {
#define HAK_ADD_SCALAR(name, doc) dst->name += src->name;
  HAK_STATS_SCALARS(HAK_ADD_SCALAR)
#undef HAK_ADD_SCALAR
#define HAK_ADD_ARRAY(name, doc) for (unsigned c = 0; c < HAK_NCLS; c++) dst->name[c] += src->name[c];
  HAK_STATS_PER_CLASS(HAK_ADD_ARRAY)
#undef HAK_ADD_ARRAY
}

void _hak_stats_merge_heap(struct hak_heap *h) {
  hak_lock(&_hak_lock_set.totals);
  stats_add(&_hak_stats_totals, &h->stats);
  hak_unlock(&_hak_lock_set.totals);
  memset(&h->stats, 0, sizeof h->stats);
}

static void add_live_heap(struct hak_heap *h, void *arg) { stats_add(arg, &h->stats); }

/* Totals so far: exited threads plus live heaps (read without stopping
 * their threads: a report, not an invariant). */
static void stats_snapshot(struct hak_stats *out) {
  hak_lock(&_hak_lock_set.totals);
  *out = _hak_stats_totals;
  hak_unlock(&_hak_lock_set.totals);
  _hak_thread_visit_heaps(add_live_heap, out);
}

static int64_t gauge(_Atomic int64_t *g) { return atomic_load_explicit(g, memory_order_relaxed); }

/* Allocator calls the counters saw: every malloc and free in a FAST_STATS
 * build (hits and misses are every malloc of a class, frees every free to
 * a list); else only the slow paths are counted, and the locks are reported
 * per million of those. */
static uint64_t allocator_calls(const struct hak_stats *st) {
  uint64_t n = st->large_allocs + st->large_frees + st->foreign_frees + st->invalid_frees;
  if (!HAK_FAST_STATS) return st->malloc_slow + st->free_slow;
  for (unsigned c = 0; c < HAK_NCLS; c++) n += st->hits[c] + st->misses[c] + st->frees[c];
  return n;
}

static double per_million(uint64_t n, uint64_t calls) { return calls ? 1e6 * (double)n / (double)calls : 0.0; }

static void report_locks(int fd, const struct hak_stats *st) {
  struct hak_lock_counts lk[HAK_LOCK_KINDS];
  _hak_lock_counts(lk);
  uint64_t calls = allocator_calls(st);
  _hak_guard_printf(fd, "  locks (per million %s: %llu):\n  %-7s %12s %10s %12s %10s\n",
                    HAK_FAST_STATS ? "allocator calls" : "slow-path calls", (unsigned long long)calls,
                    "lock", "acquired", "/M", "contended", "/M");
  for (unsigned k = 0; k < HAK_LOCK_KINDS; k++)
    _hak_guard_printf(fd, "  %-7s %12llu %10.1f %12llu %10.1f  %s\n", lk[k].name,
                      (unsigned long long)lk[k].acquired, per_million(lk[k].acquired, calls),
                      (unsigned long long)lk[k].contended, per_million(lk[k].contended, calls), lk[k].doc);
}

/* The gauges of HAK_GAUGES, with their peaks. */
struct gauge_desc { const char *name, *label; _Atomic int64_t *value, *peak; bool kib; };
#define HAK_GAUGE_PEAK_PTR_PEAK(name) &_hak_stats_gauges.name##_peak
#define HAK_GAUGE_PEAK_PTR_NONE(name) NULL
#define HAK_GAUGE_KIB_KIB   true
#define HAK_GAUGE_KIB_COUNT false
static const struct gauge_desc gauges[] = {
#define HAK_GAUGE_DESC(name, peak, unit, label, doc) \
  { #name, label, &_hak_stats_gauges.name, HAK_GAUGE_PEAK_PTR_##peak(name), HAK_GAUGE_KIB_##unit },
  HAK_GAUGES(HAK_GAUGE_DESC)
#undef HAK_GAUGE_DESC
};

/* ---- text report ---------------------------------------------------------- */
static const char *tier_name(unsigned c) {
  static const char *const names[] = { "tiny", "L2", "L2.5", "large" };
  return names[_hak_classes[c].tier];
}

static bool class_active(const struct hak_stats *st, unsigned c) {
  return st->hits[c] || st->misses[c] || st->frees[c] || st->refills[c];
}

/* One line: "memory: mapped N KiB (peak N), in use ...". */
static void report_gauges_text(int fd) {
  _hak_guard_printf(fd, "  memory:");
  for (unsigned i = 0; i < sizeof gauges / sizeof gauges[0]; i++) {
    const struct gauge_desc *g = &gauges[i];
    int shift = g->kib ? 10 : 0;
    _hak_guard_printf(fd, "%s %s %lld%s", i ? "," : "", g->label, (long long)gauge(g->value) >> shift, g->kib ? " KiB" : "");
    if (g->peak) _hak_guard_printf(fd, " (peak %lld)", (long long)gauge(g->peak) >> shift);
  }
  _hak_guard_printf(fd, "\n");
}

static void report_text(int fd, const struct hak_stats *st) {
  _hak_guard_printf(fd, "hakmem %s statistics (pid %d)\n", HAKMEM_VERSION, (int)getpid());
  report_gauges_text(fd);
  _hak_guard_printf(fd, "  thread front: %zu B of list heads and credits per thread (TLS); a thread caches at most %zu KiB of Tiny blocks and %zu KiB in its L2 / L2.5 rings\n",
                    sizeof(struct hak_tls), _hak_front_max_bytes(0, HAK_NTINY) >> 10,
                    _hak_front_max_bytes(HAK_NTINY, HAK_NCLS) >> 10);
  struct hak_span_stats sp;
  _hak_span_stats(&sp);
  _hak_guard_printf(fd, "  span heap (40 KiB to 1 MiB): %llu KiB in runs, %llu KiB mapped; %llu free runs of %llu KiB, %llu KiB of them not purged yet\n",
                    (unsigned long long)sp.run_bytes >> 10, (unsigned long long)sp.mapped_bytes >> 10,
                    (unsigned long long)sp.free_runs, (unsigned long long)sp.free_bytes >> 10,
                    (unsigned long long)sp.dirty_bytes >> 10);
  _hak_guard_printf(fd, "  superslabs:");
  for (unsigned s = 0; s < HAK_SS_NSTATES; s++)
    _hak_guard_printf(fd, " %s %lld", ss_state_names[s], (long long)gauge(&_hak_stats_gauges.ss_count[s]));
  _hak_guard_printf(fd, "\n");
#define HAK_PRINT_SCALAR(name, doc) if (st->name) _hak_guard_printf(fd, "  %-18s %12llu  %s\n", #name, (unsigned long long)st->name, doc);
  HAK_STATS_SCALARS(HAK_PRINT_SCALAR)
#undef HAK_PRINT_SCALAR
  _hak_guard_printf(fd, "  %-5s %-5s %8s %12s %12s %12s %10s %10s %10s %10s %10s %10s\n", "class", "tier", "size",
          "hits", "misses", "frees", "spills", "st1 cur", "st2 warm", "st3 shared", "st4 fresh", "carved");
  for (unsigned c = 0; c < HAK_NCLS; c++) {
    if (!class_active(st, c)) continue;
    _hak_guard_printf(fd, "  C%-4u %-5s %8u %12llu %12llu %12llu %10llu %10llu %10llu %10llu %10llu %10llu\n", c, tier_name(c),
            _hak_classes[c].size, (unsigned long long)st->hits[c], (unsigned long long)st->misses[c],
            (unsigned long long)st->frees[c], (unsigned long long)st->spills[c],
            (unsigned long long)st->stage_current[c], (unsigned long long)st->stage_warm[c],
            (unsigned long long)st->stage_shared[c], (unsigned long long)st->stage_fresh[c],
            (unsigned long long)st->carved[c]);
  }
  if (!HAK_FAST_STATS) _hak_guard_printf(fd, "  (hits and frees count slow paths only; build with FAST_STATS=1 to count the fast path)\n");
  report_locks(fd, st);
}

static void report_warm_pool(int fd, const struct hak_stats *st) {
  _hak_guard_printf(fd, "hakmem warm pool (cap %ld, prefill %ld)\n", _hak_options_get(HAK_OPT_WARM_POOL_CAP),
          _hak_options_get(HAK_OPT_WARM_POOL_PREFILL));
  _hak_guard_printf(fd, "  %-5s %8s %12s %12s %12s %9s\n", "class", "size", "hits", "misses", "prefilled", "hit rate");
  for (unsigned c = 0; c < HAK_NCLS; c++) {
    uint64_t hits = st->warm_hits[c], misses = st->warm_misses[c];
    if (!hits && !misses) continue;
    _hak_guard_printf(fd, "  C%-4u %8u %12llu %12llu %12llu %8.1f%%\n", c, _hak_classes[c].size,
            (unsigned long long)hits, (unsigned long long)misses,
            (unsigned long long)st->warm_prefills[c], 100.0 * (double)hits / (double)(hits + misses));
  }
}

/* ---- JSON --------------------------------------------------------------------- */
static void json_array(int fd, const char *name, const uint64_t *v) {
  _hak_guard_printf(fd, ",\n  \"%s\": [", name);
  for (unsigned c = 0; c < HAK_NCLS; c++) _hak_guard_printf(fd, "%s%llu", c ? "," : "", (unsigned long long)v[c]);
  _hak_guard_printf(fd, "]");
}

static void json_locks(int fd, const struct hak_stats *st) {
  struct hak_lock_counts lk[HAK_LOCK_KINDS];
  _hak_lock_counts(lk);
  _hak_guard_printf(fd, ",\n  \"allocator_calls\": %llu,\n  \"locks\": {", (unsigned long long)allocator_calls(st));
  for (unsigned k = 0; k < HAK_LOCK_KINDS; k++)
    _hak_guard_printf(fd, "%s\"%s\": {\"acquired\": %llu, \"contended\": %llu}", k ? ", " : "", lk[k].name,
                      (unsigned long long)lk[k].acquired, (unsigned long long)lk[k].contended);
  _hak_guard_printf(fd, "}");
}

static void report_json(int fd, const struct hak_stats *st) {
  _hak_guard_printf(fd, "{\n  \"version\": \"%s\",\n  \"pid\": %d,\n  \"fast_stats\": %s", HAKMEM_VERSION,
          (int)getpid(), HAK_FAST_STATS ? "true" : "false");
  for (unsigned i = 0; i < sizeof gauges / sizeof gauges[0]; i++) {
    const struct gauge_desc *g = &gauges[i];
    _hak_guard_printf(fd, ",\n  \"%s\": %lld", g->name, (long long)gauge(g->value));
    if (g->peak) _hak_guard_printf(fd, ",\n  \"%s_peak\": %lld", g->name, (long long)gauge(g->peak));
  }
  _hak_guard_printf(fd, ",\n  \"tls_bytes_per_thread\": %zu,\n  \"tiny_cache_max_bytes_per_thread\": %zu,\n"
                    "  \"ring_max_bytes_per_thread\": %zu", sizeof(struct hak_tls),
                    _hak_front_max_bytes(0, HAK_NTINY), _hak_front_max_bytes(HAK_NTINY, HAK_NCLS));
  struct hak_span_stats sp;
  _hak_span_stats(&sp);
  _hak_guard_printf(fd, ",\n  \"span\": {\"run_bytes\": %llu, \"mapped_bytes\": %llu, \"free_runs\": %llu, "
                    "\"free_bytes\": %llu, \"dirty_bytes\": %llu}",
                    (unsigned long long)sp.run_bytes, (unsigned long long)sp.mapped_bytes,
                    (unsigned long long)sp.free_runs, (unsigned long long)sp.free_bytes,
                    (unsigned long long)sp.dirty_bytes);
  _hak_guard_printf(fd, ",\n  \"superslabs\": {");
  for (unsigned s = 0; s < HAK_SS_NSTATES; s++)
    _hak_guard_printf(fd, "%s\"%s\": %lld", s ? ", " : "", ss_state_names[s], (long long)gauge(&_hak_stats_gauges.ss_count[s]));
  _hak_guard_printf(fd, "}");
#define HAK_JSON_SCALAR(name, doc) _hak_guard_printf(fd, ",\n  \"%s\": %llu", #name, (unsigned long long)st->name);
  HAK_STATS_SCALARS(HAK_JSON_SCALAR)
#undef HAK_JSON_SCALAR
  json_locks(fd, st);
  uint64_t sizes[HAK_NCLS];
  for (unsigned c = 0; c < HAK_NCLS; c++) sizes[c] = _hak_classes[c].size;
  json_array(fd, "class_size", sizes);
#define HAK_JSON_ARRAY(name, doc) json_array(fd, #name, st->name);
  HAK_STATS_PER_CLASS(HAK_JSON_ARRAY)
#undef HAK_JSON_ARRAY
  _hak_guard_printf(fd, "\n}\n");
}

HAK_API void hak_stats_print(void) {
  struct hak_stats st;
  hak_track_enter();                               /* heaps are metadata (track.h) */
  stats_snapshot(&st);
  report_text(2, &st);
  hak_track_leave();
}

HAK_API int hak_stats_write_json(const char *path) {
  int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return -1;
  struct hak_stats st;
  hak_track_enter();
  stats_snapshot(&st);
  report_json(fd, &st);
  hak_track_leave();
  return close(fd);
}

/* glibc's malloc_info: hak_mallinfo2's figures in glibc's XML elements,
 * for the process as a whole (hakmem has no arenas to list): total in-use,
 * free (mapped, not in use) and mmap (live Large blocks), the large cache,
 * system current and max (mapped, and its peak). Written after the gauges
 * are read: the stream may allocate. */
HAK_API int hak_malloc_info(int options, FILE *fp) {
  if (options != 0 || !fp) { errno = EINVAL; return -1; }
  struct mallinfo2 m = hak_mallinfo2();
  long long peak = gauge(&_hak_stats_gauges.bytes_mapped_peak), cached = gauge(&_hak_stats_gauges.bytes_large_cached);
  if (peak < (long long)m.arena) peak = (long long)m.arena;     /* a peak is raised just after its gauge */
  int rc = fprintf(fp, "<malloc version=\"hakmem-%s\">\n"
                       "<total type=\"in-use\" size=\"%zu\"/>\n"
                       "<total type=\"free\" size=\"%zu\"/>\n"
                       "<total type=\"mmap\" size=\"%zu\"/>\n"
                       "<total type=\"large-cache\" size=\"%lld\"/>\n"
                       "<system type=\"current\" size=\"%zu\"/>\n"
                       "<system type=\"max\" size=\"%lld\"/>\n"
                       "</malloc>\n",
                   HAKMEM_VERSION, m.uordblks, m.fordblks, m.hblkhd, cached, m.arena, peak);
  return rc < 0 ? -1 : 0;
}

void _hak_stats_at_exit(void) {
  if (!_hak_thread_initialized()) return;
  long mode = _hak_options_get(HAK_OPT_STATS);
  bool warm = _hak_options_get(HAK_OPT_WARM_POOL_STATS) != 0;
  if (!mode && !warm) return;
  struct hak_stats st;
  stats_snapshot(&st);
  if (mode == 1) report_text(2, &st);
  if (mode == 2) {
    const char *path = _hak_options_path(HAK_OPT_STATS);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) _hak_guard_write("hakmem: cannot write statistics to %s (errno %d)\n", path, errno);
    else { report_json(fd, &st); close(fd); }
  }
  if (warm) report_warm_pool(2, &st);
}
