"""benchmarks.provenance: every key present, missing sources tolerated, a collector that raises costs only
its keys (and says so), machine_id as load composes it."""

from __future__ import annotations

import json
import platform
from pathlib import Path

import pytest

from analysis.load import machine_identity
from benchmarks import provenance

KEYS = {
    "machine_id",
    "machine_name",
    "machine_fingerprint",
    "host",
    "platform",
    "system",
    "cpu_model",
    "logical_cpus",
    "usable_cpus",
    "governor",
    "caches",
    "llc_bytes",
    "core_cache_bytes",
    "numpy",
    "blas",
    "env",
    "frameworks",
    "gpu",
}


@pytest.fixture
def no_gpu(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(provenance.cuda, "gpu_info", lambda: None)


@pytest.fixture(autouse=True)
def no_machine_name(monkeypatch: pytest.MonkeyPatch) -> None:
    """No test reads the machine name of the shell that runs it."""
    monkeypatch.delenv(provenance.MACHINE_NAME_VARIABLE, raising=False)


def _who(info: dict) -> str:
    """The first part of ``machine_id`` as provenance composes it: "host#fingerprint", or the host alone."""
    fingerprint = info["machine_fingerprint"]
    return f"{info['host']}#{fingerprint}" if fingerprint else info["host"]


def _fake_cpu0(root: Path, caches: list[tuple[str, str, str, str]], governor: str | None) -> Path:
    """Write a sysfs-like cpu0 folder: ``caches`` as (level, type, size, shared_cpu_list) index folders."""
    for number, (level, kind, size, shared) in enumerate(caches):
        index = root / "cache" / f"index{number}"
        index.mkdir(parents=True)
        for name, text in (("level", level), ("type", kind), ("size", size), ("shared_cpu_list", shared)):
            (index / name).write_text(text + "\n")
    if governor is not None:
        (root / "cpufreq").mkdir(parents=True)
        (root / "cpufreq" / "scaling_governor").write_text(governor + "\n")
    return root


def test_every_key_is_present_and_the_result_is_json(no_gpu: None) -> None:
    info = provenance.collect_machine_info()
    assert set(info) == KEYS
    assert info["gpu"] is None
    assert isinstance(info["numpy"], str)
    assert info["logical_cpus"] is None or info["logical_cpus"] >= 1
    assert set(info["env"]) == set(provenance.THREAD_ENV_VARS)
    json.dumps(info)  # pytest-benchmark saves it as JSON


def test_machine_id_is_host_os_cpu_and_gpu(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(provenance.cuda, "gpu_info", lambda: None)
    info = provenance.collect_machine_info()
    assert info["system"] == platform.system()
    assert info["machine_id"] == f"{_who(info)} / {platform.system()} / {info['cpu_model']} / no GPU"
    monkeypatch.setattr(provenance.cuda, "gpu_info", lambda: {"name": "NVIDIA H200", "sm_count": 132})
    info = provenance.collect_machine_info()
    assert info["machine_id"] == f"{_who(info)} / {platform.system()} / {info['cpu_model']} / NVIDIA H200"
    assert info["gpu"]["sm_count"] == 132


def test_machine_id_matches_loads_composition(no_gpu: None) -> None:
    """``analysis.load`` composes the same id from the saved facts, and from pytest-benchmark's own fields
    for a run saved without ``machine_info["launchbench"]``."""
    current = provenance.collect_machine_info()
    info = {**current, "machine_fingerprint": None}
    info["machine_id"] = provenance.machine_id(info["host"], info["system"], info["cpu_model"], "no GPU")
    fallback = {"node": info["host"], "system": platform.system(), "cpu": {"brand_raw": info["cpu_model"]}}
    assert machine_identity(fallback)["machine_id"] == info["machine_id"]
    assert machine_identity({"launchbench": current})["machine_id"] == current["machine_id"]
    assert machine_identity({"launchbench": info})["machine_id"] == info["machine_id"]
    assert machine_identity({"launchbench": info})["llc_bytes"] == info["llc_bytes"]


def test_a_gpu_that_fails_after_the_probe_costs_only_the_gpu_key(monkeypatch: pytest.MonkeyPatch) -> None:
    """CuPy sees a device, then ``getDeviceProperties`` fails: the GPU key says so, the rest is read, the
    fault is handed on (to the run record), and load composes the same id as provenance."""

    def failing() -> None:
        raise RuntimeError("cudaErrorUnknown: unknown error")

    monkeypatch.setattr(provenance.cuda, "gpu_info", failing)
    faults: list[str] = []
    info = provenance.collect_machine_info(faults)
    assert info["gpu"] == {"error": "RuntimeError: cudaErrorUnknown: unknown error"}
    assert info["machine_id"].endswith(f" / {provenance.GPU_UNREADABLE}")
    assert machine_identity({"launchbench": info})["machine_id"] == info["machine_id"]
    assert info["cpu_model"] and info["numpy"]
    (fault,) = faults
    assert "collect_gpu" in fault and "cudaErrorUnknown" in fault
    json.dumps(info)


def test_any_collector_that_raises_leaves_its_keys_empty(
    monkeypatch: pytest.MonkeyPatch, no_gpu: None
) -> None:
    def failing(info: dict) -> None:
        info["caches"] = "half-filled"
        raise OSError("sysfs went away")

    monkeypatch.setattr(
        provenance,
        "COLLECTORS",
        tuple((failing, keys) if keys[0] == "caches" else (c, keys) for c, keys in provenance.COLLECTORS),
    )
    faults: list[str] = []
    info = provenance.collect_machine_info(faults)
    assert set(info) == KEYS
    assert info["caches"] is None and info["llc_bytes"] is None and info["core_cache_bytes"] is None
    assert len(faults) == 1 and "sysfs went away" in faults[0]


def test_caches_and_governor_are_read_from_sysfs(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    cpu0 = _fake_cpu0(
        tmp_path / "cpu0",
        [
            ("1", "Data", "48K", "0"),
            ("1", "Instruction", "32K", "0"),
            ("2", "Unified", "2048K", "0"),
            ("3", "Unified", "36M", "0-15"),
            ("4", "Unified", "garbage", "0-15"),  # unreadable size: kept, but not a size
        ],
        governor="performance",
    )
    monkeypatch.setattr(provenance, "CPU0_SYSFS", cpu0)
    info: dict[str, object] = {}
    provenance.collect_caches(info)
    provenance.collect_cpu(info)
    assert info["governor"] == "performance"
    assert [cache["size_bytes"] for cache in info["caches"]] == [
        48 * 1024,
        32 * 1024,
        2 * 2**20,
        36 * 2**20,
        None,
    ]
    assert info["caches"][3]["shared_cpu_list"] == "0-15"
    assert info["llc_bytes"] == 36 * 2**20
    assert info["core_cache_bytes"] == 2 * 2**20


def test_a_single_cache_level_is_both_core_and_last_level(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    cpu0 = _fake_cpu0(tmp_path / "cpu0", [("1", "Data", "64K", "0"), ("1", "Instruction", "64K", "0")], None)
    monkeypatch.setattr(provenance, "CPU0_SYSFS", cpu0)
    info: dict[str, object] = {}
    provenance.collect_caches(info)
    assert info["llc_bytes"] == info["core_cache_bytes"] == 64 * 1024


def test_unreadable_sysfs_leaves_none(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, no_gpu: None) -> None:
    monkeypatch.setattr(provenance, "CPU0_SYSFS", tmp_path / "missing")
    monkeypatch.setattr(provenance, "_darwin_caches", list)  # no sysctl fallback either
    info = provenance.collect_machine_info()
    assert set(info) == KEYS
    assert info["governor"] is None
    assert info["caches"] == []
    assert info["llc_bytes"] is None
    assert info["core_cache_bytes"] is None


def test_every_file_source_unreadable(monkeypatch: pytest.MonkeyPatch, no_gpu: None) -> None:
    """No /proc/cpuinfo, no sysfs, no machine id: the CPU model falls back to ``platform``, the rest None."""
    monkeypatch.setattr(provenance, "_read_text", lambda path: None)
    monkeypatch.setattr(provenance, "_read_id", lambda path: None)
    monkeypatch.setattr(provenance, "_darwin_caches", list)
    monkeypatch.setattr(provenance, "_sysctl", lambda name: None)
    monkeypatch.setattr(provenance.platform, "processor", lambda: "")
    monkeypatch.setattr(provenance.platform, "machine", lambda: "x86_64")
    info = provenance.collect_machine_info()
    assert info["cpu_model"] == "x86_64"
    assert info["governor"] is None
    assert info["llc_bytes"] is None
    assert info["machine_id"] == f"{info['host']} / {platform.system()} / x86_64 / no GPU"


def test_thread_environment_is_recorded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OMP_NUM_THREADS", "3")
    monkeypatch.delenv("OPENBLAS_NUM_THREADS", raising=False)
    info: dict[str, object] = {}
    provenance.collect_env(info)
    assert info["env"]["OMP_NUM_THREADS"] == "3"
    assert info["env"]["OPENBLAS_NUM_THREADS"] is None


def test_blas_is_threadpoolctls_view() -> None:
    info: dict[str, object] = {}
    provenance.collect_numpy(info)
    assert isinstance(info["blas"], list)
    assert all("internal_api" in library and "num_threads" in library for library in info["blas"])


# --- machines told apart: a name the user gives, else host + a fingerprint of the installation -------------


def _machine_id_file(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, text: str | None) -> None:
    """Make ``text`` this installation's /etc/machine-id (None: the installation keeps none)."""
    path = tmp_path / f"machine-id-{abs(hash(text))}"
    if text is not None:
        path.write_text(text + "\n")
    monkeypatch.setattr(provenance, "MACHINE_ID_FILES", (path,))
    monkeypatch.setattr(provenance.sys, "platform", "linux")


def test_two_vms_that_share_a_host_name_are_two_machines(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, no_gpu: None
) -> None:
    monkeypatch.setattr(provenance.platform, "node", lambda: "vm")
    ids = []
    for machine in ("3d1219c7c4c5404aaa1f6d2a48adfda4", "9f0c2b7e5a6d4e1f8a3b2c1d0e9f8a7b"):
        _machine_id_file(monkeypatch, tmp_path, machine)
        info = provenance.collect_machine_info()
        assert info["machine_fingerprint"] == provenance.installation_fingerprint()
        assert len(info["machine_fingerprint"]) == provenance.FINGERPRINT_CHARS
        assert machine not in json.dumps(info)  # the installation's id is never saved as it is
        assert info["machine_id"].startswith(f"vm#{info['machine_fingerprint']} / ")
        assert machine_identity({"launchbench": info})["machine_id"] == info["machine_id"]
        assert provenance.collect_machine_info()["machine_id"] == info["machine_id"]  # stable
        ids.append(info["machine_id"])
    assert ids[0] != ids[1]


def test_without_an_installation_id_the_host_alone_names_the_machine(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, no_gpu: None
) -> None:
    _machine_id_file(monkeypatch, tmp_path, None)
    info = provenance.collect_machine_info()
    assert info["machine_fingerprint"] is None
    assert info["machine_id"] == f"{info['host']} / {platform.system()} / {info['cpu_model']} / no GPU"


def test_a_name_the_user_gives_names_the_machine(monkeypatch: pytest.MonkeyPatch, no_gpu: None) -> None:
    """``--machine`` wins over ``LAUNCHBENCH_MACHINE``, which wins over host + fingerprint; blank is unset."""
    cpu = provenance.collect_machine_info()["cpu_model"]
    monkeypatch.setenv(provenance.MACHINE_NAME_VARIABLE, "  lab-epyc-2  ")
    info = provenance.collect_machine_info()
    assert info["machine_name"] == "lab-epyc-2"
    assert info["machine_id"] == f"lab-epyc-2 / {platform.system()} / {cpu} / no GPU"
    assert machine_identity({"launchbench": info})["machine_id"] == info["machine_id"]
    assert provenance.collect_machine_info(machine_name="rack-7")["machine_id"].startswith("rack-7 / ")
    monkeypatch.setenv(provenance.MACHINE_NAME_VARIABLE, " ")
    assert provenance.collect_machine_info()["machine_name"] is None


def test_runs_saved_before_keep_their_ids() -> None:
    """The committed runs, saved before names and fingerprints existed, load with the ids they always had."""
    data = Path(__file__).parent / "data"
    for path in sorted(data.glob("*.json")):
        ours = json.loads(path.read_text(encoding="utf-8"))["machine_info"]
        if "machine_fingerprint" in ours.get("launchbench", {}) or "machine_name" in ours.get(
            "launchbench", {}
        ):
            continue  # saved with today's provenance
        identity = machine_identity(ours)
        assert identity["machine_id"] == " / ".join(
            part
            for part in (
                identity["host"],
                identity["system"],
                identity["cpu_model"],
                identity["gpu_name"] or "no GPU",
            )
            if part
        ), path.name
