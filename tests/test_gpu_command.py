"""``tools/gpu_command.py``: the GPU call's one-line command with the checkout's commit filled in (``git
rev-parse HEAD``, ``-dirty`` where ``git status`` lists a change that would travel), refused in one line
outside a git checkout; README shows that command, never a ``$(…)`` that the GPU machine would expand without
``.git``."""

from __future__ import annotations

import importlib.util
import re
import subprocess
from pathlib import Path

import pytest

from benchmarks.provenance import environment_commit

ROOT = Path(__file__).resolve().parents[1]
_SPEC = importlib.util.spec_from_file_location("gpu_command", ROOT / "tools" / "gpu_command.py")
gpu_command = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(gpu_command)

LINE = re.compile(
    r"^LAUNCHBENCH_COMMIT=(?P<commit>[0-9a-f]{40}(-dirty)?) "
    r"PYTHON=/opt/torch/\.venv/bin/python3 bash \.ci/gpu-run$"
)


def _git(root: Path, *arguments: str) -> str:
    return subprocess.run(
        ["git", "-C", str(root), *arguments], capture_output=True, text=True, check=True
    ).stdout.strip()


@pytest.fixture
def checkout(tmp_path: Path) -> Path:
    """A git checkout of one commit, with a .gitignore."""
    root = tmp_path / "checkout"
    root.mkdir()
    _git(root, "init", "-q")
    (root / "a.txt").write_text("a\n", encoding="utf-8")
    (root / ".gitignore").write_text("ignored/\n", encoding="utf-8")
    _git(root, "add", ".")
    _git(root, "-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-q", "-m", "one")
    return root


def test_the_commit_is_heads_and_dirty_where_the_copy_would_differ(checkout: Path) -> None:
    head = _git(checkout, "rev-parse", "HEAD")
    assert gpu_command.checkout_commit(checkout) == head
    (checkout / "ignored").mkdir()
    (checkout / "ignored" / "x.log").write_text("not copied\n", encoding="utf-8")
    assert gpu_command.checkout_commit(checkout) == head, "ignored files do not travel"
    (checkout / "new.py").write_text("travels\n", encoding="utf-8")
    assert gpu_command.checkout_commit(checkout) == f"{head}-dirty", "an untracked file travels"
    (checkout / "new.py").unlink()
    (checkout / "a.txt").write_text("changed\n", encoding="utf-8")
    assert gpu_command.checkout_commit(checkout) == f"{head}-dirty"


def test_the_command_is_one_line_the_script_accepts(
    checkout: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert gpu_command.main(["--root", str(checkout)]) == 0
    line = capsys.readouterr().out.rstrip("\n")
    match = LINE.fullmatch(line)
    assert match, line
    assert environment_commit({"LAUNCHBENCH_COMMIT": match["commit"]})["id"] == _git(
        checkout, "rev-parse", "HEAD"
    )


def test_outside_a_checkout_it_says_so_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert gpu_command.main(["--root", str(tmp_path)]) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and len(captured.err.splitlines()) == 1
    assert captured.err.startswith(f"gpu_command: {tmp_path}: git rev-parse --verify HEAD failed: ")


def test_readme_and_the_docs_show_the_printed_command_and_no_expansion() -> None:
    for name in ("README.md", "docs/gpu.md"):
        text = (ROOT / name).read_text(encoding="utf-8")
        assert "python tools/gpu_command.py" in text, name
        commands = [line.lstrip("# ") for line in text.splitlines() if "LAUNCHBENCH_COMMIT=" in line]
        assert commands and all(LINE.fullmatch(command) for command in commands), (name, commands)
        runs = [line for line in text.splitlines() if "bash .ci/gpu-run" in line]
        assert not [line for line in runs if "$(" in line or "`git" in line], name
        assert "git describe" not in text, name
