"""Intervals, the paired comparison and the results.json layout of issue 21."""

from __future__ import annotations

import pytest

from jaxrl.evaluation.stats import (
    paired_difference, correct_t0_scores, results_json, set_summary, sign_test, wilson,
)


def rec(problem, sample, status="ok", speedup=None):
    return {"problem": problem, "sample": sample, "status": status, "speedup": speedup}


def test_wilson_matches_the_textbook_values_and_stays_inside_zero_one():
    lo, hi = wilson(8, 10)
    assert lo == pytest.approx(0.4902, abs=1e-4) and hi == pytest.approx(0.9433, abs=1e-4)
    assert wilson(0, 20)[0] == 0.0 and 0 < wilson(0, 20)[1] < 0.2
    assert wilson(20, 20)[1] == 1.0


def test_sign_test_is_the_exact_binomial():
    assert sign_test(0, 0) == 1.0
    assert sign_test(9, 1) == pytest.approx(2 * 11 / 1024)
    assert sign_test(5, 5) == 1.0


def test_set_summary_reports_every_figure_with_intervals():
    greedy = [rec(f"p{i}", 0, "ok" if i < 6 else "incorrect", 1.5 if i < 3 else 0.8) for i in range(10)]
    sampled = [rec(f"p{i}", j, "ok" if (i + j) % 2 else "incorrect", 2.5 if j == 1 else 1.2) for i in range(10)
               for j in range(8)]
    sampled[0] = rec("p0", 0, "cheat")
    s = set_summary(greedy, sampled, ks=(1, 8))
    assert s.n == 10 and s.correct_t0 == 0.6 and s.correct_t0_ci == wilson(6, 10)
    assert s.pass_at[1] == pytest.approx(0.5) and s.pass_at[8] == 1.0
    lo, hi = s.pass_at_ci[1]
    assert lo - 1e-9 <= 0.5 <= hi + 1e-9
    assert s.fast_2 is not None and 0 < s.fast_2 < s.fast_1
    assert s.mean_speedup > 1.0 and s.mean_speedup_ci[0] <= s.mean_speedup <= s.mean_speedup_ci[1]
    assert s.cheat_share == pytest.approx(1 / 90) and s.infra_errors == 0


def test_paired_difference_on_the_same_problems():
    a = correct_t0_scores([rec(f"p{i}", 0, "ok" if i < 10 else "incorrect") for i in range(40)])
    b = correct_t0_scores([rec(f"p{i}", 0, "ok" if i < 30 else "incorrect") for i in range(40)])
    d = paired_difference(a, b)
    assert d.n == 40 and d.mean == pytest.approx(0.5) and d.better == 20 and d.worse == 0
    assert d.ci[0] > 0.3 and d.p_value < 1e-5
    same = paired_difference(a, a)
    assert same.mean == 0.0 and same.p_value == 1.0
    with pytest.raises(ValueError):
        paired_difference({"x": 1.0}, {"y": 1.0})


def test_results_json_has_the_issue_layout_with_seed_lists():
    greedy = [rec(f"p{i}", 0, "ok" if i < 4 else "incorrect") for i in range(10)]
    s1, s2 = set_summary(greedy), set_summary([rec(f"p{i}", 0, "ok" if i < 6 else "incorrect") for i in range(10)])
    out = results_json({"A": {"sft": s1, "grpo_hrd": [s1, s2]}})
    a = out["sets"]["A"]
    assert set(a["sft"]) == {"n", "correct_t0", "correct_t0_ci", "fast_1", "infra_errors"}
    assert a["grpo_hrd"]["correct_t0"] == pytest.approx(0.5) and len(a["grpo_hrd_seeds"]) == 2
    lo, hi = a["grpo_hrd"]["correct_t0_ci"]
    assert lo < 0.5 < hi and hi - lo < s1.correct_t0_ci[1] - s1.correct_t0_ci[0]  # pooled: narrower
    with pytest.raises(ValueError):
        results_json({"F": {"sft": s1}})
    with pytest.raises(ValueError):
        results_json({"A": {"teacher": s1}})
