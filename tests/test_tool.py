#!/usr/bin/env python3
"""Checks the benchmark programs and the `hakmem` tool (tools/hakmem):
  1. its statistics against values worked out by hand;
  2. its verdicts on synthetic samples (identical -> never GO, +5% -> GO, +0.5% -> NO-GO);
  3. every benchmark program in a short smoke run under glibc and under hakmem;
  4. the commands run, options, ab (3 runs) and bench --quick (one benchmark).
Run by tests/run.sh with HAK_TEST_BUILD=/abs/path/to/build. Checks behaviour, never timing.
Ends with "N passed, N failed"; exits non-zero when a check failed."""

import importlib.machinery
import importlib.util
import json
import math
import os
import random
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TOOL_PATH = ROOT / "tools" / "hakmem"
BUILD = Path(os.environ.get("HAK_TEST_BUILD", ROOT / "build"))
BENCH = BUILD / "bench"


def load_tool():
    loader = importlib.machinery.SourceFileLoader("hakmem_tool", str(TOOL_PATH))
    spec = importlib.util.spec_from_loader("hakmem_tool", loader)
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    return module


tool = load_tool()
results = {"passed": 0, "failed": 0}


def check(name, condition, detail=""):
    results["passed" if condition else "failed"] += 1
    shown = f": {detail}" if detail and not condition else ""
    print(f"{'PASS' if condition else 'FAIL'} {name}{shown}")


def close(x, y, tolerance=1e-9):
    return abs(x - y) <= tolerance * max(1.0, abs(y))


def run_tool(*args, timeout=300):
    return subprocess.run([sys.executable, str(TOOL_PATH), *args], capture_output=True, text=True,
                          timeout=timeout, cwd=ROOT)


# ---- 1. statistics by hand -----------------------------------------------------------

def check_statistics():
    xs = [2, 4, 4, 4, 5, 5, 7, 9]
    # mean = 40 / 8 = 5; median = (4 + 5) / 2 = 4.5
    check("mean of 2 4 4 4 5 5 7 9 is 5", close(tool.mean(xs), 5.0))
    check("median of 2 4 4 4 5 5 7 9 is 4.5", close(tool.median(xs), 4.5))
    # squared deviations 9+1+1+1+0+0+4+16 = 32; sample variance 32/7; stddev sqrt(32/7) = 2.1380899
    check("sample stddev is sqrt(32/7)", close(tool.stddev(xs), math.sqrt(32 / 7)))
    check("stddev value 2.1380899", abs(tool.stddev(xs) - 2.1380899) < 1e-6)
    # CV = 2.1380899 / 5 = 0.42761799
    check("CV is stddev / mean = 0.4276180", abs(tool.cv(xs) - 0.4276180) < 1e-6)
    check("stddev of one value is 0", tool.stddev([3.0]) == 0.0)
    # throughput: 105 / 100 - 1 = +5%; time: 2.0 / 1.6 - 1 = +25% (B is 25% faster)
    check("gain of B over A, throughput", close(tool.gain([100, 100], [105, 105]), 0.05))
    check("gain of B over A, time", close(tool.gain([2.0, 2.0], [1.6, 1.6], False), 0.25))

    # a = 1 2 3, b = 4 5 6: C(6,3) = 20 splits; observed |2 - 5| = 3. A split whose first
    # group sums to s has |s/3 - (21-s)/3| = |2s - 21| / 3 >= 3 only for s = 6 ({1,2,3})
    # or s = 15 ({4,5,6}): p = 2 / 20 = 0.1.
    p, method = tool.permutation_test([1, 2, 3], [4, 5, 6])
    check("exact permutation p of 1 2 3 vs 4 5 6 is 0.1", close(p, 0.1), f"p={p}")
    check("permutation test says it is exact", "exact" in method, method)
    # a = 1 2, b = 3 4: 6 splits with sums 3 4 5 5 6 7; |s - 5| >= 2 for s = 3 and 7: p = 1/3
    p, _ = tool.permutation_test([1, 2], [3, 4])
    check("exact permutation p of 1 2 vs 3 4 is 1/3", close(p, 1 / 3), f"p={p}")
    p, method = tool.permutation_test([1, 2, 3], [4, 5, 6], exact_limit=0)
    check("Monte-Carlo permutation p is near the exact 0.1", abs(p - 0.1) < 0.01, f"p={p}")
    check("Monte-Carlo permutation says so", "Monte-Carlo" in method, method)

    # constant samples: every resample has gain 110/100 - 1 = 0.1 exactly
    low, high = tool.bootstrap_ci([100] * 5, [110] * 5)
    check("bootstrap CI of constant samples is [0.1, 0.1]", close(low, 0.1) and close(high, 0.1))
    rng = random.Random(7)
    a = [100 + rng.gauss(0, 2) for _ in range(10)]
    b = [103 + rng.gauss(0, 2) for _ in range(10)]
    low, high = tool.bootstrap_ci(a, b)
    check("bootstrap CI holds the point gain", low <= tool.gain(a, b) <= high, f"{low} {high}")
    check_welch()


def check_welch():
    """Welch's t on 1 2 3 vs 4 5 6: t = -3 / sqrt(1/3 + 1/3) = -3.674, df = 4, p = 0.02131."""
    code = ("import importlib.machinery as m; t = m.SourceFileLoader('t', %r).load_module(); "
            "print(t.welch_test([1, 2, 3], [4, 5, 6]))" % str(TOOL_PATH))
    for python in [sys.executable, "/usr/bin/python3"]:
        if not Path(python).exists():
            continue
        out = subprocess.run([python, "-c", code], capture_output=True, text=True).stdout.strip()
        if out and out != "None":
            check(f"Welch t-test p = 0.02131 (scipy in {python})",
                  abs(float(out) - 0.021312) < 1e-5, out)
            return
    print("SKIP Welch t-test: no python3 with scipy here (the permutation test is used)")


def check_parsing():
    line = "noise\nbench=larson ops_per_sec=1500 peak_rss_kb=2048 seconds=0.5 duration=0.5 x=abc\n"
    fields = tool.parse_result_line(line)
    check("result line parsed into typed fields", fields == {
        "bench": "larson", "ops_per_sec": 1500, "peak_rss_kb": 2048, "seconds": 0.5,
        "duration": 0.5, "x": "abc"}, str(fields))
    perf = tool.parse_perf("# started\n123456,,instructions:u,1000,100.00,,\n"
                           "<not supported>,,cycles:u,0,100.00,,\n")
    check("perf stat -x, output parsed, uncounted events left out",
          perf == {"instructions": 123456.0}, str(perf))


def check_verdict_rules():
    cases = [  # gain, p, CI upper bound, expected
        (0.05, 0.001, 0.07, "GO"),
        (0.005, 0.001, 0.008, "NO-GO"),         # real but below the threshold
        (0.005, 0.40, 0.008, "NO-GO"),          # the CI rules out the threshold
        (0.005, 0.40, 0.030, "INCONCLUSIVE"),   # noise could hide a 1% gain
        (0.030, 0.20, 0.080, "INCONCLUSIVE"),   # big gain but not significant
        (-0.03, 0.01, -0.01, "NO-GO"),          # a significant loss
    ]
    for g, p, high, expected in cases:
        label, _ = tool.verdict(g, p, high, 0.01)
        check(f"verdict(gain {g:+.1%}, p {p}, CI high {high:+.1%}) is {expected}",
              label == expected, label)


# ---- 2. verdicts on synthetic samples ----------------------------------------------------

def samples(rng, center, relative_noise, n=10):
    return [center * (1 + rng.gauss(0, relative_noise)) for _ in range(n)]


def verdicts(shift, noise, seeds):
    labels = []
    for seed in range(seeds):
        rng = random.Random(seed)
        a = samples(rng, 40e6, noise)
        b = samples(rng, 40e6 * (1 + shift), noise)
        labels.append(tool.compare(a, b, 0.01)["verdict"])
    return labels


def check_synthetic_verdicts():
    labels = verdicts(0.0, 0.005, 60)
    check("identical distributions, 0.5% noise: never GO in 60 seeds", "GO" not in labels,
          f"{labels.count('GO')} GO")
    # With noise far above the threshold a GO needs p < 0.05 in the favourable direction:
    # at most alpha / 2 = 2.5% of identical pairs; allow 5% of 100 seeds.
    labels = verdicts(0.0, 0.03, 100)
    check("identical distributions, 3% noise: GO in at most 5 of 100 seeds",
          labels.count("GO") <= 5, f"{labels.count('GO')} GO")
    labels = verdicts(0.05, 0.005, 20)
    check("+5% shift, 0.5% noise: GO in all 20 seeds", labels.count("GO") == 20, str(labels))
    labels = verdicts(0.005, 0.002, 20)
    check("+0.5% shift, 0.2% noise: NO-GO in all 20 seeds", labels.count("NO-GO") == 20,
          str(labels))


# ---- 3. benchmark programs -----------------------------------------------------------------

SMOKE = [  # argv after the program, expected key=value pairs
    (["bench_random_mixed", "100000", "400"],
     {"bench": "random_mixed", "ops": 100000, "threads": 1}),
    (["bench_random_mixed", "5000", "64", "1", "1", "7"],
     {"bench": "random_mixed", "min": 1, "seed": 7}),
    (["bench_mid_large_mt", "2", "20000", "64"],
     {"bench": "mid_large_mt", "ops": 40000, "threads": 2}),
    (["larson", "0.1", "8", "1000", "500", "10", "4141", "2"], {"bench": "larson", "threads": 2}),
    (["bench_allocators", "--scenario", "mixed", "--iterations", "20000"],
     {"bench": "allocators", "scenario": "mixed", "ops": 20000}),
    (["bench_allocators", "--scenario", "mid64k", "--iterations", "20000"], {"scenario": "mid64k"}),
    (["bench_allocators", "--scenario", "large_realloc", "--iterations", "40"],
     {"scenario": "large_realloc", "ops": 40}),
    (["bench_allocators", "--scenario", "prodcons", "--iterations", "20000", "--threads", "2"],
     {"scenario": "prodcons", "threads": 4, "ops": 80000}),
]


def hakmem_library():
    library = BUILD / "libhakmem.so"
    if library.is_file() and tool.preload_works(str(library)):
        return str(library)
    print(f"SKIP runs under hakmem: {library} missing or not loadable")
    return None


def check_benchmarks(library):
    allocators = [("glibc", None)] + ([("hakmem", library)] if library else [])
    for name, preload in allocators:
        for argv, expected in SMOKE:
            outcome = tool.run_command([str(BENCH / argv[0])] + argv[1:], library=preload,
                                       timeout=120)
            fields = outcome.fields
            title = f"{' '.join(argv)} under {name}"
            check(f"{title}: exits 0", outcome.ok, f"{outcome.status} {outcome.stderr_tail}")
            wrong = {k: fields.get(k) for k, v in expected.items() if fields.get(k) != v}
            check(f"{title}: result line", not wrong and fields.get("ops_per_sec", 0) > 0
                  and fields.get("peak_rss_kb", 0) > 0, f"{wrong} in {fields}")
        larson = tool.run_command([str(BENCH / "larson"), "0.2", "8", "1000", "200", "5", "1", "2"],
                                  library=preload)
        check(f"larson under {name} hands slots to new generations",
              larson.fields.get("generations", 0) > 2, str(larson.fields))


def check_bad_arguments():
    for argv in (["bench_random_mixed"], ["bench_random_mixed", "ten", "400"],
                 ["bench_mid_large_mt", "0", "10", "10"], ["larson", "1", "8"],
                 ["bench_allocators", "--scenario", "nosuch"]):
        done = subprocess.run([str(BENCH / argv[0])] + argv[1:], capture_output=True, text=True)
        check(f"{' '.join(argv)}: usage error, exit 2",
              done.returncode == 2 and "usage" in done.stderr, f"exit {done.returncode}")


# ---- 4. the hakmem commands ----------------------------------------------------------------

def check_run_command(library):
    done = run_tool("run", "--build", str(BUILD), "--", "sh", "-c", 'echo "$LD_PRELOAD"; exit 3')
    check("hakmem run passes the exit code through", done.returncode == 3,
          f"exit {done.returncode}")
    check("hakmem run preloads libhakmem.so", "libhakmem.so" in done.stdout, done.stdout)
    done = run_tool("run", "--build", str(BUILD), "--stats", "--",
                    str(BENCH / "bench_random_mixed"), "20000", "100")
    check("hakmem run --stats prints the counters at exit",
          done.returncode == 0 and "bench=random_mixed" in done.stdout and done.stderr.strip(),
          f"exit {done.returncode}, stderr {done.stderr[:200]!r}")
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "stats.json"
        done = run_tool("run", "--build", str(BUILD), f"--stats=json:{path}", "--",
                        str(BENCH / "bench_random_mixed"), "20000", "100")
        try:
            json.loads(path.read_text())
            valid = True
        except (OSError, ValueError) as error:
            valid = False
            done.stderr += str(error)
        check("hakmem run --stats=json:PATH writes JSON", done.returncode == 0 and valid,
              done.stderr[-300:])


def check_options_command():
    done = run_tool("options", "--build", str(BUILD))
    check("hakmem options lists HAKMEM_ options", done.returncode == 0 and "HAKMEM_" in done.stdout,
          f"exit {done.returncode}: {done.stderr.strip()[:300]}")


def check_ab_command(library, tmp):
    json_path = Path(tmp) / "ab.json"
    b_lib = "hakmem" if library else "glibc"
    done = run_tool("ab", "--build", str(BUILD), "--runs", "3", "--a-lib", "glibc",
                    "--b-lib", b_lib, "--a", "HAKMEM_STATS=0", "--out", str(Path(tmp) / "ab"),
                    "--json", str(json_path), "--", str(BENCH / "bench_random_mixed"),
                    "200000", "400")
    check("hakmem ab exits 0", done.returncode == 0, done.stderr[-500:])
    report = json.loads(json_path.read_text()) if json_path.exists() else {}
    comparison = report.get("comparison") or {}
    check("hakmem ab measures ops_per_sec", report.get("metric") == "ops_per_sec",
          str(report.get("metric")))
    check("hakmem ab ran A B A B A B",
          [r["config"] for r in report.get("runs", [])] == list("ABABAB"))
    check("hakmem ab reports the statistics",
          all(k in comparison.get("a", {})
              for k in ("mean", "median", "min", "max", "stddev", "cv"))
          and len(comparison.get("ci", [])) == 2 and 0 <= comparison.get("p_value", -1) <= 1)
    check("hakmem ab gives a verdict", report.get("verdict") in ("GO", "NO-GO", "INCONCLUSIVE"))
    check("hakmem ab prints Markdown", "**Verdict:" in done.stdout and "| CV |" in done.stdout)
    check("hakmem ab writes into its results folder",
          (Path(tmp) / "ab" / "ab.md").exists() and (Path(tmp) / "ab" / "ab.json").exists())
    check("hakmem ab settings reach the runs", report.get("configs", {}).get("A", {})
          .get("settings") == {"HAKMEM_STATS": "0"})

    done = run_tool("ab", "--runs", "3", "--a-lib", "glibc", "--b-lib", "glibc", "--perf",
                    "--out", str(Path(tmp) / "ab-time"), "--", "true")
    report = json.loads((Path(tmp) / "ab-time" / "ab.json").read_text())
    check("hakmem ab falls back to wall time", done.returncode == 0
          and report["metric"] == "wall_seconds" and report["higher_is_better"] is False)
    perf = report["perf"]
    check("hakmem ab --perf counts or says perf unavailable",
          ("perf unavailable" in done.stdout) if perf["unavailable"]
          else "instructions" in perf["medians"]["A"], done.stdout[-400:])


def check_bench_command(tmp):
    out = Path(tmp) / "bench"
    done = run_tool("bench", "--build", str(BUILD), "--quick", "--bench", "random_mixed",
                    "--out", str(out))
    check("hakmem bench --quick exits 0", done.returncode == 0, done.stderr[-500:])
    report = json.loads((out / "runs.json").read_text()) if (out / "runs.json").exists() else {}
    names = [a["name"] for a in report.get("allocators", [])]
    check("hakmem bench includes glibc", "glibc" in names, str(names))
    check("hakmem bench ran 3 rounds of every allocator",
          len(report.get("runs", [])) == 3 * len(names) and names, str(len(report.get("runs", []))))
    check("hakmem bench runs all succeeded",
          all(r["status"] == "ok" for r in report.get("runs", [])))
    markdown = (out / "results.md").read_text() if (out / "results.md").exists() else ""
    check("hakmem bench writes the Markdown table", "| random_mixed | glibc |" in markdown
          and "bench_random_mixed 2000000 400" in markdown)
    check("hakmem bench draws a chart or says how to get one",
          (out / "chart.png").exists() or "no chart" in done.stderr)
    check("hakmem bench shows progress on stderr", "round 3/3" in done.stderr)
    done = run_tool("bench", "--build", str(BUILD), "--bench", "nosuch", "--out", str(out / "x"))
    check("hakmem bench rejects an unknown benchmark",
          done.returncode == 2 and "unknown" in done.stderr)


def check_trim_step(library):
    """The trim step of `hakmem bench`: bench_trim once per allocator, one table row each."""
    allocators = [tool.Allocator("glibc")] + ([tool.Allocator("hakmem", library)] if library else [])
    trim = tool.run_trim(BENCH, allocators, True, 120)
    rows = {row["allocator"]: row for row in trim["rows"]}
    check("bench_trim ran under every allocator", all(r["status"] == "ok" for r in rows.values()),
          str(trim["rows"]))
    for name, row in rows.items():
        if row["status"] != "ok":
            continue
        check(f"bench_trim under {name} reports the peak above the start",
              row["rss_peak_kb"] > row["rss_before_kb"] + 50 * 1024, str(row))
    if library and rows.get("hakmem", {}).get("status") == "ok":
        row = rows["hakmem"]
        check("hakmem gives the peak back at malloc_trim(0)",
              row["rss_trimmed_kb"] < row["rss_before_kb"] + 10 * 1024 and row["trim_returned"] == 1,
              str(row))
    table = "\n".join(tool.trim_table(trim))
    check("the trim table has a row per allocator",
          all(f"| {a.name} |" in table for a in allocators) and "after malloc_trim(0)" in table, table)


def main():
    check_statistics()
    check_parsing()
    check_verdict_rules()
    check_synthetic_verdicts()
    library = hakmem_library()
    check_benchmarks(library)
    check_bad_arguments()
    if library:
        check_run_command(library)
        check_options_command()
    check_trim_step(library)
    with tempfile.TemporaryDirectory() as tmp:
        check_ab_command(library, tmp)
        check_bench_command(tmp)
    print(f"{results['passed']} passed, {results['failed']} failed")
    return 1 if results["failed"] else 0


if __name__ == "__main__":
    sys.exit(main())
