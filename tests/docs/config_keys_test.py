#!/usr/bin/python3
"""docs/configuration.md lists exactly the keys the strict reader accepts.

The reader (rules/config.cc, rules/rules_config.cc, rules/config_reader.cc)
names every key it reads in a call such as r.String("key"),
r.Integer("key", ...), r.Find("key"), ReadSecret(r, "x_env", "x_file") or
ForTable(root, "section", ...); each such key must appear in the first
column of a table of docs/configuration.md (or, for a section, in one of its
headings), and each key documented there must be read somewhere.

Usage: config_keys_test.py SOURCE_DIR
"""
import pathlib
import re
import sys

READER_FILES = ["rules/config.cc", "rules/rules_config.cc", "rules/config_reader.cc"]
# Calls whose string-literal arguments are keys of the table being read.
KEY_CALL = re.compile(
    r"\b(?:String|Integer|DurationMs|Bool|Find|Require|Has|OneOf|Address|Strings|"
    r"HeaderName|ReadPemFile|ReadSecret|ForTable|ForEachTable)\(((?:\w+,\s*)?\"[a-z_0-9]+\"(?:,\s*\"[a-z_0-9]+\")?)")
# Keys listed for a check that they are absent: `for (const char* key : {"a", "b"})`.
KEY_LIST = re.compile(r"for \(const char\* \w+\s*:\s*\{([^}]*)\}\)")
LITERAL = re.compile(r"\"([a-z_0-9]+)\"")
# A table row's first cell: `key`, `a` / `b`, `limit` + `window`.
ROW = re.compile(r"^\|\s*([^|]+?)\s*\|")
CODE = re.compile(r"`([a-z_0-9]+)`")
# Section headings: ### `[server]`, ### `[[listeners]]`, ### `[identity.jwt]`.
HEADING = re.compile(r"^#+ .*?`\[\[?([a-z_.]+)\]\]?`")


def reader_keys(root):
    keys = {}
    for name in READER_FILES:
        text = (root / name).read_text()
        for number, line in enumerate(text.splitlines(), 1):
            if line.lstrip().startswith("//"):
                continue
            found = [m.group(1) for m in KEY_CALL.finditer(line)]
            found += [m.group(1) for m in KEY_LIST.finditer(line)]
            for args in found:
                for key in LITERAL.findall(args):
                    keys.setdefault(key, f"{name}:{number}")
        # Lists that run over two lines.
        for m in KEY_LIST.finditer(re.sub(r"\s*\n\s*", " ", text)):
            for key in LITERAL.findall(m.group(1)):
                keys.setdefault(key, name)
    return keys


def documented_keys(doc):
    keys = {}
    in_table_header = False
    for number, line in enumerate(doc.read_text().splitlines(), 1):
        heading = HEADING.match(line)
        if heading:
            for part in heading.group(1).split("."):
                keys.setdefault(part, number)
            continue
        row = ROW.match(line)
        if not row:
            in_table_header = False
            continue
        cell = row.group(1)
        if cell in ("key", "condition") or set(cell) <= set("-: "):
            continue  # the header row and the rule under it
        for key in CODE.findall(cell):
            keys.setdefault(key, number)
    return keys


def main():
    root = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else ".")
    doc = root / "docs" / "configuration.md"
    read = reader_keys(root)
    documented = documented_keys(doc)
    problems = []
    for key, where in sorted(read.items()):
        if key not in documented:
            problems.append(f"{where}: key \"{key}\" is read but not in {doc.name}'s tables")
    for key, line in sorted(documented.items()):
        if key not in read:
            problems.append(f"docs/configuration.md:{line}: \"{key}\" is documented but no "
                            "reader reads it")
    for p in problems:
        print(p)
    print(f"{len(read)} keys read, {len(documented)} documented, {len(problems)} problems")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
