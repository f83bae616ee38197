"""Advantage estimators and the importance and KL terms of policy-gradient losses, one short function each.

Rewards are plain floats per group (the trials of one task): group baselines need no critic, which is why these
methods suit agents whose episodes end in one verifiable reward. :func:`assign` writes an estimator's output onto
:class:`~toolworld.train.data.Sample` objects grouped by ``Sample.group``.
"""

from __future__ import annotations

import hashlib
import json
import re
import statistics
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import torch

from .data import Sample, TrainDataError

if TYPE_CHECKING:
    from ..records.trajectory import Trajectory


def _std(xs: Sequence[float]) -> float:
    # unbiased (n - 1), as TRL's and verl's GRPO; one trial alone has no spread and gets advantage 0 anyway
    return statistics.stdev(xs) if len(xs) > 1 else 0.0


def grpo(rewards: Sequence[float], eps: float = 1e-6, *, scale: bool = True) -> list[float]:
    """GRPO (Shao et al. 2024, DeepSeekMath) advantages of one group of trials:

        A_i = (r_i - mean(r)) / (std(r) + eps)

    ``scale=False`` is Dr. GRPO (Liu et al. 2025), ``A_i = r_i - mean(r)``: dividing by the std up-weights groups
    that are nearly all right or all wrong, a difficulty bias. ``std`` is the unbiased sample std.
    """
    if not rewards:
        return []
    mean = statistics.fmean(rewards)
    denom = _std(rewards) + eps if scale else 1.0
    return [(r - mean) / denom for r in rewards]


def mc_grpo(rewards: Sequence[float]) -> list[float]:
    """MC-GRPO: a median baseline, ``A_i = r_i - median(r)``.

    With few trials per task the mean is dragged by one lucky or unlucky trial, which can flip the sign of the
    others' advantages; the median is not. With an even count the median is the mean of the two middle values.
    """
    if not rewards:
        return []
    median = statistics.median(rewards)
    return [r - median for r in rewards]


def assign(samples: Sequence[Sample], estimator: Callable[[Sequence[float]], list[float]] = grpo,
           *, reward_key: str = "reward") -> list[Sample]:  # fmt: skip
    """Set each sample's ``advantage`` from ``estimator`` applied to the rewards of its group (``Sample.group``);
    returns the samples (changed in place). The reward is ``meta[reward_key]``, as ``samples_from_tokens`` fills."""
    groups: dict[str, list[Sample]] = defaultdict(list)
    for s in samples:
        if s.meta.get(reward_key) is None:
            raise TrainDataError("missing_reward", f"a sample of group {s.group!r} has no meta[{reward_key!r}]: "
                                 "unscored trials cannot get an advantage; drop them first")  # fmt: skip
        groups[s.group].append(s)
    for members in groups.values():
        for s, a in zip(members, estimator([float(s.meta[reward_key]) for s in members]), strict=True):
            s.advantage = a
    return list(samples)


def weigh_negatives(samples: Sequence[Sample], weight: float) -> list[Sample]:
    """Asymmetric policy gradient: every negative advantage scaled by ``weight``, positive ones kept, per token:

        A'_t = A_t            if A_t >= 0
        A'_t = weight * A_t   if A_t <  0

    A negative advantage lowers the sampled token and hands its mass to tokens no trial sampled; a few such updates
    on a small model spread that mass into degenerate text (one measured step lowered the positive trials' own
    tokens too, ``docs/benchmarks.md``). A positive one raises a token the policy produced and was right to, which
    sharpens what greedy decoding picks (positive-sample reinforcement; Zhu et al. 2025 find it lifts pass@1 while
    negative samples keep pass@k). ``weight`` 1 is the plain gradient, 0 reinforces successes only. Works on
    ``token_advantages`` when set (GiGPO), else on ``advantage``; returns the samples (changed in place).
    """
    if not weight >= 0:
        raise TrainDataError("bad_negative_weight", f"weight={weight}: the scale of negative advantages must be "
                             ">= 0 (1: the plain gradient, 0: successes only)")  # fmt: skip
    if weight == 1.0:
        return list(samples)
    for s in samples:
        if s.token_advantages is not None:
            s.token_advantages = [a if a >= 0 else weight * a for a in s.token_advantages]
        elif s.advantage < 0:
            s.advantage = weight * s.advantage
    return list(samples)


def value_positions(decode: Callable[[list[int]], str], ids: Sequence[int], values: Iterable[str]) -> set[int]:
    """Positions in ``ids`` (one turn's sampled tokens) whose decoded characters overlap one of ``values`` as the
    call wrote it: a JSON string's content between its quotes (``"a@b.com"``, escapes as JSON writes them), or, for
    a value no quoted string holds (a number), the value standing alone (``2`` not inside ``#W2234562``). So a
    made-up ``order`` is not found inside ``get_order_details``. ``decode`` is the tokenizer's (special tokens
    kept); a token's characters are where decoding the turn up to it ends, and a token that completes a character
    split over several byte tokens belongs to that character."""
    from ..scoring.grounding import AFTER, BEFORE

    ids = list(ids)
    text = decode(ids)
    ranges = []
    for value in values:
        quoted = [m.span() for form in {json.dumps(value), json.dumps(value, ensure_ascii=False)}
                  for m in re.finditer(re.escape(form), text)]  # fmt: skip
        ranges += [(a + 1, b - 1) for a, b in quoted] or [m.span() for m in re.finditer(
            BEFORE + re.escape(value) + AFTER, text)]  # fmt: skip
    out: set[int] = set()
    begin = 0
    for k in range(len(ids)):
        # a prefix that ends inside a multi-byte character decodes to a replacement character: keep ends monotone
        end = min(max(begin, len(decode(ids[: k + 1]))), len(text))
        lo = begin - 1 if end == begin and begin > 0 else begin  # no character of its own: the one it completes
        if any(a < max(end, lo + 1) and lo < b for a, b in ranges):
            out.add(k)
        begin = end
    return out


def blame_invented(sample: Sample, trajectory: Trajectory, decode: Callable[[list[int]], str], *,
                   truncated: bool = False) -> int:  # fmt: skip
    """Credit for a made-up argument value (``toolworld.scoring.grounding``): in a turn that sent a value no
    earlier message held, a negative advantage stays on that value's tokens and leaves the rest of the turn:

        A'_t = 0     if A_t < 0 and t is in a turn that made up values V, outside the tokens of every v in V
        A'_t = A_t   otherwise

    Why: a failed trial whose lookup made up an email (the customer gave a name and zip code) lowers the whole
    turn, the choice of ``find_user_by_email`` with the address; a small policy then shuns the email lookup where
    the email was given (``docs/benchmarks.md``, "Made-up arguments"). Held to the value, the update says what
    was wrong: the address, not the tool. The turn's other tokens get 0, not a positive advantage: the trial still
    failed. Positive advantages, turns that made nothing up and turns whose values the decoded tokens do not show
    are left as they were. ``trajectory`` is the sample's (its messages say what was made up, its turns pair with
    the sample's sampled spans, :func:`sampled_turns`). Changes ``sample.token_advantages`` in place (set from
    ``advantage`` when a turn changes) and returns the number of turns changed.
    """
    from ..scoring.grounding import invented_arguments

    advantages = sample.token_advantage_list()
    if not any(a < 0 for a in advantages):  # nothing lowered: nothing to move (and no turns to pair)
        return 0
    made_up: dict[int, list[str]] = defaultdict(list)
    for item in invented_arguments(trajectory.messages):
        made_up[item.turn].append(item.value)
    if not made_up:
        return 0
    changed = 0
    for turn, (start, end) in sampled_turns(trajectory, sample, truncated=truncated):
        if turn not in made_up or not any(a < 0 for a in advantages[start:end]):
            continue
        keep = value_positions(decode, sample.input_ids[start:end], made_up[turn])
        if not keep:
            continue
        for k in range(start, end):
            if advantages[k] < 0 and k - start not in keep:
                advantages[k] = 0.0
        changed += 1
    if changed:
        sample.token_advantages = advantages
    return changed


# ------------------------------------------------------------------------------------------------- GiGPO


@dataclass
class Step:
    """One agent action of an episode: the environment state it was taken in, its reward, its tokens.

    ``state`` is a hash of the environment state *before* the action (the anchor: equal hashes in different
    trials of one task mean the same situation). ``reward`` is the immediate reward of the step; with a single
    outcome reward put it on the last step and leave the others 0. ``span`` is ``[start, end)`` of the action's
    sampled tokens in the episode's sample.
    """

    state: str
    span: tuple[int, int]
    reward: float = 0.0


@dataclass
class Episode:
    """One trial for GiGPO: its group (task), outcome reward, token count and steps in order."""

    group: str
    reward: float
    length: int
    steps: list[Step] = field(default_factory=list)


def turn_spans(loss_mask: Sequence[int]) -> list[tuple[int, int]]:
    """``[start, end)`` of each run of 1s in a loss mask: one per assistant turn of a token buffer, since prompt
    tokens (tool results, the next generation prompt) always separate two turns' sampled tokens."""
    spans, start = [], None
    for i, m in enumerate([*loss_mask, 0]):
        if m and start is None:
            start = i
        elif not m and start is not None:
            spans.append((start, i))
            start = None
    return spans


def _paired(trajectory: Trajectory) -> None:
    """Raise ``TrainDataError('turns_mismatch')`` unless ``trajectory`` has one turn record per assistant message."""
    said = sum(m.get("role") == "assistant" for m in trajectory.messages)
    if said != len(trajectory.turns):
        raise TrainDataError("turns_mismatch", f"trial {trajectory.trial} of {trajectory.task_id} has {said} "
                             f"assistant messages but {len(trajectory.turns)} turns")  # fmt: skip


def anchor_states(trajectory: Trajectory) -> list[str]:
    """The anchor state of each turn of ``trajectory`` (one per ``trajectory.turns``, in order): a hash of the
    world's state when the turn was taken (``TurnRecord.state_hash``) and of everything the environment had shown
    the agent by then, the system prompt, the user's messages and the tool results, in order.

    Why not the world's state alone: most turns only read (every turn of an info task does), so the database is
    the same at the first turn and at the last, and one anchor group would hold every turn of every trial. GiGPO
    would then compare a first turn's discounted return with a last turn's and push early turns down and late
    ones up whatever they did. Two turns share an anchor when the agent stood in the same situation: same world,
    same answers from the user and the tools, whatever its own wording was. The agent's messages are left out,
    since they are its actions; what they caused (a tool's result, the user's reply) is in.

    Raises ``TrainDataError('turns_mismatch')`` when the assistant messages and the turns do not pair up.
    """
    _paired(trajectory)
    anchors, seen, turns = [], hashlib.sha256(), iter(trajectory.turns)
    for msg in trajectory.messages:
        if msg.get("role") == "assistant":
            h = seen.copy()
            h.update(next(turns).state_hash.encode())
            anchors.append(h.hexdigest()[:16])
        else:
            seen.update(json.dumps([msg.get("role"), msg.get("content")], sort_keys=True, default=str).encode())
    return anchors


def sampled_turns(trajectory: Trajectory, sample: Sample, *,
                  truncated: bool = False) -> list[tuple[int, tuple[int, int]]]:  # fmt: skip
    """``(turn, span)`` of each assistant turn of ``trajectory`` that sampled tokens, in order: ``turn`` its index
    among the assistant messages (as ``TurnRecord.index`` and :func:`anchor_states` count them), ``span`` its
    sampled tokens in ``sample`` (``turn_spans`` of the loss mask). Turns a lead played (``no_sampled_ids``, see
    ``rollout/branch.py``) hold no sampled token and are skipped. A sample cut to its first tokens (``truncated``)
    keeps the turns it still holds.

    Raises ``TrainDataError('turns_mismatch')`` when the sampled segments and the turns do not pair up (a buffer
    that is not this trajectory's), rather than pairing turns with the wrong tokens.
    """
    _paired(trajectory)
    turns = [i for i, t in enumerate(trajectory.turns) if not t.meta.get("no_sampled_ids")]
    spans = turn_spans(sample.loss_mask)
    if truncated and len(spans) < len(turns):
        turns = turns[: len(spans)]
    if len(turns) != len(spans):
        raise TrainDataError("turns_mismatch", f"{len(spans)} sampled segments in the buffer but {len(turns)} turns "
                             f"that sampled tokens in trial {trajectory.trial} of {trajectory.task_id}")  # fmt: skip
    return list(zip(turns, spans, strict=True))


def episode_from_trajectory(trajectory: Trajectory, sample: Sample, reward: float, *,
                            truncated: bool = False) -> Episode:  # fmt: skip
    """A GiGPO ``Episode`` from a token-level trial: one step per assistant turn that sampled tokens
    (:func:`sampled_turns`), its anchor state from :func:`anchor_states` (the world's state and what the agent had
    been shown), its span the turn's sampled tokens in ``sample``, and the outcome reward on the last step (the
    environment gives no reward before the end).

    Raises ``TrainDataError('turns_mismatch')`` when the sampled segments and the turns do not pair up.
    """
    anchors = anchor_states(trajectory)
    steps = [Step(state=anchors[turn], span=span, reward=0.0)
             for turn, span in sampled_turns(trajectory, sample, truncated=truncated)]  # fmt: skip
    if steps:
        steps[-1].reward = reward
    return Episode(group=sample.group or trajectory.task_id, reward=reward, length=len(sample.input_ids), steps=steps)


def gigpo(episodes: Sequence[Episode], *, gamma: float = 0.95, step_weight: float = 1.0, eps: float = 1e-6,
          scale: bool = True) -> list[list[float]]:  # fmt: skip
    """GiGPO (Feng et al. 2025, Group-in-Group Policy Optimization) per-token advantages, one list per episode.

    Episode level, within each group (task) G:       A^E_i = (R_i - mean_G(R)) / (std_G(R) + eps)
    Step level: the discounted return of step t,      R_t^i = sum_{k >= t} gamma^(k - t) r_k^i
    and, over the anchor group S(s) of every step taken in the same state s in any trial of that task,
                                                       A^S_t^i = (R_t^i - mean_S(R_t)) / (std_S(R_t) + eps)
    Combined, on the tokens of step t:                 A = A^E_i + step_weight * A^S_t^i
    Tokens outside every step span get A^E_i. An anchor state seen once has no peer to compare with: A^S = 0.
    ``scale=False`` drops both std divisions (as Dr. GRPO). Steps that repeat a state within one trial each join
    the anchor group, as in the paper.
    """
    by_group: dict[str, list[int]] = defaultdict(list)
    for i, ep in enumerate(episodes):
        by_group[ep.group].append(i)
    episode_adv = [0.0] * len(episodes)
    for members in by_group.values():
        for i, a in zip(members, grpo([episodes[i].reward for i in members], eps, scale=scale), strict=True):
            episode_adv[i] = a

    returns: list[list[float]] = []
    for ep in episodes:
        acc, out = 0.0, []
        for step in reversed(ep.steps):
            acc = step.reward + gamma * acc
            out.append(acc)
        returns.append(out[::-1])

    anchors: dict[tuple[str, str], list[tuple[int, int]]] = defaultdict(list)
    for i, ep in enumerate(episodes):
        for t, step in enumerate(ep.steps):
            anchors[(ep.group, step.state)].append((i, t))
    step_adv = [[0.0] * len(ep.steps) for ep in episodes]
    for members in anchors.values():
        if len(members) < 2:
            continue
        for (i, t), a in zip(members, grpo([returns[i][t] for i, t in members], eps, scale=scale), strict=True):
            step_adv[i][t] = a

    out_tokens = []
    for i, ep in enumerate(episodes):
        adv = [episode_adv[i]] * ep.length
        for t, step in enumerate(ep.steps):
            start, end = step.span
            if not 0 <= start <= end <= ep.length:
                raise TrainDataError("bad_span", f"step {t} of an episode of group {ep.group!r} has span {step.span} "
                                     f"outside its {ep.length} tokens")  # fmt: skip
            adv[start:end] = [episode_adv[i] + step_weight * step_adv[i][t]] * (end - start)
        out_tokens.append(adv)
    return out_tokens


# ------------------------------------------------------------------------------------ importance and KL


def tis_weights(new_logprobs: torch.Tensor, old_logprobs: torch.Tensor, cap: float = 2.0) -> torch.Tensor:
    """Truncated importance sampling (Yao et al. 2025): ``w = min(exp(new - old), C)``.

    ``new`` is the trainer's logprob of the sampled token, ``old`` the sampler's: the weight corrects for the
    rollout engine being a slightly different policy than the one trained, and the cap ``C`` bounds the variance
    a token the sampler found unlikely would otherwise add. Used detached, as a constant per-token weight.
    """
    return torch.exp(new_logprobs - old_logprobs).clamp(max=cap)


def kl_k3(logp: torch.Tensor, ref_logp: torch.Tensor) -> torch.Tensor:
    """Schulman's k3 estimator of KL(pi || pi_ref) per sampled token: ``exp(ref - logp) - (ref - logp) - 1``.

    Unbiased for tokens sampled from pi, and never negative (``e^x - x - 1 >= 0``), unlike the plain
    ``logp - ref`` (k1), whose per-token values swing in sign.
    """
    d = ref_logp - logp
    return torch.exp(d) - d - 1.0
