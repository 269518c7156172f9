#!/usr/bin/python3
"""docs/configuration.md documents exactly the table of keys the reader uses.

The table of keys (rules/config_keys.cc) is the only list of the keys the
strict reader accepts; `tollgate schema` prints it as a JSON Schema. Each
section of docs/configuration.md (a heading such as ## `[server]`,
## `[[listeners]]`, ## `[identity.jwt]`) documents one table of it, and the
tables reached from that one that have no section of their own (a
listener's `tls`, a rule's `match` and `limits` entries), each in the first
section that reaches it. The first column of the section's tables names
keys (`key`, `a` / `b`, `limit` + `window`). Then:
- every key of a table is documented in its section, or has a section of
  its own (`[identity]`'s `jwt`: `[identity.jwt]`);
- every key documented in a section is a key of its tables;
- a type column reading "integer A–B" gives the range the reader checks.

Usage: config_keys_test.py SOURCE_DIR TOLLGATE_BINARY
"""
import json
import pathlib
import re
import subprocess
import sys

# A table row's first cell: `key`, `a` / `b`, `limit` + `window`; its second.
ROW = re.compile(r"^\|\s*([^|]+?)\s*\|\s*([^|]*?)\s*\|")
CODE = re.compile(r"`([a-z_0-9]+)`")
# Section headings: ## `[server]`, ## `[[listeners]]`, ## `[identity.jwt]`.
HEADING = re.compile(r"^#+ .*?`\[\[?([a-z_.]+)\]\]?`")
RANGE = re.compile(r"^integer (\d+)\s*[–-]\s*(\d+)$")


def documented_sections(doc):
    """[(section path, heading line, {key: (line, type cell)})] in file order."""
    sections = []
    for number, line in enumerate(doc.read_text().splitlines(), 1):
        heading = HEADING.match(line)
        if heading:
            sections.append((heading.group(1), number, {}))
            continue
        row = ROW.match(line)
        if not row or not sections:
            continue
        cell = row.group(1)
        if cell in ("key", "condition") or set(cell) <= set("-: "):
            continue  # the header row and the rule under it
        for key in CODE.findall(cell):
            sections[-1][2].setdefault(key, (number, row.group(2)))
    return sections


def table_ref(prop):
    """The definition name a property's value is a table of, or None."""
    if isinstance(prop, dict):
        if "$ref" in prop:
            return prop["$ref"].rsplit("/", 1)[1]
        for value in prop.values():
            for item in value if isinstance(value, list) else [value]:
                ref = table_ref(item)
                if ref:
                    return ref
    return None


def main():
    root = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else ".")
    schema = json.loads(subprocess.run([sys.argv[2], "schema"], capture_output=True, text=True,
                                       check=True).stdout)
    definitions = schema["definitions"]
    doc = root / "docs" / "configuration.md"
    sections = documented_sections(doc)
    section_paths = {path for path, _, _ in sections}
    problems = []
    owner = {}  # definition name -> the section documenting it

    def resolve(path):
        table = schema
        for part in path.split("."):
            prop = table["properties"].get(part)
            ref = table_ref(prop)
            if ref is None:
                return None
            table = definitions[ref]
        return ref

    for path, line, rows in sections:
        name = resolve(path)
        if name is None:
            problems.append(f"{doc.name}:{line}: section [{path}] is no table of the reader")
            continue
        # This section's table, and those reached from it without a section.
        owned = []
        pending = [(path, name)]
        while pending:
            table_path, table_name = pending.pop(0)
            if table_name in owner:
                continue
            owner[table_name] = path
            owned.append((table_path, table_name))
            for key, prop in definitions[table_name]["properties"].items():
                ref = table_ref(prop)
                if ref and f"{table_path}.{key}" not in section_paths:
                    pending.append((f"{table_path}.{key}", ref))
        keys = {}
        for table_path, table_name in owned:
            for key, prop in definitions[table_name]["properties"].items():
                keys.setdefault(key, prop)
                if key not in rows and f"{table_path}.{key}" not in section_paths:
                    problems.append(f"{doc.name}:{line}: key \"{key}\" of [{table_path}] is "
                                    f"not documented in section [{path}]")
        for key, (row_line, type_cell) in sorted(rows.items()):
            if key not in keys:
                problems.append(f"{doc.name}:{row_line}: \"{key}\" is documented in [{path}] "
                                "but the reader has no such key there")
                continue
            m = RANGE.match(type_cell)
            prop = keys[key] if isinstance(keys[key], dict) else {}
            if m and (int(m.group(1)), int(m.group(2))) != (prop.get("minimum"),
                                                           prop.get("maximum")):
                problems.append(f"{doc.name}:{row_line}: \"{key}\" is documented as "
                                f"{type_cell}; the reader takes {prop.get('minimum')}–"
                                f"{prop.get('maximum')}")
    for key in schema["properties"]:
        if key not in section_paths:
            problems.append(f"{doc.name}: section [{key}] has no heading")
    for p in problems:
        print(p)
    print(f"{len(definitions)} tables, {len(sections)} sections, {len(problems)} problems")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
