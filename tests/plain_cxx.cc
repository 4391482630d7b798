// A C++ program for test_programs.sh, built without hakmem and run with and
// without LD_PRELOAD=libhakmem.so; both runs must print the same lines.
// It uses every form of operator new/delete: plain, sized (-fsized-deallocation),
// aligned (alignas(64), alignas(4096), arrays of them), nothrow, a huge new that
// must throw std::bad_alloc, and containers churned from several threads.
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <map>
#include <new>
#include <string>
#include <thread>
#include <vector>

namespace {

struct alignas(64) Line { unsigned char bytes[100]; };
struct alignas(4096) Page { unsigned char bytes[5000]; };

bool aligned(const void *p, std::size_t a) { return (reinterpret_cast<std::uintptr_t>(p) & (a - 1)) == 0; }

// Keeps the compiler from knowing a size at compile time.
std::size_t hide(std::size_t v) { asm volatile("" : "+r"(v)); return v; }

// Keeps the compiler from omitting a new-expression (C++14 lets it: clang
// drops a new/delete pair whose block does not escape, huge ones included,
// so that a new of 2^60 bytes "succeeded" without calling operator new).
template <class T> T *escape(T *p) { asm volatile("" : "+r"(p) : : "memory"); return p; }

int check(bool ok, const char *what)
{
    if (!ok) std::printf("FAILED: %s\n", what);
    return ok ? 0 : 1;
}

int test_aligned_new()
{
    int bad = 0;
    for (int round = 0; round < 100; round++) {
        Line *l = escape(new Line);
        Line *ls = escape(new Line[10]);
        Page *p = escape(new Page);
        Page *ps = escape(new Page[3]);
        bad += check(aligned(l, 64) && aligned(ls, 64) && aligned(p, 4096) && aligned(ps, 4096), "alignas new");
        std::memset(ps, round, 3 * sizeof(Page));
        std::memset(ls, round, 10 * sizeof(Line));
        delete l;
        delete[] ls;
        delete p;
        delete[] ps;
        void *raw = ::operator new(hide(1000), std::align_val_t(256));
        bad += check(aligned(raw, 256), "operator new(align 256)");
        ::operator delete(raw, 1000, std::align_val_t(256));
    }
    return bad;
}

int test_sized_and_nothrow()
{
    int bad = 0;
    for (std::size_t n = 1; n < 100000; n = n * 3 + 1) {
        void *p = ::operator new(n);
        std::memset(p, 1, n);
        ::operator delete(p, n);
        char *q = escape(new (std::nothrow) char[n]);
        bad += check(q != nullptr, "nothrow new");
        delete[] q;
    }
    char *huge = escape(new (std::nothrow) char[hide(std::size_t(1) << 60)]);
    bad += check(huge == nullptr, "nothrow new of 2^60 bytes returns nullptr");
    std::printf("nothrow ok\n");
    return bad;
}

void test_bad_alloc()
{
    try {
        char *p = escape(new char[hide(std::size_t(1) << 60)]);
        p[0] = 1;
        std::printf("FAILED: new of 2^60 bytes succeeded\n");
        delete[] p;
    } catch (const std::bad_alloc &) {
        std::printf("bad_alloc ok\n");
    }
}

// Deterministic container churn; returns a checksum of what it built.
std::uint64_t churn(unsigned seed)
{
    std::map<std::string, std::vector<int>> m;
    std::uint64_t x = seed * 2654435761u + 1, sum = 0;
    for (int i = 0; i < 60000; i++) {
        x ^= x << 13; x ^= x >> 7; x ^= x << 17;
        std::string key = "k" + std::to_string(x % 5000);
        std::vector<int> &v = m[key];
        if (x % 7 == 0) { m.erase(key); continue; }
        v.resize(x % 300, int(i));
        std::string s(x % 2000, char('a' + x % 26));
        sum += s.size() + v.size() + m.size();
    }
    for (const auto &kv : m) sum = sum * 31 + kv.first.size() + kv.second.size();
    return sum;
}

}  // namespace

int main()
{
    int bad = test_aligned_new() + test_sized_and_nothrow();
    test_bad_alloc();
    std::uint64_t sums[4] = {};
    std::vector<std::thread> threads;
    for (unsigned t = 0; t < 4; t++) threads.emplace_back([t, &sums] { sums[t] = churn(t); });
    for (auto &th : threads) th.join();
    std::printf("checksum %llu %llu %llu %llu\n", (unsigned long long)sums[0], (unsigned long long)sums[1],
                (unsigned long long)sums[2], (unsigned long long)sums[3]);
    std::printf("%s\n", bad ? "cxx FAILED" : "cxx ok");
    return bad ? 1 : 0;
}
