"""Where this run will be saved, checked at session start, and the save itself guarded at the end.

Storage that cannot be written is found before anything is measured, not after every case has run
(pytest-benchmark writes only at the very end, and a ``PermissionError`` there loses the whole run). A disk
that fills up (or a file-size limit, a folder removed) while the cases run is only found when saving:
``guard_saving`` makes pytest-benchmark's two writes (``--benchmark-json``, and the file storage of
``--benchmark-save``/``--benchmark-autosave``) go through ``write_run``, which writes a file whole or not
at all (never a truncated run under the storage's own name) and, when it cannot, keeps the run in a
fallback folder (``fallback_folders``) named in one line, so minutes of measurement are never lost to a
full disk.

A run saved into the storage takes the next free number (``write_numbered``): pytest-benchmark's own
numbering globs four digits, so past ``9999_`` every save was ``10000_`` and replaced the last, and two
sessions saving at once took one number and one run was lost (issue 32). The number is one more than any
the folder holds, of any number of digits, and the file is put in place by a hard link, which never
replaces a file: a session that finds its number taken meanwhile takes the next.
"""

from __future__ import annotations

import contextlib
import errno
import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any


def folder_problem(folder: Path) -> str | None:
    """Why files cannot be created in ``folder`` (created with its parents where missing), or None.

    Walks up to the deepest part of the path that exists: it must be a folder this process may write into
    and enter; a part that is a file cannot hold a folder.
    """
    existing = folder
    while not existing.exists():
        if existing.parent == existing:
            return f"{folder}: no part of the path exists"
        existing = existing.parent
    if not existing.is_dir():
        return f"{folder}: {existing} is a file, not a folder"
    if not os.access(existing, os.W_OK | os.X_OK):
        what = "the folder" if existing == folder else f"its nearest existing folder {existing}"
        return f"{folder}: {what} is not writable"
    return None


def file_problem(path: Path) -> str | None:
    """Why ``path`` cannot be written as a file (its folder is not created for it), or None."""
    if path.is_dir():
        return f"{path} is a folder, not a file"
    if path.exists():
        return None if os.access(path, os.W_OK) else f"{path} exists and is not writable"
    parent = path.parent
    if not parent.is_dir():
        return f"{path}: its folder {parent} does not exist"
    if not os.access(parent, os.W_OK | os.X_OK):
        return f"{path}: its folder {parent} is not writable"
    return None


def output_problems(session: Any) -> list[str]:
    """One line per output of pytest-benchmark's ``session`` that cannot be written: the ``--benchmark-json``
    file, and the storage folder of ``--benchmark-save``/``--benchmark-autosave`` (file storage only;
    another backend reports its own errors)."""
    problems = []
    if session.json:
        problem = file_problem(Path(session.json))
        if problem:
            problems.append(f"--benchmark-json: {problem}")
    if session.save or session.autosave:
        storage = session.storage
        root = getattr(storage, "path", None)
        if isinstance(root, Path):
            machine_folder = getattr(storage, "default_machine_id", None)
            problem = folder_problem(root / machine_folder if machine_folder else root)
            if problem:
                problems.append(
                    f"--benchmark-storage (where --benchmark-save/--benchmark-autosave write): {problem}"
                )
    return problems


def fallback_folders() -> list[Path]:
    """Where a run that cannot be saved where asked is kept instead, in order: the temporary folder (another
    file system, often), the home folder, the current folder."""
    return list(dict.fromkeys([Path(tempfile.gettempdir()), Path.home(), Path.cwd()]))


def write_run(path: Path, data: bytes, say: Callable[[str], None]) -> Path | None:
    """Write ``data`` (one saved run) to ``path`` whole or not at all: into a hidden file beside it, then
    renamed. When that fails (``OSError``: a full disk, a file-size limit, a folder gone), nothing is left
    under ``path`` and the run is written to the first of ``fallback_folders`` that takes it; ``say`` gets
    one line naming both. Return where the run is, or None when no folder took it (also said)."""
    try:
        _write_whole(path, data)
        return path
    except OSError as error:
        reason = error.strerror or str(error)
    return _saved_elsewhere(path, data, reason, say)


def _saved_elsewhere(path: Path, data: bytes, reason: str, say: Callable[[str], None]) -> Path | None:
    """The run that could not be saved to ``path`` (``reason``) saved to the first of ``fallback_folders``
    that takes it, with one line naming both; None (also said) when none does."""
    for folder in fallback_folders():
        fallback = folder / f"launchbench-unsaved-{os.getpid()}-{path.name}"
        try:
            _write_whole(fallback, data)
        except OSError:
            continue
        say(
            f"launchbench: the run could not be saved to {path} ({reason}); it was saved to {fallback} "
            "instead: move it there once there is room"
        )
        return fallback
    folders = ", ".join(map(str, fallback_folders()))
    say(f"launchbench: the run could not be saved to {path} ({reason}), nor in {folders}: it is lost")
    return None


def write_numbered(folder: Path, name: str, data: bytes, say: Callable[[str], None]) -> Path | None:
    """Save ``data`` (one run) into the storage ``folder`` as ``NNNN_name.json``, NNNN the next free number
    (``next_number``), never replacing a file: written whole into a hidden file, then linked under its
    number (a number taken meanwhile by another session: the next one). Where it cannot be written there,
    as ``write_run``. Return where the run is, or None when it is lost (said)."""
    try:
        folder.mkdir(parents=True, exist_ok=True)
        return _link_numbered(folder, name, data)
    except OSError as error:
        reason = error.strerror or str(error)
    return _saved_elsewhere(folder / f"{next_number(folder, quiet=True):04d}_{name}.json", data, reason, say)


def next_number(folder: Path, quiet: bool = False) -> int:
    """One more than the largest number a saved run in ``folder`` starts with (``0001_x.json``,
    ``10000_x.json``: any number of digits), or 1; ``quiet``: 1 when the folder cannot be listed."""
    try:
        names = [entry.name for entry in os.scandir(folder)]
    except OSError:
        if quiet:
            return 1
        raise
    numbers = [
        int(head) for head, sep, _ in (name.partition("_") for name in names) if sep and head.isdigit()
    ]
    return max(numbers, default=0) + 1


def _link_numbered(folder: Path, name: str, data: bytes) -> Path:
    """``write_numbered``'s save into ``folder``: ``OSError`` when it cannot write there."""
    handle, hidden = tempfile.mkstemp(prefix=f".{name}.", suffix=".partial", dir=folder)
    try:
        _fill(handle, data)
        while True:
            path = folder / f"{next_number(folder):04d}_{name}.json"
            try:
                os.link(hidden, path)
            except FileExistsError:
                continue  # another session took the number since it was counted: the next one
            except OSError as error:
                if error.errno not in _NO_LINKS:
                    raise
                if not _created(path, data):
                    continue
            return path
    finally:
        with contextlib.suppress(OSError):
            Path(hidden).unlink()


#: ``os.link``'s errors on a file system without hard links (FAT, some network file systems).
_NO_LINKS = frozenset(code for code in (errno.EPERM, errno.ENOTSUP, errno.EOPNOTSUPP, errno.ENOSYS) if code)


def _created(path: Path, data: bytes) -> bool:
    """``data`` written into ``path`` created anew (``O_EXCL``: never a file that is there), where no hard
    link can be made; False when ``path`` is there already. A file cut short by a full disk is removed."""
    try:
        handle = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0), 0o666)
    except FileExistsError:
        return False
    try:
        with os.fdopen(handle, "wb") as file:
            file.write(data)
            file.flush()
            os.fsync(file.fileno())
    except BaseException:
        with contextlib.suppress(OSError):
            path.unlink()
        raise
    return True


def _fill(handle: int, data: bytes) -> None:
    """Write ``data`` into the new file ``handle`` (closed after), flushed to disk, with the permissions any
    new file gets here (``mkstemp`` makes it private)."""
    os.fchmod(handle, 0o666 & ~_umask())
    with os.fdopen(handle, "wb") as file:
        file.write(data)
        file.flush()
        os.fsync(file.fileno())


def _write_whole(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` through a hidden file beside it, renamed into place once written and
    flushed to disk; the hidden file is removed when anything fails."""
    handle, name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".partial", dir=path.parent)
    try:
        _fill(handle, data)
        Path(name).replace(path)
    except BaseException:
        with contextlib.suppress(OSError):
            Path(name).unlink()
        raise


def _umask() -> int:
    """The process's file-creation mask (read by setting it, then put back at once)."""
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def guard_saving(session: Any, say: Callable[[str], None]) -> None:
    """Make pytest-benchmark's ``session`` save through ``write_run``: the ``--benchmark-json`` file, and,
    through ``write_numbered``, the file storage's next run file (other storage backends report their own
    errors). The bytes written are
    pytest-benchmark's own (``safe_dumps``, as its writers do)."""
    from pytest_benchmark.utils import safe_dumps

    def encoded(output_json: dict) -> bytes:
        return safe_dumps(output_json, ensure_ascii=True, indent=4).encode()

    def save_json(output_json: dict) -> None:
        write_run(Path(session.json), encoded(output_json), say)

    session.save_json = save_json
    storage = session.storage
    if isinstance(getattr(storage, "path", None), Path) and hasattr(storage, "get"):

        def save(output_json: dict, save: str) -> None:
            folder = storage.get(f"{save}.json").parent  # the machine's folder (made by pytest-benchmark)
            write_numbered(folder, save, encoded(output_json), say)

        storage.save = save
