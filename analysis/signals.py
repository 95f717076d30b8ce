"""Holding the signals that stop a command (SIGINT, SIGTERM) over a few steps that must not be cut in two.

``python -m analysis`` turns these signals into an exception in the main thread (``analysis.__main__``); an
exception raised in the middle of starting worker processes, or of moving output files into place, would
leave a half-started pool or a folder that disagrees with its manifest. ``held`` delays them to the end of
such a step, where the exception then stops the command cleanly.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from collections.abc import Callable, Iterable, Iterator
from multiprocessing.connection import wait
from multiprocessing.process import BaseProcess
from pathlib import Path

#: The signals ``held`` delays (those present on this OS).
STOP_SIGNALS = frozenset(
    getattr(signal, name) for name in ("SIGINT", "SIGTERM", "SIGHUP") if hasattr(signal, name)
)


@contextlib.contextmanager
def held() -> Iterator[None]:
    """Delay ``STOP_SIGNALS`` until the block ends (where the OS can: POSIX); one that arrived meanwhile is
    delivered then. Processes started inside the block inherit the delay and must lift it (``release``)."""
    if not hasattr(signal, "pthread_sigmask"):
        yield
        return
    old = signal.pthread_sigmask(signal.SIG_BLOCK, STOP_SIGNALS)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)


class WorkerLost(Exception):
    """A worker process ended before its work was done (killed: by the OOM killer, by hand); the message
    is one line. Here, beside the stop signals, so the command line can catch it without importing the
    loader."""


def release() -> None:
    """Lift ``held``'s delay in a process started inside it (after setting how it handles each signal)."""
    if hasattr(signal, "pthread_sigmask"):
        signal.pthread_sigmask(signal.SIG_UNBLOCK, STOP_SIGNALS)


#: How long (s) ``ended_text`` waits for a lost worker's exit to be known.
_SETTLE_S = 1.0


def lost_line(who: str, unfinished: str, then: str) -> Callable[[Iterable[BaseProcess]], str]:
    """The ``WorkerLost`` line of a pool's workers, in its caller's words: "``who`` (pid N, ended by
    SIGKILL) ended before ``unfinished`` (killed? out of memory?): ``then``" (``ended_text``)."""

    def line(workers: Iterable[BaseProcess]) -> str:
        return f"{who}{ended_text(workers)} ended before {unfinished} (killed? out of memory?): {then}"

    return line


def ended_text(workers: Iterable[BaseProcess]) -> str:
    """Which of ``workers`` ended, and how, for a ``WorkerLost`` line: " (pid N, ended by SIGKILL)", or ""
    when none has. One a pool ended itself (SIGTERM, once it saw the pool broken) is named only if no other
    ended: the one killed first is the news."""
    workers = list(workers)
    # A pool marks itself broken (its futures fail) before it reaps the worker that died, whose exit code is
    # then not known yet: wait (a second at most) for one to have ended, and reap those that have.
    deadline = time.monotonic() + _SETTLE_S
    ready: list[BaseProcess] = []
    with contextlib.suppress(ValueError, OSError, AttributeError):  # AttributeError: not started
        sentinels = (
            set(wait([process.sentinel for process in workers], timeout=_SETTLE_S)) if workers else set()
        )
        ready = [process for process in workers if process.sentinel in sentinels]
        for process in ready:
            process.join(timeout=_SETTLE_S)
    # The pool's own thread may reap one at the same moment (one waitpid wins, the other learns nothing): the
    # exit code it reads is stored an instant later.
    while any(process.exitcode is None for process in ready) and time.monotonic() < deadline:
        time.sleep(0.005)
    ended = [process for process in workers if process.exitcode is not None]
    ended.sort(key=lambda process: process.exitcode == -signal.SIGTERM)
    if not ended:
        return ""
    how = ""
    if ended[0].exitcode < 0:
        with contextlib.suppress(ValueError):
            how = f" by {signal.Signals(-ended[0].exitcode).name}"
    return f" (pid {ended[0].pid}, ended{how})"


def process_alive(pid: int) -> bool:
    """Whether process ``pid`` has not ended, where POSIX tells (elsewhere: True). A zombie has ended: a
    command killed before its worker read its parent's pid (a worker it had just forked) stays one until
    its own parent reaps it, and that parent may be waiting for the pipes the worker holds open (a shell's
    ``$(...)``, ``subprocess.communicate``): ``os.kill(pid, 0)`` still reaches a zombie, so /proc is read
    where it exists."""
    if os.name != "posix":
        return True  # Windows' os.kill(pid, 0) would send a Ctrl-C, not test the process
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        state = Path(f"/proc/{pid}/stat").read_bytes().rpartition(b")")[2].split()[0]
    except (OSError, IndexError):
        return True  # no /proc (macOS), or it ended while we looked: the next check tells
    return state not in (b"Z", b"X")
