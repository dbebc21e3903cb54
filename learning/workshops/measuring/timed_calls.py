"""Timed calls of one function, served to a parent that owns the clock.

The GPU timing cell (`grader.grading.gpu_timing`) runs this module twice, never in one
process: on the course's reference in a process of the grader's, and on the student's
function in the submission's sandbox, where nothing of the grader exists. The parent sends
one command per line on stdin and reads the replies on `--reply-fd`. What this process says
is only the outputs' checksums, which the parent compares with the reference's on the same
inputs; nothing it measures is used.

A timed command's inputs come from a seed nobody has before the parent's clock starts. The
parent writes it to a page of its own (`--gate-fd`, mapped into the device's address space)
when it starts that clock, after this process has queued the command's work behind a kernel
that waits for the page (`wait_for_gate`). So the work cannot start early, the host's
launches are not in the time, and no answer computed or cached before the command can be
right. The reply waits for the whole device, so work a call leaves running is in its time.
Each command's buffers get new device memory before its gate (`Server.place`): where a buffer
lies moves a call's time by a few percent, and one placement kept all along would make one
grading's luck last.

Commands (a word and integers):
    call ROWS COLS COUNT GEN   COUNT timed calls back to back, each on an input drawn after
                               the last, each output checksummed on the device, released by
                               the gate's generation GEN
    warm ROWS COLS COUNT GEN   the same, to compile and fill caches before timing
    null ROWS COLS COUNT GEN   the same without the function: what the parent subtracts
    copy ROWS COLS COUNT GEN   the same with a plain device copy for the function: the roof
    rows I J ...               rows I, J, ... of the last call's output, as float32 bytes
    touch                      a tiny kernel, so the next command finds its context active
    quit
A reply is its length in bytes on a line, then that many bytes: JSON, or the rows' bytes. A
gated command has two: `{"queued": COUNT}` once its work waits for the gate, then its sums.
"""

from __future__ import annotations

import argparse
import json
import mmap
import os
import random
import sys
from pathlib import Path

import torch
import triton
import triton.language as tl

from learning.workshops.measuring.gate import GATE_BYTES, SEED_BITS

PROJECTIONS = 1 << 20
"""The draw streams of a command's checksum vectors, above any call's."""
ERROR_CHARS = 300
"""The most of an error's text a reply carries."""
CHECKS = 4
"""How many random projections of the output a checksum holds."""
BLOCK = 1024
TILE = 64
"""A checksum program's block of the output: TILE x TILE elements."""
RING = 4
"""How many input buffers, each placed anew, a timed command's calls take in turn."""
SPACER_MIB = 64
"""The most device memory each spacer between them takes (`Server.place`)."""


@triton.jit(do_not_specialize=["generation"])
def wait_for_gate(gate, seed, generation, SEED_BITS: tl.constexpr):
    """Hold the stream until the gate's word carries `generation`; its seed goes to `seed`."""
    word = tl.load(gate, volatile=True)
    while (word >> SEED_BITS) != generation:
        word = tl.load(gate, volatile=True)
    tl.store(seed, word & ((1 << SEED_BITS) - 1))


@triton.jit
def _mix(x):
    """A 32-bit integer hash: two rounds of xor-shift and multiply."""
    x = ((x >> 16) ^ x) * 0x45D9F3B
    x = ((x >> 16) ^ x) * 0x45D9F3B
    return (x >> 16) ^ x


@triton.jit
def _uniform(seed, stream, index):
    """Values uniform on [-1, 1), one per `index`, from stream `stream` of the device's seed:
    a hash of the three, so any element is drawn without the others."""
    key = _mix((tl.load(seed) * 1_000_003 + stream).to(tl.uint32))
    bits = _mix(index.to(tl.uint32) * 0x9E3779B9 + key)
    return (bits >> 8).to(tl.float32) * (2.0 / (1 << 24)) - 1.0


@triton.jit(do_not_specialize=["stream"])
def _fill(out, seed, stream, n, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(out + offsets, _uniform(seed, stream, offsets), mask=offsets < n)


@triton.jit
def _checksum_tile(
    out,
    partial,
    seed,
    rows,
    cols,
    stride_r,
    stride_c,
    PROJECTIONS: tl.constexpr,
    CHECKS: tl.constexpr,
    TILE: tl.constexpr,
):
    """One tile's share of u_k . out . v for each projection k, summed in float64."""
    r = tl.program_id(0) * TILE + tl.arange(0, TILE)
    c = tl.program_id(1) * TILE + tl.arange(0, TILE)
    inside = (r[:, None] < rows) & (c[None, :] < cols)
    tile = tl.load(out + r[:, None] * stride_r + c[None, :] * stride_c, mask=inside, other=0.0)
    v = _uniform(seed, PROJECTIONS + CHECKS, c)
    by_row = tl.sum(tile * v[None, :], axis=1).to(tl.float64)
    program = tl.program_id(0) * tl.num_programs(1) + tl.program_id(1)
    for k in tl.static_range(CHECKS):
        u = _uniform(seed, PROJECTIONS + k, r).to(tl.float64)
        tl.store(partial + program * CHECKS + k, tl.sum(by_row * u, axis=0))


def uniform(
    shape: tuple[int, ...], seed: torch.Tensor, stream: int, out: torch.Tensor | None = None
) -> torch.Tensor:
    """float32 values of `shape` uniform on [-1, 1), stream `stream` of `seed` (a one-element
    int64 tensor on the device the values are drawn on), in `out` if given."""
    out = torch.empty(shape, device=seed.device) if out is None else out
    _fill[(triton.cdiv(out.numel(), BLOCK),)](out, seed, stream, out.numel(), BLOCK=BLOCK)
    return out


def draw(
    rows: int, cols: int, seed: torch.Tensor, call: int, out: torch.Tensor | None = None
) -> torch.Tensor:
    """Call `call`'s timed input: a rows x cols transposed view of fresh values (drawn into
    `out`, a cols x rows tensor, if given)."""
    return uniform((cols, rows), seed, call, out).t()


def projections(rows: int, cols: int, seed: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The CHECKS x rows and cols vectors a command's checksums project on (`checksum` draws
    them element by element itself; these are for checking it)."""
    u = torch.stack([uniform((rows,), seed, PROJECTIONS + k) for k in range(CHECKS)])
    return u, uniform((cols,), seed, PROJECTIONS + CHECKS)


def checksum(out: object, rows: int, cols: int, seed: torch.Tensor) -> torch.Tensor:
    """u . out . v in float64 for each of the `projections` of `seed`, in one pass over a
    rows x cols float32 output on the seed's device, whatever its strides (ValueError when
    `out` is not such a tensor)."""
    if not isinstance(out, torch.Tensor) or tuple(out.shape) != (rows, cols):
        raise ValueError(f"the function returned {_kind(out)}, not a {rows}x{cols} tensor")
    if out.dtype != torch.float32 or out.device != seed.device:
        raise ValueError(
            f"the function returned {out.dtype} on {out.device}, not float32 on {seed.device}"
        )
    grid = (triton.cdiv(rows, TILE), triton.cdiv(cols, TILE))
    partial = torch.empty(grid[0] * grid[1], CHECKS, dtype=torch.float64, device=seed.device)
    _checksum_tile[grid](
        out,
        partial,
        seed,
        rows,
        cols,
        out.stride(0),
        out.stride(1),
        PROJECTIONS=PROJECTIONS,
        CHECKS=CHECKS,
        TILE=TILE,
    )
    return partial.sum(0)


class Gate:
    """The parent's page, mapped into the device's address space: `hold` queues a wait for a
    generation, whose seed the work queued after it reads from `seed`, on the device."""

    def __init__(self, fd: int) -> None:
        self.page = mmap.mmap(fd, GATE_BYTES)
        self.host = torch.frombuffer(self.page, dtype=torch.int64)
        error = torch.cuda.cudart().cudaHostRegister(self.host.data_ptr(), GATE_BYTES, 0)
        if int(error) != 0:
            raise RuntimeError(f"the timing gate could not be mapped for the device ({error})")
        self.seed = torch.zeros(1, dtype=torch.int64, device="cuda")

    def hold(self, generation: int) -> None:
        wait_for_gate[(1,)](self.host, self.seed, generation, SEED_BITS=SEED_BITS)


def _kind(value: object) -> str:
    if isinstance(value, torch.Tensor):
        return f"a {'x'.join(map(str, value.shape)) or 'scalar'} tensor"
    return f"a {type(value).__name__}"


class Server:
    """Answers the parent's commands with `fn`, the function timed."""

    def __init__(self, fn, reply_fd: int, gate: Gate | None = None) -> None:
        self.fn, self.reply_fd, self.gate = fn, reply_fd, gate
        self.last: torch.Tensor | None = None
        self.blank: dict[tuple[int, int], torch.Tensor] = {}
        self.spacers: list[torch.Tensor] = []
        self.inputs: list[torch.Tensor] = []

    def reply(self, payload: bytes) -> None:
        data = b"%d\n" % len(payload) + payload
        while data:
            data = data[os.write(self.reply_fd, data) :]

    def answer(self, words: list[str]) -> bytes:
        """The reply to one command (a gated command's second)."""
        op, numbers = words[0], [int(w) for w in words[1:]]
        if op == "rows":
            rows = self.last[numbers].float().contiguous().cpu()
            return rows.numpy().tobytes()
        if op == "touch":  # make this process's context the GPU's, untimed
            torch.cuda._sleep(1)
            torch.cuda.synchronize()
            return b"{}"
        rows, cols, count, generation = numbers
        if op == "null" and (rows, cols) not in self.blank:
            self.blank[rows, cols] = torch.zeros(rows, cols, device="cuda")
        host = self.place(op, rows, cols, count)
        self.gate.hold(generation)
        sums = []
        for call in range(count):
            out = self.one_call(op, rows, cols, call)
            sums.append(checksum(out, rows, cols, self.gate.seed))
        if sums:
            host.copy_(torch.stack(sums), non_blocking=True)
        done = torch.cuda.Event()
        done.record()
        self.reply(json.dumps({"queued": count}).encode())
        while not done.query():  # polled, not slept on: the reply leaves when the work ends
            pass
        torch.cuda.synchronize()  # and work left on any other stream
        if op == "call":
            self.last = out
        return json.dumps({"sums": host.tolist()}).encode()

    def one_call(self, op: str, rows: int, cols: int, call: int) -> torch.Tensor:
        """Call `call` of a command `op`: its fresh input, and what is timed on it."""
        x = draw(rows, cols, self.gate.seed, call, self.inputs[call % len(self.inputs)])
        if op in ("warm", "call"):
            return self.fn(x, 4)
        if op == "copy":
            return x.t().clone().t()
        return self.blank[rows, cols]  # null: a tensor of the output's shape, already there

    def place(self, op: str, rows: int, cols: int, count: int) -> torch.Tensor:
        """Give the command's buffers new device memory: RING inputs its calls take in turn,
        each behind a spacer of random size, and what the calls allocate, by two calls of
        its own, now. Where a buffer lies moves a call's time by a few percent, so a process
        that kept one placement would keep its luck in every command; and an allocation
        queued behind the gate could wait for it. Returns the pinned host memory the
        command's checksums are copied to."""
        self.spacers, self.inputs = [], []
        torch.cuda.empty_cache()
        for _ in range(RING):
            size = random.randrange(SPACER_MIB) << 20
            self.spacers.append(torch.empty(size, dtype=torch.uint8, device="cuda"))
            self.inputs.append(torch.empty(cols, rows, device="cuda"))
        for call in range(2):
            checksum(self.one_call(op, rows, cols, call), rows, cols, self.gate.seed)
        torch.cuda.synchronize()
        return torch.empty(count, CHECKS, dtype=torch.float64, pin_memory=True)

    def serve(self, commands) -> None:
        for line in commands:
            words = line.split()
            if not words or words[0] == "quit":
                return
            try:
                payload = self.answer(words)
            except Exception as exc:  # the function's, or its output's: the parent judges
                text = " ".join(f"{type(exc).__name__}: {exc}".split())[:ERROR_CHARS]
                payload = json.dumps({"error": text}).encode()
            self.reply(payload)


def main(argv: list[str] | None = None) -> int:
    from learning.workshops.checking.loader import LoadError, load_function
    from learning.workshops.contracts import select_mode

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--impl", required=True, help="the notebook or .py file defining it")
    parser.add_argument("--function", default="strided_softmax")
    parser.add_argument("--reply-fd", type=int, required=True)
    parser.add_argument("--gate-fd", type=int, required=True)
    args = parser.parse_args(argv)
    select_mode(verbose=False)
    server = Server(None, args.reply_fd)
    try:
        server.gate = Gate(args.gate_fd)
        server.fn = load_function(Path(args.impl), args.function)
    except (LoadError, Exception) as exc:  # the parent reads it as the first reply
        text = " ".join(f"{type(exc).__name__}: {exc}".split())[:ERROR_CHARS]
        server.reply(json.dumps({"load_error": text}).encode())
        return 1
    server.reply(json.dumps({"loaded": True, "device": torch.cuda.get_device_name()}).encode())
    server.serve(sys.stdin)
    return 0


if __name__ == "__main__":
    sys.exit(main())
