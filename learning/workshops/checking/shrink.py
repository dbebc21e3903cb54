"""The smallest failing view: from a failed case, a search for the smallest view that still
fails the same way (the same `Failure`), which `check` reports and can draw.

A greedy search over the Case's fields, not Hypothesis's shrinker: it knows which layouts
are simpler, it sends each step's candidates to the submission's child as one batch (one
round trip), its cost is capped by a count of case runs that it never exceeds (Hypothesis
bounds its examples, not the calls its shrink phase makes), and it needs no dependency. It
moves to the first candidate that fails the same way, in this order, and repeats until no
step finds one: a simpler layout (`LAYOUT_ORDER`, those without a storage offset first),
default dtype, fill, warps and a single call, fewer rows, fewer columns. Rows and columns
try 1, 2, 3 and a few points between the largest count known not to fail and the current
one, so a failure that starts at a width (129, say) is found by bisection.

The search is deterministic for a given seed while the run cap ends it (cases run in
milliseconds on the interpreter); `MAX_SECONDS` is a safety net, for compiles on a GPU.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, replace
from pathlib import Path

import torch

from learning.workshops.checking.hints import Hint, HintId
from learning.workshops.checking.layouts import FILL, LAYOUT
from learning.workshops.checking.records import DTYPES, Case, CaseResult, Failure, Verdict
from learning.workshops.checking.views import describe, sentinel_view

MAX_RUNS = 30
"""Most candidate cases one search runs."""
MAX_SECONDS = 10.0
"""Longest one search goes on starting new batches."""
LADDER_POINTS = 4
"""Counts tried between the largest one known not to fail and the current one, per batch."""
LAYOUT_ORDER = (
    "contiguous",
    "transpose",
    "row-broadcast",
    "col-broadcast",
    "scalar-broadcast",
    "slice",
    "transposed-slice",
)
"""Layouts from the simplest: adjacent columns, then other strides, then a storage offset."""
DEFAULTS = {"dtype": "float32", "fill": "normal", "num_warps": 4, "repeat": False}
"""A case's fields other than its view, as the simplest case has them."""
NOT_SHRUNK = frozenset(
    {
        Failure.CRASH,  # a child restart per candidate, and the cause is not the view
        Failure.TIMEOUT,
        Failure.MEMORY,
        Failure.INTERNAL_ERROR,  # the checker's fault, not the submission's
        Failure.STALE_OUTPUT,  # depends on the calls before it, not on one view
        Failure.NOT_RAISED,  # bad inputs are not views
        Failure.UNCLEAR_ERROR,
        Failure.NOT_ATTEMPTED,  # an optional exercise's stub: nothing to shrink
    }
)
"""Failures the search does not start from."""

Runner = Callable[[list[Case]], list[CaseResult]]
"""Runs cases (in the submission's child) and returns one result per case."""


@dataclass(frozen=True)
class Shrunk:
    """What a search found: the smallest case that fails as `start` did, and its cost."""

    start: Case
    case: Case
    result: CaseResult
    runs: int
    seconds: float
    stopped: str  # why the search ended

    @property
    def failure(self) -> Failure:
        return self.result.failure

    @property
    def smaller(self) -> bool:
        """Whether the search found a case simpler than the one it started from."""
        return _plain(self.case) != _plain(self.start)

    def to_json(self) -> dict:
        return {
            "start": self.start.name,
            "case": {k: v for k, v in asdict(self.case).items() if k != "name"},
            "view": view_words(self.case),
            "strides": list(self.case.geometry.strides),
            "offset": self.case.geometry.offset,
            "failure": self.failure,
            "text": self.result.verdict.text,
            "smaller": self.smaller,
            "runs": self.runs,
            "seconds": round(self.seconds, 3),
            "stopped": self.stopped,
        }


def shrinkable(case: Case, result: CaseResult) -> bool:
    """Whether a search may start from this failed case: a view, failed in a way a smaller
    view can show."""
    return not result.passed and result.failure not in NOT_SHRUNK and case.bad_input is None


def starting_case(
    cases: list[Case], results: list[CaseResult], hints: Iterable[Hint]
) -> tuple[Case, CaseResult] | None:
    """The failed case to shrink: the first shrinkable one a hint gives as evidence (hints in
    order), else the first shrinkable one; None when none is, or the code is the stub. A
    case that raised the one error every failing case raises (the exception hint) is not
    shrunk: a smaller view would only raise it again."""
    hints = list(hints)
    if any(h.id == HintId.UNFINISHED for h in hints):
        return None
    one_error = any(h.id == HintId.EXCEPTION for h in hints)
    by_name = {c.name: c for c in cases}
    failed = [(by_name[r.name], r) for r in results if r.name in by_name]
    failed = [(c, r) for c, r in failed if shrinkable(c, r)]
    failed = [(c, r) for c, r in failed if not (one_error and r.failure == Failure.EXCEPTION)]
    for hint in hints:
        for case, result in failed:
            if result.detail in hint.evidence:
                return case, result
    return failed[0] if failed else None


def shrink(
    run: Runner,
    start: Case,
    result: CaseResult,
    max_runs: int = MAX_RUNS,
    max_seconds: float = MAX_SECONDS,
    clock: Callable[[], float] = time.monotonic,
) -> Shrunk:
    """The smallest case found that fails as `start` did (`result`'s failure), running at
    most `max_runs` candidates through `run` (see the module's docstring)."""
    began = clock()
    search = _Search(run, result.failure, max_runs, began + max_seconds, clock)
    search.best, search.seen[_plain(start)] = _plain(start), result
    improved = True
    while improved and search.stopped is None:
        improved = False
        for step in (_simpler_layouts, _default_fields, _fewer("rows"), _fewer("cols")):
            improved |= search.minimise(step)
    best = replace(search.best, name=_name(search.best)) if search.best != _plain(start) else start
    stopped = search.stopped or "nothing smaller fails the same way"
    return Shrunk(start, best, search.seen[search.best], search.runs, clock() - began, stopped)


Step = Callable[[Case, "_Search"], list[Case]]
"""A step: the candidates one move away from a case, the most wanted first."""


class _Search:
    """The search's state: the best case so far, every case run, and the budget left."""

    def __init__(
        self,
        run: Runner,
        failure: Failure,
        max_runs: int,
        deadline: float,
        clock: Callable[[], float],
    ) -> None:
        self.run, self.failure, self.max_runs = run, failure, max_runs
        self.deadline, self.clock = deadline, clock
        self.best: Case | None = None
        self.seen: dict[Case, CaseResult] = {}
        self.runs = 0
        self.stopped: str | None = None

    def minimise(self, step: Step) -> bool:
        """Take `step` while it has untried candidates; whether it found a smaller case."""
        improved = False
        while self.stopped is None:
            candidates = [c for c in step(self.best, self) if _plain(c) not in self.seen]
            if not candidates:
                break
            found = self.first_failing(list(dict.fromkeys(map(_plain, candidates))))
            if found is not None:
                self.best, improved = found, True
        return improved

    def first_failing(self, candidates: list[Case]) -> Case | None:
        """Run what the budget allows of `candidates`; the first that fails the same way."""
        if self.runs >= self.max_runs:
            self.stopped = f"run cap ({self.max_runs} runs)"
            return None
        if self.clock() >= self.deadline:
            self.stopped = "time cap"
            return None
        batch = candidates[: self.max_runs - self.runs]
        named = [replace(c, name=_name(c)) for c in batch]
        by_name = {r.name: r for r in self.run(named)}
        self.runs += len(batch)
        for case in batch:
            self.seen[case] = by_name.get(_name(case)) or CaseResult.of(case, _missing(case))
        halted = [self.seen[c] for c in batch if self.seen[c].failure in _HALTING]
        if halted:
            self.stopped = f"a candidate ended with {halted[0].failure}: {halted[0].detail}"
        return next((c for c in batch if self.seen[c].failure == self.failure), None)

    def not_failing(self, case: Case, field: str) -> list[int]:
        """Values of `field` run with `case`'s other fields that did not fail the same way."""
        return [
            getattr(c, field)
            for c, r in self.seen.items()
            if r.failure != self.failure and replace(c, **{field: getattr(case, field)}) == case
        ]


_HALTING = frozenset({Failure.CRASH, Failure.TIMEOUT, Failure.MEMORY})
"""A candidate that ended so cost a child restart: the search stops there."""


def _missing(case: Case) -> Verdict:
    return Verdict(Failure.INTERNAL_ERROR, f"no result came back for {_name(case)}")


def _plain(case: Case) -> Case:
    """The case without its name: what the search compares and remembers."""
    return replace(case, name="")


def _name(case: Case) -> str:
    """A candidate's name, unique per case: layout, shape and fields that are not default."""
    extras = [f"{k}={getattr(case, k)}" for k, v in DEFAULTS.items() if getattr(case, k) != v]
    return " ".join([f"shrink {case.layout} {case.rows}x{case.cols}", *extras])


def _simpler_layouts(case: Case, search: _Search) -> list[Case]:
    rank = LAYOUT_ORDER.index(case.layout)
    return [replace(case, layout=layout) for layout in LAYOUT_ORDER[:rank]]


def _default_fields(case: Case, search: _Search) -> list[Case]:
    return [replace(case, **{k: v}) for k, v in DEFAULTS.items() if getattr(case, k) != v]


def _fewer(field: str) -> Step:
    """A step to smaller values of `field` (rows or cols): 1, 2, 3, and `LADDER_POINTS`
    evenly spaced between the largest value known not to fail and the current one."""

    def step(case: Case, search: _Search) -> list[Case]:
        n = getattr(case, field)
        low = max((v for v in search.not_failing(case, field) if v < n), default=0)
        gap = n - low
        if gap - 1 <= LADDER_POINTS:
            between = range(low + 1, n)
        else:
            between = [low + gap * k // (LADDER_POINTS + 1) for k in range(1, LADDER_POINTS + 1)]
        values = sorted({v for v in (1, 2, 3, *between) if 1 <= v < n})
        return [replace(case, **{field: v}) for v in values]

    return step


def view_words(case: Case) -> str:
    """The case's view in words: how it is built, its strides, offset, dtype and extras;
    for the backward, y's and dy's."""
    if case.grad_layout is not None:
        dy = replace(case, layout=case.grad_layout, grad_layout=None)
        g = dy.geometry
        dy_words = LAYOUT[dy.layout].words(dy.rows, dy.cols)
        y_words = view_words(replace(case, grad_layout=None))
        return f"y: {y_words}; dy: {dy_words}, strides {g.strides}, offset {g.offset}"
    g = case.geometry
    built = LAYOUT[case.layout].words(case.rows, case.cols)
    words = [built, f"strides {g.strides}", f"offset {g.offset}", case.dtype]
    if case.fill != DEFAULTS["fill"]:
        words.append(FILL[case.fill].words)
    if case.num_warps != DEFAULTS["num_warps"]:
        words.append(f"num_warps={case.num_warps}")
    if case.repeat:
        words.append("called twice")
    return ", ".join(words)


def build_view(case: Case, seed: int) -> torch.Tensor:
    """The case's view on the CPU with the values its run had for `seed`, over a storage as
    long as its base tensor (the run's is longer, NaN past the view, for stray reads)."""
    generator = torch.Generator().manual_seed(seed)
    g = case.geometry
    storage, _ = sentinel_view(g, DTYPES[case.dtype], "cpu", generator, case.fill)
    base = storage[: max(LAYOUT[case.layout].base_size(g.rows, g.cols), g.footprint_end)].clone()
    return base.as_strided((g.rows, g.cols), g.strides, g.offset)


def build_views(case: Case, seed: int) -> list[tuple[str, torch.Tensor]]:
    """The views a case's call read, named, with its run's values for `seed`: x, or the
    backward's y and dy (either may be the one misread), each over its base tensor."""
    if case.grad_layout is None:
        return [("x", build_view(case, seed))]
    from learning.workshops.checking.exchange import build_inputs

    storages = build_inputs("backward", case, seed).storages
    views = []
    layouts = (case.layout, case.grad_layout)
    for name, storage, layout in zip(("y", "dy"), storages, layouts, strict=True):
        one = replace(case, layout=layout, grad_layout=None)
        g = one.geometry
        base = storage[: max(LAYOUT[layout].base_size(g.rows, g.cols), g.footprint_end)].clone()
        views.append((name, base.as_strided((g.rows, g.cols), g.strides, g.offset)))
    return views


def verdict_words(shrunk: Shrunk, seed: int) -> str:
    """The verdict's text without the view's description that starts it."""
    views = dict(build_views(shrunk.case, seed))
    if "dy" in views:
        dy = views["dy"]
        where = f"y {describe(views['y'])}; dy strides {tuple(dy.stride())}, "
        where += f"offset {dy.storage_offset()}"
    else:
        where = describe(views["x"])
    return shrunk.result.verdict.text.removeprefix(f"{where}: ")


def report_lines(shrunk: Shrunk, seed: int) -> list[str]:
    """The report's section on the smallest failing view."""
    if shrunk.smaller:
        found = f"from case {shrunk.start.name}, {shrunk.runs} extra runs in {shrunk.seconds:.1f} s"
    else:
        found = f"case {shrunk.start.name} itself: none of {shrunk.runs} smaller views fails so"
    return [
        f"Smallest failing view ({found}):",
        f"    {view_words(shrunk.case)}",
        f"    {shrunk.failure}: {verdict_words(shrunk, seed)}",
    ]


def picture_title(shrunk: Shrunk) -> str:
    return f"smallest failing view ({shrunk.failure}), case {shrunk.start.name} shrunk"


def stray_index(shrunk: Shrunk) -> int | None:
    """The storage index of the input that the smallest failing view's kernel read outside
    the view, as the audit's verdict names it (a load off the view or past its row); None
    for other failures."""
    if shrunk.failure != Failure.OUT_OF_BOUNDS:
        return None
    found = STORAGE_INDEX.search(shrunk.result.verdict.text)
    return int(found.group(1)) if found else None


STORAGE_INDEX = re.compile(r"storage index (-?\d+)")
"""How the audit's verdict names the storage index a load read (`audit.Trace` findings)."""


def draw(shrunk: Shrunk, seed: int, path: Path) -> Path:
    """Save the address explorer's picture (`draw_view`) of the smallest failing view: for
    the backward, y's and dy's side by side; a load off the view marked where it read."""
    from learning.workshops.notebook.pictures import save_view

    views = build_views(shrunk.case, seed)
    return save_view(views, path, picture_title(shrunk), stray_index(shrunk))
