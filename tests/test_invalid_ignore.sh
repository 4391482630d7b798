#!/bin/sh
# HAKMEM_INVALID_FREE=ignore turns an invalid free into a counted no-op:
# plain_badfree (run on hakmem by LD_PRELOAD) frees a stack address, garbage,
# a file page past its end and pointers into blocks, and must survive with its real blocks intact;
# HAKMEM_STATS=1 reports how many invalid frees there were. Without the
# option the first invalid free aborts with one "hakmem: " line naming free(.
set -u
. "$(dirname "$0")/emulated.sh"
build=${HAK_TEST_BUILD:?HAK_TEST_BUILD must name the build folder}
lib=$build/libhakmem.so
prog=$build/tests/plain_badfree
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }

(HAKMEM_INVALID_FREE=ignore HAKMEM_STATS=1 preloaded "$lib" "$prog") >"$tmp/out" 2>"$tmp/err"
rc=$?
[ "$rc" = 0 ] || fail "with HAKMEM_INVALID_FREE=ignore: exit status $rc"
grep -qx survived "$tmp/out" || fail "with HAKMEM_INVALID_FREE=ignore: did not survive: $(cat "$tmp/out")"
# plain_badfree makes 9 invalid frees; the report counts them.
grep -Eqi 'invalid[^0-9]*[^0-9]9([^0-9]|$)' "$tmp/err" || fail "HAKMEM_STATS=1 report does not count 9 invalid frees"
echo "--- stderr with ignore:"; tail -n 20 "$tmp/err"

(ulimit -c 0; preloaded "$lib" "$prog") >"$tmp/out" 2>"$tmp/err"
rc=$?
drop_emulator_lines "$tmp/err"
[ "$rc" = 134 ] || fail "without the option: exit status $rc, expected 134 (SIGABRT)"
[ "$(wc -l <"$tmp/err")" = 1 ] && grep -q '^hakmem: .*free(' "$tmp/err" ||
  fail "without the option: expected one 'hakmem: ... free(' line, got: $(cat "$tmp/err")"
if [ "$failures" -ne 0 ]; then echo "$failures failures"; exit 1; fi
echo "invalid free handling ok"
