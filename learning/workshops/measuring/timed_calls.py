"""Timed calls of one function, served to a parent that owns the clock.

The GPU timing cell (`grader.grading.gpu_timing`) runs this module twice, never in one
process: on the course's reference in a process of the grader's, and on the student's
function in the submission's sandbox, where nothing of the grader exists. The parent sends
one command per line on stdin and reads one reply per command on `--reply-fd`. It times each
call by its own clock, from sending the command to reading the reply, so nothing measured
here is used; what this process says is only the output's checksum, which the parent
compares with the reference's on the same input.

Every timed call draws its input fresh from the seed its command carries, after the command
arrives: an answer computed or cached before it cannot be right. Before the call the whole
device is synchronised, and the reply waits for the device again, so work a call leaves
running is in its time.

Commands (a word and integers):
    call ROWS COLS SEED COUNT  COUNT timed calls back to back, each on an input drawn after
                               the last, each output checksummed on the device (the host
                               runs ahead of the GPU, so the GPU's work is what takes time)
    warm ROWS COLS SEED COUNT  the same, to compile and fill caches before timing
    null ROWS COLS SEED COUNT  the same without the function: what the parent subtracts
    copy ROWS COLS SEED COUNT  the same with a plain device copy for the function: the roof
    rows I J ...               rows I, J, ... of the last call's output, as float32 bytes
    touch                      a tiny kernel, so the next command finds its context active
    quit
A reply is its length in bytes on a line, then that many bytes: JSON, or the rows' bytes.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

import torch

HEAD_START_CYCLES = 8_000_000
"""GPU cycles (about 4 ms on an H200) a command holds the stream before its calls, so the
host has queued them all before the GPU starts on them: the command's time is then this
hold plus the GPU's work, and the parent subtracts the hold with the rest of the harness.
A process that shortened it would show a time below the physics floor."""
ERROR_CHARS = 300
"""The most of an error's text a reply carries."""
CHECKS = 4
"""How many random projections of the output a checksum holds."""


def draw(rows: int, cols: int, generator: torch.Generator) -> torch.Tensor:
    """The next timed input of `generator`: a rows x cols transposed view of fresh normal
    values."""
    return torch.randn(cols, rows, device="cuda", generator=generator).t()


def projections(rows: int, cols: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The CHECKS x rows and cols random vectors a command's checksums project on."""
    generator = torch.Generator(device="cuda").manual_seed(seed ^ 0x5DEECE66D)
    u = torch.randn(CHECKS, rows, device="cuda", generator=generator, dtype=torch.float64)
    return u, torch.randn(cols, device="cuda", generator=generator)


def checksum(out: object, u: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """u . out . v for a float32 output, on the device (ValueError when `out` is not a
    rows x cols float32 CUDA tensor)."""
    rows, cols = u.shape[1], v.shape[0]
    if not isinstance(out, torch.Tensor) or tuple(out.shape) != (rows, cols):
        raise ValueError(f"the function returned {_kind(out)}, not a {rows}x{cols} tensor")
    if out.dtype != torch.float32 or out.device.type != "cuda":
        raise ValueError(f"the function returned {out.dtype} on {out.device}, not float32 cuda")
    return u @ torch.mv(out, v).double()


def _kind(value: object) -> str:
    if isinstance(value, torch.Tensor):
        return f"a {'x'.join(map(str, value.shape)) or 'scalar'} tensor"
    return f"a {type(value).__name__}"


class Server:
    """Answers the parent's commands with `fn`, the function timed."""

    def __init__(self, fn, reply_fd: int) -> None:
        self.fn, self.reply_fd = fn, reply_fd
        self.last: torch.Tensor | None = None
        self.blank: dict[tuple[int, int], torch.Tensor] = {}

    def reply(self, payload: bytes) -> None:
        data = b"%d\n" % len(payload) + payload
        while data:
            data = data[os.write(self.reply_fd, data) :]

    def answer(self, words: list[str]) -> bytes:
        """The reply to one command."""
        op, numbers = words[0], [int(w) for w in words[1:]]
        if op == "rows":
            rows = self.last[numbers].float().contiguous().cpu()
            return rows.numpy().tobytes()
        if op == "touch":  # make this process's context the GPU's, untimed
            torch.cuda._sleep(1)
            torch.cuda.synchronize()
            return b"{}"
        rows, cols, seed, count = numbers
        u, v = projections(rows, cols, seed)
        generator = torch.Generator(device="cuda").manual_seed(seed)
        if op == "null" and (rows, cols) not in self.blank:
            self.blank[rows, cols] = torch.zeros(rows, cols, device="cuda")
        sums = []
        torch.cuda.synchronize()
        torch.cuda._sleep(HEAD_START_CYCLES)
        for _ in range(count):
            x = draw(rows, cols, generator)
            if op in ("warm", "call"):
                out = self.fn(x, 4)
            elif op == "copy":
                out = x.t().clone().t()
            else:  # null: a tensor of the output's shape, already there
                out = self.blank[rows, cols]
            sums.append(checksum(out, u, v))
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
    args = parser.parse_args(argv)
    select_mode(verbose=False)
    server = Server(None, args.reply_fd)
    try:
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
