"""Settings shared by the tests: Hypothesis profiles for the property-based fuzz tests, the cache of parsed
runs kept out of the user's, and the environment of what the tests start when pytest-xdist runs them.

``ci`` (the default) is bounded and derandomized: the same examples on every run, so CI stays well under a
minute and a failure reproduces; ``deep`` draws ten times as many, at random, for a local hunt:

    LAUNCHBENCH_HYPOTHESIS=deep python -m pytest tests/test_fuzz.py tests/test_model_cli_fuzz.py

A slow fuzz test sizes itself as a share of the profile's ``max_examples``
(``settings(max_examples=settings().max_examples // 10)``), so one variable scales them all.

Hypothesis comes with the dev extra only (``pip install -e '.[dev]'``): after the plain install the profiles
are not registered, and the fuzz modules skip themselves with that reason (``pytest.importorskip``), so
``python -m pytest`` and pytest-benchmark's own CLI (which loads these conftests) run without it.

Under pytest-xdist (``-n auto --dist loadfile``, in the test command) each worker is a session of its own: its
own temporary folder and cache of parsed runs; the commands and pytest sessions its tests start get the
environment a plain ``python -m pytest`` gives them (``_children_as_in_one_process``).
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

try:
    from hypothesis import HealthCheck, settings
except ImportError:  # the plain install: no fuzz test runs (each skips itself), no profile is needed
    settings = None

#: The environment variable that picks the profile.
PROFILE_VARIABLE = "LAUNCHBENCH_HYPOTHESIS"

if settings is not None:
    settings.register_profile(
        "ci",
        max_examples=300,
        derandomize=True,
        database=None,  # nothing written into the checkout; derandomized runs need no replay store
        deadline=None,  # machines are shared and noisy: a slow example is not a failure
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
        print_blob=True,
    )
    settings.register_profile(
        "deep",
        max_examples=3000,
        derandomize=False,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
        print_blob=True,
    )
    settings.load_profile(os.environ.get(PROFILE_VARIABLE, "ci"))


#: What pytest-xdist adds to a worker's environment (``xdist/remote.py``). A child pytest that inherits
#: ``PYTEST_XDIST_WORKER`` believes it is a worker itself: pytest-benchmark then disables timing
#: (``--benchmark-json`` writes nothing) and refuses ``--benchmark-only``.
XDIST_VARIABLES = ("PYTEST_XDIST_WORKER", "PYTEST_XDIST_WORKER_COUNT", "PYTEST_XDIST_TESTRUNUID")


@pytest.fixture(autouse=True, scope="session")
def _children_as_in_one_process(request: pytest.FixtureRequest) -> Iterator[None]:
    """Under pytest-xdist (``-n``), the commands and pytest sessions the tests start get the environment a
    plain ``pytest`` would give them: without xdist's worker variables, and without the folder xdist put
    first on ``PYTHONPATH`` (a plain run does not, and a child must import what it would import there)."""
    if not hasattr(request.config, "workerinput"):
        yield
        return
    with pytest.MonkeyPatch.context() as patch:
        for name in XDIST_VARIABLES:
            patch.delenv(name, raising=False)
        added = f"{request.config.invocation_params.dir}{os.pathsep}"
        python_path = os.environ.get("PYTHONPATH", "")
        if python_path.startswith(added):
            if python_path == added:
                patch.delenv("PYTHONPATH")
            else:
                patch.setenv("PYTHONPATH", python_path.removeprefix(added))
        yield


@pytest.fixture(autouse=True, scope="session")
def _cache_apart(tmp_path_factory: pytest.TempPathFactory) -> None:
    """The commands the tests run keep their cache of parsed runs (``analysis.cache``) in the session's
    temporary folder, never in the user's: a test's runs are gone when it ends."""
    os.environ["LAUNCHBENCH_CACHE"] = str(tmp_path_factory.mktemp("parsed-runs-cache"))
