"""The command line: argparse, `hakmem run`, `hakmem options`, and dispatch to the others
(bench, ab, pairs, chart, prof)."""

import argparse
import os
import subprocess
import sys

from . import __doc__ as TOOL_DOC
from .ab import DEFAULT_PAIRS, DEFAULT_TRIALS, cmd_ab
from .allocators import hakmem_library, resolve_library
from .bench import SUITE_NAMES, cmd_bench
from .chart import cmd_chart
from .errors import UsageError
from .pairs import cmd_pairs
from .prof import add_prof_parser, cmd_prof
from .stats import DEFAULT_THRESHOLD_PCT
from .suites import SUITE


def strip_separator(command):
    return command[1:] if command and command[0] == "--" else command


def library_or_fail(args):
    library = resolve_library(args.lib, args.build) if args.lib else hakmem_library(args.build)
    if not library:
        raise UsageError("libhakmem.so not found: build it with `make`, or pass --build DIR "
                         "or --lib PATH")
    return library


def cmd_run(args):
    command = strip_separator(args.command)
    if not command:
        raise UsageError("run needs a command after --")
    env = dict(os.environ)
    env["LD_PRELOAD"] = ":".join(filter(None, [library_or_fail(args), env.get("LD_PRELOAD")]))
    if args.stats is not None:
        if args.stats != "1" and not args.stats.startswith("json:"):
            raise UsageError("--stats takes no value or json:PATH")
        env["HAKMEM_STATS"] = args.stats
    try:
        os.execvpe(command[0], command, env)
    except OSError as error:
        print(f"hakmem run: {command[0]}: {error.strerror}", file=sys.stderr)
        return 127


def cmd_options(args):
    """The library prints its options table on stderr at start-up when
    HAKMEM_PRINT_OPTIONS=1; this runs `true` under it and shows that table."""
    library = library_or_fail(args)
    env = dict(os.environ, HAKMEM_PRINT_OPTIONS="1", LD_PRELOAD=library)
    done = subprocess.run(["true"], env=env, capture_output=True, text=True, timeout=60)
    if done.returncode != 0 or "cannot be preloaded" in done.stderr:
        print(f"hakmem options: {library} failed to load:\n{done.stderr}", file=sys.stderr)
        return 1
    if not done.stderr.strip():
        print(f"hakmem options: {library} printed no options table "
              "(it answers HAKMEM_PRINT_OPTIONS=1)", file=sys.stderr)
        return 1
    sys.stdout.write(done.stderr)
    return 0


def add_build_option(parser):
    parser.add_argument("--build", metavar="DIR",
                        help="build folder holding libhakmem.so and bench/ (default: build)")


def add_run_parsers(sub):
    run = sub.add_parser("run", help="run a program on hakmem", allow_abbrev=False)
    run.add_argument("--stats", nargs="?", const="1", metavar="json:PATH",
                     help="print the counters at exit (or write them as JSON to PATH)")
    run.add_argument("--lib", help="library to preload (default: the build's libhakmem.so)")
    add_build_option(run)
    run.add_argument("command", nargs=argparse.REMAINDER, help="-- CMD ARGS...")
    options = sub.add_parser("options", help="list hakmem's runtime options", allow_abbrev=False)
    options.add_argument("--lib", help="library to ask (default: the build's libhakmem.so)")
    add_build_option(options)


def add_bench_parser(sub):
    bench = sub.add_parser("bench", help="benchmark hakmem against glibc and installed peers",
                           allow_abbrev=False)
    add_build_option(bench)
    bench.add_argument("--suite", choices=SUITE_NAMES,
                       help="bench (bench/ programs), programs (real programs) or all "
                       "(default; a --bench or --program selection picks its own suite)")
    bench.add_argument("--runs", type=int,
                       help="runs per allocator and row (default 5; 3 with --quick)")
    bench.add_argument("--quick", action="store_true",
                       help="short iterations and small inputs, 3 runs")
    bench.add_argument("--bench", action="append", default=[], metavar="NAME[,NAME]",
                       help="run only this bench/ benchmark (repeatable): "
                       + ", ".join(b.name for b in SUITE))
    bench.add_argument("--program", "--programs", action="append", default=[],
                       metavar="NAME[,NAME]", help="run only this program of the program "
                       "suite (repeatable)")
    bench.add_argument("--alloc", action="append", default=[], metavar="NAME",
                       help="run only this allocator (repeatable): hakmem, glibc, mimalloc, ...")
    bench.add_argument("--lib", action="append", default=[], metavar="NAME=PATH",
                       help="add an allocator library (repeatable)")
    bench.add_argument("--out", metavar="DIR", help="results folder (default results/DATE-TIME)")
    bench.add_argument("--timeout", type=float, default=120, help="seconds per run (default 120)")


def add_ab_parser(sub):
    ab = sub.add_parser("ab", help="A/B test two configurations on one command, in pairs",
                        allow_abbrev=False)
    ab.add_argument("--a", default="", metavar="'ENV=VAL ...'", help="environment of A")
    ab.add_argument("--b", default="", metavar="'ENV=VAL ...'", help="environment of B")
    ab.add_argument("--a-lib", metavar="LIB", help="A's library: a path, hakmem (default), "
                    "glibc (no preload), mimalloc, jemalloc or tcmalloc")
    ab.add_argument("--b-lib", metavar="LIB", help="B's library (same choices)")
    add_build_option(ab)
    ab.add_argument("--pairs", "--runs", dest="pairs", type=int, default=DEFAULT_PAIRS,
                    help=f"pairs of runs, one A and one B each (default {DEFAULT_PAIRS})")
    ab.add_argument("--metric", choices=["auto", "wall", "cpu", "throughput"], default="auto",
                    help="what the verdict compares: wall seconds, CPU seconds (user + sys), "
                    "or the ops_per_sec the command prints (auto, the default: throughput "
                    "when printed, else wall)")
    ab.add_argument("--seed", type=int, help="seed of the order within pairs (default: random, "
                    "printed)")
    ab.add_argument("--aa", action="store_true", help="A/A trials: A against itself (B adds a "
                    "dummy variable); prints the false-GO rate")
    ab.add_argument("--trials", type=int, default=DEFAULT_TRIALS,
                    help=f"A/A trials with --aa (default {DEFAULT_TRIALS})")
    ab.add_argument("--program", "--programs", action="append", default=[],
                    metavar="NAME[,NAME]", help="compare on this program of the program suite "
                    "(its input prepared once, its output checked) instead of a command; "
                    "several (repeatable) or all: one paired A/B each, then a table of them "
                    "with the geometric mean of their gains")
    ab.add_argument("--quick", action="store_true", help="with --program: its small input")
    ab.add_argument("--threshold", type=float, default=DEFAULT_THRESHOLD_PCT, metavar="PCT",
                    help="gain needed for GO, in percent (default 1.0)")
    ab.add_argument("--perf", action="store_true", help="count cycles, instructions, cache and "
                    "L1 misses with perf stat")
    ab.add_argument("--json", metavar="PATH", help="also write the JSON report here")
    ab.add_argument("--out", metavar="DIR", help="results folder (default results/DATE-TIME-ab)")
    ab.add_argument("--timeout", type=float, default=300, help="seconds per run (default 300)")
    ab.add_argument("command", nargs=argparse.REMAINDER, help="-- CMD ARGS...")


def command_parser():
    parser = argparse.ArgumentParser(prog="hakmem", description=TOOL_DOC,
                                     formatter_class=argparse.RawDescriptionHelpFormatter,
                                     allow_abbrev=False)
    sub = parser.add_subparsers(dest="action", required=True)
    add_run_parsers(sub)
    add_bench_parser(sub)
    add_ab_parser(sub)
    pairs = sub.add_parser("pairs", help="instructions per malloc + free pair (callgrind)",
                           allow_abbrev=False)
    add_build_option(pairs)
    pairs.add_argument("--lib", action="append", default=[], metavar="NAME|PATH|NAME=PATH",
                       help="count this allocator (repeatable; default: hakmem, glibc and "
                       "every peer found)")
    chart = sub.add_parser("chart", help="(re)draw chart.png of a bench results folder")
    chart.add_argument("folder")
    add_prof_parser(sub)
    return parser


ACTIONS = {"run": cmd_run, "options": cmd_options, "bench": cmd_bench, "ab": cmd_ab,
           "pairs": cmd_pairs, "chart": cmd_chart, "prof": cmd_prof}


def main(argv=None):
    args = command_parser().parse_args(argv)
    try:
        return ACTIONS[args.action](args)
    except UsageError as error:
        print(f"hakmem {args.action}: {error}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"\nhakmem {args.action}: interrupted", file=sys.stderr)
        return 130
