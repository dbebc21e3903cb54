"""The whole GPU check, for a CUDA machine: tests, check, benchmark twice, autograde, shards.

    python -m grader.gpu_check --out results/gpu

Runs the GPU tests (the timing attacks under real `nbgrader autograde` among them),
`check --hint` on the reference and four buggy kernels, the benchmark twice (the spread
between runs is the noise floor), the plots, the backward's benchmark and its plot once, and
`nbgrader autograde` of a small cohort with the timing cell, and the sample cohort graded by
two shards at once into a PostgreSQL gradebook (when I1_GRADEBOOK_URL names one); writes
everything under --out and prints a short table last.
`scripts/gpu_check.sh` sets up nbgrader's wheels (and a private PostgreSQL) first on a bare
machine. Exit status: 0 when every step ran (read the table for how each went), 2 for a
usage error or a machine without a CUDA device; only `check` runs without one (in Triton's
interpreter).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import time
from datetime import datetime
from pathlib import Path

import torch

from grader import course, sample_cohort
from grader.grading.grading_log import read_record
from grader.grading.timing_record import SIDECAR
from grader.zoo import BUGS, write_bug
from grader.zoo.bug import COPY_FIRST, base_path
from learning.workshops.check import UsageError
from learning.workshops.measuring.results import BACKWARD, load
from learning.workshops.paths import unwritable

STEPS = ("tests", "check", "benchmark", "autograde", "shards")
NEEDS_CUDA = ("tests", "benchmark", "autograde", "shards")
BACKWARD_OPTIONS = ("--shapes", "4096x4096,65536x512", "--warps", "4", "--reps", "50")
"""The backward's run: the design's two shapes, one num_warps, fewer calls; a few seconds on an
H200, most of them Python starting and Triton compiling."""
SHARDS = 2
SHARD_WORKERS = 2
"""Without CUDA the GPU tests all skip, the benchmark refuses and the timing cell scores 0."""


def run(args: list[str], log: Path) -> tuple[int, float]:
    """Run a command, its output to `log`; return exit status and seconds."""
    started = time.monotonic()
    with log.open("w") as out:
        done = subprocess.run(args, stdout=out, stderr=subprocess.STDOUT, cwd=course.REPO)
    return done.returncode, time.monotonic() - started


def checks(out: Path) -> list[str]:
    """`check --json` on the reference, six bugs (two that copy, two only the clean room's
    replay shows) and the decompositions whose launches are recorded another way (a compiled
    handle, the autotuner, heuristics, a grid-stride loop), as real CUDA kernels."""
    lines = []
    impls = [("reference", course.REPO / "grader" / "reference.py")]
    for name in (
        "ignores-column-stride",
        "pads-with-zero",
        "copies-first",
        "softmax-beside-kernel",
        "normalizes-in-torch",
        "python-helper-in-kernel",
    ):
        impls.append((name, write_bug(next(b for b in BUGS if b.name == name), out)))
    for shape in ("compiled_handle", "autotuned", "heuristics", "persistent"):
        impls.append((shape, base_path(shape)))
    for name, path in impls:
        log = out / f"check_{name}.json"
        code, seconds = run(
            [
                sys.executable,
                "-m",
                "learning.workshops.check",
                "strided_softmax",
                "--json",
                "--impl",
                str(path),
            ],
            log,
        )
        try:
            report = json.loads(log.read_text())
        except ValueError:
            lines.append(f"check {name:<22} exit {code}: no JSON report, see {log}")
            continue
        passed = sum(c["passed"] for c in report["cases"])
        hints = ",".join(h["id"] for h in report["hints"]) or "-"
        lines.append(
            f"check {name:<22} exit {code}  {passed}/{len(report['cases'])} pass  hints {hints}"
            f"  {seconds:.1f} s  ({report['device']})"
        )
    return lines


def benchmarks(out: Path) -> list[str]:
    """The benchmark of the reference, twice; the table of run 1 and the spread."""
    paths = [out / "i1_run1.json", out / "i1_run2.json"]
    for path in paths:
        code, _ = run(
            [
                sys.executable,
                "-m",
                "learning.workshops.benchmark",
                "--op",
                "strided_softmax",
                "--impl",
                "grader/reference.py",
                "--output",
                str(path),
            ],
            path.with_suffix(".log"),
        )
        if code:
            return [f"benchmark failed (exit {code}): see {path.with_suffix('.log')}"]
    run(
        [
            sys.executable,
            "-m",
            "learning.workshops.plots",
            str(paths[0]),
            "--out",
            str(out),
        ],
        out / "plots.log",
    )
    first, second = load(paths[0]), load(paths[1])
    lines = [
        f"benchmark on {first.device} ({first.created})",
        f"{'variant':<14}{'shape':<11}{'layout':<11}{'mode':<6}{'warps':>5}"
        f"{'ms':>9}{'GB/s':>8}{'run2 ms':>9}",
    ]
    spreads = []
    for row in first.rows:
        other = second.find(row.variant, row.shape, row.layout, row.mode, row.num_warps)
        spreads.append(abs(other.median_ms - row.median_ms) / row.median_ms)
        lines.append(
            f"{row.variant:<14}{row.shape:<11}{row.layout:<11}{row.mode:<6}"
            f"{row.num_warps or '-':>5}{row.median_ms:>9.4f}{row.gbps_logical:>8.0f}"
            f"{other.median_ms:>9.4f}"
        )
    for row in first.rows:
        if row.variant == "direct" and row.layout == "transpose":
            copy = first.find("copy", row.shape, "transpose", row.mode, row.num_warps)
            lines.append(
                f"direct/copy {row.shape} {row.mode} {row.num_warps} warps: "
                f"{row.median_ms / copy.median_ms:.2f}"
            )
    lines.append(
        f"run-to-run spread of medians: median {statistics.median(spreads):.1%}, "
        f"max {max(spreads):.1%}"
    )
    return lines


def backward_benchmark(out: Path) -> list[str]:
    """The backward benchmark of the reference and its plot (backward.png); the table of its
    cold rows on transposed y and dy."""
    path = out / "backward.json"
    code, seconds = run(
        [
            sys.executable,
            "-m",
            "learning.workshops.benchmark",
            "--op",
            BACKWARD,
            "--impl",
            "grader/reference.py",
            "--output",
            str(path),
            *BACKWARD_OPTIONS,
        ],
        path.with_suffix(".log"),
    )
    if code:
        return [f"backward benchmark failed (exit {code}): see {path.with_suffix('.log')}"]
    run(
        [sys.executable, "-m", "learning.workshops.plots", str(path), "--out", str(out)],
        out / "backward_plots.log",
    )
    lines = [
        f"backward benchmark in {seconds:.0f} s, transposed y and dy, cold",
        f"{'variant':<14}{'shape':<11}{'warps':>5}{'ms':>9}{'GB/s':>8}",
    ]
    for row in load(path).rows:
        if (row.layout, row.mode) == ("transpose", "cold"):
            lines.append(
                f"{row.variant:<14}{row.shape:<11}{row.num_warps or '-':>5}"
                f"{row.median_ms:>9.4f}{row.gbps_logical:>8.0f}"
            )
    return lines


def autograde(out: Path) -> list[str]:
    """Autograde the solution, a copy-first solution and a bug, timing cell included."""
    started = time.monotonic()
    try:
        root = course.new_course(out / "course")
        course.submit(root, "solution", course.solved_notebook(root))
        course.submit(root, "copy-first", course.solved_notebook(root, COPY_FIRST))
        bug = next(b for b in BUGS if b.name == "ignores-column-stride")
        course.submit(root, bug.name, course.solved_notebook(root, bug.edits))
        result = course.autograde(root)
    except course.CourseError as exc:
        (out / "autograde.log").write_text(f"{exc}\n")
        return [f"autograde failed: see {out / 'autograde.log'}"]
    seconds = time.monotonic() - started
    (out / "autograde.log").write_text(result.log)
    lines = [f"autograde of 3 submissions: {seconds:.0f} s; failed: {list(result.failed)}"]
    scores: dict[str, dict[str, float]] = {}
    for cell in course.cell_scores(root):
        scores.setdefault(cell.student, {})[cell.cell] = cell.score
    for student, cells in sorted(scores.items()):
        total = sum(score or 0 for score in cells.values())
        lines.append(f"  {student:<22} total {total:g}  timing {cells.get('hidden_timing')}")
    lines += time_breakdown(root)
    sidecar = root / "autograded" / "solution" / course.ASSIGNMENT / SIDECAR
    if sidecar.exists():
        (out / "sidecar_solution.json").write_text(sidecar.read_text())
    return lines


def grading_seconds(root: Path) -> dict[str, float]:
    """How long each graded student's autograde took, from the grading records."""
    took = {}
    for student in sorted(p.name for p in (root / "submitted").iterdir()):
        record = read_record(root, course.ASSIGNMENT, student)
        if record is not None and record.finished:
            finished = datetime.fromisoformat(record.finished)
            took[student] = (finished - datetime.fromisoformat(record.started)).total_seconds()
    return took


def time_breakdown(root: Path) -> list[str]:
    """Each student's grading time and where it went, from the grading logs: the sandboxed
    notebook, its slowest cells, each hidden check."""
    lines = []
    for student, seconds in grading_seconds(root).items():
        record = read_record(root, course.ASSIGNMENT, student)
        lines.append(f"  {student}: graded in {seconds:.1f} s")
        for line in record.lines:
            said = line.split("  ", 1)[-1].splitlines()[0]
            if re.search(r"\(\d+\.\d s", said) or said.startswith(("ran the", "its slowest")):
                lines.append(f"    {said[:110]}")
    return lines


def shards(out: Path) -> list[str]:
    """The sample cohort graded by SHARDS `grader.parallel --shard` processes at once (as
    SHARDS machines would) into the PostgreSQL gradebook I1_GRADEBOOK_URL names
    (scripts/gpu_check.sh starts a private one); the wall time, each student's grading time
    and score."""
    url = os.environ.get("I1_GRADEBOOK_URL", "")
    if not url.startswith(("postgresql://", "postgres://", "postgresql+")):
        return ["shards skipped: I1_GRADEBOOK_URL names no PostgreSQL gradebook"]
    try:
        members = sample_cohort.build(out / "cohort")
    except course.CourseError as exc:
        (out / "shards.log").write_text(f"{exc}\n")
        return [f"shards failed: see {out / 'shards.log'}"]
    root = out / "cohort"
    started = time.monotonic()
    with (out / "shards.log").open("w") as log:
        shards = [
            subprocess.Popen(
                [sys.executable, "-m", "grader.parallel", course.ASSIGNMENT, "--course", str(root)]
                + ["--shard", f"{k}/{SHARDS}", "--workers", str(SHARD_WORKERS)],
                stdout=log,
                stderr=subprocess.STDOUT,
                cwd=course.REPO,
            )
            for k in range(1, SHARDS + 1)
        ]
        codes = [shard.wait() for shard in shards]
    seconds = time.monotonic() - started
    took = grading_seconds(root)
    totals: dict[str, float] = {}
    for cell in course.cell_scores(root):
        totals[cell.student] = totals.get(cell.student, 0.0) + (cell.score or 0.0)
    lines = [
        f"shards: {len(members)} students, {SHARDS} shards x {SHARD_WORKERS} workers into "
        f"PostgreSQL: {seconds:.0f} s ({seconds / len(members):.1f} s a student), exit {codes}",
        f"  grading time per student: median {statistics.median(took.values()):.0f} s, "
        f"{min(took.values()):.0f}-{max(took.values()):.0f} s",
    ]
    lines += [f"  {s:<28} {totals.get(s, 0):>5g} points, {took.get(s, 0):.0f} s" for s in took]
    ungraded = [f"{m.student} ({m.kind})" for m in members if m.student not in took]
    if ungraded:  # the crasher fails by design (a shard with it exits 1); no-submission has none
        lines.append(f"  not graded: {', '.join(ungraded)}")
    return lines


def bytecode_warning() -> list[str]:
    """A line for the table when torch has no bytecode and this Python writes none (as on
    the H200 host): every grading process then imports torch from its source, seconds each,
    and the autograde times measured here are not the course's."""
    import importlib.util

    cached = Path(importlib.util.cache_from_source(torch.__file__))
    if not sys.dont_write_bytecode or cached.exists():
        return []
    return [
        f"warning: torch has no bytecode ({cached.parent}) and this Python writes none: each "
        "grading process imports it from source; scripts/gpu_check.sh compiles it first"
    ]


def check_options(out: Path, steps: list[str], skipped: list[str]) -> None:
    """UsageError, before anything is written, for options this run cannot carry out."""
    if not steps:
        raise UsageError("--skip names every step, so there is nothing to run; skip fewer.")
    problem = unwritable(out)
    if problem:
        raise UsageError(f"--out {out}: {problem}; choose another folder.")
    for step, scratch in (("autograde", out / "course"), ("shards", out / "cohort")):
        if step in steps and scratch.exists() and not (scratch / course.SCRATCH_MARK).is_file():
            if not scratch.is_dir() or any(scratch.iterdir()):
                raise UsageError(
                    f"--out {out}: {step} builds a scratch course in {scratch}, which holds "
                    "something else; choose another folder."
                )
    needs = [step for step in steps if step in NEEDS_CUDA]
    if needs and not torch.cuda.is_available():
        raise UsageError(
            f"this machine has no CUDA device and {', '.join(needs)} cannot run without one; "
            f"run on a GPU machine, or skip them with --skip {' '.join(skipped + needs)}."
        )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m grader.gpu_check", description=__doc__.splitlines()[0]
    )
    parser.add_argument("--out", default="results/gpu", help="folder for logs and results")
    parser.add_argument(
        "--skip",
        nargs="*",
        default=[],
        choices=STEPS,
        metavar="STEP",
        help=f"steps to skip: {' '.join(STEPS)}",
    )
    args = parser.parse_args(argv)
    out = Path(args.out).resolve()
    steps = [step for step in STEPS if step not in args.skip]
    try:
        check_options(out, steps, list(dict.fromkeys(args.skip)))
    except UsageError as exc:
        print(f"gpu_check: {exc}", file=sys.stderr)
        return 2
    out.mkdir(parents=True, exist_ok=True)
    table = bytecode_warning()
    for line in table:  # at once, not only in the table at the end
        print(line)
    if "tests" in steps:
        code, seconds = run(
            [
                sys.executable,
                "-m",
                "pytest",
                "-q",
                "-rP",  # the passed tests' output too: the attacks' scores, the ratios
                "-m",
                "gpu",
                "-p",
                "no:cacheprovider",
                "tests/test_gpu.py",
                "tests/test_benchmark.py",
                "tests/test_backward_benchmark.py",
                "tests/test_evidence.py",
                "tests/exploits/test_timing_attacks.py",
            ],
            out / "pytest_gpu.log",
        )
        tail = (out / "pytest_gpu.log").read_text().strip().splitlines()[-1:]
        table.append(f"pytest -m gpu: exit {code} in {seconds:.0f} s: {' '.join(tail)}")
    if "check" in steps:
        table += checks(out)
    if "benchmark" in steps:
        table += benchmarks(out) + backward_benchmark(out)
    if "autograde" in steps:
        table += autograde(out)
    if "shards" in steps:
        table += shards(out)
    print("\n".join(table))
    (out / "summary.txt").write_text("\n".join(table) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
