#!/bin/sh
# Runs every test of one build: tests/run.sh BUILD_DIR [PATTERN]
# C tests are build/tests/test_*; scripts are tests/test_*.sh and tests/test_*.py,
# given the build folder in $HAK_TEST_BUILD. Ends with "N passed, N failed".
build=${1:-build}
pattern=${2:-test_}
here=$(cd "$(dirname "$0")" && pwd)
root=$(dirname "$here")
export HAK_TEST_BUILD="$root/$build"
pass=0; fail=0; skip=0; failed=""
log_dir="$root/$build/test-logs"; mkdir -p "$log_dir"
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
  run_one "$name" "$t"
done
case "$build" in *tsan*) ;; *)
  for t in "$here"/test_*.sh "$here"/test_*.py; do
    [ -f "$t" ] || continue
    name=$(basename "$t")
    case "$name" in *"$pattern"*) ;; *) continue ;; esac
    # A sanitizer runtime cannot be linked into a fully static program.
    case "$build:$name" in *ubsan*:test_static.sh) skip=$((skip + 1)); echo "SKIP $name (sanitizer build)"; continue ;; esac
    case "$t" in *.sh) run_one "$name" sh "$t" ;; *.py) run_one "$name" python3 "$t" ;; esac
  done ;;
esac
echo "[$build]${failed:+ failed:$failed}"
echo "$pass passed, $fail failed, $skip skipped"
[ "$fail" -eq 0 ]
