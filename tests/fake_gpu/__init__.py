"""Stand-ins for CuPy on a machine without a GPU: put ``tests/fake_gpu`` first on ``PYTHONPATH`` and
``import cupy`` finds ``tests/fake_gpu/cupy`` (a GPU that passes the probe, then fails every call)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

#: The folder to put first on ``PYTHONPATH``.
FAKE_GPU_PATH = Path(__file__).resolve().parent
ROOT = FAKE_GPU_PATH.parents[1]


def run_in_root(command: list[str], **environment: str) -> subprocess.CompletedProcess[str]:
    """Run ``command`` in the repository root with ``environment`` added to this process's, its output
    captured as text, within 10 minutes (for tests that run the suite or a script whole)."""
    return subprocess.run(
        command,
        cwd=ROOT,
        env=os.environ | environment,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
