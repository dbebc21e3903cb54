"""Every correct shape passes the public cases with no hint; every bug in a shape gets its own.

In process, with no child and no CLI: the shapes split rows among programs in every way
public kernels do (grid axes, grid-stride loops, tiles of rows, tiles of columns, compiled
handles, autotune, heuristics), and the checks must judge what was written, not how.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from grader.zoo import write_bug
from grader.zoo.bug import DECOMPOSITIONS, base_path
from grader.zoo.shape_bugs import SHAPE_BUGS
from learning.workshops.checking.cases import OPS, CaseResult, suite
from learning.workshops.checking.hint_rules import diagnose
from learning.workshops.checking.loader import load_module
from learning.workshops.notebook.testing import run_cases

SEED = 20261130
BLAMING = ("output-layout", "crash")
"""Hints that blame the layout or a crash: wrong for a bug that is neither."""


def public_results(path: Path, op: str) -> list[CaseResult]:
    """The implementation at `path` run on every public case of `op`, in this process."""
    fn = getattr(load_module(path), OPS[op].function)
    return run_cases(fn, op, suite(op, None, "cpu"), seed=SEED)


@pytest.mark.parametrize("op", ["strided_softmax", "softmax_kernel"])
@pytest.mark.parametrize("shape", list(DECOMPOSITIONS))
def test_shape_passes(shape, op):
    """Does this correct decomposition pass every public case of the op, with no hint?"""
    results = public_results(base_path(shape), op)
    assert [r.detail for r in results if not r.passed] == []
    assert diagnose(results) == []


@pytest.mark.parametrize("bug", SHAPE_BUGS, ids=[b.name for b in SHAPE_BUGS])
def test_shape_bug_gets_its_hint(bug, tmp_path):
    """Does a bug written in a shape fail with its own hint, and none blaming layout or crash?"""
    results = public_results(write_bug(bug, tmp_path), bug.op)
    hints = [h.id for h in diagnose(results)]
    assert not all(r.passed for r in results)
    assert bug.hint in hints, [r.detail for r in results if not r.passed]
    assert [h for h in hints if h in BLAMING and h != bug.hint] == [], hints


@pytest.fixture(scope="module")
def members(tmp_path_factory):
    """The agreement run's members: the family, the reference and the in-process bugs."""
    from agreement import members

    return members(tmp_path_factory.mktemp("members"))


def test_verdicts_need_no_audit(members, monkeypatch):
    """On a GPU no audit watches the loads and stores: do values, layout, the sentinel
    parent and the guarded output alone give every member the same pass/fail per case and
    the same hints as the audited run (what tests/agreement.py then checks on a GPU)?"""
    import contextlib

    from learning.workshops.checking import cases, followons

    audited = {m.name: public_results(Path(m.path), m.op) for m in members}
    monkeypatch.setattr(cases, "_audit", lambda x: contextlib.nullcontext())
    monkeypatch.setattr(followons, "_audited", lambda *t, **k: contextlib.nullcontext())
    differ = []
    for m in members:
        plain = public_results(Path(m.path), m.op)  # a fresh module: no outputs cached
        seen = audited[m.name]
        if [r.passed for r in plain] != [r.passed for r in seen] or [
            h.id for h in diagnose(plain)
        ] != [h.id for h in diagnose(seen)]:
            differ.append(m.name)
    assert differ == []
