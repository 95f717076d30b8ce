"""Property-based fuzz of ``python -m model``'s options (Hypothesis): whatever the values, the CLI returns 0
with strict JSON / text output, or 2 with exactly one ``error: argument --OPTION: ...`` line; it never raises.

Bounded for CI by the shared Hypothesis profiles of ``tests/conftest.py``: in CI a fixed number of examples,
derandomized (the same examples on every run); ``LAUNCHBENCH_HYPOTHESIS=deep`` draws ten times as many.
"""

from __future__ import annotations

import contextlib
import io
import json

import pytest

pytest.importorskip("hypothesis", reason="needs hypothesis, of the dev extra: pip install -e '.[dev]'")
from hypothesis import given
from hypothesis import strategies as st

from model.__main__ import main
from model.hardware import GPUS
from model.llm import MODELS

_NUMBER_TEXT = st.one_of(
    st.integers(min_value=1, max_value=200_000).map(str),  # mostly valid counts, some past the models' limits
    st.floats(min_value=0, max_value=1_000).map(repr),  # mostly valid launch costs and fractions
    st.integers(min_value=-(10**20), max_value=10**20).map(str),
    st.integers(min_value=0, max_value=400).map(lambda digits: "9" * digits),  # up to 10^400
    st.floats(allow_nan=True, allow_infinity=True).map(repr),
    st.floats(min_value=0, max_value=1, allow_subnormal=True).map(repr),
    st.sampled_from(["0", "-0", "1e-320", "1e309", "nan", "-inf", "0x10", "1_000", " 7 ", "", "١٢"]),
    st.text(max_size=12),
)
_NAME_TEXT = st.one_of(st.sampled_from([*GPUS, *MODELS, "h100", "T4"]), st.text(max_size=12))

_OPTION = st.one_of(
    st.tuples(
        st.sampled_from(
            [
                "--ctx",
                "--batch",
                "--eager-gap-us",
                "--graph-gap-us",
                "--ramp-us",
                "--bandwidth-fraction",
                "--pdl-hidden",
            ]
        ),
        st.lists(_NUMBER_TEXT, min_size=1, max_size=1),
    ),
    st.tuples(st.sampled_from(["--launch-us", "--serial"]), st.lists(_NUMBER_TEXT, min_size=1, max_size=3)),
    st.tuples(st.just("--gpu"), st.lists(_NAME_TEXT, min_size=1, max_size=1)),
    st.tuples(st.just("--models"), st.lists(_NAME_TEXT, min_size=1, max_size=2)),
    st.tuples(
        st.just("--dtype"), st.lists(st.sampled_from(["bf16", "fp16", "fp8", ""]), min_size=1, max_size=1)
    ),
)


def _argv(options: list[tuple[str, list[str]]], as_json: bool) -> list[str]:
    """The command line for ``options``. One value is written ``--option=value`` and several ``--option v1
    v2`` with a space before any value that starts with "-", as a user would have to, so that argparse reads
    them as values rather than options."""
    argv: list[str] = []
    for option, values in options:
        if len(values) == 1:
            argv.append(f"{option}={values[0]}")
        else:
            argv += [option, *(f" {value}" if value.startswith("-") else value for value in values)]
    return [*argv, "--json"] if as_json else argv


@given(options=st.lists(_OPTION, max_size=4), as_json=st.booleans())
def test_any_option_values_give_output_or_one_error_line(
    options: list[tuple[str, list[str]]], as_json: bool
) -> None:
    argv = _argv(options, as_json)
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(argv)
    if code == 2:
        assert out.getvalue() == ""
        lines = err.getvalue().splitlines()
        assert len(lines) == 1 and lines[0].startswith("error: argument --"), (argv, lines)
        return
    assert code == 0 and err.getvalue() == "", (argv, err.getvalue())
    if as_json:

        def refuse(constant: str) -> object:
            raise AssertionError(f"non-finite {constant} in JSON for {argv}")

        json.loads(out.getvalue(), parse_constant=refuse)
    else:
        assert "Demo 1" in out.getvalue() and "Demo 2" in out.getvalue()
