#!/bin/sh
# Issue 20's attack on the hardened build (tests/plain_exploit.c, run on
# hakmem by LD_PRELOAD): two freed 48-byte blocks get the address of a
# static buffer written into their first word, then malloc(48) is called
# until the buffer would come out.
#   - as the issue wrote it (no DRAIN), the two blocks wait in the delay
#     ring: the first malloc(48) after the write finds the write (it reads
#     the ring) and aborts with one "written after free" line naming one of
#     the two blocks and its class;
#   - with the blocks on the free lists by then (DRAIN 64: more frees than
#     the delay holds), the pop that decodes a forged link aborts with one
#     "hakmem: corrupted free list" line naming one of them and its class.
# Either way the static buffer is never handed out. The program prints (not
# buffered) the two blocks, then "malloc N" before each call.
# tests/run.sh runs it in the hardened build only.
set -u
build=${HAK_TEST_BUILD:?HAK_TEST_BUILD must name the build folder}
lib=$build/libhakmem.so
prog=$build/tests/plain_exploit
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }

# run NAME PATTERN LAST_CALL ARGS...: an abort (status 134), no static
# buffer handed out, one stderr line matching PATTERN that names one of the
# two freed blocks, and, when LAST_CALL is not empty, "malloc LAST_CALL" as
# the last line printed (the call that aborted).
run() {
  name=$1 pattern=$2 last=$3; shift 3
  (ulimit -c 0; LD_PRELOAD=$lib exec "$prog" "$@") >"$tmp/out" 2>"$tmp/err"
  rc=$?
  echo "--- $name: exit $rc"; head -n 1 "$tmp/out"; [ "$(wc -l <"$tmp/out")" -gt 2 ] && echo ...; [ "$(wc -l <"$tmp/out")" -gt 1 ] && tail -n 1 "$tmp/out"; cat "$tmp/err"
  [ "$rc" = 134 ] || fail "$name: exit status $rc, expected 134 (abort)"
  grep -q '^exploited' "$tmp/out" && fail "$name: the static buffer was handed out"
  grep -q '^not exploited' "$tmp/out" && fail "$name: the malloc calls ran to the end"
  [ "$(wc -l <"$tmp/err")" = 1 ] && grep -q "$pattern" "$tmp/err" ||
    fail "$name: expected one line matching '$pattern', got: $(cat "$tmp/err")"
  named=$(sed -n 's/.*block \(0x[0-9a-f]*\) .*/\1/p' "$tmp/err")
  freed=$(sed -n 's/^freed //p' "$tmp/out")
  case " $freed " in *" $named "*) ;; *) fail "$name: the line names block '$named', not one of the freed '$freed'" ;; esac
  if [ -n "$last" ]; then
    [ "$(tail -n 1 "$tmp/out")" = "malloc $last" ] ||
      fail "$name: the last line printed is '$(tail -n 1 "$tmp/out")', expected 'malloc $last'"
  fi
}

run "the issue's program" '^hakmem: free block 0x[0-9a-f]* (class [0-9]*, 48-byte Tiny blocks) was written after free' 1
run "links forged on the lists" '^hakmem: corrupted free list: the link of free block 0x[0-9a-f]* (class [0-9]*, 48-byte Tiny blocks)' '' 64
if [ "$failures" -ne 0 ]; then echo "$failures failures"; exit 1; fi
echo "the attack is caught"
