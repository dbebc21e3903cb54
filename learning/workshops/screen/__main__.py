"""The source screen as a command: `python -m learning.workshops.screen FILE [--json]`.

Reads the notebook or `.py` file FILE as data (never running it) and prints what grading
would hold for review: with --json one object, `{"findings": [...], "more": N,
"unfinished": ""}`, else the lines a student reads. It limits its own CPU time and memory
first (--seconds, --memory-mib), as `learning.workshops.screen.running` runs it. Exit status:
0 when it finished reading (whatever it found), 2 when FILE cannot be read, 3 when the
reading itself failed (out of memory, nested too deep).
"""

from __future__ import annotations

import argparse
import json
import math
import resource
import sys
from pathlib import Path

from learning.workshops.screen.reading import MAX_FINDINGS, read_file
from learning.workshops.screen.running import MEMORY_MIB, SECONDS, Screened, report_lines


def limit(seconds: float, memory_mib: int) -> None:
    """Bound this process: its CPU time (SIGXCPU past it) and its address space."""
    cpu = math.ceil(seconds)
    resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 1))
    memory = memory_mib * 2**20
    resource.setrlimit(resource.RLIMIT_AS, (memory, memory))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m learning.workshops.screen", description=__doc__.splitlines()[0]
    )
    parser.add_argument("file", help="a notebook (.ipynb) or a .py file")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument("--seconds", type=float, default=SECONDS, help="CPU seconds allowed")
    parser.add_argument("--memory-mib", type=int, default=MEMORY_MIB, help="memory allowed")
    args = parser.parse_args(argv)
    limit(args.seconds, args.memory_mib)
    try:
        found = read_file(Path(args.file))
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        print(f"screen: cannot read {args.file}: {exc}", file=sys.stderr)
        return 2
    except MemoryError:
        print("screen: MemoryError", file=sys.stderr)  # running.py words it with the bound
        return 3
    except RecursionError:
        print("screen: its code is nested too deep to read", file=sys.stderr)
        return 3
    screened = Screened(tuple(found[:MAX_FINDINGS]), max(0, len(found) - MAX_FINDINGS))
    if args.json:
        print(json.dumps(screened.to_json()))
    else:
        print("\n".join(report_lines(screened)) or f"{args.file}: nothing grading would hold.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
