"""The child process that runs an implementation's cases, one report line per event.

The parent (`isolation.run_isolated`) sends a JSON job on stdin and reads events from a
dedicated pipe, so whatever the student's code prints cannot corrupt the report. A crash
or hang here costs the case in progress, never the checker.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--report-fd", type=int, required=True)
    report = os.fdopen(parser.parse_args().report_fd, "w", buffering=1)
    job = json.load(sys.stdin)

    def emit(event: str, **fields) -> None:
        report.write(json.dumps({"event": event, **fields}) + "\n")
        report.flush()

    from learning.workshops.contracts import default_device, describe_device, select_mode

    mode = select_mode(verbose=False)
    from learning.workshops.cases import Case, run_case
    from learning.workshops.loader import LoadError, load_function

    try:
        fn = load_function(Path(job["impl"]), job["function"])
    except LoadError as exc:
        emit("load-error", detail=str(exc))
        return
    device = default_device()
    emit("loaded", mode=mode, device=describe_device(device))
    for spec in job["cases"]:
        case = Case(**spec)
        emit("start", case=case.name)
        result = run_case(fn, job["op"], case, device, job["seed"])
        emit("result", **result.to_json())


if __name__ == "__main__":
    main()
