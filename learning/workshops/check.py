"""Check an implementation against the public cases, with hints that point at the bug.

    python -m learning.workshops.check strided_softmax [--hint] [--impl FILE] [--json]
                                                       [--draw FILE.png] [--sandbox MODE]
                                                       [--remote]

The implementation runs in a child process, so a crash or a hang becomes a failed case. On
Linux that child runs sandboxed (`checking.sandbox`: bubblewrap, on a copy of the file), so
a notebook from someone else cannot read or change your files; where no sandbox can start,
the check says so in one line before it runs anything, and runs unsandboxed. The
source screen reads the same file as grading does (`learning.workshops.screen`) and lists
each line grading would hold for an instructor's review, with what to write instead.
When a case fails, the same child then runs smaller views until it finds the smallest that
fails the same way (`checking.shrink`); the report gives it, and --draw saves its picture.
`--remote` runs the same check on the course's GPU queue (`remote`, docs/queue.md).
Exit status: 0 when every case passes (or an optional exercise is not attempted: still its
stub), 1 when any fails, 2 for a usage error, 3 for an internal error (the checker itself
failed, not your code: report it with the output).
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import shlex
import sys
import time
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from learning.workshops import remote
from learning.workshops.checking.cases import OPS, Case, CaseResult, suite
from learning.workshops.checking.faults import (
    INTERNAL_ERROR,
    INTERNAL_EXIT,
    fault_text,
    internal_message,
)
from learning.workshops.checking.hint_rules import diagnose, not_attempted
from learning.workshops.checking.hints import MESSAGES, Hint, HintId
from learning.workshops.checking.isolation import IsolatedRun, Session
from learning.workshops.checking.passes import where_to_start
from learning.workshops.checking.raised import raised_again
from learning.workshops.checking.sandbox import MODES, checked_copy, unavailable
from learning.workshops.checking.shrink import MAX_SECONDS, Shrunk, shrink, starting_case
from learning.workshops.checking.shrink import draw as draw_shrunk
from learning.workshops.checking.shrink import report_lines as shrunk_lines
from learning.workshops.contracts import select_mode
from learning.workshops.paths import unwritable
from learning.workshops.screen import Screened, report_lines, screen_file

CASE_TIMEOUT_S = 120.0
SCHEMA = "i1-check/2"
"""The `--json` report's schema; 2 since each case's `failure` is spelled as the hint id it
leads to (`no-kernel`, not `no-launch`)."""
EXIT_STATUSES = (
    "Exit status: 0 when every case passes (or an optional exercise is still its stub: not "
    "attempted), 1 when any fails, 2 for a usage error, 3 for an internal error in the "
    "checker (not your code)."
)


class UsageError(Exception):
    """A problem with how the command was called; the message says what to do."""


@dataclass
class Report:
    """The outcome of one check: every case, and the hints they point to."""

    op: str
    impl: str
    mode: str
    device: str
    seed: int
    results: list[CaseResult]
    hints: list[Hint]
    notes: tuple[str, ...] = ()  # what the interpreter did unlike a GPU (autotune, say)
    smallest: Shrunk | None = None  # the smallest view that fails as a failed case did
    saved: float | None = None  # when the file checked was last saved (its mtime)
    screened: Screened = Screened()  # the lines grading would hold for review
    sandboxed: bool = False  # whether its code ran in the check's sandbox

    @property
    def passed(self) -> bool:
        return bool(self.results) and all(r.passed for r in self.results)

    @property
    def attempted(self) -> bool:
        """False for an optional exercise still as its stub: nothing is checked of it, and
        nothing is wrong with leaving it."""
        return not not_attempted(self.results)

    @property
    def internal_errors(self) -> list[CaseResult]:
        """The cases the checker itself failed on: no evidence about the implementation."""
        return [r for r in self.results if r.failure == INTERNAL_ERROR]

    def to_json(self) -> dict:
        return {
            "schema": SCHEMA,
            "op": self.op,
            "impl": self.impl,
            "saved": None if self.saved is None else _iso(self.saved),
            "sandboxed": self.sandboxed,
            "mode": self.mode,
            "device": self.device,
            "seed": self.seed,
            "passed": self.passed,
            "attempted": self.attempted,
            "cases": [r.to_json() for r in self.results],
            "hints": [h.to_json() for h in self.hints],
            "internal_errors": [{"case": r.name, "detail": r.detail} for r in self.internal_errors],
            "notes": list(self.notes),
            "smallest_failing": self.smallest.to_json() if self.smallest else None,
            "screen": self.screened.to_json(),
        }


WORKSHOP_STEM = "strided_softmax"
"""The workshop's file (the notebook, or the page's .py), which holds every function."""
SEARCH_DEPTH = 3
"""Folders below the current one that a missing file is looked for in: the student bundle
keeps the notebook two down (`release/i1_strided_softmax/`), where the lab's terminal opens
one folder above `release/`."""
SEARCH_FOLDERS = 500
"""Most folders that look opens, so that running from a home folder stays quick."""


def default_names(op: str) -> tuple[str, str]:
    """The files the check reads without --impl: `<function>.py`, then `<function>.ipynb`."""
    stem = OPS[op].function
    return f"{stem}.py", f"{stem}.ipynb"


def find_impl(op: str, impl: str | None) -> Path:
    """The file to check: `--impl`, else `<function>.py`, else `<function>.ipynb` here."""
    if impl is not None:
        path = Path(impl)
        if not path.is_file():
            raise UsageError(f"--impl {impl}: no such file; give the path of your .py or notebook.")
        if path.suffix not in (".py", ".ipynb"):
            raise UsageError(f"--impl {impl}: expected a .py file or a notebook (.ipynb).")
        return path
    names = default_names(op)
    for name in names:
        if Path(name).is_file():
            return Path(name)
    raise UsageError(not_found(op, names))


def both_found(op: str, impl: str | None) -> str | None:
    """One line when --impl is not given and both default files are here: which one the
    check reads, and how to check the other instead."""
    py, notebook = default_names(op)
    if impl is not None or not (Path(py).is_file() and Path(notebook).is_file()):
        return None
    return (
        f"check: both {py} and {notebook} are here; checking {py} "
        f"(to check the notebook instead, pass --impl {notebook})"
    )


def not_found(op: str, names: tuple[str, str]) -> str:
    """The usage error when neither default file is here: where below this folder a file
    that defines the function is, and the exact --impl that checks it."""
    here = f"found neither {names[0]} nor {names[1]} in {Path.cwd()}"
    wanted = [*names, f"{WORKSHOP_STEM}.py", f"{WORKSHOP_STEM}.ipynb"]
    found = search_below(Path("."), list(dict.fromkeys(wanted)))
    if found is None:
        return f"{here}; run from the folder that holds your work or pass --impl FILE."
    folder = "this folder" if found.parent == Path(".") else f"{found.parent.as_posix()}/"
    return (
        f"{here}; {folder} holds {found.name}: run python -m learning.workshops.check {op} "
        f"--impl {shlex.quote(found.as_posix())}"
    )


def search_below(root: Path, names: list[str]) -> Path | None:
    """The first of `names` in `root` or a folder below it, breadth first (nearest folder,
    then the order of `names`), at most SEARCH_DEPTH down and SEARCH_FOLDERS opened; hidden
    and private folders (`.git`, `__pycache__`) are skipped."""
    level, opened = [root], 0
    for _ in range(SEARCH_DEPTH + 1):
        below = []
        for folder in level:
            if opened == SEARCH_FOLDERS:
                return None
            opened += 1
            try:
                entries = sorted(os.scandir(folder), key=lambda e: e.name)
            except OSError:  # unreadable: nothing of the student's is there
                continue
            files = {e.name for e in entries if e.is_file()}
            for name in names:
                if name in files:
                    return folder / name
            below += [
                folder / e.name
                for e in entries
                if e.is_dir(follow_symlinks=False) and e.name[0] not in "._"
            ]
        level = below
    return None


def picture_path(draw: str | None) -> Path | None:
    """Where --draw saves the picture: a .png in a folder that can be written, or None."""
    if draw is None:
        return None
    path = Path(draw)
    if path.suffix.lower() != ".png":
        raise UsageError(f"--draw {draw}: the picture is a PNG; give a name ending in .png.")
    why = unwritable(path.parent)
    if why:
        raise UsageError(f"--draw {draw}: cannot write there: {why}.")
    return path


def draw_smallest(report: Report, picture: Path | None) -> str | None:
    """Save the smallest failing view's picture at `picture`; the path saved, or None."""
    if picture is None or report.smallest is None:
        return None
    return str(draw_shrunk(report.smallest, report.seed, picture))


def drawn_line(report: Report, picture: Path | None, drawn: str | None) -> str:
    """The report's last line about --draw: where the picture is, or why there is none."""
    if drawn is not None:
        return f"\n    picture: {drawn}"
    if picture is None:
        return "\n    (--draw FILE.png saves its picture)" if report.smallest else ""
    why = "every case passes" if report.passed else "no failed case is a view to shrink"
    return f"\nNothing drawn at {picture}: {why}."


def run_check(
    op: str,
    impl: Path,
    cases: tuple[Case, ...] | None = None,
    seed: int | None = None,
    case_timeout_s: float = CASE_TIMEOUT_S,
    shrink_failures: bool = False,
    sandboxed: bool = False,
) -> Report:
    """Run `op`'s cases (its public ones by default) against the implementation at `impl`
    in a child process (in the check's sandbox, on a copy of `impl`, with `sandboxed`); with
    `shrink_failures`, then search the smallest view that fails as a failed case did."""
    mode = select_mode(verbose=False)
    device = "cpu" if mode == "interpreter" else "cuda"
    seed = secrets.randbelow(2**31) if seed is None else seed
    chosen = suite(op, cases, device)
    saved = impl.stat().st_mtime  # what is on disk now is what the child loads
    gpu = mode == "gpu"
    with checked_copy(impl, sandboxed, gpu) as (path, wrap), Session(path, wrap) as session:
        run = session.run_cases(op, OPS[op].function, chosen, seed, case_timeout_s)
        if run.load_error:
            raise UsageError(run.load_error.replace(str(path), str(impl.resolve())))
        hints = diagnose(run.results)
        start = starting_case(chosen, run.results, hints) if shrink_failures else None
        smallest = _shrunk(session, op, run, start, seed, case_timeout_s) if start else None
    notes = tuple(dict.fromkeys(run.notes))
    report = Report(
        op, str(impl), run.mode, run.device, seed, run.results, hints, notes, smallest, saved
    )
    report.screened = screen_file(impl)
    report.sandboxed = sandboxed
    return report


def use_sandbox(choice: str, impl: Path) -> bool:
    """Whether the check runs `impl` sandboxed (`--sandbox`): where none can start, "auto"
    says so in one line on stderr, before anything runs, and "required" refuses."""
    if choice == "off":
        return False
    why = unavailable()
    if why is None:
        return True
    if choice == "required":
        raise UsageError(f"--sandbox=required, but no sandbox can start here: {why}")
    print(
        f"check: not sandboxed: {impl.name} will run as you, able to read and change your "
        f"files (check only notebooks you trust), because {why}",
        file=sys.stderr,
        flush=True,
    )
    return False


def _shrunk(
    session: Session,
    op: str,
    run: IsolatedRun,
    start: tuple[Case, CaseResult],
    seed: int,
    case_timeout_s: float,
) -> Shrunk:
    """The smallest view that fails as the case `start` (a case and its result) did, its
    candidates run in `session`'s child; their notes join `run`'s."""
    timeout = min(case_timeout_s, MAX_SECONDS)

    def candidates(cases: list[Case]) -> list[CaseResult]:
        more = session.run_cases(op, OPS[op].function, cases, seed, timeout)
        run.notes.extend(more.notes)
        return more.results

    return shrink(candidates, *start)


def _iso(stamp: float) -> str:
    return datetime.fromtimestamp(stamp).astimezone().isoformat(timespec="seconds")


def saved_words(stamp: float | None, now: float | None = None) -> str:
    """When the checked file was saved, in words: the check reads the file on disk, so an
    unsaved notebook's edits are not what it checks ("saved 14:03:12, 2 minutes ago")."""
    if stamp is None:
        return "saved at an unknown time"
    ago = max(0.0, (time.time() if now is None else now) - stamp)
    when = datetime.fromtimestamp(stamp).strftime("%H:%M:%S")
    if ago < 60:
        return f"saved {when}, {ago:.0f} s ago"
    if ago < 3600:
        return f"saved {when}, {ago // 60:.0f} minutes ago"
    return f"saved {datetime.fromtimestamp(stamp):%Y-%m-%d %H:%M}: save your notebook first?"


def format_report(report: Report, show_hints: bool) -> str:
    """The report as people read it: one line per case, the checker's own faults, the hints."""
    passed = sum(r.passed for r in report.results)
    lines = [
        f"{report.op} from {report.impl}, {saved_words(report.saved)}: {passed} of "
        f"{len(report.results)} cases pass ({report.device}, seed {report.seed})"
    ]
    if not report.attempted:  # an optional exercise left as its stub: one line, no cases
        return "\n".join(
            [
                lines[0].replace(" cases pass (", " cases pass, not attempted ("),
                MESSAGES[HintId.NOT_ATTEMPTED],
            ]
        )
    lines += [f"  note: {note}" for note in report.notes]
    width = max((len(r.name) for r in report.results), default=0)
    again = raised_again(report.results)
    for r in report.results:
        tag = "PASS" if r.passed else "ERROR" if r.failure == INTERNAL_ERROR else "FAIL"
        if r.name in again:  # a later case of an error told already: one line for them all
            names = again.pop(r.name)
            if names:
                cases = f"{len(names)} more case{'s' if len(names) > 1 else ''}"
                lines.append(f"  {tag:<5} {cases} raised the same error: {', '.join(names)}")
            continue
        lines.append(f"  {tag:<5} {r.name:<{width}}  {r.verdict.text}")
    faults = report.internal_errors
    if faults:
        lines.append("\n" + internal_message([r.detail for r in faults]))
    failed = [r for r in report.results if not r.passed and r.failure != INTERNAL_ERROR]
    if report.passed:
        lines.append("All cases pass.")
    elif not failed:
        lines.append("Every other case passes.")
    elif not show_hints:
        lines.append("Some cases fail. Run again with --hint for a clue.")
    elif not report.hints:
        lines.append("No hint matches this pattern of failures; compare the failing cases above.")
    else:
        for hint in report.hints:
            lines.append(f"\nHint [{hint.id}]: {hint.message}")
            lines.extend(f"    evidence: {e}" for e in hint.evidence)
    if any(h.id == HintId.UNFINISHED for h in report.hints):
        start = where_to_start(Path(report.impl), report.op)
        lines += ["", start] if start else []
    if report.smallest:
        lines += ["", *shrunk_lines(report.smallest, report.seed)]
    screened = report_lines(report.screened)
    return "\n".join(lines + ([""] + screened if screened else []))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m learning.workshops.check",
        description=__doc__.splitlines()[0],
        epilog=EXIT_STATUSES,
    )
    parser.add_argument("op", help=f"what to check: {', '.join(OPS)}")
    parser.add_argument("--hint", action="store_true", help="explain the failures")
    parser.add_argument("--impl", help="a .py file or notebook that defines the function")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument("--seed", type=int, help="repeat a run's random inputs")
    parser.add_argument(
        "--case-timeout", type=float, default=CASE_TIMEOUT_S, help="seconds allowed per case"
    )
    parser.add_argument(
        "--draw", metavar="FILE.png", help="save a picture of the smallest failing view"
    )
    parser.add_argument(
        "--sandbox",
        choices=MODES,
        default="auto",
        help="run the checked code in a sandbox where it cannot touch your files (Linux, "
        "bubblewrap): auto (default) sandboxes where one can start, else says so in one line "
        "and runs it anyway; required refuses to run without one; off runs it unsandboxed",
    )
    parser.add_argument(
        "--remote",
        action="store_true",
        help=f"run it on the course's GPU queue named in your {remote.HANDOUT} (docs/queue.md)",
    )
    args = parser.parse_args(argv)
    try:
        if args.op not in OPS:
            raise UsageError(f"unknown op {args.op!r}; choose one of {', '.join(OPS)}.")
        impl = find_impl(args.op, args.impl)
        if note := both_found(args.op, args.impl):
            print(note, file=sys.stderr, flush=True)
        if args.remote:
            if args.draw:
                raise UsageError("--draw draws from a check run here; drop it with --remote.")
            sent = {"hint": args.hint} | ({} if args.seed is None else {"seed": args.seed})
            return remote.check(args.op, impl, sent, args.json)
        picture = picture_path(args.draw)
        report = run_check(
            args.op,
            impl,
            seed=args.seed,
            case_timeout_s=args.case_timeout,
            shrink_failures=True,
            sandboxed=use_sandbox(args.sandbox, impl),
        )
        drawn = draw_smallest(report, picture)
    except UsageError as exc:
        print(f"check: {exc}", file=sys.stderr)
        return 2
    except Exception as exc:  # the checker's own code, outside any case
        print(f"check: {internal_message([fault_text(exc)])}", file=sys.stderr)
        return INTERNAL_EXIT
    if args.json:
        print(json.dumps({**report.to_json(), "picture": drawn}, indent=2))
    else:
        print(format_report(report, args.hint) + drawn_line(report, picture, drawn))
    if report.internal_errors:
        return INTERNAL_EXIT
    return 0 if report.passed or not report.attempted else 1


if __name__ == "__main__":
    sys.exit(main())
