"""Every bug in the zoo fails the check with its own hint; the reference passes."""

from __future__ import annotations

import pytest
import triton
from test_shapes import public_results

from grader.edits import Edit, apply
from grader.zoo import BUGS, write_bug
from grader.zoo.bug import DECOMPOSITIONS, REFERENCE, base_path, base_source
from learning.workshops.check import run_check
from learning.workshops.checking.cases import OPS
from learning.workshops.checking.hint_rules import BLOCK_POINTERS_GONE, diagnose

CHECKED = [b for b in BUGS if b.hint is not None and b.base == "reference"]
IN_A_CHILD = ("crash", "timeout", "memory")
"""Hints of bugs that kill, hang or exhaust the process they run in: only a child shows them."""
THROUGH_THE_CLI = [
    b
    for b in CHECKED
    if b.hint in IN_A_CHILD
    or b.name
    in (
        "ignores-column-stride",
        "torch-softmax",
        "copies-first",
        "normalizes-in-torch",
        "python-helper-in-kernel",
    )
]
"""Bugs checked through `check`'s child process as students run it: those only a child can
show, those only the clean room's replay shows (not-from-kernel, held), and one each of
wrong values, no kernel and a copy, so the student's own path is held
for the commonest hints too (in process they get the same ones); every other bug is checked
in this process, below, by the same cases and rules."""
IN_PROCESS = [b for b in CHECKED if b not in THROUGH_THE_CLI]


@pytest.mark.parametrize("bug", THROUGH_THE_CLI, ids=[b.name for b in THROUGH_THE_CLI])
def test_bug_gets_its_hint(bug, tmp_path):
    """Does `check --hint` fail this bug with exactly the hint that explains it?"""
    timeout = 2.0 if bug.hint == "timeout" else 120.0  # every case of that bug hangs
    report = run_check(bug.op, write_bug(bug, tmp_path), case_timeout_s=timeout)
    assert not report.passed
    assert [h.id for h in report.hints] == [bug.hint], report.hints
    assert report.hints[0].evidence


@pytest.mark.parametrize("bug", IN_PROCESS, ids=[b.name for b in IN_PROCESS])
def test_bug_gets_its_hint_in_process(bug, tmp_path):
    """Do the public cases, run in this process, fail this bug with exactly its hint?"""
    results = public_results(write_bug(bug, tmp_path), bug.op)
    hints = diagnose(results)
    assert not all(r.passed for r in results)
    assert [h.id for h in hints] == [bug.hint], [r.detail for r in results if not r.passed]
    assert hints[0].evidence


@pytest.mark.parametrize("op", OPS)
def test_reference_passes(op):
    """Does the reference pass every public case of each op, with no hint?"""
    report = run_check(op, REFERENCE)
    assert report.passed, [r.detail for r in report.results if not r.passed]
    assert report.hints == []


BLOCK_POINTERS = (
    Edit(
        "softmax_kernel",
        "    x = tl.load(X + row * SR + cols * SC, "
        'mask=mask, other=-float("inf")).to(tl.float32)\n',
        "    block = tl.make_block_ptr(X + row * SR, (N,), (SC,), (0,), (BLOCK,), (0,))\n"
        '    x = tl.load(block, boundary_check=(0,), padding_option="zero").to(tl.float32)\n'
        '    x = tl.where(mask, x, -float("inf"))\n',
    ),
)
"""The reference's load through a block pointer, as much public Triton code loads: right on
Triton before 3.9, which still has block pointers, and refused by 3.9 and later."""
NO_BLOCK_POINTERS = tuple(int(part) for part in triton.__version__.split(".")[:2]) >= (3, 9)


@pytest.mark.skipif(not NO_BLOCK_POINTERS, reason="this Triton still has block pointers")
def test_block_pointers_get_their_hint_where_triton_removed_them(tmp_path):
    """On a Triton without block pointers, does a kernel that loads through one fail every
    case that launches it with Triton's sentence, and get the block-pointers hint rather
    than the stub's?"""
    impl = tmp_path / "block_pointers.py"
    impl.write_text(apply(REFERENCE.read_text(), BLOCK_POINTERS))
    report = run_check("strided_softmax", impl)
    failed = [r for r in report.results if not r.passed]
    assert len(failed) > 10
    assert all(BLOCK_POINTERS_GONE in r.detail for r in failed)
    assert [h.id for h in report.hints] == ["block-pointers"], report.hints


def test_every_hint_rule_has_a_zoo_member():
    """Is every hint id the rules can give proved by at least one zoo member (here, or in
    another shape by tests/test_shapes.py: running-max needs an online softmax), except
    block-pointers, a bug only on some Tritons (the test above)?"""
    from learning.workshops.checking.hint_rules import RULES

    proved = {b.hint for b in BUGS if b.hint is not None} | {"block-pointers"}
    assert {hint_id for hint_id, _ in RULES} == proved


@pytest.mark.parametrize("bug", BUGS, ids=[b.name for b in BUGS])
def test_edits_apply_exactly_once(bug):
    """Does each bug's edit change its base (and match exactly one place)?"""
    assert apply(base_source(bug.base), bug.edits) != base_source(bug.base)


def test_every_shape_is_a_file():
    """Does every shape the zoo lists have its module, and every module a DECOMPOSITIONS entry?"""
    folder = base_path("reference").with_name("shapes")
    assert {p.stem for p in folder.glob("*.py")} - {"__init__"} == set(DECOMPOSITIONS)
    assert all(base_path(name).is_file() for name in DECOMPOSITIONS)


def test_edit_that_matches_nothing_is_refused():
    """Does a stale edit fail loudly instead of silently leaving the reference correct?"""
    from grader.edits import Edit

    with pytest.raises(ValueError, match="matches 0 times"):
        apply(REFERENCE.read_text(), (Edit("strided_softmax", "no such text", "x"),))
