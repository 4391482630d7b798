#!/bin/sh
# The memory limit from the environment, through LD_PRELOAD, in C++ and C
# (plain_limit: operator new of 1 MiB buffers up to 256 MiB, then malloc of
# 1000-byte blocks up to 256 MiB, then everything freed and 4 MiB asked for):
#   HAKMEM_LIMIT=hard, HAKMEM_LIMIT_MB=64: new throws bad_alloc and malloc
#   returns NULL with ENOMEM before 64 MiB (and after 32: the limit is not
#   hit early), and after the frees the 4 MiB block is served;
#   soft, and no limit: every allocation is served;
#   HAKMEM_LIMIT_MB=cgroup is accepted and shown as typed; a malformed value
#   gets one warning.
set -u
. "$(dirname "$0")/emulated.sh"
build=${HAK_TEST_BUILD:?HAK_TEST_BUILD must name the build folder}
lib=$build/libhakmem.so
prog=$build/tests/plain_limit
status=0
fail() { echo "FAIL: $*"; status=1; }

out=$(HAKMEM_LIMIT_MB=64 HAKMEM_LIMIT=hard preloaded "$lib" "$prog" 256 2>&1)
echo "hard 64 MiB: $out" | tr '\n' ' '; echo
mib=$(echo "$out" | sed -n 's/^new: bad_alloc after \([0-9]*\) MiB$/\1/p')
[ -n "$mib" ] && [ "$mib" -ge 32 ] && [ "$mib" -le 64 ] || fail "hard limit: operator new did not throw between 32 and 64 MiB"
mib=$(echo "$out" | sed -n 's/^malloc: ENOMEM after \([0-9]*\) MiB$/\1/p')
[ -n "$mib" ] && [ "$mib" -ge 32 ] && [ "$mib" -le 64 ] || fail "hard limit: malloc did not fail with ENOMEM between 32 and 64 MiB"
echo "$out" | grep -qx "again: ok" || fail "hard limit: no 4 MiB block after the frees"

for env in "HAKMEM_LIMIT_MB=64" "HAKMEM_LIMIT_MB=0"; do
  out=$(export $env; preloaded "$lib" "$prog" 256 2>&1)
  echo "$env: $out" | tr '\n' ' '; echo
  [ "$out" = "$(printf 'new: cap\nmalloc: cap\nagain: ok')" ] || fail "$env: an allocation failed"
done

out=$(HAKMEM_LIMIT_MB=cgroup HAKMEM_PRINT_OPTIONS=1 preloaded "$lib" "$prog" 1 2>&1)
echo "$out" | grep -q "^HAKMEM_LIMIT_MB .* cgroup " || fail "HAKMEM_LIMIT_MB=cgroup is not shown as typed"
echo "$out" | grep -qx "again: ok" || fail "HAKMEM_LIMIT_MB=cgroup: the program did not run"
out=$(HAKMEM_LIMIT_MB=lots preloaded "$lib" "$prog" 1 2>&1)
[ "$(echo "$out" | grep -c "HAKMEM_LIMIT_MB=lots is not valid")" = 1 ] || fail "a malformed HAKMEM_LIMIT_MB got no warning"
[ $status = 0 ] && echo "PASS"
exit $status
