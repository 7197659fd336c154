"""`python -m jaxrl.main serve`: the command (jaxrl/cli/serve.py) checks the source (jaxrl.policy) and the port
before any weights load."""

from __future__ import annotations

import pytest

from jaxrl import main as cli
from jaxrl.cli import serve as serve_command
from jaxrl.config import ConfigError, load_config
from jaxrl.serving import server


@pytest.fixture
def no_weights(monkeypatch):
    def must_not_load(config):
        raise AssertionError("serve loaded weights despite a bad config")

    monkeypatch.setattr(server, "build", must_not_load)


def test_serve_refuses_a_taken_port_before_loading_any_weights(no_weights, capsys):
    taken = server.bind("127.0.0.1", 0)
    try:
        port = taken.getsockname()[1]
        with pytest.raises(ConfigError, match=f"cannot listen on 127.0.0.1:{port}"):
            serve_command.run(load_config(None, [f"serve.port={port}"]))
        assert cli.main(["serve", f"serve.port={port}"]) == 2
        assert f"cannot listen on 127.0.0.1:{port}" in capsys.readouterr().err
    finally:
        taken.close()


def test_serve_refuses_a_missing_source_before_binding(no_weights, capsys):
    assert cli.main(["serve", "model.source=/no/such/model", "serve.port=0"]) == 2
    assert "model.source '/no/such/model': no such file or folder" in capsys.readouterr().err


def test_bad_serve_values_are_config_errors(capsys):
    assert cli.main(["serve", "serve.port=70000"]) == 2
    assert "port must be in [0, 65535], got 70000" in capsys.readouterr().err
