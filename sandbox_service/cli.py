"""Command line: `serve`, `check`, `inductor` and `demo` (see docs/sandbox.md).

`check --json` prints exactly one JSON object (the EvalResult contract) on stdout. Exit codes:
0 an evaluation ran (whatever the verdict); 2 usage error (a missing file, a reference that cannot be judged
against (status reference_error), a backend this machine lacks, a --target that does not answer within
REACH_TIMEOUT_S); 3 infrastructure error. `inductor` exits 0 when
it wrote a module, 1 when Inductor's output could not stand alone (or failed verification with --verify).
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from pathlib import Path

from sandbox_service.options import EvalOptions
from sandbox_service.results import EvalResult, Status

EXIT_OK, EXIT_USAGE, EXIT_INFRA = 0, 2, 3
REACH_TIMEOUT_S = 5.0


class Unreachable(Exception):
    """A --target server that does not answer: the address to fix, not an evaluation to charge."""


def _connect(targets: list[str]):
    """A client on `targets` once each has answered a server-info call within REACH_TIMEOUT_S."""
    import grpc

    from sandbox_service.client import SandboxClient

    client = SandboxClient(targets)
    try:
        client.server_info(timeout_s=REACH_TIMEOUT_S)
    except grpc.RpcError as exc:
        client.close()
        raise Unreachable(f"cannot reach the sandbox server(s) {', '.join(targets)} within {REACH_TIMEOUT_S:.0f} s "
                          f"({exc.code().name}); start one with `python -m sandbox_service serve --port PORT` "
                          "or fix --target") from None
    return client
EXAMPLES = Path(__file__).resolve().parent / "examples"


def _options(args: argparse.Namespace) -> EvalOptions:
    return EvalOptions(
        trials=args.trials,
        seed=args.seed,
        time=not args.no_time,
        timeout_s=args.timeout,
        policy=args.policy,
        candidate_format=args.format,
    )


def _judge_config(args: argparse.Namespace):
    """The LLM judge's settings when --llm-judge-url is given, else None (the layer is off)."""
    if not args.llm_judge_url:
        return None
    from sandbox_service.verifier.llm_judge import JudgeConfig

    if not args.llm_judge_model:
        raise ValueError("--llm-judge-model is required with --llm-judge-url")
    return JudgeConfig(
        url=args.llm_judge_url,
        model=args.llm_judge_model,
        api_key_env=args.llm_judge_key_env,
        timeout_s=args.llm_judge_timeout,
    )


def _add_judge_arguments(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("LLM judge (optional layer; off unless --llm-judge-url is given)")
    group.add_argument("--llm-judge-url", help="OpenAI-compatible endpoint, e.g. http://host:8000/v1")
    group.add_argument("--llm-judge-model", help="model name to ask")
    group.add_argument("--llm-judge-key-env", help="name of the environment variable holding the API key")
    group.add_argument("--llm-judge-timeout", type=float, default=60.0, help="seconds per review")


def _summary(result: EvalResult) -> str:
    lines = [f"status: {result.status.value}  (valid={result.valid}, correct={result.correct})"]
    lines.append(f"trials: {result.trials_passed}/{result.trials} passed, max abs error {result.max_abs_error}")
    if result.speedup is not None:
        flag = "  [implausible: check by hand]" if result.speedup_flagged else ""
        lines.append(
            f"time: reference {result.ref_time_us:.1f} us, candidate {result.candidate_time_us:.1f} us, "
            f"speedup {result.speedup:.3f}x{flag}"
        )
    for v in result.violations:
        where = f" (line {v.line})" if v.line else ""
        lines.append(f"violation [{v.layer}/{v.rule}]{where}: {v.message}")
    if result.error:
        lines.append(f"error: {result.error}")
    lines.append(f"backend: {result.backend}  device: {result.device}  duration: {result.duration_s:.2f} s")
    return "\n".join(lines)


def cmd_check(args: argparse.Namespace) -> int:
    for path in (args.reference, args.candidate):
        if not path.is_file():
            print(f"error: no such file: {path}", file=sys.stderr)
            return EXIT_USAGE
    reference, candidate = args.reference.read_text(), args.candidate.read_text()
    try:
        options = _options(args)
        judge_config = _judge_config(args)
        if judge_config and args.target:
            raise ValueError("--llm-judge-* configures a local evaluation; a server is given its judge by `serve`")
        judge = None
        if judge_config:
            from sandbox_service.verifier.llm_judge import OpenAIChatJudge

            judge = OpenAIChatJudge(judge_config)
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    if args.target:
        with _connect(args.target) as client:
            result = client.evaluate(reference, candidate, options, timeout_s=options.timeout_s + 120)
    else:
        from sandbox_service.evaluation import evaluate_local

        result = evaluate_local(reference, candidate, options, args.backend, judge)
    print(result.to_json() if args.json else _summary(result))
    if result.status == Status.REFERENCE_ERROR:  # the user's reference file, not the candidate
        print(f"error: {args.reference} cannot be judged against: {result.error.splitlines()[0] if result.error else ''}",
              file=sys.stderr)
        return EXIT_USAGE
    return EXIT_INFRA if result.status == Status.INFRA_ERROR else EXIT_OK


def cmd_serve(args: argparse.Namespace) -> int:
    from sandbox_service.server import ServerConfig, serve_forever

    try:
        judge = _judge_config(args)
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    config = ServerConfig(
        judge=judge,
        host=args.host,
        port=args.port,
        backend=args.backend,
        gpus=tuple(args.gpus or ()),
        workers=args.workers,
        queue_capacity=args.queue,
        warm=args.warm,
        judges=args.judges,
        gpu_memory_fraction=args.gpu_memory_fraction,
        grace_s=args.grace,
    )
    return serve_forever(config, args.ready_file, args.exit_on_stdin_eof)


def cmd_demo(args: argparse.Namespace) -> int:
    """Start a local server and evaluate a correct, an incorrect and a cheating candidate."""
    from sandbox_service.client import SandboxClient

    reference = (EXAMPLES / "scaled_add_reference.py").read_text()
    names = ["scaled_add_correct", "scaled_add_incorrect", "scaled_add_cheat"]
    print("starting a local sandbox server ...", flush=True)
    with SandboxClient.embedded(backend=args.backend) as client:
        info = client.server_info()[0]
        print(f"server: backend {info.backend}, devices {', '.join(info.devices)}, {info.workers} workers", flush=True)
        pairs = [(reference, (EXAMPLES / f"{name}.py").read_text()) for name in names]
        results = dict(client.evaluate_many(pairs))
    print(f"\n{'candidate':<24} {'status':<14} {'valid':<6} {'correct':<8} {'trials':<7} {'speedup':<8} why")
    for index, name in enumerate(names):
        r = results[index]
        why = r.violations[0].message if r.violations else r.error.splitlines()[0] if r.error else ""
        speedup = f"{r.speedup:.2f}x" if r.speedup is not None else "-"
        print(f"{name:<24} {r.status.value:<14} {str(r.valid):<6} {str(r.correct):<8} "
              f"{r.trials_passed}/{r.trials:<5} {speedup:<8} {why[:90]}")
    if args.json:
        print(json.dumps({names[i]: results[i].to_dict() for i in range(len(names))}, indent=1))
    failed = [r for r in results.values() if r.status == Status.INFRA_ERROR]
    return EXIT_INFRA if failed else EXIT_OK


def cmd_inductor(args: argparse.Namespace) -> int:
    """Compile a reference with TorchInductor into a standalone ModelNew (optionally verified)."""
    from sandbox_service.client import SandboxClient
    from sandbox_service.options import InductorOptions
    from sandbox_service.results import InductorStatus

    if not args.reference.is_file():
        print(f"error: no such file: {args.reference}", file=sys.stderr)
        return EXIT_USAGE
    reference = args.reference.read_text()
    client = _connect(args.target) if args.target else SandboxClient.embedded(backend=args.backend, workers=1)
    with client:
        result = client.inductor(reference, InductorOptions(timeout_s=args.timeout))
        verdict = None
        if args.verify and result.status == InductorStatus.OK:
            verdict = client.evaluate(reference, result.source, EvalOptions(time=False, candidate_format="code"))
    if args.out and result.status == InductorStatus.OK:
        args.out.write_text(result.source)
    if args.json:
        data = result.to_dict()
        data["verification"] = verdict.to_dict() if verdict is not None else None
        print(json.dumps(data, sort_keys=True))
    else:
        if result.status == InductorStatus.OK and not args.out:
            print(result.source)
        print(f"inductor: {result.status.value}, {result.kernels} kernel(s), {result.duration_s:.1f} s on "
              f"{result.device or result.backend}" + (f": {result.reason}" if result.reason else ""), file=sys.stderr)
        if verdict is not None:
            print(f"verification: {verdict.status.value}" + (f": {verdict.error.splitlines()[0]}" if verdict.error else ""),
                  file=sys.stderr)
    if result.status == InductorStatus.INFRA_ERROR:
        return EXIT_INFRA
    ok = result.status == InductorStatus.OK and (verdict is None or verdict.status == Status.OK)
    return EXIT_OK if ok else 1


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m sandbox_service", description="Triton kernel sandbox")
    parser.add_argument("--log-level", default="INFO", choices=["DEBUG", "INFO", "WARNING", "ERROR"])
    sub = parser.add_subparsers(dest="command", required=True)

    serve = sub.add_parser("serve", help="run the gRPC server")
    serve.add_argument("--host", default="127.0.0.1", help="address to bind (0.0.0.0 to accept remote clients)")
    serve.add_argument("--port", type=int, default=50051, help="0 picks a free port")
    serve.add_argument("--backend", default="auto", choices=["auto", "cuda", "interpreter"])
    serve.add_argument("--gpus", type=int, nargs="*", help="GPU indices to use (default: all)")
    serve.add_argument("--workers", type=int, help="concurrent evaluations per GPU (or on the CPU)")
    serve.add_argument("--queue", type=int, default=64, help="queued evaluations before RESOURCE_EXHAUSTED")
    serve.add_argument("--warm", type=int, help="candidate processes kept forked and ready per lane")
    serve.add_argument("--judges", type=int, help="judge processes per lane (default: 8 on a GPU, 1 on the CPU)")
    serve.add_argument("--gpu-memory-fraction", type=float, default=0.9,
                       help="share of each GPU's memory evaluations may use (less when a trainer shares it)")
    serve.add_argument("--grace", type=float, default=30.0, help="seconds running jobs get at shutdown")
    serve.add_argument("--ready-file", type=Path, help="write {address, port, backend} here once serving")
    serve.add_argument("--exit-on-stdin-eof", action="store_true", help="stop when stdin closes (embedded mode)")
    _add_judge_arguments(serve)
    serve.set_defaults(func=cmd_serve)

    check = sub.add_parser("check", help="evaluate one reference/candidate pair")
    check.add_argument("reference", type=Path)
    check.add_argument("candidate", type=Path, help="a module with ModelNew, or a completion with a fenced block")
    check.add_argument("--backend", default="auto", choices=["auto", "cuda", "interpreter"])
    check.add_argument("--target", action="append", help="HOST:PORT of a server (repeatable); default: evaluate here")
    check.add_argument("--json", action="store_true", help="print one JSON object")
    check.add_argument("--trials", type=int, default=5)
    check.add_argument("--seed", type=int, default=42)
    check.add_argument("--no-time", action="store_true", help="skip timing")
    check.add_argument("--timeout", type=float, default=180.0)
    check.add_argument("--policy", default="strict", choices=["strict", "relaxed"])
    check.add_argument("--format", default="auto", choices=["auto", "completion", "code"])
    _add_judge_arguments(check)
    check.set_defaults(func=cmd_check)

    inductor = sub.add_parser("inductor", help="compile a reference with TorchInductor into a standalone ModelNew")
    inductor.add_argument("reference", type=Path)
    inductor.add_argument("--backend", default="auto", choices=["auto", "cuda", "interpreter"])
    inductor.add_argument("--target", action="append", help="HOST:PORT of a server (repeatable); default: a local one")
    inductor.add_argument("--out", type=Path, help="write the module here (default: stdout)")
    inductor.add_argument("--verify", action="store_true", help="also evaluate the module against the reference")
    inductor.add_argument("--json", action="store_true", help="print one JSON object (the module in `source`)")
    inductor.add_argument("--timeout", type=float, default=300.0)
    inductor.set_defaults(func=cmd_inductor)

    demo = sub.add_parser("demo", help="start a local server and evaluate three example candidates")
    demo.add_argument("--backend", default="auto", choices=["auto", "cuda", "interpreter"])
    demo.add_argument("--json", action="store_true", help="also print the full results")
    demo.set_defaults(func=cmd_demo)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    # Logs go to stderr so that `check --json` keeps stdout to exactly one JSON object.
    logging.basicConfig(level=args.log_level, stream=sys.stderr, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    from sandbox_service.devices import BackendUnavailable

    try:
        return args.func(args)
    except (BackendUnavailable, Unreachable) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_USAGE
