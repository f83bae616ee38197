"""The built-in checks: what every world must satisfy before an agent is trained or scored on it.

Each check is short and says in its docstring what would go wrong in a world that failed it. They are the
counterpart of Gymnasium's ``check_env``: cheap, mechanical, and aimed at the mistakes a world author makes
without noticing (seed data that depends on set order, a "read" tool that writes, a rule nobody tested).
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from ..world import Episode, ToolCall
from .base import CITED_RE, TEST_RE, CheckContext, actionable, check, rules_in
from .report import Verdict, failed, passed, skipped

#: Where a tool error that is not the agent's fault shows itself (the SDK's message for a read tool that wrote).
_WROTE = "declared read-only but wrote"
_BAD_ID = "ZZ-no-such-id-0"
_BAD_INT = -987654321

#: Run in each fresh process: content hashes of the seed images, then a digest of a few generated tasks (None
#: when generation fails there: the tasks check reports that, determinism judges only what was produced).
_BUILD_SCRIPT = """\
import hashlib, json, sys
from toolworld.check.loading import load_world
world = load_world(sys.argv[1]).world
n_tasks, seeds = int(sys.argv[2]), sys.argv[3:]
out = {s: world.build_image(int(s))[1] for s in seeds}
digest = None
if n_tasks:
    try:
        from toolworld.tasks.generate import generate
        lines = generate(world, n_tasks, seed=int(seeds[0])).lines
        digest = hashlib.sha256("\\n".join(lines).encode("utf-8", "surrogatepass")).hexdigest()
    except Exception:
        pass
out["tasks"] = digest
print(json.dumps(out))
"""
#: Tasks each determinism process generates: enough to walk the kit's sampling, few enough to stay cheap.
_DETERMINISM_TASKS = 10


def _short(items: list[str], limit: int = 8) -> str:
    head = "; ".join(items[:limit])
    return head + (f"; ... ({len(items) - limit} more)" if len(items) > limit else "")


@check("determinism")
def determinism(ctx: CheckContext) -> Verdict:
    """Same world and seed must give byte-identical data and identical tasks in any process: cached images, task
    files and every score assume it. Two fresh processes (different hash seeds, empty caches) build seed ``seed``
    and ``seed + 1`` and generate a few tasks at ``seed``; set iteration order, ``random`` or the clock in a
    generator or a task kit show up as different hashes."""
    seeds = [str(ctx.seed), str(ctx.seed + 1)]
    n_tasks = min(ctx.n_tasks, _DETERMINISM_TASKS)
    if ctx.loaded.spec is None:
        one = [ctx.world.build_image(int(s))[1] for s in seeds]
        two = [ctx.world.build_image(int(s))[1] for s in seeds]
        same = one == two
        note = " (in this process only: the world cannot be loaded again by name, folder or module attribute)"
        return (passed if same else failed)(("same" if same else "different") + " content hashes" + note)
    caches = [tempfile.mkdtemp(prefix="toolworld-check-") for _ in range(2)]
    path = os.pathsep.join(p for p in sys.path if p)
    runs: list[subprocess.Popen[str]] = []
    hashes: list[dict[str, str]] = []
    try:
        for i, cache in enumerate(caches):
            env = {**os.environ, "TOOLWORLD_CACHE": cache, "PYTHONHASHSEED": str(i + 1), "PYTHONPATH": path}
            args = [sys.executable, "-c", _BUILD_SCRIPT, ctx.loaded.spec, str(n_tasks), *seeds]
            runs.append(subprocess.Popen(args, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
        for proc in runs:
            out, err = proc.communicate(timeout=300)
            if proc.returncode != 0:
                last = (err.strip().splitlines() or ["no output"])[-1]
                return failed(f"building the seed image in a fresh process failed: {last}")
            hashes.append(json.loads(out.strip().splitlines()[-1]))
    finally:
        for proc in runs:
            if proc.poll() is None:
                proc.kill()
                proc.communicate()
        for cache in caches:
            shutil.rmtree(cache, ignore_errors=True)
    differ = [s for s in seeds if hashes[0][s] != hashes[1][s]]
    if differ:
        return failed(f"seed {', '.join(differ)} built in two processes gave different content hashes "
                      f"({hashes[0][differ[0]][:12]} vs {hashes[1][differ[0]][:12]}): the generator uses something "
                      "besides its Rng (random, set order, the clock); draw everything from the rng given")  # fmt: skip
    tasks_note = ""
    if (hashes[0]["tasks"] is None) != (hashes[1]["tasks"] is None):
        return failed(f"generating {n_tasks} tasks at seed {ctx.seed} failed in one of two fresh processes only: the "
                      "task kit depends on something besides its Rng (set order, the clock)")  # fmt: skip
    if n_tasks and hashes[0]["tasks"] and hashes[1]["tasks"]:
        if hashes[0]["tasks"] != hashes[1]["tasks"]:
            return failed(f"the same seed data gave different tasks in two processes ({n_tasks} generated at seed "
                          f"{ctx.seed}): the task kit uses something besides the Rng it is given (random, set order, "
                          "a dict built from a set); draw from the rng and iterate sorted lists")  # fmt: skip
        tasks_note = f"; the same {n_tasks} tasks generated in both"
    return passed(f"seeds {', '.join(seeds)}: same content hash in two processes ({hashes[0][seeds[0]][:12]})"
                  + tasks_note)


def _apply(ep: Episode, calls: list[ToolCall]) -> int:
    return sum(ep.call(c.name, dict(c.arguments)).ok for c in calls)


@check("fork_isolation")
def fork_isolation(ctx: CheckContext) -> Verdict:
    """A fork is a what-if copy: rollouts, probes and task synthesis fork an episode and throw the copy away.
    Writes on a fork must never reach its parent (nor the parent's later writes the fork), and the fork's
    change-set must be exactly what the same writes give on a fresh episode. Random sequences of the world's
    own write calls (tour and gold actions), drawn from a fixed Rng, exercise that."""
    from ..world import Rng

    writes = ctx.calls(mutates=True)
    if not writes:
        return failed("no write calls to try: the tour and the generated tasks make none; give the world a tour "
                      "with a write (toolworld tour) or a kit whose intents cover the write tools")  # fmt: skip
    rng = Rng(ctx.seed).child("check.fork_isolation")
    problems: list[str] = []
    succeeded = 0
    for draw in range(24):
        prefix = rng.sample(writes, min(len(writes), rng.randint(0, 2)))
        suffix = rng.sample(writes, min(len(writes), rng.randint(1, 4)))
        with ctx.world.episode(ctx.seed) as parent:
            _apply(parent, prefix)
            before_hash, before_changes = parent.state_hash(), parent.changes().digest()
            fork = parent.fork()
            try:
                succeeded += _apply(fork, suffix)
                if parent.state_hash() != before_hash or parent.changes().digest() != before_changes:
                    problems.append(f"draw {draw}: writes on the fork changed the parent")
                fork_hash = fork.state_hash()
                _apply(parent, suffix)
                if fork.state_hash() != fork_hash:
                    problems.append(f"draw {draw}: writes on the parent changed the fork")
                with ctx.world.episode(ctx.seed) as fresh:
                    _apply(fresh, prefix + suffix)
                    if fresh.changes().digest() != fork.changes().digest():
                        problems.append(f"draw {draw}: the fork's changes differ from the same writes on a fresh "
                                        f"episode ({[c.name for c in suffix]})")  # fmt: skip
            finally:
                fork.close()
    warnings = ctx.task_warnings()
    if problems:
        return failed(_short(problems), warnings)
    if not succeeded:
        return failed(f"none of the {len(writes)} write calls succeeded on a fork, so isolation was not exercised",
                      warnings)  # fmt: skip
    return passed(f"24 random write sequences over {len(writes)} distinct write calls ({succeeded} writes "
                  "succeeded on forks): parents and forks untouched by each other", warnings)  # fmt: skip


def _bad_value(value: Any) -> Any:
    if isinstance(value, list):
        return [_bad_value(value[0]) if value else _BAD_ID]
    return _BAD_INT if isinstance(value, int) and not isinstance(value, bool) else _BAD_ID


def _bad_id_calls(ctx: CheckContext, calls: list[ToolCall]) -> list[ToolCall]:
    """Each known-good call once more per entity argument (ids and facts such as an email), with that argument
    pointing at nothing."""
    out: list[ToolCall] = []
    done: set[tuple[str, str]] = set()
    for call in calls:
        tool = ctx.world.tools[call.name]
        for p in tool.spec.entity_params:
            # facts too: an email nobody has must get an answer that says what to ask the user
            if p.param not in call.arguments or (call.name, p.param) in done:
                continue
            done.add((call.name, p.param))
            out.append(ToolCall(call.name, {**call.arguments, p.param: _bad_value(call.arguments[p.param])}))
    return out


#: ``e.g. 'SAML Okta'`` in an argument's description: the example a world author gave in prose.
_EXAMPLE_RE = re.compile(r"e\.g\.,?\s*'([^']+)'")


def _plain_value(schema: dict[str, Any]) -> tuple[bool, Any]:
    """A valid value for a non-entity argument from its schema (examples, enum, const, an ``e.g. '...'`` in its
    description, or a neutral number or flag); ``(False, None)`` when the schema gives nothing to go on."""
    for option in [schema, *(schema.get("anyOf") or [])]:
        if option.get("examples"):
            return True, option["examples"][0]
        if option.get("enum"):
            return True, option["enum"][0]
        if "const" in option:
            return True, option["const"]
    found = _EXAMPLE_RE.search(schema.get("description") or "")
    if found:
        return True, found.group(1)
    kinds = [schema.get("type")] + [o.get("type") for o in schema.get("anyOf") or []]
    if "integer" in kinds or "number" in kinds:
        return True, max(schema.get("minimum", 1), 1)
    if "boolean" in kinds:
        return True, False
    return False, None


def _seen_values(ctx: CheckContext) -> dict[str, list[Any]]:
    """Entity values (ids and facts such as an email) that the tour, the gold actions and the users' known facts
    hold, by entity kind: the values a fact kind (no table to draw from) can be tried with."""
    out: dict[str, list[Any]] = {}
    calls = [c.call for c in ctx.tour_calls] + [ToolCall(a.name, dict(a.arguments)) for t in ctx.tasks
                                                for a in t.gold_actions]  # fmt: skip
    for call in calls:
        tool = ctx.world.tools.get(call.name)
        for p in tool.spec.entity_params if tool else ():
            value = call.arguments.get(p.param)
            if value is not None and not isinstance(value, list) and value not in out.setdefault(p.kind, []):
                out[p.kind].append(value)
    for task in ctx.tasks:
        for kind, value in task.user.known.items():
            if isinstance(value, str | int) and value not in out.setdefault(kind, []):
                out[kind].append(value)
    return out


def _synthesized_calls(ctx: CheckContext, ep: Episode, name: str, seen: dict[str, list[Any]]) -> list[ToolCall]:
    """Up to three calls of ``name`` with valid arguments made up from the seeded data: each entity argument takes
    an id from its table (first, a third and two thirds of the way in) or a value seen for its kind, each other
    required argument a value from its schema. Empty when some required argument cannot be given a value."""
    tool = ctx.world.tools[name]
    props: dict[str, Any] = tool.spec.parameters.get("properties", {})
    required = set(tool.spec.parameters.get("required", []))
    entity = {p.param: p for p in tool.spec.entity_params}
    choices: dict[str, list[Any]] = {}
    for param, schema in props.items():
        if param in entity:
            p = entity[param]
            ref = ctx.world.entities.get(p.kind)
            if ref is not None:
                rows = ep.query(f'SELECT DISTINCT "{ref.column}" AS v FROM "{ref.table}" WHERE "{ref.column}" IS NOT '
                                "NULL ORDER BY 1")  # fmt: skip
                values = [rows[i * len(rows) // 3]["v"] for i in range(3)] if rows else []
            else:
                values = seen.get(p.kind, [])[:3]
            if not values:
                if param in required:
                    return []
                continue
            choices[param] = [[v] for v in values] if p.many else list(values)
        elif param in required:
            ok, value = _plain_value(schema)
            if not ok:
                return []
            choices[param] = [value]
    width = max((len(v) for v in choices.values()), default=1)
    calls = [ToolCall(name, {k: v[i % len(v)] for k, v in choices.items()}) for i in range(width)]
    return list({json.dumps(c.arguments, sort_keys=True, default=str): c for c in calls}.values())


@check("read_only")
def read_only(ctx: CheckContext) -> Verdict:
    """A read tool that writes corrupts every task that calls it to look something up: the gold end state would
    depend on how often the agent looked. Each read tool is called with the arguments the tour and gold actions
    give it, with valid arguments made up from the seeded data (ids from its tables, values from its schema), with
    ids that do not exist, and with no arguments when it needs none; the state hash must not move and the SDK must
    not have caught it writing. A read tool that no call reaches is a failure: its writes would go unseen."""
    reads = ctx.calls(mutates=False)
    for name, tool in ctx.world.tools.items():
        if not tool.mutates and not tool.spec.parameters.get("required"):
            reads.append(ToolCall(name, {}))
    seen = _seen_values(ctx)
    with ctx.world.episode(ctx.seed) as ep:
        for name, tool in ctx.world.tools.items():
            if not tool.mutates:
                reads += _synthesized_calls(ctx, ep, name, seen)
    probes = reads + _bad_id_calls(ctx, reads)
    offenders: dict[str, str] = {}
    exercised: set[str] = set()
    with ctx.world.episode(ctx.seed) as ep:
        for call in probes:
            before = ep.state_hash()
            result = ep.call(call.name, dict(call.arguments))
            if result.ok:
                exercised.add(call.name)
            if ep.state_hash() != before:
                offenders.setdefault(call.name, f"{call.name} changed the state")
            elif result.error is not None and _WROTE in result.error.message:
                offenders.setdefault(call.name, f"{call.name} wrote to the database (rolled back by the SDK)")
    unexercised = sorted(n for n, t in ctx.world.tools.items() if not t.mutates and n not in exercised)
    warnings = ctx.task_warnings()
    if offenders:
        return failed(_short(list(offenders.values())) + "; declare them @tool(mutates=True) or stop the write",
                      warnings)  # fmt: skip
    if unexercised:
        return failed(f"read tools no call succeeded with, so a write in them would go unseen: {', '.join(unexercised)}"
                      "; give their arguments examples (Field(examples=[...]) or \"e.g. '...'\" in the description), "
                      "map their id arguments to a table in entities=, or call them in the tour", warnings)  # fmt: skip
    return passed(f"{len(probes)} calls of {len(exercised)} read tools left the state unchanged", warnings)


@check("reachable")
def reachable(ctx: CheckContext) -> Verdict:
    """Every write tool must be reachable from what a user can say (an email, a name, an order number on a
    receipt) through the tool graph: a write whose ids no tool yields can never be called by an agent that does
    not guess ids, and task synthesis can never target it."""
    from ..tasks.graph import ToolGraph

    known = {kind for kind, ref in ctx.world.entities.items() if ref is None}
    try:
        known |= set(ctx.kit.known_entity_keys.values())  # ids a user holds (an order number on a receipt)
    except Exception as exc:  # the tasks check reports a kit that does not load; facts alone still judge this
        warnings = [f"the task kit did not load ({type(exc).__name__}: {exc}); only the fact kinds were used"]
    else:
        warnings = []
    graph = ToolGraph(ctx.world, known)
    # Every kind any legal tool yields, to a fixed point: a tool is callable once ALL its required kinds are
    # available (the graph's edges say ANY), and a tool that needs nothing is callable from the start.
    available = set(known)
    while True:
        grown = available.union(*(graph.specs[n].produces for n in graph.legal(available)))
        if grown == available:
            break
        available = grown
    legal = set(graph.legal(available))
    cut = [n for n in graph.write_tools if n not in legal]
    if cut:
        needs = {n: sorted(ctx.world.tools[n].spec.requires) for n in cut}
        return failed(f"write tools unreachable from the user's facts ({', '.join(sorted(known))}): "
                      + "; ".join(f"{n} needs {', '.join(k) or 'nothing reachable'}" for n, k in needs.items())
                      + ". Add a read tool that yields those kinds, or declare the fact kind in entities=",
                      warnings)  # fmt: skip
    return passed(f"{len(graph.write_tools)} write tools reachable from {', '.join(sorted(known))}", warnings)


def _test_files(ctx: CheckContext) -> list[Path]:
    """The world's tests: its folder's ``tests/``, else ``tests/test_<world>_*.py`` of an enclosing checkout."""
    folder = ctx.source_dir
    if folder is None:
        return []
    if (folder / "tests").is_dir():
        return sorted((folder / "tests").rglob("test*.py"))
    for parent in folder.parents:
        found = sorted((parent / "tests").glob(f"test_{ctx.world.name}_*.py")) if (parent / "tests").is_dir() else []
        if found:
            return found
    return []


def _installed(folder: Path) -> bool:
    """Whether a world's source is an installed distribution (no tests there to find) rather than a checkout or
    a world folder, where a missing test is the author's to add."""
    return any(part in ("site-packages", "dist-packages") for part in folder.parts)


@check("rules_tested")
def rules_tested(ctx: CheckContext) -> Verdict:
    """A rule nobody tested is a rule nobody knows the tools enforce. Every numbered rule of policy.md must be
    named by a test (``def test_R7_...``), and every rule a tool's error cites must exist in policy.md (a refusal
    citing a rule the agent cannot read is unexplainable). Only an installed package (a wheel ships no tests) or a
    world whose source cannot be located is skipped, saying so; a world folder or a checkout without the tests
    fails."""
    rules = rules_in(ctx.world.policy)
    if not rules:
        return failed("policy.md numbers no rules (write them as **R1 Title.** ...)")
    cited: set[str] = set()
    folder = ctx.source_dir
    if folder is not None:
        for path in folder.rglob("*.py"):
            if "tests" not in path.relative_to(folder).parts:  # what the tools cite, not what their tests assert
                cited |= set(CITED_RE.findall(path.read_text(encoding="utf-8")))
    for task in ctx.tasks:
        if task.refusal is not None:
            cited |= set(CITED_RE.findall(task.refusal.reason))
    unknown = sorted(cited - set(rules), key=lambda r: int(r[1:]))
    problems = [f"tools cite rules missing from policy.md: {', '.join(unknown)}"] if unknown else []
    files = _test_files(ctx)
    if not files:
        where = "no tests/ in its folder, no tests/test_" + f"{ctx.world.name}_*.py above it"
        if folder is None or _installed(folder):
            if problems:
                return failed(problems[0])
            # an installed wheel ships no tests: the rules were (or were not) tested where it was built
            why = "its source cannot be located" if folder is None else "it is an installed package, which ships none"
            return skipped(f"no tests found for {ctx.world.name!r} ({why}); {len(rules)} rules not checked")
        problems.append(f"no tests found for {ctx.world.name!r} ({where}): add one test per rule, named "
                        f"def test_R1_... ({', '.join(rules)})")  # fmt: skip
        return failed("; ".join(problems))
    tested: set[str] = set()
    for path in files:
        tested |= set(TEST_RE.findall(path.read_text(encoding="utf-8")))
    missing = [r for r in rules if r not in tested]
    if missing:
        problems.append(f"rules with no test_Rn_ function in {len(files)} test files: {', '.join(missing)}")
    if problems:
        return failed("; ".join(problems))
    return passed(f"{len(rules)} rules, each named by a test in {len(files)} files; {len(cited)} cited rules exist")


def _undescribed(schema: dict[str, Any]) -> bool:
    if schema.get("description") or schema.get("enum") or schema.get("examples") or "const" in schema:
        return False
    options = schema.get("anyOf") or []
    return not any(o.get("description") or o.get("enum") or o.get("const") is not None for o in options)


@check("guidance")
def guidance(ctx: CheckContext) -> Verdict:
    """An agent learns a tool from its description and learns to recover from its errors: a tool without a
    description, an argument without one, or an error that does not say what to do next (which tool, what to
    ask the user) makes failures the agent cannot learn from. Each tool is called with no arguments and with ids
    that do not exist; refused requests from the tasks are replayed; every error must be structured and point
    somewhere. A refusal that cites its policy rule but names no next step is a warning, not a failure: the
    agent's next step is then to explain the rule to the user, which the citation makes possible."""
    names = list(ctx.world.tools)
    offenders: list[str] = []
    warnings: list[str] = []
    for name, tool in ctx.world.tools.items():
        if len(tool.spec.description.strip()) < 20:
            offenders.append(f"{name}: description shorter than 20 characters")
        for param, schema in tool.spec.parameters.get("properties", {}).items():
            if _undescribed(schema):
                offenders.append(f"{name}.{param}: no description, enum or examples")
    probes = [ToolCall(n, {}) for n, t in ctx.world.tools.items() if t.spec.parameters.get("required")]
    probes += _bad_id_calls(ctx, ctx.calls(mutates=False) + ctx.calls(mutates=True))
    errors = 0
    with ctx.world.episode(ctx.seed) as base:
        for call in probes:
            with base.fork() as ep:
                result = ep.call(call.name, dict(call.arguments))
            if result.ok:
                continue
            errors += 1
            offenders += _judge(result.error, call.name, names, "with no arguments" if not call.arguments else
                                "with an id that does not exist")  # fmt: skip
    for task in ctx.tasks:
        if task.refusal is None:
            continue
        with ctx.world.episode(ctx.seed) as ep:
            for action in task.gold_actions:
                ep.call(action.name, dict(action.arguments))
            forbidden = task.refusal.forbidden
            result = ep.call(forbidden.name, dict(forbidden.arguments))
        if not result.ok:
            errors += 1
            found = _judge(result.error, forbidden.name, names, "when refusing a request")
            (warnings if CITED_RE.search(result.error.message) else offenders).extend(found)
    offenders = list(dict.fromkeys(offenders))
    warnings = [_short(list(dict.fromkeys(warnings)), 4)] if warnings else []
    warnings += ctx.task_warnings()
    if offenders:
        return failed(_short(offenders), warnings)
    return passed(f"{len(names)} tools described; {errors} error messages, each structured and actionable"
                  + (" (some refusals only cite their rule)" if warnings else ""), warnings)


def _judge(error: Any, tool: str, names: list[str], how: str) -> list[str]:
    if error.type == "internal_error":
        return [f"{tool} crashed {how}: {error.message[:160]}"]
    if not actionable(error.message, names, tool):
        return [f"{tool} {how}: {error.type} message says nothing to do next: {error.message[:160]!r}"]
    return []


@check("tasks")
def tasks(ctx: CheckContext) -> Verdict:
    """Tasks are what agents are scored and trained on: every generated task must replay to its recorded end
    state, and the gold policy (which plays the recorded solution through the real environment, user simulator
    and scorer) must pass every one. The tasks take the path ``toolworld tasks generate``, ``tasks verify`` and
    ``run`` take: written as JSONL, read back with the run's loader, run with the default limits and scripted user,
    scored with every component. The literal policy's pass^1 is reported as a difficulty probe (a warning when
    it is above 0.5: such tasks teach little)."""
    from ..pipeline import load_tasks
    from ..rollout.backends import make_policy
    from ..rollout.loop import run_many
    from ..scoring.verify import score_trajectory
    from ..tasks.verify import verify_tasks

    if ctx.n_tasks <= 0:
        return skipped("no tasks were asked for (tasks=0); nothing generated, verified or run")
    generated = ctx.tasks
    if ctx.task_error is not None:
        return failed(f"generating {ctx.n_tasks} tasks at seed {ctx.seed} failed: {ctx.task_error}")
    if not generated:
        return failed(f"the generator produced no tasks at seed {ctx.seed}; give the world a task kit with intents")
    with tempfile.TemporaryDirectory(prefix="toolworld-check-") as tmp:
        path = Path(tmp) / "tasks.jsonl"
        path.write_text("".join(t.to_json() + "\n" for t in generated), encoding="utf-8")
        task_file = load_tasks(path, ctx.world.name)
    items = task_file.tasks
    if task_file.errors or len(items) != len(generated):
        return failed(f"{len(generated) - len(items)} of {len(generated)} generated tasks do not read back from "
                      "their JSONL lines: " + _short([str(e) for e in task_file.errors], 3))  # fmt: skip
    report = verify_tasks(((i + 1, t) for i, t in enumerate(items)), resolve=lambda _name: ctx.world)
    rates: dict[str, float] = {}
    for spec in ("gold", "literal"):
        trajectories = asyncio.run(run_many(ctx.world, items, make_policy(spec, world=ctx.world), concurrency=8))
        wins = sum(score_trajectory(t, traj, world=ctx.world).success for t, traj in zip(items, trajectories,
                                                                                         strict=True))  # fmt: skip
        rates[spec] = wins / len(items)
    kinds = {k: sum(t.kind == k for t in items) for k in ("action", "refusal", "info")}
    summary = (f"{len(items)} tasks ({', '.join(f'{v} {k}' for k, v in kinds.items())}); "
               f"{report.verified} verified; gold pass^1 {rates['gold']:.3f}; literal pass^1 {rates['literal']:.3f}")  # fmt: skip
    figures = {"tasks": len(items), "kinds": kinds, "verified": report.verified, "replay_failures": len(report.failures),
               "gold_pass1": rates["gold"], "literal_pass1": rates["literal"]}  # fmt: skip
    problems = []
    if len(items) < ctx.n_tasks:
        problems.append(f"only {len(items)} of {ctx.n_tasks} tasks could be generated")
    if report.failures:
        problems.append("replay failures: " + _short([str(f) for f in report.failures], 3))
    if rates["gold"] < 1.0:
        problems.append("the gold policy fails some tasks")
    if problems:
        return failed(summary + "; " + "; ".join(problems), data=figures)
    warnings = []
    targeted = {a.name for t in items for a in t.gold_actions} | {t.refusal.forbidden.name for t in items if t.refusal}
    untargeted = [n for n, tool in ctx.world.tools.items() if tool.mutates and n not in targeted]
    if untargeted:
        warnings.append(f"write tools no generated task uses: {', '.join(untargeted)} (in {len(items)} tasks); give "
                        "them intents in the task kit so that agents are trained and scored on them")  # fmt: skip
    if rates["literal"] > 0.5:
        warnings.append(f"the literal policy passes {rates['literal']:.0%} of the tasks: most need no lookup, "
                        "confirmation or refusal, so they teach little; add intents whose ids the user does not know, "
                        "refusals and info questions")  # fmt: skip
    return passed(summary, warnings, data=figures)
