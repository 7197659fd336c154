"""The server behind `python -m jaxrl.main serve` (the command is jaxrl/cli/serve.py): `model.source` loaded
once (jaxrl.policy, behind the templated sampler of jaxrl.generators) and served over HTTP.

Any source jaxrl.policy loads works (a bundled model, a GGUF file, a Hugging Face folder such as a trained
run's `hf/`). `sampling.batch_size` rows decode together, `sampling.max_prompt_tokens`
bounds a prompt, requests without max_tokens get `sampling.max_new_tokens`, and `serve.batch_window_ms`
is how long a request waits for batch-mates. The model is advertised as `model.name`, else the source's name.
"""

from __future__ import annotations

import dataclasses
import socket
import threading
from pathlib import Path
from typing import Any

import uvicorn

from jaxrl.config import Config, ConfigError, ModelSection
from jaxrl.data.prompts import Message
from jaxrl.generators import TemplatedGenerator, load_generator
from jaxrl.policy import BUNDLED, mesh_from_section
from jaxrl.serving.app import create_app
from jaxrl.serving.batcher import Batcher


def served_name(section: ModelSection) -> str:
    """`model.name`, else the bundled name, else the folder's or file's name (a run's `hf/` is named by its run)."""
    if section.name:
        return section.name
    if section.source in BUNDLED:
        return section.source
    path = Path(section.source).expanduser().resolve()
    return path.parent.name if path.name == "hf" else path.stem if path.is_file() else path.name


@dataclasses.dataclass
class SamplerModel:
    """A loaded policy as the API sees it: name, chat template, token counts."""

    name: str
    generator: TemplatedGenerator

    def render(self, messages: list[Message]) -> str:
        return self.generator.render(messages)

    def count_tokens(self, text: str) -> int:
        return len(self.generator.generator.encode(text))


class BackgroundServer:
    """A uvicorn server on its own thread, on a socket bound before it starts (port 0: any free port)."""

    def __init__(self, app: Any, host: str = "127.0.0.1", port: int = 0):
        self.socket = bind(host, port)
        self.port = self.socket.getsockname()[1]
        self.url = f"http://{host}:{self.port}/v1"
        # log_config=None: uvicorn's own logging set-up (dictConfig) would close every logging handler of the
        # process it runs in (absl's, installed by flax, closes the stream it holds).
        self.server = uvicorn.Server(uvicorn.Config(app, log_level="warning", log_config=None))
        self.thread = threading.Thread(target=self.server.run, kwargs={"sockets": [self.socket]}, daemon=True)
        self.thread.start()

    def stop(self, timeout_s: float = 10.0) -> None:
        self.server.should_exit = True
        self.thread.join(timeout_s)
        self.socket.close()


def bind(host: str, port: int) -> socket.socket:
    """A listening TCP socket; ConfigError when the address is taken or not ours."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        raise ConfigError(f"serve: cannot listen on {host}:{port}: {exc.strerror or exc}") from exc
    sock.listen(2048)
    return sock


def build(config: Config) -> tuple[SamplerModel, Batcher, Any]:
    """(model, batcher, FastAPI app) for the config: the weights are loaded here."""
    generator = load_generator(config.model, mesh=mesh_from_section(config.mesh), sampling=config.sampling)
    model = SamplerModel(served_name(config.model), generator)
    batcher = Batcher(generator, window_s=config.serve.batch_window_ms / 1000, max_rows=config.sampling.batch_size,
                      seed=config.sampling.seed)
    return model, batcher, create_app(model, batcher, default_max_tokens=config.sampling.max_new_tokens)

