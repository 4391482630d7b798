/* A small test harness: CHECK records a failure and goes on; each test
 * program ends with TEST_END(), which prints "N checks, N failed" and sets
 * the exit code. */
#ifndef HAKMEM_TESTING_H
#define HAKMEM_TESTING_H
#include <stdio.h>
#include <stdlib.h>

static int test_checks, test_failures;
#define CHECK(cond) do { test_checks++; if (!(cond)) { test_failures++; \
    fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond); } } while (0)
#define CHECKF(cond, ...) do { test_checks++; if (!(cond)) { test_failures++; \
    fprintf(stderr, "%s:%d: CHECK failed: %s: ", __FILE__, __LINE__, #cond); \
    fprintf(stderr, __VA_ARGS__); fputc('\n', stderr); } } while (0)
#define TEST_END() do { fprintf(stderr, "%d checks, %d failed\n", test_checks, test_failures); \
    return test_failures ? 1 : 0; } while (0)

/* The page hakmem works in: the kernel's, or HAKMEM_PAGE_SIZE's when that
 * asks for more (tests/test_pagesize.sh runs tests with 16 and 64 KiB). */
#include <unistd.h>
static inline size_t test_page(void) {
  size_t page = (size_t)sysconf(_SC_PAGESIZE);
  const char *forced = getenv("HAKMEM_PAGE_SIZE");
  if (forced && (size_t)atol(forced) > page) page = (size_t)atol(forced);
  return page;
}
#endif
