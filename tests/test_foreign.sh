#!/bin/sh
# Foreign pointers: plain_foreign (not linked with hakmem) hands blocks from
# glibc's malloc to hak_free / hak_realloc / hak_malloc_usable_size of a
# dlopen'ed libhakmem.so. hakmem must return them to glibc: no abort, no
# "hakmem:" diagnostic, glibc's in-use figure drops, realloc keeps contents.
set -u
build=${HAK_TEST_BUILD:?HAK_TEST_BUILD must name the build folder}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$build/tests/plain_foreign" "$build/libhakmem.so" >"$tmp/out" 2>"$tmp/err"
rc=$?
cat "$tmp/out"
status=0
[ "$rc" = 0 ] || { echo "FAIL: plain_foreign exited with status $rc"; status=1; }
grep -qx 'foreign ok' "$tmp/out" || { echo "FAIL: plain_foreign did not print 'foreign ok'"; status=1; }
if grep -q 'hakmem:' "$tmp/err"; then echo "FAIL: diagnostic for a legitimate foreign pointer:"; status=1; fi
[ -s "$tmp/err" ] && { echo "stderr:"; cat "$tmp/err"; }
exit $status
