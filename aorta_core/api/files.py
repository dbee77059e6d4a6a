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
import gzip
import io
import mmap
import os
import secrets
import shutil
import stat
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


def _owner_rwx(folder: Path) -> None:
    """Give ``folder``'s owner read, write and search on it; a link is refused, not followed.

    The folder is opened with ``O_PATH | O_NOFOLLOW`` (no permission on it needed) and changed
    through ``/proc/self/fd``, as glibc's ``lchmod`` does, so a link swapped in cannot redirect it.
    """
    fd = os.open(folder, os.O_PATH | os.O_NOFOLLOW | os.O_DIRECTORY)
    try:
        mode = stat.S_IMODE(os.fstat(fd).st_mode)
        if mode & 0o700 != 0o700:
            os.chmod(f"/proc/self/fd/{fd}", mode | 0o700)
    finally:
        os.close(fd)


def _unlock_tree(folder: Path) -> None:
    """:func:`_owner_rwx` on ``folder`` and every folder below it (links are not entered)."""
    pending = [folder]
    while pending:
        current = pending.pop()
        _owner_rwx(current)
        with os.scandir(current) as entries:
            pending.extend(Path(e.path) for e in entries if e.is_dir(follow_symlinks=False))


def walk(top: Path, unreadable: Callable[[OSError], None] | None = None
         ) -> Iterator[tuple[Path, list[str], list[str]]]:
    """``os.walk(top)`` without recursion: (folder, folder names, file names) top-down in
    ``os.walk``'s order, links to folders listed but never entered, ``dirs`` pruned in place by
    the caller as there. A trial may hold a folder thousands of levels deep, past the
    interpreter's recursion limit that ``os.walk`` and ``Path.rglob`` reach (Python 3.11).
    The error of a folder there that cannot be listed (``ENAMETOOLONG`` that deep, ``EACCES``;
    its ``filename`` is the folder) goes to ``unreadable``."""
    pending = [Path(top)]
    while pending:
        folder = pending.pop()
        try:
            with os.scandir(folder) as listing:
                entries = list(listing)
        except (FileNotFoundError, NotADirectoryError):
            continue  # nothing there (``top`` need not exist), or gone since it was listed
        except OSError as exc:
            if unreadable is not None:
                unreadable(exc)
            continue
        dirs: list[str] = []
        files: list[str] = []
        links = set()
        for entry in entries:
            (dirs if _entry_is(entry.is_dir) else files).append(entry.name)
            if _entry_is(entry.is_symlink):
                links.add(entry.name)
        yield folder, dirs, files
        pending += [folder / d for d in reversed(dirs) if d not in links]


def _entry_is(test: Callable[[], bool]) -> bool:
    """A ``DirEntry`` test as ``os.walk`` takes it: one that cannot stat is ``False``."""
    try:
        return test()
    except OSError:
        return False


def _remove_once(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)  # fd-based on Linux: never follows a link
    else:
        path.unlink(missing_ok=True)


def remove(path: Path, root: Path) -> None:
    """Remove ``path`` (a file, a link or a folder tree) inside ``root``, never following a link.

    A payload that leaves a read-only folder (``chmod 555``) makes removal fail with ``EACCES``
    for its owner: then ``path``'s folder (when inside ``root``) and every folder of the tree are
    made writable by their owner, and the removal is tried once more. What still fails raises.
    """
    try:
        _remove_once(path)
    except PermissionError:
        if path.parent.is_relative_to(root):
            _owner_rwx(path.parent)
        if path.is_dir() and not path.is_symlink():
            _unlock_tree(path)
        _remove_once(path)


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
            raise _over(path, f"is {info.st_size / (1 << 20):.1f} MiB, over", limit)
        data = os.read(fd, info.st_size + 1)
        while info.st_size < len(data) <= limit and (more := os.read(fd, limit + 1 - len(data))):
            data += more  # it grew since fstat
        if len(data) > limit:
            raise _over(path, "grew over", limit)
        return data
    finally:
        os.close(fd)
