#!/bin/sh
# Static linking: plain_alloc.c linked with libhakmem.a (glibc still shared),
# and, when the C library can be linked statically here, a fully static
# program too. Each must print what the plain glibc build prints, exit 0, and
# really use hakmem: malloc is defined in the program and HAKMEM_STATS=1 makes
# it print hakmem's report.
set -u
build=${HAK_TEST_BUILD:?HAK_TEST_BUILD must name the build folder}
root=$(cd "$(dirname "$0")/.." && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
"$build/tests/plain_alloc" >"$tmp/expected" || fail "the plain build of plain_alloc failed"

# check NAME EXTRA_LDFLAGS: builds $tmp/NAME with libhakmem.a and checks it.
check() {
  prog=$tmp/$1
  if ! cc -std=gnu11 -D_GNU_SOURCE -O1 -I"$root/include" "$root/tests/plain_alloc.c" "$build/libhakmem.a" \
      $2 -lpthread -o "$prog" 2>"$prog.ld"; then
    fail "$1: link failed:"; tail -n 10 "$prog.ld"; return
  fi
  nm "$prog" | grep -q ' T malloc$' || fail "$1: malloc is not defined in the program"
  HAKMEM_STATS=1 "$prog" >"$prog.out" 2>"$prog.err"
  rc=$?
  [ "$rc" = 0 ] || { fail "$1: exit status $rc"; tail -n 5 "$prog.err"; }
  cmp -s "$tmp/expected" "$prog.out" || fail "$1: output differs from the glibc build"
  grep -qi hakmem "$prog.err" || fail "$1: HAKMEM_STATS=1 printed no hakmem report"
  echo "checked $1"
}

check static-hakmem ""
echo 'int main(void) { return 0; }' >"$tmp/empty.c"
if cc -static "$tmp/empty.c" -o "$tmp/empty" 2>/dev/null; then
  check fully-static -static
else
  echo "SKIP fully-static: this C library cannot be linked statically"
fi
if [ "$failures" -ne 0 ]; then echo "$failures failures"; exit 1; fi
echo "static linking ok"
