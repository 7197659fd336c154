"""The data-engine build with a fake generator and a fake sandbox client: outputs, determinism, drops,
retries, decontamination, splits and the card."""

from __future__ import annotations

import dataclasses
import json
import re
import threading

import pytest
from engine_fakes import FAKE_ENGINE, FAMILIES, FakeClient, read_jsonl, round_robin_generate, run_build

from jaxrl.data.engine.stages import VALIDATE_BATCH, InfraFailure
from sandbox_service.results import EvalResult, Status, ValidationResult, ValidationStatus
from jaxrl.data.sft_data import read_jsonl as read_sft

OUTPUTS = ("sft.jsonl", "rl_tasks.jsonl", "card.md", "summary.json")


def without_timing(summary_path) -> dict:
    summary = json.loads(summary_path.read_text())
    summary.pop("timing")
    return summary


def test_a_build_writes_sft_pairs_rl_tasks_a_card_and_a_summary(tmp_path):
    client = FakeClient()
    result = run_build(tmp_path, client)
    assert all((tmp_path / name).is_file() for name in OUTPUTS)
    sft, rl = read_jsonl(tmp_path / "sft.jsonl"), read_jsonl(tmp_path / "rl_tasks.jsonl")
    assert len(sft) == 20 and len(rl) == 30 and result.summary["targets_met"]

    # The SFT reader takes the file as is (TRL conversational prompt-completion rows).
    examples = read_sft(tmp_path / "sft.jsonl")
    assert len(examples) == 20 and examples[0].messages[-1]["role"] == "user"
    assert examples[0].completion.startswith("<think>\nOne program per block") and "```python\n# ModelNew" in examples[0].completion
    row = sft[0]
    assert {"task_id", "family", "ops", "difficulty", "dtype", "split", "origin", "verdict", "tokens"} <= set(row)
    assert row["origin"] == "template" and row["verdict"]["status"] == "ok"
    assert row["tokens"]["prompt"] > 0 and row["tokens"]["completion"] > 0

    task = rl[0]
    assert task["input_sets"] == [{"name": "wide", "source": task["input_sets"][0]["source"]}]
    assert task["validation"] == {"ref_time_us": None, "peak_memory_mb": 2.0, "backend": "fake", "device": "cpu"}
    assert {"task_id", "family", "ops", "composition", "difficulty", "dtype", "scale", "split", "code"} <= set(task)

    # Each pair was verified as the completion SFT teaches, strict and untimed, with the task's input sets.
    candidate, input_sets, options = client.evaluated[0]
    assert candidate.startswith("<think>") and [s.name for s in input_sets] == ["wide"]
    assert options.time is False and options.policy.value == "strict" and options.candidate_format.value == "completion"
    timing = result.summary["timing"]
    assert set(timing["stages_s"]) >= {"generate", "decontaminate", "validate", "verify", "tokenize", "write"}
    assert timing["pairs_per_minute"] > 0
    shards = [json.loads(p.read_text()) for p in sorted((tmp_path / "shards").glob("*.timing.json"))]
    assert timing["shards_s"] == pytest.approx(sum(t["wall_s"] for t in shards), abs=0.01)
    assert all(t["wall_s"] >= max(t["stage_ends_s"].values()) for t in shards)  # each stage ended in its shard


def test_two_builds_with_the_same_settings_write_the_same_bytes(tmp_path):
    # Concurrency changes the order in which sandbox calls finish, never the outputs.
    run_build(tmp_path / "a", concurrency=1)
    run_build(tmp_path / "b", concurrency=8)
    for name in ("sft.jsonl", "rl_tasks.jsonl", "card.md"):
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes(), name
    assert without_timing(tmp_path / "a" / "summary.json") == without_timing(tmp_path / "b" / "summary.json")
    run_build(tmp_path / "c", seed=1)
    assert (tmp_path / "a" / "rl_tasks.jsonl").read_bytes() != (tmp_path / "c" / "rl_tasks.jsonl").read_bytes()


def test_drops_are_recorded_with_their_reasons(tmp_path):
    result = run_build(tmp_path, sft_pairs=60, rl_tasks=60)
    drops = {(d["stage"], d["reason"]): d["count"] for d in result.summary["counts"]["drops"]}
    assert drops[("validate", "invalid: outputs are constant (degenerate)")] > 0
    assert ("decontaminate", "matches a KernelBench problem (ast-hash)") in drops
    template = result.summary["counts"]["template"]
    failed = template["attempted"] - template["ok"]
    assert failed > 0 and template["failures"] == {"incorrect": failed}
    sft = read_jsonl(tmp_path / "sft.jsonl")
    rl = read_jsonl(tmp_path / "rl_tasks.jsonl")
    assert not any(r["family"] == "broken" for r in rl)  # rejected references are never tasks
    assert not any("BAD_KERNEL" in r["completion"][0]["content"] for r in sft)
    assert any(r["family"] == "softmax" for r in rl) and not any(r["family"] == "softmax" for r in sft)  # no template
    assert len({r["task_id"] for r in rl}) == len(rl) and len({r["code"] for r in rl}) == len(rl)  # no repeats
    card = (tmp_path / "card.md").read_text()
    assert "| validate | invalid: outputs are constant (degenerate) |" in card
    assert f"incorrect {failed} |" in card


def test_pairs_over_max_tokens_are_left_out(tmp_path):
    result = run_build(tmp_path, max_tokens=447)  # the fake's pairs count 446-448 words
    sft = read_jsonl(tmp_path / "sft.jsonl")
    assert sft and all(r["tokens"]["prompt"] + r["tokens"]["completion"] <= 447 for r in sft)
    assert result.stats.too_long > 0


def test_infra_errors_are_retried_and_counted_not_charged_to_the_task(tmp_path):
    result = run_build(tmp_path)
    assert result.summary["timing"]["retries"]["validate"] > 0  # each flaky reference failed once
    assert any(r["family"] == "flaky" for r in read_jsonl(tmp_path / "rl_tasks.jsonl"))
    assert not any(d["reason"].startswith("infra") for d in result.summary["counts"]["drops"])


def test_references_are_validated_in_batches_sharing_a_process(tmp_path):
    client = FakeClient()
    run_build(tmp_path, client, chunk_size=20)
    assert client.batches and max(client.batches) == VALIDATE_BATCH
    assert sum(client.batches) > 3 * len(client.batches)  # a shard's live tasks in a few calls, not one each


def test_an_infra_error_that_persists_stops_the_build_without_outputs(tmp_path):
    client = FakeClient(infra_always="torch.tanh")
    with pytest.raises(InfraFailure, match=r"infra_error for task tanh-.* 4 times .*rerun"):
        run_build(tmp_path, client, infra_retries=3)
    assert not any((tmp_path / name).exists() for name in OUTPUTS)


def test_kernelbench_twins_are_removed_and_reported(tmp_path):
    result = run_build(tmp_path)
    assert not any(r["family"] == "twin" for r in read_jsonl(tmp_path / "rl_tasks.jsonl"))
    counts = result.summary["counts"]
    assert counts["decontaminated"] > 0 and counts["decontam_by_matcher"] == {"ast-hash": counts["decontaminated"]}
    assert result.summary["decontaminated"] is True
    card = (tmp_path / "card.md").read_text()
    assert f"Removed {counts['decontaminated']} generated task(s)" in card
    assert re.search(r"^\| twin-\S+ \| twin \| L1/42 \| ast-hash \|$", card, re.M)


def test_without_kernelbench_the_build_is_marked_not_decontaminated(tmp_path, caplog):
    result = run_build(tmp_path, found=False)
    assert result.summary["decontaminated"] is False and result.summary["kernelbench"]["found"] is False
    card = (tmp_path / "card.md").read_text()
    assert "**NOT DECONTAMINATED.** KernelBench was not found at /nowhere/kernelbench.jsonl" in card
    assert "NOT DECONTAMINATED" in caplog.text
    assert any(r["family"] == "twin" for r in read_jsonl(tmp_path / "rl_tasks.jsonl"))


def test_validation_and_heldout_tasks_never_reach_sft(tmp_path):
    run_build(tmp_path / "default")
    rl = read_jsonl(tmp_path / "default" / "rl_tasks.jsonl")
    assert {r["split"] for r in rl} == {"train", "val", "heldout"}
    assert {r["split"] for r in read_jsonl(tmp_path / "default" / "sft.jsonl")} == {"train"}

    # A family list replaces the engine's choice for its split: relu is held out and gelu (the engine's
    # heldout family) trains; rowsum is validation and tanh (the engine's validation family) trains.
    run_build(tmp_path / "lists", heldout_families=["relu"], val_families=["rowsum"], sft_pairs=40)
    sft = read_jsonl(tmp_path / "lists" / "sft.jsonl")
    rl = read_jsonl(tmp_path / "lists" / "rl_tasks.jsonl")
    assert {r["family"] for r in sft} == {"gelu", "tanh", "flaky"}
    splits = {family: {r["split"] for r in rl if r["family"] == family} for family in ("relu", "rowsum", "gelu", "tanh")}
    assert splits == {"relu": {"heldout"}, "rowsum": {"val"}, "gelu": {"train"}, "tanh": {"train"}}


def test_the_card_counts_every_family_and_split(tmp_path):
    run_build(tmp_path)
    card = (tmp_path / "card.md").read_text()
    rl = read_jsonl(tmp_path / "rl_tasks.jsonl")
    sft = read_jsonl(tmp_path / "sft.jsonl")
    table = card.split("## Per family and split\n\n")[1].split("\n\n")[0].splitlines()[2:]
    rows = {tuple(c.strip() for c in line.strip("|").split("|"))[:2]: line for line in table}
    for family, split in {(r["family"], r["split"]) for r in rl}:
        cells = [c.strip() for c in rows[family, split].strip("|").split("|")]
        assert int(cells[4]) == sum(r["family"] == family and r["split"] == split for r in rl)
        assert int(cells[5]) == sum(r["family"] == family and r["split"] == split for r in sft)
    assert "| train | " in card and "| val | " in card and "| heldout | " in card
    assert "## Token lengths" in card and "seconds" not in card  # no timings in the card


def test_inductor_modules_fill_in_where_templates_are_missing_or_fail(tmp_path):
    result = run_build(tmp_path, FakeClient(with_inductor=True), gpu=True, inductor=True, sft_pairs=60)
    sft = read_jsonl(tmp_path / "sft.jsonl")
    softmax = [r for r in sft if r["family"] == "softmax"]
    assert softmax and all(r["origin"] == "inductor" for r in softmax)
    assert "TorchInductor" in softmax[0]["completion"][0]["content"]
    assert all(r["origin"] == "template" for r in sft if r["family"] != "softmax")
    counts = result.summary["counts"]
    # Tried for every validated train task without a verified template: the softmax ones, and the wrong
    # rowsum templates, where Inductor fails too.
    failed = counts["template"]["failures"]["incorrect"]
    assert failed > 0 and counts["inductor"]["failures"] == {"failed": failed}
    assert counts["inductor"]["attempted"] == counts["no_template"] + failed


class _OddSoftmaxInvalid(FakeClient):
    """Softmax references with an odd size fail validation; Inductor compiles every task it is asked for."""

    def __init__(self):
        super().__init__(with_inductor=True)
        self.compiled: list[str] = []
        self.invalid_evaluated: list[str] = []

    def validate(self, reference, input_sets=(), options=None):
        if "torch.softmax" in reference and _size(reference) % 2:
            self._count()
            return ValidationResult(ValidationStatus.INVALID, "degenerate outputs", "fake", "cpu")
        return super().validate(reference, input_sets, options)

    def inductor(self, reference, options=None):
        with self._lock:
            self.compiled.append(reference)
        return super().inductor(reference, options)

    def evaluate(self, reference, candidate, options=None, *, input_sets=()):
        if "torch.softmax" in reference and _size(reference) % 2:  # as the sandbox answers for a failing reference
            self._count()
            with self._lock:
                self.invalid_evaluated.append(reference)
            return EvalResult(Status.INFRA_ERROR, error="reference failed: degenerate outputs")
        return super().evaluate(reference, candidate, options, input_sets=input_sets)


def test_inductor_starts_beside_validation_but_only_modules_of_validated_tasks_are_verified(tmp_path):
    client = _OddSoftmaxInvalid()
    result = run_build(tmp_path, client, gpu=True, inductor=True, sft_pairs=60)
    assert [r for r in client.compiled if "torch.softmax" in r and _size(r) % 2]  # compiled before validation
    assert client.invalid_evaluated == []  # a reference that fails validation never reaches the judge
    softmax = [r for r in read_jsonl(tmp_path / "sft.jsonl") if r["family"] == "softmax"]
    sizes = [int(re.search(r"torch\.randn\((\d+), 8\)", r["prompt"][-1]["content"]).group(1)) for r in softmax]
    assert softmax and all(r["origin"] == "inductor" for r in softmax) and all(size % 2 == 0 for size in sizes)
    counts = result.summary["counts"]
    assert counts["inductor"]["attempted"] == counts["no_template"] + counts["template"]["failures"]["incorrect"]


class _ModuleVerdictLost(FakeClient):
    """Inductor modules of softmax tasks always come back as infra_error."""

    def __init__(self):
        super().__init__(with_inductor=True)

    def evaluate(self, reference, candidate, options=None, *, input_sets=()):
        result = super().evaluate(reference, candidate, options, input_sets=input_sets)
        if "ModelNew from Inductor" in candidate and "torch.softmax" in reference:
            return EvalResult(Status.INFRA_ERROR, error="worker lost")
        return result


def test_a_module_of_a_validated_task_that_keeps_getting_infra_error_stops_the_build(tmp_path):
    with pytest.raises(InfraFailure, match="verify-inductor"):
        run_build(tmp_path, _ModuleVerdictLost(), gpu=True, inductor=True, sft_pairs=60)


class _SlowBatches(FakeClient):
    """A validation call of several references answers only once an Inductor module has been verified (or
    after 10 s, noted in `waited_out`)."""

    def __init__(self):
        super().__init__(with_inductor=True)
        self.module_verified = threading.Event()
        self.waited_out = False

    def validate_batch(self, items, options=None):
        if len(items) > 1 and not self.module_verified.wait(10):
            self.waited_out = True
        return super().validate_batch(items, options)

    def evaluate(self, reference, candidate, options=None, *, input_sets=()):
        if "ModelNew from Inductor" in candidate:
            self.module_verified.set()
        return super().evaluate(reference, candidate, options, input_sets=input_sets)


def test_modules_are_verified_while_the_shards_other_references_are_still_being_validated(tmp_path):
    client = _SlowBatches()
    run_build(tmp_path, client, gpu=True, inductor=True, sft_pairs=10, rl_tasks=5)
    assert client.module_verified.is_set() and not client.waited_out
    assert 1 in client.batches  # the untemplated tasks were validated one per call


def test_the_next_shard_is_compiled_while_this_one_is_built(tmp_path):
    client = _OddSoftmaxInvalid()
    order: list[str] = []
    validate, compile_ = client.validate, client.inductor
    client.validate = lambda reference, *a, **k: (order.append("validate " + reference), validate(reference, *a, **k))[1]
    client.inductor = lambda reference, *a, **k: (order.append("compile " + reference), compile_(reference, *a, **k))[1]
    run_build(tmp_path, client, gpu=True, inductor=True, sft_pairs=60)
    compiled_early = [r for r in client.compiled if "torch.softmax" in r
                      and order.index("compile " + r) < order.index("validate " + r) - 16]  # a shard of 16 earlier
    assert compiled_early


def _size(reference: str) -> int:
    return int(reference.split("torch.randn(")[1].split(",")[0])


def test_family_names_the_engine_does_not_have_are_refused(tmp_path):
    with pytest.raises(ValueError, match=r"data.heldout_families: unknown families \['conv9'\]"):
        run_build(tmp_path, heldout_families=["conv9"])


def test_rl_tasks_jsonl_is_a_task_source_for_grpo_and_eval(tmp_path):
    from jaxrl.data.task_source import TaskSelection, load_tasks

    run_build(tmp_path)
    rows = read_jsonl(tmp_path / "rl_tasks.jsonl")
    tasks = load_tasks(TaskSelection(str(tmp_path / "rl_tasks.jsonl"), split="val"))
    assert [t.key for t in tasks] == [r["task_id"] for r in rows if r["split"] == "val"]
    assert all(t.input_sets and t.input_sets[0].name == "wide" for t in tasks)


def test_shards_go_on_round_robin_over_every_family(tmp_path):
    # A round-robin generator restarts at its first family on every call: shards smaller than the family
    # list must still reach every family.
    engine = dataclasses.replace(FAKE_ENGINE, generate_tasks=round_robin_generate)
    result = run_build(tmp_path, engine=engine, chunk_size=3, sft_pairs=9, rl_tasks=9, max_tasks=9, found=False)
    assert result.stats.shards == 3
    generated = [row.family for row in result.stats.families for _ in range(row.generated)]
    assert set(generated) == set(FAMILIES)


def test_a_teacher_error_is_counted_as_a_failed_template_with_its_reason(tmp_path):
    def generate(*args, **kwargs):
        return [dataclasses.replace(t, solution=None, teacher_error="ValueError: declared twice")
                if t.family == "relu" else t for t in round_robin_generate(*args, **kwargs)]

    result = run_build(tmp_path, engine=dataclasses.replace(FAKE_ENGINE, generate_tasks=generate))
    counts = result.summary["counts"]
    assert counts["template"]["failures"].get("teacher_error", 0) > 0
    assert not any(r["family"] == "relu" for r in read_jsonl(tmp_path / "sft.jsonl"))
    assert "teacher_error" in (tmp_path / "card.md").read_text()


def test_without_a_progress_bar_each_built_shard_gets_a_line(tmp_path, capsys):
    run_build(tmp_path, chunk_size=8, sft_pairs=10, rl_tasks=10)
    lines = [line for line in capsys.readouterr().err.splitlines() if line.startswith("shard ")]
    assert lines and lines[0].startswith("shard 0: SFT pairs ") and "(0 shards resumed)" in lines[0]
