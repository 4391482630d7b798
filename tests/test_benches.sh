#!/bin/sh
# The benchmark programs of issues 17 and 23 in short forms, under hakmem
# (LD_PRELOAD) and without it: each must exit 0 (its own memory checks
# passed), print one result line whose name, threads and ops follow from its
# arguments, with ops_per_sec, peak_rss_kb and minflt; bad arguments exit 2.
set -u
build=${HAK_TEST_BUILD:?HAK_TEST_BUILD must name the build folder}
lib=$build/libhakmem.so
bin=$build/bench
failures=0
fail() { echo "FAIL: $*" >&2; failures=$((failures + 1)); }

# field LINE KEY: the value of KEY=... in LINE.
field() { printf '%s\n' "$1" | tr ' ' '\n' | sed -n "s/^$2=//p"; }

# check PRELOAD EXPECTED_PAIRS PROGRAM ARGS...: EXPECTED_PAIRS is "key=value ...".
check() {
  preload=$1 expected=$2; shift 2
  under=${preload:+hakmem}; under=${under:-glibc}
  out=$(LD_PRELOAD=$preload timeout 120 "$bin/$@" 2>&1); rc=$?
  if [ $rc != 0 ]; then fail "$* under $under: exit $rc: $out"; return; fi
  line=$(printf '%s\n' "$out" | grep '^bench=' | tail -n 1)
  for pair in $expected; do
    [ "$(field "$line" "${pair%%=*}")" = "${pair#*=}" ] || fail "$* under $under: want $pair in: $line"
  done
  for key in ops_per_sec peak_rss_kb minflt; do
    value=$(field "$line" $key)
    case "$value" in ''|0|*[!0-9]*) fail "$* under $under: $key='$value' in: $line" ;; esac
  done
  echo "ok $* under $under"
}

for preload in "" "$lib"; do
  check "$preload" "bench=large_churn threads=1 ops=24" bench_large_churn 8 4 65536 1048576
  check "$preload" "bench=ring threads=2 ops=81920" bench_ring 2 80
  check "$preload" "bench=ring threads=8 ops=16384" bench_ring 8 16 64 16 8192 7
  check "$preload" "bench=cache_thrash threads=2 ops=400" bench_false_sharing thrash 2 100 8 500
  check "$preload" "bench=cache_scratch threads=3 ops=606" bench_false_sharing scratch 3 100 1 500
  check "$preload" "bench=batch threads=4 rounds=5" bench_batch 4 5 2000
  check "$preload" "bench=batch threads=1 remote_pct=100" bench_batch 1 3 100 1 64 100
  check "$preload" "bench=oversubscribed threads=2 ops=4000 spinners=2" bench_oversubscribed 2 2 2000
  check "$preload" "bench=size_shift threads=1 cycles=1 live_mib=4" bench_size_shift 1 4
  check "$preload" "bench=random_mixed ops=20000" bench_random_mixed 20000 100
  check "$preload" "bench=stress threads=3 scale=10 iter=4 spinners=1" bench_stress 3 10 4 1
done

for bad in "bench_large_churn 1 0" "bench_large_churn 5 4 100" "bench_ring 1 10" \
           "bench_false_sharing share 2 10" "bench_batch 2 10 100 1 10 101" \
           "bench_oversubscribed 0 1 10" "bench_size_shift 1 0" "bench_stress 0 10 1" \
           "bench_stress 2 10 0" "bench_stress 2 10 1 65"; do
  # shellcheck disable=SC2086
  "$bin"/$bad >/dev/null 2>&1; rc=$?
  [ $rc = 2 ] || fail "$bad: exit $rc, want 2 (bad arguments)"
done

[ $failures = 0 ] || exit 1
echo "benchmark programs: all checks passed"
