"""The learning demonstration of issue 21, its stages in order, each one command in its own process:

    data        the data engine's build (configs/learning/issue21_data.yaml: format 2, with the rl split)
    evalsets    evaluation sets A, B, C (jaxrl.data.engine.evalsets), checked against evalsets.lock.json
    eval-base   the untrained model on every evaluation set (A-E)
    sft         SFT of SmolLM2-135M on the verified pairs (configs/learning/issue21_sft.yaml), exporting the policy
                every sft.export_every steps besides the final one
    select      every exported SFT policy greedy on the val split (validation families and recipes, never A-E:
                configs/learning/issue21_select.yaml); the one with the most correct is "the SFT policy" of
                every later stage (selection.json says which)
    eval-sft    the SFT policy on every evaluation set
    filter      the SFT policy's pass@8 on the rl split's tasks (configs/learning/issue21_filter.yaml); writes the
                distribution of correct samples per task and the GRPO task file: the tasks with 1 to 7 of 8 correct
    grpo        GRPO with HRD (alpha 0.1) and GRPO with the uniform reward (beta 0.3), from the SFT policy, on the
                filtered tasks, with the same budget, each arm once per seed (`--seeds`, default 0,1): four runs
    eval-grpo   every GRPO policy on every evaluation set
    report      plots, the comparison table and results.json (jaxrl.evaluation.learning_report), in --report-out

    python -m jaxrl.recipes.learning [--stages data,evalsets,eval-base+sft,select,...] [--seeds 0,1] [--set k=v ...]

The evaluation sets: A (new compositions of trained operators), B (never-trained operators, their math written
out), C (B's operators by name), D (KernelBench level 1 in scope), E (KernelBench level 2, greedy only). A, B and
C are built into `<output root>/evalsets` and every evaluation of them first checks the files against the lock's
digests, so what is evaluated is the set fixed before any training.

The default order puts what the targets rest on first: the untrained model is evaluated greedy while SFT trains
(`+` runs stages side by side), the SFT checkpoint is chosen and evaluated greedy (correct at temperature 0)
before the filter and GRPO, the GRPO runs' greedy evaluations follow, and the sampled ones (pass@k) come last. An
evaluation stage may name one decoding (`eval-sft/greedy`).

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

from jaxrl.data.engine.evalsets import check_files
from jaxrl.data.jsonl import read_objects
from jaxrl.evaluation.stats import by_problem

CONFIGS = Path(__file__).resolve().parents[2] / "configs" / "learning"
DATA_CONFIG = "issue21_data.yaml"
SFT_CONFIG = "issue21_sft.yaml"
ARMS = {"grpo_hrd": "issue21_grpo_hrd.yaml", "grpo_uniform": "issue21_grpo_uniform.yaml"}
RUN_NAMES = {DATA_CONFIG: "data-issue21", SFT_CONFIG: "issue21-sft", ARMS["grpo_hrd"]: "issue21-grpo-hrd",
             ARMS["grpo_uniform"]: "issue21-grpo-uniform"}  # the configs' run.name
SELECT_CONFIG = "issue21_select.yaml"
FILTER_CONFIG = "issue21_filter.yaml"
EVALSETS_DIR = "evalsets"  # A.jsonl, B.jsonl, C.jsonl under the output root
SELECT_DIR = "issue21-sft-select"  # selection.json
FILTER_EVAL = "issue21-filter-eval"  # the filter's evaluation run
FILTER_DIR = "issue21-filter"  # its outputs: the distribution and the GRPO task file
STAGES = ("data", "evalsets", "eval-base", "sft", "select", "eval-sft", "filter", "grpo", "eval-grpo", "report")
# Each evaluation set with its decodings: `greedy` is one sample at temperature 0 (correct at temperature 0),
# `sampled` the config's k samples at temperature 0.7 (pass@k). Level 2 is for the record: greedy only.
GREEDY, SAMPLED = "greedy", "sampled"
DECODING_OVERRIDES = {GREEDY: ("sampling.temperature=0.0", "sampling.num_samples=1", "eval.k=[1]"), SAMPLED: ()}


@dataclasses.dataclass(frozen=True)
class EvalSet:
    """An evaluation set: its eval config, the evalsets file it reads (A, B, C; None: the config's own tasks)
    and its decodings."""

    config: str
    built: str | None = None
    decodings: tuple[str, ...] = (GREEDY, SAMPLED)


# The sandbox's share of the GPU. The JAX caps are upper bounds (an evaluation of SmolLM2 uses about 5 GB of its
# 8 GB): two GRPO runs at once (`Plan.max_training`) cap at 60%, four evaluations at 40%, SFT beside three
# evaluations at 70% (the sandbox is nearly idle then). At 50% the judges ran out of memory on full-size KernelBench
# problems beside four evaluations (docs/learning.md, Results).
SANDBOX_MEMORY_FRACTION = "0.35"
REPORT_K = 4  # the sampled evaluations' samples per task (configs/learning/issue21_eval_abc.yaml), reported as pass@k
EVAL_SETS = {"A": EvalSet("issue21_eval_abc.yaml", "A"), "B": EvalSet("issue21_eval_abc.yaml", "B"),
             "C": EvalSet("issue21_eval_abc.yaml", "C"), "D": EvalSet("issue21_eval_kbl1.yaml"),
             "E": EvalSet("issue21_eval_kbl2.yaml", decodings=(GREEDY,))}


@dataclasses.dataclass(frozen=True)
class Plan:
    """Where things are and what every command is told besides its config."""

    output_root: Path
    overrides: tuple[str, ...] = ()
    base_model: str = "smollm2-135m"  # what SFT starts from and "untrained" means in the evaluation
    eval_sets: tuple[str, ...] = tuple(EVAL_SETS)
    # JAX's cap on the GPU per process, by command (memory is taken as needed, not preallocated, so the
    # processes of a stage and the sandbox share one GPU).
    memory_fractions: tuple[tuple[str, str], ...] = (("data", "0.1"), ("sft", "0.4"), ("grpo", "0.3"),
                                                     ("eval", "0.1"))
    sandbox_backend: str = "cuda"
    sandbox_workers: int = 16
    max_parallel: int = 4  # commands of one step running at once on a GPU (a stage's evaluations, the GRPO runs)
    max_training: int = 2  # of which training (sft, grpo): two GRPO runs and the sandbox fill the GPU's memory
    # The GPUs commands are spread over, as CUDA_VISIBLE_DEVICES names them (each command sees one; the sandbox
    # serves on all of them). Empty: every command sees what the recipe sees (one GPU: all share it).
    gpus: tuple[str, ...] = ()
    seeds: tuple[int, ...] = (0, 1)  # each GRPO arm runs once per seed (grpo.seed and sampling.seed)
    report_out: Path | None = None  # where the report goes (None: <output root>/issue21-report)
    # GRPO trains on the tasks with at least this many correct of the filter's samples and at least one wrong:
    # 1 is issue 21's rule (pass@8 between 1/8 and 7/8); the CPU test keeps 0 (a random model solves nothing).
    min_correct: int = 1

    def run_dir(self, name: str) -> Path:
        return self.output_root / name

    @property
    def data_dir(self) -> Path:
        return self.run_dir(RUN_NAMES[DATA_CONFIG])

    @property
    def evalsets_dir(self) -> Path:
        return self.run_dir(EVALSETS_DIR)

    @property
    def sft_dir(self) -> Path:
        return self.run_dir(RUN_NAMES[SFT_CONFIG])

    @property
    def grpo_runs(self) -> dict[str, tuple[str, int]]:
        """Every GRPO run by its model name (`grpo_hrd-s0`): (arm, seed). Seed by seed, so that the first two
        runs to finish are the two arms of one seed, a comparison on their own."""
        return {f"{arm}-s{seed}": (arm, seed) for seed in self.seeds for arm in ARMS}

    def grpo_dir(self, model: str) -> Path:
        arm, seed = self.grpo_runs[model]
        return self.run_dir(f"{RUN_NAMES[ARMS[arm]]}-s{seed}")

    @property
    def report_dir(self) -> Path:
        return self.report_out or self.run_dir("issue21-report")

    @property
    def selection(self) -> Path:
        return self.run_dir(SELECT_DIR) / "selection.json"

    @property
    def grpo_tasks(self) -> Path:
        return self.run_dir(FILTER_DIR) / "grpo_tasks.jsonl"


@dataclasses.dataclass(frozen=True)
class Command:
    """One process of a stage (`python -m jaxrl.main ...` or another module)."""

    argv: tuple[str, ...]
    kind: str  # data | sft | grpo | eval
    name: str  # the run's folder name, for logs

    @property
    def label(self) -> str:
        return f"{self.kind} {self.name}"


def _command(plan: Plan, command: str, config: str, *extra: str, last: Sequence[str] = ()) -> Command:
    """The command; `extra` before the plan's overrides, `last` after them (it wins)."""
    argv = (sys.executable, "-m", "jaxrl.main", command, "--config", str(CONFIGS / config),
            f"run.output_root={plan.output_root}", *extra, *plan.overrides, *last)
    names = [a.split("=", 1)[1] for a in (*extra, *last) if a.startswith("run.name=")]
    return Command(argv, command, names[-1] if names else RUN_NAMES.get(config, Path(config).stem))


def _env(plan: Plan, kind: str, gpu: str | None = None) -> dict[str, str]:
    env = {**os.environ, "XLA_PYTHON_CLIENT_MEM_FRACTION": dict(plan.memory_fractions)[kind],
           "XLA_PYTHON_CLIENT_PREALLOCATE": "false", "PYTHONUNBUFFERED": "1"}
    if gpu is not None:
        env["CUDA_VISIBLE_DEVICES"] = gpu
    # One compilation cache for every process of the recipe: evaluations of one model compile the same programs.
    env.setdefault("JAX_COMPILATION_CACHE_DIR", str(plan.output_root / "jax-cache"))
    return env


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
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": ",".join(plan.gpus)} if plan.gpus else None
    process = subprocess.Popen(
        [sys.executable, "-m", "sandbox_service", "serve", "--host", "127.0.0.1", "--port", "0",
         "--backend", plan.sandbox_backend, "--workers", str(plan.sandbox_workers), "--queue", "512",
         "--gpu-memory-fraction", SANDBOX_MEMORY_FRACTION, "--ready-file", str(ready)],
        stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, start_new_session=True, env=env,
    )
    deadline = time.monotonic() + 300
    while not ready.exists():
        if process.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError(f"the sandbox server did not start; see {plan.output_root / 'learn-sandbox.log'}")
        time.sleep(0.2)
    address = json.loads(ready.read_text())["address"]
    record.write_text(json.dumps({"pid": process.pid, "address": address}))
    return address


TRAINING = ("sft", "grpo")


def _next_command(pending: list[Command], running: Sequence[tuple[Command, str | None]],
                  plan: Plan) -> tuple[Command, str | None] | None:
    """The first pending command that may start now, and its GPU: on each GPU (or on the one shared device when
    `plan.gpus` is empty) `plan.max_parallel` commands at once, of which at most `plan.max_training` train (an
    evaluation waiting behind a training run that may not start goes first). A command goes to the GPU with the
    fewest commands running, then the fewest training, then the first listed."""
    loads = []  # (commands running, of which training), GPU's place, GPU
    for index, gpu in enumerate(plan.gpus or (None,)):
        here = [c for c, g in running if g == gpu]
        loads.append(((len(here), sum(c.kind in TRAINING for c in here)), index, gpu))
    for command in pending:
        fits = [load for load in loads if load[0][0] < plan.max_parallel
                and (command.kind not in TRAINING or load[0][1] < plan.max_training)]
        if fits:
            return command, min(fits)[2]
    return None


def run_commands(commands: Sequence[Command], plan: Plan) -> list[str]:
    """Run commands in order as `_next_command` lets them start; the labels of those that failed.

    A failure does not stop the others: every command resumes, so what finished is kept."""
    pending = list(commands)
    running: list[tuple[Command, str | None, subprocess.Popen]] = []
    failed = []
    while pending or running:
        while (chosen := _next_command(pending, [(c, g) for c, g, _ in running], plan)) is not None:
            command, gpu = chosen
            pending.remove(command)
            print(f"learning: start {command.label}" + ("" if gpu is None else f" on GPU {gpu}"), flush=True)
            running.append((command, gpu, subprocess.Popen(command.argv, env=_env(plan, command.kind, gpu))))
        time.sleep(0.5)
        for entry in [e for e in running if e[2].poll() is not None]:
            running.remove(entry)
            command, _, process = entry
            print(f"learning: {command.label} exited {process.returncode}", flush=True)
            if process.returncode != 0:
                failed.append(command.label)
    return failed


def eval_run_name(model: str, eval_set: str, decoding: str) -> str:
    return f"issue21-eval-{model}-{eval_set}" + ("" if decoding == SAMPLED else "-greedy")


def _eval_tasks(plan: Plan, eval_set: str) -> tuple[str, ...]:
    """The overrides that point an evaluation at its tasks: A, B and C at their built files, once these are
    checked against the lock (ValueError otherwise); D and E at their configs' own KernelBench problems."""
    built = EVAL_SETS[eval_set].built
    if built is None:
        return ()
    check_files(plan.evalsets_dir, (built,))
    return (f"eval.dataset={plan.evalsets_dir / (built + '.jsonl')}",)


def _evals(plan: Plan, model: str, source: str, decodings: Sequence[str]) -> list[Command]:
    """The evaluations of `model` still to run, greedy ones first (the targets are at temperature 0)."""
    wanted = [(name, d) for d in (GREEDY, SAMPLED) if d in decodings
              for name in plan.eval_sets if d in EVAL_SETS[name].decodings]
    todo = [(name, d) for name, d in wanted if not (plan.run_dir(eval_run_name(model, name, d)) / "metrics.json").exists()]
    if not todo:
        return []
    address = sandbox_address(plan)
    return [_command(plan, "eval", EVAL_SETS[name].config, *_eval_tasks(plan, name), f"model.source={source}",
                     f"run.name={eval_run_name(model, name, d)}", f"sandbox.targets=[{address}]", "--no-progress",
                     last=DECODING_OVERRIDES[d])
            for name, d in todo]


def _models(plan: Plan) -> tuple[str, ...]:
    return ("untrained", "sft", *plan.grpo_runs)


def _model_source(plan: Plan, model: str) -> str:
    """What `model.source` is for one of `_models`: the SFT policy is the selected checkpoint."""
    if model == "untrained":
        return plan.base_model
    return str(sft_policy(plan) if model == "sft" else plan.grpo_dir(model) / "hf")


def parse_stage(stage: str) -> tuple[str, tuple[str, ...]]:
    """A stage's name and decodings; ValueError for a name that is not a stage or a decoding where none goes."""
    name, slash, decoding = stage.partition("/")
    if name not in STAGES:
        raise ValueError(f"unknown stage {stage!r}; stages: {', '.join(STAGES)} (eval stages may end in /{GREEDY} "
                         f"or /{SAMPLED})")
    if slash and (not name.startswith("eval-") or decoding not in DECODING_OVERRIDES):
        raise ValueError(f"bad stage {stage!r}: only eval stages take /{GREEDY} or /{SAMPLED}")
    return name, ((decoding,) if slash else (GREEDY, SAMPLED))


def _evalsets_command(plan: Plan) -> list[Command]:
    """Sets A, B and C built by their module (which checks them against the lock), unless already there and
    matching it."""
    try:
        check_files(plan.evalsets_dir)
        return []
    except ValueError:
        argv = (sys.executable, "-m", "jaxrl.data.engine.evalsets", "--out", str(plan.evalsets_dir), "--check")
        return [Command(argv, "data", EVALSETS_DIR)]


def stage_commands(stage: str, plan: Plan) -> list[Command]:
    """The commands of one stage that still have work to do. An evaluation stage may name one decoding
    (`eval-sft/greedy`); without it, both."""
    name, decodings = parse_stage(stage)
    if name == "data":
        return [_command(plan, "data", DATA_CONFIG)]
    if name == "evalsets":
        return _evalsets_command(plan)
    if name == "sft":
        done = (plan.sft_dir / "hf" / "config.json").exists()
        return [] if done else [_command(plan, "sft", SFT_CONFIG, f"sft.data={plan.data_dir / 'sft.jsonl'}",
                                         f"model.source={plan.base_model}")]
    if name == "select":
        return _select_commands(plan)
    if name in ("eval-base", "eval-sft"):
        model = "untrained" if name == "eval-base" else "sft"
        return _evals(plan, model, _model_source(plan, model), decodings)
    if name == "eval-grpo":
        return [c for model in plan.grpo_runs for c in _evals(plan, model, _model_source(plan, model), decodings)]
    if name == "filter":
        if (plan.run_dir(FILTER_EVAL) / "metrics.json").exists():
            return []
        return [_command(plan, "eval", FILTER_CONFIG, f"eval.dataset={plan.data_dir / 'rl_tasks.jsonl'}",
                         f"model.source={sft_policy(plan)}", f"run.name={FILTER_EVAL}",
                         f"sandbox.targets=[{sandbox_address(plan)}]", "--no-progress")]
    if name == "grpo":
        return _grpo_commands(plan)
    return []  # report: not a command (run_stage makes it)


def _grpo_commands(plan: Plan) -> list[Command]:
    """The GRPO runs not finished yet, each from the SFT policy on the filtered tasks with its arm's config and seed."""
    todo = [model for model in plan.grpo_runs if not (plan.grpo_dir(model) / "hf" / "config.json").exists()]
    if not todo:
        return []
    tasks, sft = _filtered_tasks(plan), sft_policy(plan)
    address = sandbox_address(plan)
    commands = []
    for model in todo:
        arm, seed = plan.grpo_runs[model]
        commands.append(_command(plan, "grpo", ARMS[arm], f"grpo.dataset={tasks}", f"model.source={sft}",
                                 f"model.tokenizer={sft}", f"sandbox.targets=[{address}]",
                                 f"run.name={plan.grpo_dir(model).name}", f"grpo.seed={seed}", f"sampling.seed={seed}"))
    return commands


def sft_candidates(plan: Plan) -> dict[str, Path]:
    """The SFT run's exported policies by folder name, in step order (`hf-step-<N>`), its final `hf` last."""
    exported = [p for p in plan.sft_dir.glob("hf-step-*") if (p / "config.json").exists()]
    final = plan.sft_dir / "hf"
    ordered = sorted(exported, key=lambda p: int(p.name.rsplit("-", 1)[1]))
    return {p.name: p for p in [*ordered, *([final] if (final / "config.json").exists() else [])]}


def _select_run(name: str) -> str:
    return f"issue21-select-{name}"


def _select_commands(plan: Plan) -> list[Command]:
    """The greedy val-split evaluations of the SFT candidates not evaluated yet."""
    candidates = sft_candidates(plan)
    if "hf" not in candidates:
        raise ValueError(f"no SFT policy in {plan.sft_dir / 'hf'}: run the sft stage first")
    todo = [name for name in candidates if not (plan.run_dir(_select_run(name)) / "metrics.json").exists()]
    if not todo:
        return []
    address = sandbox_address(plan)
    return [_command(plan, "eval", SELECT_CONFIG, f"eval.dataset={plan.data_dir / 'rl_tasks.jsonl'}",
                     f"model.source={candidates[name]}", f"run.name={_select_run(name)}",
                     f"sandbox.targets=[{address}]", "--no-progress") for name in todo]


def select_checkpoint(plan: Plan) -> Path:
    """selection.json: each candidate's greedy correct answers on the val split, and the chosen one, the most
    correct; ties go to the later step, so the final policy stays unless validation says otherwise."""
    rows = []
    for name in sft_candidates(plan):
        run = plan.run_dir(_select_run(name))
        samples = run_samples(run)
        counts = correct_per_task(samples)
        rows.append({"policy": name, "correct": sum(c for c, _ in counts.values()), "tasks": len(counts),
                     "infra_errors": sum(s["status"] == "infra_error" for s in samples)})
    chosen = max(reversed(rows), key=lambda r: r["correct"] / max(r["tasks"], 1))["policy"]
    selection = {"criterion": "greedy correct on the val split (configs/learning/issue21_select.yaml); ties: the "
                              "later step", "candidates": rows, "chosen": chosen}
    plan.selection.parent.mkdir(parents=True, exist_ok=True)
    plan.selection.write_text(json.dumps(selection, indent=2) + "\n")
    return plan.sft_dir / chosen


def sft_policy(plan: Plan) -> Path:
    """The selected SFT checkpoint; ValueError until the select stage has chosen one."""
    if not plan.selection.is_file():
        raise ValueError(f"no SFT checkpoint chosen yet ({plan.selection}): run the select stage after sft")
    return plan.sft_dir / json.loads(plan.selection.read_text())["chosen"]


def run_samples(run: Path) -> list[dict]:
    """An evaluation run's samples.jsonl rows (an error naming the file and line when one is not JSON)."""
    return [row for row, _ in read_objects(run / "samples.jsonl")]


def correct_per_task(samples: Sequence[dict]) -> dict[str, tuple[int, int]]:
    """(correct samples, samples) of each task of an evaluation's samples.jsonl rows, in the tasks' order."""
    return {task: (sum(s["status"] == "ok" for s in rows), len(rows)) for task, rows in by_problem(samples).items()}


def filter_tasks(plan: Plan) -> Path:
    """From the filter's evaluation: `pass_at_k.json` (how many tasks had 0..k of their k samples correct, and
    each task's count) and the GRPO task file (the data build's rows of the tasks with `plan.min_correct` to
    k - 1 correct: a group whose samples all agree gives GRPO no advantage). RuntimeError when none is kept."""
    run = plan.run_dir(FILTER_EVAL)
    samples = run_samples(run)
    counts = correct_per_task(samples)
    k = max(total for _, total in counts.values())
    kept = {task for task, (correct, total) in counts.items() if plan.min_correct <= correct < total}
    rows = [line for line in (plan.data_dir / "rl_tasks.jsonl").read_text().splitlines()
            if line.strip() and json.loads(line)["task_id"] in kept]
    out = plan.run_dir(FILTER_DIR)
    out.mkdir(parents=True, exist_ok=True)
    summary = {"samples_per_task": k, "tasks": len(counts),
               "distribution": {str(c): sum(v == c for v, _ in counts.values()) for c in range(k + 1)},
               "kept": len(rows), "kept_correct": [plan.min_correct, k - 1],
               "infra_errors": sum(s["status"] == "infra_error" for s in samples),
               "correct_per_task": {task: correct for task, (correct, _) in counts.items()}}
    (out / "pass_at_k.json").write_text(json.dumps(summary, indent=2) + "\n")
    plan.grpo_tasks.write_text("".join(row + "\n" for row in rows))
    if not rows:
        raise RuntimeError(f"no rl task had {plan.min_correct} to {k - 1} of {k} samples correct: GRPO would have "
                           f"no signal (distribution in {out / 'pass_at_k.json'})")
    return plan.grpo_tasks


def _filtered_tasks(plan: Plan) -> Path:
    """The GRPO task file; ValueError when the filter stage has not written it or kept no task."""
    if not plan.grpo_tasks.is_file() or not plan.grpo_tasks.read_text().strip():
        raise ValueError(f"no GRPO tasks in {plan.grpo_tasks}: run the filter stage first (and see its pass_at_k.json)")
    return plan.grpo_tasks


def step_commands(step: str, plan: Plan) -> list[Command]:
    """The commands of a step (stages joined by `+`), training first: it is the longest and the next steps wait
    for it; evaluations fill the other slots."""
    commands = [c for part in step.split("+") for c in stage_commands(part, plan)]
    return sorted(commands, key=lambda c: c.kind == "eval")


def run_stage(stage: str, plan: Plan) -> None:
    """One step of the recipe: a stage, or stages joined by `+` run side by side (`eval-base+sft`)."""
    failed = run_commands(step_commands(stage, plan), plan)
    parts = stage.split("+")
    if "select" in parts and all((plan.run_dir(_select_run(name)) / "metrics.json").exists()
                                 for name in sft_candidates(plan)):
        select_checkpoint(plan)
    if "filter" in parts and (plan.run_dir(FILTER_EVAL) / "metrics.json").exists():
        filter_tasks(plan)
    if "report" in parts:
        _report(plan)
    if failed:
        raise RuntimeError(f"failed: {failed}")


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
    """The report of whatever has finished, in `plan.report_dir`: plots, comparison.md (with the SFT checkpoint
    chosen, the GRPO task filter and the paired comparisons) and results.json (each GRPO run as a seed of its arm)."""
    from jaxrl.evaluation.learning_report import main as report

    args = ["--sft", str(plan.sft_dir), "--out", str(plan.report_dir), "--k", str(REPORT_K),
            f"--family-set={plan.eval_sets[0]} (temperature 0)"]
    args += [f"--grpo={model}={plan.grpo_dir(model)}" for model in plan.grpo_runs
             if (plan.grpo_dir(model) / "metrics.jsonl").exists()]
    for flag, path in (("--selection", plan.selection), ("--filter", plan.run_dir(FILTER_DIR) / "pass_at_k.json")):
        if path.is_file():
            args.append(f"{flag}={path}")
    for model in _models(plan):
        arm, seed = plan.grpo_runs.get(model, (model, None))
        result = arm if seed is None else f"{arm}/s{seed}"
        for eval_set in plan.eval_sets:
            for decoding in EVAL_SETS[eval_set].decodings:
                run = plan.run_dir(eval_run_name(model, eval_set, decoding))
                if not (run / "metrics.json").exists():
                    continue
                label = eval_set if decoding == SAMPLED else f"{eval_set} (temperature 0)"
                args.append(f"--eval={model}:{label}={run}")
                args.append(f"--result{'' if decoding == GREEDY else '-sampled'}={result}:{eval_set}={run}")
    report(args)


# The untrained model's sampled evaluations (its answers run to the token cap) come last with the other sampled ones:
# beside SFT they would hold the step past its end.
DEFAULT_ORDER = ("data,evalsets,eval-base/greedy+sft,select,eval-sft/greedy,filter,grpo,eval-grpo/greedy,"
                 "eval-base/sampled,eval-sft/sampled,eval-grpo/sampled,report")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--stages", default=DEFAULT_ORDER,
                        help=f"comma-separated steps, each a stage or stages joined by + (side by side), from: "
                             f"{', '.join(STAGES)}; eval stages may end in /greedy or /sampled")
    parser.add_argument("--output-root", type=Path, default=Path("runs"))
    parser.add_argument("--eval-sets", default=",".join(EVAL_SETS), help=f"from: {', '.join(EVAL_SETS)}")
    parser.add_argument("--budget-s", type=float, help="start no step after this many seconds")
    parser.add_argument("--sandbox-backend", default="cuda", choices=("cuda", "interpreter"))
    parser.add_argument("--sandbox-workers", type=int, default=16)
    parser.add_argument("--max-parallel", type=int, default=4, help="commands of one step running at once on a GPU")
    parser.add_argument("--max-training", type=int, default=2, help="of which training commands (sft, grpo)")
    parser.add_argument("--gpus", default="", help="comma-separated GPUs, as CUDA_VISIBLE_DEVICES names them, to "
                                                   "spread the commands over, one GPU each (default: all share "
                                                   "what the recipe sees)")
    parser.add_argument("--seeds", default="0,1", help="the GRPO seeds: each arm runs once per seed")
    parser.add_argument("--report-out", type=Path,
                        help="the report's folder (default <output root>/issue21-report; docs/learning for the record)")
    parser.add_argument("--memory", action="append", default=[], metavar="KIND=FRACTION",
                        help="JAX's GPU cap for one kind of command (data, sft, grpo, eval), e.g. grpo=0.3")
    parser.add_argument("--base-model", default="smollm2-135m", help="the model SFT starts from (and 'untrained')")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="override for every command")
    parser.add_argument("--keep-going", action="store_true",
                        help="go on to the next step when a command fails (unattended runs); exit 1 at the end")
    parser.add_argument("--stop-sandbox", action="store_true", help="stop the shared sandbox server at the end")
    args = parser.parse_args(argv)
    eval_sets = tuple(s for s in args.eval_sets.split(",") if s)
    unknown = [s for s in eval_sets if s not in EVAL_SETS]
    if unknown:
        parser.error(f"unknown evaluation sets {unknown}")
    if args.max_parallel < 1 or args.max_training < 1:
        parser.error("--max-parallel and --max-training must be >= 1")
    gpus = tuple(gpu.strip() for gpu in args.gpus.split(",")) if args.gpus.strip() else ()
    if any(not gpu for gpu in gpus) or len(set(gpus)) != len(gpus):
        parser.error(f"--gpus wants distinct comma-separated GPU names, got {args.gpus!r}")
    try:
        seeds = tuple(int(seed) for seed in args.seeds.split(","))
    except ValueError:
        parser.error(f"--seeds wants comma-separated integers, got {args.seeds!r}")
    memory = dict(Plan.memory_fractions)
    for item in args.memory:
        kind, _, fraction = item.partition("=")
        try:
            ok = kind in memory and 0.0 < float(fraction) <= 1.0
        except ValueError:
            ok = False
        if not ok:
            parser.error(f"--memory wants KIND=FRACTION with KIND in {sorted(memory)} and 0 < FRACTION <= 1, got {item!r}")
        memory[kind] = fraction
    plan = Plan(args.output_root.resolve(), tuple(args.set), args.base_model, eval_sets,
                memory_fractions=tuple(memory.items()), sandbox_backend=args.sandbox_backend,
                sandbox_workers=args.sandbox_workers, max_parallel=args.max_parallel,
                max_training=args.max_training, gpus=gpus, seeds=seeds, report_out=args.report_out)
    steps = [s for s in args.stages.split(",") if s]
    for part in (p for step in steps for p in step.split("+")):
        try:
            parse_stage(part)
        except ValueError as exc:
            parser.error(str(exc))
    started = time.monotonic()
    failures = []
    try:
        for step in steps:
            if args.budget_s is not None and time.monotonic() - started > args.budget_s:
                print(f"learning: budget spent; stopping before {step}", flush=True)
                break
            print(f"learning: step {step} ({time.monotonic() - started:.0f} s in)", flush=True)
            try:
                run_stage(step, plan)
            except (RuntimeError, ValueError, OSError) as exc:
                if not args.keep_going:
                    raise
                print(f"learning: step {step}: {exc}; going on (--keep-going)", flush=True)
                failures.append(step)
    finally:
        if args.stop_sandbox:
            stop_sandbox(plan)
    print(f"learning: done in {time.monotonic() - started:.0f} s" + (f"; failed steps: {failures}" if failures else ""),
          flush=True)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
