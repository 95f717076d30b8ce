"""Fan one real saved run out into N perturbed copies: a synthetic fleet for measuring analysis at scale.

Every copy keeps the run's benchmarks and coordinates; copies are spread over ``--machines`` invented machine
ids (host ``fleet-00``, ``fleet-01``, ...), each machine a fixed factor slower than the first (1 + 0.05·k),
and every raw sample is jittered by a log-normal factor (σ = 2 %), the stats recomputed from the jittered
samples (``restat``); with ``--no-data`` (and for a case saved without samples) each case's statistics are
scaled by one log-normal factor instead. The copies are written in pytest-benchmark's storage
layout (``OUT/<platform>/NNNN_fleet.json``), so both ``python -m analysis`` and ``pytest-benchmark compare``
read them.

These files are made-up data for timing the tools, never measurements: each carries
``machine_info["launchbench"]["synthetic"] = "fanout_runs.py copy of <source>"``.

    python tools/fanout_runs.py tests/data/sentinel/quiet-quick-1.json /tmp/fleet --copies 1000 --machines 10
"""

from __future__ import annotations

import argparse
import copy
import json
import re
from datetime import datetime, timedelta, timezone
from pathlib import Path

import numpy as np

try:
    import orjson
except ImportError:  # json writes the same text, 10-40x slower: 100,000 copies then take most of an hour
    orjson = None

_PLATFORM_FOLDER = "Linux-CPython-fleet-64bit"


def restat(stats: dict, samples: np.ndarray, slowdown: float) -> None:
    """Replace the summary statistics of ``stats`` (in place) by those of ``samples`` (s per iteration).

    numpy, not pytest-benchmark's ``Stats`` (ten times slower on 10⁵ samples): quartiles by numpy's linear
    interpolation, which may differ from pytest-benchmark's quartile method by part of one sample spacing;
    the outlier counts are kept and the 1.5-IQR whiskers scaled by ``slowdown``.
    """
    ordered = np.sort(samples)
    q1, median, q3 = (float(q) for q in np.quantile(ordered, [0.25, 0.5, 0.75]))
    mean = float(ordered.mean())
    stats.update(
        data=samples.tolist(),
        min=float(ordered[0]),
        max=float(ordered[-1]),
        mean=mean,
        stddev=float(ordered.std(ddof=1)) if ordered.size > 1 else 0,
        median=median,
        q1=q1,
        q3=q3,
        iqr=q3 - q1,
        rounds=int(ordered.size),
        total=float(ordered.sum()),
        ops=1 / mean if mean > 0 else 0,
    )
    for key in ("ld15iqr", "hd15iqr"):
        if isinstance(stats.get(key), int | float):
            stats[key] *= slowdown


def perturbed(
    doc: dict, index: int, machines: int, rng: np.random.Generator, source: str, keep_data: bool
) -> dict:
    """Copy ``index`` of ``doc``: its machine, a start time ``index`` minutes later, jittered samples; the raw
    samples left out unless ``keep_data`` (as ``--benchmark-save`` does without ``--benchmark-save-data``)."""
    # Deep-copy everything but the raw samples, which are replaced anyway (the copy of 10⁵ floats is slow).
    samples = [(bench.get("stats") or {}).pop("data", None) for bench in doc.get("benchmarks", [])]
    out = orjson.loads(orjson.dumps(doc)) if orjson is not None else copy.deepcopy(doc)
    for bench, data in zip(doc.get("benchmarks", []), samples, strict=True):
        if data is not None:
            bench["stats"]["data"] = data
    machine = index % machines
    slowdown = 1 + 0.05 * machine
    info = out.setdefault("machine_info", {})
    host = f"fleet-{machine:02d}"
    info["node"] = host
    ours = info.setdefault("launchbench", {})
    ours["host"] = host
    parts = (
        host,
        info.get("system"),
        ours.get("cpu_model", "cpu"),
        (ours.get("gpu") or {}).get("name", "no GPU"),
    )
    ours["machine_id"] = " / ".join(
        str(part) for part in parts if part
    )  # as benchmarks.provenance composes it
    ours["synthetic"] = f"fanout_runs.py copy of {source}"
    start = datetime.fromisoformat(str(doc.get("datetime", "2026-01-01T00:00:00"))).replace(
        tzinfo=timezone.utc
    )
    out["datetime"] = (start + timedelta(minutes=index)).isoformat()
    for bench, data in zip(out.get("benchmarks", []), samples, strict=True):
        stats = bench.get("stats") or {}
        if data and keep_data:
            jittered = np.asarray(data, dtype=float) * slowdown * rng.lognormal(0.0, 0.02, len(data))
            restat(stats, jittered, slowdown)
        else:  # no samples to write: each statistic scaled by one factor (ten times faster than restat)
            stats.pop("data", None)
            factor = slowdown * float(rng.lognormal(0.0, 0.02))
            for key in ("min", "max", "mean", "stddev", "median", "iqr", "q1", "q3"):
                if isinstance(stats.get(key), int | float):
                    stats[key] *= factor
            if stats.get("mean"):
                stats["ops"] = 1 / stats["mean"]
    return out


def _dumped(doc: dict) -> bytes:
    """``doc`` as pytest-benchmark writes a run (``json.dumps(indent=4)``, UTF-8): through orjson when it is
    installed, its two-space indent doubled: the same text but for exponents (orjson's 5e-6 for json's
    5e-06), the same numbers to any reader."""
    if orjson is None:
        return json.dumps(doc, indent=4).encode("utf-8")
    text = orjson.dumps(doc, option=orjson.OPT_INDENT_2)
    return re.sub(rb"\n((?:  )+)", rb"\n\1\1", text)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("source", type=Path, help="a saved run (pytest-benchmark JSON)")
    parser.add_argument("out", type=Path, help="folder to write the copies into (created; must be empty)")
    parser.add_argument("--copies", type=int, default=1000, help="number of copies (default: %(default)s)")
    parser.add_argument("--machines", type=int, default=4, help="distinct machine ids (default: %(default)s)")
    parser.add_argument(
        "--seed", type=int, default=0, help="random seed of the jitter (default: %(default)s)"
    )
    parser.add_argument(
        "--no-data",
        action="store_true",
        help="leave the raw samples out, as --benchmark-save does without --benchmark-save-data",
    )
    args = parser.parse_args(argv)
    if args.copies < 1 or args.machines < 1:
        parser.error("--copies and --machines must be >= 1")
    folder = args.out / _PLATFORM_FOLDER
    if folder.exists() and any(folder.iterdir()):
        parser.error(f"{folder} is not empty; give a fresh folder")
    doc = json.loads(args.source.read_text(encoding="utf-8"))
    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(args.seed)
    for index in range(args.copies):
        copy_doc = perturbed(doc, index, args.machines, rng, str(args.source), keep_data=not args.no_data)
        target = folder / f"{index + 1:04d}_fleet.json"
        target.write_bytes(_dumped(copy_doc))
    print(f"wrote {args.copies} copies of {args.source} for {args.machines} machines under {folder}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
