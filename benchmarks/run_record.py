"""The run record: what this run was and the conditions it was measured under, saved beside ``machine_info``.

``machine_info`` says what the machine is and must be identical between two runs of one unchanged machine
(pytest-benchmark compares it wholesale and warns on any difference); everything about *this* run lives here,
under the saved JSON's top-level key ``RUN_RECORD_KEY``: quick or full, the selection, cases planned and
measured, completed or interrupted and by what, start and end, the machine's load and the CPU time other
processes took while it ran, facts the cases found about the device (e.g. a GPU timer's tick), and the speed
sentinel's checkpoints (``benchmarks.sentinel``: how fast the machine itself was during the run). Analysis
decides from it which runs may be pooled and whether a run's figures can be trusted.

Snapshots are taken by small collectors that tolerate a missing source (no ``/proc`` on macOS, no load average
on Windows, no NVML without a GPU): an unreadable source leaves its key ``None``, and a collector that raises
anyway leaves its key ``None`` and one line in ``faults``, so the record never stops a run from being saved.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from benchmarks.sentinel import Sentinel

#: The saved JSON's top-level key holding the run record.
RUN_RECORD_KEY = "launchbench_run"
#: Bumped when a key changes meaning (never for an added key): analysis reads every version it knows.
RUN_RECORD_VERSION = 1

#: Where Linux keeps per-CPU time counters and CPU frequencies (sysfs where a cpufreq driver runs, else the
#: "cpu MHz" lines of /proc/cpuinfo, which VMs have too).
PROC_STAT = Path("/proc/stat")
PROC_CPUINFO = Path("/proc/cpuinfo")
CPU_SYSFS = Path("/sys/devices/system/cpu")

# /proc/stat's per-CPU columns, in clock ticks: user nice system idle iowait irq softirq steal (guest time is
# already inside user and nice).
_BUSY_FIELDS = (0, 1, 2, 5, 6)
_STEAL_FIELD = 7


class Terminated(KeyboardInterrupt):
    """A stop signal (``STOP_SIGNALS``) as an interrupt: pytest ends the session normally and the measured
    cases are saved."""


def usable_cpu_ids() -> list[int] | None:
    """The CPU numbers this process may run on (its affinity), or None where the OS does not say."""
    try:
        return sorted(os.sched_getaffinity(0))
    except AttributeError:  # macOS and Windows
        return None


def cpu_ticks(cpus: list[int] | None, stat: Path = PROC_STAT) -> dict[str, float] | None:
    """Return busy and steal seconds summed over ``cpus`` (all CPUs when None) since boot, from /proc/stat.

    Busy = user + nice + system + irq + softirq: CPU time anybody spent running, not idle or waiting for I/O.
    None where /proc/stat is missing or unreadable.
    """
    try:
        text = stat.read_text()
        hz = os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, AttributeError):
        return None
    wanted = None if cpus is None else {f"cpu{number}" for number in cpus}
    busy = steal = 0
    found = False
    for line in text.splitlines():
        name, _, rest = line.partition(" ")
        if not name.startswith("cpu") or name == "cpu" or (wanted is not None and name not in wanted):
            continue
        values = [int(value) for value in rest.split()]
        busy += sum(values[index] for index in _BUSY_FIELDS if index < len(values))
        steal += values[_STEAL_FIELD] if len(values) > _STEAL_FIELD else 0
        found = True
    if not found:
        return None
    return {"busy_s": busy / hz, "steal_s": steal / hz}


def own_cpu_s() -> float:
    """CPU seconds (user + system) this process and its waited-for children have used, all threads."""
    times = os.times()  # children's fields are 0 on Windows
    return times.user + times.system + times.children_user + times.children_system


def load_avg() -> list[float] | None:
    """The 1, 5 and 15 minute load averages, or None where the OS has none (Windows)."""
    try:
        return list(os.getloadavg())
    except (AttributeError, OSError):
        return None


def cpu_frequencies_hz(
    cpus: list[int] | None, root: Path = CPU_SYSFS, cpuinfo: Path = PROC_CPUINFO
) -> dict[str, Any] | None:
    """The current frequency of ``cpus`` (Hz): min, mean and max over them, and ``source`` (sysfs's
    ``scaling_cur_freq``, else /proc/cpuinfo's "cpu MHz"); None where neither says.

    A frequency that moved between start and end (turbo, thermal limits, a power-saving governor) is a
    condition of the run, not a fact of the machine.
    """
    numbers = list(cpus) if cpus is not None else list(range(os.cpu_count() or 0))
    values = []
    for number in numbers:
        text = _read_text(root / f"cpu{number}" / "cpufreq" / "scaling_cur_freq")
        if text is not None and text.isdigit():
            values.append(int(text) * 1e3)  # kHz
    source = "sysfs scaling_cur_freq"
    if not values:
        values = _cpuinfo_mhz(cpuinfo, set(numbers))
        source = "/proc/cpuinfo cpu MHz"
    if not values:
        return None
    return {"min": min(values), "mean": sum(values) / len(values), "max": max(values), "source": source}


def _cpuinfo_mhz(cpuinfo: Path, cpus: set[int]) -> list[float]:
    """The "cpu MHz" of each processor in ``cpus`` listed in /proc/cpuinfo, Hz; empty where unreadable."""
    values = []
    processor = None
    for line in (_read_text(cpuinfo) or "").splitlines():
        key, _, value = line.partition(":")
        key, value = key.strip(), value.strip()
        if key == "processor" and value.isdigit():
            processor = int(value)
        elif key == "cpu MHz" and processor in cpus:
            try:
                values.append(float(value) * 1e6)
            except ValueError:
                continue
    return values


def governor(root: Path = CPU_SYSFS) -> str | None:
    """CPU 0's frequency governor (e.g. "performance", "powersave"), None where sysfs does not say."""
    return _read_text(root / "cpu0" / "cpufreq" / "scaling_governor")


def snapshot() -> dict[str, Any]:
    """The conditions now: wall time (ISO, UTC), load averages, CPU time counters of the usable CPUs and of
    this process, CPU frequencies and governor, and the GPU's clocks, power and throttling (NVML) where
    there is one. Seconds and Hz."""
    from benchmarks.nvml import gpu_conditions

    cpus = usable_cpu_ids()
    faults: list[str] = []
    snap = {
        "time": _now(),
        "monotonic_s": time.monotonic(),
        "load_avg": _guarded("load_avg", load_avg, faults),
        "cpu_ticks": _guarded("cpu_ticks", lambda: cpu_ticks(cpus), faults),
        "own_cpu_s": own_cpu_s(),
        "cpu_freq_hz": _guarded("cpu_freq_hz", lambda: cpu_frequencies_hz(cpus), faults),
        "governor": _guarded("governor", governor, faults),
        "gpu": _guarded("gpu", gpu_conditions, faults),
    }
    if faults:
        snap["faults"] = faults
    return snap


def _guarded(key: str, collect: Callable[[], Any], faults: list[str]) -> Any:
    """``collect()``, or None with one line in ``faults`` when it raises: a condition that cannot be read
    must not cost the run its results."""
    try:
        return collect()
    except Exception as error:
        faults.append(f"run record: reading {key} failed ({type(error).__name__}: {error}); left empty")
        return None


def between(start: dict[str, Any], end: dict[str, Any], n_cpus: int | None) -> dict[str, float | None]:
    """What happened on the machine between two snapshots: wall seconds, CPU seconds other processes took on
    the usable CPUs (busy time minus this process's own), steal seconds (a hypervisor's other guests), and
    each as a share of the CPUs' capacity (wall × ``n_cpus``). None where a counter was unreadable."""
    wall_s = end["monotonic_s"] - start["monotonic_s"]
    result: dict[str, float | None] = {
        "wall_s": wall_s,
        "other_cpu_s": None,
        "other_cpu_share": None,
        "steal_s": None,
        "steal_share": None,
    }
    ticks_start, ticks_end = start.get("cpu_ticks"), end.get("cpu_ticks")
    if not ticks_start or not ticks_end:
        return result
    own_s = end["own_cpu_s"] - start["own_cpu_s"]
    other_s = max(0.0, ticks_end["busy_s"] - ticks_start["busy_s"] - own_s)
    steal_s = max(0.0, ticks_end["steal_s"] - ticks_start["steal_s"])
    capacity_s = wall_s * n_cpus if n_cpus and wall_s > 0 else None
    result.update(
        other_cpu_s=other_s,
        other_cpu_share=other_s / capacity_s if capacity_s else None,
        steal_s=steal_s,
        steal_share=steal_s / capacity_s if capacity_s else None,
    )
    return result


@dataclass
class RunRecord:
    """The record of one pytest session, filled by ``conftest.py``'s hooks and saved by ``as_json``.

    ``outcomes`` maps each launchbench benchmark case (node id) to "passed", "failed" or "skipped";
    ``skip_reasons`` counts skipped cases per reason; ``facts`` holds what cases found about the device
    (``record_fact``); ``faults`` one line per error that did not stop the run (e.g. a GPU that failed after
    the probe).
    """

    quick: bool
    selection: dict[str, Any]
    benchmark_options: dict[str, Any]
    start: dict[str, Any] = field(default_factory=snapshot)
    planned: list[str] = field(default_factory=list)
    outcomes: dict[str, str] = field(default_factory=dict)
    skip_reasons: Counter = field(default_factory=Counter)
    facts: dict[str, Any] = field(default_factory=dict)
    faults: list[str] = field(default_factory=list)
    interrupted_by: str | None = None
    end: dict[str, Any] | None = None
    exit_status: int | None = None
    #: The speed sentinel's checkpoints (``benchmarks.sentinel``); None in a session that took none.
    sentinel: Sentinel | None = None

    def finish(self, exit_status: int, stopped: str | None) -> None:
        """Take the end snapshot and the session's exit status; ``stopped`` is pytest's reason for stopping
        early (``-x``/``--maxfail``), if any."""
        if self.end is None:
            self.end = snapshot()
        self.exit_status = int(exit_status)
        if stopped and self.interrupted_by is None:
            self.interrupted_by = str(stopped)

    def status(self) -> str:
        """ "completed" when the session ran every planned case to an outcome, else "interrupted"."""
        if self.interrupted_by is not None or any(case not in self.outcomes for case in self.planned):
            return "interrupted"
        return "completed"

    def as_json(self) -> dict[str, Any]:
        """The record as saved: plain JSON types, seconds, Hz, ISO times (UTC)."""
        end = self.end or snapshot()
        usable = usable_cpu_ids()
        n_cpus = len(usable) if usable is not None else os.cpu_count()
        counts = Counter(self.outcomes.values())
        return {
            "version": RUN_RECORD_VERSION,
            "quick": self.quick,
            "selection": self.selection,
            "benchmark_options": self.benchmark_options,
            "status": self.status(),
            "interrupted_by": self.interrupted_by,
            "exit_status": self.exit_status,
            "started": self.start["time"],
            "ended": end["time"],
            "cases": {
                "planned": len(self.planned),
                "measured": counts.get("passed", 0),
                "failed": counts.get("failed", 0),
                "skipped": counts.get("skipped", 0),
                "not_run": sum(case not in self.outcomes for case in self.planned),
                "skip_reasons": dict(self.skip_reasons),
                # Cases that did not finish (failed, or cut off by the interrupt): a saved case among them
                # holds fewer rounds than asked for, or none that can be trusted.
                "unfinished": sorted(
                    case for case in self.planned if self.outcomes.get(case) not in ("passed", "skipped")
                ),
            },
            "conditions": {
                "usable_cpus": n_cpus,
                "start": _without_clock(self.start),
                "end": _without_clock(end),
                "during": between(self.start, end, n_cpus),
                "gpu_slowdown": gpu_slowdown(self.start, end),
            },
            "facts": self.facts,
            "faults": [*self.faults, *self.start.get("faults", ()), *end.get("faults", ())],
            **({"sentinel": self.sentinel.as_json()} if self.sentinel is not None else {}),
        }


def gpu_slowdown(start: dict[str, Any], end: dict[str, Any]) -> list[str]:
    """What says the GPU ran below its clocks for power or heat during the run, each once, sorted: NVML's
    throttle reasons seen at start or end (``benchmarks.nvml.SLOWDOWN_REASONS``) and the violation
    counters that grew between them ("power held clocks back 0.12 s", ``benchmarks.nvml.throttled_between``:
    a throttle between the two snapshots shows only there). Empty without a GPU or without NVML."""
    from benchmarks.nvml import SLOWDOWN_REASONS, throttled_between

    seen = set()
    gpus = [snap.get("gpu") if isinstance(snap.get("gpu"), dict) else None for snap in (start, end)]
    for gpu in gpus:
        reasons = gpu.get("throttle_reasons") if gpu is not None else None
        seen.update(reason for reason in reasons or () if reason in SLOWDOWN_REASONS)
    for policy, seconds in (throttled_between(*gpus) or {}).items():
        seen.add(f"{policy} held clocks back {seconds:.3g} s")
    return sorted(seen)


#: The signals that stop a benchmark run and still save what it measured, and how the record names each.
STOP_SIGNALS = {"SIGINT": "SIGINT (Ctrl-C)", "SIGTERM": "SIGTERM", "SIGHUP": "SIGHUP"}
#: Seconds after which a stop signal that landed where no line is known is sent again (``stop_as_interrupt``).
RESEND_AFTER_S = 0.005


def stop_as_interrupt(record: RunRecord | None) -> dict[int, Any]:
    """Make Ctrl-C, SIGTERM and SIGHUP (a dropped SSH session) raise ``Terminated`` (a KeyboardInterrupt)
    in the main thread, so pytest ends the session normally and the measured cases are saved; the signal
    is written into ``record.interrupted_by``. A second stop signal while the first one is being handled
    (Ctrl-C pressed twice) is ignored with one line: raised inside pytest's own handling of the first, it
    would end the session with a traceback and nothing saved. A signal that lands on an instruction without
    a line number (CPython 3.11 has some) is sent again a moment later: pytest's report of the interrupt
    subtracts 1 from each traceback entry's line and crashed on that one (pytest-dev/pytest-xdist#1196),
    so the run ended with status 1 and a traceback instead of 2. Return the old handlers
    (``restore_handlers``); none where signals cannot be set (not the main thread)."""
    stopping: list[str] = []

    def handler(signum: int, frame: Any) -> None:
        name = signal.Signals(signum).name
        if not stopping and frame is not None and frame.f_lineno is None:
            threading.Timer(RESEND_AFTER_S, os.kill, (os.getpid(), signum)).start()
            return
        if stopping:
            os.write(2, f"\nlaunchbench: {name} ignored: saving what was measured first\n".encode())
            return
        stopping.append(name)
        if record is not None and record.interrupted_by is None:
            record.interrupted_by = STOP_SIGNALS[name]
        raise Terminated(f"signal {name}")

    old = {}
    for name in STOP_SIGNALS:
        signum = getattr(signal, name, None)
        if signum is None:
            continue
        try:
            old[signum] = signal.signal(signum, handler)
        except ValueError:  # not the main thread (e.g. pytest run inside a thread): leave signals alone
            return restore_handlers(old)
    return old


def restore_handlers(old: dict[int, Any]) -> dict[int, Any]:
    """Put back the handlers ``stop_as_interrupt`` replaced; return none left to restore."""
    for signum, handler in old.items():
        signal.signal(signum, handler)
    return {}


def _without_clock(snap: dict[str, Any]) -> dict[str, Any]:
    """A snapshot as saved: the monotonic clock and raw counters are only for ``between``; its faults are
    saved with the record's."""
    hidden = ("monotonic_s", "cpu_ticks", "own_cpu_s", "faults")
    return {key: value for key, value in snap.items() if key not in hidden}


def _now() -> str:
    return datetime.now(timezone.utc).isoformat()


def _read_text(path: Path) -> str | None:
    try:
        return path.read_text().strip()
    except OSError:
        return None
