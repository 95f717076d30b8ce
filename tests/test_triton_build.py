"""``benchmarks.triton_build``: Triton's C compiler, ``Python.h`` and ``libcuda.so.1`` looked for as Triton
3.6 looks for them, each absence named in the one skip reason, and what was found in environment.txt's lines.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from benchmarks.triton_build import LIBCUDA, describe, find_build_tools, missing_reason

LISTING = "1 libs found in cache `/etc/ld.so.cache'\n\t{name} (libc6,x86-64) => {path}\n"


@pytest.fixture
def machine(tmp_path: Path) -> dict[str, Path]:
    """Folders of a made-up machine: bin (gcc), include (Python.h), lib (libcuda.so.1), empty."""
    folders = {name: tmp_path / name for name in ("bin", "include", "lib", "empty")}
    for folder in folders.values():
        folder.mkdir()
    (folders["bin"] / "gcc").write_text("#!/bin/sh\n", encoding="utf-8")
    (folders["bin"] / "gcc").chmod(0o755)
    (folders["include"] / "Python.h").write_text("", encoding="utf-8")
    (folders["lib"] / LIBCUDA).write_text("", encoding="utf-8")
    return folders


def test_everything_found_gives_no_reason_and_three_lines(machine: dict[str, Path]) -> None:
    listing = LISTING.format(name=LIBCUDA, path=machine["lib"] / LIBCUDA)
    tools = find_build_tools({"PATH": str(machine["bin"])}, lambda: listing, lambda: str(machine["include"]))
    assert missing_reason(tools) is None
    assert describe(tools) == [
        f"C compiler: {machine['bin'] / 'gcc'} (gcc on PATH)",
        f"Python headers: {machine['include'] / 'Python.h'}",
        f"libcuda: {machine['lib'] / LIBCUDA} (/sbin/ldconfig -p)",
    ]


def test_nothing_found_names_each_absence(machine: dict[str, Path]) -> None:
    tools = find_build_tools({"PATH": str(machine["empty"])}, lambda: "", lambda: str(machine["empty"]))
    assert missing_reason(tools) == (
        "Triton cannot build its CUDA launcher: no C compiler (CC unset, no gcc or clang on PATH); "
        f"no Python.h in {machine['empty']} (Python's development headers); "
        f"no {LIBCUDA} found (not in /sbin/ldconfig -p nor in LD_LIBRARY_PATH)"
    )
    assert describe(tools) == [
        "C compiler: not found: CC unset, no gcc or clang on PATH",
        f"Python headers: no Python.h in {machine['empty']}",
        "libcuda: not found: not in /sbin/ldconfig -p nor in LD_LIBRARY_PATH",
    ]


def test_cc_wins_over_path_and_must_exist(machine: dict[str, Path]) -> None:
    include = str(machine["include"])
    chosen = find_build_tools({"CC": str(machine["bin"] / "gcc"), "PATH": ""}, lambda: "", lambda: include)
    assert (chosen.c_compiler, chosen.c_compiler_from) == (
        str(machine["bin"] / "gcc"),
        f"CC={machine['bin']}/gcc",
    )
    absent = find_build_tools({"CC": "tcc", "PATH": str(machine["bin"])}, lambda: "", lambda: include)
    assert absent.c_compiler is None and missing_reason(absent).count("no C compiler (CC=tcc)") == 1


def test_libcuda_is_looked_for_where_triton_looks(machine: dict[str, Path]) -> None:
    include = str(machine["include"])
    by_variable = find_build_tools({"TRITON_LIBCUDA_PATH": str(machine["lib"])}, lambda: "", lambda: include)
    assert by_variable.libcuda == machine["lib"] / LIBCUDA
    wrong_folder = find_build_tools(
        {"TRITON_LIBCUDA_PATH": str(machine["empty"])}, lambda: "", lambda: include
    )
    assert (
        wrong_folder.libcuda is None
        and wrong_folder.libcuda_from == f"TRITON_LIBCUDA_PATH={machine['empty']}"
    )
    by_path = find_build_tools(
        {"LD_LIBRARY_PATH": f"{machine['empty']}::{machine['lib']}"}, lambda: "", lambda: include
    )
    assert (by_path.libcuda, by_path.libcuda_from) == (machine["lib"] / LIBCUDA, "LD_LIBRARY_PATH")
    stale = LISTING.format(name=LIBCUDA, path=machine["empty"] / LIBCUDA)  # listed, but not there
    listed = find_build_tools({"LD_LIBRARY_PATH": str(machine["lib"])}, lambda: stale, lambda: include)
    assert listed.libcuda is None, "ldconfig's answer stands, as in Triton: LD_LIBRARY_PATH is not read"


def test_this_machines_own_tools_are_described_without_error() -> None:
    lines = describe(find_build_tools())
    assert [line.split(":")[0] for line in lines] == ["C compiler", "Python headers", "libcuda"]
