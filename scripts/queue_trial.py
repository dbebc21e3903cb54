"""The class GPU queue, tried end to end on one machine: the figures issue 52 asks for.

    python scripts/queue_trial.py OUT [--phases idle,timing,flood,hog]

Makes a scratch course (grader.make_course) with ten roster students and their tokens, starts
`python -m grader.queue serve` on a loopback port with one local worker, and sends jobs through
the student's own client (learning.workshops.remote), the reference solution as the upload:

- idle: five check jobs one after another; each one's wall time from upload to result.
- timing: three benchmark jobs of the reference (4096x4096 transposed, cold, 4 warps) and three
  direct runs of the same benchmark command outside the queue: the ratio direct / torch_softmax
  of each, and how far the queue's median is from the direct runs' median.
- flood: twenty check jobs from the ten students at once: how many finished, none lost, and
  whether any two ran at once (from the jobs' start and end times in the course's database).
- cell: the solution and a copy-first solution autograded in a scratch course of their own (the
  timing cell's student/reference ratio on each hidden shape, from its record), then each of
  the two submitted notebooks and the course's reference sent to the queue as benchmark jobs
  on the same shapes and view (transposed, cold, num_warps 4, the function's default): the
  queue's ratio is the notebook's median time over the reference's, and its gap to the
  cell's, per shape; beside it, the ratio the course's own timing in each job found
  (the receipt's "verified" fact, on its two shapes) where a shape is the cell's too.
- hog: a benchmark job whose upload also keeps the GPU busy from a thread of its own, sent at
  the same moment as an honest benchmark job: the honest ratio against the timing phase's spread.

Writes OUT/queue_trial.json and prints a table last. Needs a CUDA GPU for timing and hog.
"""

from __future__ import annotations

import argparse
import base64
import csv
import io
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from grader import course  # noqa: E402
from grader.grading import timing_record  # noqa: E402
from grader.zoo.bug import COPY_FIRST  # noqa: E402
from learning.workshops import remote  # noqa: E402

STUDENTS = [f"s{i:02d}" for i in range(1, 11)]
REFERENCE = REPO / "grader" / "reference.py"
GRID = {"shapes": "4096x4096", "layouts": "transpose", "modes": "cold", "warps": "4"}
HOG = """
import threading, time, torch
def _hog():
    a = torch.randn(8192, 8192, device="cuda")
    end = time.monotonic() + 120
    while time.monotonic() < end:
        a = (a @ a).clamp_(-1, 1)
threading.Thread(target=_hog, daemon=True).start()
"""
"""Appended to the reference: a thread that keeps the GPU busy while the job runs."""


def python(*args: str, cwd: Path, **kwargs) -> subprocess.CompletedProcess:
    done = subprocess.run(
        [sys.executable, *args], cwd=cwd, capture_output=True, text=True, **kwargs
    )
    if done.returncode:
        raise SystemExit(f"{' '.join(args)} failed:\n{done.stdout[-2000:]}\n{done.stderr[-3000:]}")
    return done


def make_course(where: Path) -> tuple[Path, dict[str, str]]:
    """A scratch course with ten students and their tokens."""
    root = where / "course"
    python("-m", "grader.make_course", str(root), cwd=where)
    roster = "id,first_name,last_name\n" + "".join(f"{s},Student,{s}\n" for s in STUDENTS)
    (root / "roster.csv").write_text(roster)
    python("-m", "nbgrader", "db", "student", "import", "roster.csv", cwd=root)
    python("-m", "grader.queue", "tokens", "--course", ".", cwd=root)
    with (root / "queue_tokens.csv").open() as fh:
        return root, {row["student_id"]: row["token"] for row in csv.DictReader(fh)}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def serve(root: Path, port: int) -> subprocess.Popen:
    """The service with one local worker; returns once /api/health answers."""
    command = [
        sys.executable, "-m", "grader.queue", "serve", "--course", ".", "--port", str(port),
        "--workers", "1", "--jobs-per-student", "2", "--jobs-per-hour", "1000",
    ]  # fmt: skip
    log = open(root / "serve.log", "w")  # noqa: SIM115 (open for the server's life)
    server = subprocess.Popen(command, cwd=root, stdout=log, stderr=subprocess.STDOUT)
    for _ in range(300):
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                return server
        except OSError:
            time.sleep(0.2)
    raise SystemExit(f"the service did not start: {(root / 'serve.log').read_text()[-2000:]}")


def client(port: int, token: str) -> remote.Client:
    return remote.Client(remote.Queue(f"http://127.0.0.1:{port}", token, "trial"))


def job(port: int, token: str, kind: str, impl: Path, options: dict) -> tuple[float, dict]:
    """Submit, wait and fetch one job: (seconds from upload to result, its answer)."""
    started = time.monotonic()
    queue = client(port, token)
    body = {
        "kind": kind,
        "op": "strided_softmax",
        "filename": impl.name,
        "content_b64": base64.b64encode(impl.read_bytes()).decode(),
        "options": options,
    }
    number = str(queue.call("POST", "/api/jobs", body)["id"])
    status = remote.wait(queue, number, remote.Progress(number, io.StringIO()))
    if status["state"] != "done":
        return time.monotonic() - started, {"failed": status.get("error")}
    answer = queue.call("GET", f"/api/jobs/{number}/result")
    return time.monotonic() - started, answer


def ratio(results: dict) -> float:
    """direct / torch_softmax, median times, of the trial's one configuration."""
    rows = {
        r["variant"]: r["median_ms"] for r in results["rows"] if r.get("num_warps") in (4, None)
    }
    return rows["direct"] / rows["torch_softmax"]


def idle(port: int, tokens: dict) -> dict:
    seconds = [job(port, tokens["s01"], "check", REFERENCE, {})[0] for _ in range(5)]
    return {"check_seconds": seconds, "median_s": statistics.median(seconds)}


def timing(port: int, tokens: dict, where: Path) -> dict:
    queued, seconds = [], []
    for _ in range(3):
        spent, answer = job(port, tokens["s02"], "benchmark", REFERENCE, GRID)
        seconds.append(spent)
        queued.append(ratio(answer["result"]))
    direct = []
    for i in range(3):
        out = where / f"direct-{i}.json"
        flags = [f"--{k}={v}" for k, v in GRID.items()]
        python(
            "-m", "learning.workshops.benchmark", "--op", "strided_softmax",
            f"--impl={REFERENCE}", *flags, f"--output={out}", cwd=where,
        )  # fmt: skip
        direct.append(ratio(json.loads(out.read_text())))
    gap = abs(statistics.median(queued) / statistics.median(direct) - 1)
    return {"benchmark_seconds": seconds, "queue": queued, "direct": direct, "gap": gap}


def direct_ms(results: dict) -> dict[str, float]:
    """The median time of the `direct` row at num_warps 4, by shape."""
    return {
        f"{r['rows']}x{r['cols']}": r["median_ms"]
        for r in results["rows"]
        if r["variant"] == "direct" and r.get("num_warps") == 4
    }


def cell(port: int, tokens: dict, where: Path) -> dict:
    root = course.new_course(where / "graded")
    made = {"solution": (), "copy-first": COPY_FIRST}
    for student, edits in made.items():
        course.submit(root, student, course.solved_notebook(root, edits))
    run = course.autograde(root)
    graded = {
        student: timing_record.load(
            root / "autograded" / student / course.ASSIGNMENT / timing_record.SIDECAR
        )
        for student in made
    }
    shapes = sorted({s.shape for record in graded.values() for s in record.shapes})
    grid = {**GRID, "shapes": ",".join(shapes)}
    uploads = {s: root / "submitted" / s / course.ASSIGNMENT / course.NOTEBOOK for s in made}
    uploads["reference"] = REFERENCE
    times: dict[str, dict[str, list[float]]] = {}
    verified: dict[str, dict[str, list[float]]] = {}
    for name, upload in uploads.items():
        for _ in range(3):
            _, answer = job(port, tokens["s05"], "benchmark", upload, grid)
            for shape, ms in direct_ms(answer["result"]).items():
                times.setdefault(name, {}).setdefault(shape, []).append(ms)
            for timed in answer["receipt"]["verified"]["shapes"]:
                shape = f"{timed['rows']}x{timed['cols']}"
                verified.setdefault(name, {}).setdefault(shape, []).append(timed["ratio"])
    rows = []
    for student, record in graded.items():
        for shape in record.shapes:
            mine = statistics.median(times[student][shape.shape])
            queued = mine / statistics.median(times["reference"][shape.shape])
            course_timed = verified.get(student, {}).get(shape.shape)
            rows.append({
                "student": student, "shape": shape.shape, "cell_ratio": shape.ratio,
                "queue_ratio": queued, "gap": abs(queued / shape.ratio - 1),
                "verified_ratio": course_timed and statistics.median(course_timed),
                "cell_points": record.points, "cell_device": record.device,
            })  # fmt: skip
    return {"failed": list(run.failed), "rows": rows, "queue_ms": times, "verified": verified}


def flood(port: int, tokens: dict, root: Path) -> dict:
    answers: list[dict] = []
    threads = [
        threading.Thread(
            target=lambda t=tokens[s]: answers.append(job(port, t, "check", REFERENCE, {})[1])
        )
        for s in STUDENTS
        for _ in range(2)
    ]
    started = time.monotonic()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    import sqlite3

    with sqlite3.connect(root / "gradebook.db") as db:
        spans = sorted(
            db.execute(
                "SELECT started, finished FROM i1_queue_jobs "
                "WHERE kind='check' AND finished IS NOT NULL"
            )
        )
        states = dict(db.execute("SELECT state, count(*) FROM i1_queue_jobs GROUP BY state"))
    overlaps = sum(1 for a, b in zip(spans, spans[1:], strict=False) if b[0] < a[1])
    done = sum(1 for a in answers if a.get("exit_status") == 0)
    return {
        "jobs": len(threads),
        "done_ok": done,
        "states": states,
        "overlaps": overlaps,
        "wall_s": time.monotonic() - started,
    }


def hog(port: int, tokens: dict, where: Path) -> dict:
    hog_file = where / "hog.py"
    hog_file.write_text(REFERENCE.read_text() + HOG)
    out: dict[str, dict] = {}
    runs = [
        threading.Thread(
            target=lambda: out.__setitem__(
                "hog", job(port, tokens["s03"], "benchmark", hog_file, GRID)[1]
            )
        ),
        threading.Thread(
            target=lambda: out.__setitem__(
                "honest", job(port, tokens["s04"], "benchmark", REFERENCE, GRID)[1]
            )
        ),
    ]
    for thread in runs:
        thread.start()
        time.sleep(0.5)
    for thread in runs:
        thread.join()
    honest = ratio(out["honest"]["result"]) if "result" in out["honest"] else None
    course_timed = (out["honest"].get("receipt") or {}).get("verified") or {}
    return {
        "honest": honest,
        "honest_verified": [shape["ratio"] for shape in course_timed.get("shapes", [])],
        "hog_verified": (out["hog"].get("receipt") or {}).get("verified"),
        "hog_exit": out["hog"].get("exit_status"),
        "hog_failed": out["hog"].get("failed"),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--phases", default="idle,timing,cell,flood,hog")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    os.environ.setdefault("I1_COURSE_SECRET", os.urandom(32).hex())
    where = Path(tempfile.mkdtemp(prefix="queue-trial-"))
    root, tokens = make_course(where)
    port = free_port()
    server = serve(root, port)
    figures: dict = {}
    try:
        for phase in args.phases.split(","):
            began = time.monotonic()
            if phase == "idle":
                figures[phase] = idle(port, tokens)
            elif phase == "timing":
                figures[phase] = timing(port, tokens, where)
            elif phase == "flood":
                figures[phase] = flood(port, tokens, root)
            elif phase == "cell":
                figures[phase] = cell(port, tokens, where)
            elif phase == "hog":
                figures[phase] = hog(port, tokens, where)
            figures[phase]["phase_s"] = round(time.monotonic() - began, 1)
            print(phase, json.dumps(figures[phase]), flush=True)
    finally:
        server.terminate()
        server.wait(30)
        (args.out / "serve.log").write_text((root / "serve.log").read_text()[-20000:])
        (args.out / "queue_trial.json").write_text(json.dumps(figures, indent=1))
    print("\nphase   figure")
    for phase, data in figures.items():
        print(f"{phase:<7} {json.dumps(data)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
