"""One process of test_multihost.py: two `broadcast_json` calls as its first collectives, process 0 reaching
them DELAY_S late (as it does when it waits for sandbox verdicts); what it received goes to
OUT_DIR/process-<index>.npz (key `received`, JSON text).

    python multihost_worker.py OUT_DIR DELAY_S
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import jax
import numpy as np

from jaxrl import distributed
from jaxrl.training.multihost import broadcast_json


def main(out_dir: Path, delay_s: float) -> None:
    distributed.initialize_from_env()
    index = jax.process_index()
    if index == 0:
        time.sleep(delay_s)
    # Each process offers its own values; all must receive process 0's.
    received = [broadcast_json({"sender": index, "text": "é" * 3000, "items": [1, 2.5, None, True]}),
                broadcast_json([index] * 3)]
    np.savez(out_dir / f"process-{index}.npz", received=np.array(json.dumps(received)))


if __name__ == "__main__":
    main(Path(sys.argv[1]), float(sys.argv[2]))
