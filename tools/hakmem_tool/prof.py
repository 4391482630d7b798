"""`hakmem prof FILE`: read a heap profile written by HAKMEM_PROF=1 (at exit, by
hak_prof_dump or on HAKMEM_PROF_SIGNAL), symbolize it with the mappings recorded in
it (addr2line, each inlined function a frame of its own; else nm), print the top
allocation sites by live and by total bytes, and write folded stacks for
flamegraph.pl.

The file (src/prof.c writes it):
    hakmem-prof 1
    sample_bytes T
    pid N
    # comment
    site LIVE_BYTES LIVE_COUNT TOTAL_BYTES TOTAL_COUNT LIVE_SAMPLES SAMPLES 0xADDR...
    maps
    <the lines of /proc/self/maps>
Frames are return addresses, the allocating function first. Bytes and counts are
estimates, already unbiased (each sample weighs 1 / its probability)."""

import bisect
import json
import os
import re
import shutil
import subprocess
import sys

from .errors import UsageError

# Leading frames of the allocator itself (the static library's are in the
# program; the shared library's are in libhakmem.so, dropped by the library).
ALLOCATOR_FRAME = re.compile(
    r"^(_?_hak_|hak_|malloc$|calloc$|realloc$|reallocarray$|free$|posix_memalign$|"
    r"aligned_alloc$|memalign$|valloc$|pvalloc$|operator new|route_alloc|large_alloc_retry|"
    r"aligned_alloc_pow2|cxx_new|new_failed|_Zn[wa]m)")


class Profile:
    def __init__(self, path):
        self.path = path
        self.sample_bytes = 0
        self.pid = 0
        self.sites = []          # dicts: live_bytes, live_count, total_bytes, total_count, ..., frames
        self.maps = []           # (start, end, offset, path)
        self.parse(path)

    def parse(self, path):
        try:
            with open(path, encoding="utf-8", errors="replace") as f:
                lines = f.read().splitlines()
        except OSError as error:
            raise UsageError(f"{path}: {error.strerror}") from error
        if not lines or not lines[0].startswith("hakmem-prof "):
            raise UsageError(f"{path}: not a hakmem heap profile (no 'hakmem-prof' header)")
        in_maps = False
        for line in lines[1:]:
            if in_maps:
                self.add_map(line)
                continue
            words = line.split()
            if not words or words[0].startswith("#"):
                continue
            if words[0] == "maps":
                in_maps = True
            elif words[0] == "sample_bytes":
                self.sample_bytes = int(words[1])
            elif words[0] == "pid":
                self.pid = int(words[1])
            elif words[0] == "site" and len(words) >= 7:
                numbers = [int(w) for w in words[1:7]]
                self.sites.append({
                    "live_bytes": numbers[0], "live_count": numbers[1],
                    "total_bytes": numbers[2], "total_count": numbers[3],
                    "live_samples": numbers[4], "samples": numbers[5],
                    "frames": [int(w, 16) for w in words[7:] if w not in ("(nil)", "0x0")]})

    def add_map(self, line):
        parts = line.split(None, 5)
        if len(parts) < 6 or not parts[5].startswith("/") or "x" not in parts[1]:
            return
        start, end = (int(x, 16) for x in parts[0].split("-"))
        self.maps.append((start, end, int(parts[2], 16), parts[5].strip()))


def elf_is_executable(path):
    """ET_EXEC (a non-PIE program): its addresses are absolute."""
    try:
        with open(path, "rb") as f:
            head = f.read(18)
    except OSError:
        return False
    return len(head) == 18 and head[:4] == b"\x7fELF" and int.from_bytes(head[16:18], "little") == 2


class Symbolizer:
    """Return addresses to "function (file:line)" through each object's file."""

    def __init__(self, maps):
        self.maps = sorted(maps)
        self.starts = [m[0] for m in self.maps]
        self.bases = {}
        for start, _end, offset, path in self.maps:
            self.bases[path] = min(self.bases.get(path, start - offset), start - offset)
        self.names = {}
        self.nm_tables = {}

    def locate(self, addr):
        i = bisect.bisect_right(self.starts, addr) - 1
        if i < 0 or addr >= self.maps[i][1]:
            return None, None
        path = self.maps[i][3]
        return path, addr if elf_is_executable(path) else addr - self.bases[path]

    def resolve(self, addresses):
        by_object = {}
        for addr in set(addresses):
            if addr in self.names:
                continue
            path, vaddr = self.locate(addr - 1)            # the call, not the return point
            if path is None:
                self.names[addr] = [(hex(addr), "")]
                continue
            by_object.setdefault(path, []).append((addr, vaddr))
        for path, items in by_object.items():
            for (addr, vaddr), chain in zip(items, self.addr2line(path, [v for _, v in items])):
                if chain[0][0] in ("??", ""):
                    func = self.nm_lookup(path, vaddr) or f"{os.path.basename(path)}+{vaddr:#x}"
                    chain = [(func, chain[0][1])]
                self.names[addr] = chain

    def addr2line(self, path, vaddrs):
        """For each address, its frames innermost first: the functions inlined
        at it, then the function that holds it (addr2line -i), each as
        (function, file:line)."""
        unknown = [[("??", "")] for _ in vaddrs]
        if not shutil.which("addr2line") or not os.path.exists(path):
            return unknown
        text = "\n".join(f"{v:#x}" for v in vaddrs) + "\n"
        try:
            done = subprocess.run(["addr2line", "-a", "-f", "-i", "-C", "-e", path], input=text,
                                  capture_output=True, text=True, timeout=120)
        except (OSError, subprocess.TimeoutExpired):
            return unknown
        chains, lines = [], done.stdout.splitlines()
        k = 0
        while k < len(lines):               # "0x..." then (function, file:line) pairs
            if not lines[k].startswith("0x"):
                return unknown
            k += 1
            chain = []
            while k + 1 < len(lines) and not lines[k].startswith("0x"):
                where = lines[k + 1]
                where = "" if where.startswith("??") else re.sub(r" \(discriminator \d+\)", "", where)
                chain.append((lines[k], os.path.basename(where)))
                k += 2
            chains.append(chain or [("??", "")])
        return chains if len(chains) == len(vaddrs) else unknown

    def nm_lookup(self, path, vaddr):
        table = self.nm_tables.get(path)
        if table is None:
            table = []
            for flags in (["-C", "-n", "--defined-only"], ["-C", "-n", "-D", "--defined-only"]):
                try:
                    done = subprocess.run(["nm", *flags, path], capture_output=True, text=True,
                                          timeout=120)
                except (OSError, subprocess.TimeoutExpired):
                    break
                for line in done.stdout.splitlines():
                    parts = line.split(None, 2)
                    if len(parts) == 3 and parts[1] in "tTwW":
                        table.append((int(parts[0], 16), parts[2]))
                if table:
                    break
            table.sort()
            self.nm_tables[path] = table
        i = bisect.bisect_right(table, (vaddr, "\uffff")) - 1
        return table[i][1] if i >= 0 else None

    def frames(self, addr):
        """The frames at return address addr, innermost first (more than one
        where functions were inlined there)."""
        return self.names.get(addr, [(hex(addr), "")])


def program_frames(frames, symbolizer):
    """The frames below the allocator's own: (function, file:line) pairs."""
    chains = [symbolizer.frames(a) for a in frames]
    first = 0                          # an address is the allocator's when its function is
    while first < len(chains) - 1 and ALLOCATOR_FRAME.match(chains[first][-1][0]):
        first += 1
    return [f for chain in chains[first:] for f in chain]


def aggregate(profile, symbolizer):
    """Sites grouped by their call stack of function names (one line of a
    function's allocations with another: the same site), most live bytes first."""
    groups = {}
    for site in profile.sites:
        frames = program_frames(site["frames"], symbolizer) or [("?", "")]
        key = tuple(f for f, _ in frames)
        g = groups.setdefault(key, {"function": key[0], "where": frames[0][1], "live_bytes": 0,
                                    "live_count": 0, "total_bytes": 0, "total_count": 0,
                                    "samples": 0, "callers": list(key[1:4]), "stack": list(key),
                                    "largest": -1})
        for field in ("live_bytes", "live_count", "total_bytes", "total_count", "samples"):
            g[field] += site[field]
        if site["total_bytes"] > g["largest"]:
            g["largest"] = site["total_bytes"]
            g["where"] = frames[0][1]
    return sorted(groups.values(), key=lambda g: -g["live_bytes"])


def human(n):
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= size:
            return f"{n / size:.1f} {unit}"
    return f"{n} B"


def print_table(title, groups, key, count_key, top):
    total = sum(g[key] for g in groups) or 1
    print(f"\n{title}")
    print(f"  {'bytes':>10} {'share':>6} {'blocks':>10}  site")
    for g in sorted(groups, key=lambda g: -g[key])[:top]:
        if not g[key]:
            continue
        where = f" ({g['where']})" if g["where"] else ""
        callers = "".join(f" < {c}" for c in g["callers"])
        print(f"  {human(g[key]):>10} {100 * g[key] / total:5.1f}% {g[count_key]:>10}  "
              f"{g['function']}{where}{callers}")


def write_folded(profile, symbolizer, out_path, key):
    """One line per stack: frames outermost first, ';'-separated, then the bytes."""
    folded = {}
    for site in profile.sites:
        frames = program_frames(site["frames"], symbolizer)
        if not frames or not site[key]:
            continue
        stack = ";".join(f.replace(";", ":").replace(" ", "_") for f, _ in reversed(frames))
        folded[stack] = folded.get(stack, 0) + site[key]
    with open(out_path, "w", encoding="utf-8") as f:
        for stack, value in sorted(folded.items()):
            f.write(f"{stack} {value}\n")
    return len(folded)


def cmd_prof(args):
    profile = Profile(args.file)
    symbolizer = Symbolizer(profile.maps)
    symbolizer.resolve([a for s in profile.sites for a in s["frames"]])
    groups = aggregate(profile, symbolizer)
    if args.json:
        json.dump({"pid": profile.pid, "sample_bytes": profile.sample_bytes,
                   "sites": [{k: v for k, v in g.items() if k != "largest"} for g in groups]},
                  sys.stdout, indent=1)
        print()
    else:
        live = sum(g["live_bytes"] for g in groups)
        total = sum(g["total_bytes"] for g in groups)
        print(f"{args.file}: pid {profile.pid}, 1 sample per {human(profile.sample_bytes)} on "
              f"average, {sum(s['samples'] for s in profile.sites)} samples, {len(groups)} sites; "
              f"estimated live {human(live)}, allocated {human(total)}")
        print_table("Top sites by live bytes (estimated):", groups, "live_bytes", "live_count",
                    args.top)
        print_table("Top sites by total allocated bytes (estimated):", groups, "total_bytes",
                    "total_count", args.top)
    if args.folded:
        n = write_folded(profile, symbolizer, args.folded, "total_bytes" if args.total else "live_bytes")
        print(f"\nwrote {n} folded stacks ({'total' if args.total else 'live'} bytes) to "
              f"{args.folded} (flamegraph.pl {args.folded} > heap.svg)",
              file=sys.stderr if args.json else sys.stdout)
    return 0


def add_prof_parser(sub):
    prof = sub.add_parser("prof", help="top allocation sites of a heap profile (HAKMEM_PROF=1)",
                          allow_abbrev=False)
    prof.add_argument("file", help="a profile: hakmem-prof.PID.heap, or HAKMEM_PROF_FILE")
    prof.add_argument("--top", type=int, default=20, help="sites per table (default 20)")
    prof.add_argument("--folded", metavar="OUT", help="write folded stacks for flamegraph.pl")
    prof.add_argument("--total", action="store_true",
                      help="folded stacks weigh total allocated bytes (default: live bytes)")
    prof.add_argument("--json", action="store_true", help="print the sites as JSON")
