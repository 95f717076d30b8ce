"""What a case adds to the run record of the session it runs in: a fact it found (``record_fact``) or an
error the run survived (``record_fault``).

Apart from ``benchmarks.run_record``, which builds and saves the record and reads the GPU's conditions
through ``benchmarks.nvml`` and so ``benchmarks.cuda``: the CUDA probe and the cases record here without
importing that chain, so imports run one way.
"""

from __future__ import annotations

from typing import Any


def record_fact(config: Any, name: str, value: object) -> None:
    """Save ``value`` (plain JSON) as fact ``name`` of this run, e.g. ``"gpu.timer_tick_ns"``; a no-op when
    the session keeps no record (the benchmark plugin is off)."""
    record = getattr(config, "_launchbench_run", None)
    if record is not None:
        record.facts[name] = value


def record_fault(config: Any, line: str) -> None:
    """Save one line about an error the run survived (it is also printed in the summary)."""
    record = getattr(config, "_launchbench_run", None)
    if record is not None:
        record.faults.append(line)
