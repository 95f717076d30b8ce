"""What analysis accepts from a saved pytest-benchmark run, field by field: the one place where a parsed run
is checked before any of it is used.

Only the fields analysis reads are checked (types, finiteness, ranges); keys it does not read are let through
unchecked, because saved runs outlive the code and keys are only ever added. What a wrong field costs depends
on what it decides:

- a case's statistics or coordinates (``stats``, ``extra_info``, ``name``): the case is dropped, with one line
  naming the file, the case, the field and its value; the run's other cases are used;
- its raw samples (``stats.data``): they are left out of their case, whose statistics stay, with one line;
- the run's own fields (``machine_info``, the run record ``launchbench_run``, ``datetime``, ``version``,
  ``commit_info``): the whole file is dropped with one line, since they say which machine measured the cases
  and whether the run may be pooled with others; a run that cannot be placed is not guessed at.

The checks never change the parsed document: ``check_run`` returns new dicts holding the checked values.

Ranges: a time (a statistic, a raw sample, ``gpu_time_s``) lies within ``TIME_RANGE_S``: shorter than a
picosecond is less than one clock cycle of any CPU or GPU (~0.2 ns at 5 GHz), longer than 10⁶ s (11.6 days)
no round of this suite lasts. Counts and byte sizes are whole numbers up to 2⁵³, the largest float64 holds
exactly.
"""

from __future__ import annotations

import contextlib
import functools
import itertools
import math
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime

import numpy as np

SUITE = "launchbench"

#: The saved JSON's top-level key of the run record (``benchmarks.run_record.RUN_RECORD_KEY``; saved data
#: outlives code, so the key is part of the data contract, not an import).
RUN_RECORD_KEY = "launchbench_run"

#: Shortest and longest time (s) a statistic, a raw sample or a GPU time may be (see the module docstring).
TIME_RANGE_S = (1e-12, 1e6)
#: Largest count or byte size (2⁵³: every whole number up to it is exact in float64).
COUNT_MAX = 2**53
#: Run record statuses (``benchmarks.run_record.RunRecord.status``).
STATUSES = ("completed", "interrupted")

#: Stats keys that are seconds per iteration: the first three must be there.
REQUIRED_TIMES = ("min", "median", "mean")
OPTIONAL_TIMES = ("max", "q1", "q3")
#: Stats keys that are spreads in seconds (≥ 0), and counts (≥ 1).
SPREADS = ("iqr", "stddev")
STAT_COUNTS = ("rounds", "iterations")

#: ``extra_info`` keys of text (``benchmarks/records.py``'s contract); ``case`` and ``device`` are always
#: written (``benchmarks.records.coordinates``) and every family is selected by them.
TEXT_COORDINATES = (
    "case",
    "device",
    "op",
    "dtype",
    "variant",
    "mode",
    "plan",
    "config",
    "layer",
    "framework",
    "compiler",
)
REQUIRED_COORDINATES = ("case", "device")
#: ``extra_info`` counts ≥ 1, counts that may be 0 (a requested kernel duration of 0 ns; FLOPs of a pure
#: copy), times, and rates (B/s, finite and > 0).
POSITIVE_COUNTS = (
    "n",
    "pieces",
    "n_calls",
    "n_kernels",
    "bytes",
    "batch",
    "ctx",
    "rows",
    "cols",
    "probe_bytes",
    "threads",
)
NON_NEGATIVE_COUNTS = ("kernel_ns", "flops", "n_args", "n_args_total")
TIME_COORDINATES = ("gpu_time_s",)
#: Durations in ns that may be 0 and need not be whole (a median of achieved spin durations).
NANOSECOND_COORDINATES = ("achieved_ns", "achieved_timer_ns")
#: ``extra_info`` mappings carried into the frame as they are, once checked: a decode step's call list by op.
MAPPING_COORDINATES = ("op_counts", "probe_op_counts")
#: ``extra_info`` lists of times carried into the frame as tuples, once checked: the CPU decode step's
#: bandwidth probe, one time per timed round of the step.
TIMES_COORDINATES = ("probe_s",)
RATE_COORDINATES = ("spec_bytes_per_s",)

#: The coordinates every case of a family has recorded since the family was first saved (the ``record``
#: calls of ``benchmarks/test_*.py``; keys are only ever added): a case without one was not written by
#: launchbench, and would leave a gap where its family's analysis computes (a count, a size, a label).
FAMILY_COORDINATES = {
    "ufunc_size": ("op", "dtype", "n", "n_calls", "bytes", "flops"),
    "many_vs_one": ("op", "dtype", "n", "pieces", "variant", "n_calls", "bytes", "flops"),
    "host_bandwidth": ("op", "dtype", "n", "bytes"),
    "launch_batch": ("op", "mode", "n_kernels", "gpu_time_s"),
    "graph_replay": ("op", "mode", "n_kernels", "gpu_time_s"),
    "launch_sync_each": ("op", "mode", "n_kernels", "gpu_time_s"),
    "spin": ("op", "mode", "n_kernels", "kernel_ns", "gpu_time_s"),
    "enqueue": ("op", "mode", "n_kernels", "gpu_time_s"),
    "sync": ("op",),
    "decode_step": ("op", "dtype", "bytes"),
    "launch_args": ("op", "mode", "layer", "n_args", "n_kernels"),
    "numpy_op": ("op", "dtype", "n_calls"),
    "decode_floor": ("op", "plan", "config", "n_calls", "op_counts"),
    "framework_call": ("op", "dtype", "framework", "n", "n_calls", "bytes", "flops"),
    "framework_launch": ("op", "framework", "layer", "n_kernels"),
    "framework_step": ("op", "dtype", "framework", "config", "batch", "ctx", "bytes"),
}
#: ... and those of the decode_step family's two operations, and of a whole decode step on each device.
DECODE_OP_COORDINATES = {
    "decode_step": ("plan", "config", "batch", "ctx"),
    "matvec": ("mode", "n_kernels", "rows", "cols", "gpu_time_s"),
}
DECODE_DEVICE_COORDINATES = {"cpu": ("n_calls",), "cuda": ("mode", "n_kernels", "gpu_time_s")}

#: Why a value is wrong (the rule it breaks, e.g. "must be text"), or None when it is right.
Check = Callable[[object], "str | None"]

_MISSING = object()


def is_number(value: object) -> bool:
    """Whether ``value`` is a finite int or float (not a bool, not text; an int too large for a float is not
    finite)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return False
    try:
        return math.isfinite(value)
    except OverflowError:
        return False


def shown(value: object, most: int = 60) -> str:
    """``value`` as one short line in a message: its repr (cut at ``most`` characters), or what kind of
    container it is, so that a message about a bad field is one line however large or odd the field."""
    if isinstance(value, Mapping):
        return "an object"
    if isinstance(value, list | tuple):
        return f"a list of {len(value)}"
    text = repr(value)
    return text if len(text) <= most else f"{text[: most - 1]}…"


def printable(text: object) -> str:
    """``text`` as it may appear inside a one-line message: unchanged when printable, else its repr (a name
    holding a newline or an unpaired surrogate would otherwise break the line or the terminal); and any
    character the standard output cannot encode as a backslash escape ("\\xb5"), so that the output's own
    ASCII spellings of units (µ → u, ``model.units.text_for_encoding``) never turn a file's name into
    another name."""
    text = str(text)
    text = text if text.isprintable() else repr(text)
    if text.isascii():  # every stream encodes it: the common case, at the cost of one check
        return text
    encoding = getattr(sys.stdout, "encoding", None)
    if encoding:
        with contextlib.suppress(LookupError):
            return text.encode(encoding, "backslashreplace").decode(encoding)
    return text


# --- the checks of one value --------------------------------------------------------------------------------


def _text(value: object) -> str | None:
    if not isinstance(value, str):
        return "must be text"
    if not value.isprintable():  # a newline, a control character, an unpaired surrogate
        return "must be printable text"
    return None


def _name(value: object) -> str | None:
    return _text(value) or ("must not be empty" if not value else None)


def _count(low: int) -> Check:
    """A count ≥ ``low`` (1 or 0): a whole number up to ``COUNT_MAX``."""

    def check(value: object) -> str | None:
        problem = _positive(value) if low else _non_negative(value)
        if problem:
            return problem
        if value != int(value):
            return "must be a whole number"
        return "must be at most 2^53" if value > COUNT_MAX else None

    _FAST[check] = lambda value: type(value) is int and low <= value <= COUNT_MAX  # an int, not a bool
    return check


def _time(value: object) -> str | None:
    low, high = TIME_RANGE_S
    if not is_number(value) or value <= 0:
        return "a time must be a finite number > 0 s"
    if not low <= value <= high:
        return f"a time must lie within {low:g} s … {high:g} s"
    return None


def _spread(value: object) -> str | None:
    if not is_number(value) or value < 0:
        return "a spread must be a finite number ≥ 0 s"
    if value > TIME_RANGE_S[1]:
        return f"a spread must be at most {TIME_RANGE_S[1]:g} s"
    return None


def _positive(value: object) -> str | None:
    return None if is_number(value) and value > 0 else "must be a finite number > 0"


def _non_negative(value: object) -> str | None:
    return None if is_number(value) and value >= 0 else "must be a finite number ≥ 0"


def _boolean(value: object) -> str | None:
    return None if isinstance(value, bool) else "must be true or false"


def _status(value: object) -> str | None:
    return None if value in STATUSES else f"must be {' or '.join(map(repr, STATUSES))}"


def _iso_time(value: object) -> str | None:
    if _text(value):
        return "must be an ISO 8601 time"
    try:
        datetime.fromisoformat(value)
    except ValueError:
        return "must be an ISO 8601 time"
    return None


def _op_counts(value: object) -> str | None:
    """A call list by op: a non-empty object of printable op names, each to a count ≥ 1."""
    if not isinstance(value, Mapping) or not value:
        return "must be a non-empty object of op -> count"
    for op, count in value.items():
        if _name(op) or _COUNT_ONE(count):
            return f"must map each op to a count ≥ 1 (bad entry: {shown(op)}: {shown(count)})"
    return None


def _list_of(check: Check, what: str) -> Check:
    def check_list(value: object) -> str | None:
        if not isinstance(value, list) or any(check(item) for item in value):
            return f"must be a list of {what}"
        return None

    return check_list


def _times(value: object) -> str | None:
    """A non-empty list of times (``_time`` each), e.g. the rounds of the CPU decode step's probe."""
    return "must not be empty" if value == [] else _list_of(_time, "times, each a finite number > 0 s")(value)


def _nullable(check: Check) -> Check:
    """``check``, with null allowed (the writer saves null for what it could not read)."""

    def nullable(value: object) -> str | None:
        return None if value is None else check(value)

    test = _fast(check)
    _FAST[nullable] = lambda value: value is None or test(value)
    return nullable


# --- the same checks, told fast for the usual value ---------------------------------------------------------

#: A fast test per check: True only where the check finds nothing wrong (a value of the plain type JSON
#: gives, within range); False also for some right values of another type (a count saved as 5.0), which the
#: check itself then judges (``_passes``). Inline comparisons instead of a check's calls: a fleet's 10⁵
#: cases hold 10⁷ checked fields, and checking them was most of the loading workers' time.
_FAST: dict[Check, Callable[[object], bool]] = {}


def _fast(check: Check) -> Callable[[object], bool]:
    """``check``'s fast test (``_FAST``), or the check itself where it has none."""
    test = _FAST.get(check)
    return test if test is not None else lambda value: check(value) is None


def _in_range(low: float, high: float) -> Callable[[object], bool]:
    """The fast test of a number within ``low`` … ``high``: a float, or an int (not a bool) within float64's
    exact range (``is_number``'s finite numbers; NaN, ±inf and huge ints fail), in one comparison chain
    inlined, for the test runs for 10⁷ fields of a fleet."""
    int_low, int_high = max(low, -COUNT_MAX), min(high, COUNT_MAX)
    return lambda value: (
        (type(value) is float and low <= value <= high)
        or (type(value) is int and int_low <= value <= int_high)
    )


#: The largest finite float: a test's upper bound where any finite number will do (inf fails it).
_FLOAT_MAX = sys.float_info.max
#: A count ≥ 1, the check of each entry of a call list (``_op_counts``).
_COUNT_ONE = _count(1)
_FAST.update(
    {
        _time: _in_range(*TIME_RANGE_S),
        _spread: _in_range(0, TIME_RANGE_S[1]),
        _positive: lambda value: (
            (type(value) is float and 0 < value <= _FLOAT_MAX)
            or (type(value) is int and 0 < value <= COUNT_MAX)
        ),
        _non_negative: _in_range(0, _FLOAT_MAX),
        _text: lambda value: type(value) is str and value.isprintable(),
        _name: lambda value: type(value) is str and value != "" and value.isprintable(),
    }
)
_FAST.update(
    {
        _op_counts: lambda value: (
            isinstance(value, Mapping)
            and len(value) > 0
            and all(_FAST[_name](op) and _FAST[_COUNT_ONE](count) for op, count in value.items())
        ),
        _times: lambda value: type(value) is list and len(value) > 0 and all(map(_FAST[_time], value)),
    }
)


TEXT = _nullable(_text)
TEXTS = _nullable(_list_of(_text, "text"))
#: Lines of free text (a fault's error message may hold a newline): shown through ``printable``.
LINES = _nullable(_list_of(lambda value: None if isinstance(value, str) else "must be text", "text"))
LOADS = _nullable(_list_of(_non_negative, "finite numbers ≥ 0"))
CPUS = _nullable(_count(1))


@dataclass(frozen=True)
class Fields:
    """The checked fields of one JSON object: key -> a value check or the ``Fields`` of a nested object.
    ``required``: this object must be there (else null or absent is fine, as "not known");
    ``required_keys``: keys that must be in it."""

    checks: Mapping[str, Check | Fields]
    required: bool = False
    required_keys: tuple[str, ...] = ()

    @functools.cached_property
    def tests(self) -> tuple[tuple[str, ...], tuple[tuple[str, Callable[[object], bool]], ...]]:
        """(the keys of the required objects, each key's fast test): what ``_passes`` reads."""
        objects = tuple(
            key for key, check in self.checks.items() if isinstance(check, Fields) and check.required
        )
        return objects, tuple((key, _field_test(check)) for key, check in self.checks.items())

    @functools.cached_property
    def test_of(self) -> dict[str, Callable[[object], bool]]:
        """Each key's fast test (``tests``) by key."""
        return dict(self.tests[1])


def _field_test(check: Check | Fields) -> Callable[[object], bool]:
    """The fast test of one field: its check's (``_fast``), or an object's (null where not required, else
    an object that ``_passes`` its fields)."""
    if not isinstance(check, Fields):
        return _fast(check)
    return lambda item: item is None or (_is_mapping(item) and _passes(item, check))


#: The run-level fields analysis reads (``analysis.load.machine_identity``, ``analysis.load._run_info``):
#: the machine, and when and by what the run was saved.
MACHINE_FIELDS = Fields(
    {
        "machine_info": Fields(
            {
                "node": TEXT,
                "system": TEXT,
                "processor": TEXT,
                "cpu": Fields({"brand_raw": TEXT, "brand": TEXT, "count": CPUS}),
                SUITE: Fields(
                    {
                        "host": TEXT,
                        "system": TEXT,
                        "cpu_model": TEXT,
                        "machine_id": TEXT,
                        "machine_name": TEXT,
                        "machine_fingerprint": TEXT,
                        "gpu": Fields({"name": TEXT}),
                        "logical_cpus": CPUS,
                        "usable_cpus": CPUS,
                        "load_avg": LOADS,
                        "llc_bytes": _nullable(_count(1)),
                        "core_cache_bytes": _nullable(_count(1)),
                    }
                ),
            },
            required=True,
        ),
    }
)
PROVENANCE_FIELDS = Fields(
    {"datetime": _nullable(_iso_time), "version": TEXT, "commit_info": Fields({"id": TEXT})}
)

#: The run record's fields analysis reads (``benchmarks/run_record.py`` writes them), when it has a status.
RECORD_FIELDS = Fields(
    {
        RUN_RECORD_KEY: Fields(
            {
                "status": _status,
                "quick": _boolean,
                "interrupted_by": TEXT,
                "cases": Fields(
                    {"planned": _nullable(_count(0)), "measured": _nullable(_count(0)), "unfinished": TEXTS}
                ),
                "selection": Fields({"keyword": TEXT, "markexpr": TEXT}),
                "conditions": Fields(
                    {
                        "usable_cpus": CPUS,
                        "start": Fields({"load_avg": LOADS}),
                        "during": Fields(
                            {
                                "other_cpu_share": _nullable(_non_negative),
                                "steal_share": _nullable(_non_negative),
                            }
                        ),
                        "gpu_slowdown": TEXTS,
                    }
                ),
                "faults": LINES,
            },
            required_keys=("status", "quick"),
        )
    }
)

#: The fields of one launchbench case (a pytest-benchmark benchmark whose ``extra_info.suite`` is ours).
CASE_FIELDS = Fields(
    {
        "name": _name,
        "fullname": _name,
        "group": TEXT,
        "extra_info": Fields(
            {
                **dict.fromkeys(TEXT_COORDINATES, _name),
                **dict.fromkeys(POSITIVE_COUNTS, _count(1)),
                **dict.fromkeys(NON_NEGATIVE_COUNTS, _count(0)),
                **dict.fromkeys(TIME_COORDINATES, _time),
                **dict.fromkeys(RATE_COORDINATES, _positive),
                **dict.fromkeys(NANOSECOND_COORDINATES, _non_negative),
                **dict.fromkeys(MAPPING_COORDINATES, _op_counts),
                **dict.fromkeys(TIMES_COORDINATES, _times),
            },
            required=True,
            required_keys=REQUIRED_COORDINATES,
        ),
        "stats": Fields(
            {
                **dict.fromkeys((*REQUIRED_TIMES, *OPTIONAL_TIMES), _time),
                **dict.fromkeys(SPREADS, _spread),
                **dict.fromkeys(STAT_COUNTS, _count(1)),
                "ops": _positive,
            },
            required=True,
            required_keys=REQUIRED_TIMES,
        ),
        "options": Fields({"max_time": _nullable(_non_negative)}),
    },
    required_keys=("name",),
)


def first_problem(value: Mapping, fields: Fields, prefix: str = "") -> str | None:
    """The first field of ``value`` that breaks ``fields``, as "FIELD = VALUE (RULE)" or "FIELD is missing"
    (FIELD as a dotted path after ``prefix``); None when every checked field is right."""
    return None if _passes(value, fields) else _first_problem(value, fields, prefix)


def _passes(value: Mapping, fields: Fields) -> bool:
    """Whether every checked field of ``value`` is right, told by the fast tests (``_FAST``): True only where
    ``_first_problem`` finds none; False where a test is unsure, and ``_first_problem`` then names the
    first problem in the schema's order, or finds none."""
    objects, tests = fields.tests
    for key in fields.required_keys:
        if key not in value:
            return False
    for key in objects:
        if value.get(key) is None:
            return False
    if len(value) < len(tests):  # a case's extra_info holds a few of the many coordinates checked
        by_key = fields.test_of
        for key, item in value.items():
            test = by_key.get(key)
            if test is not None and not test(item):
                return False
        return True
    for key, test in tests:
        item = value.get(key, _MISSING)
        if item is not _MISSING and not test(item):
            return False
    return True


def _first_problem(value: Mapping, fields: Fields, prefix: str = "") -> str | None:
    """``first_problem``, field by field in the schema's order."""
    for key in fields.required_keys:
        if key not in value:
            return f"{prefix}{key} is missing"
    # The field's path is written only for a problem: a case holds a few of the many coordinates checked,
    # and a fleet of runs 10⁶ fields.
    for key, check in fields.checks.items():
        item = value.get(key, _MISSING)
        if isinstance(check, Fields):
            if item is _MISSING or item is None:
                if check.required:
                    return f"{prefix}{key} is missing"
                continue
            if not isinstance(item, Mapping):
                return f"{prefix}{key} = {shown(item)} (must be an object)"
            problem = _first_problem(item, check, f"{prefix}{key}.")
            if problem:
                return problem
        elif item is not _MISSING:
            rule = check(item)
            if rule is not None:
                return f"{prefix}{key} = {shown(item)} ({rule})"
    return None


# --- one run ------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class CheckedRun:
    """What ``check_run`` found in one parsed run.

    ``run``: the run-level fields, checked (``machine_info``, ``record``: the run record or None for a run
    saved before it existed, ``datetime``, ``version``, ``commit``), None when the file is unusable;
    ``cases``: each usable launchbench case as a new dict (``name``, ``fullname``, ``group``,
    ``extra_info`` (scalar values only), ``stats`` (the checked statistics, ``ops`` filled, ``data`` as a
    float64 array or None), ``options``); ``problems``: one line per case dropped or samples left out, and
    one for a file that is unusable, each starting with the source.
    """

    run: dict[str, object] | None
    cases: tuple[dict[str, object], ...]
    problems: tuple[str, ...]


def check_run(doc: object, source: str) -> CheckedRun:
    """Check one parsed pytest-benchmark run (``source`` names it in the problem lines): its run-level fields,
    then each launchbench case; see the module docstring for what a wrong field costs."""
    name = printable(source)

    def unusable(*lines: str) -> CheckedRun:
        return CheckedRun(run=None, cases=(), problems=tuple(f"{name}: {line}" for line in lines))

    if not isinstance(doc, Mapping) or not isinstance(doc.get("benchmarks"), list):
        return unusable("JSON but not a pytest-benchmark run (no 'benchmarks' list)")
    benchmarks = doc["benchmarks"]
    if not benchmarks:
        return unusable("saved run holds no benchmarks")
    ours = [bench for bench in benchmarks if is_ours(bench)]
    if not ours:
        return unusable(f"no launchbench case among its {len(benchmarks)} benchmarks (another suite's run?)")
    record = doc.get(RUN_RECORD_KEY)
    if isinstance(record, Mapping) and "status" not in record:
        record = None  # a record without a status is read as none (runs saved before it existed)
    for fields, role in (
        (MACHINE_FIELDS, "the machine that measured the run cannot be told"),
        (RECORD_FIELDS, "whether the run may be pooled with others cannot be told"),
        (PROVENANCE_FIELDS, "when and by what the run was saved cannot be told"),
    ):
        problem = first_problem({**doc, RUN_RECORD_KEY: record}, fields)
        if problem:
            return unusable(f"dropped: {problem}; {role}")
    problems: list[str] = []
    cases = []
    for bench in ours:
        case, problem, samples_problem = _checked_case(bench)
        if case is None:
            problems.append(f"{name}: case {_label(bench)}: dropped: {problem}")
            continue
        cases.append(case)
        if samples_problem:
            problems.append(f"{name}: case {_label(bench)}: raw samples left out: {samples_problem}")
    if not cases:
        lines = (*problems, f"{name}: none of its {len(ours)} launchbench cases is usable")
        return CheckedRun(run=None, cases=(), problems=lines)
    commit = doc.get("commit_info") or {}
    run = {
        "machine_info": doc["machine_info"],
        "record": record,
        "datetime": doc.get("datetime"),
        "version": doc.get("version"),
        "commit": commit.get("id"),
    }
    return CheckedRun(run=run, cases=tuple(cases), problems=tuple(problems))


def _label(bench: Mapping) -> str:
    """A case as its problem lines name it."""
    return printable(bench.get("fullname") or bench.get("name") or "?")


def is_ours(bench: object) -> bool:
    """True for a benchmark that launchbench's ``record`` tagged (its ``extra_info`` names the suite)."""
    if not _is_mapping(bench):
        return False
    extra = bench.get("extra_info")
    return _is_mapping(extra) and extra.get("suite") == SUITE


def _is_mapping(value: object) -> bool:
    """``isinstance(value, Mapping)``, told first by the type a parser gives (an ABC's check costs four times
    as much, and runs for every object of every case)."""
    return type(value) is dict or isinstance(value, Mapping)


def _checked_case(bench: Mapping) -> tuple[dict[str, object] | None, str | None, str | None]:
    """(the checked case or None, why it is dropped, why its raw samples are left out) of one of our cases."""
    problem = first_problem(bench, CASE_FIELDS) or _family_problem(bench["extra_info"])
    if problem:
        return None, problem, None
    stats = bench["stats"]
    if not _in_order(stats):
        order = [(key, stats[key]) for key in _ORDERED_STATS if key in stats]
        for (low_key, low), (high_key, high) in itertools.pairwise(order):
            if low > high:
                chain = " ≤ ".join(f"{key} {value!r}" for key, value in order)
                return None, f"stats out of order: {chain} does not hold ({low_key} > {high_key})", None
    data, samples_problem = _samples(stats.get("data"))
    kept = (*REQUIRED_TIMES, *OPTIONAL_TIMES, *SPREADS, *STAT_COUNTS, "ops")
    checked_stats = {key: stats[key] for key in kept if key in stats}
    checked_stats.setdefault("ops", 1 / stats["mean"])  # pytest-benchmark < 3.1 did not save it
    checked_stats["data"] = data
    extra_info = bench["extra_info"]
    if set(map(type, extra_info.values())) <= _PLAIN_SCALARS:  # the usual case, told at C speed
        extra = dict(extra_info)
    else:
        extra = {
            key: dict(value)
            if key in MAPPING_COORDINATES
            else tuple(value)
            if key in TIMES_COORDINATES
            else value
            for key, value in extra_info.items()
            if _scalar(value) or key in MAPPING_COORDINATES or key in TIMES_COORDINATES
        }
    case = {
        "name": bench["name"],
        "fullname": bench.get("fullname"),
        "group": bench.get("group"),
        "extra_info": extra,
        "stats": checked_stats,
        "options": dict(bench.get("options") or {}),
    }
    return case, None, samples_problem


#: The statistics that must not decrease in this order (``_checked_case``).
_ORDERED_STATS = ("min", "q1", "median", "q3", "max")


def _in_order(stats: Mapping) -> bool:
    """Whether all of ``_ORDERED_STATS`` are there and in order, in one comparison chain: the usual case,
    told without listing them (they are numbers, checked before)."""
    try:
        return stats["min"] <= stats["q1"] <= stats["median"] <= stats["q3"] <= stats["max"]
    except KeyError:
        return False


def _family_problem(extra: Mapping) -> str | None:
    """The first coordinate ``extra``'s family always records that it lacks (``FAMILY_COORDINATES``), as
    "extra_info.KEY is missing (...)"; None for a complete case, and for a family this code does not know."""
    case = extra["case"]
    wanted = list(FAMILY_COORDINATES.get(case, ()))
    if case == "decode_step":
        op = extra.get("op")
        wanted += DECODE_OP_COORDINATES.get(op, ())
        if op == "decode_step":
            wanted += DECODE_DEVICE_COORDINATES.get(extra["device"], ())
    for key in wanted:
        if extra.get(key) is None:
            return f"extra_info.{key} is missing (every {case} case records it)"
    return None


#: The types of JSON's scalars as a parser gives them (``_scalar``'s values, subclasses aside).
_PLAIN_SCALARS = frozenset({str, int, float, bool, type(None)})


def _scalar(value: object) -> bool:
    """Whether an ``extra_info`` value can be a frame cell: text, a number, true/false or null. Keys analysis
    does not know that hold a list or an object are not carried into the frame (nothing reads them); the
    known mappings (``MAPPING_COORDINATES``) are, once checked."""
    return value is None or isinstance(value, str | int | float | bool)


#: Raw samples up to this many are checked in Python (a quick run's cases hold a few): numpy's calls on a
#: small array cost more than the comparisons.
_FEW_SAMPLES = 64


def _samples(data: object) -> tuple[np.ndarray | None, str | None]:
    """The raw samples as a float64 array, or None with why they are left out (None, None when not saved)."""
    if data is None:
        return None, None
    if not isinstance(data, list) or not set(map(type, data)) <= {int, float}:  # at C speed: 10⁵ samples
        return None, "stats.data is not a list of numbers"
    if not data:
        return None, "stats.data is empty"
    low, high = TIME_RANGE_S
    if len(data) <= _FEW_SAMPLES and all(low <= value <= high for value in data):  # fast: no numpy per check
        return np.asarray(data, dtype=float), None
    try:
        values = np.asarray(data, dtype=float)
    except OverflowError:  # an int beyond float64
        return None, "stats.data holds a number beyond float64"
    low, high = TIME_RANGE_S
    impossible = ~(np.isfinite(values) & (values > 0))
    if impossible.any():
        bad = values[impossible]
        return None, (
            f"{bad.size} of {values.size} are not finite and > 0 s (first: {float(bad[0])!r}); "
            "its statistics are used"
        )
    outside = (values < low) | (values > high)
    if outside.any():
        bad = values[outside]
        return None, (
            f"{bad.size} of {values.size} lie outside {low:g} s … {high:g} s (first: {float(bad[0])!r}); "
            "its statistics are used"
        )
    return values, None
