"""`python -m jaxrl.main serve`: load `model.source` once and serve it over an OpenAI-compatible HTTP API until
interrupted (jaxrl.serving; docs/ecosystem.md).

    python -m jaxrl.main serve                                   # the bundled smollm2-135m on 127.0.0.1:8000
    python -m jaxrl.main serve model.source=runs/grpo-x/hf serve.port=8001 sampling.batch_size=32

Any source jaxrl.policy loads works (a bundled model, a GGUF file, a Hugging Face folder such as a trained run's
`hf/`, a repository id in the local Hugging Face cache). The source and the port are checked before any weights
load.
"""

from __future__ import annotations

import sys

from jaxrl.config import Config


def run(config: Config) -> int:
    """Serves until Ctrl-C or SIGTERM; 0 on a clean stop."""
    import uvicorn

    from jaxrl.policy import check_source
    from jaxrl.serving.server import bind, build

    check_source(config.model)
    sock = bind(config.serve.host, config.serve.port)  # fail on a taken port before loading any weights
    try:
        print(f"loading {config.model.source} ...", file=sys.stderr, flush=True)
        model, batcher, app = build(config)
        host, port = config.serve.host, sock.getsockname()[1]
        print(f"serving {model.name} on http://{host}:{port}/v1 (Ctrl-C stops)", file=sys.stderr, flush=True)
        try:
            uvicorn.Server(uvicorn.Config(app, log_level="info")).run(sockets=[sock])
        finally:
            batcher.close()
    finally:
        sock.close()
    return 0
