"""Shards: the build's unit of work and of resume.

Shard k holds the `chunk_size` tasks the generator makes from seed `shard_seed(seed, k)`, with the family
list rotated to where a round-robin over it stands at task k x chunk_size; a shard's content depends only
on its index and the fingerprinted settings, never on how many shards a
run makes or in which run it was made. A finished shard is one JSONL file of task outcomes in
`<run dir>/shards/`, written atomically beside a timing file; a rerun reads finished shards back instead
of redoing them. `fingerprint.json` records the settings that decide a shard's content; a run whose
settings differ refuses to mix its shards with those already there.

A build has two streams of shards: the main one (every split, `shard-<k>`) and, with an rl-split target,
the rl one (`rl-shard-<k>`: only the rl split's recipes, from seeds of their own), each numbered from 0 and
each a pure function of its index, so either can be extended without changing the other.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from jaxrl.config.schema import ConfigError
from jaxrl.data.engine.writing import commit, json_text, jsonl_text, sweep_temporaries

SHARDS_DIR = "shards"
FINGERPRINT_FILE = "fingerprint.json"


class FingerprintMismatch(ConfigError):
    """The shards folder was built with other settings."""


def shard_families(order: Sequence[str], index: int, chunk_size: int) -> list[str]:
    """The family list rotated to where shard `index` starts in a round-robin over `order`, so that a
    round-robin generator covers every family even when a shard is smaller than the family list."""
    start = (index * chunk_size) % len(order)
    return [*order[start:], *order[:start]]


def shard_seed(seed: int, index: int, stream: str = "") -> int:
    """The generator seed of shard `index` of `stream` ("": the main one): a hash of (seed, stream, index),
    so shards never share a random stream."""
    key = f"{seed}/{stream}/{index}" if stream else f"{seed}/{index}"
    digest = hashlib.sha256(key.encode()).digest()
    return int.from_bytes(digest[:4], "big") & 0x7FFFFFFF


class ShardStore:
    """The shards folder of one build: its fingerprint, and the finished shards of one stream ("": the main
    one) and their timings."""

    def __init__(self, run_dir: Path, fingerprint: Mapping[str, Any], stream: str = ""):
        self.folder = run_dir / SHARDS_DIR
        self.fingerprint = json.loads(json.dumps(dict(fingerprint)))  # as JSON reads it back
        self.prefix = f"{stream}-shard" if stream else "shard"

    def open(self) -> None:
        """Create the folder or check its fingerprint; remove what an interrupted write left."""
        self.folder.mkdir(parents=True, exist_ok=True)
        sweep_temporaries(self.folder)
        path = self.folder / FINGERPRINT_FILE
        if not path.exists():
            commit({path: json_text(self.fingerprint)})
            return
        stored = json.loads(path.read_text(encoding="utf-8"))
        if stored != self.fingerprint:
            keys = sorted(k for k in {*stored, *self.fingerprint} if stored.get(k) != self.fingerprint.get(k))
            changes = "; ".join(f"{k}: {stored.get(k)!r} there, {self.fingerprint.get(k)!r} now" for k in keys)
            raise FingerprintMismatch(
                f"{self.folder} holds shards built with other settings ({changes}). Shards of different "
                "settings must not be mixed: pick another run.name, or delete that folder to start over."
            )

    def _path(self, index: int) -> Path:
        return self.folder / f"{self.prefix}-{index:05d}.jsonl"

    def _timing_path(self, index: int) -> Path:
        return self.folder / f"{self.prefix}-{index:05d}.timing.json"

    def done(self, index: int) -> bool:
        return self._path(index).exists()

    def read(self, index: int) -> list[dict[str, Any]]:
        lines = self._path(index).read_text(encoding="utf-8").splitlines()
        return [json.loads(line) for line in lines]

    def timing(self, index: int) -> dict[str, Any]:
        path = self._timing_path(index)
        return json.loads(path.read_text(encoding="utf-8")) if path.exists() else {}

    def write(self, index: int, rows: list[dict[str, Any]], timing: Mapping[str, Any]) -> None:
        """The shard's rows and its timing; the rows file is renamed last, so it marks the shard done."""
        commit({self._timing_path(index): json_text(dict(timing)), self._path(index): jsonl_text(rows)})
