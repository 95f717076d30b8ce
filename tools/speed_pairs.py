"""Time two shell commands run alternately (A, B, A, B, ...): on a shared machine the load drifts, and only
a ratio of neighbours is steady. Prints each pair's seconds, peak memory and B / A, then the ranges.

    python tools/speed_pairs.py --pairs 5 \\
        "pytest-benchmark --storage /tmp/fleet compare" "python -m analysis compare /tmp/fleet"

``--before`` runs a command ahead of each B (not timed: e.g. emptying a cache for a "first run" figure).
Peak memory is the largest resident set of the command's process tree (``wait4``'s ``ru_maxrss``).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import time


def timed(command: str) -> tuple[float, float]:
    """(seconds, peak resident memory in bytes) of one run of ``command`` (its output thrown away)."""
    start = time.perf_counter()
    process = subprocess.Popen(command, shell=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _, status, usage = os.wait4(process.pid, 0)
    seconds = time.perf_counter() - start
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"{command!r} failed (exit status {os.waitstatus_to_exitcode(status)})")
    process.returncode = os.waitstatus_to_exitcode(status)
    return seconds, usage.ru_maxrss * 1024.0  # ru_maxrss is in KiB on Linux


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("a", help="the reference command (A)")
    parser.add_argument("b", help="the command measured against it (B)")
    parser.add_argument("--pairs", type=int, default=5, help="alternating pairs (default: %(default)s)")
    parser.add_argument("--before", default=None, help="a command run, untimed, before each B")
    args = parser.parse_args(argv)
    ratios, a_s, b_s, b_mem = [], [], [], []
    for pair in range(args.pairs):
        a, a_mem = timed(args.a)
        if args.before:
            subprocess.run(args.before, shell=True, check=True)
        b, mem = timed(args.b)
        ratios.append(b / a)
        a_s.append(a)
        b_s.append(b)
        b_mem.append(mem)
        load = os.getloadavg()[0]
        print(
            f"pair {pair + 1}: A {a:.2f} s ({a_mem / 1e9:.2f} GB), B {b:.2f} s ({mem / 1e9:.2f} GB), "
            f"B/A {b / a:.3f}, load {load:.2f}",
            flush=True,
        )
    print(
        f"A {min(a_s):.2f}-{max(a_s):.2f} s; B {min(b_s):.2f}-{max(b_s):.2f} s, {max(b_mem) / 1e9:.2f} GB at "
        f"most; B/A {min(ratios):.3f}-{max(ratios):.3f} (median {sorted(ratios)[len(ratios) // 2]:.3f})"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
