#!/bin/sh
# The counters reports: HAKMEM_STATS=1 prints a readable report,
# HAKMEM_STATS=json:PATH writes JSON with the counters the brief names,
# HAKMEM_WARM_POOL_STATS=1 prints the warm pool per class, and a malformed
# option gets one warning and the default.
set -u
build=${HAK_TEST_BUILD:?HAK_TEST_BUILD must name the build folder}
lib=$build/libhakmem.so
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
work='import threading
def churn():
    d = {i: str(i) * (i % 50) for i in range(20000)}
    return sum(len(v) for v in d.values())
big = [bytearray(100000 + 5000 * i) for i in range(40)]
huge = bytearray(3 << 20); del huge
del big[::2]
ts = [threading.Thread(target=churn) for _ in range(4)]
[t.start() for t in ts]; [t.join() for t in ts]
print(churn())'

HAKMEM_STATS=1 LD_PRELOAD=$lib python3 -c "$work" >/dev/null 2>"$tmp/text" || fail "python3 under HAKMEM_STATS=1"
for word in "statistics" "memory: mapped" "Large [0-9]* KiB (peak" "locks (per million" "superslabs:" "remote_frees" "st2 warm" "carved" "in its L2 / L2.5 rings" "span heap (40 KiB to 1 MiB)"; do
  grep -q "$word" "$tmp/text" || fail "text report lacks '$word'"
done

HAKMEM_STATS=json:$tmp/s.json LD_PRELOAD=$lib python3 -c "$work" >/dev/null || fail "python3 under json stats"
python3 - "$tmp/s.json" <<'PY' || exit 1
import json, sys
s = json.load(open(sys.argv[1]))
need = ["bytes_mapped", "bytes_mapped_peak", "bytes_in_use", "bytes_in_use_peak", "superslabs",
        "remote_frees", "threads_exited", "hits", "misses", "stage_current", "stage_warm",
        "stage_shared", "stage_fresh", "warm_hits", "warm_misses", "warm_prefills", "class_size",
        "spills", "refills", "carved", "tls_bytes_per_thread", "tiny_cache_max_bytes_per_thread", "ring_max_bytes_per_thread", "bytes_purged", "purge_calls", "bytes_reused",
        "bytes_large", "bytes_large_peak", "bytes_large_cached", "allocator_calls", "locks"]
missing = [k for k in need if k not in s]
assert not missing, f"JSON lacks {missing}"
assert s["bytes_mapped_peak"] >= s["bytes_mapped"] > 0, "bytes mapped"
assert s["bytes_in_use_peak"] > 0, "bytes in use"
assert s["bytes_large_peak"] >= 3 << 20, f"bytes_large_peak {s['bytes_large_peak']}"
assert set(s["locks"]) == {"totals", "heaps", "pool", "span", "slot", "large", "user_heaps", "prof", "meta"}, f"locks {s['locks']}"
assert s["locks"]["pool"]["acquired"] > 0 and s["locks"]["span"]["acquired"] > 0, f"locks {s['locks']}"
assert all(l["contended"] <= l["acquired"] for l in s["locks"].values()), "contended <= acquired"
assert s["threads_exited"] >= 4, f"threads_exited {s['threads_exited']}"
assert sum(s["misses"]) > 0 and sum(s["stage_fresh"]) > 0 and sum(s["carved"]) > 0, "refill counters"
assert len(s["hits"]) == len(s["class_size"]), "per-class arrays"
assert set(s["superslabs"]) == {"hot", "draining", "empty"}, "superslab states"
sp = s["span"]
assert sp["free_bytes"] <= sp["run_bytes"] <= sp["mapped_bytes"] and sp["dirty_bytes"] <= sp["free_bytes"], f"span heap {sp}"
assert sp["mapped_bytes"] > 0 and sp["run_bytes"] >= 20 * 100000, f"the 20 live 100 KiB blocks are not in span runs: {sp}"
print("json report ok:", len(s), "keys")
PY

HAKMEM_WARM_POOL_STATS=1 LD_PRELOAD=$lib python3 -c "$work" >/dev/null 2>"$tmp/warm" || fail "warm pool stats run"
grep -q "warm pool (cap 16, prefill 3)" "$tmp/warm" || fail "warm pool report: $(cat "$tmp/warm")"
grep -q "hit rate" "$tmp/warm" || fail "warm pool report has no hit rate"

HAKMEM_WARM_POOL_CAP=lots LD_PRELOAD=$lib /bin/true 2>"$tmp/bad" || fail "malformed option crashed"
[ "$(grep -c 'HAKMEM_WARM_POOL_CAP=lots is not valid' "$tmp/bad")" = 1 ] || fail "malformed option warning: $(cat "$tmp/bad")"
HAKMEM_L2_RING_CAP=4096 HAKMEM_PRINT_OPTIONS=1 LD_PRELOAD=$lib /bin/true 2>"$tmp/clamp" || fail "clamped option crashed"
grep -q 'HAKMEM_L2_RING_CAP=4096 is outside' "$tmp/clamp" || fail "no clamp warning: $(cat "$tmp/clamp")"
grep -Eq '^HAKMEM_L2_RING_CAP +([0-9]+) +\1 +1\.\.\1 ' "$tmp/clamp" || fail "L2 ring cap not clamped to the build maximum: $(grep L2_RING "$tmp/clamp")"
# Options print as users type them: words, lists, json:PATH.
HAKMEM_INVALID_FREE=ignore HAKMEM_L2_RING_CAPS=24,,32 HAKMEM_STATS=json:$tmp/p.json HAKMEM_PRINT_OPTIONS=1 \
  LD_PRELOAD=$lib /bin/true 2>"$tmp/typed" || fail "typed options run"
grep -Eq '^HAKMEM_INVALID_FREE +abort +ignore +abort\|ignore ' "$tmp/typed" || fail "INVALID_FREE not printed as a word: $(grep INVALID "$tmp/typed")"
grep -Eq '^HAKMEM_L2_RING_CAPS +- +24,,32 ' "$tmp/typed" || fail "list not printed as typed: $(grep L2_RING_CAPS "$tmp/typed")"
grep -Eq "^HAKMEM_STATS +0 +json:$tmp/p.json +0\|1\|json:PATH " "$tmp/typed" || fail "STATS path not printed: $(grep HAKMEM_STATS "$tmp/typed")"
HAKMEM_INVALID_FREE=maybe HAKMEM_L25_RING_CAPS=8,x LD_PRELOAD=$lib /bin/true 2>"$tmp/badword" || fail "bad word crashed"
grep -q 'HAKMEM_INVALID_FREE=maybe is not valid (abort|ignore); using abort' "$tmp/badword" || fail "bad word warning: $(cat "$tmp/badword")"
grep -q 'HAKMEM_L25_RING_CAPS=8,x is not valid' "$tmp/badword" || fail "bad list warning: $(cat "$tmp/badword")"
echo "stats and options ok"
