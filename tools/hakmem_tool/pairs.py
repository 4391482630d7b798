"""`hakmem pairs`: instructions per malloc + free pair, counted by callgrind.

bench_pair SIZE N BATCH makes N malloc + free pairs of SIZE bytes, BATCH mallocs then
BATCH frees at a time. Under `valgrind --tool=callgrind` the count of instructions is
exact and the same from run to run; the count of a run with N = 0 (start-up, the result
line) is taken off and the rest divided by N. What is left is the allocator's fast paths,
its amortized slow paths, and the loop's own few instructions."""

import re
import shutil
import subprocess
import sys
from pathlib import Path

from . import allocators as alloc
from .errors import UsageError
from .runner import child_environment

# size, pairs, batch: as many pairs as keep each count near a second under callgrind
SIZES = [(32, 1000000, 100), (512, 1000000, 100), (8192, 200000, 100), (100000, 100000, 10)]
INSTALL_HINT = ("pairs: valgrind is not installed; `apt-get install valgrind` adds the "
                "instructions per malloc + free pair (`hakmem pairs`)")


def count_instructions(program, library, size, pairs, batch, timeout=600):
    """Instructions callgrind collected for one run of bench_pair."""
    argv = ["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null",
            str(program), str(size), str(pairs), str(batch)]
    done = subprocess.run(argv, env=child_environment({}, library), capture_output=True,
                          text=True, timeout=timeout)
    found = re.search(r"Collected\s*:\s*(\d+)", done.stderr)
    if done.returncode != 0 or not found:
        last = (done.stderr.strip().splitlines() or ["no output"])[-1]
        raise RuntimeError(f"bench_pair {size} {pairs} {batch} failed: {last}")
    return int(found.group(1))


def per_pair(program, library):
    """{size: instructions per pair} of one allocator."""
    start_up = count_instructions(program, library, SIZES[0][0], 0, SIZES[0][2])
    return {size: (count_instructions(program, library, size, pairs, batch) - start_up) / pairs
            for size, pairs, batch in SIZES}


def size_label(size):
    return f"{size // 1024} KiB" if size % 1024 == 0 and size >= 1024 else f"{size} B"


def chosen_allocators(args, build):
    """--lib NAME (hakmem, glibc or a peer), PATH or NAME=PATH; else hakmem, glibc and
    every peer found."""
    if not args.lib:
        found, notes = alloc.discover_allocators(build, [])
        for note in notes:
            print(f"note: {note}", file=sys.stderr)
        return found
    chosen = []
    for spec in args.lib:
        name, equals, path = spec.partition("=")
        if equals:
            chosen.append(alloc.Allocator(name, alloc.resolve_library(path, build)))
        else:
            chosen.append(alloc.Allocator(Path(spec).name if "/" in spec else spec,
                                          alloc.resolve_library(spec, build)))
    return chosen


def pairs_table(rows):
    lines = ["| allocator | " + " | ".join(size_label(s) for s, _, _ in SIZES) + " |",
             "|---|" + "---:|" * len(SIZES)]
    for name, counts in rows:
        cells = [f"{counts[s]:.0f}" if isinstance(counts.get(s), float) else "failed"
                 for s, _, _ in SIZES]
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return lines


def cmd_pairs(args):
    if not shutil.which("valgrind"):
        print(INSTALL_HINT)
        return 0
    build = args.build or alloc.default_build()
    program = Path(build or "build") / "bench" / "bench_pair"
    if not program.is_file():
        raise UsageError(f"{program} not found: build the benchmarks with `make benches` "
                         "or pass --build DIR")
    rows, failed = [], False
    for allocator in chosen_allocators(args, build):
        print(f"counting {allocator.name} ...", file=sys.stderr)
        try:
            rows.append((allocator.name, per_pair(program, allocator.library)))
        except (RuntimeError, subprocess.TimeoutExpired) as error:
            print(f"pairs: {allocator.name}: {error}", file=sys.stderr)
            rows.append((allocator.name, {}))
            failed = True
    batches = ", ".join(f"{size_label(s)} in batches of {b} ({p:,} pairs)" for s, p, b in SIZES)
    print("## Instructions per malloc + free pair\n\n"
          f"callgrind, net of start-up (a run of N pairs less a run of none, divided by N); "
          f"{batches}; the loop's own instructions included.\n")
    print("\n".join(pairs_table(rows)))
    return 1 if failed else 0
