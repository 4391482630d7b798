#!/bin/sh
# AddressSanitizer sees hakmem's blocks (src/track.h): programs built with
# -fsanitize=address and linked with the SAN=address build's libhakmem.a
# (build-asan/, made here) take their blocks from the hak_ API (ASan owns
# malloc there, as TSan does in its build). ASan must report a use-after-free
# and a read past the block (in its size class or in the next block; all "use-after-poison": ASan's own free-block
# report is for its own allocator), hakmem a double free, and a clean program
# that uses every allocation call must run as it does on glibc. ASan's leak
# checker knows only ASan's blocks: leaks are memcheck's (test_valgrind.sh).
# Skipped, with the reason, where the compiler cannot link ASan.
set -u
build=${HAK_TEST_BUILD:?HAK_TEST_BUILD must name the build folder}
root=$(cd "$(dirname "$0")/.." && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
echo 'int main(void) { return 0; }' >"$tmp/empty.c"
cc -fsanitize=address "$tmp/empty.c" -o "$tmp/empty" 2>/dev/null && "$tmp/empty" ||
  { echo "SKIP: cc cannot build and run an ASan program here (Debian: libasan of the compiler)"; exit 0; }
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
asan=$root/build-asan
make -s -C "$root" --no-print-directory SAN=address lib >"$tmp/make.log" 2>&1 ||
  { cat "$tmp/make.log"; echo "FAIL: make SAN=address"; exit 1; }
for p in errors clean; do
  cc -std=gnu11 -D_GNU_SOURCE -O1 -g -fsanitize=address -fno-omit-frame-pointer -DPLAIN_TRACK_HAK_API \
    -I"$root/include" "$root/tests/plain_track_$p.c" "$asan/libhakmem.a" -lpthread -o "$tmp/$p" ||
    fail "link plain_track_$p with build-asan/libhakmem.a"
done

# expect MODE TEXT: the errors program fails and its report says TEXT.
expect() {
  ASAN_OPTIONS=abort_on_error=0 "$tmp/errors" "$1" >"$tmp/$1.out" 2>&1
  rc=$?
  [ "$rc" != 0 ] || fail "$1: exit status 0"
  grep -q "$2" "$tmp/$1.out" || { fail "$1: the report does not say: $2"; tail -n 20 "$tmp/$1.out"; }
  echo "checked $1"
}
expect use-after-free "AddressSanitizer: use-after-poison on address"
grep -q "READ of size 1" "$tmp/use-after-free.out" || fail "use-after-free: not the read of one byte"
expect past-end "AddressSanitizer: use-after-poison on address"
expect next-block "AddressSanitizer: use-after-poison on address"
expect double-free "already free (double free of a 48-byte block)"

"$tmp/clean" >"$tmp/clean.out" 2>"$tmp/clean.err" || { fail "clean: ASan reported errors"; tail -n 30 "$tmp/clean.err"; }
"$build/tests/plain_track_clean" >"$tmp/clean.expected" || fail "the glibc build of plain_track_clean failed"
cmp -s "$tmp/clean.expected" "$tmp/clean.out" || fail "clean: output differs from the glibc build"
echo "checked clean"
if [ "$failures" -ne 0 ]; then echo "$failures failures"; exit 1; fi
echo "ASan sees hakmem's blocks"
