"""Executor design: the candidate knows the reference's get_inputs() and the evaluation's seed, so it makes the
trials' inputs itself in __init__ (as harness.trial_seeds did before the lane's secret key), computes their
answers with torch, keeps them as a parameter (data the executor receives) and copies the right one out with a
kernel. With trial seeds keyed by a secret no candidate holds, its guesses answer other inputs."""
import random

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def copy_1d(src, dst, n, BLOCK: tl.constexpr):
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(dst + i, tl.load(src + i, mask=i < n, other=0.0), mask=i < n)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        print("attempted-precomputed-answers", flush=True)
        rng = random.Random(0)  # the evaluation seed of the attack tests' options
        answers = []
        for _ in range(2):
            torch.manual_seed(rng.randrange(1, 2**31 - 1))
            answers.append(torch.relu(torch.randn(16, 256)))
        self.answers = nn.Parameter(torch.stack(answers), requires_grad=False)
        self.calls = 0

    def forward(self, x):
        out = torch.empty_like(x)
        index, self.calls = self.calls % 2, self.calls + 1  # the trials come in order
        copy_1d[(triton.cdiv(x.numel(), 128),)](self.answers[index], out, x.numel(), BLOCK=128)
        return out
