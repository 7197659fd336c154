"""Shape buckets and stop-string truncation (host-side rules, no model)."""

from __future__ import annotations

import pytest

from jaxrl.sampling.buckets import batch_bucket, length_bucket
from jaxrl.sampling.stops import first_stop, stop_seen_recently, truncate_at_stop


def test_length_buckets_are_powers_of_two_then_multiples():
    lengths = (1, 16, 17, 100, 512, 513, 1100, 4096)
    assert [length_bucket(n) for n in lengths] == [16, 16, 32, 128, 512, 1024, 1536, 4096]
    assert length_bucket(3, minimum=1) == 4 and length_bucket(300, linear_step=128) == 384
    with pytest.raises(ValueError):
        length_bucket(0)


def test_batch_buckets_fit_the_cap_and_the_mesh():
    assert [batch_bucket(n, 8) for n in (1, 2, 3, 5, 8)] == [1, 2, 4, 8, 8]
    assert batch_bucket(5, 6) == 6  # capped at max_batch
    assert batch_bucket(1, 8, multiple=4) == 4 and batch_bucket(5, 16, multiple=4) == 8
    assert batch_bucket(1, 2, multiple=4) == 1  # a cap below the mesh size: rows stay replicated
    with pytest.raises(ValueError, match="does not fit"):
        batch_bucket(9, 8)


# Multi-character tokens, to check which token completes a stop string.
PIECES = {1: "def f", 2: "(x):", 3: "\n    ret", 4: "urn x", 5: "\n```", 6: "\nmore", 7: "```"}


def decode(ids):
    return "".join(PIECES[i] for i in ids)


def test_first_stop_picks_the_earliest_occurrence():
    assert first_stop("abc END xyz STOP", ["STOP", "END"]) == 7
    assert first_stop("abc", ["x"]) is None


def test_truncation_keeps_the_token_that_completes_the_stop_string():
    ids = [1, 2, 3, 4, 5, 6, 7]
    kept, text = truncate_at_stop(ids, decode, ["```"])
    assert kept == 5 and text == "def f(x):\n    return x\n```"
    kept, text = truncate_at_stop(ids, decode, ["return"])  # completed inside token 4, text cut right after it
    assert kept == 4 and text == "def f(x):\n    return"
    kept, text = truncate_at_stop(ids, decode, ["nothing", "(x)"])
    assert kept == 2 and text == "def f(x)"
    assert truncate_at_stop(ids, decode, ["zzz"]) is None and truncate_at_stop(ids, decode, []) is None


def test_recent_window_sees_stop_strings_straddling_the_boundary():
    ids = [1, 2, 3, 4, 5]
    assert stop_seen_recently(ids, checked=4, decode=decode, stop_strings=["x\n```"])
    assert not stop_seen_recently(ids, checked=5, decode=decode, stop_strings=["zzz"])
