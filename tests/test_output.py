"""analysis.output: the storage root of every form of input, the output folder's checks, and the files a
command owns (manifest, reruns, stale figures, hand edits)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from analysis.output import (
    MANIFEST_NAME,
    OutputError,
    Published,
    check_out,
    check_replaceable,
    publish,
    staging,
    storage_root,
    storage_roots,
)

PLATFORM = "Linux-CPython-3.11-64bit"


@pytest.fixture
def storage(tmp_path: Path) -> Path:
    """A pytest-benchmark storage folder with one saved run (its content does not matter here)."""
    folder = tmp_path / ".benchmarks" / PLATFORM
    folder.mkdir(parents=True)
    (folder / "0001_q.json").write_text("{}", encoding="utf-8")
    return tmp_path / ".benchmarks"


@pytest.mark.parametrize(
    "name",
    [PLATFORM, "Darwin-PyPy-3.10-64bit", "Windows-CPython-3.13-32bit", "Linux-CPython-fleet-64bit"],
)
def test_platform_folders_are_pytest_benchmarks_names(tmp_path: Path, name: str) -> None:
    saved = tmp_path / "store" / name / "0001.json"
    saved.parent.mkdir(parents=True)
    saved.write_text("{}", encoding="utf-8")
    assert storage_root(saved) == tmp_path / "store"
    assert storage_root(saved.parent) == tmp_path / "store"


def test_a_file_outside_a_platform_folder_is_rooted_at_its_folder(tmp_path: Path) -> None:
    run = tmp_path / "runs" / "laptop.json"
    run.parent.mkdir()
    run.write_text("{}", encoding="utf-8")
    assert storage_root(run) == tmp_path / "runs"
    assert storage_root(tmp_path / "runs") == tmp_path / "runs"


def test_every_form_of_input_gives_the_same_root(storage: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(storage.parent)
    file = f".benchmarks/{PLATFORM}/0001_q.json"
    for given in [
        ".benchmarks",
        f".benchmarks/{PLATFORM}",
        file,
        ".benchmarks/**/*.json",
        str(storage / "*/*"),
    ]:
        assert storage_roots([given]) == [(given, storage)], given
    assert storage_roots(["missing/*.json", "nothing"]) == []


@pytest.mark.parametrize(
    ("inputs", "out"),
    [
        ([".benchmarks"], ".benchmarks/rep"),
        ([".benchmarks/**/*.json"], ".benchmarks/rep"),  # the glob quoted
        ([f".benchmarks/{PLATFORM}/0001_q.json"], ".benchmarks/L"),  # the glob expanded by the shell
        ([f".benchmarks/{PLATFORM}/0001_q.json"], f".benchmarks/{PLATFORM}"),
        ([f".benchmarks/{PLATFORM}"], ".benchmarks"),
        (["elsewhere", ".benchmarks"], "./.benchmarks/../.benchmarks/x"),
    ],
)
def test_out_inside_an_inputs_storage_is_refused_and_nothing_created(
    storage: Path, monkeypatch: pytest.MonkeyPatch, inputs: list[str], out: str
) -> None:
    monkeypatch.chdir(storage.parent)
    before = sorted(storage.rglob("*"))
    with pytest.raises(OutputError) as error:
        check_out(out, inputs)
    message = str(error.value)
    assert message.startswith(f"--out {out} ")
    assert f"the run storage {storage} of input " in message
    assert "\n" not in message
    assert sorted(storage.rglob("*")) == before


def test_a_link_into_the_storage_is_refused(storage: Path, tmp_path: Path) -> None:
    link = tmp_path / "link"
    link.symlink_to(storage)
    with pytest.raises(OutputError, match="lies inside the run storage"):
        check_out(str(link / "report"), [str(storage)])


@pytest.mark.parametrize(
    ("out", "said"),
    [
        ("", "--out '' names no folder; give the folder to write into"),
        ("  ", "--out '  ' names no folder; give the folder to write into"),
        ("/dev/null", "--out /dev/null is a character device, not a folder"),
        ("FILE", "--out FILE is a file, not a folder"),
        ("FILE/sub", "--out FILE/sub cannot be created as a folder (Not a directory)"),
        (
            "/proc/launchbench/x",
            "--out /proc/launchbench/x cannot be created as a folder (No such file or directory)",
        ),
    ],
)
def test_an_out_that_cannot_be_a_folder_is_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, out: str, said: str
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "FILE").write_text("mine", encoding="utf-8")
    if out.startswith("/proc") and not Path("/proc/self").exists():
        pytest.skip("needs Linux /proc")
    with pytest.raises(OutputError) as error:
        check_out(out, [])
    assert str(error.value) == said
    assert (tmp_path / "FILE").read_text(encoding="utf-8") == "mine"


def test_a_folder_that_cannot_be_written_is_refused(tmp_path: Path) -> None:
    if os.geteuid() != 0:
        folder = tmp_path / "ro"
        folder.mkdir(mode=0o555)
    elif Path("/sys/kernel").is_dir():
        folder = Path("/sys")  # read-only even for root
    else:
        pytest.skip("root writes into every folder here")
    with pytest.raises(OutputError, match=r" cannot be written \(Permission denied\)$"):
        check_out(str(folder), [])


def test_out_is_created_and_its_new_folders_are_reported(tmp_path: Path) -> None:
    created = check_out(str(tmp_path / "a" / "b"), [])
    assert created == [tmp_path / "a", tmp_path / "a" / "b"]
    assert (tmp_path / "a" / "b").is_dir()
    assert list((tmp_path / "a" / "b").iterdir()) == []  # the write probe is gone
    assert check_out(str(tmp_path / "a" / "b"), []) == []


# --- the files a command owns -------------------------------------------------------------------------------


def write(stage: Path, files: dict[str, str]) -> None:
    for rel, text in files.items():
        (stage / rel).parent.mkdir(parents=True, exist_ok=True)
        (stage / rel).write_text(text, encoding="utf-8")


def publish_files(out: Path, files: dict[str, str], owner: str = "report", force: bool = False) -> Published:
    out.mkdir(exist_ok=True)
    with staging(out) as stage:
        write(stage, files)
        return publish(stage, out, owner, force)


def test_a_rerun_replaces_its_files_removes_its_stale_ones_and_touches_nothing_else(tmp_path: Path) -> None:
    out = tmp_path / "out"
    out.mkdir()
    (out / "notes.md").write_text("mine", encoding="utf-8")
    first = publish_files(out, {"report.md": "one", "figures/a.png": "A", "figures/b.png": "B"})
    assert first.written == (out / "figures/a.png", out / "figures/b.png", out / "report.md")
    manifest = json.loads((out / MANIFEST_NAME).read_text(encoding="utf-8"))
    assert sorted(manifest["owners"]["report"]) == ["figures/a.png", "figures/b.png", "report.md"]
    second = publish_files(out, {"report.md": "two", "figures/a.png": "A2"})
    assert second.removed == (out / "figures/b.png",)
    assert second.kept == ()
    assert (out / "report.md").read_text(encoding="utf-8") == "two"
    assert not (out / "figures/b.png").exists()
    assert (out / "notes.md").read_text(encoding="utf-8") == "mine"
    assert sorted(p.name for p in out.iterdir()) == [MANIFEST_NAME, "figures", "notes.md", "report.md"]


def test_a_hand_edit_is_refused_unless_forced_and_an_edited_stale_file_is_kept(tmp_path: Path) -> None:
    out = tmp_path / "out"
    publish_files(out, {"report.md": "one", "figures/a.png": "A"})
    (out / "report.md").write_text("one, with my notes", encoding="utf-8")
    with pytest.raises(OutputError) as error:
        check_replaceable(out, "report", ["report.md"], force=False)
    assert str(error.value) == (
        f"{out / 'report.md'} was changed since this command wrote it (edited by hand?); keep your copy "
        "elsewhere, or pass --force to replace it"
    )
    with pytest.raises(OutputError):
        publish_files(out, {"report.md": "two"})
    assert (out / "report.md").read_text(encoding="utf-8") == "one, with my notes"  # nothing moved
    (out / "figures/a.png").write_text("A, retouched", encoding="utf-8")
    forced = publish_files(out, {"report.md": "two"}, force=True)
    assert (out / "report.md").read_text(encoding="utf-8") == "two"
    assert forced.removed == ()
    assert forced.kept == (
        f"{out / 'figures/a.png'}: left in place: written by an earlier run, changed since",
    )
    assert (out / "figures/a.png").read_text(encoding="utf-8") == "A, retouched"


def test_a_file_it_did_not_write_is_refused_unless_forced(tmp_path: Path) -> None:
    out = tmp_path / "out"
    out.mkdir()
    (out / "report.md").write_text("someone's report", encoding="utf-8")
    with pytest.raises(OutputError, match="exists and was not written by this command"):
        check_replaceable(out, "report", ["report.md"], force=False)
    check_replaceable(out, "report", ["report.md"], force=True)
    publish_files(out, {"report.md": "ours"}, force=True)
    assert (out / "report.md").read_text(encoding="utf-8") == "ours"


def test_owners_keep_their_own_files(tmp_path: Path) -> None:
    """plot and report may share a folder: one's rerun never removes the other's files."""
    out = tmp_path / "out"
    publish_files(out, {"report.md": "r", "figures/a.png": "A"}, owner="report")
    publish_files(out, {"a.png": "P"}, owner="plot")
    publish_files(out, {"report.md": "r2"}, owner="report")
    assert (out / "a.png").read_text(encoding="utf-8") == "P"
    publish_files(out, {"b.png": "P2"}, owner="plot")
    assert not (out / "a.png").exists()
    assert (out / "report.md").read_text(encoding="utf-8") == "r2"


def test_a_folder_or_file_in_the_way_is_never_replaced(tmp_path: Path) -> None:
    out = tmp_path / "out"
    out.mkdir()
    (out / "report.md").mkdir()
    with pytest.raises(OutputError, match=r"report\.md exists and is not a file the command wrote"):
        publish_files(out, {"report.md": "x"}, force=True)
    (out / "figures").write_text("a file", encoding="utf-8")
    with pytest.raises(OutputError, match="figures is a file where a folder of the output must go"):
        publish_files(out, {"figures/a.png": "A"}, force=True)
    assert (out / "figures").read_text(encoding="utf-8") == "a file"


def test_staging_leaves_nothing_behind(tmp_path: Path) -> None:
    out = tmp_path / "out"
    out.mkdir()
    with pytest.raises(RuntimeError), staging(out) as stage:
        write(stage, {"x.png": "x"})
        raise RuntimeError("the command failed halfway")
    assert list(out.iterdir()) == []
