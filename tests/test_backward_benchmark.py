"""The backward's benchmark: its command, inputs, variants and byte counts, the check of its
timed outputs (the reference's kernel in Triton's interpreter), its results, and the GPU check's
summary of it; real timing on a GPU."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from grader import gpu_check
from grader.edits import Edit, apply
from grader.zoo.bug import REFERENCE
from learning.workshops.benchmark import main
from learning.workshops.checking.cases import OPS
from learning.workshops.checking.loader import load_function
from learning.workshops.contracts import default_device
from learning.workshops.measuring import sweep
from learning.workshops.measuring.results import (
    BACKWARD,
    FORWARD,
    H200_SAMPLE,
    VARIANTS,
    Results,
    ResultsError,
    load,
)
from learning.workshops.measuring.sweep import (
    TIMED_OPS,
    BenchmarkFailure,
    Config,
    Variant,
    backward_variants,
    logical_bytes,
    make_backward_inputs,
    make_row,
    traffic_bytes,
    verify,
)

needs_cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
FORGETS_ROW_SUM = Edit(
    "softmax_backward_kernel", "dx = y * (dy - tl.sum(dy * y, axis=0))", "dx = y * dy"
)
"""The reference's backward kernel without the row sum: dx = y * dy."""


def run_main(capsys, *args: str) -> tuple[int, str, str]:
    """main's exit status, stdout and stderr for `args`."""
    code = main(list(args))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def backward_args(impl: Path, output: Path, *extra: str) -> list[str]:
    return ["--op", BACKWARD, "--impl", str(impl), "--output", str(output), *extra]


def reference_backward():
    """The reference's strided_softmax_backward, loaded the way the benchmark loads a file."""
    return load_function(REFERENCE, "strided_softmax_backward")


# --- The command without a GPU -------------------------------------------------------------


@pytest.mark.skipif(torch.cuda.is_available(), reason="tests the machine without CUDA")
def test_backward_without_cuda_exits_two_with_one_sentence(tmp_path, capsys):
    """Without a CUDA device, does the backward's run say so in one sentence, exit 2, and
    write nothing?"""
    output = tmp_path / "backward.json"
    code, out, err = run_main(capsys, *backward_args(REFERENCE, output))
    assert code == 2
    assert out == ""
    assert len(err.strip().splitlines()) == 1
    assert err.startswith("benchmark: GPU timing needs a CUDA device")
    assert not output.exists()


@pytest.mark.parametrize(
    "extra, message",
    [
        (("--shapes", "4x70000"), "--shapes 4x70000: one program holds a whole row"),
        (("--warps", "3"), "--warps 3: num_warps must be a power of two from 1 to 32, got 3"),
        (("--layouts", "slice"), "--layouts 'slice': choose from transpose, contiguous."),
    ],
)
def test_backward_usage_errors_exit_two_with_one_line(tmp_path, capsys, extra, message):
    """Does a bad option of the backward's run exit 2 with one line naming it?"""
    output = tmp_path / "backward.json"
    code, _, err = run_main(capsys, *backward_args(REFERENCE, output, *extra))
    assert code == 2
    assert err.startswith(f"benchmark: {message}")
    assert len(err.strip().splitlines()) == 1
    assert not output.exists()


def test_a_misspelt_op_lists_both_ops(tmp_path, capsys):
    """Does an unknown --op exit 2 and name the forward and the backward as the choices?"""
    code, _, err = run_main(
        capsys, "--op", "strided_softmax_backwards", "--output", str(tmp_path / "b.json")
    )
    assert code == 2
    assert "invalid choice: 'strided_softmax_backwards'" in err
    assert f"'{FORWARD}', '{BACKWARD}'" in err


def test_without_impl_the_backward_looks_where_check_does(tmp_path, capsys, monkeypatch):
    """Without --impl, is the backward looked for where `check strided_softmax_backward` looks,
    and is its absence one line saying what to do?"""
    monkeypatch.chdir(tmp_path)
    code, _, err = run_main(capsys, "--op", BACKWARD, "--output", "b.json")
    assert code == 2
    assert err.strip() == (
        f"benchmark: found neither {BACKWARD}.py nor {BACKWARD}.ipynb in {tmp_path}; "
        "run from the folder that holds your work or pass --impl FILE."
    )


# --- Inputs, variants and bytes -------------------------------------------------------------


def test_backward_moves_three_tensors_and_its_copy_seven():
    """Are the backward's logical bytes 3 x M x N x size (read y and dy, write dx), and does
    its copy variant add a read and a write of each input?"""
    assert logical_bytes(4096, 4096, 4, inputs=2) == 3 * 4096 * 4096 * 4
    assert traffic_bytes("copy", 4096, 4096, 4, inputs=2) == 7 * 4096 * 4096 * 4
    assert traffic_bytes("torch", 4096, 4096, 4, inputs=2) == 3 * 4096 * 4096 * 4
    row = make_row("direct", 4, Config(4096, 4096, "transpose", "cold"), [0.1], 4, inputs=2)
    assert row.gbps_logical == pytest.approx(3 * 4096 * 4096 * 4 / 0.1e6)


def test_backward_inputs_are_two_views_of_the_layout():
    """Are y (rows summing to one) and dy transposed views, strides (1, M), of two storages?"""
    y, dy = make_backward_inputs(6, 4, "transpose", torch.float32, "cpu")
    assert y.shape == dy.shape == (6, 4)
    assert y.stride() == dy.stride() == (1, 6)
    assert y.untyped_storage().data_ptr() != dy.untyped_storage().data_ptr()
    torch.testing.assert_close(y.sum(dim=1), torch.ones(6))
    y, dy = make_backward_inputs(6, 4, "contiguous", torch.float16, "cpu")
    assert y.stride() == dy.stride() == (4, 1) and y.dtype == torch.float16


def test_backward_variants_copy_both_inputs():
    """Does `copy` hand the function contiguous copies of y and dy, `direct` the views, and is
    `copy` left out for contiguous inputs?"""
    seen = []
    variants = backward_variants(
        lambda y, dy, w: seen.append((y.stride(), dy.stride(), w)), [4, 8], "transpose"
    )
    assert [(v.name, v.num_warps) for v in variants] == [
        ("direct", 4), ("direct", 8), ("copy", 4), ("copy", 8), ("torch", None)
    ]  # fmt: skip
    y, dy = make_backward_inputs(6, 4, "transpose", torch.float32, "cpu")
    variants[0].call(y, dy)
    variants[3].call(y, dy)
    assert seen == [((1, 6), (1, 6), 4), ((4, 1), (4, 1), 8)]
    contiguous = backward_variants(lambda y, dy, w: None, [4], "contiguous")
    assert [v.name for v in contiguous] == ["direct", "torch"]


def test_each_op_times_the_variants_its_results_accept():
    """Does the benchmark time, beside the roof, exactly the variants each op's results file
    accepts, and can the check command it sends a failure to check each op?"""
    assert set(TIMED_OPS) == set(VARIANTS)
    assert set(TIMED_OPS) <= set(OPS)
    for name, op in TIMED_OPS.items():
        timed = {v.name for v in op.variants(lambda *args: None, [4], "transpose")}
        assert timed | {"roof"} == set(VARIANTS[name]), name


# --- Checking what was timed -----------------------------------------------------------------


@pytest.mark.parametrize("layout", ["transpose", "contiguous"])
def test_reference_and_torch_pass_the_check(layout):
    """Do the reference's kernel (in the interpreter without a GPU) and PyTorch's own backward
    pass the check of a timed output and of a call on fresh inputs, for every variant?"""
    config = Config(5, 7, layout, "cold")
    inputs = make_backward_inputs(5, 7, layout, torch.float32, default_device())
    for variant in backward_variants(reference_backward(), [4], layout):
        verify(BACKWARD, variant, inputs, variant.call(*inputs), config)


def test_a_kernel_that_forgets_the_row_sum_is_rejected(tmp_path):
    """Is the reference's kernel without the row sum (dx = y * dy), run in the interpreter
    without a GPU, rejected, naming the variant, the float64 backward and the check to run?"""
    impl = tmp_path / "forgets_row_sum.py"
    impl.write_text(apply(REFERENCE.read_text(), (FORGETS_ROW_SUM,)))
    wrong = load_function(impl, "strided_softmax_backward")
    config = Config(5, 7, "transpose", "cold")
    inputs = make_backward_inputs(5, 7, "transpose", torch.float32, default_device())
    (variant, *_) = backward_variants(wrong, [4], "transpose")
    with pytest.raises(BenchmarkFailure) as caught:
        verify(BACKWARD, variant, inputs, variant.call(*inputs), config)
    message = str(caught.value)
    assert message.startswith("direct num_warps=4 on 5x7 transpose (cold): ")
    assert "values differ from a float64 softmax backward" in message
    assert message.endswith(
        "Run python -m learning.workshops.check strided_softmax_backward --hint."
    )


def test_a_replayed_backward_fails_on_fresh_inputs():
    """Does a backward that returns its first dx again fail the check on fresh y and dy?"""
    cache: dict[tuple[int, int], torch.Tensor] = {}

    def replays(y: torch.Tensor, dy: torch.Tensor) -> torch.Tensor:
        return cache.setdefault(tuple(y.shape), torch._softmax_backward_data(dy, y, 1, y.dtype))

    config = Config(5, 7, "transpose", "warm")
    inputs = make_backward_inputs(5, 7, "transpose", torch.float32, "cpu")
    with pytest.raises(BenchmarkFailure, match="on fresh inputs"):
        verify(BACKWARD, Variant("direct", 4, replays), inputs, replays(*inputs), config)


# --- Results ----------------------------------------------------------------------------------


def backward_run(*variants: str) -> Results:
    """A backward run with one cold transposed 64x32 row per variant."""
    config = Config(64, 32, "transpose", "cold")
    return Results(
        op=BACKWARD,
        impl="reference.py",
        device="NVIDIA H200",
        capability="9.0",
        dtype="float32",
        created="2026-01-01T00:00:00+00:00",
        versions={"torch": "2.13.0"},
        rows=[
            make_row(v, None if v in ("torch", "roof") else 4, config, [0.01, 0.02], 4, inputs=2)
            for v in variants
        ],
    )


def test_backward_results_round_trip_and_keep_their_op(tmp_path):
    """Does a backward run load back as saved, op included, beside the recorded forward run?"""
    original = backward_run("direct", "copy", "torch", "roof")
    assert load(original.save(tmp_path / "backward.json")) == original
    assert load(H200_SAMPLE).op == FORWARD


@pytest.mark.parametrize(
    "op, variant, message",
    [
        (BACKWARD, "torch_softmax", "row 0: unknown variant 'torch_softmax'"),
        (FORWARD, "torch", "row 0: unknown variant 'torch'"),
        ("copy_rows", "direct", "op is 'copy_rows', expected one of strided_softmax, strided_"),
    ],
)
def test_rows_must_be_variants_of_the_files_op(tmp_path, op, variant, message):
    """Is a row of the other op's torch variant, or a file of an unknown op, refused?"""
    run = backward_run(variant)
    run.op = op
    with pytest.raises(ResultsError, match=message):
        load(run.save(tmp_path / "backward.json"))


# --- The GPU check's summary ------------------------------------------------------------------


def test_gpu_check_summarizes_the_cold_transposed_backward(tmp_path, monkeypatch):
    """Does the GPU check's backward step list each cold transposed row with its ms and GB/s,
    and run the plots command on the run's file?"""
    commands = []

    def fake_run(args: list[str], log: Path) -> tuple[int, float]:
        commands.append(args[2:])
        if args[2] == "learning.workshops.benchmark":
            backward_run("direct", "copy", "torch", "roof").save(
                Path(args[args.index("--output") + 1])
            )
        return 0, 3.0

    monkeypatch.setattr(gpu_check, "run", fake_run)
    lines = gpu_check.backward_benchmark(tmp_path)
    assert commands[0][:3] == ["learning.workshops.benchmark", "--op", BACKWARD]
    assert commands[1] == [
        "learning.workshops.plots",
        str(tmp_path / "backward.json"),
        "--out",
        str(tmp_path),
    ]
    assert lines[0] == "backward benchmark in 3 s, transposed y and dy, cold"
    assert [line.split()[:2] for line in lines[2:]] == [
        ["direct", "64x32"], ["copy", "64x32"], ["torch", "64x32"], ["roof", "64x32"]
    ]  # fmt: skip
    assert lines[2].split()[3:] == ["0.0150", "2"]


# --- On a GPU -----------------------------------------------------------------------------------

SMALL = ("--shapes", "1024x512", "--warps", "4,8", "--reps", "5")


@pytest.mark.gpu
@needs_cuda
def test_reference_backward_results_are_checked_and_complete(tmp_path, capsys):
    """Does the reference's backward give one checked row per variant, layout, mode and
    num_warps, with 3 x M x N x 4 logical bytes, in a file that says it is the backward?"""
    output = tmp_path / "backward.json"
    code, out, err = run_main(capsys, *backward_args(REFERENCE, output, *SMALL))
    assert code == 0, err
    run = load(output)
    assert run.op == BACKWARD
    expected = set()
    for mode in ("cold", "warm"):
        for layout in ("transpose", "contiguous"):
            expected |= {("direct", layout, mode, 4), ("direct", layout, mode, 8)}
            expected |= {("torch", layout, mode, None), ("roof", layout, mode, None)}
        expected |= {("copy", "transpose", mode, 4), ("copy", "transpose", mode, 8)}
    assert {(r.variant, r.layout, r.mode, r.num_warps) for r in run.rows} == expected
    assert f"Wrote {len(expected)} rows to {output}." in out
    for r in run.rows:
        tensors = 2 if r.variant == "roof" else 3
        assert r.checked and r.samples == 5
        assert r.gbps_logical == pytest.approx(tensors * 1024 * 512 * 4 / (r.median_ms * 1e6))


@pytest.mark.gpu
@needs_cuda
def test_backward_without_row_sum_exits_one(tmp_path, capsys):
    """Does a backward kernel that forgets the row sum exit 1, name direct, write nothing?"""
    impl = tmp_path / "forgets_row_sum.py"
    impl.write_text(apply(REFERENCE.read_text(), (FORGETS_ROW_SUM,)))
    output = tmp_path / "backward.json"
    code, _, err = run_main(capsys, *backward_args(impl, output, *SMALL, "--layouts", "transpose"))
    assert code == 1
    message = err.splitlines()[-1]  # after the progress bar
    assert message.startswith("benchmark: direct num_warps=4 on 1024x512 transpose (cold): ")
    assert "values differ from a float64 softmax backward" in message
    assert not output.exists()


@pytest.mark.gpu
@needs_cuda
def test_run_benchmark_times_a_backward_from_python():
    """Can a notebook time a plain backward with run_benchmark(op=...) and get checked rows?"""
    rows = sweep.run_benchmark(
        lambda y, dy, num_warps: torch._softmax_backward_data(dy, y, 1, y.dtype),
        shapes=[(256, 128)],
        warps=[4],
        modes=["warm"],
        layouts=["transpose"],
        dtype="float16",
        reps=3,
        progress=False,
        op=BACKWARD,
    )
    assert [(r.variant, r.num_warps) for r in rows] == [
        ("direct", 4), ("copy", 4), ("torch", None), ("roof", None)
    ]  # fmt: skip
    assert rows[0].gbps_logical == pytest.approx(3 * 256 * 128 * 2 / (rows[0].median_ms * 1e6))
