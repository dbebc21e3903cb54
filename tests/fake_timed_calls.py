"""A stand-in for `learning.workshops.measuring.timed_calls`, for the timing's CPU tests.

It speaks the same protocol with no GPU, its gate polled by the host: its `--impl` is a JSON
file of how it behaves (the milliseconds each command sleeps, whether its checksums or rows
are off, whether it loads, what it sends first, whether a call raises, answers, answers with a
length it never sends, or waits for the gate before it says its work is queued, as a function
that synchronises must, or answers from what the gate held before the command), so the
trusted side's judging can be tested without CUDA. Its checksums are its seed's: the gate's seed.
"""

from __future__ import annotations

import argparse
import ctypes
import json
import mmap
import os
import sys
import time

from grader.grading.timing_servers import GATE_BYTES, SEED_BITS


def reply(fd: int, payload: bytes) -> None:
    os.write(fd, b"%d\n" % len(payload) + payload)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--impl", required=True)
    parser.add_argument("--function")
    parser.add_argument("--reply-fd", type=int, required=True)
    parser.add_argument("--gate-fd", type=int, required=True)
    args = parser.parse_args()
    how = json.loads(open(args.impl).read())
    fd = args.reply_fd
    gate = ctypes.c_int64.from_buffer(mmap.mmap(args.gate_fd, GATE_BYTES))

    def seed_of(generation: int) -> int:
        while gate.value >> SEED_BITS != generation:
            time.sleep(1e-4)
        return gate.value % (1 << SEED_BITS)

    if how.get("load_error"):
        reply(fd, json.dumps({"load_error": how["load_error"]}).encode())
        return
    if "first_reply" in how:  # whatever a hostile server sends first, as it is
        reply(fd, how["first_reply"].encode())
        return
    reply(fd, json.dumps({"loaded": True, "device": "a fake GPU"}).encode())
    for line in sys.stdin:
        words = line.split()
        op = words[0]
        if op == "quit":
            return
        if op == "touch":
            reply(fd, b"{}")
            continue
        if op == "rows":
            reply(fd, bytes([how.get("rows_byte", 0)]) * 4 * len(words[1:]) * 8)
            continue
        count, generation = int(words[3]), int(words[4])
        once = how.get("out_of_memory_once")
        if op == "call" and once and not os.path.exists(once):
            open(once, "w").close()
            reply(fd, json.dumps({"error": "OutOfMemoryError: CUDA out of memory."}).encode())
            seed_of(generation)  # the parent opens the gate after any first reply
            continue
        if op == "call" and how.get("call_error"):  # the student's function raised this
            reply(fd, json.dumps({"error": how["call_error"]}).encode())
            seed_of(generation)
            continue
        if op == "call" and how.get("silent"):
            time.sleep(3600)
        if op == "call" and how.get("bad_length"):
            os.write(fd, b"999999999999\n")
            continue
        if how.get("answers_early"):  # from what the gate held before this command's turn
            seed = gate.value % (1 << SEED_BITS)
            reply(fd, json.dumps({"queued": count}).encode())
        elif how.get("synchronises"):
            seed = seed_of(generation)
            reply(fd, json.dumps({"queued": count}).encode())
        else:
            reply(fd, json.dumps({"queued": count}).encode())
            seed = seed_of(generation)
        time.sleep(how.get(f"{op}_ms", how.get("call_ms", 1)) / 1e3)
        sums = [[float(seed % 1000) + how.get("sums_offset", 0.0)] * 4] * count
        reply(fd, json.dumps({"sums": sums}).encode())


if __name__ == "__main__":
    main()
