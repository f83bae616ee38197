"""Run metrics: pass@k, pass^k, the ``summary.json`` of a run, and how sure a pass rate or a gain is (Wilson and
task-clustered intervals, paired gains with the sign test), which training evaluations report.

Infra-errored trials (the model server died, our code crashed) say nothing about the agent: they are counted
apart (``infra_errors``) and left out of every other number, so a flaky server lowers the number of scored
trials, never the success rate.
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from fractions import Fraction
from typing import TYPE_CHECKING, Any

from .model import SCORER_VERSION, Score

if TYPE_CHECKING:
    from ..records.trajectory import Trajectory
    from ..tasks.model import Task


def _check(n: int, c: int, k: int) -> None:
    if not 0 <= c <= n:
        raise ValueError(f"need 0 <= c <= n, got n={n}, c={c}")
    if not 1 <= k <= n:
        raise ValueError(f"need 1 <= k <= n (k trials drawn from n), got n={n}, k={k}")


def pass_at_k(n: int, c: int, k: int) -> float:
    """Chance that at least one of k trials drawn from n (c of them successes) succeeds.

    The unbiased estimator of Chen et al. (2021), "Evaluating Large Language Models Trained on Code":

        pass@k = 1 - C(n - c, k) / C(n, k)

    computed exactly (integer binomials, then one division). ``k > n`` raises ``ValueError``: k trials cannot be
    drawn from fewer, and extrapolating would make up data; ``summary_fields`` only asks for k up to each task's n.
    """
    _check(n, c, k)
    return float(1 - Fraction(math.comb(n - c, k), math.comb(n, k)))


def pass_hat_k(n: int, c: int, k: int) -> float:
    """Chance that all k trials drawn from n (c of them successes) succeed: tau-bench's pass^k (Yao et al., 2024).

        pass^k = C(c, k) / C(n, k)

    pass^1 equals pass@1 (c / n); as k grows pass^k falls for any agent that is not perfectly reliable, which is
    what it measures. ``k > n`` raises ``ValueError`` (see :func:`pass_at_k`).
    """
    _check(n, c, k)
    return float(Fraction(math.comb(c, k), math.comb(n, k)))


def _rate(hits: int, n: int) -> float | None:
    return round(hits / n, 6) if n else None


def _mean(xs: Sequence[float]) -> float | None:
    return round(sum(xs) / len(xs), 6) if xs else None


def percentile(xs: Iterable[float], q: float) -> float | None:
    """The q-th percentile (0..100) with linear interpolation between order statistics (numpy's default)."""
    values = sorted(xs)
    if not values:
        return None
    pos = (len(values) - 1) * q / 100
    lo = math.floor(pos)
    hi = min(lo + 1, len(values) - 1)
    return round(values[lo] + (values[hi] - values[lo]) * (pos - lo), 6)


def _groups(rows: Iterable[tuple[str, bool]]) -> dict[str, dict[str, Any]]:
    n: Counter[str] = Counter()
    hits: Counter[str] = Counter()
    for key, ok in rows:
        n[key] += 1
        hits[key] += int(ok)
    return {key: {"n": n[key], "success_rate": _rate(hits[key], n[key])} for key in sorted(n)}


#: The counts of :func:`token_integrity`, in the order summaries and reports show them.
INTEGRITY_KEYS = ("bridge_breaks", "divergences", "turns_without_sampled_ids", "rescored_logprobs", "renamed_call_ids")


def token_integrity(traj: Trajectory | Mapping[str, Any]) -> dict[str, int]:
    """What a trajectory's token record went through, each a count (0 when all is exact).

    - ``bridge_breaks``: template bridge fallbacks (new messages re-rendered instead of appended as a delta);
    - ``divergences``: appends after which the buffer was not a token prefix of a full render (when checked);
    - ``turns_without_sampled_ids``: token-level turns that recorded no sampled id (nothing to train on);
    - ``rescored_logprobs``: logprobs the engine recomputed after sampling (llama.cpp withholds some);
    - ``renamed_call_ids``: tool-call ids the loop rewrote because the model reused one or gave none.
    """
    if isinstance(traj, Mapping):  # a stored trajectory as plain JSON data (the report reads those)
        buf, turns = traj.get("token_buffer"), traj.get("turns") or []
        metas = [t.get("meta") if isinstance(t, Mapping) else None for t in turns]
    else:
        buf, metas = traj.token_buffer, [t.meta for t in traj.turns]
    buf = buf if isinstance(buf, Mapping) else {}
    metas = [m if isinstance(m, Mapping) else {} for m in metas]
    events = [e for e in buf.get("events") or () if isinstance(e, Mapping)]
    return {
        "bridge_breaks": int(buf.get("breaks") or 0),
        "divergences": sum(e.get("kind") == "divergence" for e in events),
        "turns_without_sampled_ids": sum(bool(m.get("no_sampled_ids")) for m in metas),
        "rescored_logprobs": sum(int(m.get("rescored_logprobs") or 0) for m in metas),
        "renamed_call_ids": sum(len(m.get("renamed_call_ids") or ()) for m in metas),
    }


def summary_fields(tasks: Mapping[str, Task], trajectories: Sequence[Trajectory], scores: Sequence[Score], *,
              trials: int) -> dict[str, Any]:  # fmt: skip
    """The run's ``summary.json``: success, pass@k / pass^k and breakdowns over the scored (non-infra) trials.

    ``trajectories`` and ``scores`` describe the same trials (paired by task id and trial, in any order).
    pass@k and pass^k are computed per task from its n non-infra trials and c successes, for every k from 1 to
    ``trials``, then averaged over tasks. A task with fewer than k non-infra trials (its other trials hit infra
    errors) cannot estimate pass@k without inventing trials, so it is left out of that k's average (and kept in
    the smaller ks); ``pass_k_tasks`` says how many tasks each k averages over, and a k no task reaches is None.
    Rates over an empty set are None, except ``success_rate`` and ``mean_reward``, which are 0.0.

    This is the plain JSON form; :meth:`toolworld.scoring.summary.Summary.compute` gives the same numbers as a
    typed model (what the pipeline, the report and the command line read).
    """
    if trials < 1:
        raise ValueError(f"trials must be at least 1, got {trials}")
    if len(trajectories) != len(scores):
        raise ValueError(f"{len(trajectories)} trajectories but {len(scores)} scores: they must describe the same trials")
    by_key = {(t.task_id, t.trial): t for t in trajectories}
    pairs: list[tuple[Trajectory, Score]] = []
    for s in scores:
        traj = by_key.get((s.task_id, s.trial))
        if traj is None:
            raise ValueError(f"score of task {s.task_id} trial {s.trial} has no trajectory")
        pairs.append((traj, s))
    scored = [(t, s) for t, s in pairs if not s.infra_error]
    infra = len(pairs) - len(scored)

    per_task: dict[str, list[bool]] = defaultdict(list)
    for _, s in scored:
        per_task[s.task_id].append(s.success)
    pass_at: dict[str, float | None] = {}
    pass_hat: dict[str, float | None] = {}
    pass_tasks: dict[str, int] = {}
    for k in range(1, trials + 1):
        eligible = [(len(r), sum(r)) for r in per_task.values() if len(r) >= k]
        pass_tasks[str(k)] = len(eligible)
        pass_at[str(k)] = _mean([pass_at_k(n, c, k) for n, c in eligible])
        pass_hat[str(k)] = _mean([pass_hat_k(n, c, k) for n, c in eligible])

    rows = [(tasks.get(s.task_id), s) for _, s in scored]  # an unknown task id is grouped as "unknown"
    by_difficulty = _groups((t.difficulty.level if t else "unknown", s.success) for t, s in rows)
    by_kind = _groups((t.kind if t else "unknown", s.success) for t, s in rows)
    by_target = _groups((tool, s.success) for t, s in rows for tool in (t.provenance.targets if t else ["unknown"]))
    # a task counts under each reasoning demand it makes ("none": it makes none); which skill a model lacks shows
    # here when every level and kind fails alike
    by_demand = _groups((demand, s.success) for t, s in rows
                        for demand in ((t.scenario.demands or ["none"]) if t else ["unknown"]))  # fmt: skip

    calls: Counter[str] = Counter()
    errors: Counter[str] = Counter()
    types: dict[str, Counter[str]] = defaultdict(Counter)
    error_types: Counter[str] = Counter()
    for traj, _ in scored:
        for step in traj.steps:
            calls[step.name] += 1
            if not step.ok:
                kind = str((step.error or {}).get("type", "error"))
                errors[step.name] += 1
                types[step.name][kind] += 1
                error_types[kind] += 1
    tool_errors = {name: {"calls": calls[name], "errors": errors[name], "rate": _rate(errors[name], calls[name]),
                          "types": dict(sorted(types[name].items()))} for name in sorted(calls)}  # fmt: skip

    failed = [s for _, s in scored if not s.success]
    divergence = Counter("none" if s.first_divergent_step is None else str(s.first_divergent_step) for s in failed)
    components: dict[str, list[bool]] = defaultdict(list)
    for _, s in scored:
        for c in s.components:
            components[c.name].append(c.passed)

    prompt = sum(t.usage.prompt_tokens for t, _ in scored)
    completion = sum(t.usage.completion_tokens for t, _ in scored)
    turn_latencies = [turn.latency_s for t, _ in scored for turn in t.turns]
    walls = [t.wall_s for t, _ in scored]
    noisy = [s.success for t, s in scored if t.noise_events]
    clean = [s.success for t, s in scored if not t.noise_events]
    successes = sum(s.success for _, s in scored)

    failures = {"missing_changes": sum(bool(s.missing_changes) for s in failed),
                "wrong_values": sum(bool(s.wrong_values) for s in failed),
                "extra_changes": sum(bool(s.extra_changes) for s in failed),
                "outputs_not_stated": sum(any(not o["found"] for o in s.outputs) for s in failed)}  # fmt: skip
    tokens = {"prompt": prompt, "completion": completion,
              "per_episode_mean": round((prompt + completion) / len(scored), 3) if scored else None}  # fmt: skip
    latency = {"turn_mean_s": _mean(turn_latencies), "episode_mean_s": _mean(walls),
               "episode_p90_s": percentile(walls, 90)}  # fmt: skip
    noise = {"episodes_with_noise": len(noisy), "success_rate_with_noise": _rate(sum(noisy), len(noisy)),
             "success_rate_without_noise": _rate(sum(clean), len(clean)),
             "episodes_with_perturbations": sum(bool(t.perturbations) for t, _ in scored)}  # fmt: skip
    # Over every episode, infra errors included: these describe the recorded data, not the agent.
    integrity = [token_integrity(t) for t, _ in pairs]
    token_record = {key: sum(i[key] for i in integrity) for key in INTEGRITY_KEYS}
    token_record["episodes_affected"] = sum(any(i.values()) for i in integrity)
    return {
        "trials": trials,
        "tasks": len({s.task_id for s in scores}),
        "episodes": len(pairs),
        "scored": len(scored),
        "infra_errors": infra,
        "success_rate": round(successes / len(scored), 6) if scored else 0.0,
        "mean_reward": round(sum(s.reward for _, s in scored) / len(scored), 6) if scored else 0.0,
        "pass_at_k": pass_at,
        "pass_hat_k": pass_hat,
        "pass_k_tasks": pass_tasks,
        "by_difficulty": by_difficulty,
        "by_kind": by_kind,
        "by_target_tool": by_target,
        "by_demand": by_demand,
        "components": {name: {"n": len(v), "pass_rate": _rate(sum(v), len(v))} for name, v in sorted(components.items())},
        "failures": failures,
        "tool_errors": tool_errors,
        "error_types": dict(sorted(error_types.items())),
        "divergence": dict(sorted(divergence.items(), key=lambda kv: (kv[0] == "none", int(kv[0]) if kv[0] != "none" else 0))),
        "terminations": dict(sorted(Counter(t.termination for t, _ in scored).items())),
        "tokens": tokens,
        "token_integrity": token_record,
        "latency": latency,
        "noise": noise,
        "scorer_version": SCORER_VERSION,
    }


# ----------------------------------------------------------------------- how sure a pass rate is


def wilson(successes: float, n: float, z: float = 1.96) -> tuple[float, float]:
    """95% Wilson score interval of a success rate (sound at 0 and n, unlike the normal approximation); ``n`` may
    be an effective number of draws (:func:`task_interval`)."""
    if n == 0:
        return 0.0, 1.0
    p = successes / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return max(0.0, centre - half), min(1.0, centre + half)


def sign_test(fixed: int, broke: int) -> float:
    """Two-sided exact sign test (McNemar's exact test) of paired pass/fail outcomes: the probability, if the two
    models were equally good, of a split of the ``fixed + broke`` changed tasks at least this uneven. Two models
    evaluated on the same tasks differ on few of them, so this says more than comparing two overlapping
    intervals."""
    n = fixed + broke
    if n == 0:
        return 1.0
    tail = sum(math.comb(n, i) for i in range(min(fixed, broke) + 1)) / 2**n
    return min(1.0, 2 * tail)


def task_interval(rates: list[float], trials: int, z: float = 1.96) -> tuple[float, float]:
    """95% interval of a mean over tasks of per-task pass rates, ``trials`` sampled trials each. A task's trials are
    not independent draws (a task the policy cannot do fails all of them), so Wilson's interval over all ``n *
    trials`` is too narrow; this one is Wilson's at the effective number of draws, ``p(1-p) / Var(mean of task
    rates)`` (between ``n`` when every task is all-or-nothing and ``n * trials`` when trials vary as coin flips),
    and stays sound when every trial passed or none did."""
    n = len(rates)
    if n == 0:
        return 0.0, 1.0
    p = sum(rates) / n
    var = sum((r - p) ** 2 for r in rates) / (n - 1) if n > 1 else 0.0
    draws = p * (1 - p) / (var / n) if var > 0 and 0 < p < 1 else n * trials
    draws = min(max(draws, n), n * trials)
    return wilson(p * draws, draws, z)


def paired_gain(before: dict[str, float], after: dict[str, float], z: float = 1.96) -> dict[str, Any]:
    """What ``after`` (a model, a checkpoint) gained over ``before`` on the tasks both were evaluated on (task id ->
    pass rate): the mean of the per-task
    differences of pass rate, with the 95% normal interval of that mean, and how many tasks it fixed (rate up) and
    broke (rate down) with the sign test of that split. Two models are judged on the same tasks, so the interval of
    the difference is narrower than two overlapping per-stage intervals suggest, and it shows whether a gain is
    larger than the churn between any two checkpoints (tasks one passes and the other fails, both ways).

    When every task changed by the same amount ``d`` (most often: no task changed at all), the sample variance is
    zero and the normal interval would claim certainty from a finite sample. The interval is then taken from the
    share of tasks that could differ from ``d``: at most ``1 - w`` of them, ``w`` the lower Wilson bound of
    ``n`` out of ``n``, each by at most the range of a rate (-1 to +1): ``[d*w - (1-w), d*w + (1-w)]``, clipped to
    [-1, 1]. Unchanged on 100 tasks gives about ±3.7 points, the rule of three's bound, not ±0."""
    both = sorted(before.keys() & after.keys())
    diffs = [after[t] - before[t] for t in both]
    n = len(diffs)
    fixed = sum(1 for d in diffs if d > 0)
    broke = sum(1 for d in diffs if d < 0)
    gain = sum(diffs) / n if n else 0.0
    if n > 1 and any(d != diffs[0] for d in diffs):
        half = z * math.sqrt(sum((d - gain) ** 2 for d in diffs) / (n - 1) / n)
        lo, hi = gain - half, gain + half
    elif n:
        w = wilson(n, n, z)[0]
        lo, hi = max(-1.0, gain * w - (1 - w)), min(1.0, gain * w + (1 - w))
    else:
        lo, hi = -1.0, 1.0
    return {"gain": round(gain, 4), "ci": [round(lo, 4), round(hi, 4)], "tasks": n,
            "fixed": fixed, "broke": broke, "p": round(sign_test(fixed, broke), 4)}  # fmt: skip
