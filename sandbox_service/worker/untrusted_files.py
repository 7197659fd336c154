"""Reading a file that an untrusted process wrote, in a folder it may still be able to write.

Checks by path (`is_symlink`, `is_file`, `stat`) and a later open of the same path are two lookups: the
writer can swap the file for a symbolic link (to `/dev/zero`, a FIFO, a file only the server may read) or
grow it in between. Here every path component is opened without following a link, and the kind and size
are taken from the open descriptor itself (fstat), and no more than the limit is ever read.
"""

from __future__ import annotations

import os
import stat


class NotARegularFile(Exception):
    """The name is missing, a symbolic link (anywhere on its path), or not a regular file."""


class TooLarge(Exception):
    """More bytes than the reader's limit (the writer may have grown it after any earlier check)."""


def open_beneath(folder: str, name: str) -> int:
    """A read-only descriptor of `folder/name` (`folder` resolved), every component opened without following a
    symlink and the file itself without blocking (a FIFO opens and then fails the regular-file check)."""
    flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC
    parts = [p for p in folder.split("/") if p]
    if any(part in (".", "..") for part in parts) or "/" in name or name in ("", ".", ".."):
        raise NotARegularFile(f"{folder}/{name} is not a resolved path")
    fd = os.open("/", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        for part in parts:
            following = os.open(part, flags | os.O_DIRECTORY, dir_fd=fd)
            os.close(fd)
            fd = following
        return os.open(name, flags | os.O_NONBLOCK, dir_fd=fd)
    finally:
        os.close(fd)


def _regular(folder: str, name: str, max_bytes: int):
    try:
        fd = open_beneath(folder, name)
    except OSError as exc:
        raise NotARegularFile(f"{name}: {exc.strerror} (a symlink, or not there)") from None
    file = os.fdopen(fd, "rb")
    info = os.fstat(file.fileno())
    if not stat.S_ISREG(info.st_mode):
        file.close()
        raise NotARegularFile(f"{name} is not a regular file")
    if info.st_size > max_bytes:
        file.close()
        raise TooLarge(f"{name} holds {info.st_size} bytes, more than {max_bytes}")
    return file


def read_beneath(folder: str, name: str, max_bytes: int) -> bytes:
    """The content of `folder/name`, a regular file of at most `max_bytes` (NotARegularFile, TooLarge)."""
    with _regular(folder, name, max_bytes) as file:
        data = file.read(max_bytes + 1)
    if len(data) > max_bytes:
        raise TooLarge(f"{name} holds more than {max_bytes} bytes")
    return data


def copy_beneath(folder: str, name: str, destination: str, max_bytes: int) -> None:
    """Copy `folder/name` (as read_beneath reads it) to a new file `destination`, in chunks."""
    with _regular(folder, name, max_bytes) as source, open(destination, "xb") as target:
        copied = 0
        while chunk := source.read(1 << 20):
            copied += len(chunk)
            if copied > max_bytes:
                raise TooLarge(f"{name} holds more than {max_bytes} bytes")
            target.write(chunk)
