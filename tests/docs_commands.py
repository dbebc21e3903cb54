"""The README and docs/ as the tests read them: sections by heading, fenced code blocks, and the
command lines of the shell blocks.

Every test that runs a command the documentation shows, or checks a table or a list it holds,
reads it from here, so what it tests is what the page says; `tests/test_docs.py` holds every
command shown to a test that runs it, or to a reason why none can.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from functools import cache
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
README = REPO / "README.md"
DOCS = REPO / "docs"
STUDENT_README = REPO / "grader" / "student_README.md"
"""The student bundle's README (grader/bundle.py ships it as the bundle's README.md)."""
SHELL = ("bash", "sh")
"""The fence languages whose lines are commands."""

_HEADING = re.compile(r"(#{1,6}) (.+)")
_FENCE = re.compile(r" *```(.*)")
_LINK = re.compile(r"\]\(([^)\s]+)\)")


def command_lines(lines: Iterable[str]) -> list[str]:
    """The command lines of a shell block's lines: a comment after two spaces cut, blank and
    comment lines left out."""
    cut = (line.split("  #")[0].strip() for line in lines)
    return [line for line in cut if line and not line.startswith("#")]


@dataclass(frozen=True)
class Heading:
    level: int
    title: str
    line: int


@dataclass(frozen=True)
class Block:
    """A fenced code block: its language, its lines as written, the heading it sits under."""

    language: str
    lines: tuple[str, ...]
    heading: str
    line: int

    @property
    def commands(self) -> list[str]:
        return command_lines(self.lines)


@dataclass(frozen=True)
class Page:
    name: str
    lines: tuple[str, ...]
    headings: tuple[Heading, ...]
    blocks: tuple[Block, ...]

    def section(self, title: str) -> Page:
        """The part of the page under heading `title` (exactly, any level), up to the next
        heading of its level or above; KeyError naming the page when it has none."""
        start = next((h for h in self.headings if h.title == title), None)
        if start is None:
            raise KeyError(f"{self.name} has no heading {title!r}")
        ends = [h.line for h in self.headings if h.line > start.line and h.level <= start.level]
        end = min(ends, default=len(self.lines))
        return Page(
            self.name,
            self.lines[start.line : end],
            tuple(h for h in self.headings if start.line <= h.line < end),
            tuple(b for b in self.blocks if start.line < b.line < end),
        )

    @property
    def text(self) -> str:
        return "\n".join(self.lines)

    def commands(self) -> list[str]:
        """The command lines of every shell block, in order."""
        return [c for b in self.blocks if b.language in SHELL for c in b.commands]

    def links(self) -> list[str]:
        """The target of every Markdown link outside the code blocks and code spans."""
        inside = {n for b in self.blocks for n in range(b.line, b.line + len(b.lines) + 2)}
        prose = "\n".join(line for n, line in enumerate(self.lines) if n not in inside)
        return _LINK.findall(re.sub(r"`[^`]*`", "", prose))

    def anchors(self) -> set[str]:
        """The `#anchor` of each heading, as GitHub makes it."""
        return {slug(h.title) for h in self.headings}


def slug(title: str) -> str:
    """A heading's anchor as GitHub makes it: lower case, punctuation dropped, spaces to -."""
    return re.sub(r"[^\w\- ]", "", title.lower()).replace(" ", "-")


def relative(target: str) -> bool:
    """Is this link's target a path within the tree (not a URL, not this page's anchor)?"""
    return not re.match(r"[a-z][a-z0-9+.-]*:|#", target)


@cache
def page(path: Path) -> Page:
    """A Markdown file read into headings and fenced blocks."""
    return parse(path.read_text(), path.relative_to(REPO).as_posix())


def parse(text: str, name: str) -> Page:
    """A Markdown page as headings and fenced blocks (a `#` line inside a block is not a
    heading)."""
    lines = tuple(text.splitlines())
    headings, blocks = [], []
    heading, fence = "", None
    for number, line in enumerate(lines):
        fenced = _FENCE.fullmatch(line)
        if fence is not None:
            if fenced and not fenced[1].strip():
                blocks.append(Block(fence[0], tuple(fence[2]), heading, fence[1]))
                fence = None
            else:
                fence[2].append(line)
        elif fenced:
            fence = (fenced[1].strip(), number, [])
        elif found := _HEADING.fullmatch(line):
            headings.append(Heading(len(found[1]), found[2].strip(), number))
            heading = found[2].strip()
    assert fence is None, f"{name}: a code block opened on line {fence[1] + 1} never closes"
    return Page(name, lines, tuple(headings), tuple(blocks))


def doc(name: str) -> Page:
    """docs/NAME as a page."""
    return page(DOCS / name)


def pages() -> list[Page]:
    """Every page whose commands the tests hold: the README, each of docs/, and the student
    bundle's README."""
    return [page(README), *(page(p) for p in sorted(DOCS.glob("*.md"))), page(STUDENT_README)]
