"""What Triton needs to launch its first kernel, found the way Triton 3.6 looks for it.

Triton does not ship its CUDA launcher compiled: at the first launch it builds ``driver.c`` (its
``cuda_utils``) and then one launcher per kernel signature into a Python extension, with the C compiler
(``runtime/build.py``: ``$CC``, else ``gcc``, else ``clang`` on ``PATH``), Python's headers (``Python.h`` in
``sysconfig.get_paths(scheme)["include"]``, the Debian ``posix_local`` scheme read as ``posix_prefix``) and
linking ``libcuda.so.1`` (``backends/nvidia/driver.py``'s ``libcuda_dirs``: ``$TRITON_LIBCUDA_PATH``, else
the folders ``/sbin/ldconfig -p`` lists it in, else those of ``$LD_LIBRARY_PATH`` that hold it). A machine
without one of them fails inside the first launch with a compiler's or an assertion's message; here each is
looked for first, so a framework case skips naming what is missing (``frameworks.gpu_reason``) and
``environment.txt`` records what was found (``describe``).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sysconfig
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

#: The library Triton's launcher links.
LIBCUDA = "libcuda.so.1"
#: Where Triton asks the dynamic linker's cache for it.
LDCONFIG = "/sbin/ldconfig"


@dataclass(frozen=True)
class BuildTools:
    """What was found (None: not found) and where it was looked for or came from, one phrase each."""

    c_compiler: str | None
    c_compiler_from: str
    python_h: Path | None
    python_include: str
    libcuda: Path | None
    libcuda_from: str


def ldconfig_listing() -> str:
    """``/sbin/ldconfig -p``'s output, or "" where it cannot run (Triton then reads ``$LD_LIBRARY_PATH``)."""
    try:
        done = subprocess.run([LDCONFIG, "-p"], capture_output=True, timeout=20, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return ""
    return done.stdout.decode(errors="ignore")


def python_include_folder() -> str:
    """The folder Triton's build passes as ``-I`` for ``Python.h``."""
    scheme = sysconfig.get_default_scheme()
    if scheme == "posix_local":  # Debian's: Triton reads it as posix_prefix
        scheme = "posix_prefix"
    return sysconfig.get_paths(scheme=scheme)["include"]


def _c_compiler(environ: Mapping[str, str]) -> tuple[str | None, str]:
    if environ.get("CC"):
        cc = environ["CC"]
        return shutil.which(cc, path=environ.get("PATH")), f"CC={cc}"
    path = environ.get("PATH")
    for name in ("gcc", "clang"):
        found = shutil.which(name, path=path)
        if found:
            return found, f"{name} on PATH"
    return None, "CC unset, no gcc or clang on PATH"


def _libcuda(environ: Mapping[str, str], listing: str) -> tuple[Path | None, str]:
    if environ.get("TRITON_LIBCUDA_PATH"):
        folder = Path(environ["TRITON_LIBCUDA_PATH"])
        found = folder / LIBCUDA
        return (found if found.exists() else None), f"TRITON_LIBCUDA_PATH={folder}"
    listed = [Path(line.split()[-1]) for line in listing.splitlines() if LIBCUDA in line]
    if listed:
        found = next((path for path in listed if path.exists()), None)
        return found, f"{LDCONFIG} -p"
    for folder in filter(None, environ.get("LD_LIBRARY_PATH", "").split(":")):
        if (Path(folder) / LIBCUDA).exists():
            return Path(folder) / LIBCUDA, "LD_LIBRARY_PATH"
    return None, f"not in {LDCONFIG} -p nor in LD_LIBRARY_PATH"


def find_build_tools(
    environ: Mapping[str, str] = os.environ,
    ldconfig: Callable[[], str] = ldconfig_listing,
    include_folder: Callable[[], str] = python_include_folder,
) -> BuildTools:
    """Look for Triton's C compiler, ``Python.h`` and ``libcuda.so.1`` as Triton does (module docstring)."""
    compiler, compiler_from = _c_compiler(environ)
    include = include_folder()
    header = Path(include) / "Python.h"
    libcuda, libcuda_from = _libcuda(environ, ldconfig())
    return BuildTools(
        c_compiler=compiler,
        c_compiler_from=compiler_from,
        python_h=header if header.is_file() else None,
        python_include=include,
        libcuda=libcuda,
        libcuda_from=libcuda_from,
    )


def missing_reason(tools: BuildTools) -> str | None:
    """One line naming what Triton's first launch would miss, or None when nothing is missing."""
    missing = []
    if tools.c_compiler is None:
        missing.append(f"no C compiler ({tools.c_compiler_from})")
    if tools.python_h is None:
        missing.append(f"no Python.h in {tools.python_include} (Python's development headers)")
    if tools.libcuda is None:
        missing.append(f"no {LIBCUDA} found ({tools.libcuda_from})")
    if not missing:
        return None
    return "Triton cannot build its CUDA launcher: " + "; ".join(missing)


def describe(tools: BuildTools) -> list[str]:
    """Lines for ``environment.txt``: each thing Triton's launcher needs, where it was found, or why not."""
    compiler = f"{tools.c_compiler} ({tools.c_compiler_from})" if tools.c_compiler else tools.c_compiler_from
    headers = str(tools.python_h) if tools.python_h else f"no Python.h in {tools.python_include}"
    libcuda = f"{tools.libcuda} ({tools.libcuda_from})" if tools.libcuda else tools.libcuda_from
    return [
        f"C compiler: {compiler if tools.c_compiler else 'not found: ' + compiler}",
        f"Python headers: {headers}",
        f"libcuda: {libcuda if tools.libcuda else 'not found: ' + libcuda}",
    ]
