"""`hakmem ab`: paired A/B runs of one command and the decision (stats.paired_compare);
`hakmem ab --aa`: A/A trials that measure how often the decision says GO when nothing
differs (the false-GO rate of this command on this machine). Several programs of the
program suite at once: ab_suite.py."""

import contextlib
import json
import random
import re
import shlex
import shutil
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from . import ab_suite, machine, suites
from .allocators import Allocator, resolve_library
from .errors import UsageError
from .runner import PERF_EVENTS, Progress, perf_unavailable_reason, run_command
from .stats import describe, median, paired_compare

DEFAULT_PAIRS = 20  # tests/test_ab_decision.py: +3% under its noise is GO in most trials
DEFAULT_TRIALS = 20
AA_VARIABLE = "HAKMEM_AB_AA"  # the dummy variable that tells B from A in an A/A trial
METRICS = {
    "throughput": "ops_per_sec of the command's result line, higher is better",
    "wall": "wall seconds, lower is better",
    "cpu": "CPU seconds (user + sys of the child, from wait4), lower is better",
}


@dataclass
class Config:
    label: str
    settings: dict
    library: str

    def describe(self):
        env = " ".join(f"{k}={v}" for k, v in self.settings.items()) or "(no settings)"
        return f"{env}; {Allocator(self.label, self.library).describe()}"


def parse_settings(text):
    """'NAME=VALUE NAME2=VALUE2' (shell quoting allowed) -> dict."""
    settings = {}
    for item in shlex.split(text or ""):
        name, equals, value = item.partition("=")
        if not equals or not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name):
            raise UsageError(f"expected NAME=VALUE, got {item!r}")
        settings[name] = value
    return settings


def ab_configs(args):
    if args.aa:
        settings = parse_settings(args.a)
        library = resolve_library(args.a_lib or "hakmem", args.build)
        return [Config("A", settings, library),
                Config("B", dict(settings, **{AA_VARIABLE: "1"}), library)]
    return [Config(label, parse_settings(env_text), resolve_library(lib or "hakmem", args.build))
            for label, env_text, lib in (("A", args.a, args.a_lib), ("B", args.b, args.b_lib))]


def resolve_metric(requested, outcomes):
    """auto: throughput when every successful run printed ops_per_sec, else wall."""
    if requested != "auto":
        return requested
    good = [o for o in outcomes if o.ok]
    return "throughput" if good and all("ops_per_sec" in o.fields for o in good) else "wall"


def metric_value(outcome, metric):
    if not outcome.ok:
        return None
    if metric == "throughput":
        value = outcome.fields.get("ops_per_sec")
        return value if isinstance(value, (int, float)) and value > 0 else None
    value = outcome.usage.wall if metric == "wall" else outcome.usage.cpu
    return value if value > 0 else None


def run_pairs(configs, run_one, pairs, rng, progress, title=""):
    """`pairs` pairs of runs, A and B in a random order within each pair; run_one(config)
    makes one run. Returns one entry per run, in the order they ran."""
    sequence = []
    for index in range(pairs):
        order = list(configs)
        rng.shuffle(order)
        for position, config in enumerate(order):
            outcome = run_one(config)
            sequence.append({"pair": index + 1, "position": position + 1,
                             "config": config.label, "outcome": outcome})
            if not outcome.ok:
                shown = outcome.status.upper()
            elif "ops_per_sec" in outcome.fields:
                shown = f"{machine.format_rate(outcome.fields['ops_per_sec'])} ops/s"
            else:
                shown = f"{outcome.usage.wall:.3f} s"
            progress.step(f"{title}pair {index + 1}/{pairs} {config.label}: {shown}")
    return sequence


def decide(sequence, metric, threshold):
    """The decision on the complete pairs; a failed run makes it INCONCLUSIVE."""
    higher = metric == "throughput"
    by_pair = {}
    for entry in sequence:
        by_pair.setdefault(entry["pair"], {})[entry["config"]] = metric_value(entry["outcome"],
                                                                               metric)
    complete = [(v["A"], v["B"]) for v in by_pair.values()
                if v.get("A") is not None and v.get("B") is not None]
    failures = {label: [e["outcome"].status for e in sequence if e["config"] == label
                        and not e["outcome"].ok] for label in ("A", "B")}
    if not complete:
        return None, "INCONCLUSIVE", f"no complete pair with a {metric} value", failures
    comparison = paired_compare([a for a, _ in complete], [b for _, b in complete], threshold,
                                higher)
    failed = {label: statuses for label, statuses in failures.items() if statuses}
    if failed:
        listed = "; ".join(f"{label}: {', '.join(s)}" for label, s in failed.items())
        return comparison, "INCONCLUSIVE", f"failed runs ({listed})", failures
    if len(complete) < len(by_pair):
        return comparison, "INCONCLUSIVE", f"{len(by_pair) - len(complete)} pair(s) have no " \
            f"{metric} value", failures
    return comparison, comparison["verdict"], comparison["reason"], failures


def usage_medians(sequence, label):
    good = [e["outcome"] for e in sequence if e["config"] == label and e["outcome"].ok]
    if not good:
        return {}
    return {"wall_seconds": median([o.usage.wall for o in good]),
            "cpu_seconds": median([o.usage.cpu for o in good]),
            "peak_rss_kb": median([o.usage.peak_rss_kb for o in good]),
            "minflt": median([o.usage.minflt for o in good])}


def perf_medians(outcomes):
    """Median of each perf counter, plus instructions per op when the runs report ops."""
    medians = {}
    for event in PERF_EVENTS:
        values = [o.perf[event] for o in outcomes if event in o.perf]
        if values:
            medians[event] = median(values)
    per_op = [o.perf["instructions"] / o.fields["ops"] for o in outcomes
              if "instructions" in o.perf and o.fields.get("ops")]
    if per_op:
        medians["instructions per op"] = median(per_op)
    return medians


def run_record(entry, metric):
    o = entry["outcome"]
    return {"pair": entry["pair"], "position": entry["position"], "config": entry["config"],
            "status": o.status, "value": metric_value(o, metric), **o.usage.as_dict(),
            "fields": o.fields, "perf": o.perf, "stderr_tail": o.stderr_tail}


def ab_result(configs, command, sequence, args, metric, seed):
    comparison, label, reason, failures = decide(sequence, metric, args.threshold / 100)
    values = {c.label: [metric_value(e["outcome"], metric) for e in sequence
                        if e["config"] == c.label] for c in configs}
    values = {k: [v for v in vs if v is not None] for k, vs in values.items()}
    return {"metric": metric, "metric_meaning": METRICS[metric],
            "higher_is_better": metric == "throughput", "pairs": args.pairs, "seed": seed,
            "configs": {c.label: {"settings": c.settings, "library": c.library,
                                  "describe": c.describe()} for c in configs},
            "runs": [run_record(e, metric) for e in sequence], "failures": failures,
            "comparison": comparison, "verdict": label, "reason": reason,
            "describe": {k: describe(v) for k, v in values.items() if v},
            "usage_medians": {c.label: usage_medians(sequence, c.label) for c in configs}}


def metric_formatter(metric, typical):
    """Formats values of `metric` in one unit, chosen from a typical value."""
    if metric in ("wall", "cpu"):
        return lambda value: f"{value:.4f} s"
    if typical >= 1e5:
        return lambda value: f"{value / 1e6:.3f} M"
    return lambda value: f"{value:,.1f}"


def stats_table(result, show):
    described = result["describe"]
    if "A" not in described or "B" not in described:
        return []
    a, b = described["A"], described["B"]
    lines = [f"| {result['metric']} | A | B |", "|---|---:|---:|"]
    for key in ("mean", "median", "min", "max", "stddev"):
        lines.append(f"| {key} | {show(a[key])} | {show(b[key])} |")
    lines.append(f"| CV | {a['cv']:.2%} | {b['cv']:.2%} |")
    lines.append(f"| successful runs | {a['n']} | {b['n']} |")
    return lines + [""]


def usage_table(result):
    """Wall, CPU, peak RSS and minor faults beside the metric, whatever the verdict used."""
    a, b = result["usage_medians"]["A"], result["usage_medians"]["B"]
    if not a or not b:
        return []
    rows = [("wall", "wall_seconds", lambda v: f"{v:.4f} s"),
            ("CPU (user + sys)", "cpu_seconds", lambda v: f"{v:.4f} s"),
            ("peak RSS", "peak_rss_kb", machine.format_rss),
            ("minor page faults", "minflt", machine.format_count)]
    lines = ["| median of the runs | A | B | B / A |", "|---|---:|---:|---:|"]
    for title, key, show in rows:
        ratio = f"{b[key] / a[key]:.3f}" if a[key] else "—"
        lines.append(f"| {title} | {show(a[key])} | {show(b[key])} | {ratio} |")
    return lines + [""]


def comparison_lines(comparison):
    if not comparison:
        return []
    low, high = comparison["ci"]
    left_out = comparison["left_out"]
    burst = (f"; {len(left_out)} pair(s) left out as bursts (|ln ratio| > "
             f"{comparison['outlier_limit']:.3f}): {', '.join(str(i + 1) for i in left_out)}"
             if left_out else "; no pair left out as a burst")
    return [f"**Gain of B over A: {comparison['gain']:+.2%}** (95% CI {low:+.2%} … {high:+.2%}, "
            f"{comparison['ci_method']}, on {comparison['pairs']} pairs{burst}); "
            f"ratio of geometric means of all pairs {comparison['geomean_gain']:+.2%}",
            f"Significance: p = {comparison['p_value']:.4g} ({comparison['test']})"]


def perf_lines(perf):
    if not perf["requested"]:
        return []
    if perf["unavailable"]:
        return ["", f"perf unavailable: {perf['unavailable']}"]
    present = set(perf["medians"]["A"]) | set(perf["medians"]["B"])
    events = [e for e in PERF_EVENTS + ["instructions per op"] if e in present]
    lines = ["", "perf stat, medians:", "", "| counter | A | B | B / A |", "|---|---:|---:|---:|"]
    for event in events:
        a, b = perf["medians"]["A"].get(event), perf["medians"]["B"].get(event)
        shown = [f"{v:,.1f}" if v is not None else "—" for v in (a, b)]
        ratio = f"{b / a:.3f}" if a and b else "—"
        lines.append(f"| {event} | {shown[0]} | {shown[1]} | {ratio} |")
    return lines


def shown_target(report):
    command = f"`{shlex.join(report['command'])}`"
    if report.get("program"):
        return (f"program {report['program']} of the suite ({command} as run without a "
                f"preload; each side runs it under its own library)")
    return command


def ab_markdown(report):
    comparison = report["comparison"]
    values = [r["value"] for r in report["runs"] if r["value"] is not None]
    show = metric_formatter(report["metric"], median(values) if values else 0)
    lines = [f"# hakmem ab: {shown_target(report)}", "",
             f"- Date: {report['date']}; machine: {machine.machine_line(report['machine'])}",
             f"- A: {report['configs']['A']['describe']}",
             f"- B: {report['configs']['B']['describe']}",
             f"- The verdict uses the metric **{report['metric']}** ({report['metric_meaning']})",
             f"- {report['pairs']} pairs, A and B in a random order within each pair "
             f"(seed {report['seed']}; `--seed {report['seed']}` repeats the order)",
             f"- Command: `{report['invocation']}`", ""]
    lines += stats_table(report, show) + usage_table(report) + comparison_lines(comparison)
    rule = (f" (threshold {comparison['threshold']:+.1%}, alpha {comparison['alpha']})"
            if comparison else "")
    lines += ["", f"**Verdict: {report['verdict']}**{rule}: {report['reason']}"]
    lines += perf_lines(report["perf"])
    lines += ["", f"Pairs ({report['metric']}, in the order run):"]
    pairs = {}
    for r in report["runs"]:
        shown = show(r["value"]) if r["value"] is not None else r["status"]
        pairs.setdefault(r["pair"], []).append(f"{r['config']} {shown}")
    lines += [f"- {pair}: " + ", ".join(runs) for pair, runs in pairs.items()]
    return "\n".join(lines) + "\n"


def check_arguments(args):
    """(command, program names): a command after --, or the names given to --program."""
    command = args.command[1:] if args.command and args.command[0] == "--" else args.command
    programs = suites.split_names(args.program)
    if not command and not programs:
        raise UsageError("ab needs a command after -- (or --program NAME)")
    if command and programs:
        raise UsageError("give either a command after -- or --program NAME, not both")
    if programs and args.perf:
        raise UsageError("--perf counts a command, not a program of the suite")
    if args.aa and ab_suite.several(programs):
        raise UsageError("--aa takes one command or one program")
    if args.pairs < 1:
        raise UsageError("--pairs must be at least 1")
    if args.trials < 1:
        raise UsageError("--trials must be at least 1")
    if args.aa and (args.b or args.b_lib):
        raise UsageError("--aa runs A against itself: --b and --b-lib do not apply")
    return command, programs


def suite_program(name, build):
    return ab_suite.chosen_programs([name], build)[0]


@contextlib.contextmanager
def target(args, command, perf, program=None):
    """(command as shown, run_one(config)) for a command, or for a program of the suite
    with its input prepared once (untimed) and its output checked after every run."""
    if program is None:
        events = PERF_EVENTS if perf else None
        yield command, lambda config: run_command(command, config.settings, config.library,
                                                  args.timeout, events)
        return
    workroot = tempfile.mkdtemp(prefix="hakmem-ab-")
    try:
        print(f"preparing {program.name} ...", file=sys.stderr)
        workdir = suites.prepare_program(program, args.quick, workroot)
        shown, _ = program.command(workdir, None)
        yield shown, lambda config: suites.run_program(program, workdir, config.library,
                                                       args.timeout, config.settings)
    finally:
        shutil.rmtree(workroot, ignore_errors=True)


def write_results(folder, name, markdown, result, json_path, show=True):
    (folder / f"{name}.md").write_text(markdown)
    text = json.dumps(result, indent=1) + "\n"
    (folder / f"{name}.json").write_text(text)
    if json_path:
        Path(json_path).write_text(text)
    if show:
        print(markdown)
        print(f"results in {folder}/: {name}.md, {name}.json", file=sys.stderr)


def header(command, info, seed, program=None):
    return {"tool": "hakmem ab", "date": machine.now_iso(), "machine": info,
            "invocation": machine.invocation(), "command": command,
            "program": program.name if program else None, "seed": seed}


def compare(args, configs, info, seed, command, program=None, perf_problem=None):
    """The paired A/B of a command or of one program of the suite: the report's dict."""
    perf = args.perf and not perf_problem
    with target(args, command, perf, program) as (shown, run_one):
        progress = Progress(2 * args.pairs)
        sequence = run_pairs(configs, run_one, args.pairs, random.Random(seed), progress,
                             f"{program.name}: " if program else "")
        progress.finish()
    metric = resolve_metric(args.metric, [e["outcome"] for e in sequence])
    result = dict(header(shown, info, seed, program),
                  **ab_result(configs, shown, sequence, args, metric, seed))
    outcomes = {c.label: [e["outcome"] for e in sequence if e["config"] == c.label]
                for c in configs}
    result["perf"] = {"requested": args.perf, "unavailable": perf_problem,
                      "medians": {label: perf_medians(outs) for label, outs in outcomes.items()}
                      if perf else {}}
    return result


def compare_programs(args, configs, info, seed, names):
    """Several programs of the suite: each one's A/B (ab-NAME.md), then the table of them
    (suite.md: ab_suite.py). Exit status 1 if a run failed."""
    folder = machine.results_folder(args.out, "-ab")

    def compare_one(program):
        result = compare(args, configs, info, seed, None, program)
        write_results(folder, f"ab-{program.name}", ab_markdown(result), result, None,
                      show=False)
        return result

    reports = ab_suite.run_programs(names, args.build, compare_one)
    table = ab_suite.suite_result(reports, info, seed, args.pairs)
    write_results(folder, "suite", ab_suite.suite_markdown(table), table, args.json)
    return 0 if not any(any(r["failures"].values()) for r in reports) else 1


def cmd_ab(args):
    command, programs = check_arguments(args)
    configs = ab_configs(args)
    info = machine.machine_info()
    machine.warn_if_busy(info)
    seed = args.seed if args.seed is not None else random.SystemRandom().randrange(1, 10**6)
    print(f"hakmem ab: seed {seed}", file=sys.stderr)
    if ab_suite.several(programs):
        return compare_programs(args, configs, info, seed, programs)
    program = suite_program(programs[0], args.build) if programs else None
    perf_problem = perf_unavailable_reason() if args.perf and not args.aa else None
    if perf_problem:
        print(f"perf unavailable: {perf_problem}", file=sys.stderr)
    if args.aa:
        with target(args, command, False, program) as (shown, run_one):
            return run_aa(args, shown, configs, info, seed, run_one, program)
    result = compare(args, configs, info, seed, command, program, perf_problem)
    write_results(machine.results_folder(args.out, "-ab"), "ab", ab_markdown(result), result,
                  args.json)
    return 0 if not any(result["failures"].values()) else 1


def aa_trial(args, run_one, configs, seed, trial, progress):
    sequence = run_pairs(configs, run_one, args.pairs, random.Random(seed + trial), progress,
                         f"trial {trial + 1}: ")
    metric = resolve_metric(args.metric, [e["outcome"] for e in sequence])
    comparison, label, reason, failures = decide(sequence, metric, args.threshold / 100)
    return {"trial": trial + 1, "seed": seed + trial, "metric": metric, "verdict": label,
            "reason": reason, "gain": comparison["gain"] if comparison else None,
            "ci": comparison["ci"] if comparison else None,
            "p_value": comparison["p_value"] if comparison else None,
            "left_out": len(comparison["left_out"]) if comparison else None,
            "failures": failures, "runs": [run_record(e, metric) for e in sequence]}


def aa_markdown(result):
    trials = result["trials"]
    counts = {v: sum(t["verdict"] == v for t in trials) for v in ("GO", "NO-GO", "INCONCLUSIVE")}
    lines = [f"# hakmem ab --aa: {shown_target(result)}", "",
             f"- Date: {result['date']}; machine: {machine.machine_line(result['machine'])}",
             f"- A and B: {result['configs']['A']['describe']}; B differs only by "
             f"{AA_VARIABLE}=1",
             f"- {len(trials)} trials of {result['pairs']} pairs, A and B in a random order within "
             f"each pair (seed {result['seed']}, trial i uses seed + i - 1); "
             f"threshold {result['threshold']:+.1%}",
             f"- Command: `{result['invocation']}`", "",
             "| trial | metric | gain of B | 95% CI | p | bursts left out | verdict |",
             "|---:|---|---:|---:|---:|---:|---|"]
    for t in trials:
        if t["gain"] is None:
            lines.append(f"| {t['trial']} | {t['metric']} | — | — | — | — | {t['verdict']} |")
            continue
        lines.append(f"| {t['trial']} | {t['metric']} | {t['gain']:+.2%} | {t['ci'][0]:+.2%} … "
                     f"{t['ci'][1]:+.2%} | {t['p_value']:.3g} | {t['left_out']} | "
                     f"{t['verdict']} |")
    lines += ["", f"**False-GO rate: {counts['GO']}/{len(trials)} = "
              f"{counts['GO'] / len(trials):.1%}** (NO-GO {counts['NO-GO']}, INCONCLUSIVE "
              f"{counts['INCONCLUSIVE']}); A and B are the same, so every GO is a false one."]
    return "\n".join(lines) + "\n"


def run_aa(args, command, configs, info, seed, run_one, program=None):
    """--aa: `trials` A/A comparisons, each of `pairs` pairs; prints the false-GO rate."""
    progress = Progress(2 * args.pairs * args.trials)
    trials = [aa_trial(args, run_one, configs, seed, trial, progress)
              for trial in range(args.trials)]
    progress.finish()
    result = dict(header(command, info, seed, program), pairs=args.pairs,
                  threshold=args.threshold / 100, trials=trials,
                  configs={c.label: {"settings": c.settings, "library": c.library,
                                     "describe": c.describe()} for c in configs})
    result["false_go_rate"] = sum(t["verdict"] == "GO" for t in trials) / len(trials)
    write_results(machine.results_folder(args.out, "-aa"), "aa", aa_markdown(result), result,
                  args.json)
    return 0 if not any(any(t["failures"].values()) for t in trials) else 1
