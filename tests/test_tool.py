#!/usr/bin/env python3
"""Checks the benchmark programs and the `hakmem` tool (tools/hakmem, package tools/hakmem_tool):
  1. its statistics against values worked out by hand;
  2. its verdicts on synthetic pairs (identical -> never GO, +5% -> GO, +0.5% -> NO-GO);
  3. every benchmark program in a short smoke run under glibc and under hakmem;
  4. the runner's measurements (wait4), the program suite's wiring with a small program
     of its own (sort), the suite's sh row on its quick input, and the one table of both suites;
  5. the commands run, options, ab (3 pairs), ab --aa, ab over several programs, bench --quick
     (one benchmark), pairs, and the launcher of an installed copy.
Run by tests/run.sh with HAK_TEST_BUILD=/abs/path/to/build. Checks behaviour, never timing.
Ends with "N passed, N failed"; exits non-zero when a check failed."""

import json
import math
import os
import random
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TOOL_PATH = ROOT / "tools" / "hakmem"
BUILD = Path(os.environ.get("HAK_TEST_BUILD", ROOT / "build"))
BENCH = BUILD / "bench"
sys.path.insert(0, str(ROOT / "tools"))

from hakmem_tool import ab, allocators, bench, cli, report, runner, stats, suites  # noqa: E402

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
    check("mean of 2 4 4 4 5 5 7 9 is 5", close(stats.mean(xs), 5.0))
    check("median of 2 4 4 4 5 5 7 9 is 4.5", close(stats.median(xs), 4.5))
    # squared deviations 9+1+1+1+0+0+4+16 = 32; sample variance 32/7; stddev sqrt(32/7) = 2.1380899
    check("sample stddev is sqrt(32/7)", close(stats.stddev(xs), math.sqrt(32 / 7)))
    check("stddev value 2.1380899", abs(stats.stddev(xs) - 2.1380899) < 1e-6)
    # CV = 2.1380899 / 5 = 0.42761799
    check("CV is stddev / mean = 0.4276180", abs(stats.cv(xs) - 0.4276180) < 1e-6)
    check("stddev of one value is 0", stats.stddev([3.0]) == 0.0)
    # geometric mean of 1, 4, 16 = (64) ^ (1/3) = 4
    check("geomean of 1 4 16 is 4", close(stats.geomean([1, 4, 16]), 4.0))
    # throughput: ln(105 / 100); time: ln(2.0 / 1.6) (B is 25% faster)
    d = stats.log_ratios([100], [105]) + stats.log_ratios([2.0], [1.6], False)
    check("log ratios: ln(105/100) for a throughput, ln(2.0/1.6) for a time",
          close(d[0], math.log(1.05)) and close(d[1], math.log(1.25)), str(d))
    check("midranks share tied ranks", stats.midranks([3, 1, 3, 2]) == [3.5, 1, 3.5, 2])
    check_wilcoxon()
    check_hodges_lehmann()


def check_wilcoxon():
    """Exact two-sided p-values of the signed-rank test, counted by hand over the 2^n
    equally likely sign choices."""
    # 1..5 all positive: W+ = 15 is reached by 1 of 32 choices, as extreme below: p = 2/32
    check("Wilcoxon p of 1..5 all positive is 2/32",
          close(stats.wilcoxon_signed_rank([1, 2, 3, 4, 5]), 2 / 32))
    # -1, 2..6: W+ = 20 of 21; W+ >= 20 by {all} and {all but 1}: 2 of 64; p = 4/64
    check("Wilcoxon p of -1 2 3 4 5 6 is 4/64",
          close(stats.wilcoxon_signed_rank([-1, 2, 3, 4, 5, 6]), 4 / 64))
    # zeros are dropped: 0 0 1 2 3 is 1 2 3, W+ = 6 of 6: p = 2/8
    check("Wilcoxon drops zeros", close(stats.wilcoxon_signed_rank([0, 0, 1, 2, 3]), 2 / 8))
    # ties: |d| = 1 1 2 -> midranks 1.5 1.5 3; d = 1 -1 2: W+ = 4.5 of 6; sign choices give
    # W+ in {0, 1.5, 1.5, 3, 3, 4.5, 4.5, 6}: P(W+ >= 4.5) = 3/8, p = 6/8
    check("Wilcoxon with tied ranks", close(stats.wilcoxon_signed_rank([1, -1, 2]), 6 / 8))
    check("Wilcoxon of nothing but zeros is 1", stats.wilcoxon_signed_rank([0, 0]) == 1.0)
    # symmetric values: p = 1 (the smaller tail is more than half)
    check("Wilcoxon of -2 -1 1 2 is 1", close(stats.wilcoxon_signed_rank([-2, -1, 1, 2]), 1.0))
    rng = random.Random(3)
    d = [rng.gauss(0, 1) for _ in range(70)]  # past the exact limit: normal approximation
    p = stats.wilcoxon_signed_rank(d)
    check("Wilcoxon normal approximation gives a p-value in (0, 1]", 0 < p <= 1, str(p))


def check_hodges_lehmann():
    # 1..10: Walsh averages 1, 1.5, 2, 2, 2.5, 2.5, 3, 3, 3, ...; median 5.5. For n = 10,
    # P(W+ <= 8) = 25/1024 <= 0.025 < P(W+ <= 9) = 33/1024, so k = 9: [w_9, w_47] = [3, 8].
    estimate, low, high = stats.hodges_lehmann(list(range(1, 11)))
    check("Hodges-Lehmann of 1..10 is 5.5 in [3, 8]",
          (estimate, low, high) == (5.5, 3.0, 8.0), str((estimate, low, high)))
    # n = 3 cannot reach 95%: the interval is the whole range of the averages
    check("Hodges-Lehmann interval of 3 values is their range",
          stats.hodges_lehmann([1, 2, 4])[1:] == (1, 4))
    # bursts: 20 pairs near +3% and two at -40%: the two are left out
    d_pairs = [100 * 1.03 ** (1 + 0.1 * (i % 3 - 1)) for i in range(20)] + [60, 60]
    comparison = stats.paired_compare([100] * 22, d_pairs, 0.01)
    check("paired_compare leaves the two burst pairs out", comparison["left_out"] == [20, 21],
          str(comparison["left_out"]))
    check("paired_compare finds +3% despite them", comparison["verdict"] == "GO"
          and abs(comparison["gain"] - 0.03) < 0.005, str(comparison["gain"]))


def check_parsing():
    line = "noise\nbench=larson ops_per_sec=1500 peak_rss_kb=2048 seconds=0.5 duration=0.5 x=abc\n"
    fields = runner.parse_result_line(line)
    check("result line parsed into typed fields", fields == {
        "bench": "larson", "ops_per_sec": 1500, "peak_rss_kb": 2048, "seconds": 0.5,
        "duration": 0.5, "x": "abc"}, str(fields))
    perf = runner.parse_perf("# started\n123456,,instructions:u,1000,100.00,,\n"
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
        label, _ = stats.verdict(g, p, high, 0.01)
        check(f"verdict(gain {g:+.1%}, p {p}, CI high {high:+.1%}) is {expected}",
              label == expected, label)


# ---- 2. verdicts on synthetic pairs -------------------------------------------------------

def samples(rng, center, relative_noise, n=20):
    return [center * (1 + rng.gauss(0, relative_noise)) for _ in range(n)]


def verdicts(shift, noise, seeds):
    labels = []
    for seed in range(seeds):
        rng = random.Random(seed)
        a = samples(rng, 40e6, noise)
        b = samples(rng, 40e6 * (1 + shift), noise)
        labels.append(stats.paired_compare(a, b, 0.01)["verdict"])
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
    if library.is_file() and allocators.preload_works(str(library)):
        return str(library)
    print(f"SKIP runs under hakmem: {library} missing or not loadable")
    return None


def check_benchmarks(library):
    allocators = [("glibc", None)] + ([("hakmem", library)] if library else [])
    for name, preload in allocators:
        for argv, expected in SMOKE:
            outcome = runner.run_command([str(BENCH / argv[0])] + argv[1:], library=preload,
                                       timeout=120)
            fields = outcome.fields
            title = f"{' '.join(argv)} under {name}"
            check(f"{title}: exits 0", outcome.ok, f"{outcome.status} {outcome.stderr_tail}")
            wrong = {k: fields.get(k) for k, v in expected.items() if fields.get(k) != v}
            check(f"{title}: result line", not wrong and fields.get("ops_per_sec", 0) > 0
                  and fields.get("peak_rss_kb", 0) > 0, f"{wrong} in {fields}")
        larson = runner.run_command([str(BENCH / "larson"), "0.2", "8", "1000", "200", "5", "1", "2"],
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


# ---- 4. the runner and the program suite ----------------------------------------------------

def check_runner(tmp):
    """wait4's figures, the process-group kill, and a program's own bench= figures."""
    ballast = bytearray(160 * 1024 * 1024)
    for i in range(0, len(ballast), 4096):
        ballast[i] = 1  # this process's peak is now above 160 MiB
    small = runner.run_command(["true"])
    check("a run's peak RSS is its own, not this Python's",
          small.ok and 0 < small.usage.peak_rss_kb < 32 * 1024, str(small.usage))
    del ballast
    code = "x = bytearray(48 * 1024 * 1024)\nfor i in range(0, len(x), 4096): x[i] = 1"
    big = runner.run_command([sys.executable, "-c", code])
    check("a run that touches 48 MiB has a peak RSS above 48 MiB and the minor faults",
          big.ok and big.usage.peak_rss_kb > 48 * 1024 and big.usage.minflt > 12 * 1024,
          str(big.usage))
    spin = runner.run_command(["sh", "-c", "i=0; while [ $i -lt 20000 ]; do i=$((i+1)); done"])
    check("CPU seconds are measured", spin.ok and spin.usage.cpu > 0
          and spin.usage.wall > 0, str(spin.usage))
    pid_file = Path(tmp) / "pid"
    slow = runner.run_command(["sh", "-c", f"sleep 30 & echo $! > {pid_file}; sleep 30"],
                              timeout=0.5)
    try:
        os.kill(int(pid_file.read_text()), 0)
        left = True
    except (ProcessLookupError, ValueError, OSError):
        left = False
    check("a timeout kills the run's whole process group", slow.status == "timeout"
          and not left, f"{slow.status}, left running: {left}")
    reported = runner.run_command(["sh", "-c", "echo bench=x seconds=2.5 peak_rss_kb=777 "
                                   "minflt=9 user_seconds=1.25 sys_seconds=0.5"])
    u = reported.usage
    check("a bench= line's figures replace the measured ones",
          (u.wall, u.peak_rss_kb, u.minflt, u.user, u.sys) == (2.5, 777, 9, 1.25, 0.5), str(u))
    status = runner.run_command(["sh", "-c", "kill -SEGV $$"])
    check("a crash is reported by its signal", status.status == "signal SIGSEGV", status.status)


class SortProgram:
    """A small program of the suite's interface: sort -n of generated numbers."""
    name, about, packages, threads = "sort", "sort -n of generated numbers", ("coreutils",), 1

    def __init__(self, wrong=False):
        self.wrong = wrong

    def missing(self):
        return None if shutil.which("sort") else "sort: apt-get install coreutils"

    def prepare(self, workdir, quick):
        rng = random.Random(1)
        numbers = [rng.randrange(10**6) for _ in range(2000 if quick else 20000)]
        (workdir / "input").write_text("".join(f"{n}\n" for n in numbers))
        (workdir / "reference").write_text("".join(f"{n}\n" for n in sorted(numbers)))

    def command(self, workdir, library):
        argv = ["sh", "-c", 'echo "preload=[$LD_PRELOAD]" >&2; exec sort -n "$1" '
                + ("-r" if self.wrong else ""), "sh", str(workdir / "input")]
        return argv, ({"LD_PRELOAD": library} if library else {})

    def check(self, workdir, stdout_path):
        if stdout_path.read_text() == (workdir / "reference").read_text():
            return None
        return "the numbers are not in order"


class MissingProgram(SortProgram):
    name = "absent"

    def missing(self):
        return "absent: not installed; apt-get install absent-package"


def check_program_suite(library, tmp):
    names = ["glibc"] + (["hakmem"] if library else [])
    chosen = [allocators.Allocator("glibc")] + ([allocators.Allocator("hakmem", library)]
                                                if library else [])
    items = []
    for program in (SortProgram(), SortProgram(wrong=True)):
        workdir = Path(tmp) / f"program-{len(items)}"
        workdir.mkdir()
        program.prepare(workdir, True)
        items.append(bench.ProgramItem(program, workdir))
    inherited = os.environ.get("LD_PRELOAD")
    os.environ["LD_PRELOAD"] = "libnothing-inherited.so"
    try:
        records = bench.run_rounds(items, chosen, 2, 60)
    finally:
        os.environ.pop("LD_PRELOAD")
        if inherited is not None:
            os.environ["LD_PRELOAD"] = inherited
    right = [r for r in records if r["benchmark"] == "sort" and not r["status"].startswith("wrong")]
    check("every program ran under every allocator twice", len(records) == 2 * 2 * len(names))
    check("a right output is a successful run",
          sum(r["status"] == "ok" for r in records) == 2 * len(names), str(records))
    check("a wrong output is a failed run", sum(r["status"] == "wrong output: the numbers are "
                                                "not in order" for r in records) == 2 * len(names))
    tails = [r["stderr_tail"] for r in records]
    copies = [r["stderr_tail"][len("preload=["):-1] for r in records if r["allocator"] == "hakmem"]
    check("the runner adds no LD_PRELOAD and drops the inherited one: the program sets its own",
          all(r["stderr_tail"] == "preload=[]" for r in records if r["allocator"] == "glibc")
          and all(t.startswith("preload=[") and t.endswith("]") for t in tails), str(tails))
    check("every run preloads a fresh copy of the library, removed after the run",
          all(Path(c).name == Path(library).name and Path(c).parent != Path(library).parent
              and not Path(c).exists() for c in copies)
          and len(set(copies)) == len(copies), str(copies))
    check("program runs carry wall, CPU, peak RSS and minor faults",
          all(r["wall_seconds"] > 0 and r["peak_rss_kb"] > 0 and r["minflt"] > 0
              and "user_seconds" in r for r in records))
    broken = SortProgram()
    broken.check = lambda workdir, stdout_path: 1 / 0
    outcome = suites.run_program(broken, items[0].workdir, None, 60)
    check("a program whose check raises has a failed run, not a failed suite",
          outcome.status == "wrong output: check failed: ZeroDivisionError('division by zero')",
          outcome.status)
    original = suites.program_suite
    suites.program_suite = lambda build=None: ([SortProgram(), MissingProgram()], None)
    try:
        runnable, notes = suites.select_programs([])
    finally:
        suites.program_suite = original
    check("a program not installed is skipped with its apt-get line",
          [p.name for p in runnable] == ["sort"] and notes == [
              "absent: absent: not installed; apt-get install absent-package"], str(notes))
    check_one_table(chosen, items, records)


def check_pipeline_program(library, tmp):
    """The suite's sh row (programs.Pipeline): dash and coreutils are in every Debian system,
    so its quick input runs here under glibc and hakmem with every line checked, and an
    output that differs by one line is a wrong run."""
    from hakmem_tool import programs
    program = next(p for p in programs.PROGRAMS if p.name == "sh")
    if program.missing():
        print(f"SKIP the sh program: {program.missing()}")
        return
    workdir = Path(tmp) / "pipeline"
    workdir.mkdir()
    program.prepare(workdir, True)
    for library_name, path in [("glibc", None)] + ([("hakmem", library)] if library else []):
        outcome = suites.run_program(program, workdir, path, 120)
        check(f"the sh program's pipelines print the expected lines under {library_name}",
              outcome.status == "ok", outcome.status)
    expected = program.file(workdir, "expected.txt")
    lines = expected.read_text().splitlines()
    check("the sh program's expected lines: a line per file and the totals",
          len(lines) == 9 and lines[-1].startswith("files 8 words "), str(lines[-1:]))
    expected.write_text("\n".join(lines[:3] + [lines[3].replace(" long ", " long 1")] + lines[4:]) + "\n")
    outcome = suites.run_program(program, workdir, None, 120)
    check("a changed expected line makes the sh program's run wrong",
          outcome.status.startswith("wrong output: line 4 is "), outcome.status)


def check_one_table(chosen, items, records):
    """Both suites in one table, a geomean row each, and the detail tables."""
    bench_records = [dict(r, suite="bench", benchmark="random_mixed", ops_per_sec=1000.0 * (
        2 if r["allocator"] == "glibc" else 3), status="ok") for r in records]
    result = {"date": "now", "machine": {"cpu": "x", "cpus": 2, "memory": "m", "libc": "c",
                                         "load_average": 0.0, "uname": "u"},
              "command": "hakmem bench", "elapsed_seconds": 1.0, "runs_per_allocator": 2,
              "reference": "glibc", "notes": [], "skipped_programs": ["absent: apt-get install x"],
              "allocators": [{"name": a.name, "describe": a.describe()} for a in chosen],
              "benchmarks": [{"name": "random_mixed", "about": "a", "argv": ["b", "1"]}],
              "programs": [dict(item.describe(), suite="programs") for item in items[:1]],
              "runs": bench_records + [r for r in records if r["status"] == "ok"], "trim": None}
    markdown = report.bench_markdown(result, False)
    check("the one table holds both suites, each with its geomean row",
          "throughput ÷ glibc, higher is faster" in markdown
          and "time ÷ glibc, lower is faster" in markdown
          and "| *geomean, bench/ programs* |" in markdown
          and "| *geomean, program suite* |" in markdown
          and "| sort | 1.00 (RSS 1.00, faults 1.00) |" in markdown, markdown[:1500])
    if len(chosen) > 1:
        check("bench/ ratios are throughput ratios", "| random_mixed | 1.00 (RSS 1.00) | 1.50 ("
              in markdown, markdown[:1500])
    check("the detail tables have absolute medians of both suites",
          "## Details: bench/ programs" in markdown and "## Details: program suite" in markdown
          and "| sort | glibc |" in markdown and "minor faults" in markdown)
    check("skipped programs are named", "absent: apt-get install x" in markdown)


# ---- 5. the hakmem commands ----------------------------------------------------------------

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
    argv = ["ab", "--build", str(BUILD), "--pairs", "3", "--seed", "11", "--a-lib", "glibc",
            "--b-lib", b_lib, "--a", "HAKMEM_STATS=0", "--out", str(Path(tmp) / "ab"),
            "--json", str(json_path), "--", str(BENCH / "bench_random_mixed"), "200000", "400"]
    done = run_tool(*argv)
    check("hakmem ab exits 0", done.returncode == 0, done.stderr[-500:])
    report_ = json.loads(json_path.read_text()) if json_path.exists() else {}
    comparison = report_.get("comparison") or {}
    check("hakmem ab measures throughput when the command prints ops_per_sec",
          report_.get("metric") == "throughput", str(report_.get("metric")))
    runs = report_.get("runs", [])
    pairs = [sorted(r["config"] for r in runs if r["pair"] == n) for n in (1, 2, 3)]
    check("hakmem ab runs 3 pairs of one A and one B", len(runs) == 6
          and pairs == [["A", "B"]] * 3, str(pairs))
    check("hakmem ab says the seed", "seed 11" in done.stdout and report_.get("seed") == 11)
    order = [r["config"] for r in runs]
    again = run_tool(*[a if a != str(Path(tmp) / "ab") else str(Path(tmp) / "ab2")
                       for a in argv])
    repeat = json.loads(json_path.read_text()) if again.returncode == 0 else {}
    check("hakmem ab --seed repeats the order within pairs",
          [r["config"] for r in repeat.get("runs", [])] == order, str(order))
    check("hakmem ab measures every run with wait4",
          all(r["peak_rss_kb"] > 0 and r["minflt"] > 0 and r["wall_seconds"] > 0 for r in runs))
    check("hakmem ab reports the statistics",
          all(k in report_.get("describe", {}).get("A", {})
              for k in ("mean", "median", "min", "max", "stddev", "cv"))
          and len(comparison.get("ci", [])) == 2 and 0 <= comparison.get("p_value", -1) <= 1
          and "Wilcoxon" in comparison.get("test", ""))
    check("hakmem ab gives a verdict", report_.get("verdict") in ("GO", "NO-GO", "INCONCLUSIVE"))
    check("hakmem ab prints Markdown with the metric and the usage beside it",
          "**Verdict:" in done.stdout and "| CV |" in done.stdout
          and "metric **throughput**" in done.stdout and "| peak RSS |" in done.stdout
          and "| minor page faults |" in done.stdout, done.stdout[-600:])
    check("hakmem ab writes into its results folder",
          (Path(tmp) / "ab" / "ab.md").exists() and (Path(tmp) / "ab" / "ab.json").exists())
    check("hakmem ab settings reach the runs", report_.get("configs", {}).get("A", {})
          .get("settings") == {"HAKMEM_STATS": "0"})

    done = run_tool("ab", "--pairs", "3", "--a-lib", "glibc", "--b-lib", "glibc", "--perf",
                    "--out", str(Path(tmp) / "ab-time"), "--", "true")
    report_ = json.loads((Path(tmp) / "ab-time" / "ab.json").read_text())
    check("hakmem ab falls back to wall time", done.returncode == 0
          and report_["metric"] == "wall" and report_["higher_is_better"] is False)
    perf = report_["perf"]
    check("hakmem ab --perf counts or says perf unavailable",
          ("perf unavailable" in done.stdout) if perf["unavailable"]
          else "instructions" in perf["medians"]["A"], done.stdout[-400:])
    done = run_tool("ab", "--pairs", "3", "--a-lib", "glibc", "--b-lib", "glibc", "--metric",
                    "cpu", "--out", str(Path(tmp) / "ab-cpu"), "--", "sh", "-c",
                    "i=0; while [ $i -lt 3000 ]; do i=$((i+1)); done")
    report_ = json.loads((Path(tmp) / "ab-cpu" / "ab.json").read_text())
    check("hakmem ab --metric cpu compares user + sys seconds", done.returncode == 0
          and report_["metric"] == "cpu" and all(
              close(r["value"], r["user_seconds"] + r["sys_seconds"]) for r in report_["runs"]),
          done.stderr[-300:])


def check_aa_command(tmp):
    out = Path(tmp) / "aa"
    done = run_tool("ab", "--aa", "--trials", "2", "--pairs", "3", "--a-lib", "glibc",
                    "--seed", "5", "--out", str(out), "--", str(BENCH / "bench_random_mixed"),
                    "100000", "400")
    result = json.loads((out / "aa.json").read_text()) if (out / "aa.json").exists() else {}
    trials = result.get("trials", [])
    check("hakmem ab --aa runs its trials", done.returncode == 0 and len(trials) == 2
          and all(len(t["runs"]) == 6 for t in trials), done.stderr[-400:])
    check("hakmem ab --aa: B differs from A by the dummy variable only",
          result.get("configs", {}).get("B", {}).get("settings") == {"HAKMEM_AB_AA": "1"}
          and result["configs"]["A"]["library"] == result["configs"]["B"]["library"])
    check("hakmem ab --aa prints the false-GO rate", "False-GO rate:" in done.stdout
          and 0 <= result.get("false_go_rate", -1) <= 1, done.stdout[-300:])
    done = run_tool("ab", "--aa", "--b", "X=1", "--", "true")
    check("hakmem ab --aa refuses a B", done.returncode == 2 and "--aa" in done.stderr)


def check_ab_on_a_program(tmp):
    """ab --program NAME: the input prepared once, every run's output checked."""
    out = Path(tmp) / "ab-program"
    args = cli.command_parser().parse_args(["ab", "--program", "sort", "--pairs", "2",
                                            "--a-lib", "glibc", "--b-lib", "glibc",
                                            "--seed", "3", "--out", str(out)])
    original = suites.program_suite
    suites.program_suite = lambda build=None: ([SortProgram()], None)
    try:
        status = ab.cmd_ab(args)
    finally:
        suites.program_suite = original
    result = json.loads((out / "ab.json").read_text()) if (out / "ab.json").exists() else {}
    check("hakmem ab --program runs the program in pairs, its output checked", status == 0
          and result.get("program") == "sort" and result.get("metric") == "wall"
          and [r["status"] for r in result.get("runs", [])] == ["ok"] * 4, str(result)[:400])
    done = run_tool("ab", "--program", "nosuch", "--pairs", "2")
    check("hakmem ab --program rejects an unknown program",
          done.returncode == 2 and "nosuch" in done.stderr, done.stderr[-300:])


class SortAgain(SortProgram):
    name = "sort2"


def check_ab_on_several_programs(tmp):
    """ab --program a,b and --program all: one A/B per program, then the table of them."""
    original = suites.program_suite
    suites.program_suite = lambda build=None: ([SortProgram(), SortAgain(), MissingProgram()],
                                               None)
    try:
        out = Path(tmp) / "ab-suite"
        args = cli.command_parser().parse_args(["ab", "--program", "sort2,sort", "--pairs", "2",
                                                "--a-lib", "glibc", "--b-lib", "glibc",
                                                "--seed", "5", "--out", str(out)])
        status = ab.cmd_ab(args)
        table = json.loads((out / "suite.json").read_text()) if (out / "suite.json").exists() \
            else {}
        rows = table.get("rows", [])
        check("hakmem ab --program a,b compares each program in pairs, in the order named",
              status == 0 and [r["program"] for r in rows] == ["sort2", "sort"]
              and all(r["pairs"] == 2 and r["verdict"] in ("GO", "NO-GO", "INCONCLUSIVE")
                      for r in rows), str(table)[:400])
        check("hakmem ab --program a,b keeps each program's own report",
              (out / "ab-sort.md").exists() and (out / "ab-sort2.json").exists()
              and (out / "suite.md").exists())
        gains = [r["gain"] for r in rows if r["gain"] is not None]
        want = math.exp(sum(math.log(1 + g) for g in gains) / len(gains)) - 1 if gains else None
        check("the table's geometric mean is that of the programs' gains",
              want is not None and abs(table["geomean"]["gain"] - want) < 1e-12, str(table)[:300])
        markdown = (out / "suite.md").read_text() if (out / "suite.md").exists() else ""
        check("the table names every program and the geometric mean",
              "| sort2 |" in markdown and "| sort |" in markdown and "geometric mean" in markdown)
        out = Path(tmp) / "ab-all"
        args = cli.command_parser().parse_args(["ab", "--program", "all", "--pairs", "1",
                                                "--a-lib", "glibc", "--b-lib", "glibc",
                                                "--out", str(out)])
        status = ab.cmd_ab(args)
        table = json.loads((out / "suite.json").read_text()) if (out / "suite.json").exists() \
            else {}
        check("hakmem ab --program all runs every installed program and skips a missing one",
              status == 0 and [r["program"] for r in table.get("rows", [])] == ["sort", "sort2"],
              str(table)[:300])
    finally:
        suites.program_suite = original
    done = run_tool("ab", "--aa", "--program", "jq,lua", "--pairs", "2")
    check("hakmem ab --aa refuses several programs",
          done.returncode == 2 and "--aa" in done.stderr, done.stderr[-300:])


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
    check("hakmem bench --bench runs the bench/ suite only", report.get("suites") == ["bench"]
          and report.get("programs") == [], str(report.get("suites")))
    check("hakmem bench records wait4's figures", all(
        r["minflt"] > 0 and r["user_seconds"] + r["sys_seconds"] > 0 for r in report["runs"]))
    done = run_tool("bench", "--build", str(BUILD), "--bench", "nosuch", "--out", str(out / "x"))
    check("hakmem bench rejects an unknown benchmark",
          done.returncode == 2 and "unknown" in done.stderr)
    done = run_tool("bench", "--build", str(BUILD), "--program", "nosuch", "--out", str(out / "y"))
    check("hakmem bench rejects an unknown program",
          done.returncode == 2 and "nosuch" in done.stderr, done.stderr[-300:])


def check_pairs_command():
    done = run_tool("pairs", "--build", str(BUILD), "--lib", "glibc")
    if "valgrind is not installed" in done.stdout:
        check("hakmem pairs without valgrind says how to install it",
              done.returncode == 0 and "apt-get install valgrind" in done.stdout)
        return
    row = [line for line in done.stdout.splitlines() if line.startswith("| glibc |")]
    counts = [float(c) for c in row[0].strip("|").split("|")[1:]] if row else []
    # a malloc + free pair of glibc takes tens to a few hundred instructions, never 0
    check("hakmem pairs counts instructions per pair for 4 sizes", done.returncode == 0
          and len(counts) == 4 and all(10 < c < 5000 for c in counts), done.stdout[-500:])


def check_installed_copy(tmp):
    """make install puts the launcher in bin/ and the package in lib/hakmem/; the installed
    launcher finds both, and the installed library."""
    prefix = Path(tmp) / "prefix"
    done = subprocess.run(["make", "--no-print-directory", "-C", str(ROOT), "install",
                           f"PREFIX={prefix}", f"BUILD={BUILD}", "-o", f"{BUILD}/libhakmem.so",
                           "-o", f"{BUILD}/libhakmem.a"], capture_output=True, text=True)
    check("make install PREFIX=... succeeds", done.returncode == 0, done.stderr[-400:])
    done = subprocess.run([str(prefix / "bin" / "hakmem"), "options"], capture_output=True,
                          text=True, cwd=tmp)
    check("the installed hakmem runs `options` on the installed library",
          done.returncode == 0 and "HAKMEM_STATS" in done.stdout, done.stderr[-400:])


def check_trim_step(library):
    """The trim step of `hakmem bench`: bench_trim once per allocator, one table row each."""
    chosen = [allocators.Allocator("glibc")] + ([allocators.Allocator("hakmem", library)]
                                                if library else [])
    trim = bench.run_trim(BENCH, chosen, True, 120)
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
    table = "\n".join(report.trim_table(trim))
    check("the trim table has a row per allocator",
          all(f"| {a.name} |" in table for a in chosen) and "after malloc_trim(0)" in table, table)


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
        check_runner(tmp)
        check_program_suite(library, tmp)
        check_pipeline_program(library, tmp)
        check_ab_command(library, tmp)
        check_aa_command(tmp)
        check_ab_on_a_program(tmp)
        check_ab_on_several_programs(tmp)
        check_bench_command(tmp)
        check_pairs_command()
        if library:
            check_installed_copy(tmp)
    print(f"{results['passed']} passed, {results['failed']} failed")
    return 1 if results["failed"] else 0


if __name__ == "__main__":
    sys.exit(main())
