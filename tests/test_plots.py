"""Tests for the benchmark plots: the num_warps comparison, the layout comparison, the CLI."""

from __future__ import annotations

import dataclasses
import subprocess
import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")

import pytest  # noqa: E402
from matplotlib.axes import Axes  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402
from matplotlib.patches import Rectangle  # noqa: E402

from learning.workshops import plot_panels, plots  # noqa: E402
from learning.workshops.measuring.results import (  # noqa: E402
    H200_SAMPLE,
    LAYOUT_AWARE,
    Results,
    Row,
    load,
)

ROOT = Path(__file__).resolve().parents[1]
FIXTURE = H200_SAMPLE  # measured on an H200; its note says when and how
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(scope="module")
def results() -> Results:
    return load(FIXTURE)


def bars(fig: Figure, prefix: str) -> dict[str, Rectangle]:
    """Every bar in `fig` whose gid starts with `prefix`, keyed by gid."""
    return {
        p.get_gid(): p
        for ax in fig.axes
        for p in ax.patches
        if p.get_gid() and p.get_gid().startswith(prefix)
    }


def panel(fig: Figure, label: str) -> Axes:
    return next(ax for ax in fig.axes if ax.get_label() == label)


def texts(ax: Axes) -> list[str]:
    return [t.get_text() for t in ax.texts]


def without(results: Results, drop) -> Results:
    return dataclasses.replace(results, rows=[r for r in results.rows if not drop(r)])


def best(results: Results, variant: str, shape: str, layout: str, mode: str) -> Row:
    rows = [
        r
        for r in results.rows
        if (r.variant, r.shape, r.layout, r.mode) == (variant, shape, layout, mode)
    ]
    return min(rows, key=lambda r: r.median_ms)


def fastest_roof(results: Results, shape: str, mode: str) -> Row:
    """The roof rows are timed beside each layout's configurations; the fastest is the ceiling."""
    roofs = [r for r in results.rows if (r.variant, r.shape, r.mode) == ("roof", shape, mode)]
    assert len(roofs) == 2
    return min(roofs, key=lambda r: r.median_ms)


def test_fixture_says_where_it_was_measured(results):
    """Does the fixture say, in its note and device, that it was measured on an H200?"""
    assert results.device == "NVIDIA H200"
    assert "Measured on an NVIDIA H200" in results.note
    assert results.device == "NVIDIA H200"
    assert {r.shape for r in results.rows} == {"2048x2048", "4096x4096", "65536x512"}


def test_warps_plot_has_one_bar_per_variant_mode_and_warps(results):
    """Does the warps plot draw one bar per (variant, layout, mode, num_warps) and shape?"""
    fig = plots.plot_warps(results)
    expected = {
        f"warps:{r.shape}:{r.layout}:{r.variant}:{r.mode}:{r.num_warps}"
        for r in results.rows
        if r.variant in ("direct", "copy")
    }
    assert len(expected) == 36
    assert set(bars(fig, "warps:")) == expected


def test_warps_bar_heights_are_the_medians(results):
    """Is each warps bar as tall as the median milliseconds in the file?"""
    drawn = bars(plots.plot_warps(results), "warps:")
    for r in results.rows:
        if r.variant in ("direct", "copy"):
            gid = f"warps:{r.shape}:{r.layout}:{r.variant}:{r.mode}:{r.num_warps}"
            assert drawn[gid].get_height() == pytest.approx(r.median_ms)


def test_warps_whiskers_span_min_to_max(results):
    """Does each warps bar carry a whisker from its min to its max milliseconds?"""
    fig = plots.plot_warps(results)
    row = results.find("direct", "4096x4096", "transpose", "cold", 8)
    gid = "warps:4096x4096:transpose:direct:cold:8"
    container = next(
        c
        for ax in fig.axes
        for c in ax.containers
        if getattr(c, "patches", None) and c.patches[0].get_gid() == gid
    )
    (segment,) = container.errorbar.lines[2][0].get_segments()
    assert sorted(segment[:, 1]) == pytest.approx([row.min_ms, row.max_ms])


def test_warps_plot_names_device_dtype_and_units(results):
    """Does the warps plot name the device and dtype, and label its axis in ms, with a legend?"""
    fig = plots.plot_warps(results)
    assert "NVIDIA H200" in fig.get_suptitle()
    assert "float32" in fig.get_suptitle()
    assert all("(ms)" in ax.get_ylabel() for ax in fig.axes)
    legend = [t.get_text() for t in fig.legends[0].get_texts()]
    assert legend[:2] == ["num_warps=4", "num_warps=8"]


def test_layout_bars_are_the_best_warps_logical_gbps(results):
    """Is each layout bar the logical GB/s of its variant's fastest num_warps?"""
    drawn = bars(plots.plot_layouts(results), "layouts:")
    for shape in ("4096x4096", "65536x512"):
        for mode in ("cold", "warm"):
            for key, variant, layout in (
                ("direct-transpose", "direct", "transpose"),
                ("copy-transpose", "copy", "transpose"),
                ("direct-contiguous", "direct", "contiguous"),
                ("torch_softmax-transpose", "torch_softmax", "transpose"),
            ):
                row = best(results, variant, shape, layout, mode)
                bar = drawn[f"layouts:{shape}:{mode}:{key}"]
                assert bar.get_height() == pytest.approx(row.gbps_logical)


def test_copy_bar_shows_its_real_traffic(results):
    """Does the copy-first bar stack its real traffic, hatched, up to gbps_traffic?"""
    drawn = bars(plots.plot_layouts(results), "layouts:")
    row = best(results, "copy", "65536x512", "transpose", "warm")
    extra = drawn["layouts:65536x512:warm:copy-transpose-traffic"]
    assert extra.get_y() == pytest.approx(row.gbps_logical)
    assert extra.get_y() + extra.get_height() == pytest.approx(row.gbps_traffic)
    assert extra.get_hatch()


def test_roof_line_is_at_the_roof_gbps(results):
    """Is the roof line of each layout panel at the fastest roof row's GB/s?"""
    fig = plots.plot_layouts(results)
    for shape in ("4096x4096", "65536x512"):
        for mode in ("cold", "warm"):
            roof = fastest_roof(results, shape, mode)
            ax = panel(fig, f"layouts {shape} {mode}")
            (line,) = [ln for ln in ax.lines if ln.get_gid() == f"roof:{shape}:{mode}"]
            assert list(line.get_ydata()) == pytest.approx([roof.gbps_logical] * 2)


def test_layout_bars_are_annotated_with_their_values(results):
    """Does every layout bar carry its GB/s as text, and the roof its value?"""
    fig = plots.plot_layouts(results)
    ax = panel(fig, "layouts 4096x4096 cold")
    written = "\n".join(texts(ax))
    for variant, layout in (("direct", "transpose"), ("direct", "contiguous")):
        row = best(results, variant, "4096x4096", layout, "cold")
        assert f"{row.gbps_logical:,.0f} GB/s" in written
    copy = best(results, "copy", "4096x4096", "transpose", "cold")
    assert f"{copy.gbps_traffic:,.0f} GB/s" in written
    roof = fastest_roof(results, "4096x4096", "cold")
    assert f"roof {roof.gbps_logical:,.0f} GB/s" in written


def test_layout_axis_is_labelled_in_gbps(results):
    """Is the layout plot's bandwidth axis labelled in GB/s, with the device in the title?"""
    fig = plots.plot_layouts(results)
    assert "GB/s" in panel(fig, "layouts 65536x512 cold").get_ylabel()
    assert "NVIDIA H200, float32" in fig.get_suptitle()
    assert fig.legends


def test_roof_measured_beside_either_layout_is_drawn(results):
    """Is the roof drawn, at the fastest roof, when only transpose configurations were timed?"""
    transposed = without(results, lambda r: r.layout == "contiguous")
    fig = plots.plot_layouts(transposed)
    roof = best(transposed, "roof", "65536x512", "transpose", "cold")
    ax = panel(fig, "layouts 65536x512 cold")
    (line,) = [ln for ln in ax.lines if ln.get_gid() == "roof:65536x512:cold"]
    assert list(line.get_ydata()) == pytest.approx([roof.gbps_logical] * 2)
    assert "not\nmeasured" in texts(ax)


def test_only_four_warps_and_cold_still_draws(results):
    """Does a file measured with only 4 warps, cold, draw what exists?"""
    partial = without(results, lambda r: r.num_warps == 8 or r.mode == "warm")
    warps = bars(plots.plot_warps(partial), "warps:")
    assert warps and all(gid.endswith(":cold:4") for gid in warps)
    layouts = plots.plot_layouts(partial)
    assert {ax.get_label() for ax in layouts.axes} == {
        "layouts 2048x2048 cold",
        "layouts 4096x4096 cold",
        "layouts 65536x512 cold",
    }


def test_missing_variants_are_marked_not_measured(results):
    """Is a variant without rows marked `not measured` instead of crashing the plot?"""
    partial = without(results, lambda r: r.variant in ("copy", "roof"))
    fig = plots.plot_layouts(partial)
    ax = panel(fig, "layouts 4096x4096 warm")
    assert "not\nmeasured" in texts(ax)
    assert not [ln for ln in ax.lines if ln.get_gid()]
    assert not bars(plots.plot_warps(partial), "warps:4096x4096:transpose:copy")


def test_file_without_kernel_rows_draws_a_message(results):
    """Does a file with only roof rows give a warps figure that says why it is empty?"""
    fig = plots.plot_warps(without(results, lambda r: r.variant != "roof"))
    assert any("no num_warps to compare" in t.get_text() for t in fig.texts)


def test_empty_results_raise_a_clear_value_error(results):
    """Does a results file with no rows raise a ValueError that says so?"""
    empty = dataclasses.replace(results, rows=[])
    for plot in (plots.plot_warps, plots.plot_layouts):
        with pytest.raises(ValueError, match="no rows, so there is nothing to plot"):
            plot(empty)


def test_save_plots_writes_two_pngs(results, tmp_path):
    """Does save_plots write warps.png and layouts.png and return their paths?"""
    paths = plots.save_plots(results, tmp_path / "new")
    assert [p.name for p in paths] == ["warps.png", "layouts.png"]
    assert all(p.read_bytes().startswith(PNG_MAGIC) for p in paths)


def run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "learning.workshops.plots", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_cli_writes_both_pngs(tmp_path):
    """Does the CLI write both PNGs into --out and say where?"""
    done = run_cli(str(FIXTURE), "--out", str(tmp_path))
    assert done.returncode == 0, done.stderr
    for name in ("warps.png", "layouts.png"):
        assert (tmp_path / name).read_bytes().startswith(PNG_MAGIC)
        assert f"wrote {tmp_path / name}" in done.stdout


def test_cli_refuses_a_bad_file_in_one_line(tmp_path):
    """Does a bad results file give exit status 2 and a one-line message naming the problem?"""
    bad = tmp_path / "bad.json"
    bad.write_text('{"schema": "something-else"}')
    done = run_cli(str(bad), "--out", str(tmp_path / "plots"))
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1
    assert done.stderr.startswith(f"plots: {bad}: schema is 'something-else'")
    assert "learning.workshops.benchmark" in done.stderr
    assert not (tmp_path / "plots").exists()


def test_cli_refuses_an_empty_file_in_one_line(results, tmp_path, capsys):
    """Does a results file with no rows give exit status 2 and one line, not a traceback?"""
    empty = dataclasses.replace(results, rows=[]).save(tmp_path / "empty.json")
    assert plots.main([str(empty), "--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert "no rows, so there is nothing to plot" in err


def test_cli_refuses_a_missing_file(tmp_path, capsys):
    """Does a path that does not exist give exit status 2 and say it cannot be read?"""
    assert plots.main([str(tmp_path / "nope.json")]) == 2
    assert "cannot read" in capsys.readouterr().err


# --- A run with --variants: the layout-aware kernel -----------------------------------------


def with_layout_aware(results: Results) -> Results:
    """The sample with layout-aware rows added: each direct row again, twice as fast on the
    transpose (synthetic: no H200 run of grader/beyond.py is stored yet)."""
    aware = [
        dataclasses.replace(
            r,
            variant=LAYOUT_AWARE,
            median_ms=r.median_ms / speedup,
            min_ms=r.min_ms / speedup,
            max_ms=r.max_ms / speedup,
            gbps_logical=r.gbps_logical * speedup,
            gbps_traffic=r.gbps_traffic * speedup,
        )
        for r in results.rows
        if r.variant == "direct"
        for speedup in [2.0 if r.layout == "transpose" else 1.0]
    ]
    return dataclasses.replace(
        results,
        rows=results.rows + aware,
        variant_impls={LAYOUT_AWARE: "grader/beyond.py"},
    )


def test_layout_aware_bar_is_its_best_warps_logical_gbps(results):
    """Does a run with layout-aware rows draw a fifth layout bar, the logical GB/s of its
    fastest num_warps on the transpose?"""
    aware = with_layout_aware(results)
    fig = plots.plot_layouts(aware)
    drawn = bars(fig, "layouts:")
    for shape in ("2048x2048", "4096x4096", "65536x512"):
        for mode in ("cold", "warm"):
            row = best(aware, LAYOUT_AWARE, shape, "transpose", mode)
            bar = drawn[f"layouts:{shape}:{mode}:layout-aware-transpose"]
            assert bar.get_height() == pytest.approx(row.gbps_logical)
    ticks = [t.get_text() for t in panel(fig, "layouts 4096x4096 cold").get_xticklabels()]
    assert len(ticks) == 5 and ticks[-1] == "layout-aware kernel\non the transpose"
    title = " ".join(fig.get_suptitle().split())  # wrapped to the figure's width
    assert "reference.py (layout-aware: beyond.py) on NVIDIA H200" in title


def test_layout_aware_bar_only_when_measured(results):
    """Does a run without layout-aware rows keep its four bars, with no `not measured` fifth?"""
    fig = plots.plot_layouts(results)
    assert not bars(fig, "layouts:4096x4096:cold:layout-aware")
    assert len(panel(fig, "layouts 4096x4096 cold").get_xticklabels()) == 4


def test_warps_plot_compares_layout_aware_num_warps(results):
    """Does the warps plot give layout-aware a bar per num_warps, layout and mode?"""
    aware = with_layout_aware(results)
    drawn = bars(plots.plot_warps(aware), "warps:")
    expected = {
        f"warps:{r.shape}:{r.layout}:{r.variant}:{r.mode}:{r.num_warps}"
        for r in aware.rows
        if r.variant in ("direct", "copy", LAYOUT_AWARE)
    }
    assert len(expected) == 36 + 24
    assert set(drawn) == expected


def test_save_plots_draws_a_run_with_layout_aware_rows(results, tmp_path):
    """Does a results file with layout-aware rows save, load and draw both PNGs?"""
    path = with_layout_aware(results).save(tmp_path / "beyond.json")
    assert plots.main([str(path), "--out", str(tmp_path / "plots")]) == 0
    for name in ("warps.png", "layouts.png"):
        assert (tmp_path / "plots" / name).read_bytes().startswith(PNG_MAGIC)


# --- The backward --------------------------------------------------------------------------


def backward_row(variant: str, shape: tuple[int, int], layout: str, mode: str, **kw) -> Row:
    """A backward row of median `ms` (min 0.9, max 1.3 times it) and its logical GB/s."""
    (m, n), ms, warps = shape, kw.get("ms", 0.1), kw.get("num_warps")
    tensors = 2 if variant == "roof" else 3
    gbps = tensors * m * n * 4 / (ms * 1e6)
    return Row(variant, m, n, layout, mode, warps, ms, 0.9 * ms, 1.3 * ms, 5, gbps, gbps, True)


def backward_results(warps: tuple[int, ...] = (4, 8), roof: bool = True) -> Results:
    """A small backward run: two shapes, both layouts and modes, every variant."""
    rows = []
    for shape in ((4096, 4096), (65536, 512)):
        for layout in ("transpose", "contiguous"):
            for mode in ("cold", "warm"):
                here = (shape, layout, mode)
                rows += [
                    backward_row("direct", *here, num_warps=w, ms=0.09 + w / 1e3) for w in warps
                ]
                if layout == "transpose":
                    rows += [backward_row("copy", *here, num_warps=w, ms=0.25) for w in warps]
                rows.append(backward_row("torch", *here, ms=0.2))
                if roof:
                    rows.append(backward_row("roof", *here, ms=0.045 if mode == "cold" else 0.04))
    return Results(
        op="strided_softmax_backward",
        impl="work/strided_softmax.ipynb",
        device="NVIDIA H200",
        capability="9.0",
        dtype="float32",
        created="2026-12-01T00:00:00+00:00",
        versions={"torch": "2.13.0"},
        rows=rows,
    )


def backward_gid(r: Row) -> str:
    return f"backward:{r.shape}:{r.mode}:{r.layout}:{r.variant}:{r.num_warps}"


def test_backward_plot_has_one_bar_per_row_as_tall_as_its_gbps():
    """Does the backward plot draw one bar per variant, num_warps, layout, mode and shape, as
    tall as the row's logical GB/s?"""
    run = backward_results()
    drawn = bars(plots.plot_backward(run), "backward:")
    timed = [r for r in run.rows if r.variant != "roof"]
    assert set(drawn) == {backward_gid(r) for r in timed}
    assert len(drawn) == 2 * 2 * (5 + 3)
    for r in timed:
        assert drawn[backward_gid(r)].get_height() == pytest.approx(r.gbps_logical)


def test_backward_whiskers_span_the_slowest_and_fastest_call():
    """Does each backward bar carry a whisker from its slowest call's GB/s to its fastest's?"""
    run = backward_results()
    row = next(r for r in run.rows if r.variant == "copy")
    container = next(
        c
        for ax in plots.plot_backward(run).axes
        for c in ax.containers
        if getattr(c, "patches", None) and c.patches[0].get_gid() == backward_gid(row)
    )
    (segment,) = container.errorbar.lines[2][0].get_segments()
    bytes_moved = 3 * row.rows * row.cols * 4
    slowest, fastest = (bytes_moved / (ms * 1e6) for ms in (row.max_ms, row.min_ms))
    assert sorted(segment[:, 1]) == pytest.approx([slowest, fastest])


def test_backward_plot_says_whose_run_its_bytes_and_the_roof():
    """Does the backward plot name the file, device and dtype, count 3 x M x N bytes, and
    draw and title each panel's roof?"""
    fig = plots.plot_backward(backward_results())
    assert fig.get_suptitle().startswith(
        "Softmax backward bandwidth: strided_softmax.ipynb on NVIDIA H200, float32"
    )
    ax = panel(fig, "backward 65536x512 warm")
    assert "3 x M x N" in panel(fig, "backward 65536x512 cold").get_ylabel()
    roof = 2 * 65536 * 512 * 4 / (0.04 * 1e6)
    (line,) = [ln for ln in ax.lines if ln.get_gid() == "roof:65536x512:warm"]
    assert list(line.get_ydata()) == pytest.approx([roof] * 2)
    assert ax.get_title(loc="left").endswith(f"roof {roof:,.0f} GB/s")
    legend = [t.get_text() for t in fig.legends[0].get_texts()]
    assert legend[0].startswith("direct:") and "roof: plain device copy" in legend


def test_backward_with_one_warps_and_no_roof_still_draws():
    """Does a run with only num_warps=4 and no roof draw its bars and no roof line?"""
    fig = plots.plot_backward(backward_results(warps=(4,), roof=False))
    drawn = bars(fig, "backward:")
    assert len(drawn) == 2 * 2 * (3 + 2)
    assert all(gid.endswith((":4", ":None")) for gid in drawn)
    assert not [ln for ax in fig.axes for ln in ax.lines if ln.get_gid()]


def test_each_plot_refuses_the_other_ops_run(results):
    """Is a backward run refused by the forward's plots, and a forward run by plot_backward,
    each naming the plots that draw it?"""
    with pytest.raises(
        ValueError, match="run of strided_softmax_backward, not of strided_softmax;"
    ):
        plots.plot_layouts(backward_results())
    with pytest.raises(ValueError, match="draw it with plot_warps, plot_layouts"):
        plots.plot_backward(results)


def test_cli_draws_backward_png_for_a_backward_run(tmp_path, capsys):
    """Does the plots command write backward.png, and only it, for a backward results file?"""
    path = backward_results().save(tmp_path / "backward.json")
    assert plots.main([str(path), "--out", str(tmp_path / "plots")]) == 0
    assert [p.name for p in (tmp_path / "plots").iterdir()] == ["backward.png"]
    assert (tmp_path / "plots" / "backward.png").read_bytes().startswith(PNG_MAGIC)
    assert capsys.readouterr().out == f"wrote {tmp_path / 'plots' / 'backward.png'}\n"


def test_roof_table_of_the_recorded_beyond_run():
    """Does the beyond section's table give each variant's best num_warps as a share of the
    fastest roof of its shape, blank where a variant was not timed (copy on contiguous)?"""
    from learning.workshops.measuring.results import H200_BEYOND
    from learning.workshops.plots import roof_table

    results = load(H200_BEYOND)
    table = roof_table(results).splitlines()
    assert table[1].split() == [
        "shape",
        "layout",
        "direct",
        "copy",
        "layout-aware",
        "torch_softmax",
        "torch_compile",
    ]
    row = next(line for line in table if line.startswith("4096x4096   transpose"))
    best = max(
        r.gbps_logical
        for r in results.rows
        if (r.variant, r.shape, r.layout, r.mode)
        == ("layout-aware", "4096x4096", "transpose", "cold")
    )
    roof = max(
        r.gbps_logical
        for r in results.rows
        if (r.variant, r.shape, r.mode) == ("roof", "4096x4096", "cold")
    )
    assert row.split()[4] == f"{best / roof:.0%}"
    contiguous = next(line for line in table if line.startswith("4096x4096   contiguous"))
    assert len(contiguous.split()) == 6  # no copy-first bar on contiguous rows


def test_recorded_beyond_run_labels_its_six_bars_apart():
    """Does the recorded beyond run (six bars a panel: --variants and --torch-compile) draw
    each panel's bar labels without one running into the next?"""
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    from learning.workshops.measuring.results import H200_BEYOND

    fig = plots.plot_layouts(load(H200_BEYOND))
    canvas = FigureCanvasAgg(fig)
    canvas.draw()
    renderer = canvas.get_renderer()
    ax = panel(fig, "layouts 4096x4096 cold")
    boxes = [t.get_window_extent(renderer) for t in ax.get_xticklabels()]
    assert len(boxes) == 6
    assert all(left.x1 < right.x0 for left, right in zip(boxes, boxes[1:], strict=False))


def test_median_labels_sit_at_the_median_and_outliers_do_not_set_the_axis(results):
    """Is each warps bar's label at its median (not at its whisker's end), is every panel's
    axis set by its medians, and is a whisker that ends far above them cut at the edge,
    marked, with its end printed?"""
    fig = plots.plot_warps(results)
    for r in results.rows:
        if r.variant not in ("direct", "copy"):
            continue
        gid = f"{r.shape}:{r.layout}:{r.variant}:{r.mode}:{r.num_warps}"
        ax = panel(fig, f"warps {r.shape} {r.layout}")
        (label,) = [t for t in ax.texts if t.get_gid() == f"median:{gid}"]
        assert label.xy[1] == pytest.approx(r.median_ms)
        top = ax.get_ylim()[1]
        highest = max(
            o.median_ms for o in results.rows if (o.shape, o.layout) == (r.shape, r.layout)
        )
        assert top <= 1.1 * plot_panels.OFF_SCALE * highest
        marked = [line for line in ax.lines if line.get_gid() == f"off-scale:{gid}"]
        assert bool(marked) == (r.max_ms > top)
        if marked:
            assert f"{r.max_ms:.3g}" in [t.get_text() for t in ax.texts]


def test_an_outlier_is_marked_and_named_in_the_legend():
    """Does a slowest call ten times the median leave the axis to the medians, with a
    triangle at the edge that the legend explains (and no such entry without one)?"""
    run = load(H200_SAMPLE)
    row = next(r for r in run.rows if r.variant == "direct")
    slow = dataclasses.replace(row, max_ms=10 * row.median_ms)
    fig = plots.plot_warps(
        dataclasses.replace(run, rows=[slow if r is row else r for r in run.rows])
    )
    ax = panel(fig, f"warps {row.shape} {row.layout}")
    assert ax.get_ylim()[1] < 3 * max(r.median_ms for r in run.rows if r.shape == row.shape)
    legend = [t.get_text() for t in fig.legends[0].get_texts()]
    assert "slowest call off the scale" in legend


def test_figures_fit_the_notebook_column():
    """Are the recorded runs' figures at most the notebook's column wide (1280 px at 100 dpi),
    so their tick labels are drawn at their size, the six-bar beyond run's panels one under
    the other?"""
    from learning.workshops.measuring.results import H200_BACKWARD, H200_BEYOND

    for path, plot in (
        (H200_SAMPLE, plots.plot_warps),
        (H200_SAMPLE, plots.plot_layouts),
        (H200_BACKWARD, plots.plot_backward),
        (H200_BEYOND, plots.plot_layouts),
    ):
        assert plot(load(path)).get_figwidth() <= plots.COLUMN_INCHES, (path.name, plot.__name__)
    beyond = plots.plot_layouts(load(H200_BEYOND))
    columns = {ax.get_subplotspec().colspan.start for ax in beyond.axes}
    assert columns == {0}
