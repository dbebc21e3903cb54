"""Call a student's plain function on inputs sent as JSON, in the submission's child process.

The hidden checks of plain functions (the address table, the worksheet) run the student's
code in a sandboxed child (`child`, a `calls` job) and compare in the trusted parent: the
child is sent only the inputs, never the expected answers, the course secret or the grader.
An input is `{"view": {"storage": [...], "shape": [...], "stride": [...], "offset": n}}` (a
float32 view of that storage) or `{"results": {...}}` (a benchmark results file,
`results.from_json`).
"""

from __future__ import annotations

MAX_ITEMS = 100_000
"""Entries of a returned list or dict kept: enough for any hidden input, bounded for a pipe."""


def argument(spec: dict):
    """The Python value an input spec describes."""
    import torch

    if "view" in spec:
        view = spec["view"]
        storage = torch.tensor(view["storage"], dtype=torch.float32)
        return storage.as_strided(view["shape"], view["stride"], view["offset"])
    if "results" in spec:
        from learning.workshops.measuring.results import from_json

        return from_json(spec["results"])
    raise ValueError(f"unknown input {sorted(spec)}; expected 'view' or 'results'")


def plain(value):
    """A returned value as JSON: containers, numbers and strings kept, tensors as lists."""
    if hasattr(value, "tolist"):
        value = value.tolist()
    if isinstance(value, dict):
        return {str(k): plain(v) for k, v in list(value.items())[:MAX_ITEMS]}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in list(value)[:MAX_ITEMS]]
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    return {"unreadable": type(value).__name__}


def answer_calls(fn, calls: list[dict]) -> list[dict]:
    """`fn` called on each input spec: `{"value": ...}` for what it returned, or
    `{"raised": name, "message": ...}` for what it raised (the student's error is the answer)."""
    from learning.workshops.checking.untrusted import class_name, text
    from learning.workshops.notebook.testing import quiet

    answers = []
    for spec in calls:
        value = argument(spec)
        try:
            with quiet():
                answers.append({"value": plain(fn(value))})
        except Exception as exc:
            answers.append({"raised": class_name(exc), "message": text(exc)[:300]})
    return answers
