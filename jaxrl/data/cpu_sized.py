"""CPU-sized KernelBench: the same problems with their sizes shrunk for the Triton interpreter.

Full-size problems (e.g. a 4096 x 393216 ReLU) are far too big for `TRITON_INTERPRET=1`, so the
embedded default and the CPU tests use a variant with small shapes. The transform is a pure,
deterministic source rewrite with the `ast` module:

* module-level integer constants, integer arithmetic of literals (`N = 2048 * 2`) and integer
  elements of tuples/lists (`input_shape = (8192 * 2,)`, `D, H, W = (24, 32, 32)`) are shrunk;
* so are integer literals inside `get_inputs` / `get_init_inputs` (e.g. `torch.rand(b, 3, 224, 224)`).

Values at or below `SIZE_CAP` are kept: these are kernel sizes, strides, paddings, dilations,
groups and axes, which must stay as they are for the operator to mean the same thing. A larger value
is halved (floor) until it is at most `SIZE_CAP`, and a batch size (a constant whose name contains
"batch") until it is at most `BATCH_CAP`. Halving keeps powers of two powers of two and odd sizes
like 4095 odd (-> 15), so divisibility between channels and groups mostly survives and irregular
shapes stay irregular. Everything else (floats, names, class bodies, comments) is left byte for byte.

Shrinking can break a problem (a pooling window larger than the shrunk input, channels no longer
divisible by groups) or leave it too big, so only problems whose shrunk reference is validated are
used: `validate` runs each shrunk reference in a torch subprocess (CPU, one thread, a time limit)
and keeps it when it builds and runs within `MAX_SECONDS`, touches at most `MAX_ELEMENTS` input
plus output elements (the interpreter runs a kernel in Python, block by block), and gives finite,
non-constant outputs that do not change with the random state before forward (dropout in training
mode would: no candidate could match it). The kept ids are committed in `cpu_sized_ids.json` with
a hash of each shrunk source, so a change to the transform (or to the dataset) is noticed instead
of silently using unvalidated problems. Refresh it (other levels in the file are kept) with:

    python -m jaxrl.data.cpu_sized --validate --level 1 --level 2 --out jaxrl/data/cpu_sized_ids.json
"""

from __future__ import annotations

import argparse
import ast
import dataclasses
import hashlib
import json
import os
import queue
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterable
from pathlib import Path

from jaxrl.data.kernelbench_files import read_problems, select_problems
from jaxrl.data.kernelbench_source import REPO_ROOT, resolve_kernelbench
from jaxrl.data.problem import Problem
from jaxrl.data.reference_runner import READY, RESULT_PREFIX

SIZE_CAP = 16
BATCH_CAP = 4
MAX_SECONDS = 1.0
MAX_ELEMENTS = 1 << 16
STARTUP_TIMEOUT_S = 120.0
IDS_FILE = Path(__file__).with_name("cpu_sized_ids.json")
_INPUT_FUNCTIONS = ("get_inputs", "get_init_inputs")
_ARITHMETIC = {ast.Add: int.__add__, ast.Sub: int.__sub__, ast.Mult: int.__mul__, ast.FloorDiv: int.__floordiv__}


def shrink_value(value: int, cap: int = SIZE_CAP) -> int:
    """Halve (floor) until the value is at most `cap`; values already at most `cap` are unchanged."""
    while value > cap:
        value //= 2
    return value


def shrink_source(code: str) -> str:
    """The CPU-sized variant of a problem's source (deterministic; see the module docstring)."""
    tree = ast.parse(code)
    edits: list[tuple[ast.expr, int]] = []
    for node in tree.body:
        if isinstance(node, (ast.Assign, ast.AnnAssign)) and node.value is not None:
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            batch = any("batch" in name.lower() for t in targets for name in _target_names(t))
            _collect_values(node.value, BATCH_CAP if batch else SIZE_CAP, edits)
        elif isinstance(node, ast.FunctionDef) and node.name in _INPUT_FUNCTIONS:
            for stmt in node.body:
                _collect_literals(stmt, edits)
    return _apply(code, edits)


def _target_names(target: ast.expr) -> list[str]:
    if isinstance(target, ast.Name):
        return [target.id]
    if isinstance(target, (ast.Tuple, ast.List)):
        return [name for elt in target.elts for name in _target_names(elt)]
    return []


def _int_value(node: ast.expr) -> int | None:
    """The value of an expression built only from int literals and + - * // unary -, else None."""
    if isinstance(node, ast.Constant):
        return node.value if type(node.value) is int else None
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        inner = _int_value(node.operand)
        return None if inner is None else -inner
    if isinstance(node, ast.BinOp) and type(node.op) in _ARITHMETIC:
        left, right = _int_value(node.left), _int_value(node.right)
        if left is None or right is None or (isinstance(node.op, ast.FloorDiv) and right == 0):
            return None
        return _ARITHMETIC[type(node.op)](left, right)
    return None


def _collect_values(node: ast.expr, cap: int, edits: list[tuple[ast.expr, int]]) -> None:
    """A module-level value: an int expression, or a tuple/list whose int elements are shrunk."""
    if isinstance(node, (ast.Tuple, ast.List)):
        for elt in node.elts:
            _collect_values(elt, SIZE_CAP, edits)
        return
    value = _int_value(node)
    if value is not None and value > cap:
        edits.append((node, shrink_value(value, cap)))


def _collect_literals(node: ast.AST, edits: list[tuple[ast.expr, int]]) -> None:
    """Every maximal int expression inside an input function."""
    if isinstance(node, ast.expr):
        value = _int_value(node)
        if value is not None:
            if value > SIZE_CAP:
                edits.append((node, shrink_value(value)))
            return
    for child in ast.iter_child_nodes(node):
        _collect_literals(child, edits)


def _apply(code: str, edits: list[tuple[ast.expr, int]]) -> str:
    """Replace each edited node's exact source span (ast offsets are UTF-8 byte columns)."""
    if not edits:
        return code
    data = code.encode("utf-8")
    line_starts = [0]
    for line in data.splitlines(keepends=True):
        line_starts.append(line_starts[-1] + len(line))
    spans = []
    for node, value in edits:
        start = line_starts[node.lineno - 1] + node.col_offset
        end = line_starts[node.end_lineno - 1] + node.end_col_offset
        spans.append((start, end, str(value).encode()))
    out = bytearray()
    cursor = 0
    for start, end, text in sorted(spans):
        out += data[cursor:start] + text
        cursor = end
    out += data[cursor:]
    return out.decode("utf-8")


def source_hash(code: str) -> str:
    """Short content hash of a shrunk source: what the committed list vouches for."""
    return hashlib.sha256(code.encode("utf-8")).hexdigest()[:16]


def shrink_problem(problem: Problem) -> Problem:
    return dataclasses.replace(problem, code=shrink_source(problem.code), source=f"{problem.source} (cpu-sized)")


# ---------------------------------------------------------------------------------------------
# The committed list of validated problems.


def read_ids_file(path: Path = IDS_FILE) -> dict[str, dict[int, str]]:
    """{level: {problem_id: shrunk-source hash}} of the problems whose shrunk reference passed."""
    if not path.exists():
        raise FileNotFoundError(f"{path} missing; create it with python -m jaxrl.data.cpu_sized --validate")
    data = json.loads(path.read_text())
    levels = data["levels"]
    return {level: {int(pid): digest for pid, digest in entry["kept"].items()} for level, entry in levels.items()}


def cpu_sized_problems(problems: Iterable[Problem], strict_ids: bool = False, path: Path = IDS_FILE) -> list[Problem]:
    """Shrink each problem and keep the validated ones.

    A validated problem whose shrunk source no longer hashes to the committed value means the
    transform or the dataset changed since validation: that is an error, not a silent skip.
    With `strict_ids` (the caller named ids explicitly) a problem without a validated variant is
    an error too.
    """
    kept_ids = read_ids_file(path)
    kept, missing, stale = [], [], []
    for problem in problems:
        digests = kept_ids.get(str(problem.level), {})
        if problem.problem_id not in digests:
            missing.append(problem.key)
            continue
        shrunk = shrink_problem(problem)
        if source_hash(shrunk.code) != digests[problem.problem_id]:
            stale.append(problem.key)
            continue
        kept.append(shrunk)
    if stale:
        raise ValueError(
            f"CPU-sized list {path} is stale for {stale}: the shrunk source changed since validation; "
            "re-run python -m jaxrl.data.cpu_sized --validate"
        )
    if strict_ids and missing:
        raise ValueError(f"no validated CPU-sized variant for {missing} (see {path})")
    if not kept:
        raise ValueError(f"none of the selected problems has a validated CPU-sized variant (see {path})")
    return kept


# ---------------------------------------------------------------------------------------------
# Validation: run shrunk references in a torch subprocess.


@dataclasses.dataclass(frozen=True)
class Check:
    """Outcome of running one shrunk reference."""

    key: str
    ok: bool
    reason: str = ""
    seconds: float | None = None
    elements: int | None = None


def validate(problems: list[Problem], timeout_s: float = 30.0) -> dict[str, Check]:
    """Run each (already shrunk) problem's reference in a worker subprocess; key -> Check.

    One worker runs the problems in turn, so torch is imported once; when a reference hangs past
    `timeout_s` (build + two forward passes) or kills the worker, that problem fails and a fresh
    worker continues with the rest.
    """
    results: dict[str, Check] = {}
    pending = list(problems)
    while pending:
        _run_worker(pending, timeout_s, results)
        pending = [p for p in pending if p.key not in results]
    return results


def _run_worker(problems: list[Problem], timeout_s: float, results: dict[str, Check]) -> None:
    env = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "CUDA_VISIBLE_DEVICES": ""}
    with tempfile.TemporaryDirectory(prefix="cpu_sized_") as tmp:
        requests = Path(tmp) / "requests.jsonl"
        requests.write_text("".join(json.dumps({"key": p.key, "code": p.code}) + "\n" for p in problems))
        proc = subprocess.Popen(
            [sys.executable, "-m", "jaxrl.data.reference_runner", str(requests)],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
            cwd=REPO_ROOT,
        )
        lines: queue.Queue[str | None] = queue.Queue()
        stderr_lines: list[str] = []

        def pump() -> None:
            for line in proc.stdout:
                lines.put(line)
            lines.put(None)

        def stderr_tail() -> str:
            proc.wait()
            stderr_reader.join(timeout=5)
            return "".join(stderr_lines[-3:]).strip()[-300:]

        threading.Thread(target=pump, daemon=True).start()
        stderr_reader = threading.Thread(target=lambda: stderr_lines.extend(proc.stderr), daemon=True)
        stderr_reader.start()
        try:
            record = _next_result(lines, time.monotonic() + STARTUP_TIMEOUT_S)
            if record != READY:
                proc.kill()
                raise RuntimeError(f"reference runner did not start ({record}): {stderr_tail()}")
            for problem in problems:
                record = _next_result(lines, time.monotonic() + timeout_s)
                if record == "timeout":
                    results[problem.key] = Check(problem.key, False, f"timeout after {timeout_s:.0f} s")
                    return
                if record == "exited":
                    tail = stderr_tail()
                    results[problem.key] = Check(problem.key, False, f"worker exited ({proc.returncode}): {tail}")
                    return
                if record["key"] != problem.key:
                    raise RuntimeError(f"reference runner answered {record['key']} for {problem.key}")
                results[problem.key] = _judge(record)
        finally:
            proc.kill()
            proc.wait()


def _next_result(lines: queue.Queue, deadline: float) -> dict | str:
    """The next result record, READY, or "timeout" / "exited"; other output lines are skipped."""
    while True:
        try:
            line = lines.get(timeout=max(0.0, deadline - time.monotonic()))
        except queue.Empty:
            return "timeout"
        if line is None:
            return "exited"
        if line.startswith(RESULT_PREFIX):
            return json.loads(line[len(RESULT_PREFIX) :])
        if line.rstrip("\n") == READY:
            return READY


def _judge(record: dict) -> Check:
    key = record["key"]
    if record.get("error"):
        return Check(key, False, record["error"])
    seconds, elements = record["seconds"], record["elements"]
    problems = []
    if seconds > MAX_SECONDS:
        problems.append(f"slow ({seconds:.2f} s > {MAX_SECONDS} s)")
    if elements > MAX_ELEMENTS:
        problems.append(f"too large ({elements} elements > {MAX_ELEMENTS})")
    if not record["finite"]:
        problems.append("non-finite output")
    if record["constant"]:
        problems.append("constant output")
    if not record["rng_independent"]:
        problems.append("output depends on the random state")
    return Check(key, not problems, "; ".join(problems), seconds, elements)


def build_ids_file(level_checks: dict[int, dict[str, Check]], shrunk: dict[str, Problem]) -> dict:
    """The JSON document committed as cpu_sized_ids.json."""
    levels = {}
    for level, checks in sorted(level_checks.items()):
        ordered = sorted(checks.values(), key=lambda c: shrunk[c.key].problem_id)
        levels[str(level)] = {
            "kept": {str(shrunk[c.key].problem_id): source_hash(shrunk[c.key].code) for c in ordered if c.ok},
            "dropped": {str(shrunk[c.key].problem_id): c.reason for c in ordered if not c.ok},
        }
    return {
        "transform": {
            "size_cap": SIZE_CAP,
            "batch_cap": BATCH_CAP,
            "max_seconds": MAX_SECONDS,
            "max_elements": MAX_ELEMENTS,
        },
        "levels": levels,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m jaxrl.data.cpu_sized", description=__doc__.split("\n\n")[0])
    parser.add_argument("--source", default=None, help="KernelBench JSONL or folder (default: the usual search)")
    parser.add_argument("--level", type=int, action="append", required=True, help="level to process (repeatable)")
    parser.add_argument("--validate", action="store_true", help="run every shrunk reference and write --out")
    parser.add_argument("--out", type=Path, default=IDS_FILE, help="where to write the kept-ids JSON")
    parser.add_argument("--show", type=int, default=None, metavar="ID", help="print the shrunk source of one problem")
    args = parser.parse_args(argv)
    source = resolve_kernelbench(args.source)
    problems = [shrink_problem(p) for p in select_problems(read_problems(source), args.level, None, str(source))]
    if args.show is not None:
        for problem in problems:
            if problem.problem_id == args.show:
                print(f"# {problem.key} {problem.name}\n{problem.code}")
        return 0
    if not args.validate:
        parser.error("nothing to do: pass --validate or --show ID")
    shrunk = {p.key: p for p in problems}
    level_checks: dict[int, dict[str, Check]] = {}
    for level in sorted(set(args.level)):
        checks = validate([p for p in problems if p.level == level])
        level_checks[level] = checks
        kept = sum(c.ok for c in checks.values())
        print(f"level {level}: kept {kept} of {len(checks)}")
        for check in checks.values():
            if not check.ok:
                print(f"  drop {check.key}: {check.reason}")
    document = build_ids_file(level_checks, shrunk)
    if args.out.exists():
        previous = json.loads(args.out.read_text())
        if previous.get("transform") == document["transform"]:
            # Levels not re-validated now stay as they were; the hashes still guard them.
            merged = {**previous["levels"], **document["levels"]}
            document["levels"] = dict(sorted(merged.items(), key=lambda item: int(item[0])))
    args.out.write_text(json.dumps(document, indent=1) + "\n")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
