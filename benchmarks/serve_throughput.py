"""`serve` throughput: tokens/s for R concurrent chat requests over HTTP vs the in-process sampler.

One model is loaded once (`jaxrl.serving.server.build`: the sampler, the batcher and the FastAPI app) and
measured two ways in the same process, on the same R prompts with the same settings (greedy by default,
so both sides generate the same tokens):
  in-process  one `generate` call of the R rendered prompts on the sampler (rows decoded together in
              batches of --batch-size), tokens/s = generated tokens / wall time;
  serve       R concurrent POST /v1/chat/completions from R client threads to the server on a loopback
              port (HTTP, JSON, the batcher's window and grouping included), tokens/s = the responses'
              usage.completion_tokens / wall time from the first request to the last answer.
Each side runs once untimed first (compilation), then --repeats times; the medians are reported, with
ratio = serve / in-process (1.0: the HTTP path costs nothing).

    python benchmarks/serve_throughput.py --model /ckpt/Qwen3-8B --requests 32 --max-tokens 256 --out serve.json
    python benchmarks/serve_throughput.py --tiny        # CPU smoke run with the bundled model
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parents[1]
if str(REPO_ROOT) not in sys.path:  # run as a script from anywhere
    sys.path.insert(0, str(REPO_ROOT))

OPERATORS = ["relu", "sigmoid", "tanh", "gelu", "silu", "softplus", "exp", "abs"]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="smollm2-135m", help="model.source (bundled name, GGUF, HF folder)")
    parser.add_argument("--requests", type=int, default=32, help="concurrent requests (R)")
    parser.add_argument("--max-tokens", type=int, default=256)
    parser.add_argument("--temperature", type=float, default=0.0)
    parser.add_argument("--batch-size", type=int, default=32, help="sampling.batch_size: rows decoded together")
    parser.add_argument("--window-ms", type=float, default=10.0, help="serve.batch_window_ms")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                        help="more config overrides, e.g. model.dtype=bfloat16 mesh.fsdp=1")
    parser.add_argument("--tiny", action="store_true",
                        help="CPU smoke settings: 2 one-line requests, 2 tokens, 1 repeat, a 1 s window (one batch)")
    parser.add_argument("--out", type=Path, help="write every number as JSON")
    return parser


def prompts(count: int, short: bool = False) -> list[list[dict[str, str]]]:
    """R distinct kernel-writing chats, as the evaluation prompts them (short: one line each, for --tiny,
    where prefilling and compiling the full prompt would take most of the CPU run)."""
    from jaxrl.data import build_messages

    out = []
    for i in range(count):
        op = OPERATORS[i % len(OPERATORS)]
        if short:
            out.append([{"role": "user", "content": f"Write a Triton kernel for torch.{op}(x) * {i + 1}."}])
            continue
        reference = (f"import torch\n\n\nclass Model(torch.nn.Module):\n    def forward(self, x):\n"
                     f"        return torch.{op}(x) * {i + 1}\n\n\ndef get_inputs():\n    return [torch.randn(4096)]\n\n\n"
                     "def get_init_inputs():\n    return []\n")
        out.append(build_messages(reference))
    return out


def in_process(generator: Any, chats: list[list[dict[str, str]]], params: Any) -> dict[str, float]:
    rendered = [generator.render(chat) for chat in chats]
    start = time.perf_counter()
    outputs = generator.generate(rendered, params)
    seconds = time.perf_counter() - start
    tokens = sum(samples[0].num_tokens for samples in outputs)
    return {"tokens": tokens, "seconds": seconds, "tokens_per_s": tokens / seconds}


def over_http(url: str, name: str, chats: list[list[dict[str, str]]], max_tokens: int,
              temperature: float) -> dict[str, float]:
    import httpx

    with httpx.Client(base_url=url, timeout=3600, limits=httpx.Limits(max_connections=len(chats))) as client:
        def ask(chat: list[dict[str, str]]) -> int:
            response = client.post("/chat/completions", json={"model": name, "messages": chat,
                                                              "max_tokens": max_tokens, "temperature": temperature})
            response.raise_for_status()
            return response.json()["usage"]["completion_tokens"]

        start = time.perf_counter()
        with ThreadPoolExecutor(len(chats)) as pool:
            tokens = sum(pool.map(ask, chats))
        seconds = time.perf_counter() - start
    return {"tokens": tokens, "seconds": seconds, "tokens_per_s": tokens / seconds}


def median_run(runs: list[dict[str, float]]) -> dict[str, Any]:
    rates = [r["tokens_per_s"] for r in runs]
    best = min(runs, key=lambda r: abs(r["tokens_per_s"] - statistics.median(rates)))
    return {**best, "tokens_per_s": statistics.median(rates), "tokens_per_s_all": rates}


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.tiny:
        args.requests, args.max_tokens, args.batch_size, args.repeats, args.window_ms = 2, 2, 2, 1, 1000.0
    from jaxrl.config import load_config
    from jaxrl.sampling.api import SamplingParams
    from jaxrl.serving.server import BackgroundServer, build

    config = load_config(None, [f"model.source={args.model}", f"sampling.batch_size={args.batch_size}",
                                f"sampling.max_new_tokens={args.max_tokens}", f"serve.batch_window_ms={args.window_ms}",
                                *args.set])
    started = time.perf_counter()
    model, batcher, app = build(config)
    load_s = time.perf_counter() - started
    server = BackgroundServer(app)
    chats = prompts(args.requests, short=args.tiny)
    params = SamplingParams(temperature=args.temperature, max_new_tokens=args.max_tokens)
    try:
        sides = {"in-process": lambda: in_process(model.generator, chats, params),
                 "serve": lambda: over_http(server.url, model.name, chats, args.max_tokens, args.temperature)}
        results = {}
        for side, measure in sides.items():
            measure()  # compilation of this side's shapes
            results[side] = median_run([measure() for _ in range(args.repeats)])
    finally:
        server.stop()
        batcher.close()
    ratio = results["serve"]["tokens_per_s"] / results["in-process"]["tokens_per_s"]
    summary = {"model": args.model, "requests": args.requests, "max_tokens": args.max_tokens,
               "temperature": args.temperature, "batch_size": args.batch_size, "window_ms": args.window_ms,
               "load_s": round(load_s, 1), "sides": results, "serve_over_in_process": ratio,
               "serve_batches": {"calls": batcher.stats.calls, "requests": batcher.stats.requests,
                                 "largest_call_rows": batcher.stats.largest_call_rows}}
    print(f"{'side':<11} {'requests':>8} {'tokens':>7} {'seconds':>8} {'tokens/s':>9}")
    for side, r in results.items():
        print(f"{side:<11} {args.requests:>8} {r['tokens']:>7} {r['seconds']:>8.2f} {r['tokens_per_s']:>9.1f}")
    print(f"serve / in-process tokens/s: {ratio:.3f} ({args.model}, {args.requests} concurrent requests, "
          f"{args.max_tokens} max tokens, batch {args.batch_size})")
    if args.out:
        args.out.write_text(json.dumps(summary, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
