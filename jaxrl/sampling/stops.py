"""Stop strings, applied to decoded text on the host.

A completion ends at the first token whose decoded prefix contains a stop string (what a streaming
stopper would see). Its token_ids and logprobs keep every token up to and including that one; its
text is the decoded text cut right after the first occurrence (so it ends with the stop string, even
when the last token also carries characters past it).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

Decode = Callable[[Sequence[int]], str]


def first_stop(text: str, stop_strings: Sequence[str]) -> int | None:
    """End index (exclusive) of the earliest-starting stop string in `text`, or None."""
    best: tuple[int, int] | None = None
    for stop in stop_strings:
        start = text.find(stop)
        if start >= 0 and (best is None or start < best[0]):
            best = (start, start + len(stop))
    return None if best is None else best[1]


def truncate_at_stop(token_ids: Sequence[int], decode: Decode, stop_strings: Sequence[str]) -> tuple[int, str] | None:
    """(number of tokens kept, text ending with the stop string) or None when no stop string occurs.

    Binary search over prefixes: once a decoded prefix contains a stop string, longer prefixes do too.
    """
    if not stop_strings or first_stop(decode(token_ids), stop_strings) is None:
        return None
    low, high = 1, len(token_ids)  # the shortest prefix containing a stop string is in [low, high]
    while low < high:
        middle = (low + high) // 2
        if first_stop(decode(token_ids[:middle]), stop_strings) is None:
            low = middle + 1
        else:
            high = middle
    text = decode(token_ids[:low])
    return low, text[: first_stop(text, stop_strings)]


def stop_seen_recently(token_ids: Sequence[int], checked: int, decode: Decode, stop_strings: Sequence[str]) -> bool:
    """Whether a stop string appears in the tokens after the first `checked` ones (plus a margin wide
    enough for a stop string straddling the boundary). A cheap early-exit test between decode chunks;
    `truncate_at_stop` makes the exact cut afterwards."""
    # A character takes at most 4 byte-level tokens; 4 more cover a partial character at the window start.
    margin = 4 * max(len(s) for s in stop_strings) + 4
    return first_stop(decode(token_ids[max(0, checked - margin):]), stop_strings) is not None
