/* The differential fuzzer (fuzz_engine.h) as a plain program: the allocator is
 * whatever LD_PRELOAD gives (hakmem, a peer) or glibc's. free_sized and
 * free_aligned_sized are used when the allocator has them. The 25% bound on
 * usable sizes is hakmem's promise: checked when hakmem is loaded, or with
 * FUZZ_USABLE_BOUND=1. Arguments as test_fuzz's. */
#include "fuzz_engine.h"
#include <dlfcn.h>
#include <malloc.h>

static size_t usable(void *p) { return malloc_usable_size(p); }

/* pvalloc where the C library has none (musl) and nothing preloaded gives
 * one: valloc of the size rounded up to whole pages, as pvalloc is. */
static void *pvalloc_by_valloc(size_t n) {
  size_t page = (size_t)sysconf(_SC_PAGESIZE);
  return valloc(n ? (n + page - 1) / page * page : page);
}

int main(int argc, char **argv) {
  static struct fz_api api = {
    .malloc_fn = malloc, .free_fn = free, .calloc_fn = calloc, .realloc_fn = realloc,
    .reallocarray_fn = reallocarray, .posix_memalign_fn = posix_memalign,
    .aligned_alloc_fn = aligned_alloc, .memalign_fn = memalign, .valloc_fn = valloc,
    .usable_fn = usable,
  };
  api.pvalloc_fn = (void *(*)(size_t))dlsym(RTLD_DEFAULT, "pvalloc");   /* glibc's, or the preload's */
  if (!api.pvalloc_fn) api.pvalloc_fn = pvalloc_by_valloc;
  int hakmem = dlsym(RTLD_DEFAULT, "hak_malloc") != NULL;
  const char *bound = getenv("FUZZ_USABLE_BOUND");
  api.name = hakmem ? "hakmem LD_PRELOAD" : "preloaded or C library allocator";
  api.free_sized_fn = (void (*)(void *, size_t))dlsym(RTLD_DEFAULT, "free_sized");
  api.free_aligned_sized_fn = (void (*)(void *, size_t, size_t))dlsym(RTLD_DEFAULT, "free_aligned_sized");
  api.usable_bound = bound ? atoi(bound) : hakmem;
  return fz_main(argc, argv, &api);
}
