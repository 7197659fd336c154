"""The dataset card (card.md) and the terminal summary of a build.

The card holds only what the task outcomes decide, never a timing, so two builds with the same settings
write the same card; timings and retry counts go to summary.json and the terminal table.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

from jaxrl.data.engine.stats import BuildStats, PathYield

BAR_WIDTH = 40
TIMED_STAGES = ("generate", "decontaminate", "validate", "verify", "inductor", "tokenize", "write")


@dataclasses.dataclass(frozen=True)
class CardHeader:
    """The settings a reader of the card needs to know what the data is."""

    generator: str
    seed: int
    scale: str
    families: Sequence[str] | None
    split_rule: str
    targets: tuple[int, int]            # (sft_pairs, rl_tasks)
    max_tokens: int
    tokenizer: str
    verification: str
    decontamination: str                # one line: against what, or why not
    decontaminated: bool
    sandbox: Sequence[str]              # backend/device pairs seen in validation
    rl_split_target: int = 0            # rl_split_tasks (0: none)


def render_card(header: CardHeader, stats: BuildStats) -> str:
    sections = [
        "# Data-engine dataset card",
        _warning(header),
        _about(header, stats),
        _split_table(stats),
        "## Per family and split\n\n" + _family_table(stats),
        "## Yield\n\n" + _funnel(stats),
        "## Verification\n\n" + _verification(stats),
        "## Drops\n\n" + _drops(stats),
        "## Decontamination\n\n" + _decontamination(header, stats),
        "## Token lengths (prompt + completion of the SFT pairs written)\n\n" + _tokens(stats),
    ]
    return "\n\n".join(s for s in sections if s) + "\n"


def _warning(header: CardHeader) -> str:
    if header.decontaminated:
        return ""
    return ("> **NOT DECONTAMINATED.** " + header.decontamination + " Tasks identical to KernelBench problems may be "
            "in this data: do not report KernelBench numbers of a model trained on it.")


def _about(header: CardHeader, stats: BuildStats) -> str:
    families = "all" if header.families is None else ", ".join(header.families)
    lines = [
        f"- generator: `{header.generator}`, seed {header.seed}, scale `{header.scale}`, families: {families}",
        f"- splits: {header.split_rule}; SFT pairs come from the train split only",
        f"- targets: {header.targets[0]} SFT pairs, {header.targets[1]} RL tasks{_rl_split_target(header)}; written: "
        f"{stats.sft_written} SFT pairs, {stats.rl_written} RL tasks{_rl_split_written(header, stats)}, from "
        f"{stats.generated} generated tasks in {stats.shards} shard(s)",
        f"- verification: {header.verification}",
        f"- sandbox: {', '.join(header.sandbox) or 'none used'}",
        f"- tokens counted with `{header.tokenizer}`; pairs over {header.max_tokens} tokens left out",
        f"- decontamination: {header.decontamination}",
    ]
    return "## About\n\n" + "\n".join(lines)


def _split_table(stats: BuildStats) -> str:
    rows = [[split, str(c["rl_tasks"]), str(c["sft_pairs"])] for split, c in stats.splits.items()]
    return "## Per split\n\n" + markdown_table(["split", "RL tasks", "SFT pairs"], rows, right=(1, 2))


def _family_table(stats: BuildStats) -> str:
    rows = [[r.family, r.split, str(r.generated), str(r.dropped), str(r.rl_tasks), str(r.sft_pairs)]
            for r in stats.families]
    return markdown_table(["family", "split", "generated", "dropped", "RL tasks", "SFT pairs"], rows,
                          right=(2, 3, 4, 5))


def _funnel(stats: BuildStats) -> str:
    dropped_validation = sum(n for stage, _, n in stats.drops if stage == "validate")
    dropped_duplicate = sum(n for stage, _, n in stats.drops if stage == "duplicate")
    rows = [
        ["generated", str(stats.generated)],
        ["KernelBench twins removed", str(stats.decontaminated)],
        ["duplicates removed", str(dropped_duplicate)],
        ["references failing validation", str(dropped_validation)],
        ["validated (RL-eligible, every split)", str(stats.validated)],
        ["train tasks without a template", str(stats.no_template)],
        ["teacher pairs verified (template + Inductor)", str(stats.verified_pairs)],
        ["pairs over the token limit", str(stats.too_long)],
        ["SFT pairs written", str(stats.sft_written)],
        ["RL tasks written", str(stats.rl_written)],
    ]
    return markdown_table(["stage", "tasks"], rows, right=(1,))


def _verification(stats: BuildStats) -> str:
    rows = [_yield_row("template", stats.template), _yield_row("inductor", stats.inductor)]
    text = markdown_table(["path", "tried", "verified", "yield", "failures"], rows, right=(1, 2, 3))
    reasons = [[name, _cell(reason), str(n)] for name, path in (("template", stats.template),
                                                                 ("inductor", stats.inductor)) for reason, n in path.reasons]
    if reasons:
        text += "\n\nMost frequent failures:\n\n" + markdown_table(["path", "failure", "pairs"], reasons, right=(2,))
    return text


def _yield_row(name: str, path: PathYield) -> list[str]:
    failures = ", ".join(f"{status} {n}" for status, n in path.failures.items()) or "-"
    return [name, str(path.attempted), str(path.ok), _percent(path.rate), failures]


def _drops(stats: BuildStats) -> str:
    if not stats.drops:
        return "None."
    rows = [[stage, _cell(reason), str(n)] for stage, reason, n in stats.drops]
    return markdown_table(["stage", "reason", "tasks"], rows, right=(2,))


def _decontamination(header: CardHeader, stats: BuildStats) -> str:
    if not header.decontaminated:
        return f"**Not done.** {header.decontamination}"
    matchers = ", ".join(f"{m}: {n}" for m, n in stats.decontam_by_matcher.items()) or "-"
    text = f"{header.decontamination}. Removed {stats.decontaminated} generated task(s) (by matcher: {matchers})."
    if stats.decontam_examples:
        rows = [[e["task_id"], e["family"], e["kernelbench"], e["matcher"]] for e in stats.decontam_examples]
        text += "\n\n" + markdown_table(["task", "family", "KernelBench", "matcher"], rows)
    return text


def _tokens(stats: BuildStats) -> str:
    if not stats.token_histogram:
        return "No pairs."
    peak = max(n for _, n in stats.token_histogram)
    rows = [[label, str(n), "#" * round(BAR_WIDTH * n / peak)] for label, n in stats.token_histogram]
    quantiles = ", ".join(f"{k} {v}" for k, v in stats.token_quantiles.items())
    return markdown_table(["tokens", "pairs", ""], rows, right=(1,)) + f"\n\n{quantiles}."


def markdown_table(header: Sequence[str], rows: Sequence[Sequence[str]], right: Sequence[int] = ()) -> str:
    rule = ["---:" if i in right else "---" for i in range(len(header))]
    lines = [header, rule, *rows]
    return "\n".join("| " + " | ".join(cells) + " |" for cells in lines)


def terminal_summary(stats: BuildStats, timing: Mapping[str, Any], header: CardHeader) -> str:
    """Counts, yields, drop reasons, pairs per minute and where the time went, for the end of a build."""
    total = sum(timing["stages_s"].values())
    lines = [
        f"SFT pairs {stats.sft_written}/{header.targets[0]}, RL tasks {stats.rl_written}/{header.targets[1]}"
        f"{_rl_split_written(header, stats, of_target=True)} from {stats.generated} tasks in {stats.shards} "
        f"shard(s) ({timing['shards_resumed']} resumed)",
        f"yield: template {_percent(stats.template.rate)} of {stats.template.attempted}, "
        f"inductor {_percent(stats.inductor.rate)} of {stats.inductor.attempted}; "
        f"{timing['pairs_per_minute'] or 0:.1f} SFT pairs per minute; "
        f"infra retries {sum(timing['retries'].values())}",
        f"decontamination: {header.decontamination}",
        "",
        "stage          seconds  share",
    ]
    for stage in TIMED_STAGES:
        seconds = timing["stages_s"].get(stage, 0.0)
        lines.append(f"{stage:<13} {seconds:8.1f}  {_percent(seconds / total if total else None):>5}")
    if stats.drops:
        lines += ["", "drops (stage, reason, tasks):"]
        lines += [f"  {stage:<13} {n:6d}  {reason[:90]}" for stage, reason, n in stats.drops[:12]]
    return "\n".join(lines)


def _rl_split_target(header: CardHeader) -> str:
    return f", {header.rl_split_target} rl-split tasks" if header.rl_split_target else ""


def _rl_split_written(header: CardHeader, stats: BuildStats, of_target: bool = False) -> str:
    """The rl-split tasks written, where the build had a target for them."""
    if not header.rl_split_target:
        return ""
    written = stats.splits.get("rl", {}).get("rl_tasks", 0)
    return f", rl-split tasks {written}/{header.rl_split_target}" if of_target else f" ({written} rl-split)"


def _percent(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:.1f}%"


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")
