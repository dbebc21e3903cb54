"""Call a student's plain function in a child process, on inputs sent as JSON.

    python -m learning.workshops.calls --report-fd N < job.json

The hidden checks of plain functions (the address table, the worksheet) run the student's
code here, in a sandboxed child, and compare in the trusted parent: the child is sent only
the inputs, never the expected answers, the course secret or the grader. The job is
`{"impl", "function", "calls": [input, ...]}`; an input is
`{"view": {"storage": [...], "shape": [...], "stride": [...], "offset": n}}` (a float32 view
of that storage) or `{"results": {...}}` (a benchmark results file, `results.from_json`).
One JSON line goes to the report pipe: each call's `{"value": ...}` or `{"raised": "..."}`.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

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
        from learning.workshops.results import from_json

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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--report-fd", type=int, required=True)
    report = os.fdopen(parser.parse_args().report_fd, "w")
    job = json.load(sys.stdin)
    from learning.workshops.contracts import select_mode
    from learning.workshops.loader import LoadError, load_function
    from learning.workshops.testing import quiet

    select_mode(verbose=False)
    try:
        fn = load_function(Path(job["impl"]), job["function"])
    except LoadError as exc:
        report.write(json.dumps({"load_error": str(exc)}) + "\n")
        return
    answers = []
    for spec in job["calls"]:
        value = argument(spec)
        try:
            with quiet():
                answers.append({"value": plain(fn(value))})
        except Exception as exc:  # the student's error is the answer
            answers.append({"raised": type(exc).__name__, "message": str(exc)[:300]})
    report.write(json.dumps({"answers": answers}) + "\n")


if __name__ == "__main__":
    main()
