"""Training-step throughput: the JAX SFT/GRPO update step vs a transformers + torch AdamW step, as MFU.

For each model shape (random weights; Qwen3-0.6B and Qwen3-8B by default), B rows of S tokens (one
full row per sequence, no packing, loss on every token):
  jax     the bf16 matmul rate R of one device: a jitted chain of 8192^3 bf16 matmuls (bf16 out,
          float32 accumulation, as torch.matmul), median over repeats;
          `TrainStep` with `make_sft_loss` (the step GRPO uses too: forward, backward, gradient
          accumulation, global-norm clipping, AdamW), bf16 compute, float32 master parameters and
          float32 Adam moments (`--param-dtype`), activation checkpointing `--remat`, the vocabulary
          projection chunked (`--logits-chunk`), the mesh over every visible device (fsdp); rows are
          declared one sequence each (cuDNN's causal mask, no dense mask) unless `--dense-mask`
          (the path packed SFT rows take);
          step time = median over `--steps` steps after one warm-up (compiling) step.
  torch   transformers AutoModelForCausalLM.from_config(Qwen3Config) in bf16 on one GPU: bf16
          weights (the master weights are bf16 too) and bf16 AdamW state (torch.optim.AdamW keeps
          its moments in the parameter dtype), gradient checkpointing on (non-reentrant), sdpa
          attention, loss = model(input_ids, labels=input_ids).loss, gradient norm clipped at 1,
          the same B and S. A model whose state does not fit on one GPU reports "out of memory".
Both report tokens/s = B * S / step time and
    MFU = F * tokens/s / (R * devices)        F = 6 N + 12 L A S  flops per token
where N counts the parameters that take part in a matmul (every layer weight and the LM head; not an
untied input embedding table, which is only gathered), L the layers, A = heads x head_dim the
attention width (PaLM's formula: the attention score and value matmuls, causal masking not
discounted); `mfu_6n` leaves the attention term out. The table's R is the faster of the job's two
probes (JAX's and torch's 8192^3 bf16 matmul) for both sides, so a slow probe flatters neither; each
part's own progress line uses its own probe. Torch runs on one device. Each part runs in its own subprocess, so JAX and PyTorch never hold
GPU memory at the same time; the compact table at the end is all a 12k-character log tail needs and
--out keeps every number.

    python benchmarks/train_throughput.py --models 0.6b --remat none --out train_0.6b.json        # 1 GPU
    python benchmarks/train_throughput.py --models 8b --remat dots --micro-batch 4 --out train_8b.json  # 2 H200
    python benchmarks/train_throughput.py --from-json train_8b.json     # the table of a saved run again
    python benchmarks/train_throughput.py --tiny                        # CPU smoke run
Targets: MFU >= 50% on the 8B shape; tokens/s >= 2x the torch step's on the 0.6B shape.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parents[1]
if str(REPO_ROOT) not in sys.path:  # run as a script from anywhere
    sys.path.insert(0, str(REPO_ROOT))

from benchmarks import device_profile, subprocess_parts  # noqa: E402
from benchmarks.subprocess_parts import fmt, log  # noqa: E402

PRESETS = {"8b": "qwen3_8b", "0.6b": "qwen3_0_6b", "tiny": "tiny_qwen3"}
TARGET_MFU_8B, TARGET_SPEEDUP_06B = 0.5, 2.0


def model_config(name: str, args: argparse.Namespace):
    from jaxrl.models import config as presets

    if name not in PRESETS:
        raise SystemExit(f"unknown model {name!r}; choose from {', '.join(PRESETS)}")
    return getattr(presets, PRESETS[name])(dtype="bfloat16", param_dtype=args.param_dtype, remat=args.remat,
                                           attention_impl=args.attention)


# ---------------------------------------------------------------------- flops


def matmul_params(config) -> int:
    """Parameters that multiply activations: all but an untied input embedding table (gathered only)."""
    return config.num_params() - (0 if config.tie_embeddings else config.vocab_size * config.hidden_size)


def flops_per_token(config, seq: int) -> dict[str, float]:
    n = matmul_params(config)
    attention = 12 * config.num_layers * config.num_heads * config.head_dim * seq
    return {"matmul_params": n, "flops_6n": 6.0 * n, "flops_attention": float(attention),
            "flops_per_token": 6.0 * n + attention}


def add_mfu(result: dict[str, Any], config, seq: int, matmul_rate: float, devices: int) -> None:
    """tokens/s -> mfu and mfu_6n in place (see the module docstring)."""
    f = flops_per_token(config, seq)
    result.update(f)
    peak = matmul_rate * devices
    result["mfu"] = f["flops_per_token"] * result["tokens_per_s"] / peak
    result["mfu_6n"] = f["flops_6n"] * result["tokens_per_s"] / peak


def random_rows(vocab: int, batch: int, seq: int):
    import numpy as np

    rng = np.random.default_rng(0)
    tokens = rng.integers(1, vocab, size=(batch, seq), dtype=np.int32)
    return tokens, np.roll(tokens, -1, axis=1)


# ---------------------------------------------------------------------- parts (each in a subprocess)


MATMUL_CHAIN = 8


def jax_matmul_rate(size: int, repeats: int) -> float:
    """bf16 flops/s of one device: median time of a jitted chain of MATMUL_CHAIN size^3 matmuls
    (bf16 operands and result, float32 accumulation inside the GEMM, like torch.matmul), so one
    dispatch and sync are spread over several products. Rescaled by 1/sqrt(size) to stay finite."""
    import jax
    import jax.numpy as jnp

    ka, kb = jax.random.split(jax.random.key(0))
    a = jax.random.normal(ka, (size, size), jnp.bfloat16)
    b = (jax.random.normal(kb, (size, size), jnp.float32) / size**0.5).astype(jnp.bfloat16)

    @jax.jit
    def chain(x, y):
        return jax.lax.fori_loop(0, MATMUL_CHAIN, lambda _, acc: acc @ y, x)

    chain(a, b).block_until_ready()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        chain(a, b).block_until_ready()
        times.append(time.perf_counter() - start)
    return MATMUL_CHAIN * 2.0 * size**3 / statistics.median(times)


def jax_part(args: argparse.Namespace) -> dict[str, Any]:
    import jax
    import numpy as np

    from jaxrl import sharding as shd
    from jaxrl.config.schema import OptimSection
    from jaxrl.models import init_model
    from jaxrl.models.attention import resolve_impl
    from jaxrl.training.optim import make_optimizer
    from jaxrl.training.sft import make_sft_loss
    from jaxrl.training.trainer import TrainStep, init_train_state

    config = model_config(args.model, args)
    devices = jax.device_count()
    batch, seq, micro = args.batch, args.seq, args.micro_batch or args.batch
    if batch % micro or micro % devices:
        raise SystemExit(f"--micro-batch ({micro}) must divide --batch ({batch}) and be a multiple of the "
                         f"{devices} devices (rows are split over the fsdp axis)")
    result: dict[str, Any] = {"device": str(jax.devices()[0].device_kind), "devices": devices,
                              "attention": resolve_impl(config), "remat": config.remat,
                              "param_dtype": config.param_dtype, "micro_batch": micro,
                              "mask": "dense" if args.dense_mask else "one sequence per row"}
    rate = jax_matmul_rate(args.matmul_size, args.matmul_repeats)
    result["matmul_tflops"] = rate / 1e12
    log(f"[jax {args.model}] bf16 matmul {rate / 1e12:.0f} TFLOP/s per device; {devices} device(s); "
        f"attention {result['attention']}")

    start = time.perf_counter()
    mesh = shd.make_mesh(shd.MeshConfig(data=1, fsdp=-1, tensor=1))
    model = init_model(config, seed=0, mesh=mesh)
    optimizer, _ = make_optimizer(OptimSection(learning_rate=1e-5, decay="constant", max_grad_norm=1.0),
                                  args.steps + 1)
    graphdef, state, shardings = init_train_state(model, optimizer, mesh, seed=0)
    del model
    loss = make_sft_loss(args.logits_chunk, one_sequence_per_row=not args.dense_mask)
    step = TrainStep(graphdef, loss, optimizer, mesh, shardings)
    jax.block_until_ready(state)
    result["init_s"] = time.perf_counter() - start

    tokens, targets = random_rows(config.vocab_size, batch, seq)
    rows = {"tokens": tokens, "positions": np.tile(np.arange(seq, dtype=np.int32), (batch, 1)),
            "segment_ids": np.ones_like(tokens), "targets": targets, "loss_mask": np.ones_like(tokens)}
    micro_batches = [{k: v[s : s + micro] for k, v in rows.items()} for s in range(0, batch, micro)]

    def run_step(state):
        begin = time.perf_counter()
        state, metrics = step(state, micro_batches)
        loss = float(jax.block_until_ready((state, metrics))[1]["loss"])
        return state, time.perf_counter() - begin, loss

    state, result["compile_s"], first_loss = run_step(state)
    log(f"[jax {args.model}] init {result['init_s']:.1f} s, compile + first step {result['compile_s']:.1f} s, "
        f"loss {first_loss:.3f}")
    times, losses = [], [first_loss]
    for _ in range(args.steps):
        state, seconds, loss = run_step(state)
        times.append(seconds)
        losses.append(loss)
    if not all(np.isfinite(losses)):
        raise RuntimeError(f"non-finite loss: {losses}")
    if args.profile:
        with tempfile.TemporaryDirectory() as trace_dir:
            with device_profile.trace(Path(trace_dir)):
                for _ in range(args.profile):
                    state, _, _ = run_step(state)
            profile = device_profile.summarise(Path(trace_dir), args.profile)
        result["profile_ms_per_step"] = {"by_kind": profile.by_kind,
                                         "top_kernels": dict(list(profile.by_kernel.items())[:40])}
        for line in device_profile.table(profile).splitlines():  # prefixed: run_part relays "[jax " lines
            log(f"[jax {args.model}] {line}")
    result.update(step_s=statistics.median(times), step_s_all=times, losses=losses)
    result["tokens_per_s"] = batch * seq / result["step_s"]
    add_mfu(result, config, seq, rate, devices)
    stats = jax.devices()[0].memory_stats() or {}
    if "peak_bytes_in_use" in stats:
        result["peak_gb_device0"] = stats["peak_bytes_in_use"] / 1e9
    log(f"[jax {args.model}] step {result['step_s']:.3f} s, {result['tokens_per_s']:.0f} tok/s, "
        f"MFU {100 * result['mfu']:.1f}%")
    return result


def torch_matmul_rate(torch, device: str, size: int, repeats: int) -> float:
    a = torch.randn(size, size, device=device, dtype=torch.bfloat16)
    b = torch.randn(size, size, device=device, dtype=torch.bfloat16)
    torch.matmul(a, b)
    times = []
    for _ in range(repeats):
        if device == "cuda":
            torch.cuda.synchronize()
        start = time.perf_counter()
        torch.matmul(a, b)
        if device == "cuda":
            torch.cuda.synchronize()
        times.append(time.perf_counter() - start)
    return 2.0 * size**3 / statistics.median(times)


def torch_part(args: argparse.Namespace) -> dict[str, Any]:
    import torch
    import transformers
    from transformers import AutoModelForCausalLM, Qwen3Config

    config = model_config(args.model, args)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    result: dict[str, Any] = {
        "device": torch.cuda.get_device_name() if device == "cuda" else "cpu", "devices": 1,
        "torch": torch.__version__, "transformers": transformers.__version__,
        "weights": "bfloat16 (no float32 master copy)", "optimizer": "torch.optim.AdamW, bf16 state",
        "gradient_checkpointing": True,
    }
    result["torch_matmul_tflops"] = torch_matmul_rate(torch, device, args.matmul_size, args.matmul_repeats) / 1e12
    hf = {k: v for k, v in config.to_hf_config().items() if k not in ("architectures", "model_type", "torch_dtype")}
    torch.manual_seed(0)
    batch, seq = args.batch, args.seq
    try:
        start = time.perf_counter()
        with torch.device(device):
            model = AutoModelForCausalLM.from_config(Qwen3Config(**hf), dtype=torch.bfloat16,
                                                     attn_implementation="sdpa")
        model.config.use_cache = False
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
        model.train()
        optimizer = torch.optim.AdamW(model.parameters(), lr=1e-5, fused=device == "cuda")
        result["init_s"] = time.perf_counter() - start
        tokens, _ = random_rows(config.vocab_size, batch, seq)
        input_ids = torch.from_numpy(tokens).long().to(device)

        def run_step() -> tuple[float, float]:
            if device == "cuda":
                torch.cuda.synchronize()
            begin = time.perf_counter()
            loss = model(input_ids=input_ids, labels=input_ids).loss
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
            value = float(loss.detach())
            return time.perf_counter() - begin, value

        result["warmup_s"], first_loss = run_step()
        times, losses = [], [first_loss]
        for _ in range(args.steps):
            seconds, loss = run_step()
            times.append(seconds)
            losses.append(loss)
    except torch.OutOfMemoryError as exc:
        return {**result, "error": f"out of memory on one GPU (batch {batch}, seq {seq}): {str(exc)[:200]}"}
    result.update(step_s=statistics.median(times), step_s_all=times, losses=losses)
    result["tokens_per_s"] = batch * seq / result["step_s"]
    if device == "cuda":
        result["peak_gb"] = torch.cuda.max_memory_allocated() / 1e9
    log(f"[torch {args.model}] step {result['step_s']:.3f} s, {result['tokens_per_s']:.0f} tok/s")
    return result


PARTS = {"jax": jax_part, "torch": torch_part}


# ---------------------------------------------------------------------- orchestration


def run_part(part: str, model: str, args: argparse.Namespace, deadline: float) -> dict[str, Any]:
    """One part in a fresh interpreter; its JSON result, or {"error": ...}."""
    env = dict(os.environ)
    env.setdefault("XLA_PYTHON_CLIENT_MEM_FRACTION", "0.95")  # the 8B state needs most of each GPU
    env.setdefault("HF_HUB_OFFLINE", "1")
    return subprocess_parts.run_part(Path(__file__), part, model, [
        "--batch", str(args.batch), "--micro-batch", str(args.micro_batch), "--seq", str(args.seq),
        "--steps", str(args.steps), "--remat", args.remat, "--param-dtype", args.param_dtype,
        "--attention", args.attention, "--logits-chunk", str(args.logits_chunk),
        "--matmul-size", str(args.matmul_size), "--matmul-repeats", str(args.matmul_repeats),
        *(["--dense-mask"] if args.dense_mask else []), "--profile", str(args.profile),
    ], deadline, env)


def summary(document: dict[str, Any]) -> str:
    """The compact table (and target verdicts); also fills torch MFU and speedups into `document`."""
    lines = [f"{'model':<6}{'side':<6}{'dev':>4}{'step s':>9}{'tok/s':>10}{'MFU %':>7}{'6N %':>6}"
             f"{'TFLOP/s':>9}{'compile':>9}{'peak GB':>9}  notes"]
    for name, entry in document["models"].items():
        j, t = entry.get("jax", {}), entry.get("torch", {})
        rate = max(j.get("matmul_tflops") or 0.0, t.get("torch_matmul_tflops") or 0.0)
        if rate:
            entry["mfu_rate_tflops"] = rate
            for side in (j, t):
                if "tokens_per_s" in side:
                    add_mfu(side, model_config(name, document["args"]), document["shapes"]["seq"], rate * 1e12,
                            side.get("devices", 1))
        if "tokens_per_s" in j and "tokens_per_s" in t:
            entry["speedup_tokens_per_s"] = j["tokens_per_s"] / t["tokens_per_s"]
        for side, r in (("jax", j), ("torch", t)):
            if not r:
                continue
            mfu, mfu6 = r.get("mfu"), r.get("mfu_6n")
            notes = r["error"].splitlines()[-1][:110] if "error" in r else \
                (f"remat {r.get('remat')}, params {r.get('param_dtype')}, attn {r.get('attention')}, "
                 f"{r.get('mask')} mask, micro {r.get('micro_batch')}" if side == "jax"
                 else "bf16 weights+AdamW, grad ckpt")
            lines.append(
                f"{name:<6}{side:<6}{r.get('devices', 0):>4}{fmt(r.get('step_s'), '.3f'):>9}"
                f"{fmt(r.get('tokens_per_s'), '.0f'):>10}{fmt(None if mfu is None else 100 * mfu, '.1f'):>7}"
                f"{fmt(None if mfu6 is None else 100 * mfu6, '.1f'):>6}"
                f"{fmt(r.get('matmul_tflops', r.get('torch_matmul_tflops')), '.3g'):>9}"
                f"{fmt(r.get('compile_s', r.get('warmup_s')), '.0f'):>9}"
                f"{fmt(r.get('peak_gb_device0', r.get('peak_gb')), '.1f'):>9}  {notes}")
        if "speedup_tokens_per_s" in entry:
            lines.append(f"  {name}: jax / torch tokens/s = {entry['speedup_tokens_per_s']:.2f}x")
    verdicts = []
    j8 = document["models"].get("8b", {}).get("jax", {})
    if "mfu" in j8:
        verdicts.append(f"8b MFU {100 * j8['mfu']:.1f}% ({'PASS' if j8['mfu'] >= TARGET_MFU_8B else 'FAIL'} >= 50%)")
    small = document["models"].get("0.6b", {})
    if "speedup_tokens_per_s" in small:
        ok = small["speedup_tokens_per_s"] >= TARGET_SPEEDUP_06B
        verdicts.append(f"0.6b {small['speedup_tokens_per_s']:.2f}x torch ({'PASS' if ok else 'FAIL'} >= 2x)")
    if verdicts:
        lines.append("targets: " + "; ".join(verdicts))
    lines.append(f"batch {document['shapes']['batch']} x seq {document['shapes']['seq']}; "
                 "MFU = (6N + 12 L A S) tokens/s / (bf16 matmul rate x devices), rate = the faster of the "
                 "JAX and torch probes of the job; 6N % without attention")
    return "\n".join(lines)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", default="0.6b,8b", help="comma-separated shapes: 0.6b, 8b, tiny")
    parser.add_argument("--batch", type=int, default=8, help="rows (sequences) per optimizer step")
    parser.add_argument("--micro-batch", type=int, default=0,
                        help="rows per micro-batch of the JAX step (gradient accumulation); 0 = --batch")
    parser.add_argument("--seq", type=int, default=4096, help="tokens per row")
    parser.add_argument("--steps", type=int, default=5, help="timed steps after one warm-up step (median)")
    parser.add_argument("--remat", default="full", choices=["none", "full", "dots"],
                        help="JAX activation checkpointing")
    parser.add_argument("--param-dtype", default="float32", choices=["float32", "bfloat16"],
                        help="JAX master parameter dtype (compute is bf16; Adam moments are float32 either way)")
    parser.add_argument("--attention", default="auto", choices=["auto", "fast", "reference"],
                        help="JAX attention path (auto = cuDNN on GPU with bf16)")
    parser.add_argument("--dense-mask", action="store_true",
                        help="give attention the dense [B, T, S] mask, as packed SFT rows do (default: rows "
                             "declared one sequence each, so cuDNN applies its own causal mask)")
    parser.add_argument("--logits-chunk", type=int, default=1024,
                        help="positions per chunk of the vocabulary projection in the loss (0 = whole rows)")
    parser.add_argument("--matmul-size", type=int, default=8192)
    parser.add_argument("--matmul-repeats", type=int, default=20)
    parser.add_argument("--profile", type=int, default=0, metavar="STEPS",
                        help="after timing, trace this many more JAX steps and print where the device time "
                             "went (by kernel kind and top kernels); 0 = no trace")
    parser.add_argument("--skip-torch", action="store_true", help="no transformers + torch baseline")
    parser.add_argument("--skip-jax", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--tiny", action="store_true",
                        help="tiny model, batch 8, seq 64, 2 steps, 256^3 matmul (CPU check)")
    parser.add_argument("--out", type=Path, default=None, help="JSON file for every number")
    parser.add_argument("--from-json", type=Path, help="print the table of a saved --out file and exit")
    subprocess_parts.add_arguments(parser, PARTS)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if subprocess_parts.run_requested_part(args, PARTS):  # inside a part's subprocess
        return 0
    if args.from_json:
        document = json.loads(args.from_json.read_text())
        document["args"] = argparse.Namespace(**document["args"])
        print(summary(document), flush=True)
        return 0
    if args.tiny:
        args.models, args.batch, args.seq, args.steps = "tiny", 8, 64, 2
        args.matmul_size, args.matmul_repeats, args.logits_chunk = 256, 5, 16
    models = [m.strip() for m in args.models.split(",") if m.strip()]
    for name in models:
        model_config(name, args)
    if min(args.batch, args.seq, args.steps, args.matmul_size, args.matmul_repeats) < 1 \
            or min(args.micro_batch, args.profile) < 0:
        raise SystemExit("--batch, --seq, --steps, --matmul-size, --matmul-repeats must be >= 1; "
                         "--micro-batch, --profile >= 0")
    if args.logits_chunk < 0 or (args.logits_chunk and args.seq % args.logits_chunk):
        raise SystemExit(f"--logits-chunk ({args.logits_chunk}) must be 0 or divide --seq ({args.seq})")
    deadline = time.monotonic() + args.time_budget
    document: dict[str, Any] = {"shapes": {"batch": args.batch, "seq": args.seq}, "args": args, "models": {}}

    def save():
        if args.out is not None:
            args.out.parent.mkdir(parents=True, exist_ok=True)
            out = {**document, "args": {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()}}
            args.out.write_text(json.dumps(out, indent=2))

    for name in models:
        entry = document["models"].setdefault(name, {})
        for part, skip in (("jax", args.skip_jax), ("torch", args.skip_torch)):
            if not skip:
                entry[part] = run_part(part, name, args, deadline)
                save()
    table = summary(document)
    save()
    print(table, flush=True)
    failed = [p for e in document["models"].values() for p in e.values() if isinstance(p, dict) and "error" in p]
    return 1 if failed else 0


if __name__ == "__main__":
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    sys.exit(main())
