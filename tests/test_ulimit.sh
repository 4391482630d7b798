#!/bin/sh
# A whole program out of memory: python3 under `ulimit -v` (512 MiB) with
# LD_PRELOAD=libhakmem.so asks for 1 TiB, then fills memory with 1 MiB
# buffers and then with small strings until MemoryError, frees them and
# allocates again. Every failure must reach Python as MemoryError (malloc
# returned NULL): the run must not crash and must print what the same script
# prints on glibc.
set -u
build=${HAK_TEST_BUILD:?HAK_TEST_BUILD must name the build folder}
command -v python3 >/dev/null 2>&1 || { echo "SKIP: python3 is not installed"; exit 0; }
py=$(python3 -c 'import sys; print(sys.executable)')
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cat >"$tmp/oom.py" <<'PY'
try:
    huge = bytearray(1 << 40)
    print("huge bytearray: allocated")
except MemoryError:
    print("huge bytearray: MemoryError")
big = []
try:
    while True:
        big.append(bytearray(1 << 20))
except MemoryError:
    pass
n_big = len(big)
big = None
small = []
try:
    while True:
        small.append(str(len(small)) * 3)
except MemoryError:
    pass
n_small = len(small)
small = None
again = [bytearray(1 << 20) for _ in range(n_big // 2)]
print("1 MiB blocks:", n_big > 200, "small objects:", n_small > 1000000, "again:", len(again) == n_big // 2)
PY
# run OUT PRELOAD: the script under the limit.
run() {
  (ulimit -c 0 && ulimit -v 524288 && LD_PRELOAD=$2 exec "$py" "$tmp/oom.py") >"$tmp/$1.out" 2>"$tmp/$1.err"
  echo $?
}
rc_plain=$(run plain "")
rc_hak=$(run hak "$build/libhakmem.so")
cat "$tmp/hak.out"
status=0
[ "$rc_plain" = 0 ] || { echo "FAIL: the script fails even on glibc (status $rc_plain)"; status=1; }
[ "$rc_hak" = 0 ] || { echo "FAIL: exit status $rc_hak under hakmem:"; tail -n 10 "$tmp/hak.err"; status=1; }
cmp -s "$tmp/plain.out" "$tmp/hak.out" || { echo "FAIL: output differs from glibc's:"; cat "$tmp/plain.out"; status=1; }
exit $status
