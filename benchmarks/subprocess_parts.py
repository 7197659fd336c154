"""Running a benchmark's parts each in a fresh interpreter, under one time budget.

JAX and PyTorch then never hold GPU memory at the same time, and a part that crashes or overruns costs
only its own numbers. A script runs itself with `--part NAME --models MODEL --part-out FILE ...`; the
part writes its JSON result to FILE and prints progress lines starting with `[NAME `.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

MIN_PART_S = 20.0  # a part that would get less time than this is skipped


def add_arguments(parser: argparse.ArgumentParser, parts: dict[str, Any]) -> None:
    """The options of this protocol: the run's --time-budget, and the hidden --part/--part-out that
    `run_part` passes to the script's own subprocess."""
    parser.add_argument("--time-budget", type=float, default=570.0, help="seconds for the whole run; parts that "
                        "would start later are skipped and a running part is stopped at the limit")
    parser.add_argument("--part", choices=sorted(parts), help=argparse.SUPPRESS)
    parser.add_argument("--part-out", type=Path, help=argparse.SUPPRESS)


def run_requested_part(args: argparse.Namespace, parts: dict[str, Any]) -> bool:
    """Inside a part's subprocess: runs the part for its one model, writes its JSON result; True if it did."""
    if not args.part:
        return False
    args.model = args.models
    args.part_out.write_text(json.dumps(parts[args.part](args)))
    return True


def log(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def fmt(value: Any, spec: str) -> str:
    return "-" if value is None else format(value, spec)


def run_part(
    script: Path, part: str, model: str, part_argv: list[str], deadline: float, env: dict[str, str] | None = None
) -> dict[str, Any]:
    """One part of `script` in a fresh interpreter; its JSON result, or {"error": ...}, plus `wall_s`."""
    remaining = deadline - time.monotonic()
    if remaining < MIN_PART_S:
        return {"error": "skipped: time budget spent"}
    with tempfile.NamedTemporaryFile(suffix=".json", delete=False) as handle:
        result_path = Path(handle.name)
    argv = [sys.executable, str(Path(script).resolve()), "--part", part, "--models", model,
            "--part-out", str(result_path), *part_argv]
    start = time.monotonic()
    try:
        done = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=remaining,
                              env=env)
        output = done.stdout
        if done.returncode == 0 and result_path.stat().st_size:
            result = json.loads(result_path.read_text())
        else:
            result = {"error": f"exit {done.returncode}: " + "\n".join(output.strip().splitlines()[-15:])}
    except subprocess.TimeoutExpired as exc:
        output = exc.stdout or ""
        output = output.decode() if isinstance(output, bytes) else output
        result = {"error": f"timed out after {remaining:.0f} s"}
    finally:
        result_path.unlink(missing_ok=True)
    for line in output.splitlines():
        if line.startswith(f"[{part} "):
            log(line)
    result["wall_s"] = time.monotonic() - start
    if "error" in result:
        log(f"[{part} {model}] FAILED: {result['error']}")
    return result
