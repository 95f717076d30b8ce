"""Where this run will be saved, checked at session start: storage that cannot be written is found before
anything is measured, not after every case has run (pytest-benchmark writes only at the very end, and a
``PermissionError`` there loses the whole run).

Only checks; nothing is created or written here (pytest-benchmark creates its storage folder itself).
"""

from __future__ import annotations

import os
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
