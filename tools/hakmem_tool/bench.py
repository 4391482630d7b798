"""`hakmem bench`: both suites under every allocator, interleaved, and the trim step."""

import json
import shutil
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from . import allocators as alloc
from . import machine, report, suites
from .chart import draw_chart
from .errors import UsageError
from .runner import Progress, run_command

SUITE_NAMES = ("bench", "programs", "all")


def base_record(suite, name, allocator, round_index, outcome):
    usage = outcome.usage
    return {"suite": suite, "benchmark": name, "allocator": allocator.name,
            "round": round_index + 1, "status": outcome.status,
            "ops_per_sec": outcome.fields.get("ops_per_sec"), **usage.as_dict(),
            "fields": outcome.fields, "stderr_tail": outcome.stderr_tail}


@dataclass
class BenchItem:
    """One bench/ program: its throughput is the result."""
    benchmark: suites.Benchmark
    argv: list
    suite = "bench"

    @property
    def name(self):
        return self.benchmark.name

    def describe(self):
        return {"name": self.name, "about": self.benchmark.about, "argv": self.argv}

    def run(self, allocator, round_index, timeout):
        outcome = run_command(self.argv, library=allocator.library, timeout=timeout)
        record = base_record("bench", self.name, allocator, round_index, outcome)
        if outcome.ok and "ops_per_sec" not in outcome.fields:
            record["status"] = "no result line"
        return record

    @staticmethod
    def shown(record):
        return f"{machine.format_rate(record['ops_per_sec'])} ops/s"


@dataclass
class ProgramItem:
    """One program of the program suite: its wall time is the result, its output checked."""
    program: object
    workdir: Path
    suite = "programs"

    @property
    def name(self):
        return self.program.name

    def describe(self):
        argv, env = self.program.command(self.workdir, None)
        return {"name": self.name, "about": self.program.about, "threads": self.program.threads,
                "packages": list(self.program.packages), "argv": argv, "env": env}

    def run(self, allocator, round_index, timeout):
        outcome = suites.run_program(self.program, self.workdir, allocator.library, timeout)
        return base_record("programs", self.name, allocator, round_index, outcome)

    @staticmethod
    def shown(record):
        return f"{record['wall_seconds']:.3f} s"


def run_rounds(items, allocators, runs, timeout):
    """Interleaved runs: in each round every item runs under every allocator once, in an
    order rotated from round to round and item to item."""
    progress = Progress(runs * len(items) * len(allocators))
    records = []
    for round_index in range(runs):
        for item_index, item in enumerate(items):
            shift = (round_index + item_index) % len(allocators)
            for allocator in allocators[shift:] + allocators[:shift]:
                record = item.run(allocator, round_index, timeout)
                records.append(record)
                result = (item.shown(record) if record["status"] == "ok"
                          else record["status"].upper())
                progress.step(f"round {round_index + 1}/{runs}  {item.name}  "
                              f"{allocator.name}: {result}")
    progress.finish()
    return records


# bench_trim: memory back to the OS after a peak, once per allocator (it is deterministic:
# the same blocks in the same order; the figures are RSS, not time).
TRIM_MB, TRIM_MB_QUICK = 380, 100


def run_trim(bench_dir, allocators, quick, timeout):
    argv = [str(Path(bench_dir) / "bench_trim"), str(TRIM_MB_QUICK if quick else TRIM_MB)]
    rows = []
    for allocator in allocators:
        outcome = run_command(argv, library=allocator.library, timeout=timeout)
        row = {"allocator": allocator.name, "status": outcome.status}
        if outcome.ok:
            row.update({key: outcome.fields.get(key) for key, _ in report.TRIM_FIELDS},
                       trim_returned=outcome.fields.get("trim_returned"))
        rows.append(row)
    return {"argv": argv, "rows": rows}


def chosen_suites(args):
    """Which suites run: --suite, else the ones a --bench or --program selection names,
    else both."""
    if args.suite:
        return {"bench", "programs"} if args.suite == "all" else {args.suite}
    if args.bench or args.program:
        return ({"bench"} if args.bench else set()) | ({"programs"} if args.program else set())
    return {"bench", "programs"}


def prepare_programs(programs, quick, workroot):
    """Each program's input in its own folder, untimed; (items, failure notes)."""
    items, failures = [], []
    for program in programs:
        print(f"preparing {program.name} ...", file=sys.stderr)
        try:
            workdir = suites.prepare_program(program, quick, workroot)
        except Exception as error:  # a program's own code: report it, run the others
            failures.append(f"{program.name}: preparing its input failed: {error}")
            continue
        items.append(ProgramItem(program, workdir))
    return items, failures


def bench_items(args, build, wanted, workroot):
    """(items, notes, failures) of the suites chosen."""
    items, notes, failures = [], [], []
    if "bench" in wanted:
        for benchmark in suites.select_benchmarks(suites.split_names(args.bench)):
            items.append(BenchItem(benchmark, suites.benchmark_argv(Path(build) / "bench",
                                                                      benchmark, args.quick)))
    if "programs" in wanted:
        programs, skipped = suites.select_programs(suites.split_names(args.program), build)
        notes += skipped
        prepared, failures = prepare_programs(programs, args.quick, workroot)
        items += prepared
    return items, notes, failures


def bench_result(args, info, date, started, allocators, notes, items, records, trim):
    """Everything `hakmem bench` measured, as written to runs.json."""
    descriptions = [dict(item.describe(), suite=item.suite) for item in items]
    alloc_notes, program_notes, failures = notes
    return {"tool": "hakmem bench", "date": date, "machine": info,
            "command": machine.invocation(),
            "elapsed_seconds": round(time.monotonic() - started, 1),
            "runs_per_allocator": args.runs, "quick": args.quick,
            "suites": sorted({item.suite for item in items}),
            "reference": alloc.reference_allocator([a.name for a in allocators]),
            "allocators": [{"name": a.name, "library": a.library, "describe": a.describe()}
                           for a in allocators],
            "notes": alloc_notes, "skipped_programs": program_notes,
            "program_failures": failures,
            "benchmarks": [d for d in descriptions if d["suite"] == "bench"],
            "programs": [d for d in descriptions if d["suite"] == "programs"],
            "runs": records, "trim": trim}


def cmd_bench(args):
    build = args.build or alloc.default_build()
    if not build:
        raise UsageError("no build folder: pass --build DIR")
    wanted = chosen_suites(args)
    args.runs = args.runs or (3 if args.quick else 5)
    if args.runs < 1:
        raise UsageError("--runs must be at least 1")
    found, alloc_notes = alloc.discover_allocators(build, args.lib)
    allocators = alloc.select_allocators(found, args.alloc)
    alloc_notes = [] if args.alloc else alloc_notes
    folder = machine.results_folder(args.out)
    info = machine.machine_info()
    machine.warn_if_busy(info)
    date, started = machine.now_iso(), time.monotonic()
    workroot = tempfile.mkdtemp(prefix="hakmem-programs-")
    try:
        items, program_notes, failures = bench_items(args, build, wanted, workroot)
        for note in alloc_notes + program_notes + failures:
            print(f"note: {note}", file=sys.stderr)
        if not items:
            raise UsageError("nothing to run" + (": " + "; ".join(program_notes + failures)
                                                 if program_notes or failures else ""))
        records = run_rounds(items, allocators, args.runs, args.timeout)
    finally:
        shutil.rmtree(workroot, ignore_errors=True)
    trim = (run_trim(Path(build) / "bench", allocators, args.quick, args.timeout)
            if "bench" in wanted and not args.bench else None)
    result = bench_result(args, info, date, started, allocators,
                          (alloc_notes, program_notes, failures), items, records, trim)
    (folder / "runs.json").write_text(json.dumps(result, indent=1) + "\n")
    chart = draw_chart(folder)
    markdown = report.bench_markdown(result, chart is not None)
    (folder / "results.md").write_text(markdown)
    print(markdown)
    failed = sum(r["status"] != "ok" for r in records) + len(failures)
    print(f"results in {folder}/: runs.json, results.md" + (", chart.png" if chart else "")
          + (f"; {failed} run(s) FAILED" if failed else ""), file=sys.stderr)
    return 1 if failed else 0
