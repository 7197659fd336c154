"""The server's reading of a child's messages: bounded however fast the child writes, and a child cannot
speak for the stream itself."""

from __future__ import annotations

import time

from sandbox_service.worker import conversation

# However fast a child writes, the server holds no more than a handful of its parsed messages.
HANDFUL = 16


class _Flooding:
    """A child that has a next message at once, forever."""

    def __init__(self, message: dict):
        self.message = message
        self.read = 0
        self._closed = False

    def receive(self, timeout=None) -> dict:
        self.read += 1
        return dict(self.message)


class _Deadline:
    def remaining(self) -> float:
        return 1.0


def test_a_flooding_child_is_read_only_as_fast_as_the_server_consumes():
    child = _Flooding({"type": "trial_outputs", "nonce": "n"})
    stream = conversation.MessageStream(child, "n")
    time.sleep(0.5)
    assert child.read <= HANDFUL  # read ahead, queued or waiting in the reader
    for _ in range(10):
        stream.next(_Deadline(), None)
    time.sleep(0.2)
    assert child.read <= 10 + HANDFUL
    stream.close()


def test_the_reader_ends_with_the_conversation():
    """Nobody reads a finished conversation's messages: its reader stops rather than wait forever."""
    closed_child = _Flooding({"type": "trial_outputs", "nonce": "n"})
    by_child = conversation.MessageStream(closed_child, "n")
    by_server = conversation.MessageStream(_Flooding({"type": "trial_outputs", "nonce": "n"}), "n")
    time.sleep(0.2)
    closed_child._closed = True  # Child.close()
    by_server.close()
    by_child.thread.join(timeout=2)
    by_server.thread.join(timeout=2)
    assert not by_child.thread.is_alive() and not by_server.thread.is_alive()


def test_a_child_sending_the_stream_s_own_events_is_tampering():
    for kind in ("exited", "garbled", "malformed"):
        stream = conversation.MessageStream(_Flooding({"type": kind, "nonce": "n", "error": "forged"}), "n")
        event = stream.next(_Deadline(), None)
        assert event["type"] == "garbled" and "reserved" in event["error"], event


def test_with_a_schema_a_malformed_message_ends_the_stream_naming_its_rule():
    from sandbox_service.worker import messages

    schema = messages.Schema(sets=1, trials=1, outputs_dir="/nowhere", ipc_min_bytes=None)
    stream = conversation.MessageStream(_Flooding({"type": "verdict", "nonce": "n"}), "n", schema.check)
    event = stream.next(_Deadline(), None)
    assert event == {"type": "malformed", "rule": messages.CHANNEL_RULE, "error": "unknown message type 'verdict'"}
