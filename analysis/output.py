"""Where ``python -m analysis`` writes: the output folder checked before any work starts, and the files a
command owns in it.

``check_out`` runs before anything is loaded or fitted. ``--out`` must name a folder that exists or can be
created, and that can be written; and it must not be, or lie inside, the storage root of any input, whatever
form the input took (saved runs are only ever read, and a report written into storage would be read back as
input). The storage root of an input (``storage_root``):

- a folder: the folder itself, or its parent when the folder is a pytest-benchmark platform folder;
- a file: the folder it lives in, or that folder's parent when it is a platform folder (a file saved with
  ``--benchmark-save`` or ``--benchmark-autosave`` lives in ``STORAGE/Linux-CPython-3.11-64bit/``);
- a glob (quoted, or already expanded by the shell into files): the storage root of each file it matches.

A platform folder is named as pytest-benchmark names it: system, Python implementation, version and word size
joined by "-" (``Linux-CPython-3.11-64bit``; ``PLATFORM_FOLDER``).

A command owns the files it wrote into its output folder, and only those: ``publish`` records them in a
manifest (``MANIFEST_NAME``: each file's SHA-256, per owning command) and, on a rerun, replaces only its own
files that are unchanged since it wrote them and removes its own files the new output no longer has (stale
figures). A file it did not write, or one changed since (a hand-edited report.md), is never replaced
silently: the command refuses with one line naming it, before any work where the name is known in advance
(``check_replaceable``), and ``force`` replaces it. Nothing else in the folder is ever touched.

The manifest is input like any run file: a report folder may be shared, unpacked from an archive or edited.
``read_manifest`` checks it entry by entry, and an entry whose path is not a plain relative path inside the
folder ("..", an absolute or drive path, a backslash, a control character), or whose digest is not a
SHA-256, is refused with one line and never acted on; a file is removed only when it still lies inside the
folder once links are followed. Nothing outside the output folder is ever written or removed.

New files are first written into a staging folder inside the output folder (``staging``) and then moved
into place by renames, so a command that fails or is interrupted halfway leaves the earlier output as it
was. The folder is locked meanwhile (``locked``): a second command writing into it at once is refused in
one line. Every write goes through ``writing`` (and ``publish``), which turns the OS's refusal (a full
disk, a file-size limit, a name too long) into one ``OutputError`` line.
"""

from __future__ import annotations

import contextlib
import glob
import hashlib
import json
import os
import re
import shutil
import stat
import tempfile
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath, PureWindowsPath

from analysis.signals import held

try:
    import fcntl
except ImportError:  # Windows: no flock
    fcntl = None

#: A pytest-benchmark platform folder: ``utils.get_machine_id()``'s system-implementation-version-bits.
PLATFORM_FOLDER = re.compile(r"^.+-[A-Za-z]+-[^-]+-\d+bit$")

#: The manifest of an output folder: {"version": 1, "owners": {command: {relative path: SHA-256}}}.
MANIFEST_NAME = ".launchbench-output.json"
MANIFEST_VERSION = 1
_STAGING_PREFIX = ".launchbench-staging-"
#: The file formats figures can be written in (PNG to look at, SVG to zoom into); here rather than in
#: ``analysis.figures`` so the command line can offer them without importing matplotlib.
FIGURE_FORMATS = ("png", "svg")
#: The formats written unless others are asked for (``--formats``): PNG alone. Each format is one more
#: rendering of every figure: SVG takes about as long as PNG to write and 1.4–2.4 times its bytes (the
#: figures of 1,000 runs of 10 machines), for a reader who zooms in, not for reading the report.
DEFAULT_FIGURE_FORMATS = ("png",)
_GLOB_CHARS = frozenset("*?[")


class OutputError(Exception):
    """The output folder cannot be used as asked; the message is one line that says why and what to do."""


def storage_root(path: Path) -> Path:
    """The storage root of one input path (module docstring): the folder of saved runs it belongs to. A
    link is followed first: a file linked from elsewhere belongs to the storage it lies in."""
    resolved = path.resolve()
    folder = resolved if resolved.is_dir() else resolved.parent
    return folder.parent if PLATFORM_FOLDER.match(folder.name) else folder


def storage_roots(inputs: Iterable[str]) -> list[tuple[str, Path]]:
    """(input as given, storage root) for every path each input names: itself when it exists, else each
    match of it as a glob; inputs that name nothing have no root (nothing is read from them)."""
    roots = []
    for raw in inputs:
        text = str(raw)
        try:
            if Path(text).exists() or Path(text).is_symlink():
                matches = [Path(text)]
            elif _GLOB_CHARS & set(text):
                matches = [Path(match) for match in glob.glob(text, recursive=True)]  # noqa: PTH207 (absolute patterns)
            else:
                matches = []
            for match in matches:
                # Where the input lies and, for a link, where it points: both are storage to keep apart.
                folder = match.absolute() if match.is_dir() else match.absolute().parent
                near = folder.parent if PLATFORM_FOLDER.match(folder.name) else folder
                roots += [(text, root) for root in dict.fromkeys((near, storage_root(match)))]
        except (OSError, RuntimeError):  # a name the OS refuses, a link loop: nothing is read from it
            continue
    return roots


def check_out(out: str, inputs: Sequence[str]) -> list[Path]:
    """Check the output folder ``out`` (as given on the command line) for inputs ``inputs``; create it when
    missing. Return the folders created (``remove_created`` takes them away again if the command ends
    without writing); raise ``OutputError`` when it cannot be used."""
    if not out.strip():
        raise OutputError(f"--out {out!r} names no folder; give the folder to write into")
    target = Path(out)
    try:
        resolved = target.resolve()
    except (OSError, RuntimeError) as exc:  # a link loop (RuntimeError before Python 3.13), a name too long
        raise OutputError(f"--out {printable(out)} cannot be used as a folder ({_reason(exc)})") from exc
    for text, root in storage_roots(inputs):
        if resolved.is_relative_to(root):
            where = "is" if resolved == root else "lies inside"
            raise OutputError(
                f"--out {printable(out)} {where} the run storage {printable(root)} of input "
                f"{printable(text)}; saved runs are only read: choose a folder outside it"
            )
    try:
        if target.exists() and not target.is_dir():
            raise OutputError(f"--out {printable(out)} is {_kind(target)}, not a folder")
        created = _missing_folders(target)
    except OSError as exc:
        raise OutputError(f"--out {printable(out)} cannot be used as a folder ({_reason(exc)})") from exc
    try:
        target.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        remove_created(created)
        raise OutputError(f"--out {printable(out)} cannot be created as a folder ({_reason(exc)})") from exc
    try:
        probe, name = tempfile.mkstemp(prefix=".launchbench-probe-", dir=target)
        os.close(probe)
        Path(name).unlink()
    except OSError as exc:
        remove_created(created)
        raise OutputError(f"--out {printable(out)} cannot be written ({_reason(exc)})") from exc
    return created


def remove_created(created: Sequence[Path]) -> None:
    """Remove the folders ``check_out`` created, deepest first, as long as they are still empty."""
    for folder in reversed(created):
        with contextlib.suppress(OSError):
            folder.rmdir()


def _missing_folders(target: Path) -> list[Path]:
    """The folders that creating ``target`` would create, outermost first."""
    missing = []
    folder = target.absolute()
    while not folder.exists() and folder != folder.parent:
        missing.append(folder)
        folder = folder.parent
    return missing[::-1]


def _kind(path: Path) -> str:
    mode = path.stat().st_mode
    if stat.S_ISCHR(mode):
        return "a character device"
    if stat.S_ISBLK(mode):
        return "a block device"
    if stat.S_ISFIFO(mode):
        return "a pipe"
    return "a file"


# --- the files a command owns -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Published:
    """What ``publish`` did: ``written``, the files now in place (output folder / relative path);
    ``removed``, the owner's earlier files the new output no longer has; ``kept``, one line per such file
    left in place because it was changed since it was written."""

    written: tuple[Path, ...]
    removed: tuple[Path, ...]
    kept: tuple[str, ...]


def owned_files(out: Path, owner: str) -> dict[str, str]:
    """The files of ``out`` that ``owner`` wrote, as its manifest records them: relative path -> SHA-256;
    empty when there is no manifest, or it cannot be read (then no file counts as the owner's). Only the
    entries ``read_manifest`` accepts count."""
    return read_manifest(out).owners.get(owner, {})


@dataclass(frozen=True)
class Manifest:
    """An output folder's manifest as checked by ``read_manifest``: ``owners`` (command -> relative path ->
    SHA-256), only the entries that are sound; ``problems``, one line per entry or part refused."""

    owners: dict[str, dict[str, str]]
    problems: tuple[str, ...]


_SHA256 = re.compile(r"^[0-9a-f]{64}$")


def read_manifest(out: Path) -> Manifest:
    """``out``'s manifest, checked like any input file: it may have been edited, unpacked from an archive
    or shared, so an entry is used only when its path is relative, stays inside ``out`` (no "..", no
    absolute or drive path, no backslash, no control character) and its digest is a SHA-256; every other
    entry is refused with one line and never acted on (no file outside the folder is ever removed)."""
    path = out / MANIFEST_NAME
    name = printable(path)
    try:
        raw = path.read_bytes() if path.is_file() else None
    except OSError as exc:
        return Manifest({}, (f"{name}: cannot be read ({_reason(exc)}): no file counts as written here",))
    if raw is None:
        return Manifest({}, ())
    try:
        doc = json.loads(raw.decode("utf-8"))
    except (ValueError, RecursionError):
        return Manifest({}, (f"{name}: not a manifest (not UTF-8 JSON): no file counts as written here",))
    owners = doc.get("owners") if isinstance(doc, dict) else None
    if not isinstance(owners, dict):
        return Manifest({}, (f"{name}: not a manifest (no 'owners' object): no file counts as written here",))
    checked: dict[str, dict[str, str]] = {}
    problems: list[str] = []
    for owner, files in owners.items():
        if not isinstance(files, dict):
            problems.append(f"{name}: owner {printable(owner)}: not an object of files: refused")
            continue
        kept = {}
        for rel, digest in files.items():
            why = _unsound_entry(rel, digest)
            if why:
                problems.append(f"{name}: entry {printable(rel)} of {printable(owner)} refused: {why}")
            else:
                kept[rel] = digest
        checked[owner] = kept
    return Manifest(checked, tuple(problems))


def _unsound_entry(rel: str, digest: object) -> str | None:
    """Why a manifest entry (relative path ``rel``, ``digest``) cannot be acted on, or None."""
    if not rel or not rel.isprintable():
        return "not a file name (empty, or a control character in it)"
    if "\\" in rel or PureWindowsPath(rel).drive or PurePosixPath(rel).is_absolute():
        return "not a path relative to the output folder"
    parts = rel.split("/")
    if any(part in ("", ".", "..") for part in parts):
        return "not a plain path inside the output folder (empty part, '.' or '..')"
    if not isinstance(digest, str) or not _SHA256.match(digest):
        return "its digest is not a SHA-256 (64 hex digits)"
    return None


def _inside(out: Path, rel: str) -> bool:
    """Whether ``out / rel`` lies inside ``out`` once links are followed (a folder of the output replaced
    by a link to elsewhere must not lead a removal out of the folder)."""
    try:
        return (out / rel).parent.resolve().is_relative_to(out.resolve())
    except (OSError, RuntimeError):
        return False


def check_replaceable(out: Path, owner: str, names: Iterable[str], force: bool) -> None:
    """Raise ``OutputError`` when one of ``names`` (paths relative to ``out``) exists and is not ``owner``'s
    own unchanged file, unless ``force``: the check of the files known before any work."""
    if force:
        return
    owned = owned_files(out, owner)
    for name in names:
        problem = _conflict(out, name, owned)
        if problem:
            raise OutputError(problem)


def _conflict(out: Path, rel: str, owned: dict[str, str]) -> str | None:
    """Why writing ``out/rel`` would replace what is not the owner's unchanged file, or None."""
    path = out / rel
    if not path.exists() and not path.is_symlink():
        return None
    if path.is_symlink() or not path.is_file():
        return f"{path} exists and is not a file the command wrote; move it away (or choose another --out)"
    if rel not in owned:
        return (
            f"{path} exists and was not written by this command (no record of it in {out / MANIFEST_NAME}); "
            "move it away, or pass --force to replace it"
        )
    if _sha256(path) != owned[rel]:
        return (
            f"{path} was changed since this command wrote it (edited by hand?); keep your copy elsewhere, or "
            "pass --force to replace it"
        )
    return None


@contextlib.contextmanager
def staging(out: Path) -> Iterator[Path]:
    """A new empty folder inside ``out`` to write a command's files into before ``publish``; removed with
    whatever is left in it when the block ends (also left-overs of an earlier run killed in this block).

    The output folder is locked for the block (``locked``), so a second command writing into it at once
    is refused with one line instead of removing this one's staging folder as a left-over. Every write in
    the block goes through here: an ``OSError`` raised in it (a full disk, a file too large for the
    limits, a name the OS refuses) becomes one ``OutputError`` line, and the earlier output stays whole."""
    with locked(out), writing(out):
        for old in out.glob(f"{_STAGING_PREFIX}*"):
            shutil.rmtree(old, ignore_errors=True)
        stage = Path(tempfile.mkdtemp(prefix=_STAGING_PREFIX, dir=out))
        try:
            yield stage
        finally:
            shutil.rmtree(stage, ignore_errors=True)


@contextlib.contextmanager
def writing(out: Path) -> Iterator[None]:
    """Turn an ``OSError`` raised in the block (writing into ``out``) into one ``OutputError`` line naming
    the file and the OS's reason: the one place where a failed write becomes a message."""
    try:
        yield
    except OSError as exc:
        where = f" at {printable(exc.filename)}" if exc.filename else ""
        raise OutputError(f"writing into {printable(out)} failed ({_reason(exc)}){where}") from exc


@contextlib.contextmanager
def locked(out: Path) -> Iterator[None]:
    """Hold an exclusive lock on the folder ``out`` (``flock`` on the folder itself, so no lock file is left
    behind) for the block; ``OutputError`` at once when another command holds it. Where the OS has no
    ``flock`` (Windows), the block runs unlocked."""
    if fcntl is None:
        yield
        return
    handle = os.open(out, os.O_RDONLY)
    try:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError as exc:
            raise OutputError(
                f"{printable(out)} is being written by another command right now; run this one when it "
                "has finished (or choose another --out)"
            ) from exc
        yield
    finally:
        os.close(handle)  # closing the folder releases the lock


def publish(stage: Path, out: Path, owner: str, force: bool, part: str | None = None) -> Published:
    """Move every file under ``stage`` (only those under its subfolder ``part``, when given) to the same
    relative path in ``out``, remove ``owner``'s earlier files the new output does not have, and record the
    new files in the manifest as ``owner``'s.

    Raises ``OutputError`` (nothing moved) when a file would replace one that is not ``owner``'s unchanged
    file, unless ``force``; a folder in the way is never replaced. The signals that stop a command are held
    while files are moved (``analysis.signals.held``), so they cannot leave the folder and its manifest
    disagreeing. Manifest entries ``read_manifest`` refuses are never acted on: their lines are in
    ``kept``."""
    manifest = read_manifest(out)
    owned = manifest.owners.get(owner, {})
    root = stage / part if part is not None else stage
    staged = sorted(path.relative_to(stage).as_posix() for path in root.rglob("*") if path.is_file())
    for rel in staged:
        blocking = [parent for parent in Path(rel).parents if (out / parent).is_file()]
        if blocking:
            raise OutputError(f"{out / blocking[-1]} is a file where a folder of the output must go")
        problem = _conflict(out, rel, owned)
        if problem and (not force or (out / rel).is_dir()):
            raise OutputError(problem)
    digests = {rel: _sha256(stage / rel) for rel in staged}
    written, removed, kept = [], [], list(manifest.problems)
    with held():
        try:
            for rel in staged:
                target = out / rel
                target.parent.mkdir(parents=True, exist_ok=True)
                (stage / rel).replace(target)
                written.append(target)
            for rel, digest in owned.items():
                path = out / rel
                if rel in digests or not _inside(out, rel) or not path.is_file() or path.is_symlink():
                    continue
                if _sha256(path) == digest:
                    path.unlink()
                    removed.append(path)
                else:
                    kept.append(f"{path}: left in place: written by an earlier run, changed since")
            _write_manifest(out, owner, digests, manifest)
        except OSError as exc:
            where = f" at {printable(exc.filename)}" if exc.filename else ""
            raise OutputError(f"writing into {printable(out)} failed ({_reason(exc)}){where}") from exc
    return Published(written=tuple(written), removed=tuple(removed), kept=tuple(kept))


def _write_manifest(out: Path, owner: str, files: dict[str, str], manifest: Manifest) -> None:
    """Record ``files`` as ``owner``'s in ``out``'s manifest (the other owners' sound entries of
    ``manifest`` kept, the refused ones dropped), atomically."""
    path = out / MANIFEST_NAME
    owners = {**manifest.owners, owner: files}
    text = json.dumps({"version": MANIFEST_VERSION, "owners": owners}, indent=1, sort_keys=True)
    handle, name = tempfile.mkstemp(prefix=f"{MANIFEST_NAME}.", dir=out)
    with os.fdopen(handle, "w", encoding="utf-8") as file:
        file.write(text + "\n")
    Path(name).replace(path)


def printable(text: object) -> str:
    """``analysis.schema.printable``: the one escape of text from a file (a name, a path) for a line;
    imported when needed, since this module is imported for ``--help`` and the schema brings numpy."""
    from analysis.schema import printable as escaped

    return escaped(text)


def _reason(exc: BaseException) -> str:
    """The OS's reason for ``exc`` in a few words ("No space left on device"), without the file name."""
    return (exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)).splitlines()[0]


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as file:
        for block in iter(lambda: file.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()
