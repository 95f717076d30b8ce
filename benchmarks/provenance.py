"""What a reader of a saved run needs to trust it: ``machine_info["launchbench"]``.

pytest-benchmark's storage folder names only the OS and Python (``Linux-CPython-3.11-64bit``), so two machines
land in one folder; ``machine_id`` tells them apart. The rest says what shaped the figures: the CPU and its
caches (whether an array is served from cache or from DRAM), the frequency governor, numpy's BLAS and thread
pools, the thread environment variables, the GPU frameworks installed beside CuPy, and the GPU when CuPy sees
one. Where the tree has no ``.git`` (the GPU machine's copy), the commit measured comes from
``LAUNCHBENCH_COMMIT`` (``fill_commit_info``, pytest-benchmark's ``commit_info``).

Host names do not tell machines apart: cloud VMs, containers and lab machines share them. So ``machine_id``
holds the name the user gave the machine (``LAUNCHBENCH_MACHINE``, or pytest's ``--machine``, as asv asks for
a machine name once), else the host name with a short fingerprint of the OS installation
(``installation_fingerprint``), beside the OS, CPU and GPU.

Only what stays true of the machine belongs here: pytest-benchmark compares ``machine_info`` wholesale and
warns on any difference, so two runs of one unchanged machine must give identical dicts. The load, clocks
and frequencies of *this* run go to the run record (``benchmarks/run_record.py``).

Built from small collectors, each filling one dict and tolerating a missing source (no ``/sys`` on macOS,
no ``/proc/cpuinfo`` on Windows, no GPU), as pyperf's ``_collect_metadata`` does: an unreadable source
leaves its key ``None`` instead of failing the run. A collector that raises anyway (a GPU that answers the
probe and then fails every call) leaves its keys ``None`` (``gpu``: ``{"error": ...}``) and one line in
``faults``: the measured cases are still saved.
"""

from __future__ import annotations

import hashlib
import hmac
import importlib.metadata
import os
import platform
import re
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

import numpy as np

from benchmarks import cuda

#: Where Linux describes CPU 0's caches (one ``index*`` folder per cache) and its frequency policy.
CPU0_SYSFS = Path("/sys/devices/system/cpu/cpu0")

#: Environment variables that change how many threads numpy/BLAS/OpenMP use or which kernels they pick, and
#: the CUDA ones that change what a GPU timing means. All are recorded, ``None`` when unset.
THREAD_ENV_VARS = (
    "OMP_NUM_THREADS",
    "OPENBLAS_NUM_THREADS",
    "MKL_NUM_THREADS",
    "VECLIB_MAXIMUM_THREADS",
    "BLIS_NUM_THREADS",
    "NUMEXPR_NUM_THREADS",
    "OPENBLAS_CORETYPE",
    "MKL_ENABLE_INSTRUCTIONS",
    "NPY_DISABLE_CPU_FEATURES",
    "OMP_PROC_BIND",
    "OMP_PLACES",
    "CUDA_VISIBLE_DEVICES",
    "CUDA_LAUNCH_BLOCKING",
)

_SIZE_SUFFIXES = {"K": 1024, "M": 1024**2, "G": 1024**3}


#: What ``machine_id`` says for a GPU whose name could not be read (the GPU collector failed).
GPU_UNREADABLE = "GPU unreadable"
#: The environment variable that names this machine (``--machine`` on the command line wins over it).
MACHINE_NAME_VARIABLE = "LAUNCHBENCH_MACHINE"
#: Where an installation keeps its machine id: systemd's, then D-Bus's (machine-id(5)).
MACHINE_ID_FILES = (Path("/etc/machine-id"), Path("/var/lib/dbus/machine-id"))
#: Hex digits of the installation fingerprint: 32 bits, so that two installations behind one host name
#: share a fingerprint with a chance of 1 in 4 billion.
FINGERPRINT_CHARS = 8
#: The key the machine id is hashed with: machine-id(5) asks that the id never be shown as it is, only
#: hashed with a key of the application's own.
_FINGERPRINT_KEY = b"launchbench machine fingerprint"

#: The GPU frameworks whose installed versions ``frameworks`` records (the GPU machine's image holds all
#: three, so a later comparison with them can be measured in the same window), read from the installed
#: packages' metadata: none is imported.
FRAMEWORKS = ("torch", "triton", "jax")

#: The variable a command sets to the checkout's commit where the tree has no ``.git`` (the GPU machine gets
#: a copy of the working tree without it): ``git rev-parse HEAD`` of the checkout, ``-dirty`` after it where
#: the tree had changes (``tools/gpu_command.py`` prints the command with it filled in).
COMMIT_VARIABLE = "LAUNCHBENCH_COMMIT"
#: pytest-benchmark's ``commit_info["id"]`` where git could not say: no ``.git`` ("unversioned"), git
#: missing or failing ("unknown").
NO_COMMIT = ("unversioned", "unknown")
_COMMIT = re.compile(r"(?P<id>[0-9a-f]{7,40})(?P<dirty>-dirty)?")


def collect_machine_info(
    faults: list[str] | None = None, machine_name: str | None = None
) -> dict[str, object]:
    """Return ``machine_info["launchbench"]``: identity, CPU, caches, numpy/BLAS, thread env and GPU.

    Sizes are bytes; ``gpu`` is ``benchmarks.cuda.gpu_info()`` (``None`` without a usable device,
    ``{"error": ...}`` when the device failed to answer). ``machine_name``: the name the user gave the
    machine (``--machine``), else ``LAUNCHBENCH_MACHINE``'s value, else ``None`` (``chosen_name``).
    ``machine_id`` is ``machine_id(...)`` of the facts, the composition ``analysis.load`` applies to every
    run, so both agree. A collector that raises appends one line to ``faults`` (when given) and leaves its
    keys ``None``.
    """
    info: dict[str, object] = {"machine_name": chosen_name(machine_name)}
    for collector, keys in COLLECTORS:
        try:
            collector(info)
        except Exception as error:  # a broken source must not lose the run: say what failed, go on
            for key in keys:
                info[key] = None  # nothing half-filled
            text = f"{type(error).__name__}: {error}"
            if collector is collect_gpu:
                info["gpu"] = {"error": text}
            if faults is not None:
                faults.append(f"provenance: {collector.__name__} failed ({text}); its keys are left empty")
    gpu = info["gpu"]
    fingerprint, name = info["machine_fingerprint"], info["machine_name"]
    info["machine_id"] = machine_id(
        str(info["host"] or "unknown-host"),
        info["system"],
        str(info["cpu_model"] or "unknown-cpu"),
        gpu_label(gpu),
        fingerprint=str(fingerprint) if fingerprint else None,
        name=str(name) if name else None,
    )
    return info


def chosen_name(name: str | None) -> str | None:
    """The machine's name: ``name`` (``--machine``), else ``LAUNCHBENCH_MACHINE``'s value, stripped; None
    when neither is set or both are blank."""
    for candidate in (name, os.environ.get(MACHINE_NAME_VARIABLE)):
        if candidate is not None and candidate.strip():
            return candidate.strip()
    return None


def name_problem(name: str | None) -> str | None:
    """Why the machine name the session would save (``name``, from ``--machine``, else
    ``LAUNCHBENCH_MACHINE``: ``chosen_name``) cannot be one, or None: it must be printable text (no newline,
    tab, escape or other control character, and valid UTF-8: an environment variable's undecodable bytes
    arrive as unpaired surrogates). Analysis drops a run whose machine id is not (``analysis.schema``), so
    such a name is refused before anything is measured, not found after the run was saved."""
    chosen = chosen_name(name)
    if chosen is None or chosen.isprintable():
        return None
    where = "--machine" if name is not None and name.strip() else MACHINE_NAME_VARIABLE
    bad = next(char for char in chosen if not char.isprintable())
    return (
        f"{where} {chosen!r}: a machine name must be printable text (it holds {bad!r}: a control character, "
        "or a byte that is not UTF-8); give one without"
    )


def machine_id(
    host: str,
    system: object,
    cpu_model: str,
    gpu: str,
    fingerprint: str | None = None,
    name: str | None = None,
) -> str:
    """The machine's stable identity: "who / OS / CPU model / GPU name or 'no GPU'" (OS as
    ``platform.system()``, e.g. "Linux"; left out where unknown). Who: the ``name`` the user gave the
    machine, else "host#fingerprint" (``installation_fingerprint``), else the host alone, as runs saved
    before the fingerprint existed have it (they keep their id). A Windows and a Linux install of one laptop
    are two machines: their numbers differ."""
    who = name or (f"{host}#{fingerprint}" if fingerprint else host)
    parts = [who, str(system) if system else None, cpu_model, gpu]
    return " / ".join(part for part in parts if part)


def installation_fingerprint() -> str | None:
    """A short stable fingerprint of this installation of the OS: ``FINGERPRINT_CHARS`` hex digits of an
    HMAC-SHA-256 of its machine id (Linux: /etc/machine-id; macOS: the platform UUID; Windows: the
    MachineGuid), so that two VMs or lab machines sharing a host name are two machines; None where the OS
    keeps no such id (a container without /etc/machine-id, whose host name is the container's own)."""
    raw = _installation_id()
    if not raw:
        return None
    digest = hmac.new(_FINGERPRINT_KEY, raw.encode("utf-8", "surrogateescape"), hashlib.sha256).hexdigest()
    return digest[:FINGERPRINT_CHARS]


def _installation_id() -> str | None:
    """The OS installation's own id as text, or None where it keeps none or it cannot be read. An id file
    that is not UTF-8 (machine-id(5) says hex, but a broken image may hold anything) is read byte for byte
    (``surrogateescape``): the fingerprint still tells the installation apart, and the rest of the host's
    facts are kept."""
    for path in MACHINE_ID_FILES:
        text = _read_id(path)
        if text:
            return text
    if sys.platform == "darwin":
        return _darwin_platform_uuid()
    if sys.platform == "win32":
        return _windows_machine_guid()
    return None


def _darwin_platform_uuid() -> str | None:
    """macOS: the IOPlatformUUID that ``ioreg`` reports, or None."""
    try:
        result = subprocess.run(
            ["ioreg", "-rd1", "-c", "IOPlatformExpertDevice"],
            capture_output=True,
            text=True,
            timeout=5,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    found = re.search(r'"IOPlatformUUID"\s*=\s*"([^"]+)"', result.stdout)
    return found.group(1) if found else None


def _windows_machine_guid() -> str | None:
    """Windows: the MachineGuid under HKEY_LOCAL_MACHINE's SOFTWARE/Microsoft/Cryptography, or None."""
    try:
        import winreg  # Windows only: imported where it exists

        with winreg.OpenKey(winreg.HKEY_LOCAL_MACHINE, r"SOFTWARE\Microsoft\Cryptography") as key:
            return str(winreg.QueryValueEx(key, "MachineGuid")[0])
    except (ImportError, OSError):
        return None


def gpu_label(gpu: object) -> str:
    """The GPU part of ``machine_id``: the device's name, "no GPU", or ``GPU_UNREADABLE``."""
    if not isinstance(gpu, dict):
        return "no GPU"
    name = gpu.get("name")
    return str(name) if name else GPU_UNREADABLE


def collect_host(info: dict[str, object]) -> None:
    """Fill ``host`` (the network name), ``system`` (``platform.system()``: "Linux", "Windows", "Darwin"),
    ``platform`` (OS, kernel release and C library in one string) and ``machine_fingerprint``
    (``installation_fingerprint``)."""
    info["host"] = platform.node() or "unknown-host"
    info["system"] = platform.system() or None
    info["platform"] = platform.platform()
    info["machine_fingerprint"] = installation_fingerprint()


def collect_cpu(info: dict[str, object]) -> None:
    """Fill ``cpu_model``, ``logical_cpus``, ``usable_cpus`` (this process's affinity) and ``governor``."""
    info["cpu_model"] = _cpu_model()
    info["logical_cpus"] = os.cpu_count()
    try:
        info["usable_cpus"] = len(os.sched_getaffinity(0))
    except AttributeError:  # macOS and Windows have no sched_getaffinity
        info["usable_cpus"] = None
    info["governor"] = _read_text(CPU0_SYSFS / "cpufreq" / "scaling_governor")


def collect_caches(info: dict[str, object]) -> None:
    """Fill ``caches`` (one dict per cache of CPU 0: level, type, size_bytes, shared_cpu_list), ``llc_bytes``
    (the last-level cache) and ``core_cache_bytes`` (the largest data cache below the last level, private
    to a core on common CPUs). Sizes in bytes; ``None`` where the OS does not say.

    Analysis uses them to tell sizes served from cache from sizes served from DRAM.
    """
    caches = _linux_caches(CPU0_SYSFS / "cache")
    if not caches and sys.platform == "darwin":
        caches = _darwin_caches()
    info["caches"] = caches
    data_caches = [cache for cache in caches if cache["type"] in ("Data", "Unified") and cache["size_bytes"]]
    if not data_caches:
        info["llc_bytes"] = None
        info["core_cache_bytes"] = None
        return
    last_level = max(cache["level"] for cache in data_caches)
    info["llc_bytes"] = max(cache["size_bytes"] for cache in data_caches if cache["level"] == last_level)
    below = [cache["size_bytes"] for cache in data_caches if cache["level"] < last_level]
    info["core_cache_bytes"] = max(below) if below else info["llc_bytes"]


def collect_numpy(info: dict[str, object]) -> None:
    """Fill ``numpy`` (its version) and ``blas``: threadpoolctl's view of the BLAS/OpenMP libraries loaded
    (library, version, threading layer, thread count, CPU architecture it picked)."""
    info["numpy"] = np.__version__
    try:
        from threadpoolctl import threadpool_info
    except ImportError:
        info["blas"] = None
        return
    info["blas"] = threadpool_info()


def collect_env(info: dict[str, object]) -> None:
    """Fill ``env``: every variable of ``THREAD_ENV_VARS`` with its value, ``None`` when unset."""
    info["env"] = {name: os.environ.get(name) for name in THREAD_ENV_VARS}


def collect_frameworks(info: dict[str, object]) -> None:
    """Fill ``frameworks``: the installed version of each of ``FRAMEWORKS``, ``None`` where it is not
    installed (read from package metadata, so the timed process does not import them)."""
    versions: dict[str, str | None] = {}
    for name in FRAMEWORKS:
        try:
            versions[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            versions[name] = None
    info["frameworks"] = versions


def collect_gpu(info: dict[str, object]) -> None:
    """Fill ``gpu`` with ``benchmarks.cuda.gpu_info()``: name, compute capability, SMs, memory, driver and
    runtime versions, CuPy version; ``None`` when no CUDA device is usable. The GPU's clocks, power and
    throttling change from run to run: they are in the run record (``benchmarks.nvml``), not here."""
    info["gpu"] = cuda.gpu_info()


#: Each collector and the keys it fills (left ``None`` when it raises).
COLLECTORS = (
    (collect_host, ("host", "system", "platform", "machine_fingerprint")),
    (collect_cpu, ("cpu_model", "logical_cpus", "usable_cpus", "governor")),
    (collect_caches, ("caches", "llc_bytes", "core_cache_bytes")),
    (collect_numpy, ("numpy", "blas")),
    (collect_env, ("env",)),
    (collect_frameworks, ("frameworks",)),
    (collect_gpu, ("gpu",)),
)


def environment_commit(environ: Mapping[str, str] = os.environ) -> dict[str, object] | None:
    """The commit ``COMMIT_VARIABLE`` names, as pytest-benchmark's ``commit_info`` fields (``id``, ``dirty``,
    and ``id_from`` naming the variable), or ``None`` where it is unset or empty. Raises ``ValueError`` in one
    line naming the value where it is not a commit (7 to 40 hex digits, then ``-dirty`` where the tree had
    changes)."""
    value = environ.get(COMMIT_VARIABLE, "").strip()
    if not value:
        return None
    match = _COMMIT.fullmatch(value)
    if match is None:
        raise ValueError(
            f"{COMMIT_VARIABLE}={value!r} is not a commit: give `git rev-parse HEAD` of the checkout (7 to "
            "40 hex digits, then -dirty where the tree has changes), as `python tools/gpu_command.py` "
            "prints it"
        )
    return {"id": match["id"], "dirty": match["dirty"] is not None, "id_from": COMMIT_VARIABLE}


def fill_commit_info(commit_info: dict[str, object], environ: Mapping[str, str] = os.environ) -> None:
    """Where git could not say which commit was measured (``commit_info["id"]`` in ``NO_COMMIT``: a tree
    copied without ``.git``, or no git), take it from ``COMMIT_VARIABLE``; where git could, its answer stands
    and the variable is not read. ``ValueError`` for a variable that is not a commit."""
    if commit_info.get("id") not in NO_COMMIT:
        return
    commit = environment_commit(environ)
    if commit is not None:
        commit_info.update(commit)


def _read_id(path: Path) -> str | None:
    """The stripped text of the id file ``path``, bytes that are not UTF-8 kept as they are
    (``surrogateescape``), or None when it is missing or unreadable."""
    try:
        return path.read_bytes().decode("utf-8", "surrogateescape").strip()
    except OSError:
        return None


def _read_text(path: Path) -> str | None:
    """Return the stripped text of ``path``, or None when it is missing, unreadable or not UTF-8."""
    try:
        return path.read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError):
        return None


def _cpu_model() -> str:
    """Return the CPU's marketing name from /proc/cpuinfo (Linux) or sysctl (macOS), else ``platform``'s."""
    cpuinfo = _read_text(Path("/proc/cpuinfo"))
    if cpuinfo:
        for line in cpuinfo.splitlines():
            key, _, value = line.partition(":")
            if key.strip() in ("model name", "Model") and value.strip():
                return value.strip()
    if sys.platform == "darwin":
        brand = _sysctl("machdep.cpu.brand_string")
        if brand:
            return brand
    return platform.processor() or platform.machine() or "unknown-cpu"


def _parse_size(text: str) -> int | None:
    """Return the bytes of a sysfs cache size such as "48K" or "2048K", or None when it cannot be read."""
    text = text.strip()
    scale = _SIZE_SUFFIXES.get(text[-1:].upper(), 1)
    digits = text[:-1] if text[-1:].upper() in _SIZE_SUFFIXES else text
    return int(digits) * scale if digits.isdigit() else None


def _linux_caches(cache_dir: Path) -> list[dict[str, object]]:
    """Return CPU 0's caches as listed in sysfs; an empty list when the folder is missing or unreadable."""
    try:
        indices = sorted(cache_dir.glob("index*"))
    except OSError:
        return []
    caches = []
    for index in indices:
        level = _read_text(index / "level")
        size = _read_text(index / "size")
        if level is None or not level.isdigit() or size is None:
            continue
        caches.append(
            {
                "level": int(level),
                "type": _read_text(index / "type"),
                "size_bytes": _parse_size(size),
                "shared_cpu_list": _read_text(index / "shared_cpu_list"),
            }
        )
    return caches


def _darwin_caches() -> list[dict[str, object]]:
    """Return the caches macOS reports through sysctl (performance cores where it distinguishes them)."""
    caches = []
    for level, kind, names in (
        (1, "Data", ("hw.perflevel0.l1dcachesize", "hw.l1dcachesize")),
        (2, "Unified", ("hw.perflevel0.l2cachesize", "hw.l2cachesize")),
        (3, "Unified", ("hw.l3cachesize",)),
    ):
        size = next((value for value in map(_sysctl, names) if value and value.isdigit()), None)
        if size and int(size) > 0:
            caches.append({"level": level, "type": kind, "size_bytes": int(size), "shared_cpu_list": None})
    return caches


def _sysctl(name: str) -> str | None:
    """Return ``sysctl -n name`` (macOS), or None when the key or the tool is missing."""
    try:
        result = subprocess.run(
            ["sysctl", "-n", name], capture_output=True, text=True, timeout=5, check=False
        )
    except (OSError, subprocess.SubprocessError):
        return None
    if result.returncode != 0:
        return None
    return result.stdout.strip() or None
