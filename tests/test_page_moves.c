/* Pages that move between classes (HAKMEM_PAGE_MOVES, superslab.c): the
 * resident pages of one class's free slabs, or of the span heap's free
 * runs, serve another class's fresh slabs without faults. The test re-runs
 * itself with moves on and a purge delay of 2 s (a pass every second at
 * most), then:
 *  - a thread fills and frees 8 MiB of 256-byte blocks and exits; a purge
 *    pass releases its empty slabs, free and dirty (only released slabs
 *    give: an empty slab in the shared pool is its class's own to reuse),
 *    and 1.2 s later (past half the delay: younger ones may be taken back
 *    by their class) 8 MiB of 4 KiB blocks written next take
 *    those pages: the "moved" counter grows by most of 8 MiB and the new
 *    blocks fault in far fewer pages than they cover;
 *  - the 256-byte class works on, from slabs whose pages moved away, and
 *    its new blocks hold what is written to them;
 *  - freed span blocks (100 KiB) give their pages to a Tiny class too,
 *    and a Tiny class's freed slabs to fresh span runs, where a calloc
 *    reads 0;
 *  - HAKMEM_PAGE_MOVES=4 bounds the moved ranges (each may cost the kernel
 *    two mappings): 4 slabs' pages move, not 8 MiB;
 *  - a freed Large block gives its pages to a Tiny class at once: they
 *    leave its range, which stays cached, and a calloc of its size reads 0;
 *  - a fresh Large block above 4 MiB takes the pages of span blocks the
 *    thread just freed (its span lists go back to the span heap first): they leave the
 *    freed blocks, the Large block (a calloc: it reads 0) faults in far
 *    fewer pages than it covers when written whole, and a realloc keeps
 *    its bytes (the block spans several kernel mappings now: it grows by
 *    a copy, not by mremap).
 * A kernel without MREMAP_DONTUNMAP (before Linux 5.7), or an emulator
 * that counts a move's source unmapped, gets no moves: then nothing moves
 * and every block still works. */
#include "testing.h"
#include "hakmem.h"

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#define MiB (1024L * 1024)
#define FILL (8 * MiB)

/* A counter of hakmem's JSON report ("bytes_moved", ...), or -1. */
static long counter(const char *name) {
  char path[] = "/tmp/hakmem-moves-XXXXXX";
  int fd = mkstemp(path);
  if (fd < 0) return -1;
  close(fd);
  static char buf[65536];
  memset(buf, 0, sizeof buf);
  FILE *f = hak_stats_write_json(path) == 0 ? fopen(path, "r") : NULL;
  if (f) { (void)!fread(buf, 1, sizeof buf - 1, f); fclose(f); }
  unlink(path);
  char key[64];
  snprintf(key, sizeof key, "\"%s\": ", name);
  const char *at = strstr(buf, key);
  return at ? atol(at + strlen(key)) : -1;
}

static long minor_faults(void) {
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  return ru.ru_minflt;
}

/* Does this kernel move pages and leave the source mapped (mincore on it
 * works: under qemu-user 7.2 it does not)? */
static bool kernel_moves(void) {
  long page = sysconf(_SC_PAGESIZE);
  char *a = mmap(NULL, 2 * (size_t)page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (a == MAP_FAILED) return false;
  a[0] = 1;
  unsigned char resident;
  bool ok = mremap(a, (size_t)page, (size_t)page, MREMAP_MAYMOVE | MREMAP_FIXED | MREMAP_DONTUNMAP,
                   a + page) != MAP_FAILED && mincore(a, (size_t)page, &resident) == 0;
  munmap(a, 2 * (size_t)page);
  return ok;
}

struct fill { size_t size; long bytes; };

/* Fills bytes of size-byte blocks, checks and frees them: run in a thread
 * that then exits, so its slabs go back free and dirty. */
static void *fill_and_free(void *arg) {
  const struct fill *w = arg;
  size_t n = (size_t)w->bytes / w->size;
  unsigned char **b = malloc(n * sizeof *b);
  for (size_t i = 0; i < n; i++) {
    b[i] = malloc(w->size);
    if (b[i]) memset(b[i], (int)(i & 0xff), w->size);
  }
  for (size_t i = 0; i < n; i++) {
    if (b[i] && (b[i][0] != (unsigned char)(i & 0xff) || b[i][w->size - 1] != (unsigned char)(i & 0xff)))
      return (void *)1;
    free(b[i]);
  }
  free(b);
  return NULL;
}

static void sleep_ms(long ms) {
  struct timespec t = { ms / 1000, (ms % 1000) * 1000000L };
  nanosleep(&t, NULL);
}

/* Runs fill_and_free in a thread, then waits past the purge pass interval
 * (25 ms: src/purge.c) but well short of the purge delay (2 s; the margins
 * are for slow builds on loaded machines), so its free memory may give
 * pages and is not purged yet. A span run gives from its free on; an empty
 * slab once a purge pass has released it, so for slabs a slow path (the
 * first malloc of a class this thread never used) runs a pass in between. */
static bool in_thread(size_t size, long bytes, bool slabs) {
  pthread_t t;
  struct fill w = { size, bytes };
  void *bad = (void *)1;
  if (pthread_create(&t, NULL, fill_and_free, &w) != 0) return false;
  pthread_join(t, &bad);
  sleep_ms(200);
  if (slabs) {
    static size_t poke = 3000;
    free(malloc(poke += 100));
    sleep_ms(200);
  }
  return bad == NULL;
}

/* Writes bytes of size-byte blocks; returns them (count in *n), each
 * holding its index's byte. */
static unsigned char **write_blocks(size_t size, long bytes, size_t *n) {
  *n = (size_t)bytes / size;
  unsigned char **b = malloc(*n * sizeof *b);
  for (size_t i = 0; i < *n; i++) {
    b[i] = malloc(size);
    if (b[i]) memset(b[i], (int)((i * 7) & 0xff), size);
  }
  return b;
}

static bool check_and_free(unsigned char **b, size_t n, size_t size) {
  bool ok = true;
  for (size_t i = 0; i < n; i++) {
    if (!b[i]) { ok = false; continue; }
    for (size_t j = 0; j < size; j += 512) ok &= b[i][j] == (unsigned char)((i * 7) & 0xff);
    free(b[i]);
  }
  free(b);
  return ok;
}

static void check_moves(void) {
  bool moves = kernel_moves();
  CHECK(in_thread(256, FILL, true));
  long moved0 = counter("bytes_moved"), faults0 = minor_faults();
  size_t n;
  unsigned char **b = write_blocks(4096, FILL, &n);
  long faults = minor_faults() - faults0, moved = counter("bytes_moved") - moved0;
  long kernel_pages = (long)(n * 4096) / sysconf(_SC_PAGESIZE);   /* faults count these */
  fprintf(stderr, "256 B -> 4 KiB: %ld KiB moved, %ld faults for %ld kernel pages (kernel moves: %d)\n",
          moved / 1024, faults, kernel_pages, moves);
  if (moves) {
    CHECKF(moved >= FILL / 2, "%ld bytes moved", moved);
    CHECKF(faults < kernel_pages / 2, "%ld faults", faults);
  } else {
    CHECKF(moved == 0, "%ld bytes moved with no kernel support", moved);
  }
  CHECK(check_and_free(b, n, 4096));
  /* The donor class again: its slabs' pages moved away; blocks work. */
  b = write_blocks(256, FILL, &n);
  CHECK(check_and_free(b, n, 256));
  /* Span runs give pages to a Tiny class. */
  CHECK(in_thread(100 * 1024, 2 * FILL, false));
  moved0 = counter("bytes_moved");
  b = write_blocks(1024, FILL, &n);
  moved = counter("bytes_moved") - moved0;
  fprintf(stderr, "100 KiB -> 1 KiB: %ld KiB moved\n", moved / 1024);
  if (moves) CHECKF(moved >= FILL / 4, "%ld bytes moved from the span heap", moved);
  CHECK(check_and_free(b, n, 1024));
  /* Slab pages move into fresh span runs: a calloc there reads 0 (the
   * run is not marked as zero pages, span.c _hak_span_zero). */
  CHECK(in_thread(256, FILL, true));
  moved0 = counter("bytes_moved");
  size_t spans = 4 * FILL / (100 * 1024);     /* past the free runs of the span blocks above */
  unsigned char **z = malloc(spans * sizeof *z);
  bool zero = true;
  for (size_t i = 0; i < spans; i++) {
    z[i] = calloc(1, 100 * 1024);
    for (size_t j = 0; z[i] && j < 100 * 1024; j++) zero &= z[i][j] == 0;
  }
  moved = counter("bytes_moved") - moved0;
  fprintf(stderr, "256 B -> 100 KiB callocs: %ld KiB moved\n", moved / 1024);
  if (moves) CHECKF(moved >= FILL / 4, "%ld bytes moved into the span heap", moved);
  CHECKF(zero, "a calloc of a span block that took moved pages is not all 0");
  for (size_t i = 0; i < spans; i++) free(z[i]);
  free(z);
}

/* HAKMEM_PAGE_MOVES=4: at most 4 ranges outstanding, each at most a slab's
 * pages (a 2 KiB slab: 64 KiB), where 8 MiB could move. */
static void check_bound(void) {
  CHECK(in_thread(512, FILL, true));
  size_t n;
  unsigned char **b = write_blocks(2048, FILL, &n);
  long moved = counter("bytes_moved");
  fprintf(stderr, "bound 4: %ld KiB moved\n", moved / 1024);
  CHECKF(moved >= 0 && moved <= 4 * 64 * 1024L * (long)(test_page() / 4096), "%ld bytes moved", moved);
  if (kernel_moves()) CHECKF(moved > 0, "nothing moved");
  CHECK(check_and_free(b, n, 2048));
}

/* Resident pages of [p, p + bytes) (mincore), or -1 when it is not mapped. */
static long resident_pages(const void *p, size_t bytes) {
  static unsigned char vec[FILL / 4096];
  long page = sysconf(_SC_PAGESIZE), n = (long)(bytes / (size_t)page), in = 0;
  if (n > (long)sizeof vec || mincore((void *)p, bytes, vec) != 0) return -1;
  for (long i = 0; i < n; i++) in += vec[i] & 1;
  return in;
}

/* Run first in its own process, so no free slab or span run is there to
 * give before the Large block does. */
static void check_large(void) {
  long page = sysconf(_SC_PAGESIZE);
  unsigned char *big = malloc(FILL);
  CHECK(big != NULL && ((uintptr_t)big & (uintptr_t)(page - 1)) == 0);
  if (!big) return;
  memset(big, 0x5a, FILL);
  free(big);
  long before = resident_pages(big, FILL);
  size_t n;
  unsigned char **b = write_blocks(512, FILL / 2, &n);
  long after = resident_pages(big, FILL);
  fprintf(stderr, "Large -> 512 B: %ld of %ld pages of the freed block resident before, %ld after\n",
          before, FILL / page, after);
  CHECKF(before == FILL / page, "%ld pages resident of a freed, cached 8 MiB block", before);
  if (kernel_moves())
    CHECKF(after >= 0 && after <= before - FILL / 4 / page, "%ld pages resident after the writes", after);
  unsigned char *z = calloc(1, FILL);
  bool zero = z != NULL;
  for (size_t i = 0; zero && i < (size_t)FILL; i++) zero = z[i] == 0;
  CHECKF(zero, "a calloc of the freed block's size is not all 0");
  free(z);
  CHECK(check_and_free(b, n, 512));
}

/* Run in its own process, so no Large range is cached: the block below is a
 * fresh mapping (above 4 MiB: the size large_fill fills). Four of the
 * 512 KiB blocks stay on this thread's list of their class (2 blocks, and
 * HAKMEM_SPAN_CACHE_KB more) when freed, the others go to the span heap. */
static void check_into_large(void) {
  enum { N = 12, SPAN = 512 * 1024, BIG = 6 * 1024 * 1024 };
  long page = sysconf(_SC_PAGESIZE);
  unsigned char *s[N];
  for (int i = 0; i < N; i++) {
    s[i] = malloc(SPAN);
    CHECK(s[i] != NULL);
    if (!s[i]) return;
    memset(s[i], 0xa5, SPAN);
  }
  long before = 0, after = 0;
  for (int i = 0; i < N; i++) free(s[i]);
  for (int i = 0; i < N; i++) before += resident_pages((void *)((uintptr_t)(s[i] + page - 1) & ~(uintptr_t)(page - 1)), SPAN - (size_t)page);
  long moved0 = counter("bytes_moved"), faults0 = minor_faults();
  unsigned char *big = calloc(1, BIG);
  CHECK(big != NULL);
  if (!big) return;
  bool zero = true;
  for (size_t i = 0; i < (size_t)BIG; i++) zero &= big[i] == 0;
  CHECKF(zero, "a fresh Large calloc is not all 0");
  memset(big, 0x3c, BIG);
  long faults = minor_faults() - faults0, moved = counter("bytes_moved") - moved0;
  for (int i = 0; i < N; i++) after += resident_pages((void *)((uintptr_t)(s[i] + page - 1) & ~(uintptr_t)(page - 1)), SPAN - (size_t)page);
  fprintf(stderr, "512 KiB -> Large: %ld KiB moved, %ld faults for %ld pages; freed blocks' pages resident %ld before, %ld after\n",
          moved / 1024, faults, BIG / page, before, after);
  if (kernel_moves()) {
    CHECKF(moved >= BIG / 2, "%ld bytes moved into the Large block", moved);
    CHECKF(faults < BIG / page, "%ld faults", faults);   /* a fresh page read, then written: 2 */
    CHECKF(after >= 0 && after <= before - BIG / 2 / page, "%ld of %ld pages still resident", after, before);
  } else {
    CHECKF(moved == 0, "%ld bytes moved with no kernel support", moved);
  }
  for (int i = 0; i < N; i++) {                 /* the span class again, from runs whose pages went */
    s[i] = malloc(SPAN);
    CHECK(s[i] != NULL);
    if (s[i]) memset(s[i], i, SPAN);
  }
  bool kept = true;
  for (size_t i = 0; i < (size_t)BIG; i += 512) kept &= big[i] == 0x3c;
  for (int i = 0; i < N; i++) kept &= s[i] && s[i][0] == i && s[i][SPAN - 1] == i;
  CHECKF(kept, "blocks lost what was written to them");
  for (int i = 0; i < N; i++) free(s[i]);
  /* A growth: the block spans several kernel mappings now, which mremap
   * does not resize (with moves, it is copied). */
  long remaps0 = counter("large_remaps");
  unsigned char *grown = realloc(big, 4 * BIG);
  CHECK(grown != NULL);
  if (!grown) { free(big); return; }
  kept = true;
  for (size_t i = 0; i < (size_t)BIG; i++) kept &= grown[i] == 0x3c;
  CHECKF(kept, "a realloc lost the Large block's bytes");
  bool remapped = counter("large_remaps") > remaps0;
  fprintf(stderr, "grown by %s\n", remapped ? "mremap" : "a copy");
  if (kernel_moves()) CHECKF(!remapped, "a block of several kernel mappings grew by mremap");
  memset(grown, 0x11, 4 * BIG);
  free(grown);
}

/* mode in a child with moves on (moves: HAKMEM_PAGE_MOVES) and a purge delay of 2 s. */
static int run_child(const char *self, const char *mode, const char *moves) {
  char bound[64];
  snprintf(bound, sizeof bound, "HAKMEM_PAGE_MOVES=%s", moves);
  const char *const env[] = { bound, "HAKMEM_PURGE_DELAY_MS=2000", NULL };
  return test_rerun(self, mode, env);
}

int main(int argc, char **argv) {
  if (argc > 1 && strcmp(argv[1], "moves") == 0) { check_moves(); TEST_END(); }
  if (argc > 1 && strcmp(argv[1], "bound") == 0) { check_bound(); TEST_END(); }
  if (argc > 1 && strcmp(argv[1], "large") == 0) { check_large(); TEST_END(); }
  if (argc > 1 && strcmp(argv[1], "into-large") == 0) { check_into_large(); TEST_END(); }
  CHECKF(run_child(argv[0], "moves", "4096") == 0, "moves");
  CHECKF(run_child(argv[0], "large", "4096") == 0, "large");
  CHECKF(run_child(argv[0], "into-large", "4096") == 0, "into-large");
  CHECKF(run_child(argv[0], "bound", "4") == 0, "bound");
  TEST_END();
}
