/* memcached_load: memcached over loopback under a chosen allocator, driven by
 * a seeded client whose every answer is checked.
 *
 * usage: memcached_load MEMCACHED LIBRARY SERVER_THREADS CONNECTIONS CLIENT_THREADS OPS SEED
 *
 * Starts MEMCACHED on 127.0.0.1 at a free port with SERVER_THREADS worker
 * threads, LD_PRELOAD=LIBRARY in the server's environment only (LIBRARY '-':
 * the C library's malloc; the client itself never preloads anything), and
 * waits until it accepts connections. Then CLIENT_THREADS threads share
 * CONNECTIONS connections; each connection owns its keys and runs its own
 * seeded sequence of OPS / CONNECTIONS operations: 30% set, 60% get, 10%
 * delete, values of 10 B to 100 KiB skewed small. A thread sends one request
 * on each of its connections, then reads and checks the answers, so up to
 * CONNECTIONS requests are in flight. Every get is checked byte for byte
 * against the value last set (or its absence), every set and delete against
 * the answer it must get; a mismatch exits 1 and prints no result line.
 *
 * After the load phase the client reads the server's peak RSS (VmHWM), stops
 * it with SIGTERM and wait4s it. The last line on stdout is
 *   bench=memcached_load seconds=S peak_rss_kb=N minflt=N user_seconds=S sys_seconds=S ...
 * where seconds is the load phase and the rest are the SERVER's own usage
 * (peak_rss_kb from VmHWM, minflt and CPU times from wait4), then the counts
 * of the run and a digest of every answer: both depend only on the seed and
 * the arguments, never on timing, so two runs can be compared. */
#include "bench_common.h"

#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pwd.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

#define USAGE "memcached_load MEMCACHED LIBRARY SERVER_THREADS CONNECTIONS CLIENT_THREADS OPS SEED"
#define KEYS_PER_CONN 400u
#define VALUE_MAX (100u * 1024u)
#define READ_CAP (VALUE_MAX + 4096u)

enum op_kind { OP_SET, OP_GET, OP_DELETE };

/* One connection: its socket, read buffer, key states and counters. Owned by
 * one client thread. */
typedef struct {
    int fd;
    unsigned id;              /* 0 .. CONNECTIONS-1: names its keys and its random stream */
    bench_rng rng;
    char *buf;                /* received bytes buf[start .. end) not yet consumed */
    size_t start, end;
    char *expect;             /* scratch for the expected value of a get */
    uint32_t version[KEYS_PER_CONN]; /* 0: not stored; else the version last set */
    uint32_t size[KEYS_PER_CONN];
    enum op_kind kind;        /* the request in flight */
    unsigned key;
    uint64_t ops, sets, gets, hits, deletes, deleted, digest;
} conn_t;

typedef struct {
    conn_t *conns;            /* this thread's connections */
    size_t count;
    uint64_t ops_each;        /* operations per connection */
    pthread_barrier_t *start;
} client_t;

static uint64_t g_seed;
static volatile pid_t g_server = 0;

/* ---- the server --------------------------------------------------------------- */

static void kill_server(void) {
    if (g_server > 0)
        kill(g_server, SIGKILL);
}

static unsigned short free_port(void) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in addr = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
    socklen_t len = sizeof addr;
    if (fd < 0 || bind(fd, (struct sockaddr *)&addr, sizeof addr) != 0 ||
        getsockname(fd, (struct sockaddr *)&addr, &len) != 0)
        bench_fail("cannot find a free loopback port: %s", strerror(errno));
    close(fd);
    return ntohs(addr.sin_port);
}

/* Forks and execs the server with LD_PRELOAD=library (unless "-"); its stdout
 * goes to /dev/null, and it dies with this process. */
static pid_t spawn_server(const char *memcached, const char *library, unsigned threads,
                          unsigned short port) {
    char port_text[16], threads_text[16];
    snprintf(port_text, sizeof port_text, "%u", port);
    snprintf(threads_text, sizeof threads_text, "%u", threads);
    const char *argv[16] = { memcached, "-l", "127.0.0.1", "-p", port_text, "-U", "0",
                             "-t", threads_text, "-m", "1024", "-c", "1024" };
    size_t argc = 13;
    if (geteuid() == 0) {              /* memcached refuses root without -u */
        struct passwd *pw = getpwuid(0);
        argv[argc++] = "-u";
        argv[argc++] = pw ? pw->pw_name : "root";
    }
    argv[argc] = NULL;
    pid_t pid = fork();
    if (pid < 0)
        bench_fail("fork: %s", strerror(errno));
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        int devnull = open("/dev/null", O_WRONLY);
        if (devnull >= 0)
            dup2(devnull, 1);
        if (strcmp(library, "-") != 0)
            setenv("LD_PRELOAD", library, 1);
        else
            unsetenv("LD_PRELOAD");
        execv(memcached, (char *const *)argv);
        fprintf(stderr, "bench: cannot run %s: %s\n", memcached, strerror(errno));
        _exit(127);
    }
    return pid;
}

static int connect_to(unsigned short port) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in addr = { .sin_family = AF_INET, .sin_port = htons(port),
                                .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
    if (fd < 0)
        bench_fail("socket: %s", strerror(errno));
    if (connect(fd, (struct sockaddr *)&addr, sizeof addr) != 0) {
        close(fd);
        return -1;
    }
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    return fd;
}

/* Starts the server on a free port and returns the port once it accepts; a
 * server that exits at once (the port was taken meanwhile) is tried again. */
static unsigned short start_server(const char *memcached, const char *library, unsigned threads) {
    for (int attempt = 0; attempt < 5; attempt++) {
        unsigned short port = free_port();
        g_server = spawn_server(memcached, library, threads, port);
        for (int wait_ms = 0; wait_ms < 10000; wait_ms += 5) {
            int status;
            if (waitpid(g_server, &status, WNOHANG) == g_server) {
                g_server = 0;
                break;
            }
            int fd = connect_to(port);
            if (fd >= 0) {
                close(fd);
                return port;
            }
            usleep(5000);
        }
        if (g_server > 0)
            bench_fail("%s did not accept connections on port %u within 10 s", memcached, port);
    }
    bench_fail("%s exited at start-up five times", memcached);
    return 0;
}

static long server_peak_rss_kb(pid_t pid) {
    char path[64], line[256];
    long kb = -1;
    snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
    FILE *status = fopen(path, "r");
    if (status) {
        while (kb < 0 && fgets(line, sizeof line, status))
            sscanf(line, "VmHWM: %ld kB", &kb);
        fclose(status);
    }
    return kb;
}

/* ---- the protocol ------------------------------------------------------------ */

static void send_all(conn_t *c, struct iovec *iov, int count) {
    while (count > 0) {
        struct msghdr msg = { .msg_iov = iov, .msg_iovlen = (size_t)count };
        ssize_t sent = sendmsg(c->fd, &msg, MSG_NOSIGNAL);
        if (sent < 0) {
            if (errno == EINTR)
                continue;
            bench_fail("connection %u: send: %s", c->id, strerror(errno));
        }
        while (count > 0 && (size_t)sent >= iov->iov_len) {
            sent -= (ssize_t)iov->iov_len;
            iov++;
            count--;
        }
        if (count > 0) {
            iov->iov_base = (char *)iov->iov_base + sent;
            iov->iov_len -= (size_t)sent;
        }
    }
}

/* Makes at least `want` unconsumed bytes available in the read buffer. */
static void fill(conn_t *c, size_t want) {
    if (c->end - c->start >= want)
        return;
    if (c->start > 0) {
        memmove(c->buf, c->buf + c->start, c->end - c->start);
        c->end -= c->start;
        c->start = 0;
    }
    if (want > READ_CAP)
        bench_fail("connection %u: an answer of %zu bytes is larger than any sent", c->id, want);
    while (c->end < want) {
        ssize_t got = recv(c->fd, c->buf + c->end, READ_CAP - c->end, 0);
        if (got < 0 && errno == EINTR)
            continue;
        if (got <= 0)
            bench_fail("connection %u: the server closed it or failed (%s)", c->id,
                       got < 0 ? strerror(errno) : "end of stream");
        c->end += (size_t)got;
    }
}

/* Returns the next line without its "\r\n", NUL-terminated in the buffer. */
static char *read_line(conn_t *c) {
    size_t scanned = 0;
    for (;;) {
        char *line = c->buf + c->start;
        size_t have = c->end - c->start;
        for (size_t i = scanned; i + 1 < have; i++)
            if (line[i] == '\r' && line[i + 1] == '\n') {
                line[i] = '\0';
                c->start += i + 2;
                return line;
            }
        scanned = have > 0 ? have - 1 : 0;
        fill(c, have + 1);
    }
}

static void expect_line(conn_t *c, const char *want) {
    char *line = read_line(c);
    if (strcmp(line, want) != 0)
        bench_fail("connection %u key %u: expected '%s', got '%s'", c->id, c->key, want, line);
}

/* ---- the workload ---------------------------------------------------------------- */

static int key_text(char *out, size_t cap, const conn_t *c, unsigned key) {
    return snprintf(out, cap, "c%u:k%u", c->id, key);
}

/* The bytes of version `version` of a key: a function of the seed, the
 * connection, the key and the version, so a get can be checked. */
static void value_fill(char *out, size_t size, const conn_t *c, unsigned key, uint32_t version) {
    bench_rng rng = bench_rng_make(g_seed ^ ((uint64_t)key << 32 | version), c->id);
    for (size_t i = 0; i < size; i += 8) {
        uint64_t word = bench_rng_next(&rng);
        memcpy(out + i, &word, size - i < 8 ? size - i : 8);
    }
}

/* 10 B to 100 KiB, skewed small: 70% up to 400 B, 22% up to 8 KiB, 8% above. */
static uint32_t value_size(bench_rng *rng) {
    uint64_t pick = bench_rng_below(rng, 100);
    if (pick < 70)
        return (uint32_t)bench_rng_size(rng, 10, 400);
    if (pick < 92)
        return (uint32_t)bench_rng_size(rng, 401, 8192);
    return (uint32_t)bench_rng_size(rng, 8193, VALUE_MAX);
}

static void digest_add(conn_t *c, uint64_t word) {
    c->digest = (c->digest ^ word) * 0x100000001B3ull;
}

/* Picks the connection's next operation and sends it. */
static void send_request(conn_t *c) {
    char head[96];
    uint64_t pick = bench_rng_below(&c->rng, 10);
    c->key = (unsigned)bench_rng_below(&c->rng, KEYS_PER_CONN);
    c->kind = pick < 3 ? OP_SET : pick < 9 ? OP_GET : OP_DELETE;
    int n = 0;
    char key[32];
    key_text(key, sizeof key, c, c->key);
    if (c->kind == OP_SET) {
        uint32_t size = value_size(&c->rng);
        c->version[c->key]++;
        c->size[c->key] = size;
        value_fill(c->expect, size, c, c->key, c->version[c->key]);
        n = snprintf(head, sizeof head, "set %s 0 0 %u\r\n", key, size);
        struct iovec iov[3] = { { head, (size_t)n }, { c->expect, size }, { "\r\n", 2 } };
        send_all(c, iov, 3);
        return;
    }
    n = snprintf(head, sizeof head, "%s %s\r\n", c->kind == OP_GET ? "get" : "delete", key);
    struct iovec iov[1] = { { head, (size_t)n } };
    send_all(c, iov, 1);
}

static void check_get(conn_t *c) {
    char *line = read_line(c);
    uint32_t version = c->version[c->key];
    c->gets++;
    if (strcmp(line, "END") == 0) {
        if (version)
            bench_fail("connection %u key %u: get missed a stored value (version %u)", c->id,
                       c->key, version);
        digest_add(c, 0);
        return;
    }
    char key[32], want_head[64];
    key_text(key, sizeof key, c, c->key);
    snprintf(want_head, sizeof want_head, "VALUE %s 0 %u", key, c->size[c->key]);
    if (!version || strcmp(line, want_head) != 0)
        bench_fail("connection %u: expected '%s', got '%s'", c->id,
                   version ? want_head : "END", line);
    size_t size = c->size[c->key];
    fill(c, size + 2);
    value_fill(c->expect, size, c, c->key, version);
    if (memcmp(c->buf + c->start, c->expect, size) != 0 ||
        memcmp(c->buf + c->start + size, "\r\n", 2) != 0)
        bench_fail("connection %u key %u: get returned different bytes", c->id, c->key);
    c->start += size + 2;
    expect_line(c, "END");
    c->hits++;
    digest_add(c, (uint64_t)version << 32 | size);
}

/* Reads and checks the answer to the request in flight. */
static void check_answer(conn_t *c) {
    c->ops++;
    switch (c->kind) {
    case OP_SET:
        expect_line(c, "STORED");
        c->sets++;
        digest_add(c, 1);
        break;
    case OP_GET:
        check_get(c);
        break;
    case OP_DELETE: {
        bool stored = c->version[c->key] != 0;
        expect_line(c, stored ? "DELETED" : "NOT_FOUND");
        c->version[c->key] = 0;
        c->deletes++;
        c->deleted += stored;
        digest_add(c, 2 + stored);
        break;
    }
    }
}

static void *client_thread(void *arg) {
    client_t *client = arg;
    pthread_barrier_wait(client->start);
    for (uint64_t round = 0; round < client->ops_each; round++) {
        for (size_t i = 0; i < client->count; i++)
            send_request(&client->conns[i]);
        for (size_t i = 0; i < client->count; i++)
            check_answer(&client->conns[i]);
    }
    return NULL;
}

/* ---- main ------------------------------------------------------------------------- */

static conn_t *open_connections(unsigned count, unsigned short port) {
    conn_t *conns = calloc(count, sizeof *conns);
    if (!conns)
        bench_fail("out of memory");
    for (unsigned i = 0; i < count; i++) {
        conn_t *c = &conns[i];
        c->id = i;
        c->rng = bench_rng_make(g_seed, i);
        c->buf = bench_malloc(READ_CAP);
        c->expect = bench_malloc(VALUE_MAX);
        c->fd = connect_to(port);
        if (c->fd < 0)
            bench_fail("connection %u: connect: %s", i, strerror(errno));
    }
    return conns;
}

/* Reads the server's peak RSS, stops it and returns its usage from wait4
 * (ru_maxrss replaced by that peak when /proc had it). */
static struct rusage stop_server(void) {
    long peak_kb = server_peak_rss_kb(g_server);
    struct rusage usage;
    int status;
    kill(g_server, SIGTERM);
    if (wait4(g_server, &status, 0, &usage) != g_server)
        bench_fail("wait4 on the server: %s", strerror(errno));
    g_server = 0;
    if (peak_kb >= 0)
        usage.ru_maxrss = peak_kb;
    return usage;
}

static void print_result(const conn_t *conns, unsigned nconns, unsigned nthreads,
                         unsigned server_threads, double seconds, const struct rusage *usage) {
    uint64_t total[6] = { 0 }, digest = 0;
    for (unsigned i = 0; i < nconns; i++) {
        const conn_t *c = &conns[i];
        uint64_t counts[6] = { c->ops, c->sets, c->gets, c->hits, c->deletes, c->deleted };
        for (int k = 0; k < 6; k++)
            total[k] += counts[k];
        digest += c->digest * (2 * (uint64_t)i + 1);
    }
    printf("bench=memcached_load seconds=%.6f peak_rss_kb=%ld minflt=%ld user_seconds=%.6f "
           "sys_seconds=%.6f ops=%" PRIu64 " sets=%" PRIu64 " gets=%" PRIu64 " hits=%" PRIu64
           " deletes=%" PRIu64 " deleted=%" PRIu64 " digest=%016" PRIx64
           " connections=%u client_threads=%u server_threads=%u\n",
           seconds, usage->ru_maxrss, usage->ru_minflt,
           (double)usage->ru_utime.tv_sec + (double)usage->ru_utime.tv_usec * 1e-6,
           (double)usage->ru_stime.tv_sec + (double)usage->ru_stime.tv_usec * 1e-6, total[0],
           total[1], total[2], total[3], total[4], total[5], digest, nconns, nthreads,
           server_threads);
}

int main(int argc, char **argv) {
    if (argc != 8)
        bench_usage_error("wrong number of arguments", USAGE);
    const char *memcached = argv[1], *library = argv[2];
    unsigned server_threads = (unsigned)bench_arg_u64(argv[3], "SERVER_THREADS", USAGE);
    unsigned nconns = (unsigned)bench_arg_u64(argv[4], "CONNECTIONS", USAGE);
    unsigned nthreads = (unsigned)bench_arg_u64(argv[5], "CLIENT_THREADS", USAGE);
    uint64_t ops = bench_arg_u64(argv[6], "OPS", USAGE);
    g_seed = bench_arg_u64(argv[7], "SEED", USAGE);
    if (!server_threads || server_threads > 64 || !nthreads || nconns < nthreads ||
        nconns > 512 || ops < nconns)
        bench_usage_error("need 1 <= SERVER_THREADS <= 64, 1 <= CLIENT_THREADS <= CONNECTIONS "
                          "<= 512 and OPS >= CONNECTIONS", USAGE);

    if (access(memcached, X_OK) != 0)
        bench_fail("cannot run %s: %s", memcached, strerror(errno));
    atexit(kill_server);
    conn_t *conns = open_connections(nconns, start_server(memcached, library, server_threads));
    client_t *clients = calloc(nthreads, sizeof *clients);
    if (!clients)
        bench_fail("out of memory");
    /* Thread t takes a contiguous run of the connections. */
    pthread_barrier_t start;
    for (unsigned t = 0, first = 0; t < nthreads; t++) {
        unsigned count = nconns / nthreads + (t < nconns % nthreads);
        clients[t] = (client_t){ &conns[first], count, ops / nconns, &start };
        first += count;
    }
    double seconds = bench_run_team(&start, nthreads, client_thread, clients, sizeof *clients);
    for (unsigned i = 0; i < nconns; i++)
        close(conns[i].fd);
    struct rusage usage = stop_server();
    print_result(conns, nconns, nthreads, server_threads, seconds, &usage);
    for (unsigned i = 0; i < nconns; i++) {
        free(conns[i].buf);
        free(conns[i].expect);
    }
    free(conns);
    free(clients);
    return 0;
}
