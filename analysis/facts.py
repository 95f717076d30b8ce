"""Facts of a saved run that a comparison can group by: numpy or BLAS version, CuPy, driver, Python, OS.

A fact is named by a dotted path into the saved JSON — ``machine_info.launchbench.numpy``,
``commit_info.id``, ``launchbench_run.quick`` — or, for the common ones, by a short name (``ALIASES``). A
path that starts with none of the document's top-level keys (``ROOTS``) is read inside ``machine_info``, so
``launchbench.numpy`` and ``cpu.brand_raw`` work as written in pytest-benchmark's own machine info. Values
are compared as text (``fact_text``): a version, a commit id, a bool; a list of BLAS libraries as their
names and versions.
"""

from __future__ import annotations

import json
from collections.abc import Mapping

#: The groupings of a comparison that are not facts: each machine, each saved run.
BY_MACHINE = "machine"
BY_RUN = "run"
#: The case coordinates a comparison can group by: each row by its own value (``analysis.case_groups``).
CASE_GROUPINGS = ("framework",)

#: The saved JSON's top-level keys a fact path may start with (the run record's key is part of the data
#: contract: ``benchmarks.run_record.RUN_RECORD_KEY``).
ROOTS = ("machine_info", "commit_info", "launchbench_run", "version", "datetime")

#: Short names of the common facts, and the paths they stand for.
ALIASES = {
    "numpy": "machine_info.launchbench.numpy",
    "blas": "machine_info.launchbench.blas",
    "cupy": "machine_info.launchbench.gpu.cupy_version",
    "driver": "machine_info.launchbench.gpu.driver_version",
    "cuda": "machine_info.launchbench.gpu.runtime_version",
    "gpu": "machine_info.launchbench.gpu.name",
    "cpu": "machine_info.launchbench.cpu_model",
    "python": "machine_info.python_version",
    "implementation": "machine_info.python_implementation",
    "os": "machine_info.system",
    "kernel": "machine_info.release",
    "host": "machine_info.node",
    "commit": "commit_info.id",
    "branch": "commit_info.branch",
    "pytest-benchmark": "version",
    "quick": "launchbench_run.quick",
    "governor": "machine_info.launchbench.governor",
}


def fact_path(name: str) -> tuple[str, ...]:
    """The keys ``name`` (a short name or a dotted path) walks from the top of a saved run."""
    path = ALIASES.get(name, name)
    parts = tuple(part for part in path.split(".") if part)
    if not parts:
        raise ValueError(f"{name!r} names no fact: give a dotted path or one of {', '.join(ALIASES)}")
    return parts if parts[0] in ROOTS else ("machine_info", *parts)


def fact_text(doc: Mapping, name: str) -> str | None:
    """The fact ``name`` of the saved run ``doc`` as text, or None when the run does not record it (a
    missing key, or null)."""
    value: object = doc
    for key in fact_path(name):
        if not isinstance(value, Mapping) or key not in value:
            return None
        value = value[key]
    return _text(value)


def _text(value: object) -> str | None:
    if value is None:
        return None
    if isinstance(value, str):
        return value
    if isinstance(value, bool | int | float):
        return json.dumps(value)
    if isinstance(value, list) and value and all(_is_library(item) for item in value):
        # threadpoolctl's view of the BLAS (``machine_info["launchbench"]["blas"]``): one entry per library,
        # with its thread count: the same library at 1 and at 2 threads measures differently.
        return ", ".join(_library_text(item) for item in value)
    return json.dumps(value, sort_keys=True, separators=(",", ":"), default=str)


def _library_text(item: Mapping) -> str:
    threads = item.get("num_threads")
    counted = f" ({threads} thread{'s' if threads != 1 else ''})" if isinstance(threads, int) else ""
    return f"{item['internal_api']} {item.get('version') or '?'}{counted}"


def _is_library(item: object) -> bool:
    return isinstance(item, Mapping) and isinstance(item.get("internal_api"), str)


#: The recorded settings a run's figures depend on besides its machine and code: runs that differ in one are
#: not pooled unless asked (``analysis.runs``): the BLAS (library, version, threads), numpy, Python, the
#: CPU frequency governor, and every thread or CPU-feature variable of the environment the run recorded
#: (``machine_info.launchbench.env``, ``benchmarks.provenance``). PyTorch's threads are a case coordinate
#: (``threads``), compared only with the same count.
SETTINGS = ("blas", "numpy", "python", "governor")
ENV_PATH = "machine_info.launchbench.env"


#: An environment variable the run recorded as not set.
UNSET = "unset"


def run_settings(doc: Mapping) -> dict[str, str]:
    """The ``SETTINGS`` of the saved run ``doc`` that it records, and each environment variable it recorded
    (``ENV_PATH``; ``UNSET`` where it was not set), as name → text."""
    settings = {name: text for name in SETTINGS if (text := fact_text(doc, name)) is not None}
    env: object = doc
    for key in fact_path(ENV_PATH):
        env = env.get(key) if isinstance(env, Mapping) else None
    if isinstance(env, Mapping):
        settings.update({str(name): _text(value) or UNSET for name, value in env.items()})
    return settings
