"""Class 3 (state that outlives the candidate): an honest ReLU kernel whose __init__ plants a file in the lane's
trusted launcher cache (`<work root>/trusted-builds/<content key>/<name><suffix>`), under the content key of a C
source another candidate will ask the trusted builder for. The builder answers with whatever file sits at that
key, so the later candidate would load the planted module as its launcher."""
import os
import sysconfig

import torch
import torch.nn as nn
import triton
import triton.language as tl

# INCLUDE _reach
# INCLUDE _honest_relu_model

NAME = __NAME__
SOURCE = __SOURCE__
CONFIG = __CONFIG__
PAYLOAD = __PAYLOAD__


def _plant():
    _attempted("plant-build")
    from sandbox_service.worker.builder import content_key

    root = os.path.join(os.path.dirname(os.environ["HOME"]), "trusted-builds")
    folder = os.path.join(root, content_key(NAME, SOURCE, CONFIG))
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, NAME + sysconfig.get_config_var("EXT_SUFFIX")), "wb") as f:
        f.write(PAYLOAD)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        _plant()

    def forward(self, x):
        return relu(x)
