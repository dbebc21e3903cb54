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
import sys
from pathlib import Path

import torch
import triton
import triton.language as tl

GATE_BYTES = mmap.PAGESIZE
SEED_BITS = 31
"""The gate's one word is GEN << SEED_BITS | SEED: a generation and its seed in one store."""
PROJECTIONS = 1 << 20
"""The draw streams of a command's checksum vectors, above any call's."""
ERROR_CHARS = 300
"""The most of an error's text a reply carries."""
CHECKS = 4
"""How many random projections of the output a checksum holds."""
BLOCK = 1024


@triton.jit(do_not_specialize=["generation"])
def wait_for_gate(gate, seed, generation, SEED_BITS: tl.constexpr):
    """Hold the stream until the gate's word carries `generation`; its seed goes to `seed`."""
    word = tl.load(gate, volatile=True)
    while (word >> SEED_BITS) != generation:
        word = tl.load(gate, volatile=True)
    tl.store(seed, word & ((1 << SEED_BITS) - 1))


@triton.jit(do_not_specialize=["stream"])
def _normal(out, seed, stream, n, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    key = tl.load(seed) * 1_000_003 + stream
    tl.store(out + offsets, tl.randn(key, offsets), mask=offsets < n)


def normal(shape: tuple[int, ...], seed: torch.Tensor, stream: int) -> torch.Tensor:
    """Standard normal float32 values of `shape`, stream `stream` of the seed on the device."""
    out = torch.empty(shape, device="cuda")
    _normal[(triton.cdiv(out.numel(), BLOCK),)](out, seed, stream, out.numel(), BLOCK=BLOCK)
    return out


def draw(rows: int, cols: int, seed: torch.Tensor, call: int) -> torch.Tensor:
    """Call `call`'s timed input: a rows x cols transposed view of fresh normal values."""
    return normal((cols, rows), seed, call).t()


def projections(rows: int, cols: int, seed: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The CHECKS x rows and cols random vectors a command's checksums project on."""
    u = normal((CHECKS, rows), seed, PROJECTIONS).double()
    return u, normal((cols,), seed, PROJECTIONS + 1)


def checksum(out: object, u: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """u . out . v for a float32 output, on the device (ValueError when `out` is not a
    rows x cols float32 CUDA tensor)."""
    rows, cols = u.shape[1], v.shape[0]
    if not isinstance(out, torch.Tensor) or tuple(out.shape) != (rows, cols):
        raise ValueError(f"the function returned {_kind(out)}, not a {rows}x{cols} tensor")
    if out.dtype != torch.float32 or out.device.type != "cuda":
        raise ValueError(f"the function returned {out.dtype} on {out.device}, not float32 cuda")
    return u @ torch.mv(out, v).double()


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
        torch.cuda.synchronize()
        self.gate.hold(generation)
        u, v = projections(rows, cols, self.gate.seed)
        sums = []
        for call in range(count):
            x = draw(rows, cols, self.gate.seed, call)
            if op in ("warm", "call"):
                out = self.fn(x, 4)
            elif op == "copy":
                out = x.t().clone().t()
            else:  # null: a tensor of the output's shape, already there
                out = self.blank[rows, cols]
            sums.append(checksum(out, u, v))
        self.reply(json.dumps({"queued": count}).encode())
        torch.cuda.synchronize()
        if op == "call":
            self.last = out
        return json.dumps({"sums": torch.stack(sums).tolist() if sums else []}).encode()

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
