"""KernelBench metrics: hand-computed per-sample rates, unbiased @k rates, speedup and the tables."""

from __future__ import annotations

import math

import pytest

from jaxrl.evaluation.metrics import SampleRecord, compute_metrics, pass_at_k


def rec(problem, sample, status, valid=False, compiled=False, correct=False, speedup=None, level=None):
    level = level if level is not None else int(problem[1])
    return {"problem": problem, "level": level, "sample": sample, "status": status, "valid": valid,
            "compiled": compiled, "correct": correct, "speedup": speedup, "trials": 5, "violations": []}


OK = dict(valid=True, compiled=True, correct=True)

# Three problems, three samples each; the expected values below are worked out by hand.
RECORDS = [
    rec("L1/1", 0, "ok", **OK, speedup=2.5),
    rec("L1/1", 1, "incorrect", valid=True, compiled=True),
    rec("L1/1", 2, "cheat", compiled=True, correct=True, speedup=4.0),  # matched outputs, but a hack
    rec("L1/2", 0, "compile_error"),
    rec("L1/2", 1, "ok", **OK, speedup=0.5),
    rec("L1/2", 2, "infra_error"),
    rec("L2/1", 0, "ok", **OK, speedup=1.5),
    rec("L2/1", 1, "ok", **OK, speedup=1.0),  # not > 1: not fast_1
    rec("L2/1", 2, "format_error"),
]


@pytest.mark.parametrize("n", range(1, 12))
def test_pass_at_k_equals_the_binomial_formula(n):
    for c in range(n + 1):
        for k in range(1, n + 1):
            expected = 1.0 - math.comb(n - c, k) / math.comb(n, k)
            assert pass_at_k(n, c, k) == pytest.approx(expected, abs=1e-12)


def test_pass_at_k_values_and_stability():
    assert pass_at_k(10, 3, 1) == pytest.approx(0.3)
    assert pass_at_k(4, 2, 2) == pytest.approx(5 / 6)
    assert pass_at_k(5, 0, 5) == 0.0 and pass_at_k(5, 5, 1) == 1.0
    assert pass_at_k(2000, 1, 1000) == pytest.approx(0.5)  # C(2000, 1000) would overflow a float
    with pytest.raises(ValueError):
        pass_at_k(3, 1, 4)
    with pytest.raises(ValueError):
        pass_at_k(3, 4, 1)


def test_hand_computed_metrics_per_level_and_overall():
    metrics = compute_metrics(RECORDS, ks=[3, 2])
    assert metrics.ks == (1, 2, 3)
    assert [g.name for g in metrics.groups] == ["level 1", "level 2", "all"]

    l1 = metrics.group("level 1")
    assert (l1.problems, l1.samples, l1.infra_errors, l1.timed_samples) == (2, 6, 1, 2)
    expected_l1 = {"valid": 1 / 2, "compiled": 2 / 3, "correct": 1 / 3, "fast_1": 1 / 6, "fast_2": 1 / 6}
    assert l1.rates[1] == pytest.approx(expected_l1)
    assert l1.rate("correct", 2) == pytest.approx(2 / 3)  # each problem: 1 - C(2,2)/C(3,2)
    assert l1.rate("fast_1", 2) == pytest.approx(1 / 3)
    assert l1.rate("correct", 3) == pytest.approx(1.0)
    assert l1.mean_speedup == pytest.approx(math.sqrt(2.5 * 0.5))  # the cheat's 4.0 is not counted

    l2 = metrics.group("level 2")
    assert l2.rates[1] == pytest.approx({"valid": 2 / 3, "compiled": 2 / 3, "correct": 2 / 3, "fast_1": 1 / 3, "fast_2": 0.0})
    assert l2.rate("correct", 2) == 1.0  # two of three correct: any pair holds one
    assert l2.mean_speedup == pytest.approx(math.sqrt(1.5))

    overall = metrics.group("all")
    assert (overall.problems, overall.samples, overall.infra_errors) == (3, 9, 1)
    assert overall.rate("valid") == pytest.approx(5 / 9)
    assert overall.rate("correct") == pytest.approx(4 / 9)
    assert overall.rate("fast_1") == pytest.approx(2 / 9)
    assert overall.rate("correct", 2) == pytest.approx((2 / 3 + 2 / 3 + 1) / 3)
    assert overall.mean_speedup == pytest.approx((2.5 * 0.5 * 1.5 * 1.0) ** 0.25)


def test_each_problem_weighs_the_same_whatever_its_sample_count():
    records = [rec("L1/1", 0, "ok", **OK, speedup=3.0)] + [rec("L1/2", i, "incorrect", valid=True) for i in range(3)]
    group = compute_metrics(records, ks=[2]).group("all")
    assert group.rate("correct") == 0.5
    assert group.rate("correct", 2) is None  # L1/1 has a single sample


def test_untimed_runs_report_no_speed_rather_than_zero():
    untimed = compute_metrics([rec("L1/1", 0, "ok", **OK), rec("L1/1", 1, "incorrect")]).group("all")
    assert untimed.rate("correct") == 0.5
    assert untimed.rate("fast_1") is None and untimed.mean_speedup is None
    nothing_correct = compute_metrics([rec("L1/1", 0, "incorrect")]).group("all")
    assert nothing_correct.rate("fast_1") == 0.0
    partly_timed = compute_metrics([rec("L1/1", 0, "ok", **OK, speedup=1.2), rec("L1/1", 1, "ok", **OK)]).group("all")
    assert partly_timed.rate("fast_1") == 0.5 and partly_timed.timed_samples == 1


@pytest.mark.parametrize(
    "records, message",
    [
        ([rec("L1/1", 0, "ok", valid=True, correct=False)], "inconsistent verdict"),
        ([rec("L1/1", 0, "incorrect", valid=True, correct=True)], "inconsistent verdict"),
        ([rec("L1/1", 0, "great")], "unknown status 'great'"),
        ([rec("L1/1", 0, "ok", **OK, speedup=-1.0)], "speedup must be finite and > 0"),
        ([rec("L1/1", 0, "ok", **OK, speedup=float("nan"))], "speedup must be finite"),
        ([rec("L1/1", 0, "incorrect"), rec("L1/1", 0, "incorrect")], "duplicate record"),
        ([rec("L1/1", 0, "incorrect"), rec("L1/1", 1, "incorrect", level=2)], "levels 1 and 2"),
        ([{"problem": "L1/1", "level": 1, "status": "ok"}], "missing sample, valid, correct"),
        ([rec("L1/1", -1, "incorrect")], "sample index"),
        ([rec("L1/1", 0, "incorrect", valid="yes")], "valid must be a bool"),
        ([], "no sample records"),
    ],
)
def test_bad_records_are_rejected(records, message):
    with pytest.raises(ValueError, match=message):
        compute_metrics(records)


def test_records_may_be_dataclasses():
    record = SampleRecord("L3/4", 3, 0, "ok", True, True, True, 2)
    assert record.speedup == 2.0
    assert compute_metrics([record]).group("level 3").rate("fast_2") == 0.0  # 2.0 is not > 2


def markdown_rows(text):
    lines = text.splitlines()
    header = [c.strip() for c in lines[0].strip("|").split("|")]
    assert set(lines[1].replace("|", "").replace("-", "").replace(":", "")) == set()
    return [dict(zip(header, (c.strip() for c in line.strip("|").split("|")))) for line in lines[2:]]


def test_markdown_and_text_tables():
    metrics = compute_metrics(RECORDS, ks=[2])
    rows = markdown_rows(metrics.table(markdown=True))
    assert [r["group"] for r in rows] == ["level 1", "level 2", "all"]
    assert rows[0] == {
        "group": "level 1", "problems": "2", "samples": "6", "valid": "50.0%", "compiled": "66.7%",
        "correct": "33.3%", "fast_1": "16.7%", "fast_2": "16.7%", "speedup": "1.12x",
        "correct@2": "66.7%", "fast_1@2": "33.3%", "fast_2@2": "33.3%", "infra_err": "1",
    }
    text = metrics.table()
    lines = text.splitlines()
    assert lines[0].split() == list(rows[0])
    assert set(lines[1].replace(" ", "")) == {"-"}
    assert lines[2].split() == ["level", "1", "2", "6", "50.0%", "66.7%", "33.3%", "16.7%", "16.7%", "1.12x", "66.7%", "33.3%", "33.3%", "1"]
    untimed = compute_metrics([rec("L1/1", 0, "ok", **OK)]).table()
    assert untimed.splitlines()[2].split()[7:10] == ["-", "-", "-"]


def test_broken_references_count_as_failures_with_their_own_column():
    records = [*RECORDS, rec("L2/2", 0, "reference_error", valid=True), rec("L2/2", 1, "reference_error", valid=True)]
    metrics = compute_metrics(records)
    level_2, overall = metrics.groups[1], metrics.groups[2]
    assert (level_2.reference_errors, level_2.infra_errors, overall.reference_errors) == (2, 0, 2)
    assert level_2.rate("correct") == pytest.approx((2 / 3 + 0) / 2)  # problem L2/2 scores nothing
    rows = markdown_rows(metrics.table(markdown=True))
    assert [(r["group"], r["ref_err"]) for r in rows] == [("level 1", "0"), ("level 2", "2"), ("all", "2")]
    assert "ref_err" not in compute_metrics(RECORDS).table()


def test_to_dict_is_plain_data():
    data = compute_metrics(RECORDS, ks=[2]).to_dict()
    assert data["ks"] == [1, 2]
    assert data["groups"][2]["name"] == "all"
    assert data["groups"][0]["rates"]["2"]["correct"] == pytest.approx(2 / 3)
