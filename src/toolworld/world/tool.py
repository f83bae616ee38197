"""``@tool``: a typed Python function becomes a tool with an OpenAI-format JSON schema.

The function's signature is the single source of truth. pydantic turns the type hints into both the JSON
schema the model sees and the validator that runs before the function does, so the two can never drift
apart. Entity types (``Annotated[str, Entity("order")]`` on parameters, ``yields={"order": "orders[].id"}``
on results) are what task synthesis builds its tool-dependency graph from, so they live on the spec as
first-class data rather than in prose.
"""

from __future__ import annotations

import inspect
import re
import types
import typing
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Annotated, Any, Union, get_args, get_origin, get_type_hints

import pydantic
from pydantic import ConfigDict, Field

from .errors import ToolError, WorldError


@dataclass(frozen=True, slots=True)
class Entity:
    """Marks a parameter as an entity of a kind, e.g. ``Annotated[str, Entity("order")]``.

    When the world maps the kind to a table column, ``Episode.call`` checks that the value exists before
    the tool runs and answers ``not_found`` otherwise.
    """

    kind: str


@dataclass(frozen=True, slots=True)
class EntityParam:
    """One parameter that takes an entity: ``many`` when it is a list of them."""

    param: str
    kind: str
    many: bool
    required: bool


@dataclass(frozen=True)
class ToolSpec:
    """Everything known about a tool without running it: name, schema, read/write, entity types.

    ``identifies`` marks a tool whose success tells who the customer is (a lookup by email, say): the episode
    then acts for that customer only. ``confirm`` says whether a careful agent asks the customer for an explicit
    yes before calling it; scorers of conduct read it, the episode does not.
    """

    name: str
    description: str
    parameters: dict[str, Any]
    mutates: bool
    entity_params: tuple[EntityParam, ...] = ()
    yields: Mapping[str, str] = field(default_factory=dict)
    returns: str = ""
    identifies: bool = False
    confirm: bool = False

    @property
    def consumes(self) -> frozenset[str]:
        """Entity kinds this tool takes as input (any parameter)."""
        return frozenset(p.kind for p in self.entity_params)

    @property
    def requires(self) -> frozenset[str]:
        """Entity kinds this tool cannot be called without (required parameters only)."""
        return frozenset(p.kind for p in self.entity_params if p.required)

    @property
    def produces(self) -> frozenset[str]:
        """Entity kinds this tool's result yields."""
        return frozenset(self.yields)

    def to_openai(self) -> dict[str, Any]:
        """The OpenAI function-tool format: ``{"type": "function", "function": {...}}``."""
        return {
            "type": "function",
            "function": {"name": self.name, "description": self.description, "parameters": self.parameters},
        }


class Tool:
    """A callable tool: the user's function, its spec and its argument validator."""

    def __init__(self, fn: Callable[..., Any], spec: ToolSpec, model: type[pydantic.BaseModel], takes_ctx: bool):
        self.fn = fn
        self.spec = spec
        self._model = model
        self._takes_ctx = takes_ctx
        self.__doc__ = fn.__doc__
        self.__name__ = fn.__name__
        self.__wrapped__ = fn

    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def mutates(self) -> bool:
        return self.spec.mutates

    @property
    def identifies(self) -> bool:
        return self.spec.identifies

    @property
    def confirm(self) -> bool:
        return self.spec.confirm

    def validate(self, arguments: Mapping[str, Any]) -> dict[str, Any]:
        """Check and coerce arguments; raise ``ToolError("invalid_arguments")`` that names each problem."""
        try:
            model = self._model.model_validate(arguments)
        except pydantic.ValidationError as exc:
            raise ToolError(
                "invalid_arguments", _explain(self.spec, exc), errors=exc.errors(include_url=False, include_input=False)
            ) from None
        return model.__dict__

    def run(self, ctx: Any, arguments: dict[str, Any]) -> Any:
        """Run on already-validated arguments (``Episode.call`` owns transactions and checks)."""
        if self._takes_ctx:
            return self.fn(ctx, **arguments)
        return self.fn(**arguments)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.fn(*args, **kwargs)

    def __repr__(self) -> str:
        return f"<Tool {self.spec.name} ({'write' if self.spec.mutates else 'read'})>"


def tool(
    fn: Callable[..., Any] | None = None,
    *,
    name: str | None = None,
    mutates: bool = False,
    yields: Mapping[str, str] | None = None,
    identifies: bool = False,
    confirm: bool | None = None,
) -> Any:
    """Turn a typed function into a :class:`Tool`.

    Args:
        name: tool name shown to the model (default: the function's name).
        mutates: True for write tools; they run in a transaction that is rolled back on any error.
        yields: entity kind -> path into the result where ids of that kind are found, e.g.
            ``{"user": "user_id", "order": "orders[].order_id"}`` (``[]`` steps into every list element,
            ``""`` is the result itself).
        identifies: True for a tool that identifies the customer (e.g. a lookup by email). On success the
            episode records the id found at ``yields[<the world's customer kind>]`` as ``Episode.customer``, and
            from then on write tools refuse objects that belong to anyone else.
        confirm: whether the customer must say an explicit yes before the call (default: True for write
            tools, False for reads). Set False for a write that needs no consent, such as opening a ticket.

    The first parameter, when named ``ctx``, receives the episode's :class:`~toolworld.world.Ctx` and is
    not part of the schema. The description comes from the docstring; per-parameter descriptions come from
    its ``Args:`` section or from ``Annotated[..., Field(description=...)]``.
    """

    def wrap(f: Callable[..., Any]) -> Tool:
        return _build(f, name or f.__name__, mutates, dict(yields or {}), identifies, confirm)

    return wrap(fn) if fn is not None else wrap


_NAME_RE = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")


def _build(
    fn: Callable[..., Any], name: str, mutates: bool, yields: dict[str, str], identifies: bool, confirm: bool | None
) -> Tool:
    if not _NAME_RE.match(name):
        raise WorldError(f"tool name {name!r} must be 1-64 letters, digits, '_' or '-' (OpenAI's rule)")
    if confirm and not mutates:
        raise WorldError(f"tool {name!r}: confirm=True applies to write tools only; declare it with mutates=True")
    if identifies and not yields:
        raise WorldError(
            f"tool {name!r}: identifies=True needs yields= naming where the customer id is in the result, "
            'e.g. yields={"user": "user_id"}'
        )
    description, arg_docs, returns = parse_docstring(fn.__doc__ or "")
    if not description:
        raise WorldError(f"tool {name!r} needs a docstring: it is the description the model reads")
    try:
        hints = get_type_hints(fn, include_extras=True)
    except NameError as exc:
        raise WorldError(
            f"tool {name!r}: a type hint names something not importable at module level ({exc}); define the types "
            "a tool uses at module level"
        ) from exc
    params = list(inspect.signature(fn).parameters.values())
    takes_ctx = bool(params) and params[0].name == "ctx"
    if takes_ctx:
        params = params[1:]
    fields: dict[str, Any] = {}
    entity_params: list[EntityParam] = []
    for p in params:
        if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD, p.POSITIONAL_ONLY):
            raise WorldError(f"tool {name!r}: parameter {p.name!r} must be a plain keyword parameter")
        if p.name not in hints:
            raise WorldError(f"tool {name!r}: parameter {p.name!r} needs a type hint")
        ann = hints[p.name]
        required = p.default is inspect.Parameter.empty
        default = ... if required else p.default
        info = Field(default, description=arg_docs.get(p.name)) if arg_docs.get(p.name) else Field(default)
        fields[p.name] = (ann, info)
        kind, many = _entity_of(ann)
        if kind is not None:
            entity_params.append(EntityParam(p.name, kind, many, required))
    for kind, path in yields.items():
        if not isinstance(path, str):
            raise WorldError(f"tool {name!r}: yields[{kind!r}] must be a path string, got {path!r}")
    model = pydantic.create_model(  # type: ignore[call-overload]
        f"{name}_arguments", __config__=ConfigDict(extra="forbid"), **fields
    )
    parameters = _clean_schema(model.model_json_schema())
    parameters.setdefault("properties", {})
    parameters["additionalProperties"] = False
    spec = ToolSpec(
        name=name,
        description=description,
        parameters=parameters,
        mutates=mutates,
        entity_params=tuple(entity_params),
        yields=yields,
        returns=returns,
        identifies=identifies,
        confirm=mutates if confirm is None else confirm,
    )
    return Tool(fn, spec, model, takes_ctx)


def _entity_of(ann: Any) -> tuple[str | None, bool]:
    """Find an ``Entity`` marker in an annotation; ``many`` when it sits inside a list/tuple/set."""
    origin = get_origin(ann)
    if origin is Annotated:
        base, *meta = get_args(ann)
        for m in meta:
            if isinstance(m, Entity):  # Annotated[list[str], Entity("x")] marks every element
                return m.kind, get_origin(base) in (list, tuple, set, frozenset)
        return _entity_of(base)
    if origin in (list, tuple, set, frozenset):
        for arg in get_args(ann):
            kind, _ = _entity_of(arg)
            if kind is not None:
                return kind, True
        return None, False
    if origin in (Union, types.UnionType):
        for arg in get_args(ann):
            if arg is type(None):
                continue
            kind, many = _entity_of(arg)
            if kind is not None:
                return kind, many
    return None, False


def _clean_schema(schema: Any) -> Any:
    """Drop pydantic's auto ``title`` keys (noise in the prompt); keep property *names* called title."""
    if isinstance(schema, dict):
        out = {}
        for key, value in schema.items():
            if key == "title" and isinstance(value, str):
                continue
            if key in ("properties", "$defs", "definitions") and isinstance(value, dict):
                out[key] = {k: _clean_schema(v) for k, v in value.items()}
            else:
                out[key] = _clean_schema(value)
        return out
    if isinstance(schema, list):
        return [_clean_schema(v) for v in schema]
    return schema


_SECTION_RE = re.compile(r"^(Args|Arguments|Parameters|Returns|Raises|Yields|Examples?|Notes?):\s*$")
_ARG_RE = re.compile(r"^(\*{0,2}\w+)\s*(?:\([^)]*\))?\s*:\s*(.*)$")


def parse_docstring(doc: str) -> tuple[str, dict[str, str], str]:
    """Split a Google-style docstring into (description, {arg: description}, returns)."""
    lines = inspect.cleandoc(doc).splitlines()
    desc: list[str] = []
    args: dict[str, list[str]] = {}
    returns: list[str] = []
    section = ""
    current: str | None = None
    arg_indent = None
    for line in lines:
        m = _SECTION_RE.match(line.strip()) if not line.startswith(" ") else None
        if m:
            section, current, arg_indent = m.group(1), None, None
            continue
        if not section:
            desc.append(line)
        elif section in ("Args", "Arguments", "Parameters"):
            indent = len(line) - len(line.lstrip())
            am = _ARG_RE.match(line.strip())
            if am and (arg_indent is None or indent <= arg_indent):
                arg_indent = indent
                current = am.group(1).lstrip("*")
                args[current] = [am.group(2).strip()]
            elif current and line.strip():
                args[current].append(line.strip())
        elif section == "Returns" and line.strip():
            returns.append(line.strip())
    description = "\n".join(desc).strip()
    description = re.sub(r"(?<!\n)\n(?!\n)", " ", description)  # unwrap hard-wrapped paragraphs
    return description, {k: " ".join(v).strip() for k, v in args.items()}, " ".join(returns)


def _explain(spec: ToolSpec, exc: pydantic.ValidationError) -> str:
    """Turn pydantic's errors into one message an agent can act on."""
    props = spec.parameters.get("properties", {})
    parts: list[str] = []
    for err in exc.errors(include_url=False):
        loc = ".".join(str(x) for x in err["loc"]) or "arguments"
        top = str(err["loc"][0]) if err["loc"] else ""
        if err["type"] == "missing":
            hint = props.get(top, {}).get("description", "")
            parts.append(f"missing required argument '{loc}'" + (f" ({hint})" if hint else ""))
        elif err["type"] == "extra_forbidden":
            parts.append(f"unexpected argument '{loc}'")
        elif err["type"] == "model_type":
            parts.append("arguments must be a JSON object")
        else:
            got = repr(err.get("input"))
            if len(got) > 80:
                got = got[:77] + "..."
            parts.append(f"argument '{loc}': {err['msg']} (got {got})")
    accepted = ", ".join(
        f"{k}" + ("" if k in spec.parameters.get("required", []) else "?") for k in props
    ) or "no arguments"
    return f"Invalid arguments for {spec.name}: " + "; ".join(parts) + f". It takes: {accepted}."


def get_entity_kinds(tools: typing.Iterable[Tool]) -> set[str]:
    """All entity kinds named by these tools' parameters and results."""
    kinds: set[str] = set()
    for t in tools:
        kinds |= t.spec.consumes | t.spec.produces
    return kinds


def extract_path(value: Any, path: str) -> list[Any]:
    """Values at ``path`` in a tool result: ``"orders[].order_id"``; ``""`` is the value itself.

    Used to read the entity ids a result yields. Missing keys give no values rather than an error, since
    a result may legitimately omit an optional part.
    """
    current = [value]
    if path:
        for part in path.split("."):
            many = part.endswith("[]")
            key = part[:-2] if many else part
            nxt: list[Any] = []
            for v in current:
                if key:
                    if not isinstance(v, dict) or key not in v:
                        continue
                    v = v[key]
                if many:
                    if isinstance(v, list):
                        nxt.extend(v)
                    elif isinstance(v, dict):
                        nxt.extend(v.keys())
                else:
                    nxt.append(v)
            current = nxt
    return [v for v in current if v is not None]


__all__ = [
    "Entity",
    "EntityParam",
    "Tool",
    "ToolSpec",
    "extract_path",
    "parse_docstring",
    "tool",
]
