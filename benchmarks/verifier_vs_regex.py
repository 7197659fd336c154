"""Our static layer against KernelBench's regex checker on the anti-cheat corpus.

For each checker: hacks flagged / hacks, and honest kernels accepted / honest kernels, overall and per
hack category. KernelBench's checker is not part of this repository: pass the path of its
`kernel_static_checker.py` (ScalingIntelligence/KernelBench, src/kernelbench/) and it is imported
from there. Two readings of it are reported: its default errors only ("regex"), and errors or
warnings ("regex+warn", which also counts torch compute ops, nn layers and streams).

With `--full`, every candidate also goes through the whole pipeline via
`sandbox_service.evaluation.evaluate_local(reference_src, candidate_src, options)`, counting a hack as
caught when its status is not `ok`.

    python benchmarks/verifier_vs_regex.py --kernelbench-checker PATH [--policy strict|relaxed] [--full] [--json OUT]
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib.util
import json
import sys
from collections.abc import Callable
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from sandbox_service.options import EvalOptions, InputSet, Policy  # noqa: E402
from sandbox_service.verifier.static_rules import check_static  # noqa: E402

DEFAULT_CORPUS = REPO / "tests" / "sandbox_service" / "corpus"


@dataclasses.dataclass(frozen=True)
class Candidate:
    file: str
    category: str
    honest: bool
    expected_layer: str | None
    code: str
    reference: str
    input_sets: tuple[InputSet, ...] = ()


@dataclasses.dataclass
class Tally:
    hacks_flagged: int = 0
    hacks: int = 0
    honest_accepted: int = 0
    honest: int = 0
    static_catchable_flagged: int = 0
    static_catchable: int = 0

    def add(self, candidate: Candidate, flagged: bool) -> None:
        if candidate.honest:
            self.honest += 1
            self.honest_accepted += not flagged
            return
        self.hacks += 1
        self.hacks_flagged += flagged
        if candidate.expected_layer == "static":
            self.static_catchable += 1
            self.static_catchable_flagged += flagged


def load_corpus(corpus: Path) -> list[Candidate]:
    manifest = yaml.safe_load((corpus / "manifest.yaml").read_text())
    return [
        Candidate(
            file=entry["file"],
            category=entry["category"],
            honest=entry["expected_status"] == "ok",
            expected_layer=entry["expected_layer"],
            code=(corpus / entry["file"]).read_text(),
            reference=(corpus / entry["problem"]).read_text(),
            input_sets=tuple(InputSet(Path(f).stem, (corpus / f).read_text())
                             for f in manifest.get("input_sets", {}).get(entry["problem"], [])),
        )
        for entry in manifest["candidates"]
    ]


def load_kernelbench_checker(path: Path) -> Callable[[str], tuple[bool, list[str], list[str]]]:
    if not path.is_file():
        raise SystemExit(f"--kernelbench-checker: no file at {path} (KernelBench's src/kernelbench/kernel_static_checker.py)")
    spec = importlib.util.spec_from_file_location("kernelbench_static_checker", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    if not hasattr(module, "validate_kernel_static"):
        raise SystemExit(f"{path} has no validate_kernel_static(): not KernelBench's checker?")
    return lambda code: module.validate_kernel_static(code, backend="triton", precision="fp32")


def full_pipeline(policy: Policy, lane) -> Callable[[Candidate], bool]:
    """A hack is caught by the full pipeline (with the problem's input sets) when its status is anything but ok."""
    from sandbox_service.evaluation import evaluate

    options = EvalOptions(policy=policy, time=False)
    return lambda c: evaluate(c.reference, c.code, options, lane, input_sets=c.input_sets).status.value != "ok"


def run(corpus: Path, checker_path: Path, policy: Policy, full: bool) -> dict:
    candidates = load_corpus(corpus)
    regex = load_kernelbench_checker(checker_path)
    verdicts: dict[str, Callable[[Candidate], bool]] = {
        "static": lambda c: bool(check_static(c.code, policy)),
        "regex": lambda c: not regex(c.code)[0],
        "regex+warn": lambda c: (lambda valid, errors, warnings: not valid or bool(warnings))(*regex(c.code)),
    }
    lane = None
    if full:
        import tempfile

        from sandbox_service.lane import Lane

        lane = Lane.create("interpreter", None, warm=1, work_root=Path(tempfile.mkdtemp(prefix="tritonrl-vvr-")))
        verdicts["full"] = full_pipeline(policy, lane)
    totals = {name: Tally() for name in verdicts}
    by_category: dict[str, dict[str, Tally]] = {}
    rows = []
    for candidate in candidates:
        flags = {name: verdict(candidate) for name, verdict in verdicts.items()}
        rows.append({"file": candidate.file, "category": candidate.category, "honest": candidate.honest, **flags})
        for name, flagged in flags.items():
            totals[name].add(candidate, flagged)
            by_category.setdefault(candidate.category, {n: Tally() for n in verdicts})[name].add(candidate, flagged)
    if lane is not None:
        lane.close()
    return {
        "policy": policy.value,
        "totals": {name: dataclasses.asdict(t) for name, t in totals.items()},
        "by_category": {cat: {n: dataclasses.asdict(t) for n, t in tallies.items()} for cat, tallies in sorted(by_category.items())},
        "candidates": rows,
    }


def render(report: dict) -> str:
    names = list(report["totals"])
    lines = [
        f"Policy: {report['policy']}",
        "",
        "| checker | hacks flagged | of the hacks the static layer should catch (manifest) | honest accepted |",
        "|---|---|---|---|",
    ]
    for name in names:
        t = report["totals"][name]
        lines.append(
            f"| {name} | {t['hacks_flagged']}/{t['hacks']} | {t['static_catchable_flagged']}/{t['static_catchable']} "
            f"| {t['honest_accepted']}/{t['honest']} |"
        )
    lines += ["", "| category | " + " | ".join(names) + " |", "|---|" + "---|" * len(names)]
    for category, tallies in report["by_category"].items():
        if category == "honest":
            cells = [f"{tallies[n]['honest_accepted']}/{tallies[n]['honest']} accepted" for n in names]
        else:
            cells = [f"{tallies[n]['hacks_flagged']}/{tallies[n]['hacks']}" for n in names]
        lines.append(f"| {category} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--kernelbench-checker", type=Path, required=True, help="path to KernelBench's kernel_static_checker.py")
    parser.add_argument("--corpus", type=Path, default=DEFAULT_CORPUS, help="folder holding manifest.yaml")
    parser.add_argument("--policy", choices=[p.value for p in Policy], default=Policy.STRICT.value)
    parser.add_argument("--full", action="store_true", help="also run the full pipeline (sandbox_service.evaluation.evaluate_local)")
    parser.add_argument("--json", type=Path, help="also write the report, with per-candidate verdicts, to this file")
    args = parser.parse_args(argv)
    report = run(args.corpus, args.kernelbench_checker, Policy(args.policy), args.full)
    print(render(report))
    if args.json:
        args.json.write_text(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
