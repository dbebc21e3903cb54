"""The benchmark command and its results file: usage errors, byte counts, the schema, GPU runs."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import torch

from grader.zoo import BUGS, write_bug
from grader.zoo.bug import REFERENCE
from learning.workshops import benchmark
from learning.workshops.benchmark import format_table, main, parse_shapes
from learning.workshops.check import UsageError
from learning.workshops.measuring import sweep
from learning.workshops.measuring.results import (
    BACKWARD,
    FORWARD,
    LAYOUT_AWARE,
    OPTIONAL_VARIANTS,
    TORCH_COMPILE,
    VARIANTS,
    Results,
    ResultsError,
    Row,
    load,
)
from learning.workshops.measuring.sweep import (
    BenchmarkFailure,
    Config,
    Variant,
    gbps,
    logical_bytes,
    make_input,
    mismatch,
    softmax_variants,
    traffic_bytes,
    verify,
)

needs_cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
BEYOND = Path(__file__).resolve().parents[1] / "grader" / "beyond.py"
"""The layout-aware softmax, timed with --variants."""


def run_main(capsys, *args: str) -> tuple[int, str, str]:
    """main's exit status, stdout and stderr for `args`."""
    code = main(list(args))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def row(**changes) -> Row:
    fields = dict(
        variant="direct",
        rows=4096,
        cols=4096,
        layout="transpose",
        mode="cold",
        num_warps=4,
        median_ms=0.2,
        min_ms=0.19,
        max_ms=0.25,
        samples=100,
        gbps_logical=671.1,
        gbps_traffic=671.1,
        checked=True,
    )
    fields.update(changes)
    return Row(**fields)


def results(*rows: Row) -> Results:
    return Results(
        op="strided_softmax",
        impl="strided_softmax.py",
        device="NVIDIA H200",
        capability="9.0",
        dtype="float32",
        created="2026-01-01T00:00:00+00:00",
        versions={"torch": "2.11.0", "triton": "3.6.0", "python": "3.12.3"},
        rows=list(rows),
    )


# --- The command without a GPU -------------------------------------------------------------


@pytest.mark.skipif(torch.cuda.is_available(), reason="tests the machine without CUDA")
def test_without_cuda_exits_two_with_one_sentence(tmp_path, capsys):
    """Without a CUDA device, does the command say so in one sentence, exit 2, write nothing?"""
    output = tmp_path / "results" / "i1.json"
    code, out, err = run_main(
        capsys, "--op", "strided_softmax", "--impl", str(REFERENCE), "--output", str(output)
    )
    assert code == 2
    assert out == ""
    assert len(err.strip().splitlines()) == 1
    assert err.startswith("benchmark: GPU timing needs a CUDA device")
    assert "nothing was measured." in err and " --remote (it reads the i1_queue.json" in err
    assert not output.exists()


@pytest.mark.parametrize(
    "shapes, message",
    [
        ("12x", "--shapes '12x': write each shape as ROWSxCOLS, e.g. 4096x4096."),
        ("4096", "--shapes '4096': write each shape as ROWSxCOLS"),
        ("0x5", "--shapes 0x5: rows and columns must both be at least 1."),
        ("8x0", "--shapes 8x0: rows and columns must both be at least 1."),
        ("4x70000", "--shapes 4x70000: one program holds a whole row, so at most 65536"),
        ("", "--shapes '': write each shape as ROWSxCOLS"),
    ],
)
def test_bad_shapes_exit_two_with_one_line(tmp_path, capsys, shapes, message):
    """Does a malformed or empty --shapes exit 2 with one line that names the bad shape?"""
    output = tmp_path / "i1.json"
    code, out, err = run_main(
        capsys, "--impl", str(REFERENCE), "--output", str(output), "--shapes", shapes
    )
    assert code == 2
    assert err.startswith(f"benchmark: {message}")
    assert len(err.strip().splitlines()) == 1
    assert not output.exists()


@pytest.mark.parametrize(
    "option, value, message",
    [
        ("--warps", "6", "--warps 6: num_warps must be a power of two from 1 to 32, got 6"),
        ("--warps", "four", "--warps 'four': write whole numbers, e.g. 4,8."),
        ("--modes", "hot", "--modes 'hot': choose from cold, warm."),
        ("--layouts", "slice", "--layouts 'slice': choose from transpose, contiguous."),
        ("--reps", "0", "--reps 0: time at least one call per variant"),
        ("--dtype", "float64", "argument --dtype: invalid choice: 'float64'"),
        ("--op", "copy_rows", "argument --op: invalid choice: 'copy_rows'"),
    ],
)
def test_bad_options_exit_two_with_one_line(tmp_path, capsys, option, value, message):
    """Does every bad option exit 2 with one line that names the option and its value?"""
    code, _, err = run_main(
        capsys, "--impl", str(REFERENCE), "--output", str(tmp_path / "i1.json"), option, value
    )
    assert code == 2
    assert err.startswith(f"benchmark: {message}")
    assert len(err.strip().splitlines()) == 1


def test_missing_output_option_exits_two(capsys):
    """Is a missing --output a one-line usage error rather than argparse's usage block?"""
    code, _, err = run_main(capsys, "--impl", str(REFERENCE))
    assert code == 2
    assert err.strip() == ("benchmark: the following arguments are required: --output; see --help.")


def test_missing_impl_file_exits_two(tmp_path, capsys):
    """Does a missing --impl file exit 2 and say which file, before anything is timed?"""
    missing = tmp_path / "nowhere.py"
    code, out, err = run_main(capsys, "--impl", str(missing), "--output", str(tmp_path / "i1.json"))
    assert code == 2
    assert out == ""
    assert err.strip() == (
        f"benchmark: --impl {missing}: no such file; give the path of your .py or notebook."
    )


# --- --variants: another softmax timed beside yours --------------------------------------


@pytest.mark.skipif(torch.cuda.is_available(), reason="tests the machine without CUDA")
def test_variants_file_loads_before_the_gpu_is_asked_for(tmp_path, capsys):
    """With a good --variants file and no CUDA device, is the one sentence about CUDA what
    stops the run, after both files loaded?"""
    output = tmp_path / "i1.json"
    code, _, err = run_main(
        capsys, "--impl", str(REFERENCE), "--variants", str(BEYOND), "--output", str(output)
    )
    assert code == 2
    assert err.startswith("benchmark: GPU timing needs a CUDA device")
    assert not output.exists()


def test_missing_variants_file_exits_two_naming_it(tmp_path, capsys):
    """Does a --variants file that does not exist exit 2 with one line saying what to give?"""
    missing = tmp_path / "beyond.py"
    code, out, err = run_main(
        capsys, "--impl", str(REFERENCE), "--variants", str(missing), "--output", "i1.json"
    )
    assert (code, out) == (2, "")
    assert err.strip() == (
        f"benchmark: --variants {missing}: no such file; give the path of a .py file or "
        "notebook that defines strided_softmax, e.g. the course repository's grader/beyond.py."
    )


def test_variants_file_without_strided_softmax_exits_two(tmp_path, capsys):
    """Does a --variants file that defines no strided_softmax exit 2 and say what it lacks?"""
    other = tmp_path / "other.py"
    other.write_text("def softmax(x, num_warps=4):\n    return x\n")
    output = tmp_path / "i1.json"
    code, out, err = run_main(
        capsys, "--impl", str(REFERENCE), "--variants", str(other), "--output", str(output)
    )
    assert (code, out) == (2, "")
    assert err.strip() == (
        f"benchmark: --variants {other} defines no strided_softmax(x, num_warps); give a file "
        "that does, e.g. the course repository's grader/beyond.py."
    )
    assert not output.exists()


@pytest.mark.parametrize(
    "extra, message",
    [
        (
            ("--op", BACKWARD),
            "--variants times another strided_softmax beside yours, so it needs --op "
            f"strided_softmax; leave it out for --op {BACKWARD}.",
        ),
        (("--variants", "notes.txt"), "--variants notes.txt: expected a .py file or a notebook"),
    ],
)
def test_variants_usage_errors_exit_two_with_one_line(
    tmp_path, capsys, monkeypatch, extra, message
):
    """Is --variants with the backward, or with a file that is not Python, one usage line?"""
    monkeypatch.chdir(tmp_path)
    Path("notes.txt").write_text("not python\n")
    args = ["--impl", str(REFERENCE), "--output", "i1.json", "--variants", str(BEYOND), *extra]
    code, _, err = run_main(capsys, *args)
    assert code == 2
    assert err.startswith(f"benchmark: {message}")
    assert len(err.strip().splitlines()) == 1


def test_layout_aware_variant_joins_each_num_warps():
    """With another softmax, is `layout-aware` timed for each num_warps, after direct and copy
    and before torch.softmax, and only when one is given?"""

    def names(layout: str, extra=None) -> list[tuple[str, int | None]]:
        found = softmax_variants(lambda x, w: x, [4, 8], layout, extra)
        return [(v.name, v.num_warps) for v in found]

    other = lambda x, w: x  # noqa: E731
    assert names("transpose", other) == [
        ("direct", 4),
        ("direct", 8),
        ("copy", 4),
        ("copy", 8),
        (LAYOUT_AWARE, 4),
        (LAYOUT_AWARE, 8),
        ("torch_softmax", None),
    ]
    assert names("contiguous", other) == [
        ("direct", 4),
        ("direct", 8),
        (LAYOUT_AWARE, 4),
        (LAYOUT_AWARE, 8),
        ("torch_softmax", None),
    ]
    assert LAYOUT_AWARE not in {name for name, _ in names("transpose")}


def test_layout_aware_variant_gets_the_view_and_its_num_warps():
    """Does the layout-aware variant call the other function on the view itself, with its
    num_warps, and never the student's?"""
    seen = []
    variants = softmax_variants(
        lambda x, w: seen.append(("student", w)),
        [8],
        "transpose",
        lambda x, w: seen.append(("other", x.stride(), w)),
    )
    (aware,) = [v for v in variants if v.name == LAYOUT_AWARE]
    aware.call(make_input(6, 4, "transpose", torch.float32, "cpu"))
    assert seen == [("other", (1, 6), 8)]
    assert aware.label == "layout-aware num_warps=8"


def test_results_accept_every_variant_timed_with_another_softmax():
    """Are the variants timed with another softmax and torch.compile's, and the roof, exactly
    those the forward's results accept?"""
    variants = softmax_variants(lambda *a: None, [4], "transpose", lambda *a: 0, compiled=True)
    timed = {v.name for v in variants}
    assert timed | {"roof"} == set(VARIANTS[FORWARD] + OPTIONAL_VARIANTS[FORWARD])


def test_torch_compile_is_timed_last_and_only_when_asked():
    """With `compiled`, is torch.compile's softmax timed once, after torch.softmax, and never
    without it?"""

    def names(compiled: bool) -> list[tuple[str, int | None]]:
        found = softmax_variants(lambda x, w: x, [4], "transpose", compiled=compiled)
        return [(v.name, v.num_warps) for v in found]

    assert names(True) == [*names(False), (TORCH_COMPILE, None)]
    assert TORCH_COMPILE not in {name for name, _ in names(False)}


def test_torch_compile_with_the_backward_exits_two_with_one_line(tmp_path, capsys):
    """Is --torch-compile with --op strided_softmax_backward one usage line, exit 2?"""
    args = ["--op", BACKWARD, "--output", str(tmp_path / "b.json"), "--torch-compile"]
    code, _, err = run_main(capsys, *args)
    assert code == 2
    assert err.startswith("benchmark: --torch-compile times torch.compile's strided_softmax")
    assert len(err.strip().splitlines()) == 1


def test_run_benchmark_refuses_another_backward():
    """Is `extra` for the backward refused before anything is timed (it has no such variant)?"""
    with pytest.raises(ValueError, match="strided_softmax_backward has no optional variant"):
        sweep.run_benchmark(lambda *a: None, op=BACKWARD, extra=lambda *a: None)


def test_beyond_module_is_a_variant_the_benchmark_can_load():
    """Does load_variant give grader/beyond.py's strided_softmax, which passes the benchmark's
    check on both layouts?"""
    fn = benchmark.load_variant(BEYOND)
    for layout in ("transpose", "contiguous"):
        x = make_input(40, 300, layout, torch.float32, "cpu")
        assert mismatch(FORWARD, fn(x, 4), (x,)) is None


# --- Pure helpers ---------------------------------------------------------------------------


def test_shapes_parse_in_order_with_spaces():
    """Are the shapes read in the order given, spaces around commas allowed?"""
    assert parse_shapes("4096x4096, 65536x512") == [(4096, 4096), (65536, 512)]
    assert parse_shapes("1X1") == [(1, 1)]


def test_shape_parsing_refuses_zero_rows():
    """Is a shape with zero rows refused with UsageError (nothing to time)?"""
    with pytest.raises(UsageError, match="at least 1"):
        parse_shapes("0x5")


def test_logical_bytes_count_one_read_and_one_write():
    """Are the logical bytes of a 4096x4096 fp32 softmax 2 x M x N x 4?"""
    assert logical_bytes(4096, 4096, 4) == 2 * 4096 * 4096 * 4 == 134_217_728
    assert logical_bytes(65536, 512, 2) == 134_217_728


def test_copy_traffic_is_twice_the_logical_bytes():
    """Does the copy variant count the copy's read and write too, and direct only its own?"""
    assert traffic_bytes("copy", 4096, 4096, 4) == 4 * 4096 * 4096 * 4
    for variant in ("direct", "torch_softmax", "roof"):
        assert traffic_bytes(variant, 4096, 4096, 4) == logical_bytes(4096, 4096, 4)


def test_gbps_is_bytes_per_nanosecond():
    """Is GB/s 1e9 bytes per second: 134217728 bytes in 0.1 ms is 1342.17728 GB/s?"""
    assert gbps(134_217_728, 0.1) == pytest.approx(1342.17728)
    assert gbps(traffic_bytes("copy", 8, 8, 4), 0.5) == 2 * gbps(logical_bytes(8, 8, 4), 0.5)


def test_transpose_input_is_a_transposed_view():
    """Does the transpose layout give the kernel an (M, N) view with strides (1, M)?"""
    x = make_input(6, 4, "transpose", torch.float32, "cpu")
    assert x.shape == (6, 4)
    assert x.stride() == (1, 6)
    assert make_input(6, 4, "contiguous", torch.float32, "cpu").stride() == (4, 1)


def test_contiguous_layout_has_no_copy_variant():
    """Is `copy` left out for a contiguous input, where x.contiguous() copies nothing?"""

    def names(layout: str) -> list[tuple[str, int | None]]:
        return [(v.name, v.num_warps) for v in softmax_variants(lambda x, w: x, [4, 8], layout)]

    assert names("transpose") == [
        ("direct", 4),
        ("direct", 8),
        ("copy", 4),
        ("copy", 8),
        ("torch_softmax", None),
    ]
    assert names("contiguous") == [("direct", 4), ("direct", 8), ("torch_softmax", None)]


def test_copy_variant_hands_the_kernel_a_contiguous_copy():
    """Does the copy variant pass x.contiguous() to the function, and direct the view itself?"""
    seen = []
    variants = softmax_variants(lambda x, w: seen.append(x.stride()), [4], "transpose")
    x = make_input(6, 4, "transpose", torch.float32, "cpu")
    for variant in variants[:2]:
        variant.call(x)
    assert seen == [(1, 6), (4, 1)]


def test_mismatch_accepts_a_softmax_and_names_wrong_values():
    """Is a right softmax accepted, and a wrong one described by how many values differ?"""
    x = make_input(5, 7, "transpose", torch.float32, "cpu")
    assert mismatch(FORWARD, torch.softmax(x, dim=1), (x,)) is None
    wrong = torch.softmax(x, dim=1)
    wrong[2, 3] += 0.01
    assert mismatch(FORWARD, wrong, (x,)).startswith("1 of 35 values differ from a float64 softmax")
    assert "expected (5, 7) torch.float32" in mismatch(FORWARD, wrong.double(), (x,))
    assert mismatch(FORWARD, None, (x,)) == "returned NoneType, not a tensor"


def test_replayed_result_fails_on_fresh_inputs():
    """Does a function that returns its first result again fail the fresh-input check?"""
    cache: dict[tuple[int, int], torch.Tensor] = {}

    def replays(x: torch.Tensor, num_warps: int) -> torch.Tensor:
        return cache.setdefault(tuple(x.shape), torch.softmax(x, dim=1))

    config = Config(5, 7, "transpose", "warm")
    variant = Variant("direct", 4, lambda x: replays(x, 4))
    x = make_input(5, 7, "transpose", torch.float32, "cpu")
    with pytest.raises(BenchmarkFailure, match="direct num_warps=4 on 5x7 transpose") as caught:
        verify(FORWARD, variant, (x,), variant.call(x), config)
    assert "on fresh inputs" in str(caught.value)


def test_a_raising_variant_is_named():
    """Does a function that raises become a BenchmarkFailure naming the variant and error?"""

    def broken(x: torch.Tensor) -> torch.Tensor:
        raise ValueError("num_warps must be a power of two")

    config = Config(5, 7, "transpose", "cold")
    with pytest.raises(BenchmarkFailure, match="copy num_warps=8 on 5x7 transpose \\(cold\\) "):
        sweep.call(Variant("copy", 8, broken), (torch.zeros(5, 7),), config)


def test_table_shows_each_row():
    """Does the table print one line per row, with warps, median ms and GB/s?"""
    table = format_table([row(), row(variant="roof", num_warps=None, median_ms=0.05)])
    lines = table.splitlines()
    assert lines[0].split() == [
        "variant", "shape", "layout", "mode", "warps", "median", "ms", "GB/s", "traffic", "GB/s"
    ]  # fmt: skip
    assert lines[1].split() == [
        "direct", "4096x4096", "transpose", "cold", "4", "0.2000", "671.1", "671.1"
    ]  # fmt: skip
    assert lines[2].split()[:6] == ["roof", "4096x4096", "transpose", "cold", "-", "0.0500"]


# --- The results file -----------------------------------------------------------------------


def saved(tmp_path: Path, data: dict | None = None) -> Path:
    """A results file holding `data`, or a valid two-row run."""
    path = tmp_path / "i1.json"
    if data is None:
        results(row(), row(variant="roof", num_warps=None)).save(path)
    else:
        path.write_text(json.dumps(data))
    return path


def valid_json(tmp_path: Path) -> dict:
    return json.loads(saved(tmp_path).read_text())


def test_results_round_trip(tmp_path):
    """Does load return exactly what save wrote, rows and versions included?"""
    original = results(row(), row(variant="copy", gbps_traffic=1342.2), row(num_warps=None))
    path = original.save(tmp_path / "deep" / "i1.json")
    assert load(path) == original
    assert load(path).find("copy", "4096x4096", "transpose", "cold", 4).gbps_traffic == 1342.2


def test_layout_aware_rows_and_their_file_round_trip(tmp_path):
    """Does a run with --variants keep its layout-aware rows and the file they came from?"""
    original = results(row(), row(variant=LAYOUT_AWARE, num_warps=8))
    original.variant_impls = {LAYOUT_AWARE: "grader/beyond.py"}
    assert load(original.save(tmp_path / "i1.json")) == original


def test_a_file_without_variant_impls_loads_with_none(tmp_path):
    """Does a results file written before --variants existed still load?"""
    data = valid_json(tmp_path)
    del data["variant_impls"]
    assert load(saved(tmp_path, data)).variant_impls == {}


@pytest.mark.parametrize(
    "op, impls",
    [
        (FORWARD, {"fused": "x.py"}),
        (FORWARD, {LAYOUT_AWARE: 3}),
        (FORWARD, ["grader/beyond.py"]),
        (BACKWARD, {LAYOUT_AWARE: "grader/beyond.py"}),
    ],
)
def test_load_refuses_variant_impls_it_cannot_read(tmp_path, op, impls):
    """Is variant_impls refused unless it names a file for each of the op's optional variants?"""
    data = valid_json(tmp_path) | {"op": op, "rows": [], "variant_impls": impls}
    with pytest.raises(ResultsError, match=f"variant_impls is {re.escape(repr(impls))}, not an"):
        load(saved(tmp_path, data))


def test_load_refuses_a_wrong_schema(tmp_path):
    """Is a file of another schema refused, naming the schema it has?"""
    data = valid_json(tmp_path) | {"schema": "i1-benchmark/0"}
    with pytest.raises(ResultsError, match="schema is 'i1-benchmark/0', expected 'i1-benchmark/1'"):
        load(saved(tmp_path, data))


def test_load_refuses_a_missing_field(tmp_path):
    """Is a file without the device refused, naming the missing field?"""
    data = valid_json(tmp_path)
    del data["device"]
    with pytest.raises(ResultsError, match="missing device"):
        load(saved(tmp_path, data))


def test_load_refuses_a_row_without_a_field(tmp_path):
    """Is a row without `checked` refused, naming the row and the field?"""
    data = valid_json(tmp_path)
    del data["rows"][1]["checked"]
    with pytest.raises(ResultsError, match=r"row 1: fields \['checked'\] missing or unexpected"):
        load(saved(tmp_path, data))


def test_load_refuses_an_unknown_variant(tmp_path):
    """Is a row with a variant the schema does not know refused, naming it?"""
    data = valid_json(tmp_path)
    data["rows"][0]["variant"] = "fused"
    with pytest.raises(ResultsError, match="row 0: unknown variant 'fused'"):
        load(saved(tmp_path, data))


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("median_ms", "fast", "median_ms is 'fast', not float"),
        ("rows", 4096.5, "rows is 4096.5, not int"),
        ("checked", 1, "checked is 1, not bool"),
        ("samples", True, "samples is True, not int"),
        ("num_warps", None, None),  # the torch and roof rows have no warps
        ("median_ms", 1, None),  # JSON may write a whole float without its point
    ],
)
def test_load_checks_each_fields_type(tmp_path, field, value, message):
    """Is a row whose field has the wrong JSON type refused, naming the field and value,
    while null warps and whole-number times load?"""
    data = valid_json(tmp_path)
    data["rows"][0][field] = value
    data["rows"][0]["max_ms"] = max(data["rows"][0]["max_ms"], 1)
    if message is None:
        assert getattr(load(saved(tmp_path, data)).rows[0], field) == value
    else:
        with pytest.raises(ResultsError, match=f"row 0: {message}"):
            load(saved(tmp_path, data))


def test_load_refuses_rows_that_are_not_a_list_and_bytes_that_are_not_text(tmp_path):
    """Are `"rows": 5` and a binary file refused with a ResultsError, not a TypeError?"""
    data = valid_json(tmp_path) | {"rows": 5}
    with pytest.raises(ResultsError, match="rows must be a list"):
        load(saved(tmp_path, data))
    binary = tmp_path / "binary.json"
    binary.write_bytes(b"\x80\x81\xff")
    with pytest.raises(ResultsError, match="is not text"):
        load(binary)


def test_load_refuses_min_above_median(tmp_path):
    """Is a row whose min time exceeds its median refused?"""
    data = valid_json(tmp_path)
    data["rows"][0]["min_ms"] = 0.3
    with pytest.raises(ResultsError, match="0 < min <= median <= max"):
        load(saved(tmp_path, data))


def test_load_refuses_non_json(tmp_path):
    """Is a file that is not JSON refused, saying so?"""
    path = tmp_path / "i1.json"
    path.write_text("median_ms: 0.2\n")
    with pytest.raises(ResultsError, match="is not JSON"):
        load(path)


def test_load_refuses_a_missing_file(tmp_path):
    """Is a missing results file refused with the path and the reason?"""
    with pytest.raises(ResultsError, match="cannot read .*nowhere.json: No such file"):
        load(tmp_path / "nowhere.json")


# --- On a GPU --------------------------------------------------------------------------------

SMALL = ("--shapes", "1024x512", "--warps", "4,8", "--reps", "5")


def bench_args(impl: Path, output: Path, *extra: str) -> list[str]:
    return ["--op", "strided_softmax", "--impl", str(impl), "--output", str(output), *extra]


@pytest.mark.gpu
@needs_cuda
def test_reference_results_are_checked_and_complete(tmp_path, capsys):
    """Does the reference give one checked row per variant, layout, mode and num_warps?"""
    output = tmp_path / "i1.json"
    code, out, err = run_main(capsys, *bench_args(REFERENCE, output, *SMALL))
    assert code == 0, err
    assert f"Wrote 20 rows to {output}." in out
    run = load(output)
    assert (run.op, run.dtype, run.impl) == ("strided_softmax", "float32", str(REFERENCE))
    assert run.device == torch.cuda.get_device_name()
    assert set(run.versions) == {"torch", "triton", "python"}
    expected = set()
    for mode in ("cold", "warm"):
        for layout in ("transpose", "contiguous"):
            expected |= {("direct", layout, mode, 4), ("direct", layout, mode, 8)}
            expected |= {("torch_softmax", layout, mode, None), ("roof", layout, mode, None)}
        expected |= {("copy", "transpose", mode, 4), ("copy", "transpose", mode, 8)}
    assert {(r.variant, r.layout, r.mode, r.num_warps) for r in run.rows} == expected
    assert len(run.rows) == len(expected)
    for r in run.rows:
        assert r.checked and r.median_ms > 0 and r.samples == 5
        assert (r.rows, r.cols) == (1024, 512)
        factor = 2 if r.variant == "copy" else 1
        assert r.gbps_traffic == pytest.approx(factor * r.gbps_logical)
        assert r.gbps_logical == pytest.approx(2 * 1024 * 512 * 4 / (r.median_ms * 1e6))


@pytest.mark.gpu
@needs_cuda
def test_layout_aware_variant_is_timed_beside_the_others(tmp_path, capsys):
    """With --variants grader/beyond.py, are layout-aware rows checked and written for each
    num_warps, layout and mode, with the file they came from?"""
    output = tmp_path / "i1.json"
    args = bench_args(REFERENCE, output, *SMALL, "--variants", str(BEYOND))
    code, out, err = run_main(capsys, *args)
    assert code == 0, err
    run = load(output)
    assert run.variant_impls == {LAYOUT_AWARE: str(BEYOND)}
    aware = {(r.layout, r.mode, r.num_warps) for r in run.rows if r.variant == LAYOUT_AWARE}
    layouts, modes = ("transpose", "contiguous"), ("cold", "warm")
    assert aware == {(lay, m, w) for lay in layouts for m in modes for w in (4, 8)}
    assert f"Wrote {20 + len(aware)} rows to {output}." in out
    assert all(r.checked and r.samples == 5 for r in run.rows)


@pytest.mark.gpu
@needs_cuda
def test_torch_compile_is_timed_beside_the_others(tmp_path, capsys):
    """With --torch-compile, is torch.compile's softmax checked and written once per layout
    and mode, beside the kernel, with no file named for it?"""
    output = tmp_path / "i1.json"
    code, out, err = run_main(capsys, *bench_args(REFERENCE, output, *SMALL, "--torch-compile"))
    assert code == 0, err
    run = load(output)
    peers = {(r.layout, r.mode, r.num_warps) for r in run.rows if r.variant == TORCH_COMPILE}
    layouts, modes = ("transpose", "contiguous"), ("cold", "warm")
    assert peers == {(lay, m, None) for lay in layouts for m in modes}
    assert run.variant_impls == {} and f"Wrote {20 + len(peers)} rows to {output}." in out
    assert all(r.checked and r.samples == 5 for r in run.rows)


@pytest.mark.gpu
@needs_cuda
def test_wrong_kernel_exits_one_naming_the_variant(tmp_path, capsys):
    """Does a kernel that ignores the column stride exit 1, name direct, and write nothing?"""
    impl = write_bug(next(b for b in BUGS if b.name == "ignores-column-stride"), tmp_path)
    output = tmp_path / "i1.json"
    code, _, err = run_main(capsys, *bench_args(impl, output, *SMALL, "--layouts", "transpose"))
    assert code == 1
    message = err.splitlines()[-1]  # after the progress bar
    assert message.startswith("benchmark: direct num_warps=4 on 1024x512 transpose (cold): ")
    assert "values differ from a float64 softmax" in message
    assert not output.exists()


@pytest.mark.gpu
@needs_cuda
def test_cached_result_fails_on_fresh_inputs(tmp_path, capsys):
    """Does a kernel that replays its first output per shape fail the fresh-input recheck?"""
    impl = write_bug(next(b for b in BUGS if b.name == "caches-by-shape"), tmp_path)
    output = tmp_path / "i1.json"
    code, _, err = run_main(capsys, *bench_args(impl, output, *SMALL, "--layouts", "transpose"))
    assert code == 1
    message = err.splitlines()[-1]  # after the progress bar
    assert message.startswith("benchmark: direct num_warps=4 on 1024x512 transpose (cold): ")
    assert "on fresh inputs" in message
    assert not output.exists()


@pytest.mark.gpu
@needs_cuda
def test_run_benchmark_from_python():
    """Can a notebook call run_benchmark directly and get checked rows for a plain function?"""
    rows = sweep.run_benchmark(
        lambda x, num_warps: torch.softmax(x, dim=1),
        shapes=[(256, 128)],
        warps=[4],
        modes=["warm"],
        layouts=["transpose"],
        dtype="float16",
        reps=3,
        progress=False,
    )
    assert [(r.variant, r.num_warps) for r in rows] == [
        ("direct", 4),
        ("copy", 4),
        ("torch_softmax", None),
        ("roof", None),
    ]
    assert all(r.checked and r.samples == 3 for r in rows)
    assert rows[0].gbps_logical == pytest.approx(2 * 256 * 128 * 2 / (rows[0].median_ms * 1e6))
