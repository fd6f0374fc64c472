"""Checks of the documentation: README.md and docs/*.md.

Every ```json and ```toml block parses (a block that is honestly not a whole
document carries another tag, such as jsonc or text); every relative link
names a file that exists, and its #anchor a heading of that file, slugged as
GitHub slugs headings; the README stays a front page of at most 450 lines.
Standard library only.
"""
import glob
import json
import os
import re
import tomllib

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
README_MAX_LINES = 450


def documents():
    """README.md and every docs/*.md, as paths relative to the repository."""
    docs = sorted(os.path.relpath(p, ROOT) for p in glob.glob(os.path.join(ROOT, "docs", "*.md")))
    return ["README.md"] + docs


def read(rel):
    with open(os.path.join(ROOT, rel), encoding="utf-8") as f:
        return f.read()


FENCE = re.compile(r"^(\s*)(`{3,}|~{3,})\s*([^\s`]*)[^\n]*$")


def fenced_blocks(text):
    """Yields (line number, language tag, body) of each fenced code block."""
    lines = text.split("\n")
    i = 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        indent, fence, lang = m.group(1), m.group(2), m.group(3).lower()
        start, body = i + 1, []
        i += 1
        while i < len(lines) and not re.match(r"^\s*" + re.escape(fence[0]) + "{%d,}\\s*$" % len(fence), lines[i]):
            body.append(lines[i][len(indent):] if lines[i].startswith(indent) else lines[i])
            i += 1
        assert i < len(lines), "a code block opened at line %d is never closed" % start
        yield start, lang, "\n".join(body)
        i += 1


def prose(text):
    """The text outside fenced code blocks and inline code spans, line by line
    (line numbers kept): where links and headings live."""
    out, fence = [], None
    for line in text.split("\n"):
        m = FENCE.match(line)
        if fence is None and m:
            fence = m.group(2)[0] * len(m.group(2))
            out.append("")
        elif fence is not None:
            if re.match(r"^\s*" + re.escape(fence[0]) + "{%d,}\\s*$" % len(fence), line):
                fence = None
            out.append("")
        elif line.startswith("    ") or line.startswith("\t"):
            out.append("")  # an indented code block or a list item's code: no links to check
        else:
            out.append(re.sub(r"(`+)(.+?)\1", "", line))
    return out


def slug(heading, seen):
    """GitHub's anchor for a heading's text: markup dropped, lower case,
    everything but letters, digits, spaces, hyphens and underscores removed,
    spaces made hyphens; a repeated slug gets -1, -2, ..."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # links and images: their text
    text = re.sub(r"<[^>]+>", "", text)                          # inline HTML
    text = text.replace("`", "").replace("*", "")
    s = re.sub(r"[^\w\- ]", "", text.strip().lower()).replace(" ", "-")
    n = seen.get(s, 0)
    seen[s] = n + 1
    return s if n == 0 else "%s-%d" % (s, n)


def anchors(rel):
    seen, found = {}, set()
    for line in prose(read(rel)):
        m = re.match(r"^(#{1,6})\s+(.*?)\s*#*\s*$", line)
        if m:
            found.add(slug(m.group(2), seen))
    return found


LINK = re.compile(r"!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")


def links(rel):
    """(line number, target) of every inline link outside code."""
    for n, line in enumerate(prose(read(rel)), 1):
        for m in LINK.finditer(line):
            yield n, m.group(1)


@pytest.mark.parametrize("rel", documents())
def test_json_and_toml_blocks_parse(rel):
    checked = 0
    for line, lang, body in fenced_blocks(read(rel)):
        if lang == "json":
            try:
                json.loads(body)
            except ValueError as e:
                pytest.fail("%s:%d: a json block does not parse (%s); tag a fragment jsonc or text" % (rel, line, e))
            checked += 1
        elif lang == "toml":
            try:
                tomllib.loads(body)
            except tomllib.TOMLDecodeError as e:
                pytest.fail("%s:%d: a toml block does not parse (%s)" % (rel, line, e))
            checked += 1
    if rel == "README.md":
        assert checked >= 8, "the README's client snippets are json and toml blocks: found only %d" % checked


@pytest.mark.parametrize("rel", documents())
def test_relative_links_resolve(rel):
    broken = []
    for line, target in links(rel):
        if re.match(r"^[a-z][a-z0-9+.-]*:", target, re.I):
            continue  # https:, mailto: and the like: not checked offline
        path, _, anchor = target.partition("#")
        dest = os.path.normpath(os.path.join(os.path.dirname(rel), path)) if path else rel
        if not os.path.exists(os.path.join(ROOT, dest)):
            broken.append("%s:%d: %s: no file %s" % (rel, line, target, dest))
        elif anchor and dest.endswith(".md") and anchor not in anchors(dest):
            broken.append("%s:%d: %s: no heading #%s in %s" % (rel, line, target, anchor, dest))
    assert not broken, "\n".join(broken)


def test_every_doc_is_on_the_readme_map():
    linked = {os.path.normpath(t.partition("#")[0]) for _, t in links("README.md")}
    missing = [d for d in documents()[1:] if d not in linked]
    assert not missing, "not linked from README.md: %s" % ", ".join(missing)


def test_readme_is_a_front_page():
    n = len(read("README.md").rstrip("\n").split("\n"))
    assert n <= README_MAX_LINES, "README.md has %d lines; the reference belongs in docs/" % n


def test_slugs_follow_github():
    seen = {}
    assert slug("Calls an agent can live with", seen) == "calls-an-agent-can-live-with"
    assert slug("`POST /exec`", seen) == "post-exec"
    assert slug("status, output, input, kill, list_jobs", seen) == "status-output-input-kill-list_jobs"
    assert slug("Tool sets: exec-mcp and the Shell toolkit", seen) == "tool-sets-exec-mcp-and-the-shell-toolkit"
    assert slug("POST /exec", seen) == "post-exec-1"
