"""`Periodic`: a daemon thread that calls `tick` every few seconds while it is on.

The GPU-memory watch of a grading, the queue's GPU sampler, a queue job's heartbeat and the
queue's watch over its worker processes are each one of these.
"""

from __future__ import annotations

import threading


class Periodic:
    """Calls `self.tick()` every `every_s` seconds in a daemon thread, from `start` (or the
    `with` block's start) to `stop` (its end); with `at_start`, once at the start too."""

    def __init__(self, every_s: float, at_start: bool = False) -> None:
        self.every_s, self.at_start = every_s, at_start
        self._stopped = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def tick(self) -> None:
        raise NotImplementedError

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        """Stop ticking; returns once a tick under way has ended."""
        self._stopped.set()
        self._thread.join()

    def __enter__(self):
        self.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    def _run(self) -> None:
        if self.at_start:
            self.tick()
        while not self._stopped.wait(self.every_s):
            self.tick()
