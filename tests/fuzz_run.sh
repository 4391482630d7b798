#!/bin/sh
# make fuzz: the differential fuzzer for SECONDS with random seeds, each
# printed before it runs (a failure replays with: BUILD/tests/test_fuzz --seed N,
# or under LD_PRELOAD with plain_fuzz --seed N). Half the time linked with
# hakmem (test_fuzz), a quarter under LD_PRELOAD (plain_fuzz), a quarter under
# libFuzzer (the target LIBFUZZER, when clang built it; else the other two
# share its time). Usage: tests/fuzz_run.sh BUILD SECONDS [LIBFUZZER]
set -u
build=${1:?usage: fuzz_run.sh BUILD SECONDS}
seconds=${2:?usage: fuzz_run.sh BUILD SECONDS}
libfuzzer=${3:-}
if [ -n "$libfuzzer" ]; then
  linked=$((seconds / 2)); preload=$((seconds / 4)); lf=$((seconds - linked - preload))
else
  linked=$((seconds * 2 / 3)); preload=$((seconds - linked)); lf=0
fi
[ "$linked" -ge 1 ] || linked=1
[ "$preload" -ge 1 ] || preload=1
status=0
echo "fuzz: $seconds s: linked $linked s, LD_PRELOAD $preload s, libFuzzer $lf s"
"$build/tests/test_fuzz" --seconds "$linked" || { echo "fuzz: test_fuzz FAILED (replay: $build/tests/test_fuzz --seed N, N the last seed above)"; status=1; }
LD_PRELOAD="$build/libhakmem.so" "$build/tests/plain_fuzz" --seconds "$preload" ||
  { echo "fuzz: plain_fuzz under LD_PRELOAD FAILED (replay: LD_PRELOAD=$build/libhakmem.so $build/tests/plain_fuzz --seed N)"; status=1; }
if [ "$lf" -ge 1 ]; then
  mkdir -p "$build/fuzz/corpus"
  "$libfuzzer" -max_total_time="$lf" -max_len=4096 -timeout=60 -print_final_stats=1 \
    -artifact_prefix="$build/fuzz/" "$build/fuzz/corpus" 2>"$build/fuzz/libfuzzer.log"
  rc=$?
  grep -E '^(stat::number_of_executed_units|stat::peak_rss_mb|Done |fuzz: )' "$build/fuzz/libfuzzer.log"
  if [ "$rc" -ne 0 ]; then
    echo "fuzz: libFuzzer FAILED (exit $rc; input in $build/fuzz/crash-*, replay: $libfuzzer FILE):"
    grep -E 'fuzz: FAIL|hakmem:|ERROR' "$build/fuzz/libfuzzer.log" | head -5
    status=1
  fi
elif [ -z "$libfuzzer" ]; then
  echo "fuzz: no libFuzzer run (clang not installed)"
fi
[ "$status" -eq 0 ] && echo "fuzz: nothing found"
exit $status
