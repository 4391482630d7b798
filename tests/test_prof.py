#!/usr/bin/env python3
"""The heap profiler (HAKMEM_PROF, src/prof.c) and `hakmem prof` (tools/hakmem_tool/prof.py),
with tests/plain_prof.c: site_big allocates 100 MiB, site_small 10 MiB (64 B, 4 KiB and
a few large blocks). For the program preloaded (built by the Makefile, and here at -O2
with and without frame pointers) and linked (-lhakmem, and libhakmem.a):
  1. the profile written at exit shows site_big first and site_small second by live and
     by total bytes, each within 20% of the true bytes (1 sample per 16 KiB: a few
     hundred samples at the small site, so 20% is several standard deviations);
Then, preloaded: 2. HAKMEM_PROF=leaks reports site_small's leaked blocks (about 10 MiB)
and not site_big's freed ones; 3. HAKMEM_PROF_SIGNAL=SIGUSR2 writes FILE.1; 4.
hak_prof_dump(path) writes path, and fails with profiling off; 5. profiling off writes
no file; 6. blocks allocated and freed again and again (through the thread's cache) are
counted in the total bytes, not in the live ones; 7. `hakmem prof FILE --folded OUT` prints both sites in order and writes folded
stacks. Run by tests/run.sh with HAK_TEST_BUILD=/abs/path/to/build. Ends with
"N passed, N failed"; exits non-zero when a check failed. The variants are built with
HAK_TEST_CC (default cc; make test-clang and test-musl set their compiler). With
HAK_TEST_LIBC=musl (make test-musl) they all have frame pointers, which the profiler
walks where the C library has no backtrace()."""

import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BUILD = Path(os.environ.get("HAK_TEST_BUILD", ROOT / "build"))
SOURCE = ROOT / "tests" / "plain_prof.c"
sys.path.insert(0, str(ROOT / "tools"))

from hakmem_tool import prof  # noqa: E402

MIB = 1 << 20
SAMPLE = "16384"
results = {"passed": 0, "failed": 0}


def check(name, condition, detail=""):
    results["passed" if condition else "failed"] += 1
    shown = f": {detail}" if detail and not condition else ""
    print(f"{'PASS' if condition else 'FAIL'} {name}{shown}")


def true_bytes(total):
    """What allocate_mix (plain_prof.c) requests for total bytes."""
    large, page = total // 10, total * 3 // 10
    small = total - large - page
    ceil = lambda a, b: -(-a // b)   # noqa: E731
    return ceil(small, 64) * 64 + ceil(page, 4096) * 4096 + ceil(large, total // 20) * (total // 20)


BIG, SMALL = true_bytes(100 * MIB), true_bytes(10 * MIB)
SANITIZER = ["-fsanitize=undefined"] if "ubsan" in BUILD.name else []
MUSL = os.environ.get("HAK_TEST_LIBC") == "musl"
CC = os.environ.get("HAK_TEST_CC") or "cc"   # the build's compiler (make test-clang, test-musl)


def run(program, args, cwd, preload=True, **env_extra):
    env = {k: v for k, v in os.environ.items() if not k.startswith("HAKMEM_")}
    env.update(env_extra)
    if preload:
        env["LD_PRELOAD"] = str(BUILD / "libhakmem.so")
    return subprocess.run([str(program), *args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=120)


def compile_program(tmp, name, flags):
    out = tmp / name
    cmd = [CC, "-std=gnu11", "-D_GNU_SOURCE", "-g", f"-I{ROOT / 'include'}", *flags, *SANITIZER,
           str(SOURCE), "-o", str(out)]
    if "shared" in name:
        cmd += [f"-L{BUILD}", f"-Wl,-rpath,{BUILD}", "-lhakmem"]
    if "static" in name:
        cmd += [str(BUILD / "libhakmem.a")]
    cmd += ["-lpthread", "-ldl"]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    check(f"{name}: builds", done.returncode == 0, done.stderr[-500:])
    return out if done.returncode == 0 else None


def site_groups(path):
    profile = prof.Profile(str(path))
    symbolizer = prof.Symbolizer(profile.maps)
    symbolizer.resolve([a for s in profile.sites for a in s["frames"]])
    return prof.aggregate(profile, symbolizer)


def within(estimate, truth, share=0.2):
    return abs(estimate - truth) <= share * truth


def check_sites(name, path):
    """site_big, then site_small, by live and by total bytes, within 20%."""
    try:
        groups = site_groups(path)
    except Exception as error:    # noqa: BLE001 (reported as a failure)
        check(f"{name}: profile readable", False, repr(error))
        return
    def of(fn):
        return [g for g in groups if fn in g["stack"]]
    big, small = of("site_big"), of("site_small")
    check(f"{name}: both sites found", len(big) == 1 and len(small) == 1,
          str([(g["stack"][:4], g["live_bytes"]) for g in groups[:6]]))
    if len(big) != 1 or len(small) != 1:
        return
    if "inlined" in name:               # addr2line -i: the inlined function, then its holder
        check(f"{name}: the inlined function, then the site that holds it",
              big[0]["stack"][:2] == ["allocate_mix", "site_big"] and
              small[0]["stack"][:2] == ["allocate_mix", "site_small"],
              str([big[0]["stack"][:3], small[0]["stack"][:3]]))
    for key in ("live_bytes", "total_bytes"):
        order = sorted(groups, key=lambda g: -g[key])
        check(f"{name}: {key}: site_big first, site_small second",
              order[0] is big[0] and order[1] is small[0],
              str([(g["function"], g["callers"][:2], g[key]) for g in order[:4]]))
        check(f"{name}: {key}: site_big within 20% of {BIG}", within(big[0][key], BIG),
              str(big[0][key]))
        check(f"{name}: {key}: site_small within 20% of {SMALL}", within(small[0][key], SMALL),
              str(small[0][key]))


def check_profile_at_exit(name, program, tmp, preload):
    heap = tmp / f"{name}.heap"
    done = run(program, ["live"], tmp, preload, HAKMEM_PROF="1", HAKMEM_PROF_SAMPLE=SAMPLE,
               HAKMEM_PROF_FILE=str(heap))
    check(f"{name}: runs", done.returncode == 0 and done.stdout.startswith("ok"), done.stderr[-500:])
    check(f"{name}: profile written at exit", heap.is_file())
    if heap.is_file():
        check_sites(name, heap)


def check_leaks(program, tmp):
    done = run(program, ["leak"], tmp, HAKMEM_PROF="leaks", HAKMEM_PROF_SAMPLE=SAMPLE)
    check("leaks: runs", done.returncode == 0, done.stderr[-500:])
    head = re.search(r"leak report: (\d+) sites? .*~(\d+) bytes in ~(\d+) blocks", done.stderr)
    check("leaks: report on stderr", head is not None, done.stderr[-500:])
    if head:
        check(f"leaks: about site_small's {SMALL} bytes leaked (within 20%)",
              within(int(head.group(2)), SMALL), head.group(0))
    frames = re.findall(r"#\d+ (0x[0-9a-f]+)", done.stderr)
    check("leaks: sites listed with their frames", len(frames) >= 2, done.stderr[-500:])
    check("leaks: no profile file unless asked", not list(tmp.glob("hakmem-prof.*")))


def check_signal_and_dump(program, tmp):
    heap = tmp / "signal.heap"
    done = run(program, ["signal"], tmp, HAKMEM_PROF="1", HAKMEM_PROF_SAMPLE=SAMPLE,
               HAKMEM_PROF_SIGNAL="SIGUSR2", HAKMEM_PROF_FILE=str(heap))
    check("signal: runs", done.returncode == 0, done.stderr[-500:])
    numbered = Path(f"{heap}.1")
    check("signal: FILE.1 written on SIGUSR2", numbered.is_file())
    if numbered.is_file():
        check_sites("signal dump", numbered)
    dumped = tmp / "explicit.heap"
    done = run(program, ["dump", str(dumped)], tmp, HAKMEM_PROF="1", HAKMEM_PROF_SAMPLE=SAMPLE,
               HAKMEM_PROF_FILE=str(tmp / "at-exit.heap"))
    check("hak_prof_dump: returns 0", done.returncode == 0, done.stderr[-500:])
    check("hak_prof_dump: writes its path", dumped.is_file())
    if dumped.is_file():
        check_sites("hak_prof_dump", dumped)
    off = tmp / "off"
    off.mkdir()
    done = run(program, ["dump", str(off / "x.heap")], off)
    check("profiling off: hak_prof_dump fails", done.returncode == 1, done.stdout + done.stderr)
    done = run(program, ["live"], off, HAKMEM_PROF_FILE=str(off / "y.heap"))
    check("profiling off: runs and writes no file", done.returncode == 0 and not list(off.iterdir()),
          str(list(off.iterdir())))


def check_churn(program, tmp):
    heap = tmp / "churn.heap"
    done = run(program, ["churn"], tmp, HAKMEM_PROF="1", HAKMEM_PROF_SAMPLE=SAMPLE,
               HAKMEM_PROF_FILE=str(heap))
    check("churn: runs", done.returncode == 0, done.stderr[-500:])
    if not heap.is_file():
        check("churn: profile written", False)
        return
    churn = [g for g in site_groups(heap) if "site_churn" in g["stack"]]
    check("churn: site found", len(churn) == 1)
    if churn:
        check(f"churn: total within 20% of {64 * MIB}", within(churn[0]["total_bytes"], 64 * MIB),
              str(churn[0]["total_bytes"]))
        check("churn: nothing live", churn[0]["live_bytes"] < MIB, str(churn[0]["live_bytes"]))


def check_tool(tmp):
    heap = tmp / "preload-O1.heap"
    if not heap.is_file():
        check("hakmem prof: a profile to read", False)
        return
    folded = tmp / "folded.txt"
    done = subprocess.run([sys.executable, str(ROOT / "tools" / "hakmem"), "prof", str(heap),
                           "--folded", str(folded)], capture_output=True, text=True, timeout=300)
    check("hakmem prof: exit 0", done.returncode == 0, done.stderr[-500:])
    live = done.stdout.split("Top sites by live bytes", 1)[-1].split("Top sites by total", 1)[0]
    check("hakmem prof: site_big listed before site_small",
          "site_big" in live and "site_small" in live and live.index("site_big") < live.index("site_small"),
          done.stdout[-1500:])
    check("hakmem prof: both tables printed", "Top sites by total allocated bytes" in done.stdout)
    lines = folded.read_text().splitlines() if folded.is_file() else []
    ok = lines and all(re.fullmatch(r"\S+ \d+", line) for line in lines)
    check("hakmem prof --folded: 'frame;frame;... bytes' lines", bool(ok), "\n".join(lines[:5]))
    check("hakmem prof --folded: main;site_big;... stacks",
          any(";site_big;" in line or line.split()[0].endswith(";site_big") for line in lines) and
          any("main;site_small" in line for line in lines), "\n".join(lines[:5]))
    bad = tmp / "bad.heap"
    bad.write_text("not a profile\n")
    done = subprocess.run([sys.executable, str(ROOT / "tools" / "hakmem"), "prof", str(bad)],
                          capture_output=True, text=True, timeout=60)
    check("hakmem prof: a file that is no profile is refused", done.returncode == 2, done.stderr)
    # A frame in none of the recorded mappings (a walk gone wrong): named by its address.
    lost = tmp / "lost.heap"
    lost.write_text("hakmem-prof 1\nsample_bytes 16384\npid 1\n"
                    "site 65536 4 65536 4 4 4 0x10 0x20\nmaps\n"
                    "7f0000000000-7f0000001000 r-xp 00000000 00:00 0 /nonexistent\n")
    done = subprocess.run([sys.executable, str(ROOT / "tools" / "hakmem"), "prof", str(lost)],
                          capture_output=True, text=True, timeout=60)
    check("hakmem prof: frames outside every mapping are named by their address",
          done.returncode == 0 and "0x10 < 0x20" in done.stdout, done.stdout[-500:] + done.stderr[-500:])


def main():
    tmp = Path(tempfile.mkdtemp(prefix="hakmem-prof-test."))
    try:
        plain = BUILD / "tests" / "plain_prof"
        check("plain_prof built", plain.is_file())
        if plain.is_file():
            check_profile_at_exit("preload-O1", plain, tmp, True)
        if shutil.which(CC):
            variants = [("preload-O2-frame-pointers", ["-O2", "-fno-omit-frame-pointer"], True),
                        ("preload-O2-no-frame-pointers", ["-O2", "-fomit-frame-pointer"], True),
                        ("preload-O2-inlined", ["-O2", "-DPLAIN_PROF_INLINE=1"], True),
                        ("linked-shared", ["-O2"], False), ("linked-static", ["-O2"], False)]
            if MUSL:                    # the frame-pointer walk sees frame pointers only
                variants = [(name, flags + ["-fno-omit-frame-pointer"], preload)
                            for name, flags, preload in variants if "no-frame-pointers" not in name]
            for name, flags, preload in variants:
                program = compile_program(tmp, name, flags)
                if program:
                    check_profile_at_exit(name, program, tmp, preload)
        if plain.is_file():
            check_leaks(plain, tmp)
            check_signal_and_dump(plain, tmp)
            check_churn(plain, tmp)
            check_tool(tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"{results['passed']} passed, {results['failed']} failed")
    return 1 if results["failed"] else 0


if __name__ == "__main__":
    sys.exit(main())
