"""CPU and GPU agree: the verdicts on every correct decomposition and on the zoo's bugs.

    python tests/agreement.py --out verdicts.json [--jobs N]

Runs each correct shape in `grader/shapes/`, the reference, and every zoo bug whose check
runs in process (no crash, hang or runaway allocation) against the public cases, in this
process's mode: compiled on the GPU, or in Triton's interpreter (`TRITON_INTERPRET=1`, or no
GPU). It writes each member's per-case verdicts and hint ids as JSON. `tests/test_gpu.py`
runs it in both modes on one GPU machine and asserts that they agree: a test's tool, and its
JSON a record only that test reads, so it lives here rather than in `grader/`.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from multiprocessing import get_context
from pathlib import Path

SEED = 20261130
FOLLOW_ON_OPS = ("strided_softmax_", "strided_softmax_backward")
IN_PROCESS = ("crash", "timeout", "memory")
"""Hints whose bugs kill or hang the process: the isolated check proves those."""
REPLAYED = ("not-from-kernel", "held")
"""Hints only the clean room's replay of an isolated check gives: in process these bugs'
values are right, and a plain Python helper in a kernel runs only in the interpreter (on a
GPU it does not compile), so they are left out; `grader.gpu_check` checks them on CUDA."""
RACES = ("read-after-write", "overlap")
"""Hints of races: on a GPU the programs run in no fixed order, so such a bug's values are
right or wrong by chance there (or, where two programs write one row, right every time);
the interpreter runs them in order and its audit names the race. Their verdicts cannot be
the same on both, so they are left out."""


@dataclass(frozen=True)
class Member:
    """One implementation to run: a file, the op its function serves, and its expected hint."""

    name: str
    path: str
    op: str
    hint: str | None


def members(folder: Path) -> list[Member]:
    """The family, the reference (of every op) and the in-process bugs that are not races,
    written under `folder`."""
    from grader.zoo import BUGS, write_bug
    from grader.zoo.bug import DECOMPOSITIONS, REFERENCE, base_path

    found = [Member("reference", str(REFERENCE), "strided_softmax", None)]
    found += [Member(f"reference-{op}", str(REFERENCE), op, None) for op in FOLLOW_ON_OPS]
    found += [
        Member(f"shape-{s}", str(base_path(s)), "strided_softmax", None) for s in DECOMPOSITIONS
    ]
    found += [
        Member(bug.name, str(write_bug(bug, folder)), bug.op, bug.hint)
        for bug in BUGS
        if bug.hint is not None
        and bug.hint not in IN_PROCESS + REPLAYED + RACES
        and not bug.audited  # its hint takes the audit, which a GPU does not run
    ]
    return found


def verdicts(member: Member) -> dict:
    """Run `member` on the public cases of its op here; per-case verdicts and hint ids."""
    from learning.workshops.checking.cases import OPS, suite
    from learning.workshops.checking.hint_rules import diagnose
    from learning.workshops.checking.loader import load_function
    from learning.workshops.contracts import default_device, select_mode
    from learning.workshops.notebook.testing import run_cases

    select_mode(verbose=False)
    fn = load_function(Path(member.path), OPS[member.op].function)
    cases = suite(member.op, None, default_device().type)
    results = run_cases(fn, member.op, cases, seed=SEED)
    return {
        "name": member.name,
        "hint": member.hint,
        "cases": {r.name: {"passed": r.passed, "failure": r.failure} for r in results},
        "hints": [h.id for h in diagnose(results)],
    }


def run_all(jobs: int) -> dict:
    """Every member's verdicts, from `jobs` worker processes."""
    from learning.workshops.contracts import default_device, select_mode

    mode = select_mode(verbose=False)
    with tempfile.TemporaryDirectory(prefix="i1-agreement-") as folder:
        chosen = members(Path(folder))
        with ProcessPoolExecutor(max(1, jobs), mp_context=get_context("spawn")) as pool:
            rows = list(pool.map(verdicts, chosen))
    return {"mode": mode, "device": str(default_device()), "seed": SEED, "members": rows}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python tests/agreement.py", description=__doc__.splitlines()[0]
    )
    parser.add_argument("--out", required=True, help="the JSON file to write")
    parser.add_argument("--jobs", type=int, default=max(1, (os.cpu_count() or 2) // 2))
    args = parser.parse_args(argv)
    out = Path(args.out)
    if not out.parent.is_dir():
        print(f"agreement: {out.parent} is not a folder; create it first.", file=sys.stderr)
        return 2
    out.write_text(json.dumps(run_all(args.jobs), indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
