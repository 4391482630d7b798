"""The Markdown report of `hakmem bench`: one table of both suites against the reference
allocator, the detail tables with absolute medians, the trim step, failures, commands."""

import math
import shlex

from .machine import format_count, format_rate, format_rss, machine_line
from .stats import median

# What each suite's ratio is: bench/ rows compare throughput, program rows wall time.
SUITE_TITLES = {
    "bench": ("bench/ programs", "throughput ÷ {ref}, higher is faster"),
    "programs": ("program suite", "time ÷ {ref}, lower is faster"),
}
TRIM_FIELDS = [("rss_before_kb", "RSS before"), ("rss_peak_kb", "at the peak"),
               ("rss_freed_kb", "after freeing all"), ("rss_trimmed_kb", "after malloc_trim(0)")]


def record_suite(record):
    return record.get("suite", "bench")


def rows_of(report):
    """(suite, name) of every benchmark and program, in the report's order."""
    return ([("bench", b["name"]) for b in report.get("benchmarks", [])]
            + [("programs", p["name"]) for p in report.get("programs", [])])


def cell_of(suite, runs):
    good = [r for r in runs if r["status"] == "ok"]
    cell = {"runs": len(runs), "ok": len(good),
            "failures": [r["status"] for r in runs if r["status"] != "ok"]}
    if not good:
        return cell
    key = "ops_per_sec" if suite == "bench" else "wall_seconds"
    values = [r[key] for r in good]
    cell.update(median=median(values), min=min(values), max=max(values),
                rss_kb=median([r["peak_rss_kb"] for r in good]))
    if suite == "programs":
        cell.update(cpu=median([r["user_seconds"] + r["sys_seconds"] for r in good]),
                    minflt=median([r["minflt"] for r in good]))
    return cell


def ratio(value, reference):
    return value / reference if reference else None


def summarize(report):
    """{(suite, name): {allocator: cell}} with medians and ratios against the reference."""
    table = {}
    for suite, name in rows_of(report):
        cells = {}
        for allocator in report["allocators"]:
            runs = [r for r in report["runs"] if r["benchmark"] == name
                    and record_suite(r) == suite and r["allocator"] == allocator["name"]]
            cells[allocator["name"]] = cell_of(suite, runs)
        reference = cells.get(report["reference"], {})
        for cell in cells.values():
            if "median" in cell and "median" in reference:
                cell["ratio"] = ratio(cell["median"], reference["median"])
                cell["rss_ratio"] = ratio(cell["rss_kb"], reference["rss_kb"])
                if suite == "programs":
                    cell["minflt_ratio"] = ratio(cell["minflt"], reference["minflt"])
        table[(suite, name)] = cells
    return table


def geomean_of(values):
    values = [v for v in values if v]
    return math.exp(sum(math.log(v) for v in values) / len(values)) if values else None


def ratio_text(cell):
    if "ratio" not in cell:
        return "—" if "median" in cell else "FAILED"
    extra = f"RSS {cell['rss_ratio']:.2f}"
    if cell.get("minflt_ratio") is not None:
        extra += f", faults {cell['minflt_ratio']:.2f}"
    return f"{cell['ratio']:.2f} ({extra})"


def geomean_text(cells):
    """The geometric means of a suite's ratios for one allocator."""
    usable = [c for c in cells if "ratio" in c]
    if not usable:
        return "—"
    text = f"{geomean_of([c['ratio'] for c in usable]):.2f}"
    extra = [f"RSS {geomean_of([c['rss_ratio'] for c in usable]):.2f}"]
    faults = [c["minflt_ratio"] for c in usable if c.get("minflt_ratio")]
    if faults:
        extra.append(f"faults {geomean_of(faults):.2f}")
    missing = f"; {len(usable)} of {len(cells)} rows" if len(usable) < len(cells) else ""
    return f"{text} ({', '.join(extra)}{missing})"


def ratio_table(report, table):
    """The one table: both suites, a geomean row each."""
    ref = report["reference"]
    names = [a["name"] for a in report["allocators"]]
    lines = [f"## Against {ref}", "",
             f"Ratios of medians against {ref}. bench/ rows: throughput ÷ {ref} (higher is "
             f"faster); program rows: wall time ÷ {ref} (lower is faster). In brackets: peak "
             f"RSS ÷ {ref} (lower is less memory) and, for programs, minor page faults ÷ {ref}.",
             "", "| | " + " | ".join(names) + " |", "|---|" + "---:|" * len(names)]
    for suite in ("bench", "programs"):
        rows = [(name, cells) for (s, name), cells in table.items() if s == suite]
        if not rows:
            continue
        title, what = SUITE_TITLES[suite]
        lines.append(f"| **{title}: {what.format(ref=ref)}** |" + " |" * len(names))
        for name, cells in rows:
            lines.append(f"| {name} | " + " | ".join(ratio_text(cells[n]) for n in names) + " |")
        lines.append(f"| *geomean, {title}* | "
                     + " | ".join(geomean_text([cells[n] for _, cells in rows]) for n in names)
                     + " |")
    return lines


def runs_text(cell):
    runs = f"{cell['ok']}/{cell['runs']}"
    if cell["failures"]:
        runs += " (" + ", ".join(sorted(set(cell["failures"]))) + ")"
    return runs


def ratio_or_dash(cell, key):
    return f"{cell[key]:.2f}" if cell.get(key) is not None else "—"


def bench_detail_cell(cell):
    """median, min–max, ratio, RSS, RSS ratio, runs — one row of the bench/ detail table."""
    if "median" not in cell:
        return ["FAILED", "—", "—", "—", "—", runs_text(cell)]
    return [format_rate(cell["median"]),
            f"{format_rate(cell['min'])} – {format_rate(cell['max'])}",
            ratio_or_dash(cell, "ratio"), format_rss(cell["rss_kb"]),
            ratio_or_dash(cell, "rss_ratio"), runs_text(cell)]


def program_detail_cell(cell):
    if "median" not in cell:
        return ["FAILED"] + ["—"] * 7 + [runs_text(cell)]
    return [f"{cell['median']:.3f}", f"{cell['min']:.3f} – {cell['max']:.3f}",
            ratio_or_dash(cell, "ratio"), f"{cell['cpu']:.3f}", format_rss(cell["rss_kb"]),
            ratio_or_dash(cell, "rss_ratio"), format_count(cell["minflt"]),
            ratio_or_dash(cell, "minflt_ratio"), runs_text(cell)]


def detail_tables(report, table):
    ref = report["reference"]
    lines = []
    bench_rows = [(name, cells) for (s, name), cells in table.items() if s == "bench"]
    if bench_rows:
        lines += ["## Details: bench/ programs", "",
                  f"| benchmark | allocator | median ops/s | min – max | vs {ref} | median peak "
                  f"RSS | RSS vs {ref} | runs ok |", "|---|---|---:|---:|---:|---:|---:|---|"]
        for name, cells in bench_rows:
            for allocator, cell in cells.items():
                lines.append(f"| {name} | {allocator} | "
                             + " | ".join(bench_detail_cell(cell)) + " |")
        lines.append("")
    program_rows = [(name, cells) for (s, name), cells in table.items() if s == "programs"]
    if program_rows:
        lines += ["## Details: program suite", "",
                  f"| program | allocator | median s | min – max | vs {ref} | CPU s | peak RSS "
                  f"| RSS vs {ref} | minor faults | faults vs {ref} | runs ok |",
                  "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---|"]
        for name, cells in program_rows:
            for allocator, cell in cells.items():
                lines.append(f"| {name} | {allocator} | "
                             + " | ".join(program_detail_cell(cell)) + " |")
        lines.append("")
    return lines


def failure_list(report):
    failed = [r for r in report["runs"] if r["status"] != "ok"]
    problems = report.get("program_failures", [])
    if not failed and not problems:
        return []
    lines = ["## Failed runs", ""] + [f"- **{problem}**" for problem in problems]
    for r in failed:
        last = r["stderr_tail"].splitlines()[-1] if r["stderr_tail"] else "no stderr"
        lines.append(f"- {r['benchmark']} / {r['allocator']}, round {r['round']}: "
                     f"**{r['status']}**: `{last}`")
    return lines + [""]


def trim_table(trim):
    if not trim:
        return []
    lines = ["## Memory back to the OS after a peak", "",
             f"`{shlex.join(trim['argv'])}` once under each allocator: blocks of 4–64 KiB up to "
             "the peak, all freed, then `malloc_trim(0)`. VmRSS:", "",
             "| allocator | " + " | ".join(label for _, label in TRIM_FIELDS) + " | trim returned |",
             "|---|" + "---:|" * (len(TRIM_FIELDS) + 1)]
    for row in trim["rows"]:
        if row["status"] != "ok":
            lines.append(f"| {row['allocator']} | "
                         + " | ".join([row["status"]] + ["—"] * len(TRIM_FIELDS)) + " |")
            continue
        cells = [format_rss(row[key]) if isinstance(row[key], int) else "—"
                 for key, _ in TRIM_FIELDS]
        lines.append(f"| {row['allocator']} | " + " | ".join(cells)
                     + f" | {row['trim_returned']} |")
    return lines + [""]


def describe_command(entry):
    env = " ".join(f"{k}={shlex.quote(v)}" for k, v in sorted(entry.get("env", {}).items()))
    return (env + " " if env else "") + shlex.join(entry["argv"])


def command_list(report):
    lines = ["## Commands", ""]
    if report.get("benchmarks"):
        lines += ["bench/ programs run as `LD_PRELOAD=<library> <command>` (glibc: no "
                  "LD_PRELOAD):", ""]
        lines += [f"- {b['name']}: `{shlex.join(b['argv'])}` ({b['about']})"
                  for b in report["benchmarks"]]
        lines.append("")
    if report.get("programs"):
        lines += ["Programs (shown as run under glibc; each program puts LD_PRELOAD where it "
                  "belongs, a server's driver only on the server), output checked after every "
                  "run:", ""]
        lines += [f"- {p['name']} ({p['threads']} thread{'s' if p['threads'] > 1 else ''}, "
                  f"{', '.join(p['packages'])}): `{describe_command(p)}` ({p['about']})"
                  for p in report["programs"]]
        lines.append("")
    return lines


def method_line(report):
    return (f"- Method: {report['runs_per_allocator']} runs per allocator and row, interleaved "
            "(every round runs each allocator once, in a rotated order); medians. Peak RSS: "
            "the program's VmHWM for bench/ programs, ru_maxrss of wait4 for programs (a "
            "server's driver reports its server's); minor faults: ru_minflt.")


def bench_markdown(report, with_chart):
    table = summarize(report)
    head = [f"# hakmem bench: {report['date']}", "",
            f"- Machine: {machine_line(report['machine'])}",
            f"- Command: `{report['command']}` ({report['elapsed_seconds'] / 60:.1f} min)",
            method_line(report), "- Allocators:"]
    head += [f"  - {a['name']}: {a['describe']}" for a in report["allocators"]]
    head += [f"  - not included: {note}" for note in report["notes"]]
    skipped = report.get("skipped_programs", [])
    if skipped:
        head += ["- Programs skipped:"] + [f"  - {note}" for note in skipped]
    chart = ["", "![speed and peak RSS](chart.png)", ""] if with_chart else [""]
    return "\n".join(head + [""] + ratio_table(report, table) + chart
                     + detail_tables(report, table) + trim_table(report.get("trim"))
                     + failure_list(report) + command_list(report)) + "\n"
