#!/usr/bin/python3
"""docs/metrics.md lists exactly the metric families tollgate exports.

The families are the table TOLLGATE_METRIC_FAMILIES in
gateway/telemetry/metric_families.h (F(Id, "name", kType, ..., "help", "label"...))
and the process_* families of gateway/telemetry/process_metrics.cc
(ProcessFamily{"name", "type", ...}). Each must appear, as `tollgate_name`
or `process_name`, in the first column of the table of docs/metrics.md,
with its type in the second column and each of its labels as `label` in
the third; each family named there must be exported.

Usage: metric_names_test.py SOURCE_DIR
"""
import pathlib
import re
import sys

TYPE_NAMES = {"kCounter": "counter", "kGauge": "gauge", "kHistogram": "histogram"}
# One entry of the X-macro table, up to the next entry or the end.
FAMILY = re.compile(r"\bF\(\s*(\w+),\s*\"([a-z_0-9]+)\",\s*(k\w+),\s*k\w+,(.*?)\)\s*\\?\s*(?=\bF\(|$)",
                    re.S)
PROCESS_FAMILY = re.compile(r"ProcessFamily\{\s*\"([a-z_]+)\",\s*\"(\w+)\"")
ROW = re.compile(r"^\|([^|]*)\|([^|]*)\|(.*)\|\s*$")
NAME = re.compile(r"`((?:tollgate|process)_[a-z_0-9]+)`")


def exported(root):
    """{name: (type, [labels])}"""
    families = {}
    header = (root / "gateway/telemetry/metric_families.h").read_text()
    # The macro's lines: each but the last ends with a backslash.
    lines = header[header.index("#define TOLLGATE_METRIC_FAMILIES(F)"):].splitlines()
    end = next(i for i, line in enumerate(lines) if not line.endswith("\\"))
    table = "\n".join(line.rstrip("\\") for line in lines[:end + 1])
    for m in FAMILY.finditer(table):
        # After the type and when: the help text (adjacent literals), then
        # each label name, split at the commas outside literals.
        parts = [p.strip() for p in re.split(r",(?=(?:[^\"]*\"[^\"]*\")*[^\"]*$)", m.group(4))]
        labels = [p.strip('"') for p in parts[1:] if p]
        families["tollgate_" + m.group(2)] = (TYPE_NAMES[m.group(3)], labels)
    process = (root / "gateway/telemetry/process_metrics.cc").read_text()
    for m in PROCESS_FAMILY.finditer(process):
        families[m.group(1)] = (m.group(2), [])
    return families


def documented(root):
    """{name: (types cell, labels cell, line number)}"""
    rows = {}
    lines = (root / "docs/metrics.md").read_text().splitlines()
    for number, line in enumerate(lines, 1):
        m = ROW.match(line)
        if not m:
            continue
        for name in NAME.findall(m.group(1)):
            rows[name] = (m.group(2), m.group(3), number)
    return rows


def main():
    root = pathlib.Path(sys.argv[1])
    families = exported(root)
    rows = documented(root)
    failures = []
    if len(families) < 30:
        failures.append(f"only {len(families)} families read from the sources: the parser is stale")
    for name, (kind, labels) in sorted(families.items()):
        if name not in rows:
            failures.append(f"{name} ({kind}) is exported but not in docs/metrics.md's table")
            continue
        types, label_cell, number = rows[name]
        if kind not in types:
            failures.append(f"docs/metrics.md:{number}: {name} is a {kind}, the row says '{types.strip()}'")
        for label in labels:
            if f"`{label}`" not in label_cell:
                failures.append(f"docs/metrics.md:{number}: {name} has the label `{label}`, not in its row")
    for name, (_, _, number) in sorted(rows.items()):
        if name not in families:
            failures.append(f"docs/metrics.md:{number}: {name} is documented but not exported")
    for f in failures:
        print("FAIL:", f)
    print(f"{len(families)} families checked")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
