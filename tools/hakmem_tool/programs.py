"""The program suite: real, allocation-heavy programs from Debian, each run on a
generated input under any allocator (LD_PRELOAD), its output checked.

Install every program of the suite with one command:

    apt-get install -y jq libxml2-utils perl ruby lua5.4 gawk g++ clang memcached python3 sqlite3

(the memcached client, build/bench/memcached_load, is built by `make benches`).

Each Program has `name`, `about`, `packages` (the Debian packages that provide
it) and `threads` (the threads it runs), and four methods:
  missing()                  None when runnable, else one line: what is missing, and the apt-get line
  prepare(workdir, quick)    writes the seeded input and the reference for the check (untimed)
  command(workdir, library)  argv and extra environment of one timed run under `library`
                             (None: glibc); LD_PRELOAD is put where it belongs here
  check(workdir, stdout)     None when the run's output is right, else a one-line reason
                             (by default: stdout equals the expected.txt prepare wrote)
Every input is generated from a fixed seed; every reference is computed by the
generator itself, except memcached's, which is one untimed run under glibc (the
client checks every answer itself; the reference pins the counts and digest).
Files a program writes in its workdir start with its name. `BUILD_DIR` is
where the memcached client is looked for (`<BUILD_DIR>/bench/memcached_load`).
"""
import collections
import json
import random
import re
import shutil
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
BUILD_DIR = ROOT / "build"
SCRIPTS = ROOT / "bench" / "programs"
LETTERS = "abcdefghijklmnopqrstuvwxyz"
SEED = 17


def _preload(library):
    return {"LD_PRELOAD": library} if library else {}


def _word(rng, lo=3, hi=10):
    return "".join(rng.choices(LETTERS, k=rng.randint(lo, hi)))


def _first_difference(got, want):
    """A one-line description of where two texts first differ."""
    got_lines, want_lines = got.splitlines(), want.splitlines()
    for number, (a, b) in enumerate(zip(got_lines, want_lines), 1):
        if a != b:
            return f"line {number} is {a[:80]!r}, expected {b[:80]!r}"
    return f"{len(got_lines)} lines, expected {len(want_lines)}"


class Program:
    """What every program shares: the executables it needs and the install line."""
    name = ""
    about = ""
    packages = ()
    threads = 1
    executables = ()

    def missing(self):
        for executable in self.executables:
            if not shutil.which(executable):
                return f"`{executable}` is not installed: apt-get install -y {' '.join(self.packages)}"
        return None

    def prepare(self, workdir, quick):
        self.generate(Path(workdir), quick)

    def file(self, workdir, suffix):
        return Path(workdir) / f"{self.name}.{suffix}"

    def check(self, workdir, stdout_path):
        """The default check: stdout is exactly the expected.txt the generator wrote."""
        got = Path(stdout_path).read_text(errors="replace")
        want = self.file(workdir, "expected.txt").read_text()
        return None if got == want else _first_difference(got, want)

    def __repr__(self):
        return f"<program {self.name}>"


# ---- word statistics: perl (threads), ruby, lua, gawk ---------------------------------

class WordStats(Program):
    """One of the bench/programs/wordstats.* scripts: word and word-pair frequencies, and
    the number of distinct lines once their words are sorted, of a generated text (lines
    of words drawn, skewed, from a seeded vocabulary); the expected output is computed
    here."""
    VOCABULARY = 40000

    def __init__(self, name, about, packages, interpreter, script, lines, quick_lines, threads=1):
        self.name, self.about, self.packages = name, about, packages
        self.interpreter = interpreter          # argv before the script's path
        self.executables = (interpreter[0],)
        self.script, self.lines, self.quick_lines, self.threads = script, lines, quick_lines, threads

    def generate(self, workdir, quick):
        lines = self.quick_lines if quick else self.lines
        rng = random.Random(SEED)
        vocab = [_word(rng, 2, 12) for _ in range(self.VOCABULARY)]
        words, pairs, shapes, total = collections.Counter(), collections.Counter(), set(), 0
        with open(self.file(workdir, "input.txt"), "w") as out:
            for _ in range(lines):
                line = [vocab[int(self.VOCABULARY * rng.random() ** 3)]
                        for _ in range(rng.randint(4, 16))]
                out.write(" ".join(line) + "\n")
                total += len(line)
                words.update(line)
                pairs.update(a + " " + b for a, b in zip(line, line[1:]))
                shapes.add(",".join(sorted(line)))
        expected = [f"lines {lines}", f"words {total}", f"distinct {len(words)}",
                    f"pairs {len(pairs)}", f"shapes {len(shapes)}"]
        for label, counts in (("word", words), ("pair", pairs)):
            ranked = sorted(counts.items(), key=lambda item: (-item[1], item[0]))[:10]
            expected += [f"{label} {key} {count}" for key, count in ranked]
        self.file(workdir, "expected.txt").write_text("\n".join(expected) + "\n")

    def command(self, workdir, library):
        argv = [*self.interpreter, str(SCRIPTS / self.script), str(self.file(workdir, "input.txt"))]
        if self.threads > 1:
            argv.append(str(self.threads))
        return argv, {"LC_ALL": "C", **_preload(library)}


# ---- jq over a large JSON document ------------------------------------------------

class Jq(Program):
    name = "jq"
    about = "jq grouping and summarising a generated JSON array of records (parse, group_by, unique)"
    packages = ("jq",)
    executables = ("jq",)
    FILTER = ("group_by(.group) | map({group: .[0].group, n: length, score: (map(.score) | add), "
              "tags: ([.[].tags[]] | unique | length), "
              "events: ([.[].history[] | select(.ok)] | length), "
              "names: (map(.name) | join(\",\") | length)}) | .[]")

    def generate(self, workdir, quick):
        rng = random.Random(SEED)
        tagset = [_word(rng) for _ in range(500)]
        groups = {}
        with open(self.file(workdir, "input.json"), "w") as out:
            out.write("[")
            for i in range(10000 if quick else 50000):
                record = {"id": i, "name": _word(rng) + "-" + _word(rng),
                          "group": "g%d" % int(64 * rng.random() ** 2),
                          "score": rng.randint(0, 10**6),
                          "tags": [rng.choice(tagset) for _ in range(rng.randint(0, 6))],
                          "history": [{"t": rng.randint(0, 10**9), "v": _word(rng),
                                       "ok": rng.random() < 0.5}
                                      for _ in range(rng.randint(0, 4))]}
                out.write(("," if i else "") + json.dumps(record, separators=(",", ":")) + "\n")
                groups.setdefault(record["group"], []).append(record)
            out.write("]\n")
        expected = [{"group": g, "n": len(rs), "score": sum(r["score"] for r in rs),
                     "tags": len({t for r in rs for t in r["tags"]}),
                     "events": sum(h["ok"] for r in rs for h in r["history"]),
                     "names": len(",".join(r["name"] for r in rs))}
                    for g, rs in sorted(groups.items())]
        self.file(workdir, "expected.json").write_text(json.dumps(expected))

    def command(self, workdir, library):
        return ["jq", "-c", self.FILTER, str(self.file(workdir, "input.json"))], _preload(library)

    def check(self, workdir, stdout_path):
        return self.check_groups(workdir, Path(stdout_path).read_text().splitlines())

    def check_groups(self, workdir, lines):
        """None when `lines` are the expected groups as JSON, else a one-line reason."""
        want = json.loads(self.file(workdir, "expected.json").read_text())
        try:
            got = [json.loads(line) for line in lines]
        except ValueError as error:
            return f"output is not JSON lines: {error}"
        if got == want:
            return None
        for number, (a, b) in enumerate(zip(got, want), 1):
            if a != b:
                return f"group {number} is {json.dumps(a)[:100]}, expected {json.dumps(b)[:100]}"
        return f"{len(got)} groups, expected {len(want)}"


# ---- xmllint over a large XML document ------------------------------------------------

class Xmllint(Program):
    name = "xmllint"
    about = "xmllint (libxml2) parsing a generated XML catalogue into a tree and summing it by XPath"
    packages = ("libxml2-utils",)
    executables = ("xmllint",)
    XPATH = 'concat(count(//item), " ", sum(//item/qty), " ", count(//tag), " ", count(//item[@cat = tag/@k]))'

    def generate(self, workdir, quick):
        rng = random.Random(SEED)
        items, qty, tags, matches = (32000 if quick else 160000), 0, 0, 0
        cats = [_word(rng) for _ in range(200)]
        with open(self.file(workdir, "input.xml"), "w") as out:
            out.write('<?xml version="1.0" encoding="UTF-8"?>\n<catalog>\n')
            for i in range(items):
                q, cat = rng.randint(1, 1000), rng.choice(cats)
                keys = [rng.choice(cats) for _ in range(rng.randint(1, 5))]
                qty, tags, matches = qty + q, tags + len(keys), matches + (cat in keys)
                body = "".join(f'<tag k="{k}">{_word(rng)}</tag>' for k in keys)
                desc = " ".join(_word(rng) for _ in range(rng.randint(2, 12)))
                out.write(f'<item id="i{i}" cat="{cat}"><name>{_word(rng)} {_word(rng)}</name>'
                          f'<qty>{q}</qty><desc>{desc}</desc>{body}</item>\n')
            out.write("</catalog>\n")
        self.file(workdir, "expected.txt").write_text(f"{items} {qty} {tags} {matches}")

    def command(self, workdir, library):
        return (["xmllint", "--xpath", self.XPATH, str(self.file(workdir, "input.xml"))],
                _preload(library))

    def check(self, workdir, stdout_path):
        got = Path(stdout_path).read_text(errors="replace").strip()
        want = self.file(workdir, "expected.txt").read_text()
        return None if got == want else f"printed {got[:80]!r}, expected {want!r}"


# ---- CPython on the same JSON records ---------------------------------------------------

class PythonRecords(Jq):
    """jq's records and summary, computed by a CPython script (bench/programs/records.py)
    with PYTHONMALLOC=malloc: every object, not only those above 512 bytes, comes from the
    allocator under test. Debian's /usr/bin/python3 when present (not a version manager's
    shim, which would run a shell under the preload first)."""
    name = "python3"
    about = ("python3 (PYTHONMALLOC=malloc) parsing jq's JSON records, sorting, indexing and "
             "summarising them, and writing them out again")
    packages = ("python3",)
    executables = ("python3",)

    def generate(self, workdir, quick):
        super().generate(workdir, quick)
        text = self.file(workdir, "input.json").read_text()
        # the records written back compactly: the input without its newlines
        self.file(workdir, "dumped.txt").write_text(str(len(text) - text.count("\n")))

    def command(self, workdir, library):
        python = "/usr/bin/python3" if Path("/usr/bin/python3").exists() else "python3"
        return ([python, "-s", str(SCRIPTS / "records.py"), str(self.file(workdir, "input.json"))],
                {"PYTHONMALLOC": "malloc", "PYTHONHASHSEED": "0", **_preload(library)})

    def check(self, workdir, stdout_path):
        lines = Path(stdout_path).read_text(errors="replace").splitlines()
        want = "dumped " + self.file(workdir, "dumped.txt").read_text()
        if not lines or lines[-1] != want:
            return f"last line is {lines[-1][:80] if lines else ''!r}, expected {want!r}"
        return self.check_groups(workdir, lines[:-1])


# ---- sqlite3 on an in-memory database ---------------------------------------------------

class Sqlite(Program):
    """The sqlite3 shell on an in-memory database: rows made by a recursive query, two
    indexes, grouping, a self-join, an update that grows strings, a delete and a sorted
    group_concat. Every row's values are arithmetic on its id, so the expected answers are
    computed here."""
    name = "sqlite3"
    about = ("sqlite3 on an in-memory database: 200,000 generated rows, indexes, GROUP BY, "
             "a self-join, UPDATE, DELETE, group_concat")
    packages = ("sqlite3",)
    executables = ("sqlite3",)

    @staticmethod
    def rows(count):
        for i in range(1, count + 1):
            yield i, f"c{i * 7919 % 997}", i * 31337 % 1000, f"n{i * 2654435761 % 50021:x}-{i * 40503 % 50021:x}"

    def generate(self, workdir, quick):
        count = 40000 if quick else 200000
        self.file(workdir, "script.sql").write_text(f"""\
CREATE TABLE items(id INTEGER PRIMARY KEY, cat TEXT, qty INTEGER, name TEXT);
WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < {count})
INSERT INTO items SELECT i, 'c' || (i * 7919 % 997), i * 31337 % 1000,
  printf('n%x-%x', i * 2654435761 % 50021, i * 40503 % 50021) FROM n;
CREATE INDEX items_cat ON items(cat, qty);
CREATE INDEX items_name ON items(name);
SELECT count(*), sum(qty), count(DISTINCT cat), count(DISTINCT name) FROM items;
SELECT cat, count(*), sum(qty) FROM items GROUP BY cat ORDER BY 3 DESC, cat LIMIT 3;
SELECT count(*) FROM items a JOIN items b ON a.name = b.name AND a.id < b.id;
UPDATE items SET name = name || '+' || cat WHERE qty < 300;
DELETE FROM items WHERE qty % 7 = 0;
SELECT count(*), sum(length(name)), max(name) FROM items;
SELECT cat, length(group_concat(name, ',')) FROM (SELECT cat, name FROM items ORDER BY name)
  GROUP BY cat ORDER BY 2 DESC, cat LIMIT 3;
""")
        self.file(workdir, "expected.txt").write_text("\n".join(self.answers(count)) + "\n")

    def answers(self, count):
        rows = list(self.rows(count))
        names = collections.Counter(r[3] for r in rows)
        by_cat = {}
        for _, cat, qty, _ in rows:
            n, total = by_cat.get(cat, (0, 0))
            by_cat[cat] = (n + 1, total + qty)
        out = [f"{len(rows)}|{sum(r[2] for r in rows)}|{len(by_cat)}|{len(names)}"]
        out += [f"{cat}|{n}|{total}" for cat, (n, total) in
                sorted(by_cat.items(), key=lambda item: (-item[1][1], item[0]))[:3]]
        out.append(str(sum(n * (n - 1) // 2 for n in names.values())))
        kept = [(cat, name + "+" + cat if qty < 300 else name)
                for _, cat, qty, name in rows if qty % 7]
        out.append(f"{len(kept)}|{sum(len(name) for _, name in kept)}|{max(n for _, n in kept)}")
        joined = collections.Counter()
        members = collections.Counter()
        for cat, name in kept:
            joined[cat] += len(name)
            members[cat] += 1
        lengths = {cat: joined[cat] + members[cat] - 1 for cat in joined}
        out += [f"{cat}|{n}" for cat, n in sorted(lengths.items(), key=lambda item: (-item[1], item[0]))[:3]]
        return out

    def command(self, workdir, library):
        return (["sqlite3", "-batch", ":memory:", f".read {self.file(workdir, 'script.sql')}"],
                _preload(library))


# ---- a shell script starting short-lived processes ------------------------------------

class Pipeline(Program):
    """dash running bench/programs/pipeline.sh: each generated text file goes through tr,
    sort, uniq, wc, head and grep (15 forks and 11 programs a file), every one of them under
    the allocator (the preload is inherited), so what counts is what starting, forking and
    ending a process costs; the expected lines are computed here."""
    name = "sh"
    about = ("dash running a shell script that pipes 40 generated text files through tr, sort, "
             "uniq, wc, head and grep: 600 forks and 440 short-lived programs, each under the allocator")
    packages = ("dash", "coreutils", "grep")
    executables = ("sh", "tr", "sort", "uniq", "wc", "head", "grep")
    VOCABULARY = 5000

    def generate(self, workdir, quick):
        rng = random.Random(SEED)
        vocab = [_word(rng, 2, 13) for _ in range(self.VOCABULARY)]
        folder = self.file(workdir, "parts")
        shutil.rmtree(folder, ignore_errors=True)
        folder.mkdir()
        expected, total = [], 0
        count = 8 if quick else 40
        for part in range(count):
            lines = [[vocab[int(self.VOCABULARY * rng.random() ** 2)] for _ in range(rng.randint(3, 12))]
                     for _ in range(rng.randint(150, 400))]
            (folder / f"part-{part:03d}.txt").write_text("".join(" ".join(line) + "\n" for line in lines))
            words = collections.Counter(w for line in lines for w in line)
            n = sum(words.values())
            top, top_count = min(words.items(), key=lambda item: (-item[1], item[0]))
            long = sum(any(len(w) >= 10 for w in line) for line in lines)
            expected.append(f"part-{part:03d}.txt lines {len(lines)} words {n} distinct {len(words)} "
                            f"top {top_count} {top} long {long}")
            total += n
        expected.append(f"files {count} words {total}")
        self.file(workdir, "expected.txt").write_text("\n".join(expected) + "\n")

    def command(self, workdir, library):
        return (["sh", str(SCRIPTS / "pipeline.sh"), str(self.file(workdir, "parts"))],
                {"LC_ALL": "C", **_preload(library)})


# ---- C++ compilers on a generated template-heavy unit ---------------------------------

_MASK = (1 << 64) - 1


def _mix(x):
    x = (x ^ (x >> 31)) * 0x7FB5D329728EA185 & _MASK
    x = (x ^ (x >> 27)) * 0x81DADEF4BC2DD44D & _MASK
    return x ^ (x >> 33)


_CXX_PRELUDE = """\
#include <algorithm>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <utility>
#include <variant>
#include <vector>
using u64 = unsigned long long;
constexpr u64 mix(u64 x) {
  x = (x ^ (x >> 31)) * 0x7fb5d329728ea185ull;
  x = (x ^ (x >> 27)) * 0x81dadef4bc2dd44dull;
  return x ^ (x >> 33);
}
template <u64 Seed, std::size_t... I> constexpr u64 fold(std::index_sequence<I...>) {
  u64 h = Seed;
  ((h = mix(h + I)), ...);
  return h;
}
template <u64 Seed, std::size_t N> struct Chain { static constexpr u64 value = mix(Chain<Seed, N - 1>::value ^ N); };
template <u64 Seed> struct Chain<Seed, 0> { static constexpr u64 value = Seed; };
template <int I> struct Tag { int v = I; std::string s = std::to_string(I); };
"""

_CXX_MODULE = """\
namespace m{i} {{
using V = std::variant<Tag<{i}>, Tag<{i} + 100000>, Tag<{i} + 200000>, std::string, std::vector<int>>;
struct Rec {{ std::string name; std::map<std::string, std::vector<V>> by; std::tuple<int, double, std::string> t; }};
std::size_t work(std::vector<Rec>& rs) {{
  std::size_t total = 0;
  std::sort(rs.begin(), rs.end(), [](const Rec& a, const Rec& b) {{
    return std::tie(a.name, std::get<0>(a.t)) < std::tie(b.name, std::get<0>(b.t)); }});
  for (auto& r : rs)
    for (auto& kv : r.by)
      for (auto& v : kv.second)
        total += std::visit([&](auto& x) -> std::size_t {{
          using T = std::decay_t<decltype(x)>;
          if constexpr (std::is_same_v<T, std::string>) return x.size() + kv.first.size();
          else if constexpr (std::is_same_v<T, std::vector<int>>) return x.size();
          else return x.s.size() + x.v; }}, v);
  auto owned = std::make_unique<std::map<int, std::function<int(int)>>>();
  (*owned)[{i}] = [total](int z) {{ return z + int(total); }};
  return total + (*owned)[{i}](1);
}}
}}
extern const u64 r_{i} = fold<{seed}ull>(std::make_index_sequence<{depth}>{{}}) ^ Chain<{seed}ull, {depth}>::value;
"""


class Compile(Program):
    """A C++17 compiler at -O1 on a generated unit of template-heavy modules (variant and
    visit, map, sort, function, constexpr folds); the assembly goes to stdout, and each
    module's constant r_<i>, computed by template recursion, must be the value computed here."""
    DEPTH = 24

    def __init__(self, name, about, packages, executable, modules, quick_modules):
        self.name, self.about, self.packages = name, about, packages
        self.executables = (executable,)
        self.modules, self.quick_modules = modules, quick_modules

    def generate(self, workdir, quick):
        parts, expected = [_CXX_PRELUDE], {}
        for i in range(self.quick_modules if quick else self.modules):
            seed = i * 7919 + 1
            folded, chained = seed, seed
            for j in range(self.DEPTH):
                folded = _mix((folded + j) & _MASK)
                chained = _mix(chained ^ (j + 1))
            expected[f"r_{i}"] = folded ^ chained
            parts.append(_CXX_MODULE.format(i=i, seed=seed, depth=self.DEPTH))
        self.file(workdir, "unit.cpp").write_text("".join(parts))
        self.file(workdir, "expected.json").write_text(json.dumps(expected))

    def command(self, workdir, library):
        return ([self.executables[0], "-std=c++17", "-O1", "-S", "-o", "-",
                 str(self.file(workdir, "unit.cpp"))], _preload(library))

    def check(self, workdir, stdout_path):
        want = json.loads(self.file(workdir, "expected.json").read_text())
        text = Path(stdout_path).read_text(errors="replace")
        got = {m.group(1): int(m.group(2)) & _MASK
               for m in re.finditer(r"^(r_\d+):\s*\n\s*\.quad\s+(-?\d+)", text, re.M)}
        for symbol, value in want.items():
            if symbol not in got:
                return f"no constant {symbol} in the assembly ({len(text)} bytes)"
            if got[symbol] != value:
                return f"{symbol} = {got[symbol]}, expected {value}"
        return None


# ---- memcached over loopback ---------------------------------------------------------

class Memcached(Program):
    name = "memcached"
    about = ("memcached (4 worker threads) over loopback: 8 connections from 2 client threads, "
             "seeded set/get/delete of 10 B-100 KiB values, every answer checked")
    packages = ("memcached",)
    threads = 4
    executables = ("memcached",)
    CONNECTIONS, CLIENT_THREADS = 8, 2
    COUNTS = ("ops", "sets", "gets", "hits", "deletes", "deleted", "digest")
    ops = 60000                     # operations in all; prepare sets it (fewer when quick)

    @staticmethod
    def driver():
        return Path(BUILD_DIR) / "bench" / "memcached_load"

    def missing(self):
        problem = super().missing()
        if not problem and not self.driver().exists():
            problem = f"its client {self.driver()} is not built: make benches"
        return problem

    def prepare(self, workdir, quick):
        self.ops = 12000 if quick else 60000
        argv, env = self.command(workdir, None)
        run = subprocess.run(argv, env=None, stdout=subprocess.PIPE, text=True, timeout=300)
        fields = self.result(run.stdout)
        if run.returncode != 0 or fields is None:
            raise RuntimeError(f"the reference run under glibc failed (exit {run.returncode})")
        reference = {key: fields.get(key) for key in self.COUNTS}
        self.file(workdir, "expected.json").write_text(json.dumps(reference))

    def command(self, workdir, library):
        return ([str(self.driver()), shutil.which("memcached") or "/usr/bin/memcached",
                 library or "-", str(self.threads), str(self.CONNECTIONS),
                 str(self.CLIENT_THREADS), str(self.ops), str(SEED)], {})

    @staticmethod
    def result(stdout):
        """The fields of the last line when it is the client's result line, else None."""
        lines = stdout.strip().splitlines()
        if not lines or not lines[-1].startswith("bench="):
            return None
        return dict(field.split("=", 1) for field in lines[-1].split() if "=" in field)

    def check(self, workdir, stdout_path):
        fields = self.result(Path(stdout_path).read_text(errors="replace"))
        if fields is None:
            return "the client printed no result line"
        want = json.loads(self.file(workdir, "expected.json").read_text())
        for key in self.COUNTS:
            if fields.get(key) != want[key]:
                return f"{key}={fields.get(key)}, the glibc reference run had {want[key]}"
        return None


PROGRAMS = [
    Jq(),
    Xmllint(),
    WordStats("perl", "perl: word and pair frequencies with hashes and strings in 2 ithreads "
              "(one interpreter each), each counting and ranking its own partition of the keys",
              ("perl",), ("perl",), "wordstats.pl",
              24000, 5000, threads=2),
    WordStats("ruby", "ruby: word and pair frequencies with hashes, string interpolation, sort_by",
              ("ruby",), ("ruby",), "wordstats.rb", 26000, 5000),
    WordStats("lua", "lua5.4: word and pair frequencies with tables, string concatenation, sort",
              ("lua5.4",), ("lua5.4",), "wordstats.lua", 26000, 5000),
    WordStats("gawk", "gawk: word and pair frequencies in associative arrays, sorted output",
              ("gawk",), ("gawk", "-f"), "wordstats.awk", 22000, 4500),
    Compile("g++", "g++ -O1 -S on a generated template-heavy C++17 unit (cc1plus)", ("g++",),
            "g++", 8, 1),
    Compile("clang++", "clang++ -O1 -S on the same kind of template-heavy C++17 unit", ("clang",),
            "clang++", 6, 1),
    Memcached(),
    PythonRecords(),
    Sqlite(),
    Pipeline(),
]
