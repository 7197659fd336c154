"""Model configuration: one typed, hashable dataclass for the Qwen3 and Llama families.

`ModelConfig` is static (hashable) so it can be closed over by `jax.jit`. It is read from a
Hugging Face `config.json` with `ModelConfig.from_hf_config` (both the transformers-4 keys
`rope_theta`/`rope_scaling`/`torch_dtype` and the transformers-5 keys `rope_parameters`/`dtype` are
understood) and written back with `to_hf_config`. Sharding is declared here, per family, as a
`ShardingConfig` of PartitionSpecs over the mesh axes `data`, `fsdp` and `tensor`
(see `jaxrl.sharding`), rather than scattered through the layers.

Presets: `tiny_qwen3()` / `tiny_llama()` for tests, `qwen3_0_6b()` / `qwen3_8b()` / `smollm2_135m()`
for benchmarks with random weights.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any, Literal

import jax.numpy as jnp
from jax.sharding import PartitionSpec as P

Family = Literal["qwen3", "llama"]
RematPolicy = Literal["none", "full", "dots"]
AttentionImpl = Literal["reference", "fast", "auto"]

FAMILIES = ("qwen3", "llama")
REMAT_POLICIES = ("none", "full", "dots")
ATTENTION_IMPLS = ("reference", "fast", "auto")
DTYPES = ("float32", "bfloat16", "float16")
ROPE_TYPES = ("default", "linear", "llama3", "yarn")

# Batch dimension of activations is split over both data-parallel axes.
BATCH = ("data", "fsdp")


@dataclasses.dataclass(frozen=True)
class RopeScaling:
    """RoPE frequency scaling as in transformers' `rope_parameters` (minus the theta).

    Only the position-independent variants are supported: `linear`, `llama3` and `yarn`.
    """

    rope_type: str = "default"
    factor: float = 1.0
    # llama3
    low_freq_factor: float | None = None
    high_freq_factor: float | None = None
    # llama3 and yarn
    original_max_position_embeddings: int | None = None
    # yarn
    beta_fast: float | None = None
    beta_slow: float | None = None
    attention_factor: float | None = None
    mscale: float | None = None
    mscale_all_dim: float | None = None
    truncate: bool = True

    def __post_init__(self):
        if self.rope_type not in ROPE_TYPES:
            raise ValueError(f"unsupported rope_type {self.rope_type!r}; supported: {ROPE_TYPES}")
        if self.factor <= 0:
            raise ValueError(f"rope scaling factor must be positive, got {self.factor}")
        if self.rope_type == "llama3":
            missing = [
                name
                for name in ("low_freq_factor", "high_freq_factor", "original_max_position_embeddings")
                if getattr(self, name) is None
            ]
            if missing:
                raise ValueError(f"llama3 rope scaling needs {missing}")
        if self.rope_type == "yarn" and self.original_max_position_embeddings is None:
            raise ValueError("yarn rope scaling needs original_max_position_embeddings")

    @classmethod
    def from_hf(cls, params: dict[str, Any] | None) -> RopeScaling | None:
        """From a HF `rope_scaling` / `rope_parameters` dict; None for plain RoPE."""
        if not params:
            return None
        params = dict(params)
        rope_type = params.pop("rope_type", params.pop("type", "default"))
        params.pop("rope_theta", None)
        if rope_type == "default":
            return None
        if rope_type == "yarn" and params.get("factor") is None:
            raise ValueError("yarn rope scaling without an explicit factor is not supported")
        if params.get("partial_rotary_factor", 1.0) != 1.0:
            raise ValueError("partial_rotary_factor != 1 is not supported")
        params.pop("partial_rotary_factor", None)
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = set(params) - known
        if unknown:
            raise ValueError(f"unsupported {rope_type} rope scaling keys: {sorted(unknown)}")
        return cls(rope_type=rope_type, **params)

    def to_hf(self) -> dict[str, Any]:
        out: dict[str, Any] = {"rope_type": self.rope_type, "factor": self.factor}
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if f.name not in out and value is not None and value != f.default:
                out[f.name] = value
        return out


@dataclasses.dataclass(frozen=True)
class ShardingConfig:
    """PartitionSpecs for every parameter kind and the main activations.

    Shapes use the NNX layout: D model width, N query heads, K kv heads, H head dim, F MLP width,
    V vocab, B batch, T/S sequence. Axes a mesh lacks, or that do not divide a dimension, are
    dropped when the spec is applied (`jaxrl.sharding.fit_spec`), so one config serves 1..n devices.
    """

    embed_vd: P = P("tensor", "fsdp")
    q_dnh: P = P("fsdp", "tensor", None)
    kv_dkh: P = P("fsdp", "tensor", None)
    o_nhd: P = P("tensor", None, "fsdp")
    qk_norm_h: P = P(None)
    mlp_in_df: P = P("fsdp", "tensor")
    mlp_out_fd: P = P("tensor", "fsdp")
    norm_d: P = P(None)
    lm_head_dv: P = P("fsdp", "tensor")
    act_btd: P = P(BATCH, None, None)
    act_btf: P = P(BATCH, None, "tensor")
    act_btnh: P = P(BATCH, None, "tensor", None)
    logits_btv: P = P(BATCH, None, "tensor")
    cache_bskh: P = P(BATCH, None, "tensor", None)
    cache_bs: P = P(BATCH, None)

    def __post_init__(self):
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if not isinstance(value, P):
                raise TypeError(f"ShardingConfig.{f.name} must be a PartitionSpec, got {value!r}")
            rank = len(f.name.split("_")[-1])
            if len(value) > rank:
                raise ValueError(f"ShardingConfig.{f.name} has rank {rank}, spec {value} is longer")


def default_sharding(family: str) -> ShardingConfig:
    """The per-family default: FSDP over the model width, tensor parallel over heads / MLP / vocab."""
    if family not in FAMILIES:
        raise ValueError(f"unknown family {family!r}")
    # Both families have the same parameter layout, hence the same specs.
    return ShardingConfig()


@dataclasses.dataclass(frozen=True)
class ModelConfig:
    """Architecture and numerics of a decoder-only transformer (Qwen3 or Llama family).

    dtype is the compute dtype, param_dtype the storage dtype of the weights (e.g. fp32 master
    weights with bf16 compute). `qk_norm` (RMSNorm of each query/key head before RoPE) is on for
    Qwen3 and off for Llama. `remat` picks the activation checkpointing of each block during
    training ("dots" keeps the matmul outputs), `attention_impl` the attention kernel
    ("reference": plain XLA einsums; "fast": cuDNN via jax.nn.dot_product_attention;
    "auto": fast when on GPU with a 16-bit dtype and a supported head size).
    """

    family: Family
    vocab_size: int
    hidden_size: int
    num_layers: int
    num_heads: int
    num_kv_heads: int
    head_dim: int
    intermediate_size: int
    rope_theta: float = 10000.0
    rope_scaling: RopeScaling | None = None
    rms_eps: float = 1e-6
    tie_embeddings: bool = False
    max_position_embeddings: int = 32768
    qk_norm: bool | None = None  # None: the family's default
    dtype: str = "float32"
    param_dtype: str = "float32"
    remat: RematPolicy = "none"
    attention_impl: AttentionImpl = "auto"
    sharding: ShardingConfig | None = None  # None: the family's default
    bos_token_id: int | None = None
    eos_token_ids: tuple[int, ...] = ()

    def __post_init__(self):
        if self.family not in FAMILIES:
            raise ValueError(f"family must be one of {FAMILIES}, got {self.family!r}")
        for name in ("vocab_size", "hidden_size", "num_layers", "num_heads", "num_kv_heads", "head_dim",
                     "intermediate_size", "max_position_embeddings"):
            value = getattr(self, name)
            if not isinstance(value, int) or value <= 0:
                raise ValueError(f"{name} must be a positive int, got {value!r}")
        if self.num_heads % self.num_kv_heads:
            raise ValueError(f"num_heads ({self.num_heads}) must be a multiple of num_kv_heads ({self.num_kv_heads})")
        if self.head_dim % 2:
            raise ValueError(f"head_dim must be even for RoPE, got {self.head_dim}")
        if self.rope_theta <= 0 or self.rms_eps <= 0:
            raise ValueError("rope_theta and rms_eps must be positive")
        for name in ("dtype", "param_dtype"):
            if getattr(self, name) not in DTYPES:
                raise ValueError(f"{name} must be one of {DTYPES}, got {getattr(self, name)!r}")
        if self.remat not in REMAT_POLICIES:
            raise ValueError(f"remat must be one of {REMAT_POLICIES}, got {self.remat!r}")
        if self.attention_impl not in ATTENTION_IMPLS:
            raise ValueError(f"attention_impl must be one of {ATTENTION_IMPLS}, got {self.attention_impl!r}")
        if self.rope_scaling is not None and not isinstance(self.rope_scaling, RopeScaling):
            raise TypeError("rope_scaling must be a RopeScaling or None (use RopeScaling.from_hf for dicts)")
        if self.qk_norm is None:
            object.__setattr__(self, "qk_norm", self.family == "qwen3")
        if self.sharding is None:
            object.__setattr__(self, "sharding", default_sharding(self.family))
        object.__setattr__(self, "eos_token_ids", tuple(self.eos_token_ids))

    @property
    def jnp_dtype(self) -> jnp.dtype:
        return jnp.dtype(self.dtype)

    @property
    def jnp_param_dtype(self) -> jnp.dtype:
        return jnp.dtype(self.param_dtype)

    def replace(self, **changes: Any) -> ModelConfig:
        return dataclasses.replace(self, **changes)

    def with_dtype(self, dtype: Any, param_dtype: Any = None) -> ModelConfig:
        """Same architecture, other compute/storage dtypes (accepts strings or jnp dtypes)."""
        dtype = jnp.dtype(dtype).name
        param_dtype = dtype if param_dtype is None else jnp.dtype(param_dtype).name
        return self.replace(dtype=dtype, param_dtype=param_dtype)

    def num_params(self) -> int:
        d, n, k, h, f = self.hidden_size, self.num_heads, self.num_kv_heads, self.head_dim, self.intermediate_size
        per_layer = d * h * (n + 2 * k) + n * h * d + 3 * d * f + 2 * d + (2 * h if self.qk_norm else 0)
        head = 0 if self.tie_embeddings else d * self.vocab_size
        return self.vocab_size * d + self.num_layers * per_layer + d + head

    # ------------------------------------------------------------------ HF config.json

    @classmethod
    def from_hf_config(cls, source: dict[str, Any] | str | Path, **overrides: Any) -> ModelConfig:
        """Reads a HF config (a dict, a config.json path or a checkpoint folder).

        `overrides` replace fields after parsing (e.g. dtype="bfloat16", remat="full").
        """
        hf = _read_hf_dict(source)
        model_type = hf.get("model_type")
        family = {"qwen3": "qwen3", "llama": "llama"}.get(model_type)
        if family is None:
            raise ValueError(f"unsupported model_type {model_type!r}; supported: qwen3, llama")
        _reject_unsupported(hf)
        rope_params = hf.get("rope_parameters") or {}
        rope_theta = float(rope_params.get("rope_theta", hf.get("rope_theta", 10000.0)))
        rope_scaling = RopeScaling.from_hf(hf.get("rope_scaling") or rope_params or None)
        num_heads = int(hf["num_attention_heads"])
        head_dim = hf.get("head_dim") or hf["hidden_size"] // num_heads
        eos = hf.get("eos_token_id")
        eos_ids = () if eos is None else tuple(eos) if isinstance(eos, list) else (int(eos),)
        hf_dtype = hf.get("dtype") or hf.get("torch_dtype") or "float32"
        dtype = hf_dtype if hf_dtype in DTYPES else "float32"
        config = cls(
            family=family,
            vocab_size=int(hf["vocab_size"]),
            hidden_size=int(hf["hidden_size"]),
            num_layers=int(hf["num_hidden_layers"]),
            num_heads=num_heads,
            num_kv_heads=int(hf.get("num_key_value_heads") or num_heads),
            head_dim=int(head_dim),
            intermediate_size=int(hf["intermediate_size"]),
            rope_theta=rope_theta,
            rope_scaling=rope_scaling,
            rms_eps=float(hf.get("rms_norm_eps", 1e-6)),
            tie_embeddings=bool(hf.get("tie_word_embeddings", False)),
            max_position_embeddings=int(hf.get("max_position_embeddings", 32768)),
            dtype=dtype,
            param_dtype=dtype,
            bos_token_id=hf.get("bos_token_id"),
            eos_token_ids=eos_ids,
        )
        return config.replace(**overrides) if overrides else config

    def to_hf_config(self) -> dict[str, Any]:
        """A config.json dict that transformers (4.x and 5.x) loads as the same architecture."""
        hf: dict[str, Any] = {
            "architectures": ["Qwen3ForCausalLM" if self.family == "qwen3" else "LlamaForCausalLM"],
            "model_type": self.family,
            "vocab_size": self.vocab_size,
            "hidden_size": self.hidden_size,
            "num_hidden_layers": self.num_layers,
            "num_attention_heads": self.num_heads,
            "num_key_value_heads": self.num_kv_heads,
            "head_dim": self.head_dim,
            "intermediate_size": self.intermediate_size,
            "hidden_act": "silu",
            "rms_norm_eps": self.rms_eps,
            "rope_theta": self.rope_theta,
            "rope_scaling": None if self.rope_scaling is None else self.rope_scaling.to_hf(),
            "tie_word_embeddings": self.tie_embeddings,
            "max_position_embeddings": self.max_position_embeddings,
            "attention_bias": False,
            "torch_dtype": self.param_dtype,
        }
        if self.bos_token_id is not None:
            hf["bos_token_id"] = self.bos_token_id
        if self.eos_token_ids:
            hf["eos_token_id"] = list(self.eos_token_ids) if len(self.eos_token_ids) > 1 else self.eos_token_ids[0]
        if self.family == "llama":
            hf["mlp_bias"] = False
        else:
            hf["use_sliding_window"] = False
        return hf


def _read_hf_dict(source: dict[str, Any] | str | Path) -> dict[str, Any]:
    if isinstance(source, dict):
        return source
    path = Path(source)
    if path.is_dir():
        path = path / "config.json"
    if not path.is_file():
        raise FileNotFoundError(f"no HF config.json at {path}")
    with open(path) as f:
        return json.load(f)


def _reject_unsupported(hf: dict[str, Any]) -> None:
    """Fails loudly on architecture options this implementation would silently get wrong."""
    if hf.get("hidden_act", "silu") != "silu":
        raise ValueError(f"unsupported hidden_act {hf['hidden_act']!r} (only silu)")
    if hf.get("attention_bias"):
        raise ValueError("attention_bias=True is not supported")
    if hf.get("mlp_bias"):
        raise ValueError("mlp_bias=True is not supported")
    if hf.get("use_sliding_window"):
        raise ValueError("sliding-window attention is not supported")
    layer_types = hf.get("layer_types")
    if layer_types and any(t != "full_attention" for t in layer_types):
        raise ValueError(f"only full_attention layers are supported, got {sorted(set(layer_types))}")
    if hf.get("pretraining_tp", 1) != 1:
        raise ValueError("pretraining_tp != 1 is not supported")


# ---------------------------------------------------------------------- presets


def tiny_qwen3(**overrides: Any) -> ModelConfig:
    """A 2-layer Qwen3 (GQA 4:2, q/k norm, untied head) small enough for CPU tests."""
    config = ModelConfig(
        family="qwen3", vocab_size=128, hidden_size=64, num_layers=2, num_heads=4, num_kv_heads=2,
        head_dim=32, intermediate_size=128, rope_theta=10000.0, rms_eps=1e-6, tie_embeddings=False,
        max_position_embeddings=512,
    )
    return config.replace(**overrides) if overrides else config


def tiny_llama(**overrides: Any) -> ModelConfig:
    """A 2-layer Llama (GQA 4:2, tied embeddings, llama3 rope scaling) for CPU tests."""
    config = ModelConfig(
        family="llama", vocab_size=128, hidden_size=64, num_layers=2, num_heads=4, num_kv_heads=2,
        head_dim=16, intermediate_size=128, rope_theta=500000.0, rms_eps=1e-5, tie_embeddings=True,
        max_position_embeddings=512,
        rope_scaling=RopeScaling(rope_type="llama3", factor=8.0, low_freq_factor=1.0, high_freq_factor=4.0,
                                 original_max_position_embeddings=64),
    )
    return config.replace(**overrides) if overrides else config


def qwen3_0_6b(**overrides: Any) -> ModelConfig:
    """Shapes of Qwen/Qwen3-0.6B (tied embeddings)."""
    config = ModelConfig(
        family="qwen3", vocab_size=151936, hidden_size=1024, num_layers=28, num_heads=16, num_kv_heads=8,
        head_dim=128, intermediate_size=3072, rope_theta=1000000.0, rms_eps=1e-6, tie_embeddings=True,
        max_position_embeddings=40960, dtype="bfloat16", param_dtype="bfloat16",
        bos_token_id=None, eos_token_ids=(151645,),
    )
    return config.replace(**overrides) if overrides else config


def qwen3_8b(**overrides: Any) -> ModelConfig:
    """Shapes of Qwen/Qwen3-8B (untied head), the TritonRL base model."""
    config = ModelConfig(
        family="qwen3", vocab_size=151936, hidden_size=4096, num_layers=36, num_heads=32, num_kv_heads=8,
        head_dim=128, intermediate_size=12288, rope_theta=1000000.0, rms_eps=1e-6, tie_embeddings=False,
        max_position_embeddings=40960, dtype="bfloat16", param_dtype="bfloat16",
        bos_token_id=None, eos_token_ids=(151645,),
    )
    return config.replace(**overrides) if overrides else config


def smollm2_135m(**overrides: Any) -> ModelConfig:
    """Shapes of HuggingFaceTB/SmolLM2-135M-Instruct (the bundled GGUF model)."""
    config = ModelConfig(
        family="llama", vocab_size=49152, hidden_size=576, num_layers=30, num_heads=9, num_kv_heads=3,
        head_dim=64, intermediate_size=1536, rope_theta=100000.0, rms_eps=1e-5, tie_embeddings=True,
        max_position_embeddings=8192, bos_token_id=1, eos_token_ids=(2,),
    )
    return config.replace(**overrides) if overrides else config
