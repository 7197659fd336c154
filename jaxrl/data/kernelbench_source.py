"""Where the KernelBench problems are read from, so that a fresh clone works with nothing beside it.

`resolve_kernelbench` returns the first of:
1. the path given explicitly (config `eval.dataset` / `grpo.dataset`, or an argument);
2. `$KERNELBENCH_JSONL`, a JSONL file or a KernelBench-style folder (`level<N>/<id>_<Name>.py`);
3. `$TRITONRL_SHARED_DIR/datasets/kernelbench.jsonl`;
4. `../shared/datasets/kernelbench.jsonl` beside the checkout (CI and the tests read this one);
5. the cache folder `kernelbench/` under `$TRITONRL_CACHE_DIR`, else `$XDG_CACHE_HOME/tritonrl`,
   else `~/.cache/tritonrl`;
6. a download into that cache of the KernelBench repository archive (`$KERNELBENCH_URL`, by default
   GitHub's archive of its main branch), keeping only the `KernelBench/level<N>/*.py` files, unless
   `$TRITONRL_NO_DOWNLOAD=1`.

A path named explicitly (1 or 2) that does not exist is an error rather than a reason to look further:
the user asked for that copy. When nothing is found `KernelBenchUnavailable` says what was tried and how
to point at a copy; callers catch it to fall back to other tasks. `default_source` names the local copy
(steps 2 to 5) without ever downloading, for callers that only want KernelBench when it is already there.

The download is safe to interrupt and to run on a hostile archive: it is extracted into a hidden
temporary folder beside the cache entry, renamed into place only when complete, and only regular files
named `KernelBench/level<N>/<id>_<Name>.py` are written, at paths rebuilt from those two names, so no
member can land outside the cache.
"""

from __future__ import annotations

import os
import shutil
import sys
import tarfile
import tempfile
import urllib.request
import zlib
from pathlib import Path, PurePosixPath

from tqdm import tqdm

from jaxrl.data.kernelbench_files import LEVEL_DIR, PROBLEM_FILE

REPO_ROOT = Path(__file__).resolve().parents[2]
DEFAULT_URL = "https://codeload.github.com/ScalingIntelligence/KernelBench/tar.gz/refs/heads/main"
CACHE_SUBDIR = "kernelbench"
DOWNLOAD_TIMEOUT_S = 30.0
_SHARED_FILE = Path("datasets", "kernelbench.jsonl")


class KernelBenchUnavailable(FileNotFoundError):
    """No KernelBench copy was found and none could be downloaded; the message says what was tried."""


class _DownloadFailed(Exception):
    """The download did not produce a cache entry; the message says why."""


def resolve_kernelbench(explicit: str | os.PathLike | None = None) -> Path:
    """The KernelBench source to read (see the module docstring for the order)."""
    if explicit is not None:
        if not Path(explicit).exists():
            raise FileNotFoundError(f"KernelBench source not found: {explicit} (the given path)")
        return Path(explicit)
    local = default_source()
    if local.exists():
        return local
    if os.environ.get("KERNELBENCH_JSONL"):
        raise FileNotFoundError(f"KernelBench source not found: {local} ($KERNELBENCH_JSONL)")
    tried = _local_candidates()
    url = os.environ.get("KERNELBENCH_URL") or DEFAULT_URL
    if os.environ.get("TRITONRL_NO_DOWNLOAD", "") not in ("", "0"):
        raise KernelBenchUnavailable(_unavailable(tried, "downloading it is disabled (TRITONRL_NO_DOWNLOAD=1)"))
    try:
        return _download(url, tried[-1])
    except _DownloadFailed as exc:
        raise KernelBenchUnavailable(_unavailable(tried, f"downloading {url} failed ({exc})")) from None


def default_source() -> Path:
    """The copy steps 2 to 5 find, without downloading: `$KERNELBENCH_JSONL` when set, else the first local
    candidate that exists, else the first candidate (a path that does not exist)."""
    if os.environ.get("KERNELBENCH_JSONL"):
        return Path(os.environ["KERNELBENCH_JSONL"])
    candidates = _local_candidates()
    return next((path for path in candidates if path.exists()), candidates[0])


def cache_dir() -> Path:
    """The project's cache root: $TRITONRL_CACHE_DIR, else $XDG_CACHE_HOME/tritonrl, else ~/.cache/tritonrl."""
    if os.environ.get("TRITONRL_CACHE_DIR"):
        return Path(os.environ["TRITONRL_CACHE_DIR"])
    if os.environ.get("XDG_CACHE_HOME"):
        return Path(os.environ["XDG_CACHE_HOME"]) / "tritonrl"
    return Path.home() / ".cache" / "tritonrl"


def _local_candidates() -> list[Path]:
    """Steps 3 to 5, in order; the last is the cache entry a download creates."""
    candidates = []
    if os.environ.get("TRITONRL_SHARED_DIR"):
        candidates.append(Path(os.environ["TRITONRL_SHARED_DIR"]) / _SHARED_FILE)
    candidates.append(REPO_ROOT.parent / "shared" / _SHARED_FILE)
    candidates.append(cache_dir() / CACHE_SUBDIR)
    return candidates


def _unavailable(tried: list[Path], download: str) -> str:
    return (
        f"KernelBench not found: looked for {', '.join(map(str, tried))}, and {download}. "
        "Point at a copy with KERNELBENCH_JSONL=/path/to/kernelbench.jsonl (or a KernelBench checkout's "
        "KernelBench/ folder of level<N>/<id>_<Name>.py files), or set eval.dataset / grpo.dataset in the "
        "config (e.g. grpo.dataset=/path/to/kernelbench.jsonl on the command line)."
    )


def _download(url: str, target: Path) -> Path:
    """Fetch the archive at `url` and keep its problem files in `target`, which appears only when complete."""
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=f".{target.name}-", dir=target.parent))
    except OSError as exc:
        raise _DownloadFailed(f"cannot write the cache: {exc}") from exc
    try:
        print(f"KernelBench: downloading {url} into {target} (once)", file=sys.stderr, flush=True)
        with urllib.request.urlopen(url, timeout=DOWNLOAD_TIMEOUT_S) as response:
            size = response.headers.get("Content-Length")
            with tqdm.wrapattr(response, "read", total=int(size) if size else None, desc="KernelBench",
                               file=sys.stderr) as stream:
                written = _extract_problems(stream, staging)
        if not written:
            raise _DownloadFailed("the archive holds no KernelBench/level<N>/<id>_<Name>.py file")
        try:
            staging.rename(target)
        except OSError:
            if not target.is_dir():  # else another process finished first: keep its copy
                raise
        return target
    except (OSError, tarfile.TarError, EOFError, zlib.error) as exc:  # URLError and timeouts are OSErrors
        raise _DownloadFailed(f"{type(exc).__name__}: {exc}") from exc
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def _extract_problems(stream, folder: Path) -> int:
    """Write the archive's problem files into `folder` as level<N>/<file>; returns how many."""
    written = 0
    with tarfile.open(fileobj=stream, mode="r|gz") as archive:
        for member in archive:
            relative = _problem_path(member)
            if relative is None:
                continue
            destination = folder / relative
            destination.parent.mkdir(exist_ok=True)
            destination.write_bytes(archive.extractfile(member).read())
            written += 1
    return written


def _problem_path(member: tarfile.TarInfo) -> PurePosixPath | None:
    """`level<N>/<id>_<Name>.py` for a regular file `<top>/KernelBench/level<N>/<id>_<Name>.py`; None for
    any other member (links, devices, absolute names or `..` parts included)."""
    parts = PurePosixPath(member.name).parts
    if not member.isfile() or len(parts) < 3 or ".." in parts or parts[0] == "/":
        return None
    package, level, name = parts[-3:]
    if package != "KernelBench" or not LEVEL_DIR.match(level) or not PROBLEM_FILE.match(name):
        return None
    return PurePosixPath(level, name)
