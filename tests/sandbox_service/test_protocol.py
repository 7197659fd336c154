"""The parent/child channel: whole messages, bounded frames, no way to smuggle non-JSON."""

from __future__ import annotations

import os
import struct
import threading

import pytest

from sandbox_service.worker import protocol


def test_messages_round_trip_in_order():
    read, write = os.pipe()

    def sender() -> None:  # larger than a pipe's buffer: the reader must run concurrently
        protocol.send(write, {"type": "a", "n": 1})
        protocol.send(write, {"type": "b", "text": "x" * 100_000})

    threading.Thread(target=sender, daemon=True).start()
    receiver = protocol.Receiver(read)
    assert receiver.receive(timeout=1) == {"type": "a", "n": 1}
    assert receiver.receive(timeout=1)["text"] == "x" * 100_000


def test_closed_channel_and_timeout():
    read, write = os.pipe()
    receiver = protocol.Receiver(read)
    with pytest.raises(TimeoutError):
        receiver.receive(timeout=0.05)
    os.close(write)
    with pytest.raises(protocol.ChannelClosed):
        receiver.receive(timeout=1)


@pytest.mark.parametrize(
    "frame",
    [
        struct.pack(">I", protocol.MAX_MESSAGE_BYTES + 1),
        struct.pack(">I", 5) + b"nope!",
        struct.pack(">I", 2) + b"[]",
        struct.pack(">I", 13) + b'{"no": "typ"}',
    ],
)
def test_garbage_frames_are_protocol_errors(frame):
    read, write = os.pipe()
    os.write(write, frame)
    with pytest.raises(protocol.ProtocolError):
        protocol.Receiver(read).receive(timeout=1)


def test_oversized_messages_are_refused_by_the_sender():
    _, write = os.pipe()
    with pytest.raises(protocol.ProtocolError):
        protocol.send(write, {"type": "big", "blob": "x" * (protocol.MAX_MESSAGE_BYTES + 1)})


def test_json_nested_too_deeply_to_decode_is_a_protocol_error():
    """The decoder gives up with RecursionError, not ValueError: still garbage, not a crash of the reader."""
    read, write = os.pipe()
    payload = b"[" * 60_000
    threading.Thread(target=os.write, args=(write, struct.pack(">I", len(payload)) + payload), daemon=True).start()
    with pytest.raises(protocol.ProtocolError):
        protocol.Receiver(read).receive(timeout=5)
