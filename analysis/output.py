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

New files are first written into a staging folder inside the output folder (``staging``) and then put in
place, so a command that fails or is interrupted halfway leaves the earlier output as it was. A report is
published whole (``publish_whole``, issue 32): where the folder holds nothing but the report's own files,
a new folder holding the new report is swapped in for it by one atomic rename (Linux's
``renameat2(RENAME_EXCHANGE)``), so any stop, SIGKILL included, leaves the old report or the new one,
never new figures beside an old report.md. Elsewhere (other files in the folder, another OS or file
system) files are moved one by one, under a manifest that first names the new files and the old ones
still in place (``pending``), so that whatever a killed command left is its own to the next command,
never refused as "changed since". A folder of the output that is a symbolic link is refused: files are
written into the folder, never where a link points. The folder is locked meanwhile (``locked``): a second
command writing into it at once is refused in one line. Every write goes through ``writing`` (and
``publish``), which turns the OS's refusal (a full disk, a file-size limit, a name too long) into one
``OutputError`` line.
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
import sys
import tempfile
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
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
#: ``analysis.report``'s file in the output folder, and its name in the folder's manifest (here, not there:
#: the command checks the folder before it loads the runs, and imports the report's code while they load);
#: its figures are ``analysis.figures.FIGURES_OWNER``'s, shared with ``plot``, which writes the same files.
REPORT_NAME = "report.md"
REPORT_OWNER = "report"
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
                from analysis.load import _globbed  # as the loader expands it: links to folders not followed

                matches = _globbed(text)
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


def cache_folder(option: str | None, inputs: Sequence[str]) -> tuple[Path | None, str | None]:
    """The cache folder of a command reading ``inputs`` (``--cache`` ``option``, None where not given: then
    ``default_folder``), and None with the line that says why when it must not be used: it names no
    folder, or it lies inside the run storage of an input (the cache would write its files among the
    saved runs)."""
    from analysis.cache import CACHE_ENV, default_folder

    if option is not None:
        named, folder = "--cache", option
    else:
        named = f"${CACHE_ENV}" if os.environ.get(CACHE_ENV) else "the cache folder"
        folder = default_folder()
        if folder is None:
            return None, None
    if not str(folder).strip():
        return None, f"{named} {str(folder)!r} names no folder: give the cache's folder, or --no-cache"
    try:
        where = Path(folder).resolve()
    except (OSError, RuntimeError) as exc:
        return None, f"{named} {printable(folder)} cannot be used as a folder ({exc})"
    for text, root in storage_roots(inputs):
        if where.is_relative_to(root):
            return None, (
                f"{named} {printable(folder)} lies inside the run storage {printable(root)} of input "
                f"{printable(text)}: the cache is not used (choose a folder outside it with --cache DIR)"
            )
    return Path(folder), None


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
    SHA-256), only the entries that are sound; ``problems``, one line per entry or part refused;
    ``pending`` (as ``owners``): the digests of a command's earlier files while it moves its new ones in
    one by one (``publish``), so that a file it had not replaced yet when it was killed is still its own."""

    owners: dict[str, dict[str, str]]
    problems: tuple[str, ...]
    pending: dict[str, dict[str, str]] = field(default_factory=dict)

    def digests(self, owner: str, rel: str) -> tuple[str, ...]:
        """The digests ``owner``'s file ``rel`` may have and still be its own unchanged file."""
        return tuple(
            digest
            for digest in (self.owners.get(owner, {}).get(rel), self.pending.get(owner, {}).get(rel))
            if digest
        )


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
    problems: list[str] = []
    checked = _checked_owners(name, owners, problems)
    pending = doc.get("pending")
    return Manifest(checked, tuple(problems), _checked_owners(name, pending, problems) if pending else {})


def _checked_owners(name: str, owners: object, problems: list[str]) -> dict[str, dict[str, str]]:
    """The sound entries of a manifest's ``owners`` (or ``pending``) object; a line in ``problems`` for each
    entry or part refused."""
    if not isinstance(owners, dict):
        problems.append(f"{name}: a part that is not an object of owners: refused")
        return {}
    checked: dict[str, dict[str, str]] = {}
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
    return checked


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
    manifest = read_manifest(out)
    for name in names:
        problem = _conflict(out, name, manifest.digests(owner, name))
        if problem:
            raise OutputError(problem)


def _conflict(out: Path, rel: str, owned: tuple[str, ...]) -> str | None:
    """Why writing ``out/rel`` would replace what is not the owner's unchanged file (one whose SHA-256 is
    one of ``owned``), or None."""
    path = out / rel
    if not path.exists() and not path.is_symlink():
        return None
    if path.is_symlink() or not path.is_file():
        return f"{path} exists and is not a file the command wrote; move it away (or choose another --out)"
    if not owned:
        return (
            f"{path} exists and was not written by this command (no record of it in {out / MANIFEST_NAME}); "
            "move it away, or pass --force to replace it"
        )
    if _sha256(path) not in owned:
        return (
            f"{path} was changed since this command wrote it (edited by hand?); keep your copy elsewhere, or "
            "pass --force to replace it"
        )
    return None


@contextlib.contextmanager
def staging(out: Path) -> Iterator[Path]:
    """A new empty folder inside ``out`` to write a command's files into before ``publish``; removed with
    whatever is left in it when the block ends (also left-overs of an earlier run killed in this block, and
    the folders an earlier ``publish_whole`` killed halfway left beside ``out``).

    The output folder is locked for the block (``locked``), so a second command writing into it at once
    is refused with one line instead of removing this one's staging folder as a left-over. Every write in
    the block goes through here: an ``OSError`` raised in it (a full disk, a file too large for the
    limits, a name the OS refuses) becomes one ``OutputError`` line, and the earlier output stays whole."""
    with locked(out), writing(out):
        for old in out.glob(f"{_STAGING_PREFIX}*"):
            shutil.rmtree(old, ignore_errors=True)
        _remove_swapped_leftovers(out)
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
    behind) for the block; ``OutputError`` at once when another command holds it, or when the folder was
    swapped for another (``publish_whole``) between opening and locking it. Where the OS has no ``flock``
    (Windows), the block runs unlocked."""
    if fcntl is None:
        yield
        return
    handle = os.open(out, os.O_RDONLY)
    try:
        busy = OutputError(
            f"{printable(out)} is being written by another command right now; run this one when it "
            "has finished (or choose another --out)"
        )
        if not _try_lock(handle):
            raise busy
        now = out.stat()
        if (now.st_ino, now.st_dev) != (os.fstat(handle).st_ino, os.fstat(handle).st_dev):
            raise busy
        yield
    finally:
        os.close(handle)  # closing the folder releases the lock


def _try_lock(handle: int) -> bool:
    """Whether an exclusive ``flock`` on ``handle`` was taken (False: another process holds one)."""
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    return True


def publish(stage: Path, out: Path, owner: str, force: bool, part: str | None = None) -> Published:
    """Move every file under ``stage`` (only those under its subfolder ``part``, when given) to the same
    relative path in ``out``, remove ``owner``'s earlier files the new output does not have, and record the
    new files in the manifest as ``owner``'s (``publish_whole`` with one owner, file by file)."""
    root = stage / part if part is not None else stage
    return _publish(stage, out, {owner: _staged(stage, root)}, force, whole=False)


def publish_whole(stage: Path, out: Path, parts: dict[str, str], force: bool) -> Published:
    """Publish every file under ``stage``: those under each subfolder named in ``parts`` (subfolder ->
    owner) as that owner's, the others as the owner ``parts`` gives for ``""``; where it can, by swapping a
    new folder in for ``out`` in one step (module docstring), else file by file as ``publish``.

    Raises ``OutputError`` (nothing moved) when a file would replace one that is not its owner's
    unchanged file, unless ``force``, or when a folder of the output is a symbolic link; a folder in the
    way is never replaced. The signals that stop a command are held while files are moved
    (``analysis.signals.held``). Manifest entries ``read_manifest`` refuses are never acted on: their lines
    are in ``kept``."""
    staged: dict[str, list[str]] = {}
    for rel in _staged(stage, stage):
        top = rel.split("/")[0] if "/" in rel else ""
        owner = parts.get(top, parts[""])
        staged.setdefault(owner, []).append(rel)
    return _publish(stage, out, staged, force, whole=True)


def _staged(stage: Path, root: Path) -> list[str]:
    return sorted(path.relative_to(stage).as_posix() for path in root.rglob("*") if path.is_file())


def _publish(stage: Path, out: Path, staged: dict[str, list[str]], force: bool, whole: bool) -> Published:
    """``publish`` and ``publish_whole``: ``staged``, each owner's files (relative to ``stage``)."""
    manifest = read_manifest(out)
    for owner, rels in staged.items():
        for rel in rels:
            _check_place(out, rel)
            problem = _conflict(out, rel, manifest.digests(owner, rel))
            if problem and (not force or (out / rel).is_dir()):
                raise OutputError(problem)
    digests = {owner: {rel: _sha256(stage / rel) for rel in rels} for owner, rels in staged.items()}
    try:
        with held():
            swapped = _swapped(stage, out, manifest, digests) if whole else None
            if swapped is not None:
                return swapped
            return _moved(stage, out, manifest, digests)
    except OSError as exc:
        where = f" at {printable(exc.filename)}" if exc.filename else ""
        raise OutputError(f"writing into {printable(out)} failed ({_reason(exc)}){where}") from exc


def _check_place(out: Path, rel: str) -> None:
    """``OutputError`` when a folder ``out/rel`` goes into is a file, or a symbolic link (the files would
    be written where it points, perhaps outside the output folder)."""
    for parent in reversed(Path(rel).parents[:-1]):
        folder = out / parent
        if folder.is_symlink():
            raise OutputError(
                f"{printable(folder)} is a symbolic link where a folder of the output must go: files are "
                "written into the output folder only; replace the link by a folder (or choose another --out)"
            )
        if folder.is_file():
            raise OutputError(f"{printable(folder)} is a file where a folder of the output must go")


def _moved(stage: Path, out: Path, manifest: Manifest, digests: dict[str, dict[str, str]]) -> Published:
    """Move the staged files in one by one: first a manifest that names both the new files and the earlier
    ones (their digests ``pending``), so that a command killed halfway leaves only files that are its own;
    then the renames, the removal of the owners' stale files, and the final manifest."""
    written, removed, kept = [], [], list(manifest.problems)
    owned = {owner: manifest.owners.get(owner, {}) for owner in digests}
    during = {owner: {**owned[owner], **files} for owner, files in digests.items()}
    _write_manifest(out, during, manifest, pending=owned)
    for files in digests.values():
        for rel in files:
            target = out / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            (stage / rel).replace(target)
            written.append(target)
    for owner, files in digests.items():
        for rel, digest in owned[owner].items():
            path = out / rel
            if rel in files or not _inside(out, rel) or not path.is_file() or path.is_symlink():
                continue
            if _sha256(path) in (digest, *manifest.digests(owner, rel)):
                path.unlink()
                removed.append(path)
            else:
                kept.append(f"{path}: left in place: written by an earlier run, changed since")
    _write_manifest(out, digests, manifest)
    return Published(written=tuple(sorted(written)), removed=tuple(removed), kept=tuple(kept))


#: The name of a folder ``publish_whole`` builds beside the output folder ``OUT``: ``.OUT.launchbench-…``.
_SWAP_INFIX = ".launchbench-swap-"


def _swapped(
    stage: Path, out: Path, manifest: Manifest, digests: dict[str, dict[str, str]]
) -> Published | None:
    """Publish by swapping in a new folder (module docstring), or None (nothing done) where the folder
    cannot be swapped: it holds anything but the manifest, launchbench's own left-overs and the owners'
    files (those replaced, and stale ones unchanged since written), or it is a link, a mount point, the
    current folder (or one above it), another user's, or the OS cannot swap two folders in one step."""
    stale = _only_own_files(out, manifest, digests)
    if stale is None or not _swappable(out):
        return None
    parent = out.absolute().parent
    try:
        new = Path(tempfile.mkdtemp(prefix=f".{out.name}{_SWAP_INFIX}", dir=parent))
    except OSError:
        return None
    handle = os.open(new, os.O_RDONLY)
    try:
        if fcntl is not None:
            _try_lock(handle)  # held until the old folder is gone: a later command leaves it alone
        new.chmod(stat.S_IMODE(out.stat().st_mode))
        moved: list[str] = []
        try:
            for files in digests.values():
                for rel in files:
                    (new / rel).parent.mkdir(parents=True, exist_ok=True)
                    (stage / rel).replace(new / rel)
                    moved.append(rel)
            owners = {**manifest.owners, **digests}
            _write_manifest(new, owners, Manifest(owners, ()))
            if not _exchange(parent, new.name, out.name):
                raise _CannotSwap
        except (OSError, _CannotSwap):
            for rel in moved:  # back where they were staged: they are moved one by one instead
                (new / rel).replace(stage / rel)
            shutil.rmtree(new, ignore_errors=True)
            return None
        shutil.rmtree(new, ignore_errors=True)  # the old folder, now under the new one's name
    finally:
        os.close(handle)
    written = tuple(sorted(out / rel for files in digests.values() for rel in files))
    return Published(written=written, removed=tuple(out / rel for rel in stale), kept=manifest.problems)


class _CannotSwap(Exception):
    """The OS or the file system cannot swap two folders in one step."""


def _only_own_files(out: Path, manifest: Manifest, digests: dict[str, dict[str, str]]) -> list[str] | None:
    """The owners' stale files in ``out`` (theirs, unchanged, not published again) when everything in it is
    the manifest, launchbench's own left-overs or the owners' files; None otherwise (a folder swapped in
    would lose the rest)."""
    stale = []
    for root, folders, files in os.walk(out):
        here = Path(root)
        for name in folders:
            if (here / name).is_symlink():
                return None
        if here == out:
            folders[:] = [name for name in folders if not name.startswith(_STAGING_PREFIX)]
        for name in files:
            rel = (here / name).relative_to(out).as_posix()
            path = here / name
            if here == out and (
                name == MANIFEST_NAME or name.startswith((f"{MANIFEST_NAME}.", ".launchbench-probe-"))
            ):
                continue
            if path.is_symlink() or not path.is_file():
                return None
            if any(rel in files_ for files_ in digests.values()):
                continue
            if not any(_sha256(path) in manifest.digests(owner, rel) for owner in digests):
                return None
            stale.append(rel)
    return stale


def _swappable(out: Path) -> bool:
    """Whether ``out`` itself may be swapped for another folder: Linux, a folder of this user's that is no
    link or mount point and holds no process's current folder we know of (ours)."""
    if not sys.platform.startswith("linux") or out.is_symlink() or os.path.ismount(out):
        return False
    try:
        if Path.cwd().resolve().is_relative_to(out.resolve()):
            return False
        return out.stat().st_uid == os.getuid()
    except OSError:
        return False


def _exchange(folder: Path, one: str, other: str) -> bool:
    """Swap the entries ``one`` and ``other`` of ``folder`` in one step (``renameat2`` with
    ``RENAME_EXCHANGE``); False where the C library or the file system cannot."""
    try:
        import ctypes
        import errno

        libc = ctypes.CDLL(None, use_errno=True)
        renameat2 = libc.renameat2
    except (ImportError, OSError, AttributeError):
        return False
    renameat2.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
    handle = os.open(folder, os.O_RDONLY)
    try:
        if renameat2(handle, os.fsencode(one), handle, os.fsencode(other), _RENAME_EXCHANGE) == 0:
            return True
        code = ctypes.get_errno()
    finally:
        os.close(handle)
    if code in (errno.EINVAL, errno.ENOSYS, errno.ENOTSUP, errno.EOPNOTSUPP, errno.EXDEV):
        return False
    raise OSError(code, os.strerror(code), str(folder / other))


#: ``renameat2``'s flag that swaps two names (linux/fs.h).
_RENAME_EXCHANGE = 2


def _remove_swapped_leftovers(out: Path) -> None:
    """Remove the folders ``publish_whole`` left beside ``out`` when it was killed (a new folder half built,
    or the old one half removed); one still locked belongs to a command at work and is left alone."""
    try:
        leftovers = list(out.absolute().parent.glob(f".{glob.escape(out.name)}{_SWAP_INFIX}*"))
    except OSError:
        return
    for folder in leftovers:
        if folder.is_symlink() or not folder.is_dir():
            continue
        try:
            handle = os.open(folder, os.O_RDONLY)
        except OSError:
            continue
        try:
            if fcntl is None or _try_lock(handle):
                shutil.rmtree(folder, ignore_errors=True)
        finally:
            os.close(handle)


def _write_manifest(
    out: Path, owners: dict[str, dict[str, str]], manifest: Manifest, pending: dict | None = None
) -> None:
    """Record ``owners``' files in ``out``'s manifest (the other owners' sound entries of ``manifest`` kept,
    the refused ones dropped; ``pending``, the digests of files not replaced yet), atomically."""
    path = out / MANIFEST_NAME
    doc: dict[str, object] = {"version": MANIFEST_VERSION, "owners": {**manifest.owners, **owners}}
    pending = {
        **{owner: files for owner, files in manifest.pending.items() if owner not in owners},
        **(pending or {}),
    }
    if pending:
        doc["pending"] = pending
    text = json.dumps(doc, indent=1, sort_keys=True)
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
