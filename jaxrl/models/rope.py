"""Rotary position embeddings in the HF (half-split, `rotate_half`) layout.

Inverse frequencies follow transformers' `ROPE_INIT_FUNCTIONS` for the `default`, `linear`,
`llama3` and `yarn` types, computed in float32 as transformers does so positions far into a
sequence get the same angles. Positions are explicit per token, so left-padded rows and packed
sequences get the right rotation.
"""

from __future__ import annotations

import math

import jax.numpy as jnp
import numpy as np

from jaxrl.models.config import ModelConfig


def inv_frequencies(config: ModelConfig) -> tuple[np.ndarray, float]:
    """(inv_freq [head_dim // 2] float32, attention_factor applied to cos and sin)."""
    dim = config.head_dim
    base = np.float32(config.rope_theta)
    exponents = np.arange(0, dim, 2, dtype=np.int64).astype(np.float32) / np.float32(dim)
    inv_freq = (np.float32(1.0) / base**exponents).astype(np.float32)
    scaling = config.rope_scaling
    if scaling is None or scaling.rope_type == "default":
        return inv_freq, 1.0
    if scaling.rope_type == "linear":
        return (inv_freq / np.float32(scaling.factor)).astype(np.float32), 1.0
    if scaling.rope_type == "llama3":
        return _llama3(inv_freq, scaling), 1.0
    if scaling.rope_type == "yarn":
        return _yarn(dim, float(config.rope_theta), scaling)
    raise ValueError(f"unsupported rope_type {scaling.rope_type!r}")


def _llama3(inv_freq: np.ndarray, s) -> np.ndarray:
    old_len = float(s.original_max_position_embeddings)
    low_wavelen = old_len / s.low_freq_factor
    high_wavelen = old_len / s.high_freq_factor
    wavelen = np.float32(2 * math.pi) / inv_freq
    scaled = np.where(wavelen > low_wavelen, inv_freq / np.float32(s.factor), inv_freq).astype(np.float32)
    smooth = ((old_len / wavelen - s.low_freq_factor) / (s.high_freq_factor - s.low_freq_factor)).astype(np.float32)
    smoothed = (1 - smooth) * scaled / np.float32(s.factor) + smooth * scaled
    medium = ~(wavelen < high_wavelen) & ~(wavelen > low_wavelen)
    return np.where(medium, smoothed, scaled).astype(np.float32)


def _yarn(dim: int, base: float, s) -> tuple[np.ndarray, float]:
    factor = s.factor

    def mscale(scale: float, m: float = 1.0) -> float:
        return 1.0 if scale <= 1 else 0.1 * m * math.log(scale) + 1.0

    if s.attention_factor is not None:
        attention_factor = s.attention_factor
    elif s.mscale and s.mscale_all_dim:
        attention_factor = mscale(factor, s.mscale) / mscale(factor, s.mscale_all_dim)
    else:
        attention_factor = mscale(factor)
    beta_fast = s.beta_fast or 32
    beta_slow = s.beta_slow or 1
    original = s.original_max_position_embeddings

    def correction_dim(rotations: float) -> float:
        return (dim * math.log(original / (rotations * 2 * math.pi))) / (2 * math.log(base))

    low, high = correction_dim(beta_fast), correction_dim(beta_slow)
    if s.truncate:
        low, high = math.floor(low), math.ceil(high)
    low, high = max(low, 0), min(high, dim - 1)
    if low == high:
        high += 0.001
    ramp = np.clip((np.arange(dim // 2, dtype=np.float32) - low) / (high - low), 0, 1).astype(np.float32)
    pos_freqs = np.float32(base) ** (np.arange(0, dim, 2).astype(np.float32) / np.float32(dim))
    extrapolation = np.float32(1.0) / pos_freqs
    interpolation = np.float32(1.0) / (np.float32(factor) * pos_freqs)
    extrapolation_weight = 1 - ramp
    inv_freq = interpolation * (1 - extrapolation_weight) + extrapolation * extrapolation_weight
    return inv_freq.astype(np.float32), float(attention_factor)


def rope_cos_sin(positions: jnp.ndarray, config: ModelConfig) -> tuple[jnp.ndarray, jnp.ndarray]:
    """cos, sin of shape [B, T, head_dim] in float32 for integer positions [B, T]."""
    inv_freq, attention_factor = inv_frequencies(config)
    freqs = positions.astype(jnp.float32)[..., None] * jnp.asarray(inv_freq)
    emb = jnp.concatenate([freqs, freqs], axis=-1)
    return jnp.cos(emb) * attention_factor, jnp.sin(emb) * attention_factor


def apply_rope(x: jnp.ndarray, cos: jnp.ndarray, sin: jnp.ndarray) -> jnp.ndarray:
    """Rotates x [B, T, heads, head_dim] (computed in float32, returned in x's dtype)."""
    xf = x.astype(jnp.float32)
    half = x.shape[-1] // 2
    rotated = jnp.concatenate([-xf[..., half:], xf[..., :half]], axis=-1)
    out = xf * cos[:, :, None, :] + rotated * sin[:, :, None, :]
    return out.astype(x.dtype)
