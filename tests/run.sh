#!/bin/sh
# Runs every test of one build: tests/run.sh BUILD_DIR [PATTERN]
# C tests are build/tests/test_*; scripts are tests/test_*.sh and tests/test_*.py,
# given the build folder in $HAK_TEST_BUILD. Ends with "N passed, N failed".
# HAK_TEST_EMULATOR (e.g. "qemu-aarch64 -L /usr/aarch64-linux-gnu", set by
# make test-aarch64) runs each C test under it; what qemu-user cannot run is
# named and skipped below with the reason. HAK_TEST_LIBC=musl (make
# test-musl) names and skips what a musl build cannot run.
build=${1:-build}
pattern=${2:-test_}
here=$(cd "$(dirname "$0")" && pwd)
root=$(dirname "$here")
export HAK_TEST_BUILD="$root/$build"
pass=0; fail=0; skip=0; failed=""
log_dir="$root/$build/test-logs"; mkdir -p "$log_dir"
emulator=${HAK_TEST_EMULATOR:-}
skip_one() { skip=$((skip + 1)); echo "SKIP $1 ($2)"; }
# Why a test cannot run under qemu-user (empty: it runs).
emulator_gap() {
  case "$1" in
    test_fork|test_fork_locks) echo "qemu-user aborts in a child forked from a threaded process (cpu_exec assertion)" ;;
    test_addrlimit) echo "RLIMIT_AS also limits qemu's own reservations: the children are killed" ;;
    test_churn) echo "VmRSS counts qemu's own memory for the 5,000 threads it emulated" ;;
    test_ab_decision.py) echo "host Python statistics only: no aarch64 code in it" ;;
    test_foreign.sh) echo "qemu-user 7.2's /proc/self/maps does not name the C library's brk heap [heap], by which hakmem knows its blocks" ;;
    test_pagesize.sh|test_clock_wrap.sh|test_invalid_ignore.sh|test_limit.sh) ;;   # run under it (tests/emulated.sh)
    *.sh|*.py) echo "script tests run the build's programs directly and link with the host cc" ;;
  esac
}
# Why a test cannot run in a build for another C library than glibc
# (HAK_TEST_LIBC=musl, set by make test-musl; empty: it runs).
libc=${HAK_TEST_LIBC:-}
libc_gap() {
  case "$1" in
    test_fuzz_preload.sh) ;;   # plain_fuzz, built for musl: under LD_PRELOAD and under musl's malloc
    test_prof.py) ;;           # plain_prof and its variants built with musl-gcc and frame pointers
    test_foreign.sh) echo "hakmem knows the C library's own blocks by glibc's brk heap and __libc_free only" ;;
    *.sh|*.py) echo "script tests run the host's glibc programs and tools with the library, or C++ (musl-gcc builds none)" ;;
  esac
}
# Why a test cannot run in the ASan build (empty: it runs).
asan_gap() {
  case "$1" in
    test_hakapi_classes|test_hakapi_rings) echo "reads hakmem's free blocks, which the ASan build poisons" ;;
    test_hakapi_first_chunks) echo "ASan's shadow memory holds the home slot, so there is no first-chunk area (and it reads freed blocks)" ;;
  esac
}
# Why a test does not apply to the hardened build (empty: it runs).
hardened_gap() {
  case "$1" in
    test_hakapi_rings) echo "it checks the rings' LIFO order, capacities and spills block by block; the hardened build delays every free" ;;
  esac
}
run_one() {  # name command...
  name=$1; shift
  start=$(date +%s)
  if timeout 600 "$@" >"$log_dir/$name.log" 2>&1; then
    pass=$((pass + 1)); echo "PASS $name ($(( $(date +%s) - start ))s)"
  else
    rc=$?; fail=$((fail + 1)); failed="$failed $name"
    echo "FAIL $name (exit $rc) — last lines of $log_dir/$name.log:"
    tail -n 15 "$log_dir/$name.log" | sed 's/^/    /'
  fi
}
for t in "$root/$build"/tests/test_*; do
  [ -x "$t" ] || continue
  name=$(basename "$t")
  case "$name" in *"$pattern"*) ;; *) continue ;; esac
  # The TSan build runs only the hak_ API tests.
  case "$build" in *tsan*) case "$name" in test_hakapi_*) ;; *) continue ;; esac ;; esac
  case "$build" in *asan*) why=$(asan_gap "$name"); [ -z "$why" ] || { skip_one "$name" "$why"; continue; } ;; esac
  case "$build:$name" in
    *hardened*:*) why=$(hardened_gap "$name"); [ -z "$why" ] || { skip_one "$name" "$why"; continue; } ;;
    *:test_hardened*) skip_one "$name" "the hardened build's test (make HARDENED=1)"; continue ;;
  esac
  if [ -n "$emulator" ]; then
    why=$(emulator_gap "$name"); [ -z "$why" ] || { skip_one "$name" "$why"; continue; }
    run_one "$name" $emulator "$t"; continue
  fi
  run_one "$name" "$t"
done
case "$build" in *tsan*) ;; *)
  for t in "$here"/test_*.sh "$here"/test_*.py; do
    [ -f "$t" ] || continue
    name=$(basename "$t")
    case "$name" in *"$pattern"*) ;; *) continue ;; esac
    # A sanitizer runtime cannot be linked into a fully static program.
    case "$build:$name" in *ubsan*:test_static.sh) skip_one "$name" "sanitizer build"; continue ;; esac
    # The ASan build has the hak_ API tests and its own script only.
    case "$build:$name" in *asan*:test_asan*) ;; *asan*:*) continue ;; esac
    case "$build:$name" in *hardened*:*) ;; *:test_hardened*) skip_one "$name" "the hardened build's test (make HARDENED=1)"; continue ;; esac
    if [ -n "$emulator" ]; then why=$(emulator_gap "$name"); [ -z "$why" ] || { skip_one "$name" "$why"; continue; }; fi
    if [ -n "$libc" ]; then why=$(libc_gap "$name"); [ -z "$why" ] || { skip_one "$name" "$why"; continue; }; fi
    case "$t" in *.sh) run_one "$name" sh "$t" ;; *.py) run_one "$name" python3 "$t" ;; esac
  done ;;
esac
echo "[$build]${failed:+ failed:$failed}"
echo "$pass passed, $fail failed, $skip skipped"
[ "$fail" -eq 0 ]
