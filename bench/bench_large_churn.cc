/* bench_large_churn [ITERS [BUFFERS [MIN MAX [SEED]]]]
 *
 * Large-buffer churn, the shape of the "few live big buffers" benchmarks
 * (a program that keeps a handful of multi-megabyte work buffers and
 * replaces them at random): BUFFERS slots (default 4) hold buffers of a
 * random size in [MIN, MAX] bytes (default 5-25 MiB). Each iteration picks a
 * random slot, checks and deletes its buffer, and replaces it with
 * `new char[n]()` — value-initialised, so every byte is written with zero —
 * then writes a tag byte on every page and reads the buffer's pages back
 * into a checksum. Whether the allocator hands back memory it already has
 * (resident pages) or a fresh mapping (a page fault per 4 KiB) decides the
 * time; minflt on the result line shows which. An op is one new[] or
 * delete[]; ITERS (default 1000) iterations after the slots are filled. */
#include <new>

#include "bench_common.h"

#define USAGE                                                                    \
    "bench_large_churn [ITERS [BUFFERS [MIN MAX [SEED]]]]  (defaults: ITERS 1000, " \
    "BUFFERS 4, MIN 5242880, MAX 26214400, SEED 42)"

namespace {

struct buffer {
    char *data;
    size_t size;
    uint8_t tag;
};

/* The sum of the first byte of every page and of the last byte: what the
 * pattern of bench_fill must read back. */
uint64_t page_checksum(const char *data, size_t size) {
    const volatile unsigned char *p = reinterpret_cast<const volatile unsigned char *>(data);
    uint64_t sum = 0;
    for (size_t off = 0; off < size - 1; off += BENCH_PAGE)
        sum += p[off];
    return sum + p[size - 1];
}

uint64_t expected_checksum(size_t size, uint8_t tag) {
    uint64_t pages = (size - 2) / BENCH_PAGE + 1; /* offsets 0, 4096, ... below size - 1 */
    return pages * tag + (uint8_t)(tag ^ 0xA5);
}

/* Checks the buffer's pattern and deletes it; exits on a mismatch. */
void release(buffer *b) {
    if (!bench_check(b->data, b->size, b->tag))
        bench_fail("memory check failed: buffer %p of %zu bytes was overwritten",
                   static_cast<void *>(b->data), b->size);
    delete[] b->data;
    b->data = nullptr;
}

/* A zero-filled buffer with its tag on every page; returns its checksum. */
uint64_t replace(buffer *b, size_t size, uint8_t tag) {
    char *data = new (std::nothrow) char[size]();
    if (!data)
        bench_fail("new char[%zu]() failed", size);
    bench_fill(data, size, tag);
    *b = buffer{ data, size, tag };
    uint64_t sum = page_checksum(data, size);
    if (sum != expected_checksum(size, tag))
        bench_fail("checksum of a fresh buffer of %zu bytes is %" PRIu64, size, sum);
    return sum;
}

} // namespace

int main(int argc, char **argv) {
    if (argc > 6 || argc == 4)
        bench_usage_error("expected 0 to 5 arguments (MIN and MAX together)", USAGE);
    uint64_t iters = argc > 1 ? bench_arg_u64(argv[1], "ITERS", USAGE) : 1000;
    uint64_t count = argc > 2 ? bench_arg_u64(argv[2], "BUFFERS", USAGE) : 4;
    uint64_t min = argc > 3 ? bench_arg_u64(argv[3], "MIN", USAGE) : 5u << 20;
    uint64_t max = argc > 3 ? bench_arg_u64(argv[4], "MAX", USAGE) : 25u << 20;
    uint64_t seed = argc > 5 ? bench_arg_u64(argv[5], "SEED", USAGE) : 42;
    if (count == 0 || count > 4096 || min < 2 || min > max || max > ((uint64_t)1 << 40))
        bench_usage_error("need 1 <= BUFFERS <= 4096 and 2 <= MIN <= MAX <= 1 TiB", USAGE);

    buffer *slots = static_cast<buffer *>(calloc(count, sizeof *slots));
    if (!slots)
        bench_fail("calloc of %" PRIu64 " slots failed", count);
    bench_rng rng = bench_rng_make(seed, 0);
    uint64_t ops = 0, checksum = 0, bytes = 0;

    double start = bench_now();
    for (uint64_t i = 0; i < count + iters; i++) {
        size_t index = i < count ? (size_t)i : (size_t)bench_rng_below(&rng, count);
        if (slots[index].data) {
            release(&slots[index]);
            ops++;
        }
        size_t size = bench_rng_size(&rng, min, max);
        checksum += replace(&slots[index], size, (uint8_t)(1 + i % 251));
        bytes += size;
        ops++;
    }
    for (uint64_t i = 0; i < count; i++) {
        release(&slots[i]);
        ops++;
    }
    double seconds = bench_now() - start;

    free(slots);
    bench_report("large_churn", ops, seconds, 1,
                 "iters=%" PRIu64 " buffers=%" PRIu64 " min=%" PRIu64 " max=%" PRIu64
                 " seed=%" PRIu64 " mib_allocated=%" PRIu64 " checksum=%" PRIu64,
                 iters, count, min, max, seed, bytes >> 20, checksum);
    return 0;
}
