#!/bin/sh
# hakmem's clock is the monotonic clock in ms modulo 2^32, which wraps every
# 49.7 days of uptime. test_purge (purging after the delay, without
# malloc_trim, for every tier) runs again with the clock shifted into the
# half of that cycle where a signed comparison with 0 goes wrong
# (shim_clock.so): purging must work whatever the machine's uptime.
set -u
. "$(dirname "$0")/emulated.sh"
build=${HAK_TEST_BUILD:?HAK_TEST_BUILD must name the build folder}
shim=$build/tests/shim_clock.so
[ -f "$shim" ] || { echo "FAIL: $shim not built"; exit 1; }
out=$(preloaded "$shim" "$build/tests/test_purge" 2>&1)
rc=$?
echo "$out" | tail -n 12
[ "$rc" = 0 ] || { echo "FAIL: test_purge with the clock at 3 * 2^30 ms (mod 2^32): exit status $rc"; exit 1; }
echo "test_purge passes with the shifted clock"
