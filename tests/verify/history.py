"""The run's history: every operation the clients invoke and how it completed, one JSON object a
line (the format `checkers.py` reads)."""

from __future__ import annotations

import json
import queue
import threading
import time
from pathlib import Path


class History:
    """Events are numbered and written by one writer thread. `add` only puts on a
    `SimpleQueue`, which may be called from anywhere, even reentrantly: librdkafka runs
    delivery callbacks inside the client's own calls, and a client collected mid-call purges
    its queue through them."""

    def __init__(self, path: Path):
        self.path = path
        self._q: queue.SimpleQueue = queue.SimpleQueue()
        self._t0 = time.monotonic()
        self._writer = threading.Thread(target=self._write, name="history", daemon=True)
        self._writer.start()

    def _write(self) -> None:
        i = 0
        with open(self.path, "w", buffering=1 << 20) as f:
            while True:
                item = self._q.get()
                if item is None:
                    return
                t, proc, kind, fn, value = item
                f.write(
                    json.dumps(
                        {"i": i, "t": t, "proc": proc, "type": kind, "f": fn, "value": value},
                        separators=(",", ":"),
                    )
                )
                f.write("\n")
                i += 1

    def add(self, proc: str, kind: str, f: str, value) -> None:
        self._q.put((round(time.monotonic() - self._t0, 6), proc, kind, f, value))

    def invoke(self, proc: str, f: str, value) -> None:
        self.add(proc, "invoke", f, value)

    def ok(self, proc: str, f: str, value) -> None:
        self.add(proc, "ok", f, value)

    def fail(self, proc: str, f: str, value) -> None:
        self.add(proc, "fail", f, value)

    def info(self, proc: str, f: str, value) -> None:
        self.add(proc, "info", f, value)

    def elapsed(self) -> float:
        return time.monotonic() - self._t0

    def close(self) -> None:
        self._q.put(None)
        self._writer.join()
