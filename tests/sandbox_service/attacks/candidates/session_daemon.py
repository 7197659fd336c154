"""Class 3 (state that outlives the candidate): an honest ReLU kernel whose __init__ starts a daemon in a new
session (fork, setsid, fork again): outside the candidate's process group, so the group kill misses it. The daemon
only sleeps (two minutes); the test checks it is gone after the evaluation."""
import time

import torch
import torch.nn as nn
import triton
import triton.language as tl

# INCLUDE _reach
# INCLUDE _honest_relu_model


def _daemon():
    _name_and_record("atk-daemon")
    time.sleep(120)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        _attempted("session-daemon")
        _detached(_daemon)

    def forward(self, x):
        return relu(x)
