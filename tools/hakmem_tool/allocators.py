"""Finding the allocators: hakmem (the build's or the installed library), the C library's
malloc, and the peers installed from Debian packages."""

import os
import platform
import subprocess
from dataclasses import dataclass
from pathlib import Path

from .errors import UsageError

# The package lives in tools/hakmem_tool (source tree) or PREFIX/lib/hakmem/hakmem_tool.
PACKAGE_DIR = Path(__file__).resolve().parent

# name, library file names to look for (first found wins), Debian packages that add it
PEERS = [
    ("mimalloc",
     ["libmimalloc.so.2", "libmimalloc.so.2.*", "libmimalloc.so.3", "libmimalloc.so.3.*"],
     "libmimalloc2.0 (or libmimalloc-dev)"),
    ("jemalloc", ["libjemalloc.so.2"], "libjemalloc2 (or libjemalloc-dev)"),
    ("tcmalloc", ["libtcmalloc_minimal.so.4", "libtcmalloc.so.4"],
     "libtcmalloc-minimal4 (or libgoogle-perftools-dev)"),
]
NO_PRELOAD_NAMES = ("glibc", "none", "libc")


@dataclass
class Allocator:
    name: str
    library: str = None  # None: the C library's own malloc (no LD_PRELOAD)

    def describe(self):
        if self.library is None:
            return "C library malloc (no LD_PRELOAD)"
        real = os.path.realpath(self.library)
        return self.library if real == self.library else f"{self.library} (-> {real})"


def source_root():
    """The repository's root when the package runs from tools/hakmem_tool, else None."""
    root = PACKAGE_DIR.parent.parent
    return root if (root / "tools" / "hakmem_tool").is_dir() else None


def default_build():
    root = source_root()
    return str(root / "build") if root else None


def library_dirs():
    """Where Debian and local installs put shared libraries; this machine's multiarch first."""
    own = f"/usr/lib/{platform.machine()}-linux-gnu"
    multiarch = sorted(d for d in map(str, Path("/usr/lib").glob("*-linux-gnu")) if d != own)
    return [own] + multiarch + ["/usr/local/lib", "/usr/lib64", "/usr/lib"]


def preload_works(library):
    """True when the dynamic loader accepts `library` in LD_PRELOAD (right architecture...)."""
    env = dict(os.environ, LD_PRELOAD=library)
    try:
        done = subprocess.run(["true"], env=env, capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return done.returncode == 0 and "cannot be preloaded" not in done.stderr


def find_peer(patterns):
    for directory in library_dirs():
        for pattern in patterns:
            for candidate in sorted(map(str, Path(directory).glob(pattern))):
                if preload_works(candidate):
                    return candidate
    return None


def hakmem_library(build=None):
    """libhakmem.so of --build DIR, else of the source tree (tools/../build) or of the
    install prefix (PREFIX/lib/hakmem/hakmem_tool -> PREFIX/lib); None when there is none."""
    if build:
        candidates = [Path(build) / "libhakmem.so"]
    else:
        candidates = [PACKAGE_DIR.parent.parent / "build" / "libhakmem.so",
                      PACKAGE_DIR.parent.parent / "libhakmem.so"]
    return next((str(c) for c in candidates if c.is_file()), None)


def resolve_library(spec, build):
    """An allocator given on the command line: glibc/none, hakmem, a peer name or a path."""
    if spec in NO_PRELOAD_NAMES:
        return None
    if spec == "hakmem":
        found = hakmem_library(build)
        if not found:
            raise UsageError("libhakmem.so not found: build it with `make` or pass --build DIR")
        return found
    for name, patterns, package in PEERS:
        if spec == name:
            found = find_peer(patterns)
            if not found:
                raise UsageError(f"{name} not found: apt-get install {package}")
            return found
    if not Path(spec).is_file():
        raise UsageError(f"no such library: {spec}")
    return os.path.abspath(spec)


def discover_allocators(build, extra_libs):
    """hakmem (when built), glibc, the installed peers and --lib NAME=PATH entries, plus
    a note for each one missing."""
    found, notes = [], []
    hakmem = hakmem_library(build)
    if hakmem:
        found.append(Allocator("hakmem", hakmem))
    else:
        notes.append(f"hakmem: no libhakmem.so in {build or 'build'}; run `make` to include it")
    found.append(Allocator("glibc"))
    for name, patterns, package in PEERS:
        library = find_peer(patterns)
        if library:
            found.append(Allocator(name, library))
        else:
            notes.append(f"{name}: not installed; `apt-get install {package}` adds it")
    for spec in extra_libs:
        name, _, path = spec.partition("=")
        if not name or not Path(path).is_file():
            raise UsageError(f"--lib wants NAME=PATH of an existing library, got {spec!r}")
        found.append(Allocator(name, os.path.abspath(path)))
    return found, notes


def select_allocators(found, names):
    if not names:
        return found
    by_name = {a.name: a for a in found}
    missing = [n for n in names if n not in by_name]
    if missing:
        raise UsageError(f"allocator {', '.join(missing)} not available; "
                         f"found: {', '.join(by_name)}")
    return [by_name[n] for n in names]


def reference_allocator(names):
    """Ratios are taken against mimalloc, or glibc when mimalloc is absent."""
    for preferred in ("mimalloc", "glibc"):
        if preferred in names:
            return preferred
    return names[0]
