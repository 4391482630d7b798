"""The machine a result was measured on, the results folder, and number formats."""

import datetime
import os
import platform
import shlex
import sys
from pathlib import Path


def cpu_model():
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            key, _, value = line.partition(":")
            if key.strip() in ("model name", "Model", "Hardware"):
                return value.strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def memory_total():
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return f"{int(line.split()[1]) / 1024 / 1024:.1f} GiB RAM"
    except OSError:
        pass
    return "RAM unknown"


def machine_info():
    libc_name, libc_version = platform.libc_ver()
    return {"cpu": cpu_model(), "cpus": os.cpu_count(), "memory": memory_total(),
            "uname": " ".join(os.uname()), "libc": f"{libc_name} {libc_version}".strip(),
            "python": platform.python_version(), "load_average": os.getloadavg()[0]}


def machine_line(info):
    return (f"{info['cpu']} × {info['cpus']} CPUs, {info['memory']}, {info['libc']}, "
            f"load average {info['load_average']:.2f} at the start; `{info['uname']}`")


def warn_if_busy(info):
    if info["load_average"] > 0.5 * info["cpus"]:
        print(f"note: load average {info['load_average']:.2f} on {info['cpus']} CPUs: "
              "other work is running and the numbers will be noisy", file=sys.stderr)


def timestamp():
    return datetime.datetime.now().strftime("%Y%m%d-%H%M%S")


def now_iso():
    return datetime.datetime.now().isoformat(timespec="seconds")


def results_folder(requested, suffix=""):
    folder = Path(requested) if requested else Path("results") / (timestamp() + suffix)
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def invocation():
    """The command line of this tool, quoted for a shell."""
    return shlex.join(["hakmem"] + sys.argv[1:])


def _scaled(value, k_from, k_digits):
    """value with an M or k suffix: M from a million, k from k_from."""
    if value >= 1e6:
        return f"{value / 1e6:.2f} M"
    if value >= k_from:
        return f"{value / 1e3:.{k_digits}f} k"
    return f"{value:.0f}"


def format_rate(value):
    return _scaled(value, 1e3, 2)


def format_rss(kb):
    return f"{kb / 1024:.1f} MiB"


def format_count(value):
    return _scaled(value, 1e4, 1)
