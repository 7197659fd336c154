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
            is_infra: Callable[[Result], bool], describe: Callable[[Item], str]) -> list[Result]:
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

    def validate(self, client: BuildClient, tasks: Sequence[GeneratedTask],
                 options: ValidateOptions) -> list[ValidationResult]:
        """In batches of VALIDATE_BATCH references per call (one validator process each, not one per task);
        the tasks that got infra_error are then validated alone, with the stage's retries."""
        batches = [tasks[start: start + VALIDATE_BATCH] for start in range(0, len(tasks), VALIDATE_BATCH)]
        batched = self.run("validate", batches,
                           lambda batch: client.validate_batch([(t.code, t.input_sets) for t in batch], options),
                           lambda results: False, lambda batch: f"{len(batch)} tasks")
        results = [result for batch_results in batched for result in batch_results]
        again = [i for i, result in enumerate(results) if status_name(result.status) == INFRA]
        retried = self.run("validate", [tasks[i] for i in again],
                           lambda t: client.validate(t.code, t.input_sets, options),
                           lambda r: status_name(r.status) == INFRA, lambda t: f"task {t.task_id}")
        for i, result in zip(again, retried):
            self.counter.add("validate")
            results[i] = result
        return results

    def verify(self, client: BuildClient, pairs: Sequence[tuple[GeneratedTask, TeacherSolution]],
               options: EvalOptions, stage: str = "verify", accept_infra: bool = False) -> list[EvalResult]:
        """Each pair's completion text (`rows.answer_text`) against its task, on the task's input sets too.
        `accept_infra`: an infra_error is returned like any verdict (not retried; the caller decides)."""

        def call(pair: tuple[GeneratedTask, TeacherSolution]) -> EvalResult:
            task, solution = pair
            return client.evaluate(task.code, answer_text(solution), options, input_sets=task.input_sets)

        return self.run(stage, pairs, call, lambda r: not accept_infra and status_name(r.status) == INFRA,
                        lambda p: f"the {p[1].origin} pair of task {p[0].task_id}")

    def inductor(self, client: BuildClient, tasks: Sequence[GeneratedTask],
                 options: InductorOptions) -> list[InductorResult]:
        return self.run("inductor", tasks, lambda t: client.inductor(t.code, options),
                        lambda r: status_name(r.status) == INFRA, lambda t: f"task {t.task_id}")


def _reason(result: object) -> str:
    return getattr(result, "reason", "") or getattr(result, "error", "") or "no reason given"
