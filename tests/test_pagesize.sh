#!/bin/sh
# HAKMEM_PAGE_SIZE (src/os.c): hakmem works in pages of 16 and 64 KiB on a
# kernel of smaller pages as it would on a kernel of those pages. For each
# size the option takes effect (valloc and pvalloc give one page aligned to
# it, a Large block is whole pages, the options table shows the value), and
# the API, stress, fuzz, class-geometry, heap, Large and purge tests pass
# with it (the hardened build's own test too, its guard pages one page
# each); in the debug build every mapping, purge and guard page is checked
# to be whole pages (os.c, check_pages). A value hakmem cannot use gets one
# line and the kernel's page. Under an emulator (HAK_TEST_EMULATOR, make
# test-aarch64) the C tests run under it, test_churn aside (tests/run.sh
# says why); the probe and the options table need host programs preloaded
# with the library, and are not run.
set -u
build=${HAK_TEST_BUILD:?HAK_TEST_BUILD must name the build folder}
lib=$build/libhakmem.so
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
kernel=$(getconf PAGESIZE)
python=$(python3 -c 'import sys; print(sys.executable)')   # itself, not a wrapper: one process

# probe PAGE: valloc(1) and pvalloc(1) are one page of PAGE bytes, aligned
# to it; malloc(4 MiB + 1) (above the Large classes) is whole pages.
probe='import ctypes, sys
page = int(sys.argv[1])
libc = ctypes.CDLL(None)
for f in (libc.valloc, libc.pvalloc, libc.malloc):
    f.restype, f.argtypes = ctypes.c_void_p, [ctypes.c_size_t]
libc.malloc_usable_size.restype, libc.malloc_usable_size.argtypes = ctypes.c_size_t, [ctypes.c_void_p]
bad = []
for name, p in [("valloc", libc.valloc(1)) for _ in range(8)] + [("pvalloc", libc.pvalloc(1))]:
    u = libc.malloc_usable_size(p)
    if p % page or u != page: bad.append(f"{name}(1) = {p:#x}, usable {u}")
n = (4 << 20) + 1
u = libc.malloc_usable_size(libc.malloc(n))
if u != (n + page - 1) // page * page: bad.append(f"malloc({n}): usable {u}, not whole pages of {page}")
print("; ".join(bad) or "ok")'

tests="test_api test_hakapi_stress test_many_threads test_churn test_fuzz test_hakapi_fuzz
       test_hakapi_classes test_hakapi_heap test_heap test_large test_zero_aligned test_purge"
case "$build" in *hardened*) tests="$tests test_hardened" ;; esac
emulator=${HAK_TEST_EMULATOR:-}
[ -z "$emulator" ] || tests=$(echo $tests | sed 's/test_churn //')

for page in 16384 65536; do
  [ "$page" -ge "$kernel" ] || { echo "page $page: below the kernel's $kernel, not tried"; continue; }
  if [ -z "$emulator" ]; then
    got=$(HAKMEM_PAGE_SIZE=$page LD_PRELOAD=$lib "$python" -c "$probe" "$page" 2>&1)
    [ "$got" = ok ] || fail "HAKMEM_PAGE_SIZE=$page: $got"
    HAKMEM_PAGE_SIZE=$page HAKMEM_PRINT_OPTIONS=1 LD_PRELOAD=$lib /bin/true 2>&1 |
      grep -q "^HAKMEM_PAGE_SIZE  *kernel  *$page " || fail "HAKMEM_PAGE_SIZE=$page: the options table does not show it"
  fi
  for t in $tests; do
    [ -x "$build/tests/$t" ] || { fail "$build/tests/$t is not built"; continue; }
    if HAKMEM_PAGE_SIZE=$page timeout 600 $emulator "$build/tests/$t" >"$tmp/$t.log" 2>&1; then
      echo "page $page: $t passed ($(tail -n 1 "$tmp/$t.log"))"
    else
      fail "page $page: $t (exit $?)"
      tail -n 10 "$tmp/$t.log" | sed 's/^/    /'
    fi
  done
done

# Not a power of two: one line, and the kernel's page.
if [ -z "$emulator" ]; then
  got=$(HAKMEM_PAGE_SIZE=12288 LD_PRELOAD=$lib "$python" -c "$probe" "$kernel" 2>"$tmp/err")
  [ "$got" = ok ] || fail "HAKMEM_PAGE_SIZE=12288: $got"
  grep -q "HAKMEM_PAGE_SIZE=12288 is not a power of two" "$tmp/err" && [ "$(wc -l <"$tmp/err")" -eq 1 ] ||
    { fail "HAKMEM_PAGE_SIZE=12288: not one line on stderr"; cat "$tmp/err"; }
fi

[ "$failures" -eq 0 ] || { echo "$failures failures"; exit 1; }
echo "pages of 16 and 64 KiB: the option holds and the tests pass"
