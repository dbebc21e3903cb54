"""Did the kernel compute it? Replay its launches in a clean room, on values the child never saw.

The child that runs a submission reports, beside each call's output, the kernel launches the
call made (`launch_record`): data, like everything it sends. A case whose output the parent
judged right is then confirmed here: its launches are made again, in order, in a fresh
process (`clean_room`) that loads only the submission's kernels (`kernel_source`), on a new
draw of the case's input (the same view, other values) and on the other buffers as the child
found them before their first launch when that was one value throughout (a NaN-filled or
zeroed allocation), else on NaN. The replayed output must be right too, judged by the same
`judge`. So a function that got its values from torch, from Python in a heuristic or a class
body, or from a buffer it filled itself fails, whatever it did around its launches; one that
launches nothing fails; a correct kernel of any decomposition passes, since its grid and
arguments are its own.

Where the replay cannot run (a kernel outside what the clean room loads, an argument it
cannot rebuild, too many launches, a room that crashed or ran out of time), the case is
neither passed nor failed on the kernel's merits: it is `held`, with the reason, for an
instructor to review.
"""

from __future__ import annotations

import math
import secrets
import sys
import time
from dataclasses import dataclass, replace

from learning.workshops.checking.exchange import (
    WIRE_DTYPES,
    Inputs,
    build_inputs,
    tensor_to_wire,
    view_of,
)
from learning.workshops.checking.judge import judge
from learning.workshops.checking.kernel_source import KernelSource
from learning.workshops.checking.launch_record import INTEGER_DTYPES, MAX_LAUNCHES
from learning.workshops.checking.pipes import Worker, Wrap
from learning.workshops.checking.records import Case, CaseResult, Failure, Verdict

CLEAN_ROOM_MODULE = "learning.workshops.checking.clean_room"
REPLIES = ("replayed", "replay-error")
LOAD_TIMEOUT_S = 120.0
MEMORY_LIMIT_BYTES = 8 * 1024**3
MAX_BUFFER_BYTES = 64 * 1024**2
"""The largest buffer a replay allocates: no case's buffer comes near it."""
MAX_PROGRAMS = 1 << 22
MAX_STARTS = 3
"""Clean rooms started per session; after that every case left is held."""
ELEMENT_BYTES = {
    "float32": 4,
    "float16": 2,
    "bfloat16": 2,
    "float64": 8,
    "int32": 4,
    "int64": 8,
    "int16": 2,
    "int8": 1,
    "uint8": 1,
    "bool": 1,
}
"""The dtypes a replayed tensor argument may have, with their element sizes."""
HOLD = "held for your instructor's review: the grader could not replay your kernel launches ({})"
NOT_FROM_KERNEL = (
    "your kernel launches, made again by the grader on new values of the same view, gave "
    "{}; so the values your function returned did not all come from its kernels"
)


class Unreplayable(ValueError):
    """The launches a child reported cannot be replayed; the message says why."""


@dataclass(frozen=True)
class Call:
    """One call, planned for the clean room: what it sends, and the fresh input it uses."""

    plan: dict
    inputs: Inputs
    in_place: bool


def replayed_result(
    op, case: Case, seen: object, result: CaseResult, room: CleanRoom
) -> CaseResult:
    """`result` (which the data passed) confirmed by replaying its calls' launches: kept
    when they give right values too, else failed (`not-from-kernel`, `no-kernel`) or held."""
    if not result.passed or case.bad_input or not case.rows:
        return result
    verdict = confirm(op, case, seen, room)
    if verdict is None:
        return result
    return CaseResult.of(case, verdict, result.launches, case.cols)


def confirm(op, case: Case, seen: object, room: CleanRoom) -> Verdict | None:
    """None when every call of `case` that returned a tensor replays to right values."""
    calls = seen.get("calls") if isinstance(seen, dict) else None
    if not isinstance(calls, list):
        return _held("the report of the calls is not readable data")
    single = replace(case, repeat=False)
    planned = []
    for call in calls:
        if not isinstance(call, dict) or "tensor" not in (call.get("returned") or {}):
            continue  # a raise, or no tensor: the data's verdict already stands on it
        try:
            planned.append(plan(op, single, call, room.kernels))
        except Unreplayable as exc:
            return _held(str(exc))
        except NoLaunch as exc:
            return Verdict(Failure.NO_KERNEL, str(exc))
    for planned_call, left in zip(planned, room.replay([c.plan for c in planned]), strict=True):
        if isinstance(left, str):
            return _held(left)
        left["in_place"] = planned_call.in_place
        verdict = judge(op, single, planned_call.inputs, {"calls": [left]})
        if verdict.failure is not None:
            return _wrong(verdict, planned_call.plan)
    return None


def _held(why: str) -> Verdict:
    return Verdict(Failure.HELD, HOLD.format(why))


def held_reason(text: str) -> str:
    """The reason a held case's verdict text gives, without the words around it."""
    head, tail = HOLD.split("{}")
    return text.removeprefix(head).removesuffix(tail)


def _wrong(verdict: Verdict, plan: dict) -> Verdict:
    """The replay's wrong values; held instead when a buffer the child filled itself (not
    with one value) may be why: the clean room cannot know what that content should be."""
    made = [b["role"] for b in plan["buffers"] if "storage" not in b and b["fill"] is None]
    made = [role for role in made if role != "output"]
    if made:
        why = (
            f"their output was wrong, and they read {made[0]}, a buffer your Python filled "
            "before the first launch (not with one value throughout), whose content the "
            "replay cannot know"
        )
        return _held(why)
    return Verdict(Failure.NOT_FROM_KERNEL, NOT_FROM_KERNEL.format(verdict.text))


class NoLaunch(Exception):
    """The call launched no kernel, or none that wrote what it returned."""


def plan(op, case: Case, call: dict, kernels: KernelSource) -> Call:
    """The clean room's plan for one call the child reported, on a fresh draw of the case's
    input; Unreplayable or NoLaunch, saying why, when there is none."""
    record = call.get("launches")
    if not isinstance(record, dict):
        raise Unreplayable("no report of the call's launches came with its output")
    if _integer(record.get("overflow"), 0, sys.maxsize):
        raise Unreplayable(f"the call made more than {MAX_LAUNCHES} launches")
    launches = record.get("launches")
    if not isinstance(launches, list) or len(launches) > MAX_LAUNCHES:
        raise Unreplayable("the report of the call's launches is not readable data")
    if not launches:
        raise NoLaunch("no Triton kernel was launched; the values came from elsewhere")
    fresh = build_inputs(op.kind, case, secrets.randbelow(2**31))
    roles = {f"input{i}": s for i, s in enumerate(fresh.storages)}
    buffers = _buffers(record.get("buffers"), roles)
    output = _output(record.get("output"), buffers, roles)
    used = set()
    planned = [_launch(launch, kernels, buffers, roles, used) for launch in launches]
    if output["buffer"] not in used:
        raise NoLaunch("the tensor your function returned was never passed to a kernel launch")
    sent = [{"role": r, "storage": tensor_to_wire(s)} for r, s in roles.items()]
    sent += [{"role": r, **facts} for r, facts in buffers.items() if r not in roles]
    in_place = _in_place(output, case, fresh)
    return Call({"buffers": sent, "launches": planned, "output": output}, fresh, in_place)


def _integer(value: object, low: int, high: int) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or not low <= value <= high:
        raise Unreplayable("the report of the call's launches is not readable data")
    return value


def _buffers(reported: object, roles: dict) -> dict[str, dict]:
    """Each reported buffer that is not an input: its size and fill, checked."""
    if not isinstance(reported, dict) or len(reported) > 64:
        raise Unreplayable("the report of the call's buffers is not readable data")
    buffers = {}
    for role, facts in reported.items():
        if not isinstance(role, str) or not isinstance(facts, dict):
            raise Unreplayable("the report of the call's buffers is not readable data")
        nbytes = _integer(facts.get("nbytes"), 0, MAX_BUFFER_BYTES)
        if role in roles:
            storage = roles[role]
            if nbytes != storage.numel() * storage.element_size():
                raise Unreplayable(f"{role} was reported with {nbytes} bytes")
            continue
        buffers[role] = {"nbytes": nbytes, "fill": _fill(facts.get("fill"), nbytes)}
    return buffers


def _fill(fill: object, nbytes: int) -> dict | None:
    if fill is None:
        return None
    if not isinstance(fill, dict):
        raise Unreplayable("a buffer's fill is not readable data")
    size = _integer(fill.get("size"), 1, 8)
    if size not in INTEGER_DTYPES or nbytes % size:
        raise Unreplayable("a buffer's fill does not fit it")
    bits = _integer(fill.get("bits"), -(2 ** (8 * size - 1)), 2 ** (8 * size) - 1)
    return {"bits": bits, "size": size}


def _output(reported: object, buffers: dict, roles: dict) -> dict:
    """Where the returned tensor lies: its buffer, offset, dtype, shape and strides."""
    if not isinstance(reported, dict):
        raise Unreplayable("the report of the returned tensor is not readable data")
    role = reported.get("buffer")
    dtype = reported.get("dtype")
    if dtype not in WIRE_DTYPES:
        raise Unreplayable(f"the function returned a tensor of dtype {str(dtype)[:40]}")
    if role not in roles and role not in buffers:
        nbytes = _integer(reported.get("nbytes"), 0, MAX_BUFFER_BYTES)
        buffers[role if isinstance(role, str) else "output"] = {"nbytes": nbytes, "fill": None}
        role = role if isinstance(role, str) else "output"
    shape = [_integer(n, 0, 1 << 31) for n in _list(reported.get("shape"))]
    stride = [_integer(n, 0, 1 << 40) for n in _list(reported.get("stride"))]
    offset = _integer(reported.get("offset"), 0, MAX_BUFFER_BYTES)
    size = ELEMENT_BYTES[dtype]
    if len(shape) != len(stride) or offset % size:
        raise Unreplayable("the returned tensor's layout is not readable data")
    last = offset // size + sum((n - 1) * s for n, s in zip(shape, stride, strict=True) if n)
    if math.prod(shape) and (last + 1) * size > _nbytes(role, buffers, roles):
        raise Unreplayable("the returned tensor lies past the end of its buffer")
    return {"buffer": role, "offset": offset, "dtype": dtype, "shape": shape, "stride": stride}


def _list(value: object) -> list:
    if not isinstance(value, list) or len(value) > 8:
        raise Unreplayable("the report of the call's launches is not readable data")
    return value


def _nbytes(role: str, buffers: dict, roles: dict) -> int:
    if role in roles:
        return roles[role].numel() * roles[role].element_size()
    return buffers[role]["nbytes"]


def _launch(launch: object, kernels: KernelSource, buffers: dict, roles: dict, used: set) -> dict:
    """One reported launch, checked: a kernel the clean room has, a grid, its arguments."""
    if not isinstance(launch, dict):
        raise Unreplayable("the report of a launch is not readable data")
    name = launch.get("kernel")
    if not isinstance(name, str):
        raise Unreplayable("the report of a launch is not readable data")
    if "unreadable" in launch:
        raise Unreplayable(f"a launch of {name[:80]} could not be recorded")
    why = kernels.why_not(name)
    if why:
        raise Unreplayable(why)
    grid = [_integer(g, 0, MAX_PROGRAMS) for g in _list(launch.get("grid"))]
    if not 1 <= len(grid) <= 3 or math.prod(grid) > MAX_PROGRAMS:
        raise Unreplayable(f"{name} was launched on more programs than the clean room runs")
    args = launch.get("args")
    options = launch.get("options")
    if not isinstance(args, dict) or not isinstance(options, dict) or len(args) > 64:
        raise Unreplayable(f"the report of a launch of {name} is not readable data")
    checked = {}
    for param, value in args.items():
        if not isinstance(param, str) or not param.isidentifier():
            raise Unreplayable(f"the report of a launch of {name} is not readable data")
        checked[param] = _argument(value, name, param, buffers, roles, used, 0)
    kept = {}
    for option, value in options.items():
        if not isinstance(option, str) or not option.isidentifier():
            raise Unreplayable(f"the report of a launch of {name} is not readable data")
        if value is not None and not isinstance(value, bool | int | float | str):
            raise Unreplayable(f"{name} was launched with the option {option} as an object")
        kept[option] = value
    return {"kernel": name, "grid": grid, "args": checked, "options": kept}


def _argument(
    value: object, kernel: str, param: str, buffers: dict, roles: dict, used: set, depth: int
) -> dict:
    """One argument as the clean room rebuilds it; Unreplayable for what it cannot."""
    if not isinstance(value, dict) or len(value) != 1 or depth > 2:
        raise Unreplayable(f"the report of {kernel}'s argument {param} is not readable data")
    [(kind, data)] = value.items()
    if kind == "value" and (data is None or isinstance(data, bool | int | float | str)):
        return value
    if kind in ("tl_dtype", "torch_dtype") and isinstance(data, str) and data.isidentifier():
        return value
    if kind == "tuple" and isinstance(data, list) and len(data) <= 16:
        args = [_argument(v, kernel, param, buffers, roles, used, depth + 1) for v in data]
        return {"tuple": args}
    if kind == "tensor" and isinstance(data, dict):
        return {"tensor": _tensor(data, kernel, param, buffers, roles, used)}
    if kind == "unsupported":
        raise Unreplayable(f"{kernel} was passed a {str(data)[:40]} as {param}")
    raise Unreplayable(f"the report of {kernel}'s argument {param} is not readable data")


def _tensor(data: dict, kernel: str, param: str, buffers: dict, roles: dict, used: set) -> dict:
    role, dtype = data.get("buffer"), data.get("dtype")
    if role not in roles and role not in buffers:
        raise Unreplayable(f"{kernel}'s argument {param} lies in no buffer the call reported")
    if dtype not in ELEMENT_BYTES:
        raise Unreplayable(f"{kernel}'s argument {param} is a tensor of dtype {str(dtype)[:40]}")
    offset = _integer(data.get("offset"), 0, _nbytes(role, buffers, roles))
    if offset % ELEMENT_BYTES[dtype]:
        raise Unreplayable(f"{kernel}'s argument {param} does not start on an element")
    used.add(role)
    return {"buffer": role, "offset": offset, "dtype": dtype}


def _in_place(output: dict, case: Case, fresh: Inputs) -> bool:
    """Whether the returned tensor is the input view itself (the in-place exercise)."""
    if output["buffer"] != "input0" or not fresh.storages:
        return False
    x = view_of(fresh.storages[0], case.geometry)
    return (
        output["offset"] == x.storage_offset() * x.element_size()
        and output["shape"] == list(x.shape)
        and output["stride"] == list(x.stride())
    )


class CleanRoom:
    """The clean room of one session: started when the first case needs it, restarted after
    a crash (at most MAX_STARTS times), within the session's deadline (`ends`)."""

    def __init__(self, kernels: KernelSource, wrap: Wrap, ends: float | None) -> None:
        self.kernels, self.wrap, self.ends = kernels, wrap, ends
        self.worker: Worker | None = None
        self.starting: Worker | None = None  # started, not yet heard from
        self.starts = 0
        self.failed: str | None = None  # why no room can start: every replay is held

    def replay(self, plans: list[dict], timeout_s: float = 120.0) -> list[dict | str]:
        """What each planned call left (`exchange.Observation`'s call), or why it did not."""
        if not plans:
            return []
        room = self._room()
        if room is None:
            return [self.failed] * len(plans)
        room.send({"calls": plans})
        left: list[dict | str] = []
        deadline = self._deadline(timeout_s)
        while len(left) < len(plans):
            event = room.events.next(deadline)
            if not isinstance(event, dict) or event.get("event") not in (
                "replayed",
                "replay-error",
            ):
                why = self._stopped(event)
                self.close()
                return left + [why] * (len(plans) - len(left))
            if event["event"] == "replayed" and isinstance(event.get("call"), dict):
                left.append(event["call"])
            else:
                left.append(f"a launch raised {str(event.get('detail'))[:300]}")
            deadline = self._deadline(timeout_s)
        if room.events.next(deadline) != {"event": "done"}:
            self.close()
        return left

    def prepare(self) -> None:
        """Start a room loading the kernels, without waiting for it: it loads while the
        submission's child does (both import torch and Triton, seconds each)."""
        if self.worker is not None or self.starting is not None or self.failed:
            return
        if self.starts >= MAX_STARTS:
            self.failed = f"the clean room was started {MAX_STARTS} times already"
            return
        self.starts += 1
        argv = [sys.executable, "-m", CLEAN_ROOM_MODULE]
        self.starting = Worker.spawn(argv, self.wrap, MEMORY_LIMIT_BYTES)
        source = self.kernels
        job = {"source": source.text, "filename": "<kernels>", "kernels": source.kernels}
        self.starting.send(job)

    def _room(self) -> Worker | None:
        """The loaded room, once it says so; None, with `failed` set, when it cannot load."""
        self.prepare()
        worker, self.starting = self.starting, None
        if worker is None:
            return self.worker
        event = worker.events.next(self._deadline(LOAD_TIMEOUT_S))
        if isinstance(event, dict) and event.get("event") == "loaded":
            self.worker = worker
            return worker
        if isinstance(event, dict) and event.get("event") == "load-error":
            self.failed = f"the clean room could not load your kernels: {event.get('detail')}"
        else:
            self.failed = f"the clean room did not start: {self._stopped(event, worker)}"
        worker.close()
        return None

    def _deadline(self, timeout_s: float) -> float:
        deadline = time.monotonic() + timeout_s
        return deadline if self.ends is None else min(deadline, self.ends)

    @staticmethod
    def _stopped(event: object, worker: Worker) -> str:
        if event is None:
            return "the replay ran out of time"
        if event == "eof":
            return f"the clean room stopped: {worker.cause()}"
        return f"the clean room's report was {str(event)[:80]}"

    def close(self) -> None:
        for worker in (self.worker, self.starting):
            if worker is not None:
                worker.close()
        self.worker = self.starting = None
