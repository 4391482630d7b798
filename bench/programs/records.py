# The jq row's work done by CPython: parse a JSON array of records, group them,
# summarise each group, and write the array out again. Run with
# PYTHONMALLOC=malloc so every object comes from the allocator under test
# (pymalloc would otherwise serve everything up to 512 bytes itself).
# usage: python3 records.py INPUT.json      (prints one JSON object per group,
# as the jq filter of the program suite does, then "dumped N": the length of
# the records written back as compact JSON)
import json
import sys
from itertools import groupby


def summary(group, records):
    return {"group": group, "n": len(records),
            "score": sum(r["score"] for r in records),
            "tags": len({t for r in records for t in r["tags"]}),
            "events": sum(h["ok"] for r in records for h in r["history"]),
            "names": len(",".join(r["name"] for r in records))}


def main(path):
    with open(path) as f:
        records = json.load(f)
    # Sorted copies and a per-tag index: the churn of lists, tuples and dicts a
    # script makes on its way to an answer (the answer does not depend on them).
    by_name = sorted(records, key=lambda r: (r["name"], r["id"]))
    by_tag = {}
    for r in by_name:
        for t in r["tags"]:
            by_tag.setdefault(t, []).append((r["id"], r["score"]))
    ordered = sorted(records, key=lambda r: (r["group"], r["id"]))
    for group, members in groupby(ordered, key=lambda r: r["group"]):
        print(json.dumps(summary(group, list(members)), separators=(",", ":")))
    assert sum(len(v) for v in by_tag.values()) == sum(len(r["tags"]) for r in records)
    print("dumped", len(json.dumps(records, separators=(",", ":"))))


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: python3 records.py INPUT.json")
    main(sys.argv[1])
