"""Framed JSON messages over inherited pipe file descriptors, between the server and its children.

Why not stdout: a candidate can print anything, so the verdict channel is a dedicated descriptor and
every message carries a per-evaluation nonce that the child received before any untrusted code ran.
Messages are JSON (never pickle: the parent must not deserialise code from the child), each framed
by a 4-byte big-endian length and bounded in size.
"""

from __future__ import annotations

import json
import os
import select
import struct
import time
from typing import Any

MAX_MESSAGE_BYTES = 8 * 1024 * 1024
_HEADER = struct.Struct(">I")


class ChannelClosed(EOFError):
    """The other side closed its end (exited, crashed or was killed)."""


class ProtocolError(ValueError):
    """A frame that is not a well-formed message: too large, not JSON, or not an object."""


def frame(message: dict[str, Any], max_bytes: int = MAX_MESSAGE_BYTES) -> bytes:
    """The message as one frame: its length, then its JSON."""
    data = json.dumps(message, separators=(",", ":")).encode()
    if len(data) > max_bytes:
        raise ProtocolError(f"message of {len(data)} bytes exceeds {max_bytes}")
    return _HEADER.pack(len(data)) + data


def send(fd: int, message: dict[str, Any], max_bytes: int = MAX_MESSAGE_BYTES) -> None:
    view = memoryview(frame(message, max_bytes))
    while view:
        written = os.write(fd, view)
        view = view[written:]


class Receiver:
    """Reads whole messages from a descriptor, with an optional deadline per read."""

    def __init__(self, fd: int, max_bytes: int = MAX_MESSAGE_BYTES):
        self.fd = fd
        self.max_bytes = max_bytes  # frames larger than this are refused (ProtocolError) before being read
        self._buffer = bytearray()

    def _fill(self, size: int, deadline: float | None) -> None:
        while len(self._buffer) < size:
            if deadline is not None:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise TimeoutError("no message before the deadline")
                ready, _, _ = select.select([self.fd], [], [], remaining)
                if not ready:
                    raise TimeoutError("no message before the deadline")
            chunk = os.read(self.fd, max(65536, size - len(self._buffer)))
            if not chunk:
                raise ChannelClosed("channel closed")
            self._buffer.extend(chunk)

    def receive(self, timeout: float | None = None) -> dict[str, Any]:
        deadline = None if timeout is None else time.monotonic() + timeout
        self._fill(_HEADER.size, deadline)
        (size,) = _HEADER.unpack(self._buffer[: _HEADER.size])
        if size > self.max_bytes:
            raise ProtocolError(f"frame of {size} bytes exceeds {self.max_bytes}")
        self._fill(_HEADER.size + size, deadline)
        data = bytes(self._buffer[_HEADER.size : _HEADER.size + size])
        del self._buffer[: _HEADER.size + size]
        try:
            message = json.loads(data)
        except (ValueError, RecursionError) as exc:  # nesting too deep for the decoder is garbage too
            raise ProtocolError(f"frame is not JSON: {str(exc)[:200]}") from None
        if not isinstance(message, dict) or not isinstance(message.get("type"), str):
            raise ProtocolError("frame is not a message object with a 'type'")
        return message
