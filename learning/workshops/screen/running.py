"""The source screen run in a process of its own, bounded, and what a person reads of it.

`screen_file` runs `python -m learning.workshops.screen` on a notebook or `.py` file: the
child sets its own CPU-time and memory limits before it reads a byte, and the parent stops
it at a wall-clock deadline, so a submission built to make the reading slow or large stops
there (`Screened.unfinished` says why) and never stalls or crashes the process that grades
the cohort. Grading holds such a submission for review; the student's check says the same.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from dataclasses import dataclass
from pathlib import Path

from learning.workshops.screen.reading import MAX_FINDINGS, Finding
from learning.workshops.screen.rules import RULES

SECONDS = 10.0
"""The longest one reading may take, wall clock and CPU alike: the course's notebook takes
about 0.5 s (most of it the child's start), a hostile one at most this."""
MEMORY_MIB = 512
"""The address space the reading child may map: it needs about 60 MiB for the course's
notebook."""
REPORT_BYTES = 1 << 20
"""The most of the child's report read back (MAX_FINDINGS findings take about 30 KiB)."""
PACKAGE_ROOT = Path(__file__).resolve().parents[3]
"""The folder that holds `learning`, put on the child's path."""


@dataclass(frozen=True)
class Screened:
    """What the screen found in one file: its findings (at most MAX_FINDINGS), how many more
    it left out, why it could not finish reading ("" when it did), and its seconds."""

    findings: tuple[Finding, ...] = ()
    more: int = 0
    unfinished: str = ""
    seconds: float = 0.0

    @property
    def held(self) -> bool:
        """Would grading hold this submission for an instructor's review?"""
        return bool(self.findings or self.unfinished)

    def to_json(self) -> dict:
        return {
            "findings": [f.to_json() for f in self.findings],
            "more": self.more,
            "unfinished": self.unfinished,
        }


def screen_file(path: Path, seconds: float = SECONDS, memory_mib: int = MEMORY_MIB) -> Screened:
    """Read the notebook or `.py` file at `path` in a bounded child (see the module)."""
    command = [
        sys.executable,
        "-m",
        "learning.workshops.screen",
        "--json",
        f"--seconds={seconds}",
        f"--memory-mib={memory_mib}",
        str(Path(path).resolve()),
    ]
    path_now = os.environ.get("PYTHONPATH")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(PACKAGE_ROOT), path_now]))}
    started = time.monotonic()
    try:
        done = subprocess.run(
            command, capture_output=True, timeout=seconds, env=env, stdin=subprocess.DEVNULL
        )
    except subprocess.TimeoutExpired:
        return Screened(unfinished=f"it took more than {seconds:g} s", seconds=seconds)
    took = time.monotonic() - started
    if done.returncode != 0:
        return Screened(unfinished=_why_stopped(done, seconds, memory_mib), seconds=took)
    try:
        report = json.loads(done.stdout[:REPORT_BYTES])
        findings = tuple(Finding.from_json(f) for f in report["findings"][:MAX_FINDINGS])
        more = int(report["more"])
    except (ValueError, KeyError, TypeError):
        return Screened(unfinished="its report was not readable", seconds=took)
    return Screened(findings, more, "", took)


def _why_stopped(done: subprocess.CompletedProcess, seconds: float, memory_mib: int) -> str:
    """Why the reading child ended without a report, in a few words."""
    if done.returncode == -signal.SIGXCPU:
        return f"it used more than {seconds:g} s of CPU time"
    if done.returncode < 0:
        return f"it was stopped by {signal.Signals(-done.returncode).name}"
    said = done.stderr[-2000:].decode("utf-8", "replace").strip().splitlines()
    last = said[-1].removeprefix("screen: ")[:200] if said else f"exit status {done.returncode}"
    if "MemoryError" in last:
        return f"it needed more than {memory_mib} MiB"
    return last


WIDTH = 92
"""The width a student's report is wrapped to (a line of code is never cut)."""
HEADER = (
    "Before you submit: grading reads the code its checks load from your notebook (imports, "
    "functions, classes, constants) and holds your grade for an instructor to read when a "
    "line could change what the checks see. A hold costs no point: your points are computed "
    "as usual, and wait for the review. These lines would be held:"
)


def report_lines(screened: Screened) -> list[str]:
    """What a student reads of the screen: each finding with its line, why it matters and
    what to write instead; nothing when there is nothing to hold."""
    if not screened.held:
        return []
    lines = textwrap.wrap(HEADER, WIDTH)
    for finding in screened.findings:
        under = f" (under '{finding.heading}')" if finding.heading else ""
        lines.append(f"  cell {finding.cell}{under}, line {finding.line}: `{finding.code}`")
        lines += textwrap.wrap(finding.text, WIDTH, initial_indent="    ", subsequent_indent="    ")
        instead = f"instead: {RULES[finding.rule].instead}"
        lines += textwrap.wrap(instead, WIDTH, initial_indent="    ", subsequent_indent="    ")
    if screened.more:
        lines.append(f"  ... and {screened.more} more lines like these")
    if screened.unfinished:
        said = (
            f"The screen could not finish reading the file ({screened.unfinished}), so grading "
            "would hold it whole: split what makes it so long, or ask your instructor."
        )
        lines += textwrap.wrap(said, WIDTH, initial_indent="  ", subsequent_indent="  ")
    return lines
