"""The board's figures, timed by the course: a benchmark job's upload against the course's
reference through grading's own timing servers (`grader.grading.gpu_timing`).

The student's benchmark command times in the student's own process, as a local run does, so
its results file is the student's to trust and no more. This second part is the course's: a
timing server loads the upload in a fresh sandbox of grading's (`sandboxed`: bubblewrap, the
upload alone in /work, cgroup limits) and never has the reference; the reference's server
never has the upload; this process owns the clock, draws every input when its call starts,
compares every output's checksum with the reference's, subtracts the harness and sets the
copy of the same bytes beside it, exactly as the timing cell does. What it gives, per shape,
goes into the receipt's "verified" fact, and the class board reads only that.

Decided here (the spec is silent): the shapes are the workshop's two (SHAPES), the same for
everyone, so boards compare like with like; only the forward softmax has a timing server, so
a backward job has no verified part and no place on the board.
"""

from __future__ import annotations

import functools
import secrets

from grader.grading import gpu_timing
from grader.isolation.cgroups import sandbox_cgroups
from grader.isolation.sandbox import sandboxed
from grader.isolation.scratch import scratch

SHAPES = ((4096, 4096), (65536, 512))
OP = "strided_softmax"
KEPT = ("rows", "cols", "student_ms", "reference_ms", "copy_ms", "ratio", "correct", "reason")
"""What the receipt keeps of each timed shape (`grader.grading.timing_record.ShapeTiming`)."""


def verified_timing(content: bytes, name: str, job_id: str) -> dict:
    """The upload (`content`, saved as `name`) timed against the reference on SHAPES:
    {"device", "shapes": [{KEPT}], "error"}, "error" saying why nothing was timed. The
    caller holds the GPU lock."""
    with scratch(prefix="i1-queue-timing-") as work, sandbox_cgroups() as cgroups:
        (work / name).write_bytes(content)
        (work / name).chmod(0o644)
        wrap = functools.partial(sandboxed, work=work, cgroups=cgroups)
        key = f"queue/{job_id}/{secrets.token_hex(8)}"  # the inputs: unknown until each call
        sandbox = gpu_timing.Sandbox(wrap, f"/work/{name}", key)
        try:
            record, why = gpu_timing.measure(sandbox, SHAPES)
        except Exception as exc:  # CheckerFault included: the course's side failed
            record, why = None, f"the course's timing failed: {type(exc).__name__}: {exc}"
    if record is None:
        return {"device": None, "shapes": [], "error": (why or "nothing was timed").splitlines()[0]}
    shapes = [{key: shape.get(key) for key in KEPT} for shape in record["shapes"]]
    return {"device": record["device"], "shapes": shapes, "error": ""}
