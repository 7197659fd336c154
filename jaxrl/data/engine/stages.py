"""The sandbox stages of a shard: validate references, verify teacher pairs, ask Inductor for modules.

Each stage keeps up to `concurrency` calls in flight and returns results in input order, so what a shard
holds does not depend on which call finished first. A result with status `infra_error` is the sandbox's
fault, not the task's: the call is made again, up to `retries` more times, and counted. If it still
fails the build stops (`InfraFailure`) rather than record a verdict that depends on the sandbox's luck;
finished shards are kept and a rerun resumes. Any exception (an interrupt, a broken client) cancels the
calls not yet started and propagates. That is why the stages make single `validate` / `evaluate` calls
on their own pool rather than use `validate_many` / `evaluate_many`, whose pools finish every submitted
call before an exception gets out.
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_EXCEPTION, ThreadPoolExecutor, wait
from typing import TypeVar

from tqdm import tqdm

from jaxrl.data.engine.rows import answer_text
from jaxrl.data.engine.sandbox_api import BuildClient, status_name
from jaxrl.data.engine.tasks import GeneratedTask, TeacherSolution
from sandbox_service.options import EvalOptions, InductorOptions, ValidateOptions
from sandbox_service.results import EvalResult, InductorResult, ValidationResult

Item = TypeVar("Item")
Result = TypeVar("Result")
INFRA = "infra_error"


class InfraFailure(RuntimeError):
    """The sandbox kept failing on one call; rerunning the build resumes after the last finished shard."""


@dataclasses.dataclass
class Retries:
    """Calls made again after an infra_error, per stage (thread-safe counts)."""

    counts: dict[str, int] = dataclasses.field(default_factory=dict)
    _lock: threading.Lock = dataclasses.field(default_factory=threading.Lock, repr=False)

    def add(self, stage: str) -> None:
        with self._lock:
            self.counts[stage] = self.counts.get(stage, 0) + 1


class Stopped(Exception):
    """The stage's `stop` event was set: work for a shard that will not be built."""


# References per ValidateBatch call: a shard's 128 tasks make 16 calls, about one per sandbox worker of a GPU
# server, and 16 validator processes instead of 128 (on a GPU each costs a CUDA context, made one at a time).
VALIDATE_BATCH = 8


@dataclasses.dataclass(frozen=True)
class StageRunner:
    concurrency: int
    retries: int
    counter: Retries
    progress: bool = True
    stop: threading.Event | None = None  # once set, calls not yet made are not made (Stopped)

    def run(self, stage: str, items: Sequence[Item], call: Callable[[Item], Result],
            is_infra: Callable[[Result], bool], describe: Callable[[Item], str],
            on_done: Callable[[int, Result], None] | None = None) -> list[Result]:
        """`on_done(index, result)`, if given, is called from the worker thread as each item's result is final."""
        if not items:
            return []
        results: list[Result | None] = [None] * len(items)

        def attempt(index: int) -> None:
            for _ in range(self.retries + 1):
                if self.stop is not None and self.stop.is_set():
                    raise Stopped(f"{stage}: stopped")
                result = call(items[index])
                if not is_infra(result):
                    results[index] = result
                    if on_done is not None:
                        on_done(index, result)
                    return
                self.counter.add(stage)
            raise InfraFailure(f"{stage}: the sandbox returned infra_error for {describe(items[index])} "
                               f"{self.retries + 1} times ({_reason(result)}); finished shards are kept, "
                               "rerun the same command to resume")

        pool = ThreadPoolExecutor(max_workers=min(self.concurrency, len(items)), thread_name_prefix=f"data-{stage}")
        bar = tqdm(total=len(items), desc=stage, unit="call", leave=False, disable=not self.progress)
        try:
            pending = {pool.submit(attempt, i) for i in range(len(items))}
            while pending:
                done, pending = wait(pending, return_when=FIRST_EXCEPTION)
                for future in done:
                    future.result()  # re-raises the first failure
                bar.update(len(done))
        except BaseException:
            pool.shutdown(wait=False, cancel_futures=True)
            raise
        finally:
            bar.close()
        pool.shutdown()
        return results  # type: ignore[return-value]

    def validate(self, client: BuildClient, tasks: Sequence[GeneratedTask], options: ValidateOptions,
                 alone: Sequence[int] = (), on_result: Callable[[int, ValidationResult], None] | None = None
                 ) -> list[ValidationResult]:
        """In batches of VALIDATE_BATCH references per call (one validator process each, not one per task),
        but the tasks at the positions in `alone` one per call, first (their results come back in about a
        second, not after a batch's eight); the tasks that got infra_error are then validated alone, with
        the stage's retries. `on_result(position, result)` is called as each task's result is final."""
        singles = set(alone)
        rest = [i for i in range(len(tasks)) if i not in singles]
        groups = [[i] for i in sorted(singles)] + [rest[start: start + VALIDATE_BATCH]
                                                   for start in range(0, len(rest), VALIDATE_BATCH)]

        def report(positions: Sequence[int], position_results: Sequence[ValidationResult]) -> None:
            for i, result in zip(positions, position_results):
                if on_result is not None and status_name(result.status) != INFRA:
                    on_result(i, result)

        batched = self.run("validate", groups,
                           lambda group: client.validate_batch([(tasks[i].code, tasks[i].input_sets) for i in group],
                                                               options),
                           lambda batch_results: False, lambda group: f"{len(group)} tasks",
                           on_done=lambda g, batch_results: report(groups[g], batch_results))
        results: list[ValidationResult | None] = [None] * len(tasks)
        for group, batch_results in zip(groups, batched):
            for i, result in zip(group, batch_results):
                results[i] = result
        again = [i for i, result in enumerate(results) if status_name(result.status) == INFRA]
        retried = self.run("validate", again, lambda i: client.validate(tasks[i].code, tasks[i].input_sets, options),
                           lambda r: status_name(r.status) == INFRA, lambda i: f"task {tasks[i].task_id}",
                           on_done=lambda k, result: report([again[k]], [result]))
        for i, result in zip(again, retried):
            self.counter.add("validate")
            results[i] = result
        return results  # type: ignore[return-value]

    def verify(self, client: BuildClient, pairs: Sequence[tuple[GeneratedTask, TeacherSolution]],
               options: EvalOptions, stage: str = "verify",
               ready: Callable[[GeneratedTask], bool] | None = None) -> list[EvalResult | None]:
        """Each pair's completion text (`rows.answer_text`) against its task, on the task's input sets too.
        `ready(task)`, if given, is asked first (it may wait): a pair whose task is not ready is not sent, and
        its result is None."""

        def call(pair: tuple[GeneratedTask, TeacherSolution]) -> EvalResult | None:
            task, solution = pair
            if ready is not None and not ready(task):
                return None
            return client.evaluate(task.code, answer_text(solution), options, input_sets=task.input_sets)

        return self.run(stage, pairs, call, lambda r: r is not None and status_name(r.status) == INFRA,
                        lambda p: f"the {p[1].origin} pair of task {p[0].task_id}")

    def inductor(self, client: BuildClient, tasks: Sequence[GeneratedTask],
                 options: InductorOptions) -> list[InductorResult]:
        return self.run("inductor", tasks, lambda t: client.inductor(t.code, options),
                        lambda r: status_name(r.status) == INFRA, lambda t: f"task {t.task_id}")


def _reason(result: object) -> str:
    return getattr(result, "reason", "") or getattr(result, "error", "") or "no reason given"
