"""Shared pieces of the GRPO tests: a one-id-per-character tokenizer (no files, no hub), synthetic verdicts,
and a tiny GRPO loop (`make_loop`) with a scorer of the test's choosing."""

from __future__ import annotations

import jax

from jaxrl.config.schema import OptimSection
from jaxrl.models.config import tiny_llama
from jaxrl.models.transformer import init_model
from jaxrl.sampling.api import Completion, SamplingParams
from jaxrl.sampling.sampler import Sampler, SamplerConfig
from jaxrl.training.advantages import AdvantageConfig
from jaxrl.training.grpo import GRPOLoop, GRPOSettings, Task, make_grpo_loss
from jaxrl.training.hrd import RewardModeConfig
from jaxrl.training.losses import LossConfig
from jaxrl.training.optim import make_optimizer
from jaxrl.training.rewards import RewardConfig
from jaxrl.training.trainer import TrainStep, init_train_state

EOS = 2


class ToyTokenizer:
    """One id per character: id = 3 + ord(c) for ASCII 0..124; EOS = 2 (decoded as nothing)."""

    eos_token_id = EOS
    bos_token_id = None

    def __len__(self) -> int:
        return 128

    def __call__(self, text: str, add_special_tokens: bool = False) -> dict[str, list[int]]:
        return {"input_ids": [3 + (ord(c) % 125) for c in text]}

    def decode(self, ids, skip_special_tokens: bool = True) -> str:
        return "".join(chr(i - 3) for i in ids if i >= 3)


LOWER = set(range(ord("a"), ord("z") + 1))


def ok(valid=True):
    return {"status": "ok", "valid": True, "correct": True, "speedup": None}


def wrong():
    return {"status": "incorrect", "valid": True, "correct": False, "speedup": None}


def lower_first(task: Task, completion: Completion):
    """Reward 1 when the completion starts with a lowercase letter."""
    return ok() if completion.text[:1] and ord(completion.text[0]) in LOWER else wrong()


def make_loop(mesh, scorer, *, steps=1, lr=1e-2, group=8, max_new=4, micro_rows=8, tasks=2,
              num_iterations=1, beta=0.0, seed=0, reuse=False, eps=1e-8, temperature=1.0, task_count=None,
              dynamic=False, rounds=3, reward_config=None, guard=None):
    """A tiny GRPO loop: `tasks` groups a step out of `task_count` tasks (default: the same number)."""
    config = tiny_llama(eos_token_ids=(EOS,))
    model = init_model(config, seed=seed, mesh=mesh)
    optimizer, schedule = make_optimizer(OptimSection(learning_rate=lr, decay="constant", max_grad_norm=1.0,
                                                      eps=eps), steps * num_iterations)
    graphdef, state, shardings = init_train_state(model, optimizer, mesh, seed)
    loss_config = LossConfig(beta=beta)
    step_fn = TrainStep(graphdef, make_grpo_loss(loss_config, temperature=temperature), optimizer, mesh, shardings)
    sampler = Sampler(model, ToyTokenizer(), SamplerConfig(max_batch_size=group * tasks, min_length_bucket=16),
                      mesh=mesh)
    task_list = [Task(f"t{i}", f"q{i}:", "ref") for i in range(task_count or tasks)]
    settings = GRPOSettings(tasks_per_step=tasks, micro_batch_rows=micro_rows, total_steps=steps,
                            num_iterations=num_iterations, tasks_per_call=tasks, row_multiple=16,
                            reuse_sampler_logprobs=reuse, dynamic_sampling=dynamic, max_sampling_rounds=rounds)
    ref = jax.tree.map(lambda x: x.copy(), state.params) if beta > 0 else None
    loop = GRPOLoop(
        settings=settings, step_fn=step_fn, generator=sampler, scorer=scorer, tasks=task_list,
        sampling=SamplingParams(temperature=temperature, max_new_tokens=max_new, num_samples=group, seed=seed),
        loss_config=loss_config, advantage_config=AdvantageConfig("grpo"), reward_mode=RewardModeConfig("hrd"),
        reward_config=reward_config or RewardConfig(timing_available=False), schedule=schedule, ref_params=ref,
        progress=False, **({"speedup_guard": guard} if guard is not None else {}),
    )
    return loop, state
