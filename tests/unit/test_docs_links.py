"""Every relative link in README.md and docs/**/*.md (docs/results and docs/reference
included) leads to a file that exists and, with a #fragment, to a heading of that file
(GitHub's anchor rules); so does every section named in prose as (README, "Heading") or
(docs/x.md, "Heading"). No network."""
from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Dict, Iterator, List, Set, Tuple

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCUMENTS = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]

_FENCE = re.compile(r"^\s*(```|~~~)")
_INLINE_CODE = re.compile(r"`+[^`]*`+")
# [text](target) and ![alt](target), target without spaces, an optional "title".
_INLINE_LINK = re.compile(r"!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
_REFERENCE = re.compile(r"^\s{0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s+.*)?$")
_HEADING = re.compile(r"^\s{0,3}(#{1,6})\s+(.*?)\s*#*\s*$")
# A section named in prose: README, "Launching" or docs/runtime.md, "Fusion".
_PROSE_SECTION = re.compile(r"\b(README(?:\.md)?|(?:docs/)?[\w-]+\.md), \"([^\"]+)\"")
_HTML_ANCHOR = re.compile(r"<a\s+(?:name|id)=\"([^\"]+)\"", re.IGNORECASE)


def _prose_lines(text: str) -> Iterator[Tuple[int, str]]:
    """Lines outside fenced code blocks."""
    fenced = False
    for number, line in enumerate(text.splitlines(), 1):
        if _FENCE.match(line):
            fenced = not fenced
            continue
        if not fenced:
            yield number, line


def github_anchor(heading: str) -> str:
    """The id GitHub gives a heading: markup and punctuation dropped, lower case,
    spaces to hyphens (letters, digits, '-' and '_' are kept, any alphabet)."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link keeps its text
    text = re.sub(r"<[^>]+>", "", text)                          # HTML tags
    text = text.replace("`", "").strip().lower()
    text = "".join(ch for ch in text if ch.isalnum() or ch in " -_")
    return text.replace(" ", "-")


def anchors(path: Path) -> Set[str]:
    """Every #fragment that reaches somewhere in a Markdown file."""
    found: Set[str] = set()
    seen: Dict[str, int] = {}
    for _, line in _prose_lines(path.read_text(encoding="utf-8")):
        found.update(_HTML_ANCHOR.findall(line))
        heading = _HEADING.match(line)
        if not heading:
            continue
        anchor = github_anchor(heading.group(2))
        # GitHub numbers repeated headings: x, x-1, x-2, ...
        count = seen.get(anchor, 0)
        seen[anchor] = count + 1
        found.add(anchor if count == 0 else f"{anchor}-{count}")
    return found


def links(path: Path) -> Iterator[Tuple[int, str]]:
    for number, line in _prose_lines(path.read_text(encoding="utf-8")):
        for match in _INLINE_LINK.finditer(_INLINE_CODE.sub("", line)):
            yield number, match.group(1)
        reference = _REFERENCE.match(line)
        if reference:
            yield number, reference.group(1)


def prose_sections(path: Path, root: Path) -> Iterator[Tuple[int, str]]:
    """(README, "Heading") references, as link targets relative to ``path``."""
    for number, line in _prose_lines(path.read_text(encoding="utf-8")):
        for match in _PROSE_SECTION.finditer(line):
            name, heading = match.groups()
            if name.startswith("README"):
                target = root / "README.md"
            elif name.startswith("docs/"):
                target = root / name
            else:
                target = path.parent / name
            relative = Path(os.path.relpath(target, path.parent)).as_posix()
            yield number, f"{relative}#{github_anchor(heading)}"


def broken_links(path: Path, root: Path = ROOT) -> List[str]:
    """'file:line: target (why)' for each relative link of ``path`` that leads nowhere."""
    problems = []
    for number, target in [*links(path), *prose_sections(path, root)]:
        if re.match(r"^[a-z][a-z0-9+.-]*:", target, re.IGNORECASE):  # http:, mailto:, ...
            continue
        file_part, _, fragment = target.partition("#")
        destination = (path.parent / file_part).resolve() if file_part else path
        where = f"{path.relative_to(root)}:{number}: {target}"
        if not destination.exists():
            problems.append(f"{where} (no file {file_part})")
        elif fragment and destination.suffix == ".md" and fragment not in anchors(destination):
            problems.append(f"{where} (no heading #{fragment} in {destination.name})")
    return problems


@pytest.mark.parametrize("document", DOCUMENTS, ids=lambda p: str(p.relative_to(ROOT)))
def test_relative_links_resolve(document):
    assert broken_links(document) == []


def test_the_checker_knows_github_anchors(tmp_path):
    page = tmp_path / "page.md"
    page.write_text("# Several hosts on one machine\n## `init()` & settings\n## Notes\n"
                    "## Notes\n```\n# not a heading\n```\n"
                    "[a](#several-hosts-on-one-machine) [b](#init--settings) [c](#notes-1)\n"
                    "[d](#emulated-hosts) [e](missing.md) [f](page.md#not-a-heading)\n"
                    "`[g](#in-code)` [h](https://example.com/#x)\n"
                    '(page.md, "Notes") and (page.md, "Emulated hosts")\n', encoding="utf-8")
    problems = broken_links(page, root=tmp_path)
    assert [p.split(": ", 1)[1].split(" ")[0] for p in problems] == [
        "#emulated-hosts", "missing.md", "page.md#not-a-heading",
        "page.md#emulated-hosts"], problems
