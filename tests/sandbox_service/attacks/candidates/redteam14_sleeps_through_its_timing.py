"""Red team 14 (in-process design): an honest ReLU kernel through the trials, then, once the server has ordered
the timing (the GPU held for this evaluation alone, every other process of the lane frozen), the candidate's own
process never answers again. On a GPU its forward would simply sleep once timed (its code runs in the process that
times it); on the CPU lane, whose timing function fails before it calls forward, the step before it (the timing's
inputs, an unwatched harness function) stops the process with a signal to itself, which the jail allows. Either
way it uses no CPU (RLIMIT_CPU does not end it): nothing but the evaluation's deadline can end the hold."""
import os
import signal
import sys

import torch
import torch.nn as nn
import triton
import triton.language as tl

from sandbox_service.worker import harness

# INCLUDE _honest_relu_model

_trial_inputs = harness.trial_inputs


def _stop_for_good():
    print("attempted-sleep-through-the-timing-hold", flush=True)
    os.kill(os.getpid(), signal.SIGSTOP)


def _inputs_or_stop(*args, **kwargs):
    if "order" in sys._getframe(1).f_locals:  # candidate_runner.run after the server's "time"
        _stop_for_good()
    return _trial_inputs(*args, **kwargs)


harness.trial_inputs = _inputs_or_stop


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return relu(x)
