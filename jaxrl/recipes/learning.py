"""The learning demonstration's stages, in order, each one `python -m jaxrl.main` command in its own process:

    data        the data engine's build (configs/learning/data.yaml)
    eval-base   the untrained model on every evaluation set
    sft         SFT of SmolLM2-135M on the verified pairs
    eval-sft    the SFT policy on every evaluation set
    grpo        GRPO with HRD and GRPO with the uniform reward, from the SFT policy, side by side
    eval-grpo   both GRPO policies on every evaluation set
    report      plots and the comparison table (jaxrl.evaluation.learning_report)

    python -m jaxrl.recipes.learning --stages sft,eval-sft [--budget-s 540] [--set key=value ...]

A stage whose outputs exist is skipped, and the commands themselves resume, so running the same line again
(after a time limit, on a fresh lease) continues where it stopped. Evaluation and GRPO processes share one
sandbox server, started once (in its own session, so that it outlives a command on a lent machine) and found
again through `<output root>/learn-sandbox.json`. `--set` overrides go to every command (a tiny CPU version of
the whole path runs in the tests this way).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

CONFIGS = Path(__file__).resolve().parents[2] / "configs" / "learning"
EVAL_SETS = {"heldout": "eval_heldout.yaml", "kbl1": "eval_kernelbench_l1.yaml", "kbl2": "eval_kernelbench_l2.yaml"}
ARMS = {"hrd": "grpo_hrd_smollm2.yaml", "uniform": "grpo_uniform_smollm2.yaml"}
STAGES = ("data", "eval-base", "sft", "eval-sft", "grpo", "eval-grpo", "report")


@dataclasses.dataclass(frozen=True)
class Plan:
    """Where things are and what every command is told besides its config."""

    output_root: Path
    overrides: tuple[str, ...] = ()
    base_model: str = "smollm2-135m"  # what SFT starts from and "base" means in the evaluation
    eval_sets: tuple[str, ...] = tuple(EVAL_SETS)
    memory_fraction: str = "0.12"  # JAX's share of the GPU per process (several share it with the sandbox)
    sandbox_backend: str = "cuda"
    sandbox_workers: int = 16

    def run_dir(self, name: str) -> Path:
        return self.output_root / name


def _command(plan: Plan, command: str, config: str, *extra: str, last: Sequence[str] = ()) -> list[str]:
    """The command line; `extra` before the plan's overrides, `last` after them (it wins)."""
    data = plan.run_dir("data-learn")
    paths = {"sft": [f"sft.data={data / 'sft.jsonl'}"], "grpo": [f"grpo.dataset={data / 'rl_tasks.jsonl'}"],
             "eval": [f"eval.dataset={data / 'rl_tasks.jsonl'}"] if config == EVAL_SETS["heldout"] else []}
    return [sys.executable, "-m", "jaxrl.main", command, "--config", str(CONFIGS / config),
            f"run.output_root={plan.output_root}", *paths.get(command, []), *extra, *plan.overrides, *last]


def _env(plan: Plan) -> dict[str, str]:
    return {**os.environ, "XLA_PYTHON_CLIENT_MEM_FRACTION": plan.memory_fraction, "PYTHONUNBUFFERED": "1"}


def sandbox_address(plan: Plan) -> str:
    """The shared sandbox server's address, starting it when no live one is recorded."""
    record = plan.output_root / "learn-sandbox.json"
    if record.exists():
        info = json.loads(record.read_text())
        try:
            os.kill(int(info["pid"]), 0)
            return info["address"]
        except (OSError, KeyError, ValueError):
            record.unlink()
    plan.output_root.mkdir(parents=True, exist_ok=True)
    ready = plan.output_root / "learn-sandbox.ready"
    ready.unlink(missing_ok=True)
    log = open(plan.output_root / "learn-sandbox.log", "ab")
    process = subprocess.Popen(
        [sys.executable, "-m", "sandbox_service", "serve", "--host", "127.0.0.1", "--port", "0",
         "--backend", plan.sandbox_backend, "--workers", str(plan.sandbox_workers), "--queue", "512",
         "--gpu-memory-fraction", "0.5", "--ready-file", str(ready)],
        stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
    )
    deadline = time.monotonic() + 300
    while not ready.exists():
        if process.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError(f"the sandbox server did not start; see {plan.output_root / 'learn-sandbox.log'}")
        time.sleep(0.2)
    address = json.loads(ready.read_text())["address"]
    record.write_text(json.dumps({"pid": process.pid, "address": address}))
    return address


def _run_all(commands: list[list[str]], plan: Plan) -> None:
    """Run commands side by side; fail if any fails (the others are allowed to finish: they resume)."""
    processes = [subprocess.Popen(c, env=_env(plan)) for c in commands]
    codes = [p.wait() for p in processes]
    failed = [" ".join(c[3:5]) for c, code in zip(commands, codes) if code != 0]
    if failed:
        raise RuntimeError(f"failed: {failed}")


# Each evaluation set twice: one greedy sample (correct at temperature 0) and k samples at temperature 0.7 (pass@k).
DECODING = {"greedy": ("sampling.temperature=0.0", "sampling.num_samples=1", "eval.k=[1]"), "sampled": ()}


def eval_run_name(model: str, eval_set: str, decoding: str) -> str:
    return f"learn-eval-{model}-{eval_set}" + ("" if decoding == "sampled" else "-greedy")


def _evals(plan: Plan, model: str, source: str, address: str) -> list[list[str]]:
    commands = []
    for eval_set in plan.eval_sets:
        for decoding, extra in DECODING.items():
            name = eval_run_name(model, eval_set, decoding)
            if (plan.run_dir(name) / "metrics.json").exists():
                continue
            commands.append(_command(plan, "eval", EVAL_SETS[eval_set], f"model.source={source}",
                                     f"run.name={name}", f"sandbox.targets=[{address}]", "--no-progress",
                                     last=extra))
    return commands


def run_stage(stage: str, plan: Plan) -> None:
    sft_hf = plan.run_dir("learn-sft") / "hf"
    if stage == "data":
        _run_all([_command(plan, "data", "data.yaml")], plan)
    elif stage == "eval-base":
        _run_all(_evals(plan, "base", plan.base_model, sandbox_address(plan)), plan)
    elif stage == "sft":
        if not (sft_hf / "config.json").exists():
            _run_all([_command(plan, "sft", "sft_smollm2.yaml", f"model.source={plan.base_model}")], plan)
    elif stage == "eval-sft":
        _run_all(_evals(plan, "sft", str(sft_hf), sandbox_address(plan)), plan)
    elif stage == "grpo":
        address = sandbox_address(plan)
        _run_all([_command(plan, "grpo", config, f"model.source={sft_hf}", f"model.tokenizer={sft_hf}",
                           f"sandbox.targets=[{address}]")
                  for arm, config in ARMS.items()
                  if not (plan.run_dir(f"learn-grpo-{arm}") / "hf" / "config.json").exists()], plan)
    elif stage == "eval-grpo":
        address = sandbox_address(plan)
        _run_all([c for arm in ARMS for c in _evals(plan, arm, str(plan.run_dir(f"learn-grpo-{arm}") / "hf"), address)],
                 plan)
    elif stage == "report":
        _report(plan)
    else:
        raise ValueError(f"unknown stage {stage!r}; stages: {', '.join(STAGES)}")


def stop_sandbox(plan: Plan) -> None:
    """Stop the shared sandbox server this recipe started (it outlives its commands on purpose)."""
    record = plan.output_root / "learn-sandbox.json"
    if record.exists():
        try:
            os.killpg(int(json.loads(record.read_text())["pid"]), 15)
        except (OSError, KeyError, ValueError):
            pass
        record.unlink()


def _report(plan: Plan) -> None:
    from jaxrl.evaluation.learning_report import main as report

    args = ["--sft", str(plan.run_dir("learn-sft")), "--out", str(plan.output_root / "learn-report"), "--k", "5"]
    args += [f"--grpo={arm}={plan.run_dir(f'learn-grpo-{arm}')}" for arm in ARMS
             if (plan.run_dir(f"learn-grpo-{arm}") / "metrics.jsonl").exists()]
    for model in ("base", "sft", *ARMS):
        for eval_set in plan.eval_sets:
            for decoding in DECODING:
                run = plan.run_dir(eval_run_name(model, eval_set, decoding))
                label = eval_set if decoding == "sampled" else f"{eval_set} (temperature 0)"
                if (run / "metrics.json").exists():
                    args.append(f"--eval={model}:{label}={run}")
    report(args)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--stages", default=",".join(STAGES), help=f"comma-separated, from: {', '.join(STAGES)}")
    parser.add_argument("--output-root", type=Path, default=Path("runs"))
    parser.add_argument("--eval-sets", default=",".join(EVAL_SETS), help=f"from: {', '.join(EVAL_SETS)}")
    parser.add_argument("--budget-s", type=float, help="start no stage after this many seconds")
    parser.add_argument("--sandbox-backend", default="cuda", choices=("cuda", "interpreter"))
    parser.add_argument("--sandbox-workers", type=int, default=16)
    parser.add_argument("--base-model", default="smollm2-135m", help="the model SFT starts from (and 'base')")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="override for every command")
    parser.add_argument("--stop-sandbox", action="store_true", help="stop the shared sandbox server at the end")
    args = parser.parse_args(argv)
    plan = Plan(args.output_root.resolve(), tuple(args.set), args.base_model,
                tuple(s for s in args.eval_sets.split(",") if s), sandbox_backend=args.sandbox_backend,
                sandbox_workers=args.sandbox_workers)
    started = time.monotonic()
    try:
        for stage in (s for s in args.stages.split(",") if s):
            if args.budget_s is not None and time.monotonic() - started > args.budget_s:
                print(f"learning: budget spent; stopping before {stage}", flush=True)
                break
            print(f"learning: stage {stage} ({time.monotonic() - started:.0f} s in)", flush=True)
            run_stage(stage, plan)
    finally:
        if args.stop_sandbox:
            stop_sandbox(plan)
    return 0


if __name__ == "__main__":
    sys.exit(main())
