"""Files in and out: atomic writes that honour the umask, and bounded reads of files aorta did not
write itself.

Every file aorta writes goes through :func:`write_atomic` (or :class:`AtomicFile` for content
written as it comes): a uniquely named temporary file in the same folder, created exclusively
(never through a link) with mode 0666 so the kernel applies the umask (a team sharing a runs
folder can read each other's results), then ``os.replace`` over the target, which replaces a
link at the target's name instead of writing through it.

What a trial leaves is removed through :func:`remove`, which never follows a link and gets past
folders a payload made read-only.

Every artifact, record, cell file or workload metrics file is read through :func:`open_limited`
/ :func:`read_limited` / :func:`mapped_limited`: regular files only (a FIFO or a device is refused
before it is opened), optionally only inside a root folder, and never more than the read limit,
compressed or not.
"""

from __future__ import annotations

import contextlib
import errno
import fnmatch
import gzip
import io
import mmap
import os
import secrets
import stat
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import BinaryIO


def temporary_beside(path: Path) -> Path:
    """A unique hidden name in ``path``'s folder, for a file to ``os.replace`` over ``path``."""
    return path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}.tmp")


def create_new(path: Path) -> BinaryIO:
    """``path`` created for writing, failing if anything (a link too) is there already; mode
    0666 less the umask."""
    return os.fdopen(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666), "wb")


class AtomicFile:
    """A file written in place of ``path``: created exclusively beside it (:func:`create_new`),
    renamed over ``path`` by :meth:`commit`, removed by :meth:`discard`; a reader never sees
    half of it. For content written as it comes (:func:`write_atomic` for the rest)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.tmp = temporary_beside(path)
        try:
            self.fh = create_new(self.tmp)  # ours: no link, no race
        except OSError as exc:
            exc.filename = str(path)  # the temporary's name would mean nothing to a user
            raise

    def commit(self) -> None:
        self.fh.close()
        os.replace(self.tmp, self.path)

    def discard(self) -> None:
        with contextlib.suppress(OSError):  # what is buffered cannot go to a full disk: dropped
            self.fh.close()
        self.tmp.unlink(missing_ok=True)


def write_atomic(path: Path, content: bytes | Callable[[Path], object]) -> None:
    """Replace ``path`` by ``content`` (bytes, or a function that writes the file it is given).

    On any failure the temporary file is removed and ``path`` keeps its previous content.
    """
    out = AtomicFile(path)
    try:
        if callable(content):
            out.fh.close()
            content(out.tmp)  # rewrites the file just created
        else:
            out.fh.write(content)
        out.commit()
    except BaseException as exc:
        out.discard()
        if isinstance(exc, OSError) and exc.filename in (None, str(out.tmp)):
            exc.filename = str(path)  # write() names no file, and the temporary is ours
        raise


#: What no later write can get past either: the sweep stops (one line) instead of the trial.
_DISK_FULL = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EROFS})


def disk_full(exc: OSError) -> bool:
    """Out of space, over quota or a read-only file system (not a permission of one file)."""
    return exc.errno in _DISK_FULL


def _owner_rwx_at(parent: int | None, name: str | Path) -> None:
    """Give the folder ``name`` (relative to the folder fd ``parent``, or a path) its owner's
    read, write and search rights; a link is refused, not followed. The folder is opened with
    ``O_PATH | O_NOFOLLOW`` (no permission on it needed) and changed through ``/proc/self/fd``,
    as glibc's ``lchmod`` does, so a link swapped in cannot redirect it."""
    fd = os.open(name, os.O_PATH | os.O_NOFOLLOW | os.O_DIRECTORY, dir_fd=parent)
    try:
        mode = stat.S_IMODE(os.fstat(fd).st_mode)
        if mode & 0o700 != 0o700:
            os.chmod(f"/proc/self/fd/{fd}", mode | 0o700)
    finally:
        os.close(fd)


def _open_folder(parent: int | None, name: str | Path) -> int:
    """The folder ``name`` opened to list and change it, never through a link; a folder its
    owner made unreadable or read-only (``chmod 555``, ``000``) is given back its rights."""
    flags = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW
    try:
        fd = os.open(name, flags, dir_fd=parent)
    except PermissionError:
        _owner_rwx_at(parent, name)
        return os.open(name, flags, dir_fd=parent)
    if stat.S_IMODE(os.fstat(fd).st_mode) & 0o300 != 0o300:
        os.chmod(fd, stat.S_IMODE(os.fstat(fd).st_mode) | 0o700)
    return fd


def _remove_tree(top: Path) -> None:
    """Remove the folder tree ``top`` depth first, one folder open at a time and every name
    relative to its folder: any depth (a payload's 3,000-level folder) and any path length,
    never following a link (a link is removed as itself)."""
    names: list[str] = []  # the folders from top down to the one open
    current = _open_folder(None, top)
    try:
        while True:
            below = None
            with os.scandir(current) as entries:
                for entry in entries:
                    if entry.is_dir(follow_symlinks=False):
                        below = entry.name
                        break
                    os.unlink(entry.name, dir_fd=current)
            if below is not None:
                inner = _open_folder(current, below)
                os.close(current)
                current, names = inner, [*names, below]
                continue
            if not names:
                break
            parent = os.open("..", os.O_RDONLY | os.O_DIRECTORY, dir_fd=current)
            os.close(current)
            current = parent
            try:
                os.rmdir(names.pop(), dir_fd=current)
            except OSError as exc:  # a file appeared meanwhile: list the folder again
                if exc.errno != errno.ENOTEMPTY:
                    raise
    finally:
        os.close(current)
    os.rmdir(top)


def remove(path: Path, root: Path) -> None:
    """Remove ``path`` (a file, a link or a folder tree) inside ``root``, never following a link.

    A payload may leave folders read-only (``chmod 555``) or unreadable, thousands of levels
    deep: every folder of the tree is given back its owner's rights as it is reached, and the
    tree is removed without recursion (:func:`_remove_tree`). ``path``'s own folder, when inside
    ``root``, is made writable by its owner if the removal needs it. What still fails raises.
    """
    try:
        _remove_once(path)
    except PermissionError:
        if not path.parent.is_relative_to(root):
            raise
        _owner_rwx_at(None, path.parent)
        _remove_once(path)


def _remove_once(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        _remove_tree(path)
    else:
        path.unlink(missing_ok=True)


#: How deep :func:`walk` enters a folder tree: artifact folders are a few levels deep; a payload
#: that leaves thousands of levels gets its files above this read, the rest named once.
MAX_DEPTH = 64


def walk(top: Path, max_depth: int = MAX_DEPTH, note: Callable[[str], None] | None = None
         ) -> Iterator[tuple[Path, list[str], list[str]]]:
    """``os.walk(top)`` top down, without recursion and without following links to folders,
    at most ``max_depth`` levels below ``top``; the caller may prune the folder names it is
    given, as with ``os.walk``. A folder that cannot be listed is passed over, as ``os.walk``
    and ``Path.rglob`` do; folders deeper than ``max_depth`` are named once through ``note``
    (default: a Python warning, which a hook's caller keeps as the collector's)."""
    pending: list[tuple[Path, int]] = [(top, 0)]
    deeper = 0
    while pending:
        folder, depth = pending.pop()
        try:
            with os.scandir(folder) as entries:
                listed = [(e.name, e.is_dir(follow_symlinks=False)) for e in entries]
        except OSError:
            continue
        dirs = sorted(name for name, is_dir in listed if is_dir)
        files = sorted(name for name, is_dir in listed if not is_dir)
        yield folder, dirs, files
        if depth >= max_depth:
            deeper += len(dirs)
            continue
        pending.extend((folder / name, depth + 1) for name in reversed(dirs))
    if deeper:
        text = f"{top}: {deeper} folder(s) more than {max_depth} levels deep not read"
        if note is None:
            warnings.warn(text, stacklevel=2)
        else:
            note(text)


def files_under(top: Path, pattern: str = "*", max_depth: int = MAX_DEPTH,
                note: Callable[[str], None] | None = None) -> list[Path]:
    """Every entry under ``top`` whose name matches ``pattern`` and that is not a folder
    (files, links, FIFOs: readers refuse what they cannot read), in a stable order:
    ``Path.rglob(pattern)`` without its recursion limit (:func:`walk`)."""
    return sorted(Path(folder) / name for folder, _, names in walk(top, max_depth, note)
                  for name in names if fnmatch.fnmatchcase(name, pattern))


# -- reading files aorta did not write ------------------------------------------------------------

#: Default budget for one file read by aorta or a collector (decompressed bytes), in MiB.
#: ``read_limit_mb=<n>`` in a sweep (exported as ``AORTA_READ_LIMIT_MB``) changes it.
DEFAULT_READ_LIMIT_MB = 2048
READ_LIMIT_ENV = "AORTA_READ_LIMIT_MB"
_CHUNK = 1 << 20


class FileRefused(OSError):
    """A file aorta will not read: not a regular file, a link out of its folder, or too large.

    The message names the file and, for a budget, the limit and how to raise it.
    """


def read_limit() -> int:
    """The per-file budget in bytes (``AORTA_READ_LIMIT_MB``, else the default)."""
    try:
        megabytes = float(os.environ.get(READ_LIMIT_ENV) or DEFAULT_READ_LIMIT_MB)
    except ValueError:
        megabytes = DEFAULT_READ_LIMIT_MB
    return int(megabytes * (1 << 20))


def _over(path: Path, what: str, limit: int) -> FileRefused:
    return FileRefused(f"{path} {what} the {limit / (1 << 20):g} MiB read limit; "
                       f"raise it with read_limit_mb=<MiB> ({READ_LIMIT_ENV})")


def _over_own(path: Path, what: str, limit: int) -> FileRefused:
    """Over the fixed budget of a file aorta writes itself (no knob raises it: aorta never
    writes one that large, so it is damaged or not aorta's)."""
    return FileRefused(f"{path} {what} the {limit / (1 << 20):g} MiB aorta reads of such a file")


def check_regular(path: Path, root: Path | None = None) -> int:
    """The size of ``path`` if it is a regular file (inside ``root`` once links are resolved);
    ``FileNotFoundError`` when there is nothing there.

    FIFOs, devices, sockets and folders are refused without being opened, so a FIFO left in an
    artifact folder cannot hang a reader and ``/dev/zero`` cannot fill memory.
    """
    try:
        info = os.stat(path)
    except FileNotFoundError:
        raise
    except OSError as exc:
        raise FileRefused(f"{path} cannot be read ({exc.strerror})") from None
    if not stat.S_ISREG(info.st_mode):
        raise FileRefused(f"{path} is not a regular file")
    if root is not None and not Path(os.path.realpath(path)).is_relative_to(
            os.path.realpath(root)):
        raise FileRefused(f"{path} links outside {root}")
    return info.st_size


def _open_regular(path: Path, root: Path | None) -> tuple[BinaryIO, int]:
    check_regular(path, root)
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)  # never blocks, even if swapped for a FIFO
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode):
        os.close(fd)
        raise FileRefused(f"{path} is not a regular file")
    return os.fdopen(fd, "rb"), info.st_size


class _Budgeted(io.RawIOBase):
    """A stream that raises :class:`FileRefused` once more than ``limit`` bytes came out of it."""

    def __init__(self, inner: BinaryIO, path: Path, limit: int) -> None:
        self.inner, self.path, self.limit, self.seen = inner, path, limit, 0

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        n = self.inner.readinto(buffer)
        self.seen += n or 0
        if self.seen > self.limit:
            raise _over(self.path, "decompresses to more than", self.limit)
        return n

    def readall(self) -> bytes:
        # Up to 1 GiB a read (one read, no copy, for most files): RawIOBase's default goes
        # 8 KiB at a time through readinto, 3x slower than Path.read_bytes on a 160 MB trace.
        chunks = []
        while chunk := self.inner.read(min(self.limit + 1 - self.seen, 1 << 30)):
            self.seen += len(chunk)
            if self.seen > self.limit:
                raise _over(self.path, "decompresses to more than", self.limit)
            chunks.append(chunk)
        return b"".join(chunks)

    def close(self) -> None:
        beneath = getattr(self.inner, "fileobj", None)  # GzipFile leaves its file open
        self.inner.close()
        if beneath is not None:
            beneath.close()
        super().close()


def open_limited(path: Path, root: Path | None = None, limit: int | None = None) -> BinaryIO:
    """A binary stream of a regular file, gunzipped when it ends in ``.gz``, that refuses to
    yield more than the read limit (compressed and decompressed alike)."""
    limit = read_limit() if limit is None else limit
    handle, size = _open_regular(path, root)
    if size > limit:
        handle.close()
        raise _over(path, f"is {size / (1 << 20):.1f} MiB, over", limit)
    if path.name.endswith(".gz"):
        handle = gzip.GzipFile(fileobj=handle, mode="rb")  # type: ignore[assignment]
    return io.BufferedReader(_Budgeted(handle, path, limit), _CHUNK)


def read_limited(path: Path, root: Path | None = None, limit: int | None = None) -> bytes:
    """All of :func:`open_limited` (``gzip.BadGzipFile``, ``EOFError`` or ``zlib.error`` for a
    broken ``.gz``)."""
    with open_limited(path, root, limit) as handle:
        return handle.read()


@contextmanager
def mapped_limited(path: Path, root: Path | None = None, limit: int | None = None
                   ) -> Iterator[bytes | mmap.mmap]:
    """The content of :func:`read_limited` without copying it: a read-only memory map of an
    uncompressed file (a ``.gz`` is read and gunzipped), valid inside the ``with`` block.

    Decoding a 160 MB trace from the map instead of a copy is 25 % faster and holds one
    copy less. The map is for decoders that copy out what they keep (msgspec Structs, numbers,
    strings); anything still viewing it when the block ends raises ``BufferError``. A file
    truncated by another process *while* it is mapped ends this process with ``SIGBUS``, so map
    finished artifacts only (those of a trial whose payload has exited).
    """
    limit = read_limit() if limit is None else limit
    if path.name.endswith(".gz"):
        yield read_limited(path, root, limit)
        return
    handle, size = _open_regular(path, root)
    with handle:
        if size > limit:
            raise _over(path, f"is {size / (1 << 20):.1f} MiB, over", limit)
        try:
            view = mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ)
        except ValueError:  # an empty file cannot be mapped
            view = None
    if view is None:
        yield b""
        return
    try:
        if len(view) > limit:  # it grew since fstat
            raise _over(path, "grew over", limit)
        yield view
    finally:
        view.close()


def read_regular(path: Path | str, limit: int) -> bytes:
    """A small file aorta reads often (record, cell file, workload metrics): regular, not a link
    (the last path component is never followed), at most ``limit`` bytes; no decompression."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW)
    except FileNotFoundError:
        raise
    except OSError as exc:
        reason = "is a link" if exc.errno == errno.ELOOP else f"cannot be read ({exc.strerror})"
        raise FileRefused(f"{path} {reason}") from None
    try:  # raw reads of the size fstat gives: no file object, no buffer of the whole budget
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise FileRefused(f"{path} is not a regular file")
        if info.st_size > limit:
            raise _over_own(path, f"is {info.st_size / (1 << 20):.1f} MiB, over", limit)
        data = os.read(fd, info.st_size + 1)
        while info.st_size < len(data) <= limit and (more := os.read(fd, limit + 1 - len(data))):
            data += more  # it grew since fstat
        if len(data) > limit:
            raise _over_own(path, "grew over", limit)
        return data
    finally:
        os.close(fd)
