"""The data engine's build: generated tasks -> decontaminated, validated, verified, split data files.

Per shard (`shards.py`): generate `chunk_size` tasks -> drop KernelBench twins (`kernelbench_corpus`)
and repeats of earlier tasks -> assign splits -> validate every reference in the sandbox -> verify the
teacher pair of every validated train task (correctness only, strict policy, on the task's input sets
too) -> with `inductor`, ask TorchInductor (in the sandbox) for a module where the template is missing or
failed and verify it the same way -> count the tokens of each verified pair -> write the shard's
outcomes. Shards are built in order until the verified pairs within `max_tokens` and the validated tasks
reach the targets (or the generation budget is spent). With an rl-split target (`rl_split_tasks`) that
those shards leave short, shards of the rl stream follow (tasks drawn from the rl split's recipes only:
about 1% of what the main stream draws is rl-split; `shards.py`, `selection.py`) until it is met. The
outputs are then the first `sft_pairs` pairs and `rl_tasks` tasks in task order over the main shards, plus
the rl-split tasks the rl-split target adds (`selection.py`): `sft.jsonl`, `rl_tasks.jsonl`, `card.md` and
`summary.json` (the only file with timings), written together and atomically.

Nothing in the outputs depends on timing or on the order in which sandbox calls finish, so a build that
was interrupted and rerun writes the same bytes as one that was not. Two separate builds differ only in
the validation measurements of rl_tasks.jsonl (peak memory, and the reference time on a GPU), which vary
from run to run as measurements do.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import logging
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

from tqdm import tqdm

from jaxrl.config.schema import Config, DataSection
from jaxrl.data.engine.api import Engine, GenerateTasks, SplitFn, check_families
from jaxrl.data.engine.card import CardHeader, render_card, terminal_summary
from jaxrl.data.engine.kernelbench_corpus import Corpus, Decontamination
from jaxrl.data.engine.outcomes import (
    DECONTAMINATE, DUPLICATE, INDUCTOR, TEMPLATE, VALIDATE, Drop, PairAttempt, TaskOutcome,
)
from jaxrl.data.engine.rows import answer_text, inductor_solution, pair_tokens, prompt_messages, rl_row, sft_row
from jaxrl.data.engine.sandbox_api import BuildClient, status_name
from jaxrl.data.engine.selection import MAIN, RL, RL_SPLIT, Selection
from jaxrl.data.engine.shards import ShardStore, shard_families, shard_seed
from jaxrl.data.engine.stages import InfraFailure, Retries, StageRunner
from jaxrl.data.engine.stats import BuildStats, compute_stats
from jaxrl.data.engine.tasks import GeneratedTask, TeacherSolution
from jaxrl.data.engine.tokens import TokenCounter
from jaxrl.data.engine.writing import commit, json_text, jsonl_text
from sandbox_service.options import CandidateFormat, EvalOptions, InductorOptions, Policy, ValidateOptions
from sandbox_service.results import EvalResult

log = logging.getLogger(__name__)

FORMAT_VERSION = 2  # 2: teacher strategies, plans with the math, expression spellings, the rl split
# Shards whose untemplated tasks Inductor compiles while an earlier one is built. A capture takes about 20 s on
# an H100 (a fresh process importing Inductor) and a shard 11-16 s, so one shard of lead can leave a shard
# waiting for its compilations (on the H100 two measured the same as one: benchmarks/RESULTS.md).
INDUCTOR_AHEAD_SHARDS = 2
# CPython 3.11's ast module is not thread-safe (python/cpython#106905); generating and screening tasks parse
# Python, and the look-ahead does both beside the shard being built.
_PARSE_LOCK = threading.Lock()
OUTPUTS = ("sft.jsonl", "rl_tasks.jsonl", "card.md", "summary.json")
_REASON_CHARS = 300


@dataclasses.dataclass(frozen=True)
class BuildSettings:
    """The `data` section plus what the build takes from `sandbox`; gpu: the sandbox runs CUDA (it times
    references), as opposed to the CPU interpreter."""

    data: DataSection
    trials: int = 5
    timeout_s: float = 180.0
    concurrency: int = 8
    gpu: bool = False

    @classmethod
    def from_config(cls, config: Config, gpu: bool) -> BuildSettings:
        s = config.sandbox
        return cls(config.data, s.trials, s.timeout_s, s.max_concurrency, gpu)

    @property
    def max_shards(self) -> int:
        """The main stream's shards at most."""
        budget = self.data.max_tasks or 4 * max(self.data.sft_pairs, self.data.rl_tasks)
        return max(1, -(-budget // self.data.chunk_size))

    def max_rl_shards(self, main_shards: int) -> int:
        """The rl stream's shards at most, after `main_shards`: what data.max_tasks leaves (it bounds both
        streams), else 4 x the rl-split target (each task drawn is rl-split; some fail validation)."""
        d = self.data
        budget = d.max_tasks - main_shards * d.chunk_size if d.max_tasks else 4 * d.rl_split_tasks
        return max(0, -(-budget // d.chunk_size))

    @property
    def use_inductor(self) -> bool:
        return self.data.inductor

    def inductor_options(self) -> InductorOptions:
        return InductorOptions(timeout_s=max(self.timeout_s, 300.0))

    def validate_options(self) -> ValidateOptions:
        """References are timed on a GPU when a time floor applies (timing takes the GPU alone: a build of small
        `cpu`-scale tasks on a GPU has no floor and skips it)."""
        timed = self.gpu and self.data.min_ref_time_us > 0
        return ValidateOptions(seeds=self.data.validate_seeds, time=timed,
                               min_ref_time_us=self.data.min_ref_time_us, timeout_s=self.timeout_s)

    def verify_options(self) -> EvalOptions:
        return EvalOptions(trials=self.trials, time=False, timeout_s=self.timeout_s, policy=Policy.STRICT,
                           candidate_format=CandidateFormat.COMPLETION)

    def family_order(self, engine: Engine) -> list[str]:
        """The families shards draw from, in round-robin order: data.families, else all of the engine's."""
        return list(self.data.families) if self.data.families is not None else engine.family_names()

    def fingerprint(self, engine: Engine, corpus: Corpus, tokenizer: str) -> dict[str, Any]:
        """What decides a shard's content. The targets, the budget, max_tokens and the sandbox's
        concurrency and timeouts do not: changing them reuses the shards already built."""
        d = self.data
        return {
            "format": FORMAT_VERSION,
            "generator": engine.generator_name,
            "seed": d.seed,
            "scale": d.scale,
            "families": self.family_order(engine),
            "heldout_families": d.heldout_families,
            "val_families": d.val_families,
            "chunk_size": d.chunk_size,
            "validate_seeds": d.validate_seeds,
            "min_ref_time_us": d.min_ref_time_us,
            "gpu": self.gpu,
            "inductor": self.use_inductor,
            "trials": self.trials,
            "tokenizer": tokenizer,
            "kernelbench": corpus.digest,
        }


@dataclasses.dataclass(frozen=True)
class BuildResult:
    run_dir: Path
    stats: BuildStats
    summary: dict[str, Any]
    report: str  # the terminal summary


def build(settings: BuildSettings, run_dir: Path, client: BuildClient, engine: Engine, tokens: TokenCounter,
          corpus: Corpus, progress: bool = True) -> BuildResult:
    """Build (or resume building) the data set in `run_dir`; see the module docstring."""
    d = settings.data
    split_of = resolve_splits(engine, d)
    started = time.monotonic()
    fingerprint = settings.fingerprint(engine, corpus, tokens.name)
    decontamination = Decontamination(corpus, engine)
    streams = [(MAIN, engine.generate_tasks, settings.max_shards, lambda s: s.main_met())]
    if d.rl_split_tasks:
        streams.append((RL, _split_generator(engine, d, RL_SPLIT), None, lambda s: s.rl_split_met()))
    selection = Selection(d)
    timings: list[dict[str, Any]] = []
    resumed = 0
    bar = tqdm(total=d.sft_pairs or d.rl_tasks or d.rl_split_tasks,
               desc="sft pairs" if d.sft_pairs else "rl tasks" if d.rl_tasks else "rl-split tasks", unit="pair",
               disable=not progress)
    try:
        for stream, generate, max_shards, met in streams:
            store = ShardStore(run_dir, fingerprint, stream)
            store.open()
            if max_shards is None:  # the rl stream: what the main one left of the budget
                max_shards = settings.max_rl_shards(len(timings))
            shard_builder = _ShardBuilder(settings, client, engine, tokens, decontamination, split_of, progress,
                                          generate, stream)
            try:
                for index in range(max_shards):
                    if met(selection):
                        break
                    reused = store.done(index)
                    if reused:
                        outcomes = [TaskOutcome.from_dict(row) for row in store.read(index)]
                        timing = store.timing(index)
                        resumed += 1
                    else:
                        last = min(index + INDUCTOR_AHEAD_SHARDS, max_shards - 1) if stream == MAIN else index
                        ahead = [later for later in range(index + 1, last + 1) if not store.done(later)]
                        outcomes, timing = shard_builder.build(index, *selection.seen(stream), ahead)
                        store.write(index, [o.to_dict() for o in outcomes], timing)
                    selection.add(outcomes, stream)
                    timings.append(timing)
                    _report(bar, selection, d, f"{stream}-{index}" if stream else index,
                            not progress and not reused, time.monotonic() - started, resumed)
            finally:
                shard_builder.close()
    finally:
        bar.close()
    return _write_outputs(settings, run_dir, engine, tokens, corpus, selection, timings, resumed,
                          time.monotonic() - started)


def _report(bar: tqdm, selection: Selection, d: DataSection, shard: int | str, line: bool, elapsed_s: float,
            resumed: int) -> None:
    """The progress bar's count and postfix, and with `line` (no bar, a shard built) a line on stderr, for logs."""
    bar.n = min(selection.sft_count if d.sft_pairs else selection.rl_count if d.rl_tasks
                else selection.rl_split_count, bar.total)
    split = {"rl_split": f"{selection.rl_split_count}/{d.rl_split_tasks}"} if d.rl_split_tasks else {}
    bar.set_postfix(shard=shard, rl=f"{selection.rl_count}/{d.rl_tasks}", **split, refresh=True)
    if not line:
        return
    split_text = f", rl-split tasks {selection.rl_split_count}/{d.rl_split_tasks}" if d.rl_split_tasks else ""
    print(f"shard {shard}: SFT pairs {selection.sft_count}/{d.sft_pairs}, RL tasks {selection.rl_count}/"
          f"{d.rl_tasks}{split_text}, {elapsed_s:.0f} s ({resumed} shards resumed)", file=sys.stderr, flush=True)


def _split_generator(engine: Engine, data: DataSection, split: str) -> GenerateTasks:
    """The engine's generator of one split's tasks; ValueError where the engine has none."""
    if engine.split_generator is None:
        raise ValueError(f"data.rl_split_tasks: the generator {engine.generator_name} cannot draw one split's "
                         "tasks (its Engine has no split_generator)")
    return engine.split_generator(data.heldout_families, data.val_families, split)


def resolve_splits(engine: Engine, data: DataSection) -> SplitFn:
    """The split of each task under the data section's family lists (the engine's defaults where null);
    ValueError for a family the engine does not have, or lists its split plan refuses."""
    for key in ("families", "heldout_families", "val_families"):
        check_families(engine, getattr(data, key), f"data.{key}")
    return engine.splitter(data.heldout_families, data.val_families)


class _ShardBuilder:
    """Builds one shard's outcomes (see the module docstring) of one stream: `generate` draws its tasks."""

    def __init__(self, settings: BuildSettings, client: BuildClient, engine: Engine, tokens: TokenCounter,
                 decontamination: Decontamination, split_of: SplitFn, progress: bool,
                 generate: GenerateTasks, stream: str = MAIN):
        self.settings = settings
        self.client = client
        self.generate = generate
        self.stream = stream
        self.tokens = tokens
        self.decontamination = decontamination
        self.split_of = split_of
        self.family_order = settings.family_order(engine)
        self.progress = progress
        # Later shards' Inductor results ({reference: result}), compiled while this one is built
        self._ahead: dict[int, Future] = {}
        self._ahead_pool = ThreadPoolExecutor(max_workers=INDUCTOR_AHEAD_SHARDS,
                                              thread_name_prefix="data-inductor-ahead")
        self._stop_ahead = threading.Event()

    def close(self) -> None:
        """Drop work started for a shard that will not be built (calls in flight finish on their own)."""
        self._stop_ahead.set()
        self._ahead_pool.shutdown(wait=False, cancel_futures=True)

    def _tasks(self, index: int) -> list[GeneratedTask]:
        d = self.settings.data
        families = shard_families(self.family_order, index, d.chunk_size)
        with _PARSE_LOCK:
            tasks = self.generate(shard_seed(d.seed, index, self.stream), d.chunk_size, d.scale, families)
        if len(tasks) != d.chunk_size:
            raise RuntimeError(f"the generator made {len(tasks)} tasks for shard {index}, asked for {d.chunk_size}")
        if self.stream == RL:  # the rl split's stream: a task of another split would break the splits' rules
            strays = sorted({split for split in map(self.split_of, tasks) if split != RL_SPLIT})
            if strays:
                raise RuntimeError(f"the {self.stream} stream's generator drew tasks of the {strays} split(s)")
        return tasks

    def build(self, index: int, seen_ids: set[str], seen_codes: set[str], ahead_shards: Sequence[int] = ()
              ) -> tuple[list[TaskOutcome], dict[str, Any]]:
        """One shard's outcomes and timings. Inductor starts meanwhile on the new untemplated train tasks of
        `ahead_shards` (later shards not built yet; tasks are a pure function of the seed and the shard index)
        where it has not already; only its results are shared, so the outcomes are the same as without.
        (Validating the next shard ahead as well was measured on an H100 and dropped: the sandbox is already
        busy then, and verification slowed as much as validation gained.)"""
        d = self.settings.data
        timer = _Timer()
        retries = Retries()
        stages = StageRunner(self.settings.concurrency, d.infra_retries, retries, self.progress)
        with timer("generate"):
            tasks = self._tasks(index)
        base = index * d.chunk_size
        splits = [self.split_of(task) for task in tasks]
        shas = [code_sha(task.code) for task in tasks]
        with timer("decontaminate"):
            seen_next = (set(seen_ids), set(seen_codes))  # after the screen: what the next shard must not repeat
            drops, hits = self._screen(tasks, shas, *seen_next)
        live = [i for i in range(len(tasks)) if i not in drops]
        ahead = self._ahead.pop(index, None)
        if self.settings.use_inductor:
            self._start_ahead(index, ahead_shards, seen_next)
        # Train tasks without a template go to Inductor at once, beside validation (a compilation takes tens of
        # seconds on a GPU, a shard's validations a few). They are validated first, one per call, and each
        # module is verified as soon as it is compiled and its task has validated, beside the rest of the
        # validations and the templates' verification: only references that validated reach the sandbox's
        # long-lived judges. Failed templates go to Inductor after their verification.
        without = [i for i in live if splits[i] == "train" and tasks[i].solution is None] \
            if self.settings.use_inductor else []
        gate = _ValidationGate()
        with ThreadPoolExecutor(max_workers=1, thread_name_prefix="data-inductor") as side:
            compiled = side.submit(lambda: self._verify_compiled(
                stages, tasks, self._compiled(stages, tasks, without, ahead, timer), timer, gate.validated))
            try:
                with timer("validate"):
                    first = set(without)
                    results = stages.validate(
                        self.client, [tasks[i] for i in live], self.settings.validate_options(),
                        alone=[k for k, i in enumerate(live) if i in first],
                        on_result=lambda k, result: gate.record(tasks[live[k]].task_id,
                                                                status_name(result.status) == "ok"))
            finally:
                gate.close()  # tasks without a result (an exception above) count as not validated
            validations = {}
            for i, result in zip(live, results):
                if status_name(result.status) == "ok":
                    validations[i] = result
                else:
                    drops[i] = Drop(VALIDATE, _short(f"{status_name(result.status)}: {result.reason or 'no reason given'}"))
            train = [i for i in validations if splits[i] == "train"]
            attempts: dict[int, list[PairAttempt]] = {i: [] for i in train}
            verified: dict[int, tuple[TeacherSolution, EvalResult]] = {}
            templated = [i for i in train if tasks[i].solution is not None]
            for i in train:
                if tasks[i].teacher_error:
                    attempts[i].append(PairAttempt(TEMPLATE, "teacher_error", _short(tasks[i].teacher_error)))
            with timer("verify"):
                self._verify(stages, tasks, templated, {i: tasks[i].solution for i in templated}, attempts,
                             verified, "verify")
            _keep(compiled.result(), attempts, verified)
        if self.settings.use_inductor:
            late = self._compile(stages, tasks, [i for i in templated if i not in verified], timer)
            _keep(self._verify_compiled(stages, tasks, late, timer), attempts, verified)
        rows: dict[int, dict[str, Any]] = {}
        with timer("tokenize"):
            for i, (solution, verdict) in sorted(verified.items()):
                counts = self.tokens.count(prompt_messages(tasks[i]), answer_text(solution))
                rows[i] = sft_row(tasks[i], splits[i], solution, verdict, counts)
        outcomes = [
            TaskOutcome(
                index=base + i, task_id=task.task_id, family=task.family, split=splits[i], code_sha=shas[i],
                drop=drops.get(i), decontam=hits.get(i),
                rl_row=rl_row(task, splits[i], validations[i]) if i in validations else None,
                attempts=tuple(attempts.get(i, ())), sft_row=rows.get(i),
            )
            for i, task in enumerate(tasks)
        ]
        return outcomes, {"shard": index, "tasks": len(tasks), "stages_s": timer.seconds, "retries": retries.counts,
                          "wall_s": timer.elapsed(), "stage_ends_s": timer.ends}

    def _screen(self, tasks: list[GeneratedTask], shas: list[str], seen_ids: set[str], seen_codes: set[str]
                ) -> tuple[dict[int, Drop], dict[int, dict[str, Any]]]:
        """(drops, KernelBench hits) by position: KernelBench twins, then repeats of an earlier task's id or
        reference (earlier shards' tasks are in seen_*, which this shard's tasks are added to)."""
        drops: dict[int, Drop] = {}
        hits: dict[int, dict[str, Any]] = {}
        for i, task in enumerate(tasks):
            with _PARSE_LOCK:
                hit = self.decontamination.check(task.code)
            if hit is not None:
                hits[i] = hit
                drops[i] = Drop(DECONTAMINATE, f"matches a KernelBench problem ({hit['matcher']})")
            elif task.task_id in seen_ids:
                drops[i] = Drop(DUPLICATE, "task_id of an earlier task")
            elif shas[i] in seen_codes:
                drops[i] = Drop(DUPLICATE, "reference code of an earlier task")
            else:
                seen_ids.add(task.task_id)
                seen_codes.add(shas[i])
        return drops, hits

    def _verify(self, stages: StageRunner, tasks: list[GeneratedTask], indices: list[int],
                solutions: dict[int, TeacherSolution], attempts: dict[int, list[PairAttempt]],
                verified: dict[int, tuple[TeacherSolution, EvalResult]], stage: str,
                ready: Callable[[GeneratedTask], bool] | None = None) -> None:
        """Verify the pairs (those whose task is `ready`, if given) and record each attempt and verified pair."""
        pairs = [(tasks[i], solutions[i]) for i in indices]
        for i, result in zip(indices, stages.verify(self.client, pairs, self.settings.verify_options(), stage, ready)):
            if result is None:  # not sent: its task did not validate
                continue
            status = status_name(result.status)
            attempts[i].append(PairAttempt(solutions[i].origin, status, "" if status == "ok" else _eval_reason(result)))
            if status == "ok":
                verified[i] = (solutions[i], result)

    def _start_ahead(self, index: int, shards: Sequence[int], seen: tuple[set[str], set[str]]) -> None:
        """Start compiling those of `shards` (later than `index`) not started yet; `seen` holds what the shards
        up to `index` screened in."""
        for later in shards:
            if later not in self._ahead:
                self._ahead[later] = self._ahead_pool.submit(self._compile_ahead, index, later,
                                                             (set(seen[0]), set(seen[1])))

    def _compile_ahead(self, index: int, later: int, seen: tuple[set[str], set[str]]) -> dict[str, Any]:
        """Inductor's result for each untemplated train task of shard `later` that its screen will keep (no
        KernelBench twin, no repeat of an earlier task), given `seen` after shard `index`: {reference: result}."""
        for shard in range(index + 1, later + 1):  # the screens of the shards between add to `seen`
            tasks = self._tasks(shard)
            drops, _ = self._screen(tasks, [code_sha(task.code) for task in tasks], *seen)
        chosen = [task for i, task in enumerate(tasks)
                  if i not in drops and task.solution is None and self.split_of(task) == "train"]
        stages = StageRunner(self.settings.concurrency, self.settings.data.infra_retries, Retries(), progress=False,
                             stop=self._stop_ahead)
        return {chosen[i].code: result for i, result in self._compile(stages, chosen, list(range(len(chosen))),
                                                                      _Timer()).items()}

    def _compiled(self, stages: StageRunner, tasks: list[GeneratedTask], indices: list[int], ahead: Future | None,
                  timer: _Timer) -> dict[int, Any]:
        """Inductor's results for these tasks: from the compilation started during an earlier shard where
        there was one, the rest compiled now."""
        known: dict[str, Any] = {}
        if ahead is not None:
            with timer("inductor"):
                try:
                    known = ahead.result()
                except InfraFailure as exc:  # compiled again below, with retries; a lasting fault shows up there
                    log.warning("compiling the shard's references ahead failed (%s); compiling them now", exc)
        results = {i: known[tasks[i].code] for i in indices if tasks[i].code in known}
        results.update(self._compile(stages, tasks, [i for i in indices if i not in results], timer))
        return results

    def _compile(self, stages: StageRunner, tasks: list[GeneratedTask], indices: list[int],
                 timer: _Timer) -> dict[int, Any]:
        """Inductor's result for each of these tasks."""
        if not indices:
            return {}
        with timer("inductor"):
            return dict(zip(indices, stages.inductor(self.client, [tasks[i] for i in indices],
                                                     self.settings.inductor_options())))

    def _verify_compiled(self, stages: StageRunner, tasks: list[GeneratedTask], results: dict[int, Any],
                         timer: _Timer, ready: Callable[[GeneratedTask], bool] | None = None) -> _InductorPairs:
        """Verify Inductor's modules (each once `ready(task)`, if given, says its task validated; the others are
        not verified). Which tasks keep what this found is left to `_keep`."""
        found = _InductorPairs({i: [] for i in results}, {})
        modules = {}
        for i, result in sorted(results.items()):
            if status_name(result.status) == "ok" and result.source.strip():
                modules[i] = inductor_solution(tasks[i], result)
            else:
                reason = result.reason or ("an empty module" if status_name(result.status) == "ok" else "")
                status = "failed" if status_name(result.status) == "ok" else status_name(result.status)
                found.attempts[i].append(PairAttempt(INDUCTOR, status, _short(reason)))
        if modules:
            with timer("inductor"):
                self._verify(stages, tasks, sorted(modules), modules, found.attempts, found.verified,
                             "verify-inductor", ready)
        return found


@dataclasses.dataclass(frozen=True)
class _InductorPairs:
    """What Inductor's modules gave some tasks: attempts and verified pairs by task."""

    attempts: dict[int, list[PairAttempt]]
    verified: dict[int, tuple[TeacherSolution, EvalResult]]


def _keep(found: _InductorPairs, attempts: dict[int, list[PairAttempt]],
          verified: dict[int, tuple[TeacherSolution, EvalResult]]) -> None:
    """Add what Inductor's modules gave the tasks in `attempts` (the validated train tasks)."""
    for i in sorted(found.attempts):
        if i in attempts:
            attempts[i].extend(found.attempts[i])
            if i in found.verified:
                verified[i] = found.verified[i]


class _ValidationGate:
    """Whether each task validated, for threads that wait for it: `validated(task)` blocks until the task's
    result is recorded or the gate is closed (then: not validated)."""

    def __init__(self):
        self._ok: dict[str, bool] = {}
        self._cond = threading.Condition()
        self._closed = False

    def record(self, task_id: str, ok: bool) -> None:
        with self._cond:
            self._ok[task_id] = ok
            self._cond.notify_all()

    def close(self) -> None:
        with self._cond:
            self._closed = True
            self._cond.notify_all()

    def validated(self, task: GeneratedTask) -> bool:
        with self._cond:
            self._cond.wait_for(lambda: task.task_id in self._ok or self._closed)
            return self._ok.get(task.task_id, False)


def _write_outputs(settings: BuildSettings, run_dir: Path, engine: Engine, tokens: TokenCounter, corpus: Corpus,
                   selection: Selection, timings: list[dict[str, Any]], resumed: int,
                   wall_s: float) -> BuildResult:
    d = settings.data
    sft_rows, rl_rows = selection.sft_rows(), selection.rl_rows()
    stats = compute_stats(selection.all_outcomes(), selection.shards, d.max_tokens, sft_rows, rl_rows)
    header = CardHeader(
        generator=engine.generator_name, seed=d.seed, scale=d.scale, families=d.families,
        split_rule=_split_text(d), targets=(d.sft_pairs, d.rl_tasks), rl_split_target=d.rl_split_tasks,
        max_tokens=d.max_tokens,
        tokenizer=tokens.name, verification=_verification_text(settings), decontamination=_corpus_text(corpus),
        decontaminated=corpus.found,
        sandbox=sorted({f"{r['validation']['backend']}/{r['validation']['device']}" for r in rl_rows}),
    )
    timing = _timing(timings, resumed, wall_s, len(sft_rows))
    targets = {"sft_pairs": d.sft_pairs, "rl_tasks": d.rl_tasks}
    if d.rl_split_tasks:
        targets["rl_split_tasks"] = d.rl_split_tasks
    summary = {
        "decontaminated": corpus.found,
        "kernelbench": {"where": corpus.where, "found": corpus.found, "problems": len(corpus.problems),
                        "levels": corpus.levels},
        "targets": targets,
        "targets_met": selection.main_met() and selection.rl_split_met(),
        "settings": settings.fingerprint(engine, corpus, tokens.name),
        "counts": stats.to_dict(),
        "reference_time_us": _quantiles([r["validation"]["ref_time_us"] for r in rl_rows]),
        "timing": timing,
    }
    t0 = time.perf_counter()
    commit({
        run_dir / "sft.jsonl": jsonl_text(sft_rows),
        run_dir / "rl_tasks.jsonl": jsonl_text(rl_rows),
        run_dir / "card.md": render_card(header, stats),
    })
    timing["stages_s"]["write"] = round(time.perf_counter() - t0, 3)  # summary["timing"] is this dict
    commit({run_dir / "summary.json": json_text(summary)})
    if not corpus.found:
        log.warning("NOT DECONTAMINATED: %s", _corpus_text(corpus))
    if not summary["targets_met"]:
        split = f", {selection.rl_split_count}/{d.rl_split_tasks} rl-split tasks" if d.rl_split_tasks else ""
        log.warning("targets not met after %d shards (data.max_tasks budget): %d/%d SFT pairs, %d/%d RL tasks%s; "
                    "raise data.max_tasks and rerun to extend the build", selection.shards, len(sft_rows),
                    d.sft_pairs, min(selection.rl_count, d.rl_tasks), d.rl_tasks, split)
    return BuildResult(run_dir, stats, summary, terminal_summary(stats, timing, header))


def _timing(timings: list[dict[str, Any]], resumed: int, wall_s: float, pairs: int) -> dict[str, Any]:
    """Seconds per stage and infra retries per stage summed over the shards used (resumed ones included), and
    SFT pairs per minute of the shards' wall time (stages overlap, so their sum is more than that; a shard
    written before shards recorded their wall time counts the sum of its stages)."""
    stages: dict[str, float] = {}
    retries: dict[str, int] = {}
    shards_s = 0.0
    for timing in timings:
        for stage, seconds in timing.get("stages_s", {}).items():
            stages[stage] = stages.get(stage, 0.0) + seconds
        for stage, count in timing.get("retries", {}).items():
            retries[stage] = retries.get(stage, 0) + count
        shards_s += timing.get("wall_s") or sum(timing.get("stages_s", {}).values())
    return {
        "stages_s": {k: round(v, 3) for k, v in stages.items()},
        "retries": retries,
        "shards_resumed": resumed,
        "shards_s": round(shards_s, 3),
        "this_run_s": round(wall_s, 3),
        "pairs_per_minute": round(pairs / (shards_s / 60), 2) if shards_s else None,
    }


def code_sha(code: str) -> str:
    return hashlib.sha256(code.encode()).hexdigest()[:16]


def _split_text(data: DataSection) -> str:
    parts = []
    for name, families in (("heldout", data.heldout_families), ("val", data.val_families)):
        parts.append(f"{name}: " + ("the engine's default families" if families is None else ", ".join(families)))
    return "; ".join(parts)


def _verification_text(settings: BuildSettings) -> str:
    inductor = "on" if settings.use_inductor else "off"
    return (f"the SFT completion text through the sandbox, strict policy, correctness only, {settings.trials} "
            f"trial(s), on the task's own inputs and each input set; Inductor modules: {inductor}")


def _corpus_text(corpus: Corpus) -> str:
    if not corpus.found:
        return f"KernelBench was not found at {corpus.where}, so nothing was checked against it."
    levels = ", ".join(map(str, corpus.levels))
    return f"checked against all {len(corpus.problems)} KernelBench problems (levels {levels})"


def _eval_reason(result: EvalResult) -> str:
    if result.violations:
        v = result.violations[0]
        return _short(f"{v.layer}/{v.rule}: {v.message}")
    return _short(result.error or "no reason given")


def _short(text: str) -> str:
    first = text.strip().splitlines()[0] if text.strip() else ""
    return first[:_REASON_CHARS]


def _quantiles(values: list[float | None]) -> dict[str, float] | None:
    timed = sorted(v for v in values if v is not None)
    if not timed:
        return None
    return {"min": timed[0], "median": timed[len(timed) // 2], "max": timed[-1]}


class _Timer:
    """Seconds per stage; stages that overlap (inductor with validate and verify) each count their own wall
    time. `ends`: when each stage last finished, in seconds from the timer's start (what a shard waited for
    last)."""

    def __init__(self):
        self.started = time.perf_counter()
        self.seconds: dict[str, float] = {}
        self.ends: dict[str, float] = {}
        self._lock = threading.Lock()

    @contextlib.contextmanager
    def __call__(self, stage: str) -> Iterator[None]:
        t0 = time.perf_counter()
        try:
            yield
        finally:
            t1 = time.perf_counter()
            with self._lock:
                self.seconds[stage] = self.seconds.get(stage, 0.0) + t1 - t0
                self.ends[stage] = round(max(self.ends.get(stage, 0.0), t1 - self.started), 3)

    def elapsed(self) -> float:
        return round(time.perf_counter() - self.started, 3)
