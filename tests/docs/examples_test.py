#!/usr/bin/python3
"""The TOML examples of the documentation are configurations that load.

Every ```toml block of README.md and docs/*.md is marked on the line before
it, either `<!-- example: conf/examples/NAME.toml -->` (a whole
configuration: the block must be that file, byte for byte) or
`<!-- fragment -->` (a part of one: it must be TOML) or
`<!-- fragment, appended to conf/...toml -->` (a part that, appended to
that configuration, must load with it). Then
`tollgate --check-config` must accept every conf/examples/*.toml and the
bundled conf/*.toml, run in a scratch directory holding the files they
name (certificates and keys made with the openssl CLI, a JWT secret), as
relative paths in a configuration are relative to the working directory.

Usage: examples_test.py SOURCE_DIR TOLLGATE_BINARY
"""
import pathlib
import re
import subprocess
import sys
import tempfile
import tomllib

MARK = re.compile(r"^<!-- (?:example: (\S+)|fragment(?:, appended to (\S+))?) -->$")
FENCE = re.compile(r"^\s*(```|~~~)")


def toml_blocks(path):
    """(line number, marker line, text) of each ```toml block."""
    lines = path.read_text().splitlines(keepends=True)
    fenced = False
    i = 0
    while i < len(lines):
        line = lines[i]
        if FENCE.match(line):
            if not fenced and line.strip() == "```toml":
                j = i + 1
                while not FENCE.match(lines[j]):
                    j += 1
                yield i + 1, lines[i - 1].strip() if i > 0 else "", "".join(lines[i + 1:j])
                i = j + 1
                continue
            fenced = not fenced
        i += 1


def check_quotes(root):
    """Problems, and the (name, text) of each fragment to load with its base."""
    problems = []
    appended = []
    for doc in [root / "README.md"] + sorted((root / "docs").glob("*.md")):
        for number, marker, text in toml_blocks(doc):
            where = f"{doc.relative_to(root)}:{number}"
            m = MARK.match(marker)
            if not m:
                problems.append(f"{where}: a ```toml block without <!-- example: conf/examples/"
                                "NAME.toml --> or <!-- fragment --> on the line before it")
            elif not m.group(1):
                try:
                    tomllib.loads(text)
                except tomllib.TOMLDecodeError as e:
                    problems.append(f"{where}: the fragment is not TOML: {e}")
                if m.group(2):
                    base = root / m.group(2)
                    if not base.is_file():
                        problems.append(f"{where}: {m.group(2)} does not exist")
                    else:
                        appended.append((where, base.read_text() + "\n" + text))
            else:
                example = root / m.group(1)
                if not example.is_file():
                    problems.append(f"{where}: {m.group(1)} does not exist")
                elif example.read_text() != text:
                    problems.append(f"{where}: the block differs from {m.group(1)}")
    return problems, appended


def make_files(scratch):
    """The files the examples name, relative to the working directory."""
    def cert(name, key, subject):
        subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt",
                        "ec_paramgen_curve:prime256v1", "-nodes", "-days", "30", "-subj", subject,
                        "-keyout", str(scratch / key), "-out", str(scratch / name)],
                       check=True, capture_output=True)
    (scratch / "conf" / "dev").mkdir(parents=True)
    cert("conf/dev/cert.pem", "conf/dev/key.pem", "/CN=localhost")
    (scratch / "conf" / "dev" / "jwt-secret").write_text("x" * 48 + "\n")
    cert("server.pem", "server.key", "/CN=localhost")
    cert("client-ca.pem", "client-ca.key", "/CN=Example Client CA")


def check_configs(root, binary, appended):
    problems = []
    files = sorted((root / "conf" / "examples").glob("*.toml")) + sorted((root / "conf").glob("*.toml"))
    with tempfile.TemporaryDirectory() as scratch:
        scratch = pathlib.Path(scratch)
        make_files(scratch)
        configs = [(str(f.relative_to(root)), f) for f in files]
        for n, (where, text) in enumerate(appended):
            path = scratch / f"fragment-{n}.toml"
            path.write_text(text)
            configs.append((f"{where} (appended to its configuration)", path))
        for name, config in configs:
            run = subprocess.run([binary, "--check-config", str(config)], cwd=scratch,
                                 capture_output=True, text=True, timeout=60)
            if run.returncode != 0:
                problems.append(f"{name}: tollgate --check-config exited "
                                f"{run.returncode}:\n{run.stdout}{run.stderr}")
    return len(configs), problems


def main():
    root = pathlib.Path(sys.argv[1]).resolve()
    binary = str(pathlib.Path(sys.argv[2]).resolve())
    problems, appended = check_quotes(root)
    count, config_problems = check_configs(root, binary, appended)
    problems += config_problems
    for p in problems:
        print(p)
    print(f"{count} configurations checked, {len(problems)} problems")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
