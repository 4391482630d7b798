#!/bin/sh
# Valgrind memcheck sees hakmem's blocks (src/track.h): programs linked with
# the VALGRIND=1 build's libhakmem.a (build-valgrind/, made here) run under
# memcheck, which must report a use-after-free, a read past the block (in
# its size class, or in the next block, never handed out), a leak (definitely lost, with the block's size), an uninitialised read and a
# double free as it does for the C library's malloc, and nothing for a clean
# program that uses every allocation call, threads included. The same
# use-after-free under LD_PRELOAD of the build's libhakmem.so, and, as the
# control, the default build's libhakmem.a, which memcheck cannot see into.
# memcheck replaces any malloc it finds (the program's too) unless told
# --soname-synonyms=somalloc=nouserintercepts: then hakmem's malloc runs.
# HAK_TEST_VALGRIND_API=1 also runs test_api under memcheck (minutes).
# Skipped, with the reason, without valgrind or its header.
set -u
build=${HAK_TEST_BUILD:?HAK_TEST_BUILD must name the build folder}
root=$(cd "$(dirname "$0")/.." && pwd)
command -v valgrind >/dev/null || { echo "SKIP: valgrind is not installed (Debian: apt-get install valgrind)"; exit 0; }
echo '#include <valgrind/memcheck.h>' | cc -E - >/dev/null 2>&1 ||
  { echo "SKIP: <valgrind/memcheck.h> is missing (Debian: apt-get install valgrind)"; exit 0; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
vg=$root/build-valgrind
api=; [ "${HAK_TEST_VALGRIND_API:-0}" = 1 ] && api=$vg/tests/test_api
make -s -C "$root" --no-print-directory VALGRIND=1 lib $api >"$tmp/make.log" 2>&1 ||
  { cat "$tmp/make.log"; echo "FAIL: make VALGRIND=1"; exit 1; }
memcheck() { valgrind --leak-check=full --error-exitcode=99 --soname-synonyms=somalloc=nouserintercepts "$@"; }

for p in errors clean; do
  cc -std=gnu11 -D_GNU_SOURCE -O1 -g -I"$root/include" "$root/tests/plain_track_$p.c" "$vg/libhakmem.a" \
    -lpthread -o "$tmp/$p" || fail "link plain_track_$p with build-valgrind/libhakmem.a"
done
nm "$tmp/errors" | grep -q ' T malloc$' || fail "malloc is not defined in the program"

# expect MODE STATUS TEXT: memcheck on the errors program exits STATUS and says TEXT.
expect() {
  memcheck "$tmp/errors" "$1" >"$tmp/$1.out" 2>&1
  rc=$?
  [ "$rc" = "$2" ] || { fail "$1: exit status $rc, not $2"; tail -n 20 "$tmp/$1.out"; }
  grep -q "$3" "$tmp/$1.out" || { fail "$1: memcheck did not say: $3"; tail -n 20 "$tmp/$1.out"; }
  echo "checked $1"
}
expect use-after-free 99 "Address .* is 3 bytes inside a block of size 40 free'd"
expect past-end 99 "Address .* is 0 bytes after a block of size 40 alloc'd"
expect next-block 99 "Address .* is 0 bytes after a block of size 48 alloc'd"
expect leak 99 "40 bytes in 1 blocks are definitely lost"
grep -q "3,000 bytes in 1 blocks are definitely lost" "$tmp/leak.out" || fail "leak: the first block of a slab is not lost"
expect uninit 99 "Conditional jump or move depends on uninitialised value"
expect double-free 134 "Invalid free()"                 # then hakmem's own report aborts
grep -q "already free" "$tmp/double-free.out" || fail "double-free: hakmem did not report it"

# The clean program: no error, no leak, the glibc build's output, and blocks seen.
memcheck "$tmp/clean" >"$tmp/clean.out" 2>"$tmp/clean.err" || { fail "clean: memcheck reported errors"; tail -n 30 "$tmp/clean.err"; }
"$build/tests/plain_track_clean" >"$tmp/clean.expected" || fail "the glibc build of plain_track_clean failed"
cmp -s "$tmp/clean.expected" "$tmp/clean.out" || fail "clean: output differs from the glibc build"
grep -q "ERROR SUMMARY: 0 errors" "$tmp/clean.err" || fail "clean: errors reported"
grep -q "All heap blocks were freed" "$tmp/clean.err" || fail "clean: blocks left at exit"
grep -Eq "total heap usage: [1-9][0-9,]* allocs" "$tmp/clean.err" || fail "clean: memcheck saw no block"
echo "checked clean"

# LD_PRELOAD: hakmem's malloc in libhakmem.so.
LD_PRELOAD="$vg/libhakmem.so" memcheck "$build/tests/plain_track_errors" use-after-free >"$tmp/preload.out" 2>&1
rc=$?
if [ "$rc" = 99 ] && grep -q "inside a block of size 40 free'd" "$tmp/preload.out"; then echo "checked LD_PRELOAD"
else fail "LD_PRELOAD: use-after-free not reported (exit $rc)"; tail -n 20 "$tmp/preload.out"; fi

# The control: the default build's blocks are invisible to memcheck.
if [ -f "$build/libhakmem.a" ] && cc -std=gnu11 -O1 -g "$root/tests/plain_track_errors.c" "$build/libhakmem.a" \
    -lpthread -o "$tmp/untracked" 2>/dev/null && nm "$tmp/untracked" | grep -q ' T malloc$' &&
    ! nm "$tmp/untracked" | grep -q __asan_init; then
  memcheck "$tmp/untracked" use-after-free >"$tmp/untracked.out" 2>&1 &&
    echo "control: the untracked build's use-after-free goes unseen, as expected" ||
    echo "control: memcheck saw the untracked build's error (exit $?): this build is tracked"
fi

if [ "${HAK_TEST_VALGRIND_API:-0}" = 1 ]; then
  memcheck -q "$vg/tests/test_api" >"$tmp/api.out" 2>&1 || { fail "test_api under memcheck"; tail -n 30 "$tmp/api.out"; }
  echo "checked test_api: $(tail -n 1 "$tmp/api.out")"
fi
if [ "$failures" -ne 0 ]; then echo "$failures failures"; exit 1; fi
echo "memcheck sees hakmem's blocks"
