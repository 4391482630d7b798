"""Running one command under one allocator, and measuring it.

Every run is measured by wait4(2): wall seconds, user and system CPU seconds, peak RSS
(ru_maxrss, KiB) and minor page faults (ru_minflt). Linux carries a process's ru_maxrss
over exec, and a child forked from this Python process starts with Python's own peak, so
the command is not this process's child: a small shell forks it and exits, and this
process, a child subreaper (prctl PR_SET_CHILD_SUBREAPER), adopts it and waits for it.
Its peak then starts from the shell's (about 1 MiB), not from Python's.

A program may report its own figures on the last stdout line that starts with `bench=`:
its seconds=, peak_rss_kb=, minflt=, user_seconds= and sys_seconds= replace the measured
values (a server's driver reports its server's usage; a benchmark the time of its loop)."""

import contextlib
import ctypes
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

PR_SET_CHILD_SUBREAPER = 36
STDOUT_TAIL_BYTES = 65536
USAGE_KEYS = {"seconds": "wall", "peak_rss_kb": "peak_rss_kb", "minflt": "minflt",
              "user_seconds": "user", "sys_seconds": "sys"}
# The shell forks the command in the background and tells its pid; the command waits for
# a line on the go pipe, written once the shell is gone (a shell may reap a job that ends
# while it still runs), then closes both pipes and execs.
LAUNCHER = '(read -r _ <&{go}; exec "$@" {pid}>&- {go}<&-) <&0 & echo $! >&{pid}'


@dataclass
class Usage:
    wall: float = 0.0        # seconds
    user: float = 0.0        # CPU seconds in user mode
    sys: float = 0.0         # CPU seconds in the kernel
    peak_rss_kb: int = 0     # ru_maxrss
    minflt: int = 0          # minor page faults

    @property
    def cpu(self):
        return self.user + self.sys

    def as_dict(self):
        return {"wall_seconds": round(self.wall, 6), "user_seconds": round(self.user, 6),
                "sys_seconds": round(self.sys, 6), "peak_rss_kb": self.peak_rss_kb,
                "minflt": self.minflt}


@dataclass
class Outcome:
    status: str                  # "ok", "exit N", "signal SIGSEGV", "timeout", "preload failed"
    usage: Usage = field(default_factory=Usage)
    fields: dict = field(default_factory=dict)  # key=value pairs of the result line
    stderr_tail: str = ""
    perf: dict = field(default_factory=dict)    # event -> count

    @property
    def ok(self):
        return self.status == "ok"

    @property
    def wall(self):
        return self.usage.wall


def parse_value(text):
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return text


def parse_result_line(output):
    """The key=value pairs of the last line of `output` that reports ops_per_sec (or, for
    benchmarks that measure memory only, starts with bench=)."""
    for line in reversed(output.splitlines()):
        if "ops_per_sec=" in line or line.startswith("bench="):
            pairs = (token.split("=", 1) for token in line.split() if "=" in token)
            return {key: parse_value(value) for key, value in pairs}
    return {}


def apply_reported_usage(usage, fields):
    """The program's own figures from a bench= line replace the measured ones."""
    if "bench" not in fields:
        return
    for key, attribute in USAGE_KEYS.items():
        if isinstance(fields.get(key), (int, float)):
            setattr(usage, attribute, fields[key])


def child_environment(settings, library):
    """This process's environment without LD_PRELOAD, plus `settings`, plus `library`
    preloaded (None: nothing preloaded)."""
    env = dict(os.environ)
    env.pop("LD_PRELOAD", None)
    env.update(settings)
    if library:
        env["LD_PRELOAD"] = library
    return env


def exit_status(returncode, stderr, timed_out):
    if timed_out:
        return "timeout"
    if "cannot be preloaded" in stderr:
        return "preload failed"
    if returncode < 0:
        try:
            return f"signal {signal.Signals(-returncode).name}"
        except ValueError:
            return f"signal {-returncode}"
    return "ok" if returncode == 0 else f"exit {returncode}"


_subreaper = []


def become_subreaper():
    """True once this process adopts its orphaned descendants (Linux 3.4 and later)."""
    if not _subreaper:
        try:
            libc = ctypes.CDLL(None, use_errno=True)
            _subreaper.append(libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0)
        except (OSError, AttributeError):
            _subreaper.append(False)
    return _subreaper[0]


def start(argv, env, stdout, stderr):
    """Starts argv in a new session; returns (process group, pid to wait for)."""
    if not become_subreaper():
        child = subprocess.Popen(argv, env=env, stdout=stdout, stderr=stderr,
                                 start_new_session=True)
        child.returncode = 0  # reaped by wait4 below, not by Popen
        return child.pid, child.pid
    pid_read, pid_write = os.pipe()
    go_read, go_write = os.pipe()
    try:
        shell = subprocess.Popen(
            ["/bin/sh", "-c", LAUNCHER.format(pid=pid_write, go=go_read), "sh", *argv],
            env=env, stdout=stdout, stderr=stderr, pass_fds=(pid_write, go_read),
            start_new_session=True)
        os.close(pid_write)
        os.close(go_read)
        pid_write = go_read = None
        pid = int(os.read(pid_read, 64).decode().strip())
        os.waitpid(shell.pid, 0)
        shell.returncode = 0
        os.write(go_write, b"\n")
    finally:
        for fd in (pid_read, pid_write, go_read, go_write):
            if fd is not None:
                os.close(fd)
    return shell.pid, pid


def kill_group(group):
    try:
        os.killpg(group, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def reap_group(group):
    """Kills what the command left running in its group and reaps what was adopted."""
    kill_group(group)
    while True:
        try:
            pid, _ = os.waitpid(-group, 0)
        except ChildProcessError:
            return
        if pid == 0:
            return


def tail_text(path, limit):
    with open(path, "rb") as handle:
        handle.seek(0, os.SEEK_END)
        size = handle.tell()
        handle.seek(max(0, size - limit))
        return handle.read().decode(errors="replace")


def execute(argv, env, timeout, stdout_path=None):
    """Runs argv once, measured; kills its whole process group when it outlives `timeout`
    seconds. Its stdout goes to stdout_path (a temporary file when None)."""
    with tempfile.TemporaryDirectory(prefix="hakmem-run-") as tmp:
        out_path = Path(stdout_path) if stdout_path else Path(tmp) / "stdout"
        err_path = Path(tmp) / "stderr"
        with open(out_path, "wb") as out, open(err_path, "wb") as err:
            began = time.perf_counter()
            try:
                group, pid = start(argv, env, out, err)
            except (OSError, ValueError) as error:
                return Outcome(f"cannot run: {getattr(error, 'strerror', None) or error}")
            timed_out = threading.Event()
            timer = threading.Timer(timeout, lambda: (timed_out.set(), kill_group(group)))
            timer.start()
            try:
                _, status, rusage = os.wait4(pid, 0)
            finally:
                timer.cancel()
            wall = time.perf_counter() - began
            reap_group(group)
        stderr = err_path.read_text(errors="replace")
        fields = parse_result_line(tail_text(out_path, STDOUT_TAIL_BYTES))
    usage = Usage(wall, rusage.ru_utime, rusage.ru_stime, rusage.ru_maxrss, rusage.ru_minflt)
    apply_reported_usage(usage, fields)
    tail = "\n".join(stderr.strip().splitlines()[-5:])
    returncode = os.waitstatus_to_exitcode(status)
    return Outcome(exit_status(returncode, stderr, timed_out.is_set()), usage, fields, tail)


@contextlib.contextmanager
def fresh_copy(library):
    """A copy of `library` made for one run, in a folder of its own under the same name,
    removed after it (None stays None). The same bytes run at different speeds from
    different files: the physical pages the page cache gave a file's code stay until the
    file leaves the cache, and larson ran 24-31% apart from two files of one build
    (docs/experiments.md, "The same library from two files"). A copy per run makes that a
    draw of each run, the same for every side, instead of a bias of one side."""
    if not library:
        yield library
        return
    folder = tempfile.mkdtemp(prefix="hakmem-lib-")
    try:
        copy = Path(folder) / Path(library).name
        shutil.copyfile(library, copy)
        yield str(copy)
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def run_command(argv, settings=None, library=None, timeout=60, perf_events=None,
                stdout_path=None):
    """Runs argv with the environment `settings` and `library` preloaded (None: the C
    library's malloc), from a fresh copy of it; under `perf stat -e perf_events` when
    those are given."""
    with fresh_copy(library) as copy:
        env = child_environment(settings or {}, copy)
        if not perf_events:
            return execute(argv, env, timeout, stdout_path)
        with tempfile.NamedTemporaryFile("r", suffix=".perf") as perf_file:
            preload = [f"LD_PRELOAD={copy}"] if copy else []
            wrapped = (["perf", "stat", "-x,", "-o", perf_file.name, "-e", ",".join(perf_events),
                        "--", "env"] + preload + list(argv))
            env.pop("LD_PRELOAD", None)  # perf itself runs on the C library's malloc
            outcome = execute(wrapped, env, timeout, stdout_path)
            outcome.perf = parse_perf(perf_file.read())
        return outcome


# ==== perf ============================================================================

PERF_EVENTS = ["cycles", "instructions", "cache-misses", "L1-dcache-load-misses"]


def parse_perf(text):
    """Counts from `perf stat -x,` output: value,unit,event,... ; uncounted events are left out."""
    counts = {}
    for line in text.splitlines():
        parts = line.split(",")
        if len(parts) >= 3 and re.fullmatch(r"[0-9.]+", parts[0]):
            counts[parts[2].split(":")[0]] = float(parts[0])
    return counts


def perf_unavailable_reason():
    """None when `perf stat` can count instructions here, else why not."""
    if not shutil.which("perf"):
        return "perf is not installed (apt-get install linux-perf)"
    try:
        done = subprocess.run(["perf", "stat", "-x,", "-e", "instructions", "true"],
                              capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as error:
        return f"perf failed to run: {error}"
    if "instructions" in parse_perf(done.stderr):
        return None
    first = (done.stderr.strip().splitlines() or ["no output"])[0]
    return f"perf cannot count instructions here ({first})"


class Progress:
    """One status line on stderr: rewritten in place on a terminal, one line per step otherwise."""

    def __init__(self, total):
        self.total, self.done, self.start = total, 0, time.monotonic()
        self.live = sys.stderr.isatty()

    def step(self, text):
        self.done += 1
        elapsed = time.monotonic() - self.start
        left = elapsed / self.done * (self.total - self.done)
        line = (f"[{self.done:>3}/{self.total}  {elapsed / 60:4.1f} min, "
                f"~{left / 60:.1f} min left] {text}")
        if self.live:
            sys.stderr.write("\r\033[K" + line)
        else:
            sys.stderr.write(line + "\n")
        sys.stderr.flush()

    def finish(self):
        if self.live:
            sys.stderr.write("\n")
