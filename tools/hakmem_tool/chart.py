"""chart.png of a bench results folder: speed and peak RSS of every row against the
reference, with matplotlib (here or in the system's python3), else gnuplot.
Speed is throughput ÷ reference for bench/ rows and reference time ÷ time for programs,
so higher is faster in every bar."""

import json
import math
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from .report import summarize

PACKAGE_PARENT = Path(__file__).resolve().parent.parent


def chart_series(report):
    """Row labels, allocator names, and per allocator the speed and RSS ratios against the
    reference (None where a ratio is missing)."""
    table = summarize(report)
    rows = list(table)
    names = [a["name"] for a in report["allocators"]]

    def speed(row, name):
        value = table[row][name].get("ratio")
        if value is None or row[0] == "bench":
            return value
        return 1 / value

    labels = [name if suite == "bench" else f"{name} (program)" for suite, name in rows]
    ratios = {n: [speed(row, n) for row in rows] for n in names}
    rss = {n: [table[row][n].get("rss_ratio") for row in rows] for n in names}
    return labels, names, ratios, rss


def draw_with_matplotlib(report, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    labels, names, ratios, rss = chart_series(report)
    width = 0.8 / len(names)
    fig, axes = plt.subplots(2, 1, figsize=(max(10, 1.2 * len(labels)), 8), sharex=True)
    panels = ((axes[0], ratios, "speed"), (axes[1], rss, "peak RSS"))
    for axis, series, label in panels:
        for i, name in enumerate(names):
            xs = [x + (i - (len(names) - 1) / 2) * width for x in range(len(labels))]
            ys = [math.nan if v is None else v for v in series[name]]
            axis.bar(xs, ys, width, label=name)
        axis.axhline(1.0, color="black", linewidth=0.8)
        axis.set_ylabel(f"{label} ÷ {report['reference']}")
        axis.grid(axis="y", alpha=0.3)
    axes[0].legend(ncol=len(names), loc="lower center", bbox_to_anchor=(0.5, 1.0))
    axes[1].set_xticks(range(len(labels)))
    axes[1].set_xticklabels(labels, rotation=30, ha="right")
    fig.suptitle(f"hakmem bench {report['date']}: higher speed (throughput, or 1 / time for "
                 "programs) and lower RSS are better")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


GNUPLOT_SCRIPT = """\
set terminal png size 1400,900 noenhanced
set output '{output}'
set datafile missing '?'
set style data histograms
set style histogram clustered gap 1
set style fill solid 0.85 border -1
set key outside top center horizontal
set grid ytics
set yrange [0:*]
set xtics rotate by 30 right scale 0
set arrow from graph 0, first 1 to graph 1, first 1 nohead
set multiplot layout 2,1 title '{title}'
set ylabel 'speed / {reference} (programs: 1 / time)'
plot for [i=2:{last}] '{throughput}' using i:xtic(1) title columnheader(i)
set ylabel 'peak RSS / {reference}'
plot for [i=2:{last}] '{rss}' using i:xtic(1) title columnheader(i)
unset multiplot
"""


def draw_with_gnuplot(report, path):
    labels, names, ratios, rss = chart_series(report)
    with tempfile.TemporaryDirectory() as tmp:
        files = {}
        for label, series in (("throughput", ratios), ("rss", rss)):
            rows = ["row " + " ".join(names)]
            rows += ['"' + row + '" ' + " ".join("?" if series[n][i] is None
                                                 else f"{series[n][i]:.4f}" for n in names)
                     for i, row in enumerate(labels)]
            files[label] = Path(tmp) / f"{label}.dat"
            files[label].write_text("\n".join(rows) + "\n")
        script = Path(tmp) / "chart.gp"
        script.write_text(GNUPLOT_SCRIPT.format(
            output=path, title=f"hakmem bench {report['date']}", reference=report["reference"],
            last=len(names) + 1, throughput=files["throughput"], rss=files["rss"]))
        subprocess.run(["gnuplot", str(script)], check=True, capture_output=True)


def other_pythons():
    """Interpreters besides this one that may have matplotlib (the distribution's python3
    when a pyenv or venv python runs this tool)."""
    mine = os.path.realpath(sys.executable)
    return [p for p in ("/usr/bin/python3",) if Path(p).exists() and os.path.realpath(p) != mine]


def draw_in(python, folder):
    code = ("import sys; sys.path.insert(0, sys.argv[1]); from hakmem_tool.cli import main; "
            "sys.exit(main(['chart', sys.argv[2]]))")
    return subprocess.run([python, "-c", code, str(PACKAGE_PARENT), str(folder)],
                          capture_output=True, text=True)


def draw_chart(folder):
    """Draws folder/chart.png from folder/runs.json with matplotlib (here, or in the system
    python3), else gnuplot. Returns the method used, or None after printing how to get one."""
    report = json.loads((Path(folder) / "runs.json").read_text())
    path = Path(folder) / "chart.png"
    try:
        draw_with_matplotlib(report, path)
        return "matplotlib"
    except ImportError:
        pass
    for python in other_pythons():
        done = draw_in(python, folder)
        if done.returncode == 0 and path.exists():
            return f"{done.stdout.strip().rpartition(' ')[2]} via {python}"
    if shutil.which("gnuplot"):
        draw_with_gnuplot(report, path)
        return "gnuplot"
    print("no chart: neither matplotlib nor gnuplot is installed; "
          "`apt-get install python3-matplotlib` or `apt-get install gnuplot-nox` adds one",
          file=sys.stderr)
    return None


def cmd_chart(args):
    method = draw_chart(args.folder)
    if method is None:
        return 1
    print(f"chart: {Path(args.folder) / 'chart.png'} drawn with {method}")
    return 0
