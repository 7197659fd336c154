"""Sampler throughput: JAX KV-cache decoding vs transformers generate(), against the memory roofline.

For each model shape (random bf16 weights; Qwen3-8B and Qwen3-0.6B by default), batch B, prompt P,
N new tokens (greedy, no stop tokens, so every row makes exactly N tokens):
  jax     copy bandwidth BW (a jitted device-to-device copy of --copy-gb GB, read + write counted);
          prefill time; decode tokens/s = B * (N - 1) / decode time (token 0 comes from prefill);
          end-to-end tokens/s = B * N / (prefill + decode);
          roofline tokens/s = BW / (weight bytes + mean KV bytes) * B, where a decode step must read
          every weight once (the embedding table of an untied model only gathers B rows, so it is not
          counted; a tied one is the LM head and is) plus the keys and values of the P + s tokens it
          attends to at step s, on average P + N / 2; fraction = decode tokens/s / roofline.
  torch   transformers generate() (default dynamic cache, sdpa attention) with the same shapes and
          random bf16 weights, do_sample=False, min_new_tokens = max_new_tokens = N: end-to-end
          tokens/s, and decode tokens/s after subtracting a max_new_tokens=1 run (its prefill).
  load    an 8B-shaped random checkpoint written as safetensors shards to local disk, then timed
          through `load_hf_checkpoint` into device arrays (the files are in the page cache then).
Each part runs in its own subprocess, so JAX and PyTorch never hold GPU memory at the same time and
a failing part does not lose the others. The compact table at the end is all a 12k-character log
tail needs; --out keeps every number.

    python benchmarks/sampler_throughput.py --models 8b,0.6b --out sampler.json   # GPU, ~6-8 min
    python benchmarks/sampler_throughput.py --tiny                                 # CPU smoke run
Targets (8B shape): decode at least 50% of the roofline and at least 3x transformers.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parents[1]
if str(REPO_ROOT) not in sys.path:  # run as a script from anywhere
    sys.path.insert(0, str(REPO_ROOT))

from benchmarks import subprocess_parts  # noqa: E402
from benchmarks.subprocess_parts import fmt, log  # noqa: E402

PRESETS = {"8b": "qwen3_8b", "0.6b": "qwen3_0_6b", "tiny": "tiny_qwen3"}
TARGET_ROOFLINE, TARGET_SPEEDUP = 0.5, 3.0


def model_config(name: str, attention: str = "auto"):
    from jaxrl.models import config as presets

    if name not in PRESETS:
        raise SystemExit(f"unknown model {name!r}; choose from {', '.join(PRESETS)}")
    # bf16 everywhere (also for the tiny CPU run, so the same code paths run)
    return getattr(presets, PRESETS[name])(dtype="bfloat16", param_dtype="bfloat16", attention_impl=attention)


# ---------------------------------------------------------------------- roofline


def weight_bytes_per_step(config) -> int:
    """Bytes of weights one decode step reads: all parameters but an untied embedding table."""
    itemsize = 2 if config.param_dtype in ("bfloat16", "float16") else 4
    params = config.num_params() - (0 if config.tie_embeddings else config.vocab_size * config.hidden_size)
    return params * itemsize


def kv_bytes_per_token(config) -> int:
    itemsize = 2 if config.dtype in ("bfloat16", "float16") else 4
    return config.num_layers * 2 * config.num_kv_heads * config.head_dim * itemsize


def roofline(config, batch: int, prompt_len: int, new_tokens: int, bandwidth: float) -> dict[str, float]:
    weights = weight_bytes_per_step(config)
    kv = batch * (prompt_len + new_tokens / 2) * kv_bytes_per_token(config)
    return {"weight_bytes": weights, "mean_kv_bytes": kv, "bytes_per_step": weights + kv,
            "roofline_tokens_per_s": bandwidth / (weights + kv) * batch}


# ---------------------------------------------------------------------- parts (each in a subprocess)


def copy_bandwidth(nbytes: int, repeats: int = 10) -> float:
    """Bytes/s of a jitted device-to-device copy, counting the read and the write."""
    import jax
    import jax.numpy as jnp

    x = jnp.ones((nbytes // 2,), jnp.bfloat16)
    copy = jax.jit(lambda a: a.copy())
    y = copy(x).block_until_ready()
    if y.unsafe_buffer_pointer() == x.unsafe_buffer_pointer():
        raise RuntimeError("the copy was elided; bandwidth cannot be measured this way")
    del y
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        copy(x).block_until_ready()
        times.append(time.perf_counter() - start)
    return 2 * x.nbytes / statistics.median(times)


def jax_part(args: argparse.Namespace) -> dict[str, Any]:
    import jax
    import numpy as np

    from jaxrl.models import init_model
    from jaxrl.models.attention import resolve_impl
    from jaxrl.sampling import DecodeArgs, DecodeEngine, length_bucket

    config = model_config(args.model, args.attention)
    batch, prompt_len, new_tokens = args.batch, args.prompt_len, args.new_tokens
    result: dict[str, Any] = {"device": str(jax.devices()[0].device_kind), "attention": resolve_impl(config)}
    bandwidth = copy_bandwidth(int(args.copy_gb * 1e9))
    result["copy_bandwidth_gbps"] = bandwidth / 1e9
    log(f"[jax {args.model}] copy bandwidth {bandwidth / 1e9:.0f} GB/s; attention {result['attention']}")

    start = time.perf_counter()
    model = init_model(config, seed=0)
    jax.block_until_ready(jax.tree.leaves(model))
    result["init_s"] = time.perf_counter() - start
    engine = DecodeEngine(model)
    rng = np.random.default_rng(0)
    tokens = rng.integers(1, config.vocab_size, size=(batch, prompt_len), dtype=np.int32)
    segments, active = np.ones_like(tokens), np.ones((batch,), bool)
    keys = jax.random.split(jax.random.key(0), batch)
    decode_args = DecodeArgs.of(0.0, 0, 1.0, [], new_tokens)  # greedy, no stop tokens: N tokens per row
    cache_len = length_bucket(prompt_len + new_tokens - 1)
    result["cache_len"] = cache_len

    def prefill():
        return engine.prefill(tokens, segments, active, keys, decode_args, mode="greedy", cache_len=cache_len)

    start = time.perf_counter()
    state = engine.decode(prefill(), min(2, new_tokens), decode_args, mode="greedy")  # compiles both programs
    jax.block_until_ready(state.tokens)
    result["compile_s"] = time.perf_counter() - start
    log(f"[jax {args.model}] init {result['init_s']:.1f} s, compile + warm-up {result['compile_s']:.1f} s")
    del state

    prefill_s, decode_s = [], []
    for _ in range(args.repeats):
        start = time.perf_counter()
        state = jax.block_until_ready(prefill())
        prefill_s.append(time.perf_counter() - start)
        start = time.perf_counter()
        state = engine.decode(state, new_tokens, decode_args, mode="greedy")
        jax.block_until_ready(state.tokens)
        decode_s.append(time.perf_counter() - start)
        lengths = np.asarray(state.lengths)
        if int(state.step) != new_tokens or not (lengths == new_tokens).all():
            raise RuntimeError(f"decoding stopped early: step {int(state.step)}, lengths {sorted(set(lengths))}")
        del state
    result.update(prefill_s=statistics.median(prefill_s), decode_s=statistics.median(decode_s),
                  prefill_s_all=prefill_s, decode_s_all=decode_s)
    result["decode_tokens_per_s"] = batch * (new_tokens - 1) / result["decode_s"]
    result["e2e_tokens_per_s"] = batch * new_tokens / (result["prefill_s"] + result["decode_s"])
    result["prefill_tokens_per_s"] = batch * prompt_len / result["prefill_s"]
    result.update(roofline(config, batch, prompt_len, new_tokens, bandwidth))
    result["roofline_fraction"] = result["decode_tokens_per_s"] / result["roofline_tokens_per_s"]
    # what this implementation reads: every cache slot each step (masked), not only the attended ones
    result["achieved_gbps"] = result["bytes_per_step"] * (new_tokens - 1) / result["decode_s"] / 1e9
    log(f"[jax {args.model}] prefill {result['prefill_s']:.2f} s, decode {result['decode_tokens_per_s']:.0f} tok/s "
        f"= {100 * result['roofline_fraction']:.0f}% of {result['roofline_tokens_per_s']:.0f}")
    return result


def torch_part(args: argparse.Namespace) -> dict[str, Any]:
    import torch
    from transformers import AutoModelForCausalLM, Qwen3Config

    config = model_config(args.model)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    hf = {k: v for k, v in config.to_hf_config().items() if k not in ("architectures", "model_type", "torch_dtype")}
    torch.manual_seed(0)
    start = time.perf_counter()
    with torch.device(device):
        model = AutoModelForCausalLM.from_config(Qwen3Config(**hf), dtype=torch.bfloat16).eval()
    init_s = time.perf_counter() - start
    batch, prompt_len, new_tokens = args.batch, args.prompt_len, args.new_tokens
    input_ids = torch.randint(1, config.vocab_size, (batch, prompt_len), device=device)
    attention_mask = torch.ones_like(input_ids)

    def generate(n: int) -> float:
        if device == "cuda":
            torch.cuda.synchronize()
        start = time.perf_counter()
        with torch.no_grad():
            out = model.generate(input_ids=input_ids, attention_mask=attention_mask, do_sample=False,
                                 min_new_tokens=n, max_new_tokens=n, pad_token_id=0)
        if device == "cuda":
            torch.cuda.synchronize()
        if out.shape != (batch, prompt_len + n):
            raise RuntimeError(f"generate returned {tuple(out.shape)}, expected {(batch, prompt_len + n)}")
        return time.perf_counter() - start

    generate(min(4, new_tokens))  # warm-up
    prefill_s = generate(1)
    total_s = generate(new_tokens)
    log(f"[torch {args.model}] generate {batch * new_tokens / total_s:.0f} tok/s end to end")
    import transformers

    return {
        "device": torch.cuda.get_device_name() if device == "cuda" else "cpu",
        "transformers": transformers.__version__, "torch": torch.__version__,
        "attention": getattr(model.config, "_attn_implementation", None), "init_s": init_s,
        "prefill_s": prefill_s, "total_s": total_s,
        "e2e_tokens_per_s": batch * new_tokens / total_s,
        "decode_tokens_per_s": batch * (new_tokens - 1) / max(total_s - prefill_s, 1e-9),
    }


def load_part(args: argparse.Namespace) -> dict[str, Any]:
    import jax

    from jaxrl.checkpoint import export_hf, load_hf_checkpoint
    from jaxrl.models import init_model

    config = model_config(args.model)
    folder = Path(tempfile.mkdtemp(prefix="sampler_bench_ckpt_", dir=args.scratch))
    try:
        model = init_model(config, seed=0)
        start = time.perf_counter()
        export_hf(model, config, folder, max_shard_bytes=int(4e9))
        export_s = time.perf_counter() - start
        del model
        size = sum(f.stat().st_size for f in folder.glob("*.safetensors"))
        log(f"[load {args.model}] wrote {size / 1e9:.1f} GB in {export_s:.1f} s")
        start = time.perf_counter()
        loaded, _ = load_hf_checkpoint(folder)
        jax.block_until_ready(jax.tree.leaves(loaded))
        load_s = time.perf_counter() - start
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    log(f"[load {args.model}] loaded in {load_s:.1f} s")
    return {"bytes": size, "export_s": export_s, "load_s": load_s, "load_gbps": size / load_s / 1e9,
            "note": "files just written, so read from the page cache"}


PARTS = {"jax": jax_part, "torch": torch_part, "load": load_part}


# ---------------------------------------------------------------------- orchestration


def run_part(part: str, model: str, args: argparse.Namespace, deadline: float) -> dict[str, Any]:
    """One part in a fresh interpreter; its JSON result, or {"error": ...}."""
    return subprocess_parts.run_part(Path(__file__), part, model, [
        "--batch", str(args.batch), "--prompt-len", str(args.prompt_len), "--new-tokens", str(args.new_tokens),
        "--attention", args.attention, "--repeats", str(args.repeats), "--copy-gb", str(args.copy_gb),
        "--scratch", args.scratch,
    ], deadline)


def summary(document: dict[str, Any]) -> str:
    lines = []
    header = (f"{'model':<6}{'attn':<10}{'prefill s':>10}{'decode tok/s':>13}{'e2e tok/s':>11}{'roofline':>10}"
              f"{'% roof':>8}{'torch e2e':>11}{'torch dec':>11}{'x dec':>7}{'x e2e':>7}")
    lines.append(header)
    for name, entry in document["models"].items():
        j, t = entry.get("jax", {}), entry.get("torch", {})
        speed_dec = j.get("decode_tokens_per_s") / t["decode_tokens_per_s"] if "decode_tokens_per_s" in j and \
            "decode_tokens_per_s" in t else None
        speed_e2e = j.get("e2e_tokens_per_s") / t["e2e_tokens_per_s"] if "e2e_tokens_per_s" in j and \
            "e2e_tokens_per_s" in t else None
        entry["speedup_decode"], entry["speedup_e2e"] = speed_dec, speed_e2e
        frac = j.get("roofline_fraction")
        lines.append(
            f"{name:<6}{j.get('attention', '-'):<10}{fmt(j.get('prefill_s'), '.2f'):>10}"
            f"{fmt(j.get('decode_tokens_per_s'), '.0f'):>13}{fmt(j.get('e2e_tokens_per_s'), '.0f'):>11}"
            f"{fmt(j.get('roofline_tokens_per_s'), '.0f'):>10}{fmt(None if frac is None else 100 * frac, '.0f'):>8}"
            f"{fmt(t.get('e2e_tokens_per_s'), '.0f'):>11}{fmt(t.get('decode_tokens_per_s'), '.0f'):>11}"
            f"{fmt(speed_dec, '.1f'):>7}{fmt(speed_e2e, '.1f'):>7}"
        )
        for part in ("jax", "torch"):
            if "error" in entry.get(part, {}):
                lines.append(f"  {part} {name}: {entry[part]['error'].splitlines()[-1][:200]}")
        if "copy_bandwidth_gbps" in j:
            lines.append(f"  {name}: BW {j['copy_bandwidth_gbps']:.0f} GB/s, weights {j['weight_bytes'] / 1e9:.2f} GB, "
                         f"mean KV {j['mean_kv_bytes'] / 1e9:.2f} GB/step, compile {j['compile_s']:.0f} s, "
                         f"device {j['device']}")
    load = document.get("load")
    if load:
        if "error" in load:
            lines.append(f"load {document['load_model']}: {load['error'].splitlines()[-1][:200]}")
        else:
            lines.append(f"load {document['load_model']}: {load['bytes'] / 1e9:.1f} GB in {load['load_s']:.1f} s "
                         f"({load['load_gbps']:.2f} GB/s; written in {load['export_s']:.1f} s; page cache)")
    target = document["models"].get("8b")
    if target and "roofline_fraction" in target.get("jax", {}):
        frac = target["jax"]["roofline_fraction"]
        verdict = f"8b targets: roofline {100 * frac:.0f}% ({'PASS' if frac >= TARGET_ROOFLINE else 'FAIL'} >= 50%)"
        if target.get("speedup_decode") is not None:
            ok = min(target["speedup_decode"], target["speedup_e2e"]) >= TARGET_SPEEDUP
            verdict += (f"; vs transformers {target['speedup_decode']:.1f}x decode, {target['speedup_e2e']:.1f}x e2e "
                        f"({'PASS' if ok else 'FAIL'} >= 3x)")
        lines.append(verdict)
    return "\n".join(lines)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", default="8b,0.6b", help="comma-separated shapes: 8b, 0.6b, tiny")
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--prompt-len", type=int, default=512)
    parser.add_argument("--new-tokens", type=int, default=512)
    parser.add_argument("--attention", default="auto", choices=["auto", "fast", "reference"],
                        help="JAX attention path (auto = cuDNN on GPU with bf16)")
    parser.add_argument("--repeats", type=int, default=2, help="timed prefill + decode runs (median reported)")
    parser.add_argument("--copy-gb", type=float, default=4.0, help="size of the bandwidth-test array")
    parser.add_argument("--skip-torch", action="store_true", help="no transformers baseline")
    parser.add_argument("--skip-load", action="store_true", help="no checkpoint loading timing")
    parser.add_argument("--skip-jax", action="store_true", help="no JAX decoding (e.g. to time loading only)")
    parser.add_argument("--load-model", default=None,
                        help="shape of the checkpoint to load (default 8b; tiny with --tiny)")
    parser.add_argument("--scratch", default=tempfile.gettempdir(), help="local folder for the checkpoint files")
    parser.add_argument("--tiny", action="store_true", help="tiny model, batch 4, prompt 16, 8 new tokens (CPU check)")
    parser.add_argument("--out", type=Path, default=None, help="JSON file for every number")
    subprocess_parts.add_arguments(parser, PARTS)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if subprocess_parts.run_requested_part(args, PARTS):  # inside a part's subprocess
        return 0
    if args.tiny:
        args.models, args.batch, args.prompt_len, args.new_tokens, args.copy_gb = "tiny", 4, 16, 8, 0.05
    models = [m.strip() for m in args.models.split(",") if m.strip()]
    for name in models:
        model_config(name)
    if min(args.batch, args.prompt_len, args.new_tokens, args.repeats) < 1 or args.new_tokens < 2:
        raise SystemExit("--batch, --prompt-len, --repeats must be >= 1 and --new-tokens >= 2")
    deadline = time.monotonic() + args.time_budget
    document: dict[str, Any] = {
        "shapes": {"batch": args.batch, "prompt_len": args.prompt_len, "new_tokens": args.new_tokens},
        "attention": args.attention, "models": {},
    }

    def save():
        if args.out is not None:
            args.out.parent.mkdir(parents=True, exist_ok=True)
            args.out.write_text(json.dumps(document, indent=2))

    for name in models:
        entry = document["models"].setdefault(name, {})
        for part, skip in (("jax", args.skip_jax), ("torch", args.skip_torch)):
            if not skip:
                entry[part] = run_part(part, name, args, deadline)
                save()
    if not args.skip_load:
        document["load_model"] = args.load_model or ("tiny" if args.tiny else "8b")
        document["load"] = run_part("load", document["load_model"], args, deadline)
    table = summary(document)
    save()
    print(table, flush=True)
    failed = [p for e in document["models"].values() for p in e.values() if isinstance(p, dict) and "error" in p]
    return 1 if failed or "error" in document.get("load", {}) else 0


if __name__ == "__main__":
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    sys.exit(main())
