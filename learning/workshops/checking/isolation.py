"""Run a submission's code in a child process, so its crashes and hangs are results.

A `Session` starts one child per submission, which loads the definitions once and then runs
job after job: the hidden cases of each op, the calls of each plain function. The child
computes; this side judges. Each case's input is built here and sent as data, and its
result is settled here from the output and storages the child sends back (`judge`): what
the child says of pass or fail can fail a case, never pass one. Everything read from the
child is bounded: a deadline per case that no event of the child's resets, one per session,
and caps on the size and number of its events. A segfault, a
fatal error, a hang or a GPU context lost to an illegal address fails the case that was
running, with its cause, and a fresh child picks up at the next case; a runaway allocation
fails at the child's memory limit. After a few crashes in one job the rest of its cases are
reported as not run, rather than paying a process start for each. Starting a child counts
against the session's budget too: its load waits no longer than the budget has left, and once
the budget or MAX_STARTS is spent no child starts and the cases left fail as not run, saying
why. Every report line is decoded by `untrusted.decoded` (JSON, an object, not too deep) and
every field is checked for its type before use: a report that is not what was asked for is
the submission's crash, with its cause. A case whose checks themselves raised fails as
`internal-error` (see `faults`), and the same child goes on.
"""

from __future__ import annotations

import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from learning.workshops.checking.cases import OPS, Case, CaseResult, Failure, Verdict
from learning.workshops.checking.exchange import TEXT_LIMIT, Inputs, build_inputs
from learning.workshops.checking.faults import internal_result
from learning.workshops.checking.judge import settle
from learning.workshops.checking.kernel_source import KernelSource, submission_kernels
from learning.workshops.checking.pipes import Worker, Wrap
from learning.workshops.checking.replay import CleanRoom, replayed_result

CHILD_MODULE = "learning.workshops.checking.child"
"""The module each child runs (`python -m`); see its docstring for the protocol."""
MAX_CRASHES = 3
LOAD_TIMEOUT_S = 180.0
MAX_STARTS = 12
"""Children one session may start: its first, and one after each crash or hang. An honest
submission needs one (a crashing kernel a few more); one that dies in every call stops here,
its remaining cases failed as not run, rather than paying a start (up to LOAD_TIMEOUT_S) for
each: such a child once got 50 starts and 205-236 s for one submission against 5 s."""
MEMORY_LIMIT_BYTES = 8 * 1024**3
"""Host memory a child may map for its heap: the cases need well under 1 GiB, and a
runaway allocation fails at 8 GiB with an error rather than making the machine swap."""
EVENTS_PER_CASE = 8
"""Events a job may send per case (start, result, a few notes) before it counts as a flood."""
MAX_NOTES = 10
"""Notes kept from one job (what the interpreter did unlike a GPU), each TEXT_LIMIT long."""


@dataclass
class IsolatedRun:
    """The results of running cases in child processes."""

    results: list[CaseResult] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # what the interpreter did unlike a GPU
    load_error: str | None = None
    mode: str = "unknown"
    device: str = "unknown"


class CallsFailed(Exception):
    """A calls job got no answers: the definitions did not load, or the child crashed or hung."""


class Session:
    """A child process serving one submission's jobs, restarted after a crash; `wrap` runs
    it another way (`impl` is then a path as the child sees it). A definitions file that does
    not load is that for every job: the session answers each with the same load error."""

    def __init__(
        self,
        impl: Path,
        wrap: Wrap | None = None,
        budget_s: float | None = None,
        kernels: KernelSource | None = None,
        room_wrap: Wrap | None = None,
    ) -> None:
        self.impl, self.wrap = impl, wrap or list
        self.child: _Child | None = None
        self.load_error: str | None = None
        self.mode = self.device = "unknown"
        self.ends = None if budget_s is None else time.monotonic() + budget_s
        """When every job of this session must be done, child starts included (None: no
        limit but each case's and each load's)."""
        self.starts = 0
        kernels = kernels if kernels is not None else submission_kernels(Path(impl))
        self.room = CleanRoom(kernels, room_wrap or self.wrap, self.ends)
        """Where each case the data passed is replayed (`replay`): `kernels` is the
        submission's kernel source, read by the caller where `impl` is a path only the
        child sees; `room_wrap` runs the clean room (default: as the child)."""

    def __enter__(self) -> Session:
        return self

    def __exit__(self, *_) -> None:
        self.close()

    def close(self) -> None:
        """End the child and the clean room, if they are running."""
        self._end_child()
        self.room.close()

    def run_cases(
        self, op: str, function: str, cases: list[Case], seed: int, case_timeout_s: float
    ) -> IsolatedRun:
        """Every case of `cases` run against `function`: each has a result, a case that
        crashed, hung or never ran a failed one."""
        run = IsolatedRun()
        kind = OPS[op].kind
        inputs = {id(c): build_inputs(kind, c, seed) for c in cases}
        remaining, crashes = list(cases), 0
        while remaining:
            spent = self.spent() if self.child is None and self.load_error is None else None
            if spent is not None:  # no child may start: none of these runs
                why = f"not run: {spent}"
                run.results.extend(_failed(c, Failure.TIMEOUT, why) for c in remaining)
                break
            job = {"op": op, "function": function, "seed": seed}
            job["cases"] = [{**asdict(c), "inputs": inputs[id(c)].to_wire()} for c in remaining]
            judged = [(c, inputs[id(c)]) for c in remaining]
            done, stop = self._run(job, run, case_timeout_s, judged=judged)
            remaining = remaining[done:]
            if run.load_error or stop is None or not remaining:
                break
            crashes += 1
            run.results.append(CaseResult.of(remaining[0], stop))
            remaining = remaining[1:]
            if crashes >= MAX_CRASHES:
                why = f"not run, the implementation crashed {crashes} times already"
                run.results.extend(_failed(c, stop.failure, why) for c in remaining)
                break
        return run

    def call(self, function: str, inputs: list[dict], timeout_s: float) -> list[dict]:
        """The student's `function` called on each input: each call's answer (`calls`).
        CallsFailed, saying why, when there are none."""
        run = IsolatedRun()
        answers: list[list[dict]] = []
        _, stop = self._run({"function": function, "calls": inputs}, run, timeout_s, answers)
        if run.load_error:
            raise CallsFailed(f"the notebook's definitions do not load: {run.load_error}")
        if stop is not None or not answers:
            why = stop.text if stop is not None else "it gave no answer"
            raise CallsFailed(f"{function} could not be called: {why}")
        if len(answers[0]) != len(inputs):
            why = f"its process gave {len(answers[0])} answers to {len(inputs)} calls"
            raise CallsFailed(f"{function} could not be called: {why}")
        return answers[0]

    def _run(
        self,
        job: dict,
        run: IsolatedRun,
        timeout_s: float,
        answers: list | None = None,
        judged: list[tuple[Case, Inputs]] = (),
    ):
        """Send `job` to the child (started when there is none) and read its events into
        `run` until it is done: how many cases finished, and the crash, hang or flood (a
        Verdict) that stopped it, or None. Each case of `judged` (a case and the input sent
        for it) is settled from the data its result carries."""
        if self.load_error is None and self.child is None:
            if judged:
                self.room.prepare()  # it loads beside the child
            stop = self._start()
            if stop is not None:
                return 0, stop
        if self.load_error is not None:
            run.load_error = self.load_error
            return 0, None
        run.mode, run.device = self.mode, self.device
        child, finished = self.child, 0
        child.send(job)
        events_left = EVENTS_PER_CASE * (len(judged) + 1)
        deadline = self._deadline(timeout_s)  # moved on by a result only, never by a start
        unreplayed: list[tuple[int, Case, object]] = []
        while True:
            event = child.events.next(deadline)
            events_left -= 1
            stop = self._stopped(event, events_left, timeout_s)
            if stop is None:
                try:
                    kind = event.pop("event", None)
                    if kind == "done":
                        self._replay(job, run, unreplayed)
                        return finished, None
                    if kind in ("result", "internal-error"):
                        if finished >= len(judged):
                            raise ValueError("a result for a case it was not sent")
                        case = judged[finished][0]
                        run.results.append(_result(kind, event, OPS[job["op"]], *judged[finished]))
                        unreplayed.append((len(run.results) - 1, case, event.get("seen")))
                        finished += 1
                        deadline = self._deadline(timeout_s)
                    else:
                        _other(kind, event, run, answers)
                except (KeyError, TypeError, ValueError, AttributeError) as exc:
                    stop = Verdict(Failure.CRASH, f"its report to the checker was garbled ({exc})")
            if stop is not None:
                self._end_child()
                self._replay(job, run, unreplayed)
                return finished, stop

    def _replay(self, job: dict, run: IsolatedRun, unreplayed: list) -> None:
        """Replay in the clean room each case of `job` the data passed (`replayed_result`),
        once the child is idle or gone: a child still running its next cases could hold the
        GPU's memory that the room needs (a student's runaway allocation, say)."""
        for index, case, seen in unreplayed:
            run.results[index] = replayed_result(
                OPS[job["op"]], case, seen, run.results[index], self.room
            )

    def _end_child(self) -> None:
        """End the child (the clean room stays: the cases the child finished replay in it)."""
        if self.child is not None:
            self.child.close()
            self.child = None

    def _start(self) -> Verdict | None:
        """Start a child, its load bounded by what is left of the budget: None when one runs
        (or the definitions do not load: `load_error`), else why none does."""
        spent = self.spent()
        if spent is None:
            self.starts += 1
            self.child = _Child.start(self, self._deadline(LOAD_TIMEOUT_S))
            if self.child is not None or self.load_error is not None:
                return None
            spent = self.spent() or "its process did not start"
        return Verdict(Failure.TIMEOUT, f"not run: {spent}")

    def spent(self) -> str | None:
        """Why no child may start any more (the budget is spent, or MAX_STARTS), or None."""
        if self.out_of_time():
            return "the submission's time for its checks ran out"
        if self.starts >= MAX_STARTS:
            return f"its process was started {self.starts} times already, crashing or hanging"
        return None

    def out_of_time(self) -> bool:
        """Whether the session's budget is spent."""
        return self.ends is not None and time.monotonic() >= self.ends

    def _deadline(self, timeout_s: float) -> float:
        """When the case now running must be done: `timeout_s` from now, within the session's."""
        deadline = time.monotonic() + timeout_s
        return deadline if self.ends is None else min(deadline, self.ends)

    def _stopped(self, event: object, events_left: int, timeout_s: float) -> Verdict | None:
        """Why reading this child stops here (hung, gone, garbled, flooding), or None."""
        if isinstance(event, dict):
            if events_left < 0:
                return Verdict(Failure.CRASH, "it flooded its report to the checker with events")
            return None
        if event is None:
            if self.out_of_time():
                return Verdict(Failure.TIMEOUT, "the submission's time for its checks ran out")
            return Verdict(Failure.TIMEOUT, f"no result after {timeout_s:.0f} s")
        if event == "eof":
            return Verdict(Failure.CRASH, self.child.cause())
        return Verdict(Failure.CRASH, f"its report to the checker was {event}")


class _Child(Worker):
    """One running child that loaded the session's submission."""

    @classmethod
    def start(cls, session: Session, deadline: float) -> _Child | None:
        """A child loading `session`'s submission, loaded by `deadline`; None, with the
        session's load_error set when it does not load (left unset when the session's
        budget ran out first)."""
        argv = [sys.executable, "-m", CHILD_MODULE, str(session.impl)]
        child = cls.spawn(argv, session.wrap, MEMORY_LIMIT_BYTES)
        event = child.events.next(deadline)
        kind = event.get("event") if isinstance(event, dict) else None
        if kind == "loaded" and _texts(event, "mode", "device"):
            session.mode, session.device = event["mode"][:TEXT_LIMIT], event["device"][:TEXT_LIMIT]
            return child
        if kind == "load-error" and _texts(event, "detail"):
            session.load_error = event["detail"][:TEXT_LIMIT]
        elif isinstance(event, dict):
            session.load_error = f"its report was garbled while {session.impl} loaded"
        elif event is None and session.out_of_time():
            pass  # the session's time ran out, not the load's: no job runs now anyway
        elif event is None:
            session.load_error = f"{session.impl} took over {LOAD_TIMEOUT_S:.0f} s to load."
        else:
            session.load_error = f"the child process died loading {session.impl}: {child.cause()}"
        child.close()
        return None


def _result(kind: str, event: dict, op, case: Case, inputs: Inputs) -> CaseResult:
    """A case's result, settled here from the data of the child's `result` event; an
    `internal-error` event (the child's checks raised) is that case's internal error."""
    if kind == "internal-error":
        if not _texts(event, "detail", "where"):
            raise ValueError("an internal-error event without its detail and place as text")
        text = f"{event['detail']} at {event['where']}"[:TEXT_LIMIT]
        return internal_result(case, text)
    child = CaseResult.from_event(event)
    return settle(op, case, inputs, child, event.get("seen"))


def _other(kind: str, event: dict, run: IsolatedRun, answers: list | None) -> None:
    """An event that is not a case's result: a missing function, a calls job's answers, a
    note (kept, bounded), a start (nothing to do)."""
    if kind in ("missing", "note") and not _texts(event, "detail" if kind == "missing" else "text"):
        raise ValueError(f"a {kind} event without its text")
    if kind == "missing":
        run.load_error = event["detail"][:TEXT_LIMIT]
    elif kind == "answers" and answers is not None:
        answers.append(_answers(event.get("answers")))
    elif kind == "note":
        note = event["text"][:TEXT_LIMIT]
        if note not in run.notes and len(run.notes) < MAX_NOTES:
            run.notes.append(note)
    elif kind != "start":
        raise ValueError(f"an event of unknown kind {str(kind)[:40]!r}")


def _texts(event: dict, *keys: str) -> bool:
    """Whether each of `keys` is in `event` and a string."""
    return all(isinstance(event.get(key), str) for key in keys)


def _answers(answers: object) -> list[dict]:
    """A calls job's answers as `calls.answer_calls` makes them: a list of {"value": ...} or
    {"raised": name, "message": text}; ValueError when they are not."""
    if not isinstance(answers, list) or not all(isinstance(a, dict) for a in answers):
        raise ValueError("answers that are not a list of objects")
    for answer in answers:
        if not (_texts(answer, "raised", "message") if "raised" in answer else "value" in answer):
            raise ValueError("an answer with neither a value nor what was raised, as text")
    return answers


def _failed(case: Case, failure: Failure, why: str) -> CaseResult:
    return CaseResult.of(case, Verdict(failure, why))
