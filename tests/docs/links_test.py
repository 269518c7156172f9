#!/usr/bin/python3
"""Every relative link in README.md and docs/*.md resolves.

A link [text](path), [text](path#anchor) or [text](#anchor) must name a file
or directory of the source tree, and its anchor a heading of the Markdown
file it points to (GitHub's rule: lower case, punctuation dropped, spaces
become hyphens, a repeated heading gets -1, -2, ...). Links with a scheme
(https:, mailto:) are not followed. Fenced code blocks are skipped.

Usage: links_test.py SOURCE_DIR
"""
import pathlib
import re
import sys

LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(([^()\s]+)(?:\s+\"[^\"]*\")?\)")
HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
FENCE = re.compile(r"^\s*(```|~~~)")


def prose_lines(path):
    """(line number, line) outside fenced code blocks."""
    fenced = False
    for number, line in enumerate(path.read_text().splitlines(), 1):
        if FENCE.match(line):
            fenced = not fenced
            continue
        if not fenced:
            yield number, line


def slug(heading):
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link's text only
    text = text.lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(path, cache={}):
    if path not in cache:
        seen = {}
        result = set()
        for _, line in prose_lines(path):
            m = HEADING.match(line)
            if not m:
                continue
            base = slug(m.group(2))
            n = seen.get(base, 0)
            seen[base] = n + 1
            result.add(base if n == 0 else f"{base}-{n}")
        for _, line in prose_lines(path):  # explicit <a id="..."> anchors
            result.update(re.findall(r"<a (?:id|name)=\"([^\"]+)\"", line))
        cache[path] = result
    return cache[path]


def check(root):
    files = [root / "README.md"] + sorted((root / "docs").glob("*.md"))
    problems = []
    links = 0
    for doc in files:
        for number, line in prose_lines(doc):
            for m in LINK.finditer(re.sub(r"`[^`]*`", "``", line)):
                target = m.group(1)
                if re.match(r"^[a-z][a-z0-9+.-]*:", target):
                    continue  # https:, mailto:, ...
                links += 1
                where = f"{doc.relative_to(root)}:{number}"
                path_part, _, anchor = target.partition("#")
                dest = (doc.parent / path_part).resolve() if path_part else doc
                if not dest.exists():
                    problems.append(f"{where}: {target}: no such file")
                    continue
                if not str(dest).startswith(str(root.resolve())):
                    problems.append(f"{where}: {target}: outside the source tree")
                    continue
                if anchor:
                    if dest.suffix != ".md":
                        problems.append(f"{where}: {target}: an anchor into a file that is not Markdown")
                    elif anchor not in anchors(dest):
                        problems.append(f"{where}: {target}: no heading \"#{anchor}\" in "
                                        f"{dest.relative_to(root.resolve())}")
    return links, problems


def main():
    root = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else ".").resolve()
    links, problems = check(root)
    for p in problems:
        print(p)
    print(f"{links} relative links, {len(problems)} broken")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
