"""How sure a pass rate or a gain is: the intervals and paired tests that stage and checkpoint evaluations report
(``toolworld.scoring.metrics``), checked against hand-computed values."""

from __future__ import annotations

import math

from toolworld.scoring.metrics import paired_gain, sign_test, task_interval, wilson


def test_the_paired_gain_is_the_mean_per_task_difference_with_its_interval():
    before = {"a": 1.0, "b": 0.0, "c": 1.0, "d": 0.0, "only-before": 1.0}
    after = {"a": 1.0, "b": 1.0, "c": 0.0, "d": 1.0, "only-after": 0.0}
    got = paired_gain(before, after)
    # differences on the four shared tasks: 0, +1, -1, +1 -> mean 0.25; variance (0.0625+0.5625+1.5625+0.5625)/3
    half = 1.96 * math.sqrt(2.75 / 3 / 4)
    assert got["gain"] == 0.25 and got["tasks"] == 4
    assert got["ci"] == [round(0.25 - half, 4), round(0.25 + half, 4)] and got["ci"][0] < 0 < got["ci"][1]
    # fixed 2, broke 1: a split at least this uneven has probability (1 + 3 + 3 + 1)/8 both ways -> capped at 1
    assert (got["fixed"], got["broke"], got["p"]) == (2, 1, 1.0)


def test_a_large_consistent_gain_has_an_interval_above_zero_and_a_small_p():
    before = {f"t{i}": 0.0 for i in range(20)}
    after = {f"t{i}": 1.0 if i < 12 else 0.0 for i in range(20)}
    got = paired_gain(before, after)
    assert got["gain"] == 0.6 and got["ci"][0] > 0.35 and (got["fixed"], got["broke"]) == (12, 0)
    assert got["p"] == round(2 / 2**12, 4)
    # rates from several trials per task: a task that went from 1 of 4 to 3 of 4 counts +0.5, and as fixed
    rated = paired_gain({"x": 0.25, "y": 0.5}, {"x": 0.75, "y": 0.5})
    assert rated["gain"] == 0.25 and (rated["fixed"], rated["broke"]) == (1, 0)


def test_no_change_on_every_task_is_not_certainty_of_no_change():
    same = {f"t{i}": float(i % 2) for i in range(100)}
    got = paired_gain(same, dict(same))
    # zero variance: the bound comes from how many tasks could have moved unseen (Wilson's 100 of 100: ~96.3%)
    w = wilson(100, 100)[0]
    assert got["gain"] == 0.0 and got["ci"] == [round(-(1 - w), 4), round(1 - w, 4)]
    assert 0.03 < got["ci"][1] < 0.04 and (got["fixed"], got["broke"], got["p"]) == (0, 0, 1.0)
    # every task fixed: the gain is 1 and could be a little less, never more
    up = paired_gain({f"t{i}": 0.0 for i in range(20)}, {f"t{i}": 1.0 for i in range(20)})
    assert up["gain"] == 1.0 and up["ci"][1] == 1.0 and 0.6 < up["ci"][0] < 1.0
    # one task, or none: as wide as a rate difference can be, or nearly
    assert paired_gain({"a": 1.0}, {"a": 1.0})["ci"][1] > 0.5
    assert paired_gain({}, {"a": 1.0}) == {"gain": 0.0, "ci": [-1.0, 1.0], "tasks": 0, "fixed": 0, "broke": 0,
                                           "p": 1.0}


def test_the_interval_of_a_sampled_pass1_counts_a_tasks_trials_as_fewer_draws():
    # four trials on each of 50 tasks, all-or-nothing per task: as uncertain as 50 draws, not 200
    lo, hi = task_interval([1.0] * 25 + [0.0] * 25, 4)
    assert (lo, hi) == wilson(25, 50)  # p(1-p)/(Var/n) = 0.25 / (0.25*50/49/50) = 49, never fewer than n
    assert hi - lo > 1.9 * (wilson(100, 200)[1] - wilson(100, 200)[0]) / 2
    # trials that vary within a task as coin flips: as many draws as trials, never more
    assert task_interval([0.5, 0.25, 0.75, 0.5], 4) == wilson(8, 16)
    # nothing passed: still an interval above zero, as wide as that many trials allow
    assert task_interval([0.0] * 4, 2) == wilson(0, 8) and wilson(0, 8)[1] > 0.3
    assert task_interval([1.0] * 4, 2)[0] < 1.0 and task_interval([], 3) == (0.0, 1.0)


def test_the_sign_test_is_exact_and_two_sided():
    assert sign_test(0, 0) == 1.0 and sign_test(3, 3) == 1.0
    assert sign_test(5, 0) == sign_test(0, 5) == 2 / 32  # one split of five as uneven, each way
    assert math.isclose(sign_test(8, 2), 2 * (1 + 10 + 45) / 1024)
