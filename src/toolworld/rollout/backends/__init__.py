"""Policy backends by name, and the ``--policy`` SPEC that picks one: ``KIND[:TARGET][,key=value...]``.

Every backend registers a factory under its kind with :func:`policy`; the spec parser, the option check and
the valid forms listed in errors and help texts (:func:`spec_forms`) all come from those registrations, so a
new backend is one decorated function (or class) in one file::

    from toolworld.rollout.backends import policy

    @policy("echo", usage="echo[:prefix=TEXT]", help="repeats the user", options=("prefix",))
    def make_echo(*, prefix: str = "") -> EchoPolicy:
        return EchoPolicy(prefix)

Built in: ``gold`` (``gold.py``), the probes ``noop`` and ``gibberish`` (``probes.py``), ``openai``
(``openai.py``), and the token-exact kinds ``hf``, ``gguf``, ``vllm`` and ``smollm2``, registered by
``toolworld.rollout.engines`` without importing torch, transformers or llama.cpp (those load when a policy of
that kind is built). ``ScriptedPolicy`` (``scripted.py``) is built in Python and has no spec. An installed
package adds kinds through the ``toolworld.policies`` entry-point group: ``echo = "pkg.echo_policy"`` (a module
that registers with the decorator) or ``echo = "pkg.mod:factory"`` (a factory taking the options as keywords).
Option values arrive as JSON scalars where they parse (``0.3``, ``true``), else as text.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from ...core.registry import Registry
from ..policy import Policy

ENTRY_POINT_GROUP = "toolworld.policies"

#: A factory: ``factory(**options)``, or ``factory(target, **options)`` for a kind that takes a target.
PolicyFactory = Callable[..., Policy]

#: Where a kind's tokenizer lives, given its parsed spec (a folder or a .gguf path; None: the spec does not say).
TokenizerOf = Callable[["PolicySpec"], "str | None"]


def _as_factory(obj: Any, name: str) -> PolicyFactory:
    if not callable(obj):
        raise TypeError(f"{type(obj).__name__} is not a policy factory (a callable returning a Policy)")
    return obj


#: Every policy kind: built-ins first (in the order of ``--help``), then plugins.
POLICIES: Registry[PolicyFactory] = Registry("policy kind", group=ENTRY_POINT_GROUP, adapt=_as_factory,
                                             error=ValueError)  # fmt: skip


def policy(kind: str, *, usage: str | None = None, help: str = "", options: Sequence[str] | None = None,
           takes_target: bool | str = False, tokenizer: TokenizerOf | None = None,
           replace: bool = False) -> Callable[[Any], Any]:  # fmt: skip
    """Register a policy factory (a function or a class) for ``--policy KIND...``.

    Args:
        kind: the spec's first word (lower case).
        usage: the spec's form for help and errors, e.g. ``"hf:PATH[,k=v...]"`` (default: the kind).
        help: one line on what runs.
        options: the option names the spec may give after a comma (each checked before the factory runs, so a
            typo is named at once); None: the factory checks its own options.
        takes_target: whether a target follows the colon (a path, ``MODEL@URL``); when it does, the factory is
            called as ``factory(target, **options)``, else ``factory(**options)`` and whatever follows the colon
            is options (``gold:drop=0.3``). A string says what the target is in errors ("a path").
        tokenizer: for a kind that samples tokens, where its tokenizer lives, read off a parsed spec without
            building anything: ``tokenizer(spec) -> folder or .gguf path``, or None when the spec does not say
            (see :func:`tokenizer_source`; exports render with it).
        replace: replace a kind registered before (otherwise a second registration of a kind is an error).

    Keyword overrides given to :func:`make_policy` in Python are passed on unchecked.
    """

    def decorate(factory: Any) -> Any:
        POLICIES.register(kind.lower(), factory, replace=replace, usage=usage or kind, help=help,
                          options=None if options is None else tuple(options), takes_target=takes_target,
                          tokenizer=tokenizer)  # fmt: skip
        return factory

    return decorate


def _meta(kind: str, meta: dict[str, Any] | None = None) -> dict[str, Any]:
    """A kind's registration, with the defaults of a factory that an entry point named without the decorator."""
    meta = POLICIES.meta(kind) if meta is None else meta
    return {"usage": meta.get("usage", f"{kind}[,k=v...]"), "help": meta.get("help", ""),
            "options": meta.get("options"), "takes_target": meta.get("takes_target", False)}  # fmt: skip


def spec_forms() -> list[str]:
    """One line per policy kind that loads: its spec form and what it runs (for ``--help`` and errors)."""
    metas = [_meta(entry.name, entry.meta) for entry in POLICIES.entries()]  # a broken plugin: warned, skipped
    width = max((len(m["usage"]) for m in metas), default=0)
    return [f"{m['usage']:<{width}}  {m['help']}".rstrip() for m in metas]


def policy_kinds() -> list[dict[str, Any]]:
    """Every policy kind that loads, as plain data: kind, usage, help, options (None: checked by the factory),
    whether it takes a target, and where it comes from (module or entry point)."""
    out = []
    for entry in POLICIES.entries():  # a broken plugin: warned about, skipped
        meta = _meta(entry.name, entry.meta)
        out.append({"kind": entry.name, "usage": meta["usage"], "help": meta["help"],
                    "options": None if meta["options"] is None else list(meta["options"]),
                    "takes_target": bool(meta["takes_target"]), "origin": _origin(entry)})  # fmt: skip
    return out


def _origin(entry: Any) -> str:
    """Where a kind comes from: its plugin's entry point, or the module of its factory."""
    if entry.entry_point is not None:
        return f"plugin {entry.entry_point.value}"
    module = getattr(entry.item, "__module__", None)
    return module or entry.target or entry.source


def _spec_error(spec: str, why: str) -> ValueError:
    forms = "\n  ".join(spec_forms())
    return ValueError(f"bad policy spec {spec!r}: {why}. Valid forms:\n  {forms}\n"
                      "Options after a comma, e.g. hf:./model,temperature=0.7,max_tokens=256")  # fmt: skip


def _parse_value(text: str) -> Any:
    """Option values: JSON scalars (numbers, true/false/null) when they parse, else the text itself."""
    try:
        value = json.loads(text)
    except json.JSONDecodeError:
        return text
    return value if isinstance(value, int | float | bool) or value is None else text


@dataclass(frozen=True, slots=True)
class PolicySpec:
    """A parsed ``--policy`` spec: its kind, its target (None when the kind takes none) and its options."""

    kind: str
    target: str | None
    options: dict[str, Any] = field(default_factory=dict)
    #: The options as written (``key=value``, spaces removed), in order.
    raw_options: tuple[str, ...] = ()

    @property
    def canonical(self) -> str:
        """One spelling per policy: kind, target, options sorted (``gold:seed=1,drop=0.3`` is
        ``gold,drop=0.3,seed=1``), so that a stored spec and a new one compare equal when they mean the same."""
        return ",".join([self.kind + (f":{self.target}" if self.target else ""), *sorted(self.raw_options)])


def parse_spec(spec: str) -> PolicySpec:
    """Split ``spec`` into kind, target and options, as the kind's registration says (``takes_target``).

    A kind nobody registered is parsed too (a target is then whatever follows the colon unless it reads
    ``key=value``), so that stored specs can be compared after their plugin is gone; :func:`make_policy`
    refuses it. Raises ``ValueError`` listing the valid forms for an empty spec or an option that is not
    ``key=value`` or is given twice.
    """
    text = spec.strip()
    if not text:
        raise _spec_error(spec, "it is empty")
    head, *option_parts = text.split(",")
    kind, _, target = head.partition(":")
    kind, target = kind.strip().lower(), target.strip()
    if kind in POLICIES:
        try:
            takes_target = bool(_meta(kind)["takes_target"])
        except ValueError:  # a broken plugin: parsed as an unknown kind
            takes_target = "=" not in target
    else:
        takes_target = "=" not in target
    if target and not takes_target:  # 'gold:drop=0.3': the first option sits where a target would
        option_parts, target = [target, *option_parts], ""
    options: dict[str, Any] = {}
    raw: list[str] = []
    for part in (p for p in option_parts if p.strip()):
        key, sep, value = part.partition("=")
        key = key.strip()
        if not sep or not key:
            raise _spec_error(spec, f"option {part!r} is not key=value")
        if key in options:
            raise _spec_error(spec, f"option {key!r} given twice")
        options[key] = _parse_value(value.strip())
        raw.append(part.strip().replace(" ", ""))
    return PolicySpec(kind, target or None, options, tuple(raw))


def tokenizer_source(spec: str | PolicySpec | None) -> str | None:
    """The tokenizer a policy SPEC samples with (a folder or a .gguf file), read off the spec: nothing is loaded,
    built or pulled.

    A ``tokenizer=`` option wins; otherwise the kind's registration answers (``@policy(..., tokenizer=...)``):
    ``hf:`` and ``gguf:`` their target, ``vllm:`` a MODEL that is a local folder, ``smollm2`` the pulled model
    file. None for kinds that sample no tokens of their own (``gold``, ``openai``, the probes), an unknown kind
    (a stored spec whose plugin is gone) and one that does not say. Raises ``ValueError`` for a spec that does
    not parse.
    """
    if spec is None or (isinstance(spec, str) and not spec.strip()):
        return None
    parsed = spec if isinstance(spec, PolicySpec) else parse_spec(spec)
    given = parsed.options.get("tokenizer")
    if given is not None and str(given).strip():
        return str(given).strip()
    if parsed.kind not in POLICIES:
        return None
    try:
        resolve = POLICIES.meta(parsed.kind).get("tokenizer")
    except ValueError:  # a plugin that does not load cannot say either
        return None
    return resolve(parsed) if resolve is not None else None


def tool_prompt_of(spec: str | PolicySpec | None) -> str:
    """How a policy SPEC states tools to its model (``ChatTemplate``'s ``tool_prompt``), read off the spec: its
    ``tool_prompt=`` option, else what its model file or folder says of itself, else ``auto``. Nothing is loaded
    or pulled; a spec that does not parse says ``auto``."""
    from ..models import model_tool_prompt

    if spec is None or (isinstance(spec, str) and not spec.strip()):
        return "auto"
    try:
        parsed = spec if isinstance(spec, PolicySpec) else parse_spec(spec)
        given = parsed.options.get("tool_prompt")
        if given is not None and str(given).strip():
            return str(given).strip()
        source = tokenizer_source(parsed)
    except ValueError:
        return "auto"
    if parsed.kind == "smollm2" and source is None:  # not pulled yet: the registry knows its default all the same
        from ..models import known_model

        return known_model("smollm2").tool_prompt
    return (model_tool_prompt(source) if source else None) or "auto"


def make_policy(spec: str, **overrides: Any) -> Policy:
    """Build a policy from a ``--policy`` SPEC; ``overrides`` win over options written in the spec.

    Raises ``ValueError`` (listing the valid forms) for a spec that does not parse, an unknown kind, an option
    the kind does not take, a missing target, or a value its factory rejects.
    """
    parsed = parse_spec(spec)
    kind = parsed.kind
    if kind not in POLICIES:
        raise _spec_error(spec, f"unknown policy kind {kind!r}")
    try:
        factory = POLICIES.get(kind)
    except ValueError as exc:  # a plugin that does not load
        raise _spec_error(spec, str(exc)) from None
    meta = _meta(kind)
    allowed = meta["options"]
    if allowed is not None:
        unknown = sorted(set(parsed.options) - set(allowed))
        if unknown and not allowed:
            raise _spec_error(spec, f"{kind} takes no options, got {unknown}")
        if unknown:
            raise _spec_error(spec, f"unknown {kind} option(s) {unknown}; {kind} takes {', '.join(allowed)}")
    options = {**parsed.options, **overrides}
    takes_target = meta["takes_target"]
    try:
        if takes_target:
            if not parsed.target:
                what = takes_target if isinstance(takes_target, str) else "a target"
                raise ValueError(f"{kind} needs {what}: {meta['usage']}")
            return factory(parsed.target, **options)
        return factory(**options)
    except ValueError as exc:  # the factory's own check of a value: said with the spec it came from
        raise _spec_error(spec, str(exc)) from None


# The built-in kinds register on import, in the order --help lists them (hence the split import blocks).
from .gold import GoldPolicy, GoldSession, confirmation_request, corrupt_value, gold_answer, make_gold  # noqa: E402

# isort: split
from .probes import NOOP_ANSWER, GibberishPolicy, GibberishSession, NoopPolicy, NoopSession  # noqa: E402

# isort: split
from .openai import OPENAI_OPTIONS, OpenAIPolicy, OpenAISession, make_openai, parse_arguments  # noqa: E402

# isort: split
from . import token_kinds  # noqa: E402,F401  (registers vllm, hf, gguf and smollm2; imports nothing heavy)
from .scripted import ScriptedPolicy, ScriptedSession, ScriptFn, ScriptItem, as_turn  # noqa: E402

# isort: split
from . import literal  # noqa: E402,F401  (registers the literal probe, listed after the built-in kinds)

__all__ = [
    "ENTRY_POINT_GROUP",
    "NOOP_ANSWER",
    "OPENAI_OPTIONS",
    "POLICIES",
    "GibberishPolicy",
    "GibberishSession",
    "GoldPolicy",
    "GoldSession",
    "NoopPolicy",
    "NoopSession",
    "OpenAIPolicy",
    "OpenAISession",
    "PolicyFactory",
    "PolicySpec",
    "ScriptFn",
    "ScriptItem",
    "ScriptedPolicy",
    "ScriptedSession",
    "TokenizerOf",
    "as_turn",
    "confirmation_request",
    "corrupt_value",
    "gold_answer",
    "make_gold",
    "make_openai",
    "make_policy",
    "parse_arguments",
    "parse_spec",
    "policy",
    "policy_kinds",
    "spec_forms",
    "tokenizer_source",
    "tool_prompt_of",
]
