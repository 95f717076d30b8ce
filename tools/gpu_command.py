"""Print the one-line command of the prepared GPU call, with this checkout's commit already filled in.

The GPU machine gets a copy of the working tree without ``.git``: the commit the run measured must travel in
the command (``LAUNCHBENCH_COMMIT``), and a ``$(git …)`` written into it would be expanded there, where git
has nothing to say ("commit: unknown"). So the command is made here, in the checkout: ``git rev-parse HEAD``,
and ``-dirty`` after it where the copy will differ from that commit (``git status --porcelain`` lists a
change: tracked files changed, or files git does not ignore, which travel too).

``python tools/gpu_command.py`` prints e.g. ``LAUNCHBENCH_COMMIT=0123…4567-dirty
PYTHON=/opt/torch/.venv/bin/python3 bash .ci/gpu-run``; outside a git checkout (or without git) it says so in
one line and exits 2."""

from __future__ import annotations

import argparse
import shlex
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
#: The GPU image's Python, the one that holds PyTorch, CuPy, Triton and JAX (device notes, KINDS.md).
GPU_PYTHON = "/opt/torch/.venv/bin/python3"


class CommandError(Exception):
    """Why no command can be printed: one line."""


def _git(root: Path, *arguments: str) -> str:
    """The stripped output of ``git -C root ARGUMENTS``; ``CommandError`` where git fails or is missing."""
    try:
        done = subprocess.run(
            ["git", "-C", str(root), *arguments], capture_output=True, text=True, timeout=60, check=False
        )
    except FileNotFoundError as error:
        raise CommandError(f"git is not installed here: {error}") from error
    if done.returncode != 0:
        lines = done.stderr.strip().splitlines()
        raise CommandError(
            f"{root}: git {' '.join(arguments)} failed: {lines[0] if lines else done.returncode}"
        )
    return done.stdout.strip()


def checkout_commit(root: Path = ROOT) -> str:
    """The commit of the checkout at ``root`` (40 hex digits), ``-dirty`` after it where the working tree
    differs from it (a change git tracks, or a file it does not ignore)."""
    commit = _git(root, "rev-parse", "--verify", "HEAD")
    dirty = _git(root, "status", "--porcelain", "--untracked-files=normal")
    return f"{commit}-dirty" if dirty else commit


def gpu_command(commit: str, python: str = GPU_PYTHON) -> str:
    """The one-line command of the GPU call (README, docs/gpu.md "The first window") for ``commit``."""
    return f"LAUNCHBENCH_COMMIT={shlex.quote(commit)} PYTHON={shlex.quote(python)} bash .ci/gpu-run"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--python", default=GPU_PYTHON, help=f"the GPU machine's Python (default {GPU_PYTHON})"
    )
    parser.add_argument("--root", type=Path, default=ROOT, help="the checkout (default: this one)")
    options = parser.parse_args(argv)
    try:
        commit = checkout_commit(options.root)
    except CommandError as error:
        print(f"gpu_command: {error}", file=sys.stderr)
        return 2
    print(gpu_command(commit, options.python))
    return 0


if __name__ == "__main__":
    sys.exit(main())
