"""A queued check job: the student's `check` command, once, giving both of its outputs.

    python -m grader.queue.check_job OP FILE REPORT.json [--hint] [--seed N]

Runs `python -m learning.workshops.check OP --impl FILE --sandbox required` unchanged (its
text on stdout, its exit status), and writes the report's `--json` object to REPORT.json: the
check's own `run_check` is wrapped to keep the report it returns, so one run (about 7 s of
cases) gives the student both the text and the JSON a local run would print, whichever they
asked for. `--sandbox required`: the student's code runs in the check's bubblewrap sandbox or
not at all, and where none can start the check says why (exit 2).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from learning.workshops import check


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("op")
    parser.add_argument("impl")
    parser.add_argument("report", type=Path)
    parser.add_argument("--hint", action="store_true")
    parser.add_argument("--seed", type=int)
    args = parser.parse_args(argv)
    kept: list[check.Report] = []
    run_check = check.run_check

    def keeping(*call, **named) -> check.Report:
        kept.append(run_check(*call, **named))
        return kept[-1]

    check.run_check = keeping
    command = [args.op, "--impl", args.impl, "--sandbox", "required"]
    command += ["--hint"] * args.hint + ([] if args.seed is None else ["--seed", str(args.seed)])
    status = check.main(command)
    if kept:  # what `check --json` prints: the report, and no picture (no --draw)
        args.report.write_text(json.dumps({**kept[-1].to_json(), "picture": None}))
    return status


if __name__ == "__main__":
    sys.exit(main())
