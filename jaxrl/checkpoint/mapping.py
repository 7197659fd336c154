"""Weight-name mapping tables: one per family and format, applied by one generic loader.

`HF_RULES[family]` maps a Hugging Face tensor name to an NNX path of `jaxrl.models.Transformer`
with the transform between the torch layout ([out, in] linear weights) and the NNX einsum layout,
in both directions (`to_nnx` for loading, `to_hf` for export). `GGUF_RULES[family]` maps llama.cpp
tensor names to HF names with the transform that undoes llama.cpp's own conversion (for Llama
models it permutes the rows of Q and K into an interleaved-RoPE layout); a GGUF file is therefore
read as a stream of HF tensors and loaded through the HF table.
"""

from __future__ import annotations

import dataclasses
import functools
import re
from collections.abc import Callable

import numpy as np

from jaxrl.models.config import ModelConfig

Transform = Callable[[np.ndarray, ModelConfig], np.ndarray]
NnxPath = tuple[str | int, ...]


def _identity(w: np.ndarray, config: ModelConfig) -> np.ndarray:
    return w


def _transpose(w: np.ndarray, config: ModelConfig) -> np.ndarray:
    return w.T


def _template_regex(template: str) -> re.Pattern[str]:
    return re.compile("^" + re.escape(template).replace(re.escape("{layer}"), r"(?P<layer>\d+)") + "$")


@dataclasses.dataclass(frozen=True)
class Rule:
    """`source` and `target` are name templates; `{layer}` stands for the layer index."""

    source: str
    target: str
    forward: Transform = _identity
    backward: Transform = _identity

    @functools.cached_property
    def _source_re(self) -> re.Pattern[str]:
        return _template_regex(self.source)

    @functools.cached_property
    def _target_re(self) -> re.Pattern[str]:
        return _template_regex(self.target)

    def match_source(self, name: str) -> str | None:
        """The target name for a source name, or None."""
        m = self._source_re.match(name)
        return None if m is None else self.target.format(**m.groupdict())

    def match_target(self, name: str) -> str | None:
        """The source name for a target name, or None."""
        m = self._target_re.match(name)
        return None if m is None else self.source.format(**m.groupdict())


def nnx_path(name: str) -> NnxPath:
    """"layers.3.attn.q_proj.kernel" -> ("layers", 3, "attn", "q_proj", "kernel")."""
    return tuple(int(part) if part.isdigit() else part for part in name.split("."))


def nnx_name(path: NnxPath) -> str:
    return ".".join(str(part) for part in path)


# ---------------------------------------------------------------------- HF <-> NNX


def _q_in(w, c):  # [N*H, D] -> [D, N, H]
    return w.T.reshape(c.hidden_size, c.num_heads, c.head_dim)


def _q_out(w, c):
    return w.reshape(c.hidden_size, c.num_heads * c.head_dim).T


def _kv_in(w, c):  # [K*H, D] -> [D, K, H]
    return w.T.reshape(c.hidden_size, c.num_kv_heads, c.head_dim)


def _kv_out(w, c):
    return w.reshape(c.hidden_size, c.num_kv_heads * c.head_dim).T


def _o_in(w, c):  # [D, N*H] -> [N, H, D]
    return w.T.reshape(c.num_heads, c.head_dim, c.hidden_size)


def _o_out(w, c):
    return w.reshape(c.num_heads * c.head_dim, c.hidden_size).T


_LAYER = "model.layers.{layer}."
_NNX_LAYER = "layers.{layer}."

_COMMON_HF = [
    Rule("model.embed_tokens.weight", "embedder.embedding"),
    Rule("model.norm.weight", "final_norm.scale"),
    Rule("lm_head.weight", "lm_head.kernel", _transpose, _transpose),
    Rule(_LAYER + "input_layernorm.weight", _NNX_LAYER + "attn_norm.scale"),
    Rule(_LAYER + "post_attention_layernorm.weight", _NNX_LAYER + "mlp_norm.scale"),
    Rule(_LAYER + "self_attn.q_proj.weight", _NNX_LAYER + "attn.q_proj.kernel", _q_in, _q_out),
    Rule(_LAYER + "self_attn.k_proj.weight", _NNX_LAYER + "attn.k_proj.kernel", _kv_in, _kv_out),
    Rule(_LAYER + "self_attn.v_proj.weight", _NNX_LAYER + "attn.v_proj.kernel", _kv_in, _kv_out),
    Rule(_LAYER + "self_attn.o_proj.weight", _NNX_LAYER + "attn.o_proj.kernel", _o_in, _o_out),
    Rule(_LAYER + "mlp.gate_proj.weight", _NNX_LAYER + "mlp.gate_proj.kernel", _transpose, _transpose),
    Rule(_LAYER + "mlp.up_proj.weight", _NNX_LAYER + "mlp.up_proj.kernel", _transpose, _transpose),
    Rule(_LAYER + "mlp.down_proj.weight", _NNX_LAYER + "mlp.down_proj.kernel", _transpose, _transpose),
]

HF_RULES: dict[str, list[Rule]] = {
    "llama": _COMMON_HF,
    "qwen3": _COMMON_HF + [
        Rule(_LAYER + "self_attn.q_norm.weight", _NNX_LAYER + "attn.q_norm.scale"),
        Rule(_LAYER + "self_attn.k_norm.weight", _NNX_LAYER + "attn.k_norm.scale"),
    ],
}

# Tensors some checkpoints carry that hold no learned weight.
HF_IGNORED = re.compile(r"^model\.layers\.\d+\.self_attn\.rotary_emb\.inv_freq$")


# ---------------------------------------------------------------------- GGUF -> HF


def _unpermute_rows(w: np.ndarray, heads: int) -> np.ndarray:
    """Inverse of llama.cpp's Q/K row order, which lists each head's rotary pairs (i, i + H/2)
    next to each other: rows (head, half, pair) go back to (head, pair, half)."""
    out_dim = w.shape[0]
    return w.reshape(heads, out_dim // heads // 2, 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def _llama_q(w, c):
    return _unpermute_rows(w, c.num_heads)


def _llama_k(w, c):
    return _unpermute_rows(w, c.num_kv_heads)


_BLK = "blk.{layer}."


def _gguf_rules(q: Transform, k: Transform) -> list[Rule]:
    return [
        Rule("token_embd.weight", "model.embed_tokens.weight"),
        Rule("output_norm.weight", "model.norm.weight"),
        Rule("output.weight", "lm_head.weight"),
        Rule(_BLK + "attn_norm.weight", _LAYER + "input_layernorm.weight"),
        Rule(_BLK + "ffn_norm.weight", _LAYER + "post_attention_layernorm.weight"),
        Rule(_BLK + "attn_q.weight", _LAYER + "self_attn.q_proj.weight", q),
        Rule(_BLK + "attn_k.weight", _LAYER + "self_attn.k_proj.weight", k),
        Rule(_BLK + "attn_v.weight", _LAYER + "self_attn.v_proj.weight"),
        Rule(_BLK + "attn_output.weight", _LAYER + "self_attn.o_proj.weight"),
        Rule(_BLK + "ffn_gate.weight", _LAYER + "mlp.gate_proj.weight"),
        Rule(_BLK + "ffn_up.weight", _LAYER + "mlp.up_proj.weight"),
        Rule(_BLK + "ffn_down.weight", _LAYER + "mlp.down_proj.weight"),
    ]


GGUF_RULES: dict[str, list[Rule]] = {
    "llama": _gguf_rules(_llama_q, _llama_k),
    # llama.cpp converts Qwen3 without permuting Q/K.
    "qwen3": _gguf_rules(_identity, _identity) + [
        Rule(_BLK + "attn_q_norm.weight", _LAYER + "self_attn.q_norm.weight"),
        Rule(_BLK + "attn_k_norm.weight", _LAYER + "self_attn.k_norm.weight"),
    ],
}


def map_source(rules: list[Rule], name: str) -> tuple[str, Rule] | None:
    """(target name, rule) for the first rule matching a source name."""
    for rule in rules:
        target = rule.match_source(name)
        if target is not None:
            return target, rule
    return None


def map_target(rules: list[Rule], name: str) -> tuple[str, Rule] | None:
    """(source name, rule) for the first rule matching a target name."""
    for rule in rules:
        source = rule.match_target(name)
        if source is not None:
            return source, rule
    return None
