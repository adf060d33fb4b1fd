"""The launcher's worker threads: started once, reused by every launch.

Model
-----
``run_all(fn, n)`` calls ``fn()`` on ``n`` worker threads and returns when every call has returned: what
starting ``n`` threads and joining them did, without creating threads for each launch (starting and joining
two threads took about 0.1-0.2 ms, a tenth of a small FIA call's fixed cost; ``docs/call_overhead.md``).
The workers are daemon threads idling on one queue; there are as many as the most any launch asked for,
started when first needed. A forked child (a corpus or test worker) finds the parent's pool by its process
id and starts its own: the parent's threads do not exist there.

Invariants
----------
* ``fn`` runs exactly ``n`` times, each on a worker thread, never on the caller's.
* ``run_all`` returns only after all ``n`` calls have finished; the first exception one of them raised is
  then raised in the caller.
* Work queued by concurrent launches (from several caller threads) runs in queue order. A task must not wait
  for another task of the pool (the launcher's do not: each takes cores off its own launch's counter; a
  pipelined core group's vector programs run on threads of their own).
"""

from __future__ import annotations

import os
import queue
import threading

__all__ = ["run_all"]

_LOCK = threading.Lock()
_POOL = {"pid": None, "queue": None, "threads": 0}


class _Countdown:
    """The ``n`` calls of one ``run_all``: counted down as they finish, their exceptions kept."""

    def __init__(self, n: int):
        self._left = n
        self._done = threading.Condition()
        self.errors: list = []

    def finish(self, error=None) -> None:
        with self._done:
            if error is not None:
                self.errors.append(error)
            self._left -= 1
            if not self._left:
                self._done.notify_all()

    def wait(self) -> None:
        with self._done:
            while self._left:
                self._done.wait()


def _serve(tasks: queue.SimpleQueue) -> None:
    while True:
        fn, countdown = tasks.get()
        try:
            fn()
        except BaseException as e:   # reported to the caller by run_all
            countdown.finish(e)
        else:
            countdown.finish()


def _queue(n: int) -> queue.SimpleQueue:
    """The pool's task queue, with at least ``n`` workers serving it."""
    with _LOCK:
        if _POOL["pid"] != os.getpid():
            _POOL.update(pid=os.getpid(), queue=queue.SimpleQueue(), threads=0)
        while _POOL["threads"] < n:
            threading.Thread(target=_serve, args=(_POOL["queue"],), daemon=True,
                             name=f"cvtile-sim-{_POOL['threads']}").start()
            _POOL["threads"] += 1
        return _POOL["queue"]


def run_all(fn, n: int) -> None:
    """Call ``fn()`` on ``n`` worker threads; return when all have returned (see the module invariants)."""
    tasks = _queue(n)
    countdown = _Countdown(n)
    for _ in range(n):
        tasks.put((fn, countdown))
    countdown.wait()
    if countdown.errors:
        raise countdown.errors[0]
