#!/bin/sh
# Real programs under LD_PRELOAD=libhakmem.so: a python3 script, gcc compiling
# and linking a C file, git (init, add, commit, log, gc, fsck), two threaded
# ones (xz compressing and decompressing in 2 threads, sort merging in 2) and
# a C++ program (plain_cxx) must print the same stdout as without the preload,
# exit 0, and print no "hakmem:" diagnostic. Also checks that the preload really is active.
# A program that is not installed is skipped (with a SKIP line).
set -u
build=${HAK_TEST_BUILD:?HAK_TEST_BUILD must name the build folder}
lib=$build/libhakmem.so
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
failures=0
fail() { echo "FAIL: $*" >&2; failures=$((failures + 1)); }

# run_in_fresh_dir OUT_PREFIX SNIPPET [PRELOAD]: runs SNIPPET with sh in an
# empty $tmp/work (the same path for both runs, so outputs may contain it).
run_in_fresh_dir() {
  rm -rf "$tmp/work" && mkdir "$tmp/work"
  (cd "$tmp/work" && LD_PRELOAD=${3:-} sh -c "$2") >"$1.out" 2>"$1.err"
  echo $? >"$1.rc"
}

# compare NAME SNIPPET: same stdout with and without hakmem, status 0, no diagnostic.
compare() {
  plain=$tmp/$1.plain hak=$tmp/$1.hak
  run_in_fresh_dir "$plain" "$2"
  run_in_fresh_dir "$hak" "$2" "$lib"
  if [ "$(cat "$plain.rc")" != 0 ]; then
    fail "$1 fails even without hakmem (status $(cat "$plain.rc")):"; tail -n 5 "$plain.err" >&2
    return
  fi
  if [ "$(cat "$hak.rc")" != 0 ]; then
    fail "$1 under hakmem: exit status $(cat "$hak.rc")"; tail -n 5 "$hak.err" >&2
  fi
  if ! cmp -s "$plain.out" "$hak.out"; then
    fail "$1: stdout differs under hakmem"; diff "$plain.out" "$hak.out" | head -n 10 >&2
  fi
  if grep -q 'hakmem:' "$hak.err"; then
    fail "$1: hakmem diagnostic:"; grep 'hakmem:' "$hak.err" | head -n 3 >&2
  fi
  [ -s "$plain.out" ] || fail "$1 printed nothing"
  echo "checked $1: $(wc -l <"$plain.out") lines of output"
}

installed() { command -v "$1" >/dev/null 2>&1 || { echo "SKIP $1: not installed"; return 1; }; }

cat >"$tmp/script.py" <<'EOF'
import hashlib, json, random
random.seed(1)
d = {"key%d" % i: [i, str(i * 7), {"v": random.random()}] for i in range(200000)}
items = sorted(d.items(), key=lambda kv: (kv[1][2]["v"], kv[0]))
text = json.dumps(items)
back = json.loads(text)
words = [w.upper() for w in text[:2000000].split('"') if w]
print(len(d), len(back), len(words), len(text))
print(hashlib.sha256(text.encode()).hexdigest())
EOF

cat >"$tmp/prog.c" <<'EOF'
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
static int cmp(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }
int main(void) {
    enum { N = 20000 };
    char **v = malloc(N * sizeof *v);
    unsigned long h = 5381;
    for (int i = 0; i < N; i++) { v[i] = malloc(32); snprintf(v[i], 32, "item-%d", (i * 7919) % N); }
    qsort(v, N, sizeof *v, cmp);
    for (int i = 0; i < N; i++) { for (char *c = v[i]; *c; c++) h = h * 33 + (unsigned char)*c; free(v[i]); }
    free(v);
    printf("%lu\n", h);
    return 0;
}
EOF

if installed python3; then
  py=$(python3 -c 'import sys; print(sys.executable)')
  compare python3 "'$py' '$tmp/script.py'"
fi

if installed gcc; then
  compare gcc "cp '$tmp/prog.c' . && gcc -O2 -S -o - prog.c | cksum && gcc -O2 -Wall -o prog prog.c && ./prog"
fi

if installed git; then
  compare git "
    export HOME=\$PWD GIT_CONFIG_NOSYSTEM=1
    export GIT_AUTHOR_DATE='2020-01-01T00:00:00Z' GIT_COMMITTER_DATE='2020-01-01T00:00:00Z'
    g() { git -c user.name=hakmem -c user.email=hakmem@example.org -c init.defaultBranch=main \"\$@\"; }
    g init -q repo && cd repo || exit 1
    for i in 1 2 3 4 5 6 7 8 9 10; do
      seq 1 \$((i * 1000)) >file\$i.txt && cp '$tmp/prog.c' prog\$i.c && g add . && g commit -q -m \"commit \$i\" || exit 1
    done
    g log --format='%H %s' && g log -p | cksum && g gc -q && g fsck --no-progress && g status --short"
fi

# Threads that allocate and free each other's buffers: xz's workers take
# blocks (256 KiB, so that 2 MiB of input makes 8) from the main thread and
# hand back their output; sort (its whole input in one buffer) sorts the two
# halves in two threads and merges them.
if installed xz; then
  compare xz "seq 1 300000 | xz -T2 --block-size=256KiB -6 | xz -d -T2 | cksum"
fi
compare sort "seq 1 300000 | awk '{ print (\$1 * 7919) % 100003, \$1 }' | sort -n -k1,1 -k2,2 --parallel=2 -S 64M | cksum"

compare cxx "'$build/tests/plain_cxx'"
grep -q 'bad_alloc ok' "$tmp/cxx.hak.out" || fail "cxx: huge new did not throw std::bad_alloc under hakmem"

# The preload is really active: HAKMEM_STATS=1 makes hakmem report on stderr at exit.
HAKMEM_STATS=1 LD_PRELOAD=$lib "$build/tests/plain_cxx" >/dev/null 2>"$tmp/stats.err"
grep -qi 'hakmem' "$tmp/stats.err" || fail "HAKMEM_STATS=1 under LD_PRELOAD printed no hakmem report"

if [ "$failures" -ne 0 ]; then echo "$failures failures"; exit 1; fi
echo "all programs ok"
