"""Finding KernelBench: explicit path, environment, shared folder, cache, then a one-time download.

The downloads are served by a local HTTP server on 127.0.0.1; nothing here touches the network.
"""

from __future__ import annotations

import http.server
import io
import json
import socket
import tarfile
import threading
import time

import pytest

from jaxrl.data.kernelbench import load_problems
from jaxrl.data.kernelbench_source import KernelBenchUnavailable, cache_dir, default_source, resolve_kernelbench

PROBLEM = """import torch
import torch.nn as nn

class Model(nn.Module):
    def forward(self, x):
        return x + {n}

def get_inputs():
    return [torch.rand(4)]

def get_init_inputs():
    return []
"""
TOP = "KernelBench-main"
ARCHIVE_PROBLEMS = {
    f"{TOP}/KernelBench/level1/1_AddOne.py": PROBLEM.format(n=1),
    f"{TOP}/KernelBench/level1/2_AddTwo.py": PROBLEM.format(n=2),
    f"{TOP}/KernelBench/level2/1_AddThree.py": PROBLEM.format(n=3),
}


def jsonl(path, problem_id: int):
    """A one-problem KernelBench JSONL (problem L1/<problem_id>) at `path`."""
    path.parent.mkdir(parents=True, exist_ok=True)
    row = {"level": 1, "problem_id": problem_id, "name": f"{problem_id}_X", "code": PROBLEM.format(n=problem_id)}
    path.write_text(json.dumps(row) + "\n")
    return path


def tarball(members: dict[str, str], *, symlinks: dict[str, str] | None = None) -> bytes:
    """A .tar.gz holding `members` (name -> text) and `symlinks` (name -> link target)."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as archive:
        for name, text in members.items():
            data = text.encode()
            info = tarfile.TarInfo(name)
            info.size = len(data)
            archive.addfile(info, io.BytesIO(data))
        for name, target in (symlinks or {}).items():
            info = tarfile.TarInfo(name)
            info.type, info.linkname = tarfile.SYMTYPE, target
            archive.addfile(info)
    return buffer.getvalue()


class Archive:
    """Serves one body at http://127.0.0.1:<port>/kb.tar.gz and counts the requests."""

    def __init__(self, body: bytes):
        self.body = body
        self.requests = 0
        archive = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self):
                archive.requests += 1
                self.send_response(200)
                self.send_header("Content-Length", str(len(archive.body)))
                self.end_headers()
                self.wfile.write(archive.body)

            def log_message(self, *args):
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/kb.tar.gz"
        threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def serve():
    servers = []

    def start(body: bytes) -> Archive:
        servers.append(Archive(body))
        return servers[-1]

    yield start
    for server in servers:
        server.close()


def closed_port_url() -> str:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}/kb.tar.gz"


def test_sources_are_tried_in_order(isolated, monkeypatch):
    explicit = jsonl(isolated / "mine.jsonl", 1)
    from_env = jsonl(isolated / "env.jsonl", 2)
    shared = jsonl(isolated / "shared-dir" / "datasets" / "kernelbench.jsonl", 3)
    sibling = jsonl(isolated / "shared" / "datasets" / "kernelbench.jsonl", 4)
    cached = isolated / "cache" / "kernelbench" / "level1"
    cached.mkdir(parents=True)
    (cached / "5_X.py").write_text(PROBLEM.format(n=5))
    monkeypatch.setenv("KERNELBENCH_JSONL", str(from_env))
    monkeypatch.setenv("TRITONRL_SHARED_DIR", str(isolated / "shared-dir"))

    assert resolve_kernelbench(explicit) == explicit
    assert resolve_kernelbench() == from_env
    monkeypatch.delenv("KERNELBENCH_JSONL")
    assert resolve_kernelbench() == shared
    monkeypatch.delenv("TRITONRL_SHARED_DIR")
    assert resolve_kernelbench() == sibling
    sibling.unlink()
    assert resolve_kernelbench() == isolated / "cache" / "kernelbench"
    assert [p.key for p in load_problems()] == ["L1/5"]


def test_a_shared_dir_without_the_dataset_is_skipped(isolated, monkeypatch):
    monkeypatch.setenv("TRITONRL_SHARED_DIR", str(isolated / "empty"))
    sibling = jsonl(isolated / "shared" / "datasets" / "kernelbench.jsonl", 4)
    assert resolve_kernelbench() == sibling


def test_a_named_path_that_does_not_exist_is_an_error_not_a_fallback(isolated, monkeypatch):
    jsonl(isolated / "shared" / "datasets" / "kernelbench.jsonl", 4)
    with pytest.raises(FileNotFoundError, match="absent.jsonl") as given:
        resolve_kernelbench(isolated / "absent.jsonl")
    monkeypatch.setenv("KERNELBENCH_JSONL", str(isolated / "gone.jsonl"))
    with pytest.raises(FileNotFoundError, match=r"gone.jsonl \(\$KERNELBENCH_JSONL\)") as from_env:
        load_problems()
    assert not isinstance(given.value, KernelBenchUnavailable)
    assert not isinstance(from_env.value, KernelBenchUnavailable)


def test_nothing_found_with_downloads_disabled_says_what_was_tried(isolated):
    with pytest.raises(KernelBenchUnavailable) as error:
        load_problems(levels=[1])
    message = str(error.value)
    assert str(isolated / "shared" / "datasets" / "kernelbench.jsonl") in message
    assert str(isolated / "cache" / "kernelbench") in message
    assert "TRITONRL_NO_DOWNLOAD=1" in message
    assert "KERNELBENCH_JSONL=" in message and "eval.dataset" in message and "grpo.dataset" in message
    assert isinstance(error.value, FileNotFoundError)  # callers that catch FileNotFoundError keep working


def test_default_source_names_the_local_copy_and_never_downloads(isolated, monkeypatch, serve):
    archive = serve(tarball(ARCHIVE_PROBLEMS))
    monkeypatch.setenv("KERNELBENCH_URL", archive.url)
    monkeypatch.delenv("TRITONRL_NO_DOWNLOAD")
    sibling = isolated / "shared" / "datasets" / "kernelbench.jsonl"
    assert default_source() == sibling and not sibling.exists()  # nothing local: the first candidate
    assert archive.requests == 0 and not (isolated / "cache").exists()
    cached = isolated / "cache" / "kernelbench"
    cached.mkdir(parents=True)
    assert default_source() == cached
    jsonl(sibling, 4)
    assert default_source() == sibling


def test_cache_folder_follows_the_environment(monkeypatch, tmp_path):
    monkeypatch.setenv("TRITONRL_CACHE_DIR", str(tmp_path / "mine"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert cache_dir() == tmp_path / "mine"
    monkeypatch.delenv("TRITONRL_CACHE_DIR")
    assert cache_dir() == tmp_path / "xdg" / "tritonrl"
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert cache_dir() == tmp_path / "home" / ".cache" / "tritonrl"


def test_first_use_downloads_only_the_problem_files_then_reads_the_cache(isolated, monkeypatch, serve, capsys):
    members = {
        **ARCHIVE_PROBLEMS,
        f"{TOP}/README.md": "# KernelBench",
        f"{TOP}/src/eval.py": "print('not a problem')",
        f"{TOP}/KernelBench/level1/notes.txt": "not a problem either",
        "../evil.py": "raise SystemExit('escaped the cache')",
        f"{TOP}/KernelBench/level1/../../../evil.py": "raise SystemExit('escaped the cache')",
    }
    links = {f"{TOP}/KernelBench/level1/3_Link.py": "../../../../evil.py"}
    archive = serve(tarball(members, symlinks=links))
    monkeypatch.setenv("KERNELBENCH_URL", archive.url)
    monkeypatch.delenv("TRITONRL_NO_DOWNLOAD")

    problems = load_problems()

    cache = isolated / "cache" / "kernelbench"
    assert [(p.key, p.name) for p in problems] == [("L1/1", "1_AddOne"), ("L1/2", "2_AddTwo"), ("L2/1", "1_AddThree")]
    assert sorted(str(p.relative_to(cache)) for p in cache.rglob("*") if not p.is_dir()) == [
        "level1/1_AddOne.py", "level1/2_AddTwo.py", "level2/1_AddThree.py"]  # no link, no other file
    assert list(isolated.rglob("evil.py")) == []
    assert sorted(p.name for p in (isolated / "cache").iterdir()) == ["kernelbench"]  # no staging folder left
    assert archive.url in capsys.readouterr().err  # the user is told what is being fetched, on stderr

    archive.close()
    monkeypatch.setenv("KERNELBENCH_URL", closed_port_url())
    assert [p.key for p in load_problems(levels=[2])] == ["L2/1"]
    assert archive.requests == 1


def test_an_unreachable_url_fails_quickly_with_the_clear_message_and_leaves_no_cache(isolated, monkeypatch):
    url = closed_port_url()
    monkeypatch.setenv("KERNELBENCH_URL", url)
    monkeypatch.delenv("TRITONRL_NO_DOWNLOAD")
    started = time.monotonic()
    with pytest.raises(KernelBenchUnavailable, match="KERNELBENCH_JSONL=") as error:
        resolve_kernelbench()
    assert time.monotonic() - started < 10
    assert f"downloading {url} failed" in str(error.value)
    assert list((isolated / "cache").iterdir()) == []


@pytest.mark.parametrize(
    "body",
    [
        pytest.param(tarball(ARCHIVE_PROBLEMS)[:-200], id="truncated"),
        pytest.param(b"<html>rate limited</html>", id="not-a-gzip-archive"),
        pytest.param(tarball({f"{TOP}/README.md": "# no problems"}), id="no-problem-files"),
    ],
)
def test_a_bad_archive_leaves_no_partial_cache(isolated, monkeypatch, serve, body):
    monkeypatch.setenv("KERNELBENCH_URL", serve(body).url)
    monkeypatch.delenv("TRITONRL_NO_DOWNLOAD")
    with pytest.raises(KernelBenchUnavailable, match="failed"):
        resolve_kernelbench()
    assert list((isolated / "cache").iterdir()) == []
