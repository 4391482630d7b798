/* Preloaded by test_clock_wrap.sh: shifts the monotonic clocks so that their
 * milliseconds modulo 2^32 (hakmem's clock, _hak_os_now_ms) start at
 * 3 * 2^30, the half of the 49.7-day cycle where a signed comparison of
 * such a time with 0 says "not yet" (a machine up 25 to 49 days). Other
 * clocks pass through. The real time comes from the system call, so the
 * shim needs nothing from libc's clock_gettime. */
#define _GNU_SOURCE
#include <stdint.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static int64_t offset_ns;

static int64_t real_ns(clockid_t id, struct timespec *ts) {
  if (syscall(SYS_clock_gettime, id, ts) != 0) return -1;
  return (int64_t)ts->tv_sec * 1000000000 + ts->tv_nsec;
}

__attribute__((constructor)) static void shift_clock(void) {
  struct timespec ts;
  int64_t now = real_ns(CLOCK_MONOTONIC, &ts);
  uint32_t ms = (uint32_t)(now / 1000000);
  offset_ns = (int64_t)(uint32_t)((3u << 30) - ms) * 1000000;
}

int clock_gettime(clockid_t id, struct timespec *ts) {
  int64_t t = real_ns(id, ts);
  if (t < 0) return -1;
  if (id == CLOCK_MONOTONIC || id == CLOCK_MONOTONIC_COARSE || id == CLOCK_MONOTONIC_RAW) {
    t += offset_ns;
    ts->tv_sec = t / 1000000000;
    ts->tv_nsec = t % 1000000000;
  }
  return 0;
}
