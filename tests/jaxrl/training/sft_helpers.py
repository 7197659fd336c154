"""Shared pieces of the SFT tests: a character-level tokenizer, tiny examples, a tiny trainer setup."""

from __future__ import annotations

from jaxrl.config.schema import OptimSection
from jaxrl.data.sft_data import SFTExample
from jaxrl.models import init_model, tiny_llama
from jaxrl.training.optim import make_optimizer
from jaxrl.training.sft import BatchOrder, DataPosition, SFTData, SFTLoop, make_sft_loss
from jaxrl.training.trainer import TrainStep, init_train_state

PAD, BOS, EOS = 0, 1, 2


class CharTokenizer:
    """One id per character (3..127, fits the tiny models' 128-token vocabulary); EOS = 2.

    Its chat template writes `<role>content` per message, then `<assistant>` as the generation prompt.
    """

    eos_token_id = EOS
    chat_template = "<role>content"

    def encode(self, text: str, add_special_tokens: bool = False) -> list[int]:
        assert not add_special_tokens
        return [3 + ord(c) % 125 for c in text]

    def apply_chat_template(self, messages, tokenize=False, add_generation_prompt=True, **kwargs):
        assert not tokenize and not kwargs
        text = "".join(f"<{m['role']}>{m['content']}" for m in messages)
        return text + ("<assistant>" if add_generation_prompt else "")


def arithmetic_examples(n: int) -> list[SFTExample]:
    """n short chat examples `a+b=` -> `c` with varied lengths."""
    out = []
    for i in range(n):
        a, b = 7 * i + 3, 11 * i * i + 5
        messages = ({"role": "user", "content": f"{a}+{b}="},)
        out.append(SFTExample(f"{a + b} because {a} plus {b}", messages=messages, source=f"ex{i}"))
    return out


SEQ_LEN = 64
EXAMPLES = arithmetic_examples(8)


class Recorder:
    """A MetricsLogger stand-in that keeps what it is given; raises after `kill_after` steps."""

    def __init__(self, kill_after: int | None = None):
        self.records: list[tuple[int, dict]] = []
        self.kill_after = kill_after

    def log(self, step, metrics):
        self.records.append((step, dict(metrics)))
        if self.kill_after is not None and step >= self.kill_after and "train/loss" in metrics:
            raise KeyboardInterrupt(f"killed after step {step}")

    def losses(self) -> dict[int, float]:
        return {step: m["train/loss"] for step, m in self.records if "train/loss" in m}


def setup(mesh, *, config=None, total_steps=6, micro_batch_rows=2, batch_size=4, lr=3e-3, eps=1e-8, init_seed=0):
    """(loop, state, position) for the tiny arithmetic task; the data order is always that of seed 0."""
    config = config or tiny_llama()
    spec = OptimSection(learning_rate=lr, warmup_ratio=0.1, weight_decay=0.01, eps=eps)
    optimizer, schedule = make_optimizer(spec, total_steps)
    graphdef, state, shardings = init_train_state(init_model(config, seed=init_seed, mesh=mesh), optimizer, mesh, 0)
    loop = SFTLoop(
        step_fn=TrainStep(graphdef, make_sft_loss(), optimizer, mesh, shardings),
        data=SFTData(EXAMPLES, CharTokenizer(), SEQ_LEN),
        order=BatchOrder(len(EXAMPLES), batch_size, seed=0),
        micro_batch_rows=micro_batch_rows,
        total_steps=total_steps,
        schedule=schedule,
        logger=Recorder(),
        progress=False,
    )
    return loop, state, DataPosition()
