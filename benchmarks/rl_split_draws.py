"""How many tasks a data build draws to get N tasks of the `rl` split (GRPO's): from the main stream alone
(every split; before `data.rl_split_tasks`) and from the rl stream (the rl split's recipes only).

A dry count, on a CPU in seconds: shards generated as the build generates them, split, repeats and
KernelBench twins screened out; nothing is validated (the build then drops a few percent more).

    python benchmarks/rl_split_draws.py --want 64                   # the learning build's settings
    python benchmarks/rl_split_draws.py --want 256 --seed 1 --chunk 256
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

from jaxrl.data.engine.api import GenerateTasks, default_engine  # noqa: E402
from jaxrl.data.engine.kernelbench_corpus import Decontamination, load_corpus  # noqa: E402
from jaxrl.data.engine.shards import shard_families, shard_seed  # noqa: E402


def draws(generate: GenerateTasks, stream: str, args: argparse.Namespace, order: list[str], split_of,
          decontamination: Decontamination) -> tuple[int, int, int]:
    """(tasks drawn, shards, KernelBench twins) until `args.want` distinct rl-split tasks."""
    drawn = found = twins = shard = 0
    codes: set[str] = set()
    while found < args.want:
        for task in generate(shard_seed(args.seed, shard, stream), args.chunk, args.scale,
                             shard_families(order, shard, args.chunk)):
            drawn += 1
            if split_of(task) != "rl" or task.code in codes:
                continue
            codes.add(task.code)
            if decontamination.check(task.code) is not None:
                twins += 1
                continue
            found += 1
            if found == args.want:
                break
        shard += 1
    return drawn, shard, twins


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--want", type=int, default=64)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--scale", default="cpu")
    parser.add_argument("--chunk", type=int, default=128)
    args = parser.parse_args()
    engine = default_engine()
    order, split_of = engine.family_names(), engine.splitter(None, None)
    corpus = load_corpus(None)
    decontamination = Decontamination(corpus, engine)
    print(f"KernelBench: {len(corpus.problems) if corpus.found else 'not found, not'} screened")
    for stream, generate in (("", engine.generate_tasks), ("rl", engine.split_generator(None, None, "rl"))):
        t0 = time.perf_counter()
        drawn, shards, twins = draws(generate, stream, args, order, split_of, decontamination)
        print(f"{stream or 'main'} stream: {drawn} tasks drawn ({shards} shard(s) of {args.chunk}) for {args.want} "
              f"rl-split tasks; {twins} rl-split KernelBench twins; {time.perf_counter() - t0:.1f} s")


if __name__ == "__main__":
    main()
