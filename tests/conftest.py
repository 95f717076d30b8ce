"""Settings shared by the tests: Hypothesis profiles for the property-based fuzz tests.

``ci`` (the default) is bounded and derandomized: the same examples on every run, so CI stays well under a
minute and a failure reproduces; ``deep`` draws ten times as many, at random, for a local hunt:

    LAUNCHBENCH_HYPOTHESIS=deep python -m pytest tests/test_fuzz.py tests/test_model_cli_fuzz.py

A slow fuzz test sizes itself as a share of the profile's ``max_examples``
(``settings(max_examples=settings().max_examples // 10)``), so one variable scales them all.
"""

from __future__ import annotations

import os

from hypothesis import HealthCheck, settings

#: The environment variable that picks the profile.
PROFILE_VARIABLE = "LAUNCHBENCH_HYPOTHESIS"

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
