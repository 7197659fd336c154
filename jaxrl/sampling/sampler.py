"""The KV-cache sampler: prompts (rendered text) in, completions with per-token logprobs out.

    sampler = Sampler(model, tokenizer, SamplerConfig(max_batch_size=64), mesh=mesh)
    completions = sampler.generate(prompts, SamplingParams(temperature=0.7, num_samples=8))

How a call runs: prompts are tokenised with `encode` (no chat template: callers render it), each
prompt repeated `num_samples` times, rows sorted by length and cut into batches of at most
`max_batch_size`; each batch is left-padded to a length bucket, its row count to a batch bucket, and
the cache sized to a bucket of prompt bucket + max_new_tokens (`jaxrl.sampling.buckets`), so prefill
and decode compile once per bucket. Decoding runs on the device until every row is done; with stop
strings it pauses every `stop_check_interval` steps so the host can end rows whose text reached one.

Contract of each `Completion` (also what GRPO relies on):
- token_ids: the new tokens only. A stop token (the tokenizer's / model's EOS or
  `params.stop_token_ids`) that ended the row is included, so the policy is trained to emit it.
- logprobs: per token, log softmax(logits / T) of the drawn token (before top-k / top-p), see
  `jaxrl.sampling.logits`; greedy reports the T = 1 logprob.
- text: `tokenizer.decode(token_ids, skip_special_tokens=True)`, so a special EOS is not in it.
- stop strings: see `jaxrl.sampling.stops` (tokens kept up to the one completing the stop string,
  text cut right after it).
- finish_reason: "stop" for a stop token or stop string, "length" when max_new_tokens ran out.
- seeds: row (prompt i, sample j) draws with key fold_in(fold_in(key(seed), i), j) and fold_in of
  the step, so its tokens do not depend on the batch it lands in or on the other prompts.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

import jax
import numpy as np
from jax.sharding import Mesh

from jaxrl.config.schema import SamplingSection, check_bounds, default_of
from jaxrl.models.transformer import Transformer
from jaxrl.sampling import buckets, stops
from jaxrl.sampling.api import Completion, SamplingParams
from jaxrl.sampling.engine import DecodeArgs, DecodeEngine, DecodeState, host_values
from jaxrl.sampling.logits import mode_for


@dataclasses.dataclass(frozen=True)
class SamplerConfig:
    """max_batch_size: rows (prompts x samples) decoded together; max_prompt_tokens: longer prompts are
    refused; min_length_bucket / length_bucket_step: see `buckets.length_bucket`; stop_check_interval:
    decode steps between host checks for stop strings; add_special_tokens: let the tokenizer add its
    BOS etc. to each prompt (off: prompts are rendered text that already holds what the template wants);
    attention_impl: override the model's attention path while sampling (None: the model's)."""

    max_batch_size: int = default_of(SamplingSection, "batch_size")
    max_prompt_tokens: int = default_of(SamplingSection, "max_prompt_tokens")
    min_length_bucket: int = 16
    length_bucket_step: int = 512
    stop_check_interval: int = 64
    add_special_tokens: bool = False
    attention_impl: str | None = None

    def __post_init__(self):
        check_bounds(self, SamplingSection, {"max_batch_size": "batch_size", "max_prompt_tokens": "max_prompt_tokens"})
        for name in ("min_length_bucket", "length_bucket_step", "stop_check_interval"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")
        if self.attention_impl not in (None, "reference", "fast", "auto"):
            raise ValueError(f"attention_impl must be None, reference, fast or auto, got {self.attention_impl!r}")

    @classmethod
    def from_section(cls, sampling: Any, **changes: Any) -> SamplerConfig:
        """From the config's `sampling` section (batch_size, max_prompt_tokens)."""
        return cls(max_batch_size=sampling.batch_size, max_prompt_tokens=sampling.max_prompt_tokens, **changes)


def params_from_section(sampling: Any, **changes: Any) -> SamplingParams:
    """SamplingParams from the config's `sampling` section."""
    values = dict(temperature=sampling.temperature, top_p=sampling.top_p, top_k=sampling.top_k,
                  max_new_tokens=sampling.max_new_tokens, num_samples=sampling.num_samples,
                  stop_strings=tuple(sampling.stop), seed=sampling.seed)
    return SamplingParams(**{**values, **changes})


class Sampler:
    """A `TextGenerator` backed by `DecodeEngine`. eos_token_ids (None: the model config's EOS ids
    plus the tokenizer's) always end a row; `params.stop_token_ids` add to them per call."""

    def __init__(
        self,
        model: Transformer,
        tokenizer: Any,
        config: SamplerConfig | None = None,
        *,
        mesh: Mesh | None = None,
        eos_token_ids: Sequence[int] | None = None,
    ):
        self.config = config or SamplerConfig()
        self.tokenizer = tokenizer
        self.mesh = mesh
        self.engine = DecodeEngine(model, mesh, attention_impl=self.config.attention_impl)
        self.model_config = model.config
        if eos_token_ids is None:
            eos = set(model.config.eos_token_ids)
            if getattr(tokenizer, "eos_token_id", None) is not None:
                eos.add(int(tokenizer.eos_token_id))
            eos_token_ids = sorted(eos)
        self.eos_token_ids = tuple(int(i) for i in eos_token_ids)

    def update_model(self, model: Transformer) -> None:
        """Sample from new weights (e.g. after an optimizer step) without recompiling."""
        self.engine.update(model)

    def encode(self, prompt: str) -> list[int]:
        """The prompt's token ids exactly as the sampler feeds them (trainers must tokenise the same way)."""
        return list(self.tokenizer(prompt, add_special_tokens=self.config.add_special_tokens)["input_ids"])

    def decode(self, token_ids: Sequence[int]) -> str:
        return self.tokenizer.decode(list(token_ids), skip_special_tokens=True)

    def generate(self, prompts: Sequence[str], params: SamplingParams) -> list[list[Completion]]:
        if isinstance(prompts, str):
            raise TypeError("generate takes a sequence of prompts, not a single string")
        return self.generate_from_ids([self.encode(p) for p in prompts], params)

    def generate_from_ids(self, prompt_ids: Sequence[Sequence[int]], params: SamplingParams) -> list[list[Completion]]:
        """`generate` for prompts that are already token ids."""
        self._check_prompts(prompt_ids, params)
        rows = [(i, j) for i in range(len(prompt_ids)) for j in range(params.num_samples)]
        rows.sort(key=lambda row: -len(prompt_ids[row[0]]))  # similar lengths share a batch
        stop_ids = set(self.eos_token_ids) | set(params.stop_token_ids)
        args = DecodeArgs.of(params.temperature, params.top_k, params.top_p, stop_ids, params.max_new_tokens)
        mode = mode_for(params.temperature, params.top_k, params.top_p)
        out: list[list[Completion | None]] = [[None] * params.num_samples for _ in prompt_ids]
        size = self.config.max_batch_size
        for start in range(0, len(rows), size):
            batch = rows[start:start + size]
            for (i, j), completion in zip(batch, self._run_batch(batch, prompt_ids, params, args, mode, stop_ids)):
                out[i][j] = completion
        return out  # type: ignore[return-value]

    # ------------------------------------------------------------------ internals

    def _check_prompts(self, prompt_ids: Sequence[Sequence[int]], params: SamplingParams) -> None:
        limit = self.model_config.max_position_embeddings
        for i, ids in enumerate(prompt_ids):
            if not ids:
                raise ValueError(f"prompt {i} is empty after tokenisation")
            if len(ids) > self.config.max_prompt_tokens:
                raise ValueError(f"prompt {i} has {len(ids)} tokens, more than max_prompt_tokens="
                                 f"{self.config.max_prompt_tokens}")
            if len(ids) + params.max_new_tokens > limit:
                raise ValueError(f"prompt {i} ({len(ids)} tokens) + max_new_tokens={params.max_new_tokens} exceeds "
                                 f"the model's max_position_embeddings={limit}")

    def _batch_multiple(self) -> int:
        if self.mesh is None:
            return 1
        shape = dict(self.mesh.shape)
        return shape.get("data", 1) * shape.get("fsdp", 1)

    def _run_batch(self, batch, prompt_ids, params: SamplingParams, args: DecodeArgs, mode: str,
                   stop_ids: set[int]) -> list[Completion]:
        c = self.config
        prompt_len = buckets.length_bucket(max(len(prompt_ids[i]) for i, _ in batch), c.min_length_bucket,
                                           c.length_bucket_step)
        num_rows = buckets.batch_bucket(len(batch), c.max_batch_size, self._batch_multiple())
        cache_len = buckets.length_bucket(prompt_len + params.max_new_tokens - 1, c.min_length_bucket,
                                          c.length_bucket_step)
        tokens = np.zeros((num_rows, prompt_len), np.int32)
        segments = np.zeros((num_rows, prompt_len), np.int32)
        active = np.zeros((num_rows,), bool)
        prompt_index = np.zeros((num_rows,), np.int32)
        sample_index = np.zeros((num_rows,), np.int32)
        for r, (i, j) in enumerate(batch):
            ids = prompt_ids[i]
            tokens[r, prompt_len - len(ids):] = ids
            segments[r, prompt_len - len(ids):] = 1
            active[r], prompt_index[r], sample_index[r] = True, i, j
        keys = _row_keys(params.seed, prompt_index, sample_index)
        state = self.engine.prefill(tokens, segments, active, keys, args, mode=mode, cache_len=cache_len)
        state = self._decode_to_end(state, args, mode, params)
        out_tokens, out_logprobs, lengths = host_values(state.tokens, state.logprobs, state.lengths)
        completions = []
        for r in range(len(batch)):
            ids = [int(t) for t in out_tokens[r, : lengths[r]]]
            logprobs = [float(x) for x in out_logprobs[r, : lengths[r]]]
            completions.append(self._completion(ids, logprobs, params, stop_ids))
        return completions

    def _decode_to_end(self, state: DecodeState, args: DecodeArgs, mode: str, params: SamplingParams) -> DecodeState:
        limit = params.max_new_tokens
        if not params.stop_strings:
            return self.engine.decode(state, limit, args, mode=mode)
        checked = np.zeros(state.done.shape, np.int64)
        step = 1
        while True:
            tokens, lengths, done = host_values(state.tokens, state.lengths, state.done)
            reached = np.zeros(done.shape, bool)
            for r in np.flatnonzero(~done):
                ids = tokens[r, : lengths[r]].tolist()
                if stops.stop_seen_recently(ids, int(checked[r]), self.decode, params.stop_strings):
                    reached[r] = True
                checked[r] = lengths[r]
            if reached.any():
                state = self.engine.mark_done(state, reached)
            if step >= limit or (done | reached).all():
                return state
            step = min(step + self.config.stop_check_interval, limit)
            state = self.engine.decode(state, step, args, mode=mode)

    def _completion(self, ids: list[int], logprobs: list[float], params: SamplingParams,
                    stop_ids: set[int]) -> Completion:
        cut = stops.truncate_at_stop(ids, self.decode, params.stop_strings)
        if cut is not None:
            kept, text = cut
            return Completion(text=text, token_ids=tuple(ids[:kept]), logprobs=tuple(logprobs[:kept]),
                              finish_reason="stop")
        finish = "stop" if ids and ids[-1] in stop_ids else "length"
        return Completion(text=self.decode(ids), token_ids=tuple(ids), logprobs=tuple(logprobs), finish_reason=finish)


def _row_keys(seed: int, prompt_index: np.ndarray, sample_index: np.ndarray) -> jax.Array:
    base = jax.random.key(seed)
    return jax.vmap(lambda i, j: jax.random.fold_in(jax.random.fold_in(base, i), j))(prompt_index, sample_index)
