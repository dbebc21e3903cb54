"""A stand-in for `learning.workshops.measuring.timed_calls`, for the timing's CPU tests.

It speaks the same protocol with no GPU: its `--impl` is a JSON file of how it behaves (the
milliseconds each command sleeps, whether its checksums or rows are off, whether it loads,
answers, or answers with a length it never sends), so the trusted side's judging can be
tested without CUDA.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time


def reply(fd: int, payload: bytes) -> None:
    os.write(fd, b"%d\n" % len(payload) + payload)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--impl", required=True)
    parser.add_argument("--function")
    parser.add_argument("--reply-fd", type=int, required=True)
    args = parser.parse_args()
    how = json.loads(open(args.impl).read())
    fd = args.reply_fd
    if how.get("load_error"):
        reply(fd, json.dumps({"load_error": how["load_error"]}).encode())
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
        seed, count = int(words[3]), int(words[4])
        once = how.get("out_of_memory_once")
        if op == "call" and once and not os.path.exists(once):
            open(once, "w").close()
            reply(fd, json.dumps({"error": "OutOfMemoryError: CUDA out of memory."}).encode())
            continue
        if op == "call" and how.get("silent"):
            time.sleep(3600)
        if op == "call" and how.get("bad_length"):
            os.write(fd, b"999999999999\n")
            continue
        time.sleep(how.get(f"{op}_ms", how.get("call_ms", 1)) / 1e3)
        sums = [[float(seed % 1000) + how.get("sums_offset", 0.0)] * 4] * count
        reply(fd, json.dumps({"sums": sums}).encode())


if __name__ == "__main__":
    main()
