"""``tools/report_phases.py`` (docs/speed.md's "Where the time went"): it runs the report of the current
folder's checkout and names each phase with its times, and the report it wrote is the plain command's."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RUN = ROOT / "tests" / "data" / "cpu-2core-quick.json"


def test_the_phases_are_timed_and_the_report_is_written(tmp_path: Path) -> None:
    out = tmp_path / "report"
    args = ["report", str(RUN), "--include-quick", "--out", str(out), "--no-cache"]
    done = subprocess.run(
        [sys.executable, "tools/report_phases.py", *args],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert (out / "report.md").read_text(encoding="utf-8").startswith("# launchbench report")
    phases = [line for line in done.stderr.splitlines() if line.startswith("[")]
    names = " ".join(phases)
    for name in (
        "loading (map_batches)",
        "fits (fitted_and_started)",
        "table (compared_table)",
        "end: command",
    ):
        assert name in names, done.stderr
    for line in phases[:-1]:
        began, ended = map(float, re.match(r"\[\s*([\d.]+) →\s*([\d.]+)\]", line).groups())
        assert 0 <= began <= ended, line
