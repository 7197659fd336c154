"""A GRPO + HRD run on the GPU whose rewards are real: SFT, then GRPO with the CUDA sandbox timing kernels.

A random policy writes no kernel, so its GRPO rewards are all zero and the sandbox never touches the GPU.
This run first fine-tunes a Qwen3-0.6B-shaped policy (random weights, bundled SmolLM2 tokenizer) on the
honest level-1 kernels of benchmarks/kernels/level1, each paired with its KernelBench problem and
prompted exactly as evaluation prompts (`sft.format=kernelbook`; the plan is the kernel's docstring
summary), until it reproduces them; then GRPO starts from that checkpoint (its exported HF folder) on
the same problems, with the embedded sandbox on the same GPU checking and timing every sample.

What it shows: the loop with non-zero rewards end to end (valid / correct rates, speedups that feed the
plan-token advantages, the time split between generation, sandbox and update, sandbox load under
training). What it does not show: learning. The policy memorised its answers; a rise in reward here
means nothing about kernels it has not seen.

    python3 benchmarks/grpo_sandbox_run.py --out $OUT/grpo_run         # GPU, about 5 minutes on an H200
    python3 benchmarks/grpo_sandbox_run.py --write-data data.jsonl      # only the SFT JSONL (any machine)
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parents[1]
KERNELS = REPO_ROOT / "benchmarks" / "kernels" / "level1"
if str(REPO_ROOT) not in sys.path:  # run as a script from anywhere
    sys.path.insert(0, str(REPO_ROOT))


def kernel_files(kernels: Path = KERNELS) -> dict[int, Path]:
    """Level-1 problem id -> its kernel file (named <id>_<name>.py)."""
    found = {int(p.name.split("_", 1)[0]): p for p in sorted(kernels.glob("*.py")) if p.name[0].isdigit()}
    if not found:
        raise FileNotFoundError(f"no <id>_<name>.py kernels in {kernels}")
    return found


def plan_of(source: str, path: Path) -> str:
    """The kernel's plan: its module docstring without the "KernelBench L1/N (problem)" heading."""
    doc = ast.get_docstring(ast.parse(source))
    if not doc:
        raise ValueError(f"{path} has no module docstring to use as the plan")
    text = " ".join(doc.split())
    if text.startswith("KernelBench") and "(" in text:
        depth = 0
        for index in range(text.index("("), len(text)):  # the heading's parentheses may nest
            depth += {"(": 1, ")": -1}.get(text[index], 0)
            if depth == 0:
                text = text[index + 1 :].lstrip(":. ")
                break
    if not text:
        raise ValueError(f"{path}: the docstring holds only its heading, no plan")
    return text


def sft_rows(dataset: Path, kernels: Path = KERNELS) -> list[dict[str, Any]]:
    """KernelBook-layout rows: the KernelBench reference (python_code), the kernel file (triton_code), the plan."""
    from jaxrl.data.kernelbench import load_problems

    files = kernel_files(kernels)
    problems = {p.problem_id: p for p in load_problems(dataset, levels=[1], ids=sorted(files))}
    missing = sorted(set(files) - set(problems))
    if missing:
        raise ValueError(f"level-1 problems {missing} are not in {dataset}")
    rows = []
    for pid, path in files.items():
        source = path.read_text()
        rows.append({"python_code": problems[pid].code, "triton_code": source, "reasoning": plan_of(source, path),
                     "problem_id": pid})
    return rows


def sft_overrides(args: argparse.Namespace, data: Path, count: int) -> list[str]:
    return [
        f"model.source={args.model}", f"model.tokenizer={args.tokenizer}", "model.dtype=bfloat16",
        "model.param_dtype=float32", "model.attention_impl=auto", f"model.remat={args.sft_remat}",
        f"sft.data={data}", "sft.format=kernelbook", "sft.eval_fraction=0", "sft.eval_every=0",
        f"sft.epochs={args.sft_steps}", f"sft.batch_size={count}", f"sft.micro_batch_rows={args.micro_rows}",
        "sft.max_seq_len=4096", "sft.logits_chunk=1024",
        f"optim.learning_rate={args.sft_lr}", "optim.warmup_ratio=0.05", "optim.decay=cosine", "optim.min_lr_ratio=0.3",
        "optim.weight_decay=0",
        "checkpoint.every=0", "checkpoint.export_hf=true",
        f"run.output_root={args.out}", "run.name=sft",
    ]


def grpo_overrides(args: argparse.Namespace, ids: list[int]) -> list[str]:
    return [
        f"model.source={args.out / 'sft' / 'hf'}", f"model.tokenizer={args.tokenizer}", "model.dtype=bfloat16",
        "model.param_dtype=float32", "model.attention_impl=auto",
        "model.remat=dots",  # the sandbox's children share the GPU's memory
        f"grpo.dataset={args.dataset}", "grpo.levels=[1]", f"grpo.ids=[{','.join(map(str, ids))}]",
        "grpo.cpu_sized=false", f"grpo.group_size={args.group_size}", f"grpo.tasks_per_step={args.tasks_per_step}",
        "grpo.tasks_per_call=4", f"grpo.max_steps={args.grpo_steps}", "grpo.micro_batch_rows=4",
        "grpo.row_multiple=256", "grpo.logits_chunk=256", "grpo.timed=true",
        f"sampling.temperature={args.temperature}", f"sampling.max_new_tokens={args.max_new_tokens}",
        "sampling.max_prompt_tokens=2048", "sampling.batch_size=16",
        "sandbox.backend=cuda", f"sandbox.workers={args.workers}", "sandbox.trials=5", "sandbox.timeout_s=300",
        "sandbox.max_concurrency=16", "optim.learning_rate=1e-6", "optim.decay=constant",
        "checkpoint.every=0", "checkpoint.export_hf=false",
        f"run.output_root={args.out}", "run.name=grpo",
    ]


def run_stage(name: str, command: list[str], log_path: Path, env: dict[str, str]) -> float:
    """Runs one `python -m jaxrl.main` stage, its output to `log_path`; its seconds, or exits on failure."""
    print(f"[{name}] {' '.join(command)}", flush=True)
    start = time.monotonic()
    with log_path.open("w") as log:
        done = subprocess.run(command, stdout=log, stderr=subprocess.STDOUT, env=env, cwd=REPO_ROOT)
    seconds = time.monotonic() - start
    if done.returncode:
        tail = "\n".join(log_path.read_text(errors="replace").splitlines()[-30:])
        raise SystemExit(f"[{name}] failed with exit {done.returncode} after {seconds:.0f} s; log tail:\n{tail}")
    print(f"[{name}] done in {seconds:.0f} s (log {log_path})", flush=True)
    return seconds


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


SUMMARY_KEYS = (  # (metric, column header, format)
    ("reward/correct_mean", "R_correct", ".2f"), ("reward/speedup_mean", "R_speedup", ".2f"),
    ("rate/valid", "valid", ".2f"), ("rate/correct", "correct", ".2f"), ("speedup/mean_of_correct", "speedup", ".2f"), ("length/response_mean", "tokens", ".0f"),
    ("time/generation_s", "gen s", ".1f"), ("time/sandbox_wait_s", "sandbox s", ".1f"),
    ("time/update_s", "update s", ".1f"), ("time/step_s", "step s", ".1f"),
)


def summary_table(sft_metrics: list[dict[str, Any]], grpo_metrics: list[dict[str, Any]]) -> str:
    losses = [m["train/loss"] for m in sft_metrics if "train/loss" in m]
    lines = [f"SFT: {len(losses)} steps, loss {losses[0]:.3f} -> {losses[-1]:.4f}" if losses else "SFT: no loss logged"]
    lines.append("step " + " ".join(f"{h:>10}" for _, h, _ in SUMMARY_KEYS))
    for m in grpo_metrics:
        cells = [format(m[k], f) if isinstance(m.get(k), (int, float)) else "-" for k, _, f in SUMMARY_KEYS]
        lines.append(f"{m.get('step', '?'):>4} " + " ".join(f"{c:>10}" for c in cells))
    return "\n".join(lines)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=Path("runs/grpo_sandbox_run"), help="run folder (sft/, grpo/)")
    parser.add_argument("--dataset", type=Path, default=None,
                        help="KernelBench JSONL or folder (default: found as jaxrl.data.kernelbench_source says)")
    parser.add_argument("--tokenizer", default="smollm2-135m", help="tokenizer folder or bundled model name")
    parser.add_argument("--model", default="random:qwen3_0_6b", help="SFT starting point (model.source)")
    parser.add_argument("--sft-steps", type=int, default=130, help="SFT steps (one batch of all kernels each)")
    parser.add_argument("--sft-lr", type=float, default=5e-4)
    parser.add_argument("--micro-rows", type=int, default=8, help="packed 4096-token rows per SFT micro-batch")
    parser.add_argument("--sft-remat", default="full", choices=["none", "dots", "full"])
    parser.add_argument("--grpo-steps", type=int, default=2)
    parser.add_argument("--group-size", type=int, default=4)
    parser.add_argument("--tasks-per-step", type=int, default=7)
    parser.add_argument("--temperature", type=float, default=0.7)
    parser.add_argument("--max-new-tokens", type=int, default=1600)
    parser.add_argument("--workers", type=int, default=4, help="sandbox worker processes on the GPU")
    parser.add_argument("--write-data", type=Path, help="only write the SFT JSONL here and exit")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if min(args.sft_steps, args.micro_rows, args.grpo_steps, args.group_size, args.tasks_per_step,
           args.max_new_tokens, args.workers) < 1 or args.temperature <= 0:
        raise SystemExit("step counts, sizes and workers must be >= 1 and --temperature > 0")
    from jaxrl.data.kernelbench_source import resolve_kernelbench

    args.dataset = resolve_kernelbench(args.dataset)
    rows = sft_rows(args.dataset)
    if args.write_data:
        args.write_data.write_text("".join(json.dumps(r) + "\n" for r in rows))
        print(f"wrote {len(rows)} rows to {args.write_data}")
        return 0
    args.out = args.out.resolve()
    args.out.mkdir(parents=True, exist_ok=True)
    data = args.out / "sft_data.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}
    env.setdefault("XLA_PYTHON_CLIENT_MEM_FRACTION", "0.5")  # the sandbox's children share the GPU
    main_cmd = [sys.executable, "-m", "jaxrl.main"]
    timings = {"sft_s": run_stage("sft", [*main_cmd, "sft", "--config", "configs/tiny_cpu_sft.yaml",
                                          *sft_overrides(args, data, len(rows))], args.out / "sft.log", env)}
    ids = sorted(r["problem_id"] for r in rows)
    timings["grpo_s"] = run_stage("grpo", [*main_cmd, "grpo", "--config", "configs/tiny_cpu_grpo.yaml",
                                           *grpo_overrides(args, ids)], args.out / "grpo.log", env)
    sft_metrics = read_jsonl(args.out / "sft" / "metrics.jsonl")
    grpo_metrics = read_jsonl(args.out / "grpo" / "metrics.jsonl")
    table = summary_table(sft_metrics, grpo_metrics)
    (args.out / "summary.json").write_text(json.dumps({"timings": timings, "grpo": grpo_metrics,
                                                       "sft_last": sft_metrics[-1:]}, indent=2))
    print(table, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
