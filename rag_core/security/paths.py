"""Files met while walking a folder: only regular files inside it are read.

A folder handed to `rag ingest`, `Workbench.ingest_paths` or the app's server folder may hold a
symbolic link to a file elsewhere (`/etc/passwd`, the service's `.env` with its keys, the data
folder); following it would make that file searchable. It may also hold a FIFO, a socket or a
device: opening a FIFO for reading waits for a writer, so one `mkfifo` stopped a whole run for ever.
A file can also change between the walk and the read, so the read itself checks again: it opens
without waiting, refuses what is not a regular file, and never reads more than the size limit.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from rag_core.errors import LoaderError
from rag_core.units import decimal_size

_KINDS = ((stat.S_ISFIFO, "a FIFO (named pipe)"), (stat.S_ISSOCK, "a socket"),
          (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
          (stat.S_ISDIR, "a folder"))


def user_path(raw: str | Path) -> Path:
    """A path as a person or a request gave it, with `~` and `~user` expanded where that home exists.

    `~someone/x` for a user this machine does not have stays as given, so it is reported as a path that does not
    exist: pathlib raised RuntimeError, and `DELETE /documents?source=~x` was a 500.
    """
    path = Path(raw)
    try:
        return path.expanduser()
    except RuntimeError:
        return path


def check_size(size: int, max_bytes: int | None, name: str) -> None:
    """Refuse a file over RAG_MAX_FILE_MB before it is read (LoaderError naming the size, the limit and the fix)."""
    if max_bytes is not None and size > max_bytes:
        raise LoaderError(
            f"File is {decimal_size(size)}; the limit is {decimal_size(max_bytes, exact=True)} (RAG_MAX_FILE_MB). "
            "Split the file or raise RAG_MAX_FILE_MB.",
            details={"file": name or None, "size_bytes": size, "max_bytes": max_bytes},
        )


def _kind(mode: int) -> str:
    return next((name for test, name in _KINDS if test(mode)), "not a regular file")


def _inside(path: Path, root: Path) -> bool:
    return path == root or root in path.parents


def entry_problem(path: Path, root: Path) -> tuple[Path | None, str | None]:
    """(the file to read, None), or (None, why it is left out) for an entry found under `root`.

    `root` is the resolved folder being walked. A symbolic link is read as its target when that
    target is a regular file inside `root`; one pointing outside, or nowhere, is left out.
    """
    try:
        info = os.lstat(path)
    except OSError as exc:
        return None, f"cannot be read: {exc.strerror or exc}"
    target = path
    if stat.S_ISLNK(info.st_mode):
        try:
            target = path.resolve(strict=True)
        except (OSError, RuntimeError):
            return None, ("a symbolic link that points nowhere (or to itself); remove it, or link an existing "
                          "file inside the folder")
        if not _inside(target, root):
            return None, ("a symbolic link to a file outside the folder, so it was not read; copy the file into "
                          "the folder, or ingest its own folder, if it is meant to be searchable")
        info = os.stat(target)
    if not stat.S_ISREG(info.st_mode):
        return None, f"{_kind(info.st_mode)}, not a regular file, so it was not opened; only files are ingested"
    return target, None


def read_regular_file(path: Path, max_bytes: int | None) -> tuple[bytes, os.stat_result]:
    """A regular file's bytes and status, read without waiting on a FIFO and never more than `max_bytes`
    (one byte more tells a file that grew past the limit after its size was checked)."""
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0)
    fd = os.open(path, flags)
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise LoaderError(f"{path.name} is {_kind(info.st_mode)}, not a regular file; only files are ingested.",
                              details={"file": path.name})
        check_size(info.st_size, max_bytes, path.name)
        limit = None if max_bytes is None else max_bytes + 1
        with os.fdopen(fd, "rb", closefd=False) as handle:
            data = handle.read() if limit is None else handle.read(limit)
    finally:
        os.close(fd)
    check_size(len(data), max_bytes, path.name)
    return data, info
