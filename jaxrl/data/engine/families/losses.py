"""Losses: MSE, L1, Huber, cross entropy, KL divergence, cosine-similarity loss and hinge loss.

A loss is one number per call, so a hard-coded constant passes any tolerance unless the number changes
between trials: the predictions carry a per-call random scale (`scale = 0.5 + torch.rand(1).item()`,
as KernelBench's KL problem does), which moves the loss by far more than the tolerance.
"""

from __future__ import annotations

import dataclasses
import random

from jaxrl.data.engine.families.base import Draw, Family, Recipe
from jaxrl.data.engine.families.builder import Builder
from jaxrl.data.engine.families.sizes import axis_shape, elementwise_shape, pick_dtype, row_length
from jaxrl.data.engine.ir import (
    Arith,
    CosineSimilarity,
    Loss,
    Normal,
    Operand,
    Pointwise,
    Probabilities,
    RandInt,
    Reduce,
    Scalar,
    Signs,
)

PRED_NAMES = ("predictions", "preds", "output", "y_pred")
TARGET_NAMES = ("targets", "target", "labels", "y_true")


def _reduction(rng: random.Random, dtype: str) -> str:
    # A sum over millions of elements overflows float16.
    return "sum" if dtype == "float32" and rng.random() < 0.3 else "mean"


@dataclasses.dataclass
class LossFamily(Family):
    name: str
    category: str = "loss"
    difficulties: tuple[str, ...] = ("medium", "hard")

    @property
    def ops(self) -> tuple[str, ...]:
        return {
            "kl_div": ("log", "kl_div"),
            "cosine_loss": ("cosine_similarity", "sub", "mean"),
            "hinge_loss": ("mul", "sub", "relu", "mean"),
        }.get(self.name, (self.name,))

    def draw(self, rng: random.Random, scale: str, recipe: Recipe | None = None) -> Draw:
        dtype = pick_dtype(rng, scale)
        if self.name == "kl_div":  # float16 probabilities underflow to 0, and log(0) makes the reference infinite
            dtype = rng.choice(["float32", "float32", "bfloat16"]) if scale == "full" else "float32"
        b = Builder(rng, dtype)
        rank = rng.choice([1, 2, 2, 3]) if self.name in ("mse_loss", "l1_loss", "huber_loss", "hinge_loss") else 2
        if self.name in ("cross_entropy", "kl_div", "cosine_loss"):
            shape = axis_shape(rng, scale, 2, 1, row_length(rng, scale, 128, 8192), budget=0.5)
        else:
            shape = elementwise_shape(rng, scale, rank, 0.5)
        roles = ("batch", "classes") if self.name in ("cross_entropy", "kl_div") else None
        dims = b.dims_for(shape, roles)
        b.shape = list(dims)
        std = round(rng.uniform(0.5, 2.0), 2)
        difficulty = "medium"
        if self.name in ("mse_loss", "l1_loss", "huber_loss"):
            b.input(PRED_NAMES, dims, Normal(std=std, jitter=True))
            target = b.input(TARGET_NAMES, dims, Normal())
            delta = None
            if self.name == "huber_loss":
                delta = Scalar(1.0) if rng.random() < 0.4 else b.scalar(("delta", "huber_delta"), rng.uniform(0.3, 2.0))
            b.stage(Loss(self.name, target, _reduction(rng, b.dtype), delta))
        elif self.name == "cross_entropy":
            b.input(("logits",) + PRED_NAMES, dims, Normal(std=std, jitter=True))
            target = b.input(TARGET_NAMES, [dims[0]], RandInt(dims[1]), dtype="int64")
            b.stage(Loss("cross_entropy", target, _reduction(rng, b.dtype)))
            difficulty = "hard"
        elif self.name == "kl_div":
            b.input(PRED_NAMES, dims, Probabilities(round(rng.uniform(0.5, 2.0), 2), jitter=True))
            target = b.input(TARGET_NAMES, dims, Probabilities(round(rng.uniform(0.5, 2.0), 2)))
            b.stage(Pointwise("log"))
            b.stage(Loss("kl_div", target, "batchmean" if rng.random() < 0.7 or b.dtype != "float32" else "sum"))
            difficulty = "hard"
        elif self.name == "cosine_loss":
            # a common positive offset makes the similarity depend on the per-call scale of the noise
            b.input(PRED_NAMES, dims, Normal(mean=1.0, std=std, jitter=True))
            target = b.input(TARGET_NAMES, dims, Normal(mean=1.0, std=std, jitter=True))
            b.stage(CosineSimilarity(target, rng.choice([1, -1])))
            b.stage(Arith("sub", Scalar(1.0), reverse=True))
            b.stage(Reduce("mean", None))
        else:  # hinge
            b.input(PRED_NAMES, dims, Normal(std=std, jitter=True))
            target = b.input(TARGET_NAMES, dims, Signs())
            b.stage(Arith("mul", Operand(target, "input")))
            b.stage(Arith("sub", Scalar(1.0), reverse=True))
            b.stage(Pointwise("relu"))
            b.stage(Reduce("mean", None))
        what = {"mse_loss": "computes the mean squared error", "l1_loss": "computes the L1 loss",
                "huber_loss": "computes the Huber loss", "cross_entropy": "computes the cross-entropy loss",
                "kl_div": "computes the KL divergence between two distributions",
                "cosine_loss": "computes a cosine-similarity loss (mean of 1 - cos)",
                "hinge_loss": "computes the hinge loss"}[self.name]
        return Draw(b.build(what), difficulty, {})


def loss_families() -> list[Family]:
    names = ("mse_loss", "l1_loss", "huber_loss", "cross_entropy", "kl_div", "cosine_loss", "hinge_loss")
    return [LossFamily(name) for name in names]
