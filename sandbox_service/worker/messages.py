"""What a candidate process may say, checked by the trusted side before anything acts on it.

Every field of a candidate's message is attacker-controlled. The server checks each message against the
schema of its type (`check_message`: the exact keys, their types and ranges) before it reaches the judge,
the builder or the verdict, and the judge checks a hand-over again itself (`check_handover`, defence in
depth). A message that fails is the candidate's doing: `Malformed` names the rule it broke, and the
evaluation ends `cheat` with it:

- `malformed-handover`: a trial's outputs described wrongly (a path outside the evaluation's outputs
  folder, a symlink, an IPC hand-over where none was allowed or with bad handles, dtypes, shapes...).
- `verdict-channel-tampering`: any other message that is not what the protocol expects (unknown type,
  missing or extra fields, wrong types, out-of-range numbers, a message at the wrong point).

No torch here: the server imports this too.
"""

from __future__ import annotations

import math
import os
import re
import stat
from collections.abc import Callable
from typing import Any

CHANNEL_RULE = "verdict-channel-tampering"
HANDOVER_RULE = "malformed-handover"

FILE = "file"
IPC = "ipc"

MAX_TENSORS = 4096  # outputs of one trial
MAX_NDIM = 64
MAX_EXTENT = 1 << 48  # any size, stride or offset
MAX_STORAGE_BYTES = 1 << 44  # an IPC storage (16 TB: larger than any GPU)
MAX_HANDLE_BYTES = 256  # one IPC handle field, as bytes
MAX_TEXT = 1 << 20  # an error message, a phase
MAX_BUILD_SOURCE = 1 << 20  # a C launcher's source (the builder's own limit)
MAX_PTX = 3 << 20  # a kernel's PTX: within one candidate frame (CANDIDATE_FRAME_BYTES, 4 MB)
MAX_BUILD_LIST = 64
# timing.CUDA_EVENTS and timing.DEVICE_SYNC: a timing figure's method names the reference's protocol (the server times
# the reference the same way), so any other string was a reference figure of its own (red team 13).
TIMING_METHODS = ("cuda_events", "device_sync")
MAX_TIMING_CHECKS = 16  # timed runs' outputs one timed batch may hand over beyond the trials (evaluation.timing_order)
MAX_PATH_TEXT = 4096
MAX_FINGERPRINT = 128
MAX_VIOLATIONS = 256
MAX_OPS = 4096
# One IPC handle: device, storage handle, storage size, storage offset, ref-counter handle, ref-counter
# offset, event handle, event sync required (torch's UntypedStorage._share_cuda_()).
IPC_FIELDS = ("int", "bytes", "int", "int", "bytes", "int", "bytes", "bool")
ELEMENT_BYTES = {
    "float64": 8, "float32": 4, "float16": 2, "bfloat16": 2, "complex128": 16, "complex64": 8, "complex32": 4,
    "int64": 8, "int32": 4, "int16": 2, "int8": 1, "uint8": 1, "uint16": 2, "uint32": 4, "uint64": 8, "bool": 1,
    "float8_e4m3fn": 1, "float8_e5m2": 1, "float8_e4m3fnuz": 1, "float8_e5m2fnuz": 1, "float8_e8m0fnu": 1,
    "float4_e2m1fn_x2": 1,
}
_HEX = re.compile(r"[0-9a-f]*")
_TORCH_SHM_NAME = re.compile(r"/torch_[0-9A-Za-z_]{1,200}")


class Malformed(ValueError):
    """A candidate's message that breaks the protocol; `rule` is the violation's name."""

    def __init__(self, rule: str, error: str):
        super().__init__(error)
        self.rule = rule
        self.error = error


def _fail(error: str, rule: str = CHANNEL_RULE) -> Malformed:
    return Malformed(rule, error)


# -- primitive checks -------------------------------------------------------------------------------
def _int(value: Any, what: str, low: int = 0, high: int = MAX_EXTENT, rule: str = CHANNEL_RULE) -> int:
    if type(value) is not int or not low <= value <= high:
        raise _fail(f"{what}: expected an integer in [{low}, {high}], got {_show(value)}", rule)
    return value


def _number(value: Any, what: str) -> float:
    if type(value) not in (int, float) or not math.isfinite(value) or value < 0:
        raise _fail(f"{what}: expected a finite number >= 0, got {_show(value)}")
    return float(value)


def _text(value: Any, what: str, limit: int = MAX_TEXT, rule: str = CHANNEL_RULE) -> str:
    if type(value) is not str or len(value) > limit:
        raise _fail(f"{what}: expected a string of at most {limit} characters, got {_show(value)}", rule)
    return value


def _list(value: Any, what: str, limit: int, rule: str = CHANNEL_RULE) -> list:
    if type(value) is not list or len(value) > limit:
        raise _fail(f"{what}: expected a list of at most {limit} items, got {_show(value)}", rule)
    return value


def _keys(message: Any, what: str, required: set[str], optional: frozenset[str] = frozenset(),
          rule: str = CHANNEL_RULE) -> dict:
    if type(message) is not dict:
        raise _fail(f"{what}: expected an object, got {_show(message)}", rule)
    keys = set(message)
    missing, extra = required - keys, keys - required - optional
    if missing or extra:
        raise _fail(f"{what}: missing fields {sorted(missing)}, unexpected fields {sorted(extra)[:8]}", rule)
    return message


def _show(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


# -- hand-overs -------------------------------------------------------------------------------------
def check_handover(handover: Any, *, outputs_dir: str, set_index: int, trial: int,
                   ipc_min_bytes: int | None) -> dict:
    """A trial's hand-over as the candidate may describe it; Malformed(`malformed-handover`) otherwise.

    A file must be this trial's file, directly in this evaluation's `outputs_dir` (resolved: no `..`, no
    symlink on the way or at the end), and a regular file. IPC only where the evaluation allowed it
    (`ipc_min_bytes` not None) and for outputs at least that large, as the candidate's runner does."""
    kind = handover.get("kind") if type(handover) is dict else None
    if kind == FILE:
        _keys(handover, "file hand-over", {"kind", "path"}, rule=HANDOVER_RULE)
        check_output_path(_text(handover["path"], "hand-over path", MAX_PATH_TEXT, HANDOVER_RULE), outputs_dir,
                          set_index, trial)
        return handover
    if kind == IPC:
        if ipc_min_bytes is None:
            raise _fail("a CUDA IPC hand-over where this evaluation allows only files", HANDOVER_RULE)
        _keys(handover, "IPC hand-over", {"kind", "tensors"}, rule=HANDOVER_RULE)
        tensors = _list(handover["tensors"], "IPC tensors", MAX_TENSORS, HANDOVER_RULE)
        total = sum(check_ipc_tensor(item) for item in tensors)
        if not tensors or total < ipc_min_bytes:
            raise _fail(f"a CUDA IPC hand-over of {total} bytes, below the {ipc_min_bytes} bytes that use IPC",
                        HANDOVER_RULE)
        return handover
    raise _fail(f"unknown hand-over {_show(handover)}", HANDOVER_RULE)


def output_name(set_index: int, trial: int) -> str:
    """The file name of a trial's outputs (harness.outputs_path)."""
    return f"set_{set_index}_trial_{trial}.safetensors"


def check_output_path(path: str, outputs_dir: str, set_index: int, trial: int) -> None:
    """`path` is this trial's outputs file, directly in `outputs_dir` (an absolute, resolved path the trusted
    side made), and reached without a symlink (the folder swapped for one included)."""
    name = output_name(set_index, trial)
    if path != os.path.join(outputs_dir, name):  # exactly: no "..", no "//", no other spelling
        raise _fail(f"hand-over path {_show(path)} is not input set {set_index} trial {trial}'s file in this "
                    "evaluation's outputs folder", HANDOVER_RULE)
    if os.path.realpath(path) != os.path.join(outputs_dir, name):
        raise _fail(f"hand-over path {_show(path)} leads elsewhere through a symlink", HANDOVER_RULE)
    try:
        info = os.lstat(path)
    except OSError as exc:
        raise _fail(f"hand-over path {_show(path)}: {exc.strerror}", HANDOVER_RULE) from None
    if not stat.S_ISREG(info.st_mode):
        raise _fail(f"hand-over path {_show(path)} is not a regular file", HANDOVER_RULE)


def check_ipc_tensor(item: Any) -> int:
    """One tensor of an IPC hand-over; returns its size in bytes."""
    _keys(item, "IPC tensor", {"meta", "dtype", "shape", "stride", "offset"}, rule=HANDOVER_RULE)
    meta = _list(item["meta"], "IPC handle", len(IPC_FIELDS), HANDOVER_RULE)
    if len(meta) != len(IPC_FIELDS):
        raise _fail("malformed IPC handle", HANDOVER_RULE)
    for index, (value, kind) in enumerate(zip(meta, IPC_FIELDS)):
        what = f"IPC handle field {index}"
        if kind == "bytes":
            text = _text(value, what, 2 * MAX_HANDLE_BYTES, HANDOVER_RULE)
            if len(text) % 2 or not _HEX.fullmatch(text):
                raise _fail(f"{what}: not lower-case hex", HANDOVER_RULE)
        elif kind == "bool":
            if type(value) is not bool:
                raise _fail(f"{what}: expected a boolean", HANDOVER_RULE)
        else:
            _int(value, what, 0, MAX_STORAGE_BYTES, HANDOVER_RULE)
    if len(meta[1]) == 0 or len(meta[6]) == 0:
        raise _fail("IPC handle without a memory or event handle", HANDOVER_RULE)
    ref_counter = bytes.fromhex(meta[4]).decode("ascii", "replace")
    if not _TORCH_SHM_NAME.fullmatch(ref_counter):
        raise _fail(f"IPC reference counter {_show(ref_counter)} is not one of torch's shared-memory names",
                    HANDOVER_RULE)
    dtype = item["dtype"]
    if type(dtype) is not str or dtype not in ELEMENT_BYTES:
        raise _fail(f"unknown dtype {_show(dtype)}", HANDOVER_RULE)
    shape = _list(item["shape"], "shape", MAX_NDIM, HANDOVER_RULE)
    stride = _list(item["stride"], "stride", MAX_NDIM, HANDOVER_RULE)
    if len(shape) != len(stride):
        raise _fail("shape and stride differ in length", HANDOVER_RULE)
    shape = [_int(v, "shape", rule=HANDOVER_RULE) for v in shape]
    stride = [_int(v, "stride", rule=HANDOVER_RULE) for v in stride]
    offset = _int(item["offset"], "offset", rule=HANDOVER_RULE)
    element = ELEMENT_BYTES[dtype]
    numel = math.prod(shape)
    extent = offset + (1 + sum((n - 1) * s for n, s in zip(shape, stride)) if numel else 0)
    if extent * element > meta[2]:
        raise _fail("tensor layout reaches past its shared storage", HANDOVER_RULE)
    return numel * element


# -- messages ---------------------------------------------------------------------------------------
def _grid(value: Any, what: str, rows: int, columns: int) -> None:
    _list(value, what, rows)
    if len(value) != rows:
        raise _fail(f"{what}: expected {rows} input sets, got {len(value)}")
    for row in value:
        _list(row, what, columns)
        if len(row) != columns:
            raise _fail(f"{what}: expected {columns} trials per input set, got {len(row)}")
        for item in row:
            _text(item, what, MAX_FINGERPRINT)


def _violations(value: Any) -> None:
    for item in _list(value, "violations", MAX_VIOLATIONS):
        _keys(item, "violation", {"layer", "rule", "message"}, frozenset({"line"}))
        for key in ("layer", "rule", "message"):
            _text(item[key], f"violation {key}", 4096)
        if item.get("line") is not None:
            _int(item["line"], "violation line")


def _timing_stats(value: Any) -> None:
    _keys(value, "timing", {"median_us", "mean_us", "std_us", "min_us", "max_us", "runs"}, frozenset({"method"}))
    for key in ("median_us", "mean_us", "std_us", "min_us", "max_us"):
        _number(value[key], f"timing {key}")
    _int(value["runs"], "timing runs", 1, 1 << 31)
    if "method" in value and _text(value["method"], "timing method", 64) not in TIMING_METHODS:
        raise _fail(f"timing method {_show(value['method'])} is none of {', '.join(TIMING_METHODS)}")


# The executor's out-of-memory says what allocation was refused only when torch's allocator refused it.
_OPTIONAL_FIELDS = {"out_of_memory": frozenset({"requested"})}


class Schema:
    """The messages one evaluation's candidate may send, knowing its protocol: `sets` input sets of `trials`
    trials, outputs in `outputs_dir`, IPC from `ipc_min_bytes` up (None: files only)."""

    def __init__(self, sets: int, trials: int, outputs_dir: str, ipc_min_bytes: int | None,
                 timing_checks: int = 0):
        self.sets = sets
        self.trials = trials
        # The executor design hands over its checked timed runs' outputs too, as the first set's trials from
        # `trials` on.
        self.last_trial = trials - 1 + timing_checks
        self.outputs_dir = outputs_dir
        self.ipc_min_bytes = ipc_min_bytes
        self._checks: dict[str, tuple[set[str], Callable[[dict], None]]] = {
            "inputs_ready": ({"fingerprints"}, self._inputs_ready),
            "build_request": ({"name", "source", "library_dirs", "include_dirs", "libraries"}, self._build_request),
            "ptxas_request": ({"ptx", "arch", "capability", "enable_fp_fusion"}, self._ptxas_request),
            "jail_violation": ({"rule", "message"}, self._jail_violation),
            "trial_outputs": ({"set", "trial", "handover", "fingerprint"}, self._trial_outputs),
            "outputs_done": ({"phases", "launches", "input_fingerprints", "output_fingerprints",
                              "launches_per_forward", "side_stream_launches", "ops", "violations"},
                             self._outputs_done),
            "timing": ({"candidate", "violations"}, self._timing),
            "calibrated": ({"candidate", "violations"}, self._timing),
            "program": (set(), lambda m: None),
            "stopped": (set(), lambda m: None),
            "unsupported": ({"error"}, self._error),
            "rejected": ({"rule", "error"}, self._rejected),
            "compile_error": ({"phase", "error"}, self._error),
            "runtime_error": ({"phase", "error"}, self._error),
            "internal_error": ({"error"}, self._error),
            "out_of_memory": ({"error", "held"}, self._out_of_memory),
        }

    def check(self, message: dict) -> dict:
        """The message if it is well-formed; Malformed otherwise."""
        kind = message.get("type")
        if kind not in self._checks:
            raise _fail(f"unknown message type {_show(kind)}")
        fields, check = self._checks[kind]
        _keys(message, f"{kind} message", fields | {"type", "nonce"}, _OPTIONAL_FIELDS.get(kind, frozenset()))
        check(message)
        return message

    def _inputs_ready(self, m: dict) -> None:
        _grid(m["fingerprints"], "input fingerprints", self.sets, self.trials)

    def _build_request(self, m: dict) -> None:
        name = _text(m["name"], "build name", 256)
        if not name.replace("_", "").isalnum():
            raise _fail(f"build name {_show(name)} is not an identifier")
        _text(m["source"], "build source", MAX_BUILD_SOURCE)
        for key in ("library_dirs", "include_dirs", "libraries"):
            if m[key] is not None:
                for item in _list(m[key], key, MAX_BUILD_LIST):
                    _text(item, key, MAX_PATH_TEXT)

    def _ptxas_request(self, m: dict) -> None:
        _text(m["ptx"], "PTX", MAX_PTX)
        _text(m["arch"], "arch", 16)
        _int(m["capability"], "capability", 50, 200)
        if type(m["enable_fp_fusion"]) is not bool:
            raise _fail(f"enable_fp_fusion: expected a boolean, got {_show(m['enable_fp_fusion'])}")

    def _jail_violation(self, m: dict) -> None:
        _text(m["rule"], "jail rule", 64)
        _text(m["message"], "jail message")

    def _trial_outputs(self, m: dict) -> None:
        set_index = _int(m["set"], "input set", 0, self.sets - 1)
        trial = _int(m["trial"], "trial", 0, self.last_trial if set_index == 0 else self.trials - 1)
        _text(m["fingerprint"], "output fingerprint", MAX_FINGERPRINT)
        check_handover(m["handover"], outputs_dir=self.outputs_dir, set_index=set_index, trial=trial,
                       ipc_min_bytes=self.ipc_min_bytes)

    def _outputs_done(self, m: dict) -> None:
        _keys(m["phases"], "phases", {"setup", "compile", "trials"})
        for key, value in m["phases"].items():
            _number(value, f"phase {key}")
        _int(m["launches"], "launches")
        _int(m["side_stream_launches"], "side-stream launches")
        _grid(m["input_fingerprints"], "input fingerprints", self.sets, self.trials)
        _grid(m["output_fingerprints"], "output fingerprints", self.sets, self.trials)
        for value in _list(m["launches_per_forward"], "launches per forward", self.sets * self.trials):
            _int(value, "launches per forward")
        ops = m["ops"]
        if type(ops) is not dict or len(ops) > MAX_OPS:
            raise _fail(f"ops: expected an object of at most {MAX_OPS} counts")
        for name, count in ops.items():
            _text(name, "op name", 256)
            _int(count, "op count")
        _violations(m["violations"])

    def _timing(self, m: dict) -> None:
        _timing_stats(m["candidate"])
        _violations(m["violations"])

    def _rejected(self, m: dict) -> None:
        _text(m["rule"], "rule", 64)
        _text(m["error"], "error")

    def _error(self, m: dict) -> None:
        for key in ("phase", "error"):
            if key in m:
                _text(m[key], key)

    @staticmethod
    def _out_of_memory(m: dict) -> None:
        _text(m["error"], "error")
        _int(m["held"], "memory held")
        if "requested" in m:
            _int(m["requested"], "memory requested", 1)
