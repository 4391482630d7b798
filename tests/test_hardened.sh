#!/bin/sh
# Issue 20's attack on the hardened build (tests/plain_exploit.c, run on
# hakmem by LD_PRELOAD): two freed 48-byte blocks get the address of a
# static buffer written into their first word, then malloc(48) is called
# until the buffer would come out.
#   - with the blocks on the free lists by then (DRAIN 64: more frees than
#     the delay holds), the pop that decodes the forged link aborts with one
#     "hakmem: corrupted free list" line naming the block and its class;
#   - as the issue wrote it (DRAIN 0), the blocks are still delayed: no
#     malloc hands out the buffer, and when they leave the delay (AFTER 40
#     more frees) the write is caught: one "written after free" line, abort.
# tests/run.sh runs it in the hardened build only.
set -u
build=${HAK_TEST_BUILD:?HAK_TEST_BUILD must name the build folder}
lib=$build/libhakmem.so
prog=$build/tests/plain_exploit
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }

# run NAME EXPECTED_STATUS PATTERN ARGS...: the status, and one stderr line
# matching PATTERN (when PATTERN is not empty).
run() {
  name=$1 want=$2 pattern=$3; shift 3
  (ulimit -c 0; LD_PRELOAD=$lib exec "$prog" "$@") >"$tmp/out" 2>"$tmp/err"
  rc=$?
  echo "--- $name: exit $rc"; cat "$tmp/out" "$tmp/err"
  [ "$rc" = "$want" ] || fail "$name: exit status $rc, expected $want"
  grep -q '^exploited' "$tmp/out" && fail "$name: the static buffer was handed out"
  if [ -n "$pattern" ]; then
    [ "$(wc -l <"$tmp/err")" = 1 ] && grep -q "$pattern" "$tmp/err" ||
      fail "$name: expected one line matching '$pattern', got: $(cat "$tmp/err")"
  fi
}

run "links forged on the lists" 134 '^hakmem: corrupted free list: the link of free block 0x[0-9a-f]* (class [0-9]*, 48-byte Tiny blocks)' 64
run "the issue's program" 0 '' 0
run "the issue's program, then frees" 134 '^hakmem: free block 0x[0-9a-f]* (class [0-9]*, 48-byte Tiny blocks) was written after free' 0 40
if [ "$failures" -ne 0 ]; then echo "$failures failures"; exit 1; fi
echo "the attack is caught"
