"""The GPU GRPO run's preparation: its SFT rows and the two stages' settings (the run itself is GPU-only)."""

from __future__ import annotations

from pathlib import Path

import pytest

from jaxrl.config.loader import load_config
from sandbox_service.verifier.extraction import extract_completion

from benchmark_scripts import load_benchmark

REPO_ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def bench():
    return load_benchmark("grpo_sandbox_run")


@pytest.fixture(scope="module")
def rows(bench, kernelbench_path):
    return bench.sft_rows(kernelbench_path)


def test_each_kernel_is_paired_with_its_problem_and_plan(bench, rows, kernelbench_path):
    from jaxrl.data.kernelbench import load_problems

    files = bench.kernel_files()
    assert sorted(r["problem_id"] for r in rows) == sorted(files) and len(rows) >= 10
    for row in rows:
        problem = load_problems(kernelbench_path, levels=[1], ids=[row["problem_id"]])[0]
        assert row["python_code"] == problem.code
        assert row["triton_code"] == files[row["problem_id"]].read_text()
        assert row["reasoning"] and not row["reasoning"].startswith("KernelBench")


def test_the_sft_targets_read_back_as_the_kernels(rows):
    """The answer format SFT teaches is the one the sandbox extracts: plan in <think>, the kernel as code."""
    from jaxrl.data.sft_data import kernelbook_examples

    examples = kernelbook_examples(rows)
    for row, example in zip(rows, examples):
        extraction = extract_completion(example.completion)
        assert extraction.code.strip() == row["triton_code"].strip()
        assert row["reasoning"] in example.completion


def test_both_stages_are_valid_configs(bench, tmp_path, kernelbench_path):
    args = bench.build_parser().parse_args(["--out", str(tmp_path), "--dataset", str(kernelbench_path)])
    sft = load_config(REPO_ROOT / "configs" / "tiny_cpu_sft.yaml", bench.sft_overrides(args, tmp_path / "d.jsonl", 14))
    assert (sft.sft.batch_size, sft.sft.epochs, sft.model.source) == (14, args.sft_steps, "random:qwen3_0_6b")
    grpo = load_config(REPO_ROOT / "configs" / "tiny_cpu_grpo.yaml", bench.grpo_overrides(args, [1, 19]))
    assert tuple(grpo.grpo.ids) == (1, 19) and grpo.grpo.timed is True and grpo.sandbox.backend == "cuda"
    assert grpo.model.source == str(tmp_path / "sft" / "hf")
    # The tiny CPU configs they start from must not pin the reference attention path on the GPU.
    assert sft.model.attention_impl == grpo.model.attention_impl == "auto"


def test_summary_table_lists_each_grpo_step(bench):
    table = bench.summary_table(
        [{"step": 1, "train/loss": 9.5}, {"step": 2, "train/loss": 0.01}],
        [{"step": 1, "reward/correct_mean": 0.75, "time/step_s": 12.0}],
    )
    assert "loss 9.500 -> 0.0100" in table
    assert "0.75" in table.splitlines()[-1] and "12.0" in table.splitlines()[-1]
