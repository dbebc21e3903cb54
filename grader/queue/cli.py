"""The queue's commands: tokens, the service, a receipt's check, the board, a worker.

    python -m grader.queue tokens --course DIR [--student S | --instructor] [--url URL]
    python -m grader.queue serve  --course DIR [--host H --port P] [--workers N] [--slurm]
    python -m grader.queue verify FILE --course DIR
    python -m grader.queue board  --course DIR --out board.html [--instructor]
    python -m grader.queue worker --course DIR [--once] [--slurm]

Each works on the course of `grader.course_folder` (--course, else $I1_COURSE, else here).
Exit status: 0 done (verify: the receipt holds), 1 verify refused the file, 2 refused or a
usage error.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from grader.course_folder import add_course_option, not_a_course
from grader.gradebook import GradebookError, gradebook_url
from grader.queue import board, receipt, tokens
from grader.seeding import MissingSecret, course_secret

WORKER_MISSING = (
    "this checkout has no grader/queue/worker.py (the queue's worker side): update the "
    "checkout, or run `serve --workers 0` and start workers from a checkout that has it"
)


def build_parser() -> argparse.ArgumentParser:
    from grader.queue.service import BOUND_FIELDS

    parser = argparse.ArgumentParser(
        prog="python -m grader.queue",
        description=__doc__.splitlines()[0],
        epilog="Exit status: 0 done, 1 verify refused the file, 2 refused or a usage error.",
    )
    commands = parser.add_subparsers(dest="command", required=True)
    made = commands.add_parser("tokens", help="make the students' (or the instructor's) tokens")
    add_course_option(made)
    who = made.add_mutually_exclusive_group()
    who.add_argument(
        "--student", action="append", help="make, or replace, this student's token (repeatable)"
    )
    who.add_argument("--instructor", action="store_true", help="make the instructor's token")
    made.add_argument(
        "--url", help="the service's address; writes each student's i1_queue.json handout too"
    )
    serve = commands.add_parser("serve", help="run the HTTP service (and local workers)")
    add_course_option(serve)
    serve.add_argument("--host", default="127.0.0.1", help="address to listen on (%(default)s)")
    serve.add_argument("--port", type=int, default=8052, help="port to listen on (%(default)s)")
    serve.add_argument(
        "--root-path", default="", help="the path prefix the HTTPS proxy serves it under, e.g. /i1"
    )
    serve.add_argument(
        "--workers", type=int, default=1, help="local worker processes (%(default)s; 0: none)"
    )
    serve.add_argument("--slurm", action="store_true", help="the workers run jobs through Slurm")
    for bound in BOUND_FIELDS:
        serve.add_argument(
            f"--{bound.name.replace('_', '-')}",
            type=type(bound.default),
            default=bound.default,
            help=f"{bound.metadata['help']} (%(default)s)",
        )
    check = commands.add_parser("verify", help="check a --remote result's receipt")
    check.add_argument("file", type=Path, help="the results file a --remote run wrote")
    add_course_option(check)
    shown = commands.add_parser("board", help="write the class board as a static HTML page")
    add_course_option(shown)
    shown.add_argument("--out", type=Path, required=True, help="the HTML file to write")
    shown.add_argument(
        "--instructor", action="store_true", help="the instructor's view, with roster names"
    )
    commands.add_parser("worker", help="run a worker (python -m grader.queue worker --help)")
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv[:1] == ["worker"]:
        try:
            from grader.queue import worker
        except ImportError:
            print(f"worker: {WORKER_MISSING}", file=sys.stderr)
            return 2
        return worker.main(argv[1:])
    args = build_parser().parse_args(argv)
    root = Path(args.course)
    if problem := not_a_course(root):
        print(f"{args.command}: {problem}", file=sys.stderr)
        return 2
    run = {"tokens": make_tokens, "serve": serve, "verify": verify, "board": write_board}
    try:
        return run[args.command](root.resolve(), args)
    except (tokens.TokenError, MissingSecret, GradebookError, OSError) as exc:
        print(f"{args.command}: {exc}", file=sys.stderr)
        return 2


def make_tokens(root: Path, args) -> int:
    if args.instructor:
        token = tokens.make_instructor(root)
        print(f"the instructor's token (the board's instructor view; kept only hashed): {token}")
        return 0
    made = tokens.make(root, args.student, args.url)
    if not made:
        print("every roster student has a token already: --student S replaces one")
        return 0
    for student, token in sorted(made.items()) if args.student else []:
        print(f"{student}: {token}")
    handouts = f"; handouts in {tokens.HANDOUTS}/STUDENT/{tokens.HANDOUT}" if args.url else ""
    print(
        f"{len(made)} token(s) written to {root / tokens.CSV_FILE} for the LMS (delete it once "
        f"uploaded; the course keeps only their hashes, in {tokens.TOKENS_FILE}){handouts}"
    )
    return 0


def serve(root: Path, args) -> int:
    import uvicorn

    from grader.queue.service import BOUND_FIELDS, Bounds, make_app

    course_secret(root)  # receipts are signed with it: refuse now, not at the first job
    bounds = Bounds(**{b.name: getattr(args, b.name) for b in BOUND_FIELDS})
    app = make_app(root, bounds)
    workers = None
    if args.workers > 0:
        try:
            from grader.queue.worker import start_workers
        except ImportError:
            print(f"serve: {WORKER_MISSING}", file=sys.stderr)
            return 2
        workers = start_workers(root, args.workers, args.slurm, job_time_s=bounds.job_time_s)
    if not tokens.load(root).students:
        print("serve: no student has a token yet: run `python -m grader.queue tokens`")
    where = f"http://{args.host}:{args.port}{args.root_path}"
    print(f"serve: the queue of {root} on {where}, {args.workers} local worker(s)", flush=True)
    try:
        uvicorn.run(
            app, host=args.host, port=args.port, root_path=args.root_path, proxy_headers=True
        )
    finally:
        if workers is not None:
            workers.stop()
    return 0


def verify(root: Path, args) -> int:
    try:
        result, signed = receipt.split(json.loads(args.file.read_text()))
        receipt.verify(root, result, signed)
    except ValueError as exc:  # ReceiptError included
        print(f"verify: {args.file}: {exc}", file=sys.stderr)
        return 1
    gpu = (signed.get("gpu") or {}).get("name") or "no GPU"
    print(
        f"verify: {args.file} holds: job {signed.get('job')} of {signed.get('student')}, "
        f"{signed.get('kind')} {signed.get('op')} on {gpu}, signed by this course"
    )
    return 0


def write_board(root: Path, args) -> int:
    from grader.queue.store import Store

    store = Store(gradebook_url(root))
    try:
        roster = tokens.roster(root) if args.instructor else None
        data = board.board(root, store, roster)
    finally:
        store.close()
    args.out.write_text(board.render(data), encoding="utf-8")
    shown = sum(len(group["entries"]) for group in data["gpus"])
    print(f"board: {shown} student result(s) on {len(data['gpus'])} GPU model(s) in {args.out}")
    return 0
