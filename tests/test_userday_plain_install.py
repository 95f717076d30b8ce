"""After README's plain install (``pip install -e .``, no dev extra) pytest and pytest-benchmark's own CLI
work from the repository root: the tests that need a dev dependency skip with the reason, and nothing else
imports one.

The plain install is simulated in this interpreter's environment, without a second virtual environment:
the child processes start with a ``sitecustomize`` that hides the dev-only packages as if they were not
installed (no module to import, no distribution whose pytest plugin pytest would load).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).parent.parent
DATA = ROOT / "tests" / "data"

#: The dev extra's packages that tests import (``pyproject.toml``: ruff is a command, never imported), and
#: the top-level modules their distributions install.
DEV_DISTRIBUTIONS = ("hypothesis",)
DEV_MODULES = ("hypothesis", "_hypothesis_pytestplugin", "_hypothesis_ftz_detector", "_hypothesis_globals")

_HIDE = f'''
"""Hide the dev extra (tests/test_userday_plain_install.py): its modules cannot be found, its
distributions are not listed, so pytest loads none of their plugins."""
import importlib.machinery
import importlib.metadata

_MODULES = {DEV_MODULES!r}
_DISTRIBUTIONS = {DEV_DISTRIBUTIONS!r}
_find_spec = importlib.machinery.PathFinder.find_spec
_distributions = importlib.metadata.distributions


def _hidden_find_spec(cls, name, path=None, target=None):
    if name.partition(".")[0] in _MODULES:
        return None
    return _find_spec(name, path, target)


def _listed(**kwargs):
    for dist in _distributions(**kwargs):
        if (dist.metadata["Name"] or "").lower() not in _DISTRIBUTIONS:
            yield dist


importlib.machinery.PathFinder.find_spec = classmethod(_hidden_find_spec)
importlib.metadata.distributions = _listed
'''


@pytest.fixture(scope="module")
def plain_env(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """The environment of a child process that sees the plain install only."""
    hide = tmp_path_factory.mktemp("plain-install")
    (hide / "sitecustomize.py").write_text(_HIDE, encoding="utf-8")
    env = {key: value for key, value in os.environ.items() if not key.startswith("PYTEST_")}
    env["PYTHONPATH"] = os.pathsep.join([str(hide), str(ROOT)])
    return env


def _run(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300, check=False
    )


def test_the_dev_extra_is_hidden(plain_env: dict[str, str]) -> None:
    """The simulation holds: hypothesis cannot be imported, and is not listed as installed."""
    code = (
        "import importlib.metadata as m, importlib.util as u; "
        "print(u.find_spec('hypothesis'), any(d.metadata['Name'] == 'hypothesis' for d in m.distributions()))"
    )
    result = _run(["-c", code], plain_env)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["None", "False"]


def test_pytest_skips_the_fuzz_tests_with_the_reason(plain_env: dict[str, str]) -> None:
    """From the repository root, with the root and tests conftests loaded: the fuzz modules are skipped with
    the reason and the command to install it, and the other tests of the run still run."""
    result = _run(
        [
            "-m",
            "pytest",
            "tests/test_fuzz.py",
            "tests/test_model_cli_fuzz.py",
            "tests/test_model_units.py",
            "-q",
            "-rs",
            "--benchmark-disable",
            "-p",
            "no:cacheprovider",
        ],
        plain_env,
    )
    output = result.stdout + result.stderr
    assert result.returncode == 0, output
    assert "Traceback" not in output
    skipped = [line for line in output.splitlines() if line.startswith("SKIPPED")]
    assert len(skipped) == 2, output
    assert all("needs hypothesis, of the dev extra: pip install -e '.[dev]'" in line for line in skipped)
    assert " passed" in output


def test_pytest_benchmark_compare_works_from_the_repository_root(
    plain_env: dict[str, str], tmp_path: Path
) -> None:
    """pytest-benchmark's own CLI loads the project's conftests (its hooks may live there): it compares two
    saved runs without a traceback."""
    platform_folder = tmp_path / "Linux-CPython-3.11-64bit"
    platform_folder.mkdir()
    for number, name in (("0001", "cpu-2core-quick.json"), ("0002", "cpu-2core-quick.json")):
        shutil.copy(DATA / name, platform_folder / f"{number}_{name}")
    code = "import sys; from pytest_benchmark.cli import main; sys.exit(main())"
    result = _run(
        ["-c", code, "--storage", str(tmp_path), "compare", "0001", "0002", "--columns", "min,median"],
        plain_env,
    )
    output = result.stdout + result.stderr
    assert result.returncode == 0, output
    assert "Traceback" not in output
    assert "test_ufunc_size" in output


def test_every_test_module_collects_or_skips_with_the_reason(plain_env: dict[str, str]) -> None:
    """Issue 33: the whole suite, collected as a plain install collects it: no module fails to import; the
    modules that need the dev extra skip with the reason, and they are only the property-based ones."""
    result = _run(
        ["-m", "pytest", "tests", "--collect-only", "-q", "-rs", "-p", "no:cacheprovider"], plain_env
    )
    output = result.stdout + result.stderr
    assert result.returncode == 0, output
    last = [line for line in output.splitlines() if line.strip()][-1]
    assert "tests collected in" in last and "error" not in last, output
    skipped = [line for line in output.splitlines() if line.startswith("SKIPPED")]
    assert skipped and all("needs hypothesis, of the dev extra" in line for line in skipped), skipped
    needing = {Path(line.split()[2].split(":")[0]).name for line in skipped}
    assert needing <= {"test_fuzz.py", "test_model_cli_fuzz.py", "test_properties.py", "test_memo.py"}, (
        needing
    )
