"""`hakmem ab --program NAME,NAME` (or `--program all`): one paired A/B per program of the
program suite, each run as `hakmem ab --program NAME` runs it (its own input, its output
checked, the same seed), then one table of them: each program's gain, interval, p and
verdict, its peak RSS and minor faults B / A, and the geometric mean of the gains and of
the ratios (every program weighs alike, as in `hakmem bench`'s geomean). The programs'
own reports go beside it in the results folder (ab-NAME.md, ab-NAME.json)."""

import sys

from . import machine, suites
from .errors import UsageError
from .report import geomean_of


def several(names):
    """Do these --program names ask for more than one A/B?"""
    return len(names) > 1 or names == ["all"]


def chosen_programs(names, build):
    """The installed programs of these names (all: of the suite); a missing one is named
    and skipped, and none at all is a usage error naming what is missing."""
    programs, notes = suites.select_programs([] if names == ["all"] else names, build)
    if not programs:
        raise UsageError("; ".join(notes) or "no program of the suite to compare")
    for note in notes:
        print(f"skipped {note}", file=sys.stderr)
    return programs


def ratio(result, key):
    a, b = result["usage_medians"]["A"], result["usage_medians"]["B"]
    return b[key] / a[key] if a and b and a.get(key) else None


def row(result):
    comparison = result["comparison"]
    return {"program": result["program"], "pairs": result["pairs"], "verdict": result["verdict"],
            "gain": comparison["gain"] if comparison else None,
            "ci": comparison["ci"] if comparison else None,
            "p_value": comparison["p_value"] if comparison else None,
            "rss_ratio": ratio(result, "peak_rss_kb"), "faults_ratio": ratio(result, "minflt")}


def summary(rows):
    """The geometric means over the programs: of 1 + gain (minus 1), and of the ratios."""
    gain = geomean_of([1 + r["gain"] for r in rows if r["gain"] is not None])
    return {"gain": gain - 1 if gain is not None else None,
            "rss_ratio": geomean_of([r["rss_ratio"] for r in rows]),
            "faults_ratio": geomean_of([r["faults_ratio"] for r in rows])}


def shown(value, form):
    return format(value, form) if value is not None else "—"


def suite_markdown(result):
    rows, mean = result["rows"], result["geomean"]
    first = result["reports"][0]
    lines = [f"# hakmem ab: {len(rows)} programs of the program suite", "",
             f"- Date: {result['date']}; machine: {machine.machine_line(result['machine'])}",
             f"- A: {first['configs']['A']['describe']}",
             f"- B: {first['configs']['B']['describe']}",
             f"- {result['pairs']} pairs per program, A and B in a random order within each pair "
             f"(seed {result['seed']} for every program); each program's own report: "
             f"ab-NAME.md",
             f"- Command: `{result['invocation']}`", "",
             "| program | pairs | gain of B | 95% CI | p | verdict | peak RSS B / A | "
             "faults B / A |", "|---|---:|---:|---:|---:|---|---:|---:|"]
    for r in rows:
        ci = f"{r['ci'][0]:+.2%} … {r['ci'][1]:+.2%}" if r["ci"] else "—"
        lines.append(f"| {r['program']} | {r['pairs']} | {shown(r['gain'], '+.2%')} | {ci} | "
                     f"{shown(r['p_value'], '.3g')} | {r['verdict']} | "
                     f"{shown(r['rss_ratio'], '.3f')} | {shown(r['faults_ratio'], '.3f')} |")
    lines.append(f"| *geometric mean* | | {shown(mean['gain'], '+.2%')} | | | | "
                 f"{shown(mean['rss_ratio'], '.3f')} | {shown(mean['faults_ratio'], '.3f')} |")
    better = [r["program"] for r in rows if r["p_value"] is not None and r["p_value"] < 0.05
              and r["gain"] > 0]
    worse = [r["program"] for r in rows if r["p_value"] is not None and r["p_value"] < 0.05
             and r["gain"] < 0]
    lines += ["", f"Significant (p < 0.05): B better on {', '.join(better) or 'none'}; "
              f"B worse on {', '.join(worse) or 'none'}. Each program's verdict is its own; "
              "the geometric mean is a summary, not a test."]
    return "\n".join(lines) + "\n"


def run_programs(names, build, compare_one):
    """compare_one(program) for every chosen program (in the order named; all: the suite's
    order): their reports."""
    reports = []
    for program in chosen_programs(names, build):
        result = compare_one(program)
        r = row(result)
        print(f"{program.name}: {shown(r['gain'], '+.2%')} (p {shown(r['p_value'], '.3g')}) "
              f"{r['verdict']}", file=sys.stderr)
        reports.append(result)
    return reports


def suite_result(reports, info, seed, pairs):
    rows = [row(r) for r in reports]
    return {"tool": "hakmem ab", "date": machine.now_iso(), "machine": info,
            "invocation": machine.invocation(), "seed": seed, "pairs": pairs,
            "rows": rows, "geomean": summary(rows), "reports": reports}
