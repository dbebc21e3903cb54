"""The optional exercises: softmax in place (`strided_softmax_`) and the backward pass
(`strided_softmax_backward`). Their zoo bugs and hints are in tests/test_zoo.py, the cells
they lose in tests/test_cell_losses.py."""

from __future__ import annotations

import pytest
import torch

from grader import reference
from grader.zoo import write_bug
from grader.zoo.follow_on_bugs import FOLLOW_ON_BUGS
from learning.workshops.checking.cases import OPS, run_case, suite
from learning.workshops.checking.loader import load_function
from learning.workshops.contracts import matching_pair, shared_address, writable_matrix
from learning.workshops.notebook.gradients import (
    TOLERANCES,
    compare_with_torch,
    gradcheck_views,
    report,
)

BASE = torch.zeros(64)


@pytest.mark.parametrize(
    ("view", "why"),
    [
        (BASE[:4].view(1, 4).expand(3, 4), "row stride is 0"),
        (BASE[:3].view(3, 1).expand(3, 4), "column stride is 0"),
        (BASE.as_strided((4, 6), (3, 1)), "strides overlap"),
        (BASE.as_strided((2, 2), (1, 1)), "strides overlap"),
    ],
)
def test_views_whose_elements_share_addresses_are_refused(view, why):
    """Is a broadcast or an overlapping view refused, naming its strides and why?"""
    with pytest.raises(ValueError, match=why) as refused:
        writable_matrix(view)
    assert str(tuple(view.stride())) in str(refused.value)


@pytest.mark.parametrize(
    "view",
    [
        BASE[:20].view(4, 5),
        BASE[:20].view(5, 4).t(),
        BASE[:40].view(4, 10)[1:, 1::2],
        BASE.as_strided((3, 3), (3, 2)),  # interleaved, yet every address once
        BASE[:0].view(0, 5),
        BASE[:1].view(1, 1).expand(1, 1),
    ],
)
def test_views_with_one_address_per_element_are_writable(view):
    """Are transposes, slices and interleaved strides with distinct addresses accepted?"""
    assert shared_address(view) is None
    assert writable_matrix(view) == tuple(view.shape)


def test_the_backward_refuses_mismatched_inputs_by_name():
    """Does matching_pair name the shapes, or the dtypes, that do not match?"""
    with pytest.raises(ValueError, match=r"\(4, 5\).*\(5, 4\)"):
        matching_pair(torch.zeros(4, 5), torch.zeros(5, 4))
    with pytest.raises(ValueError, match="float16"):
        matching_pair(torch.zeros(4, 5), torch.zeros(4, 5, dtype=torch.float16))
    assert matching_pair(torch.zeros(4, 5, dtype=torch.float64), torch.zeros(5, 4).t().double())


def test_in_place_leaves_storage_outside_the_view_alone():
    """Does the reference softmax a sliced view where it lies, return it, and leave every
    other element of the storage as it was?"""
    base = torch.randn(8, 12)
    before = base.clone()
    view = base[1:, ::2]
    expected = torch.softmax(view.double(), dim=1)
    assert reference.strided_softmax_(view) is view
    torch.testing.assert_close(view.double(), expected, rtol=1e-5, atol=1e-6)
    outside = torch.ones_like(base, dtype=torch.bool)
    outside[1:, ::2] = False
    assert torch.equal(base[outside], before[outside])


def _buggy(name: str, folder):
    """The zoo bug `name`'s version of its op, loaded from the edited reference."""
    bug = next(b for b in FOLLOW_ON_BUGS if b.name == name)
    return load_function(write_bug(bug, folder), OPS[bug.op].function)


def test_the_audit_names_a_read_after_another_programs_write(tmp_path):
    """Does the in-place check fail column-tiled programs that each read the whole row, with
    the program that read and the one that had overwritten?"""
    fn = _buggy("inplace-column-tiles", tmp_path)
    case = next(c for c in suite("strided_softmax_") if c.name == "contiguous")
    result = run_case(fn, "strided_softmax_", case, "cpu", 0)
    assert result.failure == "read-after-write"
    assert "program (0, 1) loaded row 0, column 0 of the view after program (0, 0)" in (
        result.detail
    )


def test_gradcheck_passes_the_reference_on_float64_views():
    """Does torch.autograd.gradcheck pass the reference backward on transposed, sliced and
    broadcast float64 views, with a transposed dy?"""
    assert gradcheck_views(reference.strided_softmax_backward, "cpu") == {
        "transposed": True,
        "sliced": True,
        "broadcast": True,
    }


def test_gradcheck_fails_a_backward_without_the_row_sum(tmp_path):
    """Can the gradcheck fail: does it reject the zoo's backward without the row sum?"""
    results = gradcheck_views(_buggy("backward-without-row-sum", tmp_path), "cpu")
    assert not any(results.values())


def test_an_unwritten_backward_is_one_line_not_a_traceback():
    """While the backward is still its stub, does the notebook's gradient report say so in
    one line instead of raising through torch's autograd?"""

    def strided_softmax_backward(y, dy, num_warps=4):
        raise NotImplementedError("not written yet: your code goes here")

    text = report(strided_softmax_backward, reference.StridedSoftmax.apply, "cpu")
    assert text == "strided_softmax_backward is not written yet: gradcheck runs once it is."


def test_other_errors_of_the_backward_are_one_sentence_not_raised():
    """Does any other error of the backward come back as one sentence with the next step, so
    that the ungraded cell never stops Run All?"""

    def strided_softmax_backward(y, dy, num_warps=4):
        raise KeyError("BLOCK")

    text = report(strided_softmax_backward, reference.StridedSoftmax.apply, "cpu")
    assert text == (
        "The gradient checks stopped: KeyError: 'BLOCK'. Run the backward's test cells above "
        "for the case that fails, fix it, then run this cell again."
    )


def test_strided_softmax_gradients_match_torch():
    """Do StridedSoftmax.apply's input gradients match torch.softmax's on fp32, fp16 and
    bf16 transposed views, within each dtype's tolerance?"""
    differences = compare_with_torch(reference.StridedSoftmax.apply, "cpu")
    for (name, difference), tolerance in zip(differences.items(), TOLERANCES.values(), strict=True):
        assert difference <= tolerance, (name, difference)
