#!/usr/bin/python3
"""tollgate.schema.json: up to date, accepts what ships, refuses mistakes.

- The shipped tollgate.schema.json is what `tollgate schema` prints (both
  are made from rules/config_keys.cc), so it cannot go stale.
- Every shipped configuration (conf/*.toml, conf/examples/*.toml,
  deploy/tollgate.toml) and every ```toml block of README.md and docs/*.md
  (whole examples, fragments, and fragments appended to their base, as
  examples_test.py finds them) is valid against it.
- Each typical mistake below, made in conf/examples/first.toml, is refused
  both by `tollgate --check-config` and by the schema.

Debian's python3-jsonschema (Draft7Validator) and the standard library's
tomllib, under /usr/bin/python3.

Usage: schema_test.py SOURCE_DIR TOLLGATE_BINARY
"""
import json
import pathlib
import subprocess
import sys
import tempfile
import tomllib

import jsonschema

sys.path.insert(0, str(pathlib.Path(__file__).parent))
import examples_test  # noqa: E402  (its extraction of the docs' TOML blocks)

# (what is wrong, the text replaced in first.toml, its replacement).
MISTAKES = [
    ("a misspelled key", 'algorithm = "token_bucket"', 'algoritm = "token_bucket"'),
    ("a misspelled section", "[[upstreams]]", "[[upstream]]"),
    ("an unknown key in a sub-table", 'match = { path_prefix = "/login", methods = ["POST"] }',
     'match = { path = "/login", methods = ["POST"] }'),
    ("an unknown algorithm", 'algorithm = "token_bucket"', 'algorithm = "token_bukket"'),
    ("a negative limit", "limit = 100", "limit = -100"),
    ("a limit as a string", "limit = 100", 'limit = "100"'),
    ("a window that is no duration", 'window = "1m"\n\n[[rules]]', 'window = "1 minute"\n\n[[rules]]'),
    ("a window as an integer", 'window = "1m"\n\n[[rules]]', "window = 60\n\n[[rules]]"),
    ("an unknown key part", 'key = "ip"\nalgorithm = "sliding_log"',
     'key = "ipaddress"\nalgorithm = "sliding_log"'),
    ("methods as a string", 'methods = ["POST"]', 'methods = "POST"'),
    ("a status out of range", 'window = "1m"\n\n[[rules]]', 'window = "1m"\nstatus = 200\n\n[[rules]]'),
    ("an unknown action", 'window = "1m"\n\n[[rules]]',
     'window = "1m"\naction = "drop"\n\n[[rules]]'),
    ("servers as a string", 'servers = ["127.0.0.1:9000"]', 'servers = "127.0.0.1:9000"'),
    ("a misspelled concurrency", 'servers = ["127.0.0.1:9000"]',
     'servers = ["127.0.0.1:9000"]\nconcurrency = "adaptiv"'),
    ("a concurrency of 0", 'servers = ["127.0.0.1:9000"]',
     'servers = ["127.0.0.1:9000"]\nconcurrency = 0'),
    ("an address without a port", 'address = "0.0.0.0:8080"', 'address = "0.0.0.0"'),
    ("a route without an upstream", 'path_prefix = "/"\nupstream = "app"', 'path_prefix = "/"'),
    ("a rule without a name", 'name = "per-ip"\n', ""),
    ("a path_prefix without /", 'path_prefix = "/"', 'path_prefix = "api"'),
    ("threads out of range", "[[listeners]]", "[server]\nthreads = 1000\n\n[[listeners]]"),
    ("an unknown store kind", "[[listeners]]", '[store]\nkind = "memcached"\n\n[[listeners]]'),
    ("a boolean as a string", "[[listeners]]", '[server]\nvia = "yes"\n\n[[listeners]]'),
    ("an unknown log level", "[[listeners]]", '[log]\nlevel = "verbose"\n\n[[listeners]]'),
    ("a header name with a space", "[[listeners]]",
     '[identity]\nuser_header = "X User"\n\n[[listeners]]'),
    ("a listener as a table", "[[listeners]]", "[listeners]"),
]


def validator(root, binary):
    printed = subprocess.run([binary, "schema"], capture_output=True, text=True, check=True).stdout
    shipped = (root / "tollgate.schema.json").read_text()
    problems = []
    if printed != shipped:
        problems.append("tollgate.schema.json differs from what `tollgate schema` prints: "
                        "run `tollgate schema > tollgate.schema.json`")
    schema = json.loads(printed)
    jsonschema.Draft7Validator.check_schema(schema)
    return jsonschema.Draft7Validator(schema), problems


def refusals(v, text):
    return [f"{'.'.join(str(p) for p in e.absolute_path) or '(top)'}: {e.message}"
            for e in v.iter_errors(tomllib.loads(text))]


def shipped_configs(root):
    files = (sorted((root / "conf").glob("*.toml")) + sorted((root / "conf" / "examples").glob("*.toml"))
             + [root / "deploy" / "tollgate.toml"])
    for f in files:
        yield str(f.relative_to(root)), f.read_text()
    for doc in [root / "README.md"] + sorted((root / "docs").glob("*.md")):
        for number, marker, text in examples_test.toml_blocks(doc):
            where = f"{doc.relative_to(root)}:{number}"
            yield where, text
            m = examples_test.MARK.match(marker)
            if m and m.group(2):
                yield f"{where} (appended to {m.group(2)})", (root / m.group(2)).read_text() + "\n" + text


def main():
    root = pathlib.Path(sys.argv[1]).resolve()
    binary = str(pathlib.Path(sys.argv[2]).resolve())
    v, problems = validator(root, binary)
    count = 0
    for where, text in shipped_configs(root):
        count += 1
        for refusal in refusals(v, text):
            problems.append(f"{where}: the schema refuses it: {refusal}")
    base = (root / "conf" / "examples" / "first.toml").read_text()
    with tempfile.TemporaryDirectory() as scratch:
        for what, old, new in MISTAKES:
            if base.count(old) != 1:
                problems.append(f"{what}: {old!r} is not once in conf/examples/first.toml")
                continue
            text = base.replace(old, new)
            if not refusals(v, text):
                problems.append(f"{what}: the schema accepts it")
            path = pathlib.Path(scratch) / "mistake.toml"
            path.write_text(text)
            run = subprocess.run([binary, "--check-config", str(path)], capture_output=True,
                                 text=True, timeout=60)
            if run.returncode == 0:
                problems.append(f"{what}: tollgate --check-config accepts it")
    for p in problems:
        print(p)
    print(f"{count} configurations and {len(MISTAKES)} mistakes checked, {len(problems)} problems")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
