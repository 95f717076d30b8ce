"""The run's speed sentinel: three fixed workloads timed at the run's start, before each family of cases (each
test module) and at its end, saved in the run record (``launchbench_run.sentinel``).

The run record's conditions say whether *other processes* were busy (/proc/stat); a host that slows the whole
VM down (a noisy neighbour on the host, a lower clock, memory bandwidth taken by other tenants) is invisible
there, and on shared VMs it is the largest error source: a run 1.25× slower than the same VM's usual looked
quiet. The sentinel times the same work every time, so a run can say how fast the machine was while it ran
(``analysis.sentinel``): whether its speed drifted during the run, and how it compares with the machine's
earlier runs. The workloads, each the fastest of a few repeats (other work only ever adds time):

- ``python``: a pure-Python loop (the interpreter's speed: what every numpy call's fixed cost is made of);
- ``numpy_call``: ``np.add`` of one-element arrays, the fixed cost this project measures (t0);
- ``memory_copy``: ``np.copyto`` of 32 MiB float64, past the core caches (a VM's reported LLC is often the
  host's, hundreds of MB; a copy past that would cost more than the sentinel's budget), the memory
  bandwidth a step's weights stream at.

Each checkpoint saves its own cost (``cost_s``, its wall time), so that the sentinel's share of a run is
read from the run itself: ≈ 20–35 ms a checkpoint (the first ≈ 0.2 s: it allocates and touches the copy's
arrays), eight in a run of the whole suite (start, one before each family, end): 0.25–0.43 % of a full run.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import numpy as np

#: The sentinel's saved form (``launchbench_run.sentinel.version``).
SENTINEL_VERSION = 1
#: Iterations of the pure-Python loop (≈ 1 ms).
PYTHON_ITERATIONS = 20_000
#: ``np.add`` calls on one-element arrays per repeat (≈ 0.3–0.6 ms).
NUMPY_CALLS = 1_000
#: Bytes of each array of the copy (float64): past a core's caches on every machine this project runs on.
COPY_BYTES = 32 * 2**20
#: Repeats of each workload per checkpoint; the fastest counts.
REPEATS = {"python": 5, "numpy_call": 5, "memory_copy": 3}
#: What each workload times, as saved in the record.
DESCRIPTIONS = {
    "python": f"a pure-Python loop of {PYTHON_ITERATIONS:,} additions",
    "numpy_call": f"{NUMPY_CALLS:,} np.add calls on one-element float64 arrays",
    "memory_copy": f"np.copyto of {COPY_BYTES // 2**20} MiB of float64",
}


def _python_loop() -> int:
    total = 0
    for i in range(PYTHON_ITERATIONS):
        total += i
    return total


@dataclass
class Sentinel:
    """The checkpoints of one run: ``check`` times the workloads and appends them with their place in the
    run (``at``: "start", "before <module>", "end"); ``as_json`` is the record's ``sentinel``."""

    checkpoints: list[dict[str, Any]] = field(default_factory=list)
    _arrays: dict[str, np.ndarray] = field(default_factory=dict, repr=False)

    def _workloads(self) -> dict[str, Callable[[], object]]:
        if not self._arrays:  # allocated and touched once, at the first checkpoint
            elements = COPY_BYTES // 8
            self._arrays = {
                "src": np.ones(elements),
                "dst": np.zeros(elements),
                "a": np.ones(1),
                "b": np.ones(1),
                "out": np.empty(1),
            }
        arrays = self._arrays

        def numpy_calls() -> None:
            a, b, out = arrays["a"], arrays["b"], arrays["out"]
            for _ in range(NUMPY_CALLS):
                np.add(a, b, out=out)

        return {
            "python": _python_loop,
            "numpy_call": numpy_calls,
            "memory_copy": lambda: np.copyto(arrays["dst"], arrays["src"]),
        }

    def check(self, at: str) -> None:
        """Time every workload (the fastest of its repeats, s) and keep it as the checkpoint ``at``."""
        began = time.perf_counter()
        seconds = {}
        for name, workload in self._workloads().items():
            workload()  # warm: the first call of a checkpoint pays for whatever ran before it
            best = float("inf")
            for _ in range(REPEATS[name]):
                start = time.perf_counter()
                workload()
                best = min(best, time.perf_counter() - start)
            seconds[name] = best
        self.checkpoints.append(
            {
                "at": at,
                "time": datetime.now(UTC).isoformat(timespec="milliseconds"),
                "seconds": seconds,
                "cost_s": time.perf_counter() - began,
            }
        )

    def release(self) -> None:
        """Free the copy's arrays (64 MiB) once the run's last checkpoint is taken."""
        self._arrays = {}

    def as_json(self) -> dict[str, Any]:
        return {"version": SENTINEL_VERSION, "workloads": dict(DESCRIPTIONS), "checkpoints": self.checkpoints}
