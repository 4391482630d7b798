/* A small test harness: CHECK records a failure and goes on; each test
 * program ends with TEST_END(), which prints "N checks, N failed" and sets
 * the exit code. */
#ifndef HAKMEM_TESTING_H
#define HAKMEM_TESTING_H
#include <stdbool.h>
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

/* Executes this test program again with argv (argv[0] its name) and envp
 * (NULL: this process's environment); returns only when that fails. Under
 * qemu-user (tests/run.sh sets HAK_TEST_EMULATOR, e.g. "qemu-aarch64 -L
 * /usr/aarch64-linux-gnu") the kernel cannot run the test's file itself
 * without binfmt_misc, so the emulator's words come first, then the
 * test's path (qemu answers /proc/self/exe with it); an LD_PRELOAD goes
 * to the test only (qemu's -E), not into the host's emulator. */
#include <limits.h>
#include <string.h>
static inline void test_exec_self(char *const argv[], char *const envp[]) {
  const char *emulator = getenv("HAK_TEST_EMULATOR");
  if (!envp) envp = environ;
  if (!emulator || !*emulator) { execve("/proc/self/exe", argv, envp); return; }
  static char self[PATH_MAX], words[1024];
  ssize_t len = readlink("/proc/self/exe", self, sizeof self - 1);
  if (len <= 0 || strlen(emulator) >= sizeof words) return;
  self[len] = '\0';
  strcpy(words, emulator);
  char *args[64];
  int n = 0;
  for (char *w = strtok(words, " "); w && n < 32; w = strtok(NULL, " ")) args[n++] = w;
  if (n == 0) return;
  static char *env[1024];
  size_t kept = 0, e = 0;
  for (; envp[e] && kept < 1023; e++) {
    if (strncmp(envp[e], "LD_PRELOAD=", 11) != 0) env[kept++] = envp[e];
    else if (n < 32) { args[n++] = "-E"; args[n++] = envp[e]; }
  }
  env[kept] = NULL;
  if (!envp[e]) envp = env;                    /* else too many to copy: as they are */
  args[n++] = self;
  for (int i = 1; argv[i] && n < 63; i++) args[n++] = argv[i];
  args[n] = NULL;
  execvpe(args[0], args, envp);                /* the emulator's own file, by PATH */
}

/* Runs this test again in a child, as `self mode`, with the settings in env
 * ("NAME=value" strings, NULL-terminated) added to its environment (hakmem
 * reads its options once, at start-up). Returns the child's exit status
 * (128: it was killed; 99: it could not be executed). */
#include <sys/wait.h>
static inline int test_rerun(const char *self, const char *mode, const char *const *env) {
  pid_t pid = fork();
  if (pid == 0) {
    for (; env && *env; env++) putenv((char *)*env);   /* the child's copy stays until its exec */
    char *const argv[] = { (char *)self, (char *)mode, NULL };
    test_exec_self(argv, NULL);
    _exit(99);
  }
  int status;
  if (pid < 0 || waitpid(pid, &status, 0) != pid) return 127;
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128;
}

/* Runs body(arg) in a forked child whose file descriptor fd (1 or 2) is
 * caught in out: at most size - 1 bytes, NUL-terminated (the rest is read
 * and dropped, so the child never blocks on a full pipe). The child leaves
 * no core file and is killed by SIGALRM after 30 s; a body that returns
 * exits with 99. Returns the child's wait status. */
#include <sys/resource.h>
static inline int test_in_child(void (*body)(void *), void *arg, int fd, char *out, size_t size) {
  int fds[2], status = -1;
  if (pipe(fds) != 0) { perror("pipe"); exit(2); }
  pid_t pid = fork();
  if (pid < 0) { perror("fork"); exit(2); }
  if (pid == 0) {
    struct rlimit no_core = { 0, 0 };
    setrlimit(RLIMIT_CORE, &no_core);
    alarm(30);
    dup2(fds[1], fd);
    close(fds[0]);
    close(fds[1]);
    body(arg);
    _exit(99);
  }
  close(fds[1]);
  size_t len = 0;
  char drop[256];
  for (ssize_t n = 1; n > 0; ) {
    bool room = len + 1 < size;
    n = read(fds[0], room ? out + len : drop, room ? size - 1 - len : sizeof drop);
    if (n > 0 && room) len += (size_t)n;
  }
  out[len] = 0;
  close(fds[0]);
  waitpid(pid, &status, 0);
  /* qemu-user reports a guest's fatal signal on the guest's stderr
   * ("qemu: uncaught target signal 6 (Aborted) - core dumped"): its line,
   * not the child's, comes off. */
  static const char qemu_line[] = "qemu: uncaught target signal";
  char *q = getenv("HAK_TEST_EMULATOR") ? strstr(out, qemu_line) : NULL;
  if (q && (q == out || q[-1] == '\n')) {
    char *end = strchr(q, '\n');
    if (end) memmove(q, end + 1, strlen(end + 1) + 1);
    else *q = '\0';
  }
  return status;
}
#endif
