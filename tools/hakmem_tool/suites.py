"""The suites of `hakmem bench`: the bench/ programs of this repository (this table) and
the program suite of real programs from Debian packages (programs.py)."""

import os
from dataclasses import dataclass
from pathlib import Path

from .errors import UsageError
from .runner import Outcome, fresh_copy, run_command


@dataclass
class Benchmark:
    name: str
    program: str
    args: list
    quick_args: list
    about: str


# Iteration counts keep each run near 1-2 s under glibc on a 2-core machine, so the default
# bench/ suite (5 allocators, 5 runs) takes about 10 minutes; see docs/benchmarks.md.
SUITE = [
    Benchmark("random_mixed", "bench_random_mixed", ["40000000", "400"], ["2000000", "400"],
              "1 thread, random malloc/free over 400 slots, 16-1040 B"),
    Benchmark("mid_large_mt_2t", "bench_mid_large_mt", ["2", "6000000", "128"],
              ["2", "300000", "128"], "2 threads, 128 slots each, 8-32 KiB"),
    Benchmark("mid_large_mt_8t", "bench_mid_large_mt", ["8", "1500000", "128"],
              ["8", "75000", "128"], "8 threads on the cores (oversubscribed), 8-32 KiB"),
    Benchmark("larson_2t", "larson", ["2", "8", "1000", "5000", "100", "4141", "2"],
              ["0.2", "8", "1000", "5000", "100", "4141", "2"],
              "Larson server benchmark, 2 threads, 8-1000 B, generations of threads"),
    Benchmark("larson_8t", "larson", ["2", "8", "1000", "5000", "100", "4141", "8"],
              ["0.2", "8", "1000", "5000", "100", "4141", "8"],
              "Larson server benchmark, 8 threads (oversubscribed)"),
    Benchmark("mixed", "bench_allocators", ["--scenario", "mixed", "--iterations", "5000000"],
              ["--scenario", "mixed", "--iterations", "250000"],
              "16 B, 512 B, 1 KiB, 8 KiB and 128 KiB blocks over 256 slots"),
    Benchmark("mid64k", "bench_allocators", ["--scenario", "mid64k", "--iterations", "3000000"],
              ["--scenario", "mid64k", "--iterations", "150000"],
              "64 KiB-heavy blocks over 64 slots"),
    Benchmark("large_realloc", "bench_allocators",
              ["--scenario", "large_realloc", "--iterations", "1500"],
              ["--scenario", "large_realloc", "--iterations", "100"],
              "1-16 MiB blocks grown by realloc"),
    Benchmark("prodcons", "bench_allocators", ["--scenario", "prodcons", "--iterations", "5000000"],
              ["--scenario", "prodcons", "--iterations", "250000"],
              "producer thread allocates, consumer thread frees (cross-thread)"),
    # Published benchmarks' shapes, written from their descriptions.
    Benchmark("large_churn", "bench_large_churn", ["1000"], ["100"],
              "4 live buffers of 5-25 MiB replaced at random, new char[n]() zero-filled"),
    Benchmark("ring_2t", "bench_ring", ["2", "40000"], ["2", "3000"],
              "2 threads in a ring hand batches of 256 blocks of 16 B-8 KiB to the next"),
    Benchmark("ring_8t", "bench_ring", ["8", "8000"], ["8", "600"],
              "8 threads in a ring (oversubscribed), every free cross-thread"),
    Benchmark("cache_thrash_2t", "bench_false_sharing", ["thrash", "2", "10000"],
              ["thrash", "2", "1000"],
              "Berger et al.'s cache-thrash: each thread allocates 8 B, writes it, frees it"),
    Benchmark("cache_scratch_2t", "bench_false_sharing", ["scratch", "2", "10000"],
              ["scratch", "2", "1000"],
              "cache-scratch: threads free blocks allocated side by side, then write their own"),
    Benchmark("batch_4t", "bench_batch", ["4", "1500"], ["4", "150"],
              "sh8bench's shape: batches of 4000 blocks of 1-1000 B, 20% freed by the next thread"),
    Benchmark("oversubscribed_2t", "bench_oversubscribed", ["2", "4", "1000000"],
              ["2", "4", "100000"],
              "2 allocating threads (half 40 KiB-4 MiB: locked paths) beside 4 spinning threads"),
    Benchmark("oversubscribed_8t", "bench_oversubscribed", ["8", "4", "400000"],
              ["8", "4", "40000"], "8 allocating threads beside 4 spinning threads on 2 cores"),
    Benchmark("size_shift", "bench_size_shift", ["40"], ["4"],
              "phases of 64 B-1 KiB, 2-16 KiB, 100-500 KiB at 32 MiB live"),
    Benchmark("threads_100", "bench_threads", ["100", "20", "2000"], ["100", "5", "200"],
              "100 threads alive at once, each allocating and freeing 20 rounds, then replaced"),
    Benchmark("threads_1000", "bench_threads", ["1000", "20", "2000"], ["1000", "2", "1000"],
              "1,000 threads alive at once, each allocating and freeing 20 rounds, then replaced"),
    Benchmark("stress_2t", "bench_stress", ["2", "400", "10"], ["2", "40", "10"],
              "mimalloc's stress test's shape: rounds of threads, calloc'd blocks checked at free, "
              "some passed between threads through shared slots, a few up to 5 MiB"),
    Benchmark("stress_8t_busy", "bench_stress", ["8", "50", "25", "2"], ["8", "5", "25", "2"],
              "the same with 8 threads a round beside 2 spinning threads (a busy machine)"),
]


def split_names(values):
    """NAME arguments, each repeatable and comma-separated."""
    return [name for value in values for name in value.split(",") if name]


def select_by_name(items, names, kind):
    if not names:
        return list(items)
    known = {item.name: item for item in items}
    unknown = [n for n in names if n not in known]
    if unknown:
        raise UsageError(f"unknown {kind} {', '.join(unknown)}; known: {', '.join(known) or 'none'}")
    return [known[n] for n in names]


def select_benchmarks(names):
    return select_by_name(SUITE, names, "benchmark")


def benchmark_argv(bench_dir, benchmark, quick):
    program = Path(bench_dir) / benchmark.program
    if not os.access(program, os.X_OK):
        raise UsageError(f"{program} not found: build the benchmarks with `make benches` "
                         "or pass --build DIR")
    return [str(program)] + (benchmark.quick_args if quick else benchmark.args)


def program_suite(build=None):
    """The program suite (programs.PROGRAMS), or (None, why) when it cannot be loaded."""
    try:
        from . import programs
    except ImportError as error:
        return None, f"the program suite is not available ({error})"
    if build:
        programs.BUILD_DIR = Path(build)  # where the memcached client was built
    return list(programs.PROGRAMS), None


def select_programs(names, build=None):
    """(programs to run, notes): the selected programs that are installed, and one note
    for each one missing, naming its apt-get line. `build` is the build folder whose
    bench/ holds the programs' own helpers (the memcached client)."""
    suite, problem = program_suite(build)
    if suite is None:
        if names:
            raise UsageError(problem)
        return [], [problem]
    chosen, notes = [], []
    for program in select_by_name(suite, names, "program"):
        missing = program.missing()
        if missing:
            notes.append(f"{program.name}: {missing}")
        else:
            chosen.append(program)
    return chosen, notes


def run_program(program, workdir, library, timeout, settings=None):
    """One timed run of a program of the suite under `library` (None: glibc), its output
    checked: the Outcome, with status "wrong output: ..." when check() finds it wrong. The
    program puts LD_PRELOAD where it belongs; the runner adds none and drops the inherited
    one. `settings` (an A/B configuration's variables) come before the program's own."""
    stdout_path = Path(workdir) / "stdout.txt"
    with fresh_copy(library) as copy:   # as run_command's own runs: runner.fresh_copy
        try:
            argv, env = program.command(Path(workdir), copy)
        except Exception as error:  # the program's own code: a failed run, not a failed suite
            return Outcome(f"program error: {error!r}")
        outcome = run_command(argv, settings=dict(settings or {}, **env), library=None,
                              timeout=timeout, stdout_path=stdout_path)
    if outcome.ok:
        try:
            reason = program.check(Path(workdir), stdout_path)
        except Exception as error:
            reason = f"check failed: {error!r}"
        if reason:
            outcome.status = f"wrong output: {reason}"
    return outcome


def prepare_program(program, quick, workroot):
    """The program's input in its own folder of workroot, untimed; returns the folder."""
    workdir = Path(workroot) / program.name
    workdir.mkdir()
    program.prepare(workdir, quick)
    return workdir
