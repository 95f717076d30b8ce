"""Stand-ins for CuPy on a machine without a GPU: put ``tests/fake_gpu`` first on ``PYTHONPATH`` and
``import cupy`` finds ``tests/fake_gpu/cupy`` (a GPU that passes the probe, then fails every call)."""

from pathlib import Path

#: The folder to put first on ``PYTHONPATH``.
FAKE_GPU_PATH = Path(__file__).resolve().parent
