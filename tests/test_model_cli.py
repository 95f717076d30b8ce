"""python -m model: the demos' tables (each seed figure found in its row and column), JSON rows, one-line
errors for every bad value, the memory-fit flag, and output on terminals that cannot encode µ, × or ∞."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from model.__main__ import main
from model.published import markdown as published_markdown

REPO_ROOT = Path(__file__).resolve().parents[1]


def _run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main(argv)
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def _table(out: str, first_header: str) -> list[dict[str, str]]:
    """The rows of the text table whose header line starts with ``first_header``, as {header: cell}; columns
    are cut where the dashed rule under the header puts them."""
    lines = out.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(first_header))
    header, rule = lines[start], lines[start + 1]
    spans = []
    position = 0
    for dashes in rule.split("  "):
        if dashes:
            spans.append((position, position + len(dashes)))
            position += len(dashes)
        position += 2
    names = [header[a:b].strip() for a, b in spans]
    rows = []
    for line in lines[start + 2 :]:
        if not line.strip():
            break
        rows.append({name: line[a:b].strip() for name, (a, b) in zip(names, spans, strict=True)})
    return rows


def _row(rows: list[dict[str, str]], **match: str) -> dict[str, str]:
    found = [row for row in rows if all(row[key] == value for key, value in match.items())]
    assert len(found) == 1, (match, found)
    return found[0]


def _line(out: str, start: str) -> str:
    found = [line for line in out.splitlines() if line.startswith(start)]
    assert len(found) == 1, (start, found)
    return found[0]


def _strict_json(text: str) -> object:
    def refuse(constant: str) -> object:
        raise AssertionError(f"non-finite number {constant} in JSON output")

    return json.loads(text, parse_constant=refuse)


def test_default_run_prints_the_seed_figures_in_their_rows_and_columns(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, out, err = _run([], capsys)
    assert (code, err) == (0, "")

    scaling = _table(out, "serial fraction s")
    assert list(scaling[0]) == [
        "serial fraction s",
        "law",
        "n = 8",
        "n = 132",
        "n = 16,896",
        "n = 135,168",
        "n → ∞",
    ]
    amdahl_01 = _row(scaling, law="Amdahl", **{"serial fraction s": "0.1%"})
    assert amdahl_01["n = 16,896"] == "944"  # Amdahl stops at 944 for s = 0.1 % on 16,896 lanes
    assert amdahl_01["n → ∞"] == "1,000"
    assert _row(scaling, **{"serial fraction s": "0.01%"})["n → ∞"] == "10,000"
    gustafson_rows = [row for row in scaling if row["law"] == "Gustafson"]
    assert {row["n → ∞"] for row in gustafson_rows} == {"∞"}

    assert _line(out, "Llama-3.1-8B: reads").endswith(
        "reads 15.0 GB of weights + 134 MB of KV cache per step -> GPU lower bound 4.52 ms (memory-bound)"
    )
    assert _line(out, "Llama-3.2-1B: reads").endswith("-> GPU lower bound 748 µs (memory-bound)")

    decode = _table(out, "model ")
    for model, plan, kernels in [
        ("Llama-3.1-8B", "unfused", "387"),
        ("Llama-3.1-8B", "fused", "259"),
        ("Llama-3.2-1B", "unfused", "195"),
        ("Llama-3.2-1B", "fused", "131"),
        ("Llama-3.2-1B", "megakernel", "1"),
    ]:
        row = _row(decode, model=model, plan=plan, **{"launch cost": "8.00 µs"})
        assert row["kernels/step"] == kernels
    assert _row(decode, model="Llama-3.1-8B", plan="fused", **{"launch cost": "2.00 µs"})[
        "GPU lower bound"
    ] == ("4.52 ms")
    slow = {"launch cost": "8.00 µs"}
    assert _row(decode, model="Llama-3.2-1B", plan="fused", **slow)["overlapped: step"] == "1.05 ms"
    assert _row(decode, model="Llama-3.2-1B", plan="unfused", **slow)["overlapped: step"] == "1.56 ms"
    for model, low, high in [("Llama-3.1-8B", 10, 41), ("Llama-3.2-1B", 26, 68)]:
        shares = [
            int(row["overhead share"].rstrip("%"))
            for row in decode
            if row["model"] == model and row["plan"] != "megakernel"
        ]
        assert (min(shares), max(shares)) == (low, high)
        assert f"take {low}%–{high}% of the step" in _line(out, f"  - {model}: the GPU needs")


def test_json_rows(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _run(["--json", "--launch-us", "8", "--models", "Llama-3.2-1B"], capsys)
    assert code == 0
    document = _strict_json(out)
    assert document["config"]["launch_s"] == [8e-6]
    assert document["config"]["gpu_source"] == "datasheet"
    assert document["warnings"] == []
    rows = {row["plan"]: row for row in document["decode"]}
    assert rows["fused"]["n_kernels"] == 131
    assert rows["fused"]["overlapped_s"] == pytest.approx(1.048e-3)
    assert rows["megakernel"]["n_kernels"] == 1
    assert {row["n"] for row in document["scaling"]} == {8, 132, 16_896, 135_168}
    (model,) = document["models"]
    assert model["max_position_embeddings"] == 131_072 and model["sliding_window"] is None
    assert model["kv_tokens"] == 1024 and model["fits_memory"] is True


def test_json_writes_unbounded_limits_as_strings(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _run(["--json", "--serial", "0", "1"], capsys)
    assert code == 0
    limits = {
        (row["serial_fraction"], row["amdahl_limit"], row["gustafson_limit"])
        for row in _strict_json(out)["scaling"]
    }
    assert limits == {(0.0, "inf", "inf"), (1.0, 1.0, 1.0)}


def test_json_of_extreme_valid_values_is_strict_json(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["--json", "--batch", str(2**53), "--ctx", "131072", "--launch-us", "1000000", "0", "--gpu", "T4"]
    code, out, _ = _run([*argv, "--serial", "0", "2.2250738585072014e-308", "1"], capsys)
    assert code == 0
    document = _strict_json(out)
    assert document["models"][0]["t_compute_s"] is None  # a T4 has no BF16 tensor rate: null, not a number
    assert document["models"][0]["fits_memory"] is False


def test_gustafson_at_s_1_shows_its_limit(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _run(["--serial", "1"], capsys)
    assert code == 0
    amdahl_row, gustafson_row = _table(out, "serial fraction s")
    assert amdahl_row["serial fraction s"] == "100%" and gustafson_row["law"] == "Gustafson"
    assert amdahl_row["n → ∞"] == gustafson_row["n → ∞"] == "1"
    assert gustafson_row["n = 135,168"] == "1"


def test_options_change_the_tables(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _run(["--gpu", "h200", "--ctx", "4096", "--batch", "8", "--models", "Qwen2.5-7B"], capsys)
    assert code == 0
    assert "H200-SXM (datasheet): 4.80 TB/s memory bandwidth, 989 TFLOP/s dense BF16 tensor peak" in out
    assert "ctx = 4096" in out and "batch = 8" in out
    assert {row["model"] for row in _table(out, "model ")} == {"Qwen2.5-7B"}


def test_sliding_window_in_the_output(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _run(["--models", "Mistral-7B-v0.1", "--ctx", "32768"], capsys)
    assert code == 0
    assert _line(out, "Mistral-7B-v0.1: reads") == (
        "Mistral-7B-v0.1: reads 14.2 GB of weights + 537 MB of KV cache "
        "(the last 4,096 tokens: sliding window) per step -> GPU lower bound 4.41 ms (memory-bound)"
    )


def test_gpu_without_the_dtype_says_the_bound_is_memory_only(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _run(["--gpu", "T4", "--models", "Llama-3.2-1B"], capsys)
    assert code == 0
    assert "T4 (datasheet): 320 GB/s memory bandwidth, no dense BF16 tensor rate, 16.0 GB of memory" in out
    assert _line(out, "Llama-3.2-1B: reads").endswith("memory term only: T4 has no dense BF16 tensor rate")
    code, out, _ = _run(["--gpu", "T4", "--models", "Llama-3.2-1B", "--dtype", "fp16"], capsys)
    assert "65.0 TFLOP/s dense FP16 tensor peak" in out
    assert "memory term only" not in out


@pytest.mark.parametrize(
    "argv",
    [["--models", "Llama-3.1-70B"], ["--models", "Llama-3.1-8B", "--batch", "64", "--ctx", "131072"]],
    ids=["70B weights", "64 x 131072 KV"],
)
def test_step_that_does_not_fit_is_flagged(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _run(argv, capsys)
    assert code == 0
    model = argv[1]
    assert _line(out, "  WARNING does not fit:").startswith(f"  WARNING does not fit: {model} needs at least")
    assert "more than the 80.0 GB of one H100-SXM" in out  # the datasheet's decimal GB
    assert {row["model"] for row in _table(out, "model ")} == {f"{model} (does not fit)"}
    code, out, _ = _run([*argv, "--json"], capsys)
    document = _strict_json(out)
    assert document["models"][0]["fits_memory"] is False
    assert document["models"][0]["resident_bytes"] > document["config"]["gpu_mem_bytes"] == 80 * 10**9
    assert len(document["warnings"]) == 1 and document["warnings"][0].startswith(f"does not fit: {model}")


@pytest.mark.parametrize(
    ("argv", "option", "mentions"),
    [
        (["--gpu", "nope"], "--gpu", "'nope'"),
        (["--models", "gpt-9"], "--models", "'gpt-9'"),
        (["--ctx", "0"], "--ctx", "'0'"),
        (["--ctx", "1e3"], "--ctx", "'1e3'"),
        (["--ctx", "1e309"], "--ctx", "'1e309'"),
        (["--ctx", str(10**309)], "--ctx", "(310 characters)"),
        (["--ctx", "9" * 5000], "--ctx", "(5,000 characters)"),  # longer than int() reads
        (["--ctx", "1000000000000"], "--ctx", "max_position_embeddings of 131,072"),
        (
            ["--ctx", "131073"],
            "--ctx",
            "ctx 131,073 exceeds Llama-3.1-8B's max_position_embeddings of 131,072",
        ),
        (["--models", "Mistral-7B-v0.1", "--ctx", "40000"], "--ctx", "max_position_embeddings of 32,768"),
        (["--batch", "-2"], "--batch", "'-2'"),
        (["--batch", str(2**53 + 1)], "--batch", f"'{2**53 + 1}'"),
        (["--launch-us", "fast"], "--launch-us", "'fast'"),
        (["--launch-us", "nan"], "--launch-us", "'nan'"),
        (["--launch-us", "inf"], "--launch-us", "'inf'"),
        (["--launch-us", "1e400"], "--launch-us", "'1e400'"),
        (["--launch-us", "-1"], "--launch-us", "'-1'"),
        (["--launch-us", "2e6"], "--launch-us", "'2e6'"),
        (["--serial", "2"], "--serial", "'2'"),
        (["--serial", "-0.1"], "--serial", "'-0.1'"),
        (["--serial", "nan"], "--serial", "'nan'"),
        (["--serial", "1e-320", "--json"], "--serial", "'1e-320'"),  # 1/s would overflow
        (["--dtype", "fp8"], "--dtype", "'fp8'"),
    ],
)
def test_bad_command_line_is_one_error_line(
    argv: list[str], option: str, mentions: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = _run(argv, capsys)
    assert code == 2
    assert out == ""
    lines = err.splitlines()
    assert len(lines) == 1
    assert lines[0].startswith(f"error: argument {option}: ") and mentions in lines[0]


def _module(argv: list[str], **env: str) -> subprocess.CompletedProcess[bytes]:
    base = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("PYTHONIO", "PYTHONUTF8", "LC_"))
    }
    return subprocess.run(
        [sys.executable, "-m", "model", *argv],
        capture_output=True,
        cwd=REPO_ROOT,
        env=base | {"PYTHONPATH": str(REPO_ROOT)} | env,
        check=False,
    )


def test_module_entry_point_exits_2_without_traceback() -> None:
    result = _module(["--gpu", "nope"])
    assert result.returncode == 2
    assert result.stderr.decode().startswith("error: argument --gpu: unknown GPU 'nope'")
    assert b"Traceback" not in result.stderr


@pytest.mark.parametrize(
    "env",
    [
        {"PYTHONIOENCODING": "ascii"},
        {
            "LC_ALL": "C",
            "PYTHONCOERCECLOCALE": "0",
            "PYTHONUTF8": "0",
        },  # a C locale without UTF-8 mode: ASCII
        {"LC_ALL": "C", "PYTHONCOERCECLOCALE": "0"},  # as the issue ran it (UTF-8 mode may take over)
    ],
    ids=["PYTHONIOENCODING=ascii", "C locale, no UTF-8 mode", "C locale"],
)
def test_any_terminal_encoding(env: dict[str, str]) -> None:
    result = _module([], **env)
    assert result.returncode == 0, result.stderr
    assert result.stderr == b""
    text = result.stdout.decode("utf-8")
    if result.stdout.isascii():
        assert "GPU lower bound 748 us (memory-bound)" in text
        assert "n -> inf" in text and "8.00 us" in text and "SiLU x mul" in text
    else:
        assert "GPU lower bound 748 µs (memory-bound)" in text
    for extra in (["--help"], ["--json"]):
        assert _module(extra, **env).returncode == 0
    error = _module(["--gpu", "Ĥ100"], **env)
    assert error.returncode == 2 and b"Traceback" not in error.stderr
    assert len(error.stderr.splitlines()) == 1


def test_ascii_terminal_gets_ascii_spellings() -> None:
    result = _module(["--models", "Llama-3.2-1B"], PYTHONIOENCODING="ascii")
    assert result.returncode == 0
    assert result.stdout.isascii()
    out = result.stdout.decode("ascii")
    # The tables are laid out at the ASCII spellings' widths: every cell is found in its column.
    scaling = _table(out, "serial fraction s")
    assert _row(scaling, law="Amdahl", **{"serial fraction s": "0.1%"})["n -> inf"] == "1,000"
    assert {row["n -> inf"] for row in scaling if row["law"] == "Gustafson"} == {"inf"}
    decode = _table(out, "model ")
    row = _row(decode, plan="fused", **{"launch cost": "8.00 us"})
    assert (row["GPU lower bound"], row["overlapped: step"]) == ("748 us", "1.05 ms")
    assert "tok/s (serial-overlapped)" in row
    help_result = _module(["--help"], PYTHONIOENCODING="ascii")
    assert help_result.returncode == 0 and b"launch in us" in help_result.stdout
    error = _module(["--gpu", "Ĥ100"], PYTHONIOENCODING="ascii")
    assert error.stderr.startswith(b"error: argument --gpu: unknown GPU '\\u0124100'; known GPUs: H100-SXM")


def _hardware_table(out: str) -> list[dict[str, str]]:
    """The rows of demo 2's second table, as measured systems run it (the second table that starts with
    "model")."""
    lines = out.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("Demo 2 as measured systems run it"))
    return _table("\n".join(lines[start:]), "model ")


@pytest.mark.parametrize(
    ("gpu", "bandwidth_line", "t_gpu_1b"),
    [
        ("H100", "3.00 TB/s, 89.6% of the datasheet's 3.35 TB/s (FlashMLA: a decode kernel", "748 µs"),
        ("H200", "4.80 TB/s, 100.0% of the datasheet's 4.80 TB/s (the datasheet's: no published", "522 µs"),
    ],
)
def test_demo2_as_measured_systems_run_it(
    capsys: pytest.CaptureFixture[str], gpu: str, bandwidth_line: str, t_gpu_1b: str
) -> None:
    """Beside the seed's table (g = 0), the same steps with each sourced term: the bytes at the GPU's
    published achievable bandwidth, a ramp of one DRAM latency and the mode's own gap per kernel (2.1 µs
    eager, 1.3 µs as a graph node), a graph as a sum, PDL hiding half a node's gap (the stated assumption);
    what each mode includes and excludes is printed with it."""
    code, out, _ = _run(["--gpu", gpu], capsys)
    assert code == 0
    assert _line(out, "Llama-3.2-1B: reads").endswith(f"-> GPU lower bound {t_gpu_1b} (memory-bound)")
    assert "The seed's model (the GPU adds nothing between kernels, g = 0)" in out
    assert f"  work: the step's bytes at {bandwidth_line}" in out
    assert "a ramp of 375 ns before its bytes flow" in out
    assert "2.10 µs launched one by one, 1.30 µs as a graph node (Hazy Research 2025" in out
    assert "a node's gap is 650 ns: PDL assumed to hide 50% of it" in out
    assert "an estimate too, not an upper bound" in out and "The seed calls serial an upper bound" in out
    for mode in ("  eager: estimate", "  graph: t_launch + work", "  megakernel: one kernel"):
        assert _line(out, mode)
    rows = _hardware_table(out)
    assert {row["model"] for row in rows} == {"Llama-3.1-8B", "Llama-3.2-1B"}
    assert len(rows) == 2 * 3 * 3  # models × plans × launch costs
    if gpu == "H100":  # issue 30: the 1B step against Hazy Research's figures (docs/model.md)
        fused = _row(rows, model="Llama-3.2-1B", plan="fused", **{"launch cost": "2.00 µs"})
        unfused = _row(rows, model="Llama-3.2-1B", plan="unfused", **{"launch cost": "2.00 µs"})
        mega = _row(rows, model="Llama-3.2-1B", plan="megakernel", **{"launch cost": "2.00 µs"})
        assert fused["work"] == unfused["work"] == "835 µs"
        assert (fused["graph: step"], fused["graph: of datasheet"]) == ("1.06 ms", "71%")
        assert (unfused["graph: step"], unfused["graph: of datasheet"]) == ("1.16 ms", "64%")
        assert mega["eager: estimate–no overlap"] == "838 µs–840 µs"
        assert fused["eager: estimate–no overlap"] == "1.16 ms–1.42 ms"  # eager > graph: graphs gain
        assert "the seed's 748 µs becomes 838 µs as a megakernel (89% of the datasheet bandwidth)" in out


def test_hardware_rows_in_json_follow_the_options(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["--json", "--models", "Llama-3.2-1B", "--launch-us", "8", "--eager-gap-us", "2"]
    argv += ["--graph-gap-us", "1", "--ramp-us", "0.5", "--bandwidth-fraction", "0.8", "--pdl-hidden", "1"]
    code, out, _ = _run(argv, capsys)
    assert code == 0
    document = _strict_json(out)
    config = document["config"]
    assert (config["eager_gap_s"], config["graph_gap_s"]) == pytest.approx((2e-6, 1e-6))
    assert config["ramp_s"] == pytest.approx(0.5e-6)
    assert (config["bandwidth_fraction"], config["bandwidth_from"]) == (0.8, "--bandwidth-fraction")
    assert config["pdl_hidden_share"] == 1.0
    rows = {row["plan"]: row for row in document["decode_hardware"]}
    fused, n = rows["fused"], 131
    work_s = document["models"][0]["bytes_total"] / (3.35e12 * 0.8)
    assert fused["work_s"] == pytest.approx(work_s)
    assert fused["eager_per_kernel_s"] == pytest.approx(2.5e-6)
    assert fused["eager_no_overlap_s"] == pytest.approx(work_s + n * (8e-6 + 2.5e-6))
    assert fused["eager_estimate_s"] == pytest.approx(max(work_s + n * 2.5e-6, n * 8e-6))
    assert fused["graph_s"] == pytest.approx(8e-6 + work_s + n * 1.5e-6)
    assert fused["pdl_per_kernel_s"] == pytest.approx(0.5e-6)  # PDL hides the whole gap; the ramp stays
    assert fused["pdl_graph_s"] == pytest.approx(8e-6 + work_s + n * 0.5e-6)
    # The seed's rows are unchanged by the terms.
    assert {row["plan"]: row for row in document["decode"]}["fused"]["overlapped_s"] == pytest.approx(
        1.048e-3
    )


def test_published_prints_the_table_docs_hold(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = _run(["--published"], capsys)
    assert (code, err) == (0, "")
    assert out == published_markdown() + "\n"
    assert "| [vLLM (CUDA graphs and torch compilation, the blog says)](https://hazyresearch" in out


@pytest.mark.parametrize(
    ("argv", "option"),
    [
        (["--eager-gap-us", "-1"], "--eager-gap-us"),
        (["--graph-gap-us", "x"], "--graph-gap-us"),
        (["--ramp-us", "-0.1"], "--ramp-us"),
        (["--bandwidth-fraction", "0"], "--bandwidth-fraction"),
        (["--bandwidth-fraction", "1.5"], "--bandwidth-fraction"),
        (["--pdl-hidden", "1.5"], "--pdl-hidden"),
        (["--pdl-hidden", "x"], "--pdl-hidden"),
    ],
)
def test_bad_gap_or_pdl_share_is_one_error_line(
    capsys: pytest.CaptureFixture[str], argv: list[str], option: str
) -> None:
    code, out, err = _run(argv, capsys)
    assert (code, out) == (2, "")
    assert len(err.splitlines()) == 1 and err.startswith(f"error: argument {option}:")
