"""Exports of a stored run: trajectories, chat conversations, template-rendered SFT data and token buffers.

- ``jsonl``: one trajectory per line, exactly ``Trajectory.to_json()`` plus its ``score`` (token buffer
  included, so RL trainers get the sampled ids, loss mask and logprobs).
- ``parquet``: one row per trial with flat columns to filter on (success, reward, termination, turns, tokens,
  divergence, difficulty) and the trajectory and score as JSON strings.
- ``chat``: one conversation per row in the OpenAI chat shape (``messages`` and ``tools``, tool-call
  arguments as JSON objects) for trainers that render with their own template.
- ``sft``: the conversations rendered through a model's own chat template as toolworld's token-level episodes
  render them (``ChatTemplate.prepare`` and the token bridge of ``toolworld.tokens``): ``input_ids`` and
  ``assistant_masks`` (1 on the tokens a model has to produce: each assistant turn after its generation prompt,
  through its end-of-turn token), plus the prepared ``messages``. TRL's ``SFTTrainer`` reads such rows as they
  are; most templates have no ``{% generation %}`` markers, so the mask travels with the data instead of being
  left to the trainer.
- ``tokens``: one row per trial of a token-level run (``hf``, ``gguf``, ``vllm``, ``smollm2``): the ids the
  model saw and sampled, exactly as sampled, with ``loss_mask`` (1 on sampled tokens), the sampling
  ``logprobs`` (0 where the mask is 0), ``reward`` and ``success``: what RL trainers need.

``chat`` and ``sft`` hold successful trials only unless ``include_failed``; ``tokens`` holds every scored trial
(RL learns from failures too). Infra-errored trials are never exported there, since they say nothing about the
agent.

Each of ``parquet``, ``chat``, ``sft`` and ``tokens`` has one fixed Arrow schema (``export_schema``), whatever
the run holds: free-form values (messages, tool schemas, tool-call arguments whose keys differ from tool to tool)
are Arrow JSON values, not inferred structs, so the exports of different runs load together
(``datasets.load_dataset("parquet", data_files=[a, b])``). For ``chat``, ``sft`` and ``tokens`` the file type
follows the output's suffix: ``.jsonl`` or ``.json`` writes JSON lines (same columns; read several with
``features=datasets.Features.from_arrow_schema(export_schema(fmt))``), anything else Parquet.

Every export is written to a temporary file and renamed, so a failed export never leaves half a file behind.
"""

from __future__ import annotations

import contextlib
import json
import logging
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from ..core.errors import ToolworldError
from ..core.files import atomic_path, atomic_text_writer
from .runstore import encode_json, encode_model

if TYPE_CHECKING:
    from ..tokens import ChatTemplate
    from .runstore import RunStore

EXPORT_FORMATS = ("jsonl", "parquet", "chat", "sft", "tokens")
DEFAULT_NAMES = {"jsonl": "trajectories.jsonl", "parquet": "trajectories.parquet", "chat": "chat.parquet",
                 "sft": "sft.parquet", "tokens": "tokens.parquet"}  # fmt: skip

#: The fixed columns of each row format: (name, type). ``json`` is an Arrow JSON value (a dict or list in Python,
#: ``datasets.Json`` once loaded); ``list<...>`` a list of that type. Every column may be null except the ids.
SCHEMAS: dict[str, tuple[tuple[str, str], ...]] = {
    "chat": (("task_id", "string"), ("trial", "int32"), ("world", "string"), ("policy", "string"),
             ("success", "bool"), ("reward", "float64"), ("messages", "list<json>"), ("tools", "list<json>")),
    "sft": (("task_id", "string"), ("trial", "int32"), ("world", "string"), ("policy", "string"),
            ("success", "bool"), ("reward", "float64"), ("tokenizer", "string"), ("messages", "list<json>"),
            ("tools", "list<json>"), ("input_ids", "list<int32>"), ("assistant_masks", "list<int8>"),
            ("unsampleable_turns", "int32")),
    "tokens": (("task_id", "string"), ("trial", "int32"), ("world", "string"), ("policy", "string"),
               ("success", "bool"), ("reward", "float64"), ("termination", "string"), ("input_ids", "list<int32>"),
               ("loss_mask", "list<int8>"), ("logprobs", "list<float32>"), ("breaks", "int32")),
    "parquet": (("task_id", "string"), ("trial", "int64"), ("world", "string"), ("policy", "string"),
                ("kind", "string"), ("level", "string"), ("target", "string"), ("status", "string"),
                ("termination", "string"), ("success", "bool"), ("reward", "float64"),
                ("first_divergent_step", "int64"), ("divergence", "string"), ("turns", "int64"), ("steps", "int64"),
                ("agent_errors", "int64"), ("prompt_tokens", "int64"), ("completion_tokens", "int64"),
                ("wall_s", "float64"), ("attempts", "int64"), ("trajectory", "string"), ("score", "string")),
}  # fmt: skip

logger = logging.getLogger("toolworld.export")


class ExportError(ToolworldError):
    """An export that cannot be made as asked; ``kind`` names the problem for structured CLI errors."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message, kind=kind)


# ------------------------------------------------------------------------------------------- writing files


def _atomic_text(path: Path, write: Callable[[IO[str]], int]) -> int:
    with atomic_text_writer(path) as fh:
        return write(fh)


def _pyarrow(*, json_type: bool = True) -> Any:
    """pyarrow, and (``json_type``) one with the JSON extension type that free-form columns are stored as."""
    try:
        import pyarrow as pa
        import pyarrow.parquet  # the Parquet writer is a submodule that may be missing from a minimal build
    except ImportError as exc:
        raise ExportError("missing_dependency", "Parquet export needs pyarrow: pip install 'toolworld[data]', or "
                          "write JSON lines with -o FILE.jsonl") from exc  # fmt: skip
    if json_type and not hasattr(pa, "json_"):
        raise ExportError("missing_dependency", f"pyarrow {pa.__version__} has no JSON type (needs >= 19): "
                          "pip install -U 'pyarrow>=19', or write JSON lines with -o FILE.jsonl")  # fmt: skip
    return pa


def _arrow_type(pa: Any, spec: str) -> Any:
    if spec.startswith("list<"):
        return pa.list_(_arrow_type(pa, spec[5:-1]))
    return pa.json_() if spec == "json" else pa.bool_() if spec == "bool" else getattr(pa, spec)()


def export_schema(fmt: str) -> Any:
    """The fixed ``pyarrow.Schema`` of a row format (``parquet``, ``chat``, ``sft`` or ``tokens``)."""
    pa = _pyarrow(json_type=any("json" in spec for _, spec in SCHEMAS[fmt]))
    return pa.schema([pa.field(name, _arrow_type(pa, spec)) for name, spec in SCHEMAS[fmt]])


def _json_dumps(value: Any) -> str:
    # the store's encoder: a lone surrogate or a NaN a model produced is escaped, never a failed export
    return encode_json(value)


def _column(pa: Any, spec: str, values: list[Any]) -> Any:
    """One Arrow column of the fixed type; JSON values are serialised here (Arrow stores them as text)."""
    if spec == "json":
        return pa.ExtensionArray.from_storage(pa.json_(), pa.array(
            [None if v is None else _json_dumps(v) for v in values], pa.string()))  # fmt: skip
    if spec == "list<json>":
        offsets, flat, valid = [0], [], []
        for v in values:
            valid.append(v is not None)
            flat.extend(_json_dumps(x) for x in v or [])
            offsets.append(len(flat))
        items = pa.ExtensionArray.from_storage(pa.json_(), pa.array(flat, pa.string()))
        mask = pa.array([not ok for ok in valid], pa.bool_())
        return pa.ListArray.from_arrays(pa.array(offsets, pa.int32()), items, mask=mask)
    return pa.array(values, _arrow_type(pa, spec))


def _write_rows(fmt: str, rows: Iterator[dict[str, Any]], path: Path, *, lines: bool | None = None) -> int:
    """Write rows of ``fmt`` to ``path``: JSON lines (default for a .jsonl/.json name), else Parquet with the
    fixed schema."""
    columns = SCHEMAS[fmt]
    if lines is None:
        lines = path.suffix.lower() in (".jsonl", ".json")
    if lines:

        def write_lines(fh: IO[str]) -> int:
            n = 0
            for row in rows:
                fh.write(_json_dumps({name: row.get(name) for name, _ in columns}))
                fh.write("\n")
                n += 1
            return n

        return _atomic_text(path, write_lines)
    pa = _pyarrow(json_type=any("json" in spec for _, spec in columns))
    import pyarrow.parquet as pq

    schema = export_schema(fmt)
    collected: dict[str, list[Any]] = {name: [] for name, _ in columns}
    for row in rows:
        for name, _ in columns:
            collected[name].append(row.get(name))
    table = pa.Table.from_arrays([_column(pa, spec, collected[name]) for name, spec in columns], schema=schema)

    with atomic_path(path) as tmp:
        pq.write_table(table, tmp)
    return int(table.num_rows)


# ------------------------------------------------------------------------------------------------ messages


def _arguments_object(args: Any) -> Any:
    """Tool-call arguments as a JSON object: a JSON string is decoded; a malformed one stays the model's text."""
    if isinstance(args, str):
        try:
            decoded = json.loads(args) if args.strip() else {}
        except (ValueError, RecursionError):
            return args
        return decoded if isinstance(decoded, dict) else args
    return args


def _with_object_arguments(msg: Mapping[str, Any]) -> dict[str, Any]:
    out = dict(msg)
    if out.get("tool_calls"):
        calls = []
        for call in out["tool_calls"]:
            call = dict(call)
            if isinstance(call.get("function"), Mapping):
                fn = dict(call["function"])
                fn["arguments"] = _arguments_object(fn.get("arguments", {}))
                call["function"] = fn
            calls.append(call)
        out["tool_calls"] = calls
    return out


def chat_messages(messages: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Chat messages as trainers read them: OpenAI shape, only the keys a chat template uses, and tool-call
    arguments as JSON objects (templates index into them; a JSON string would be rendered as a string)."""
    out = []
    for msg in messages:
        keep = {k: msg[k] for k in ("role", "content", "tool_calls", "tool_call_id", "name", "reasoning_content")
                if msg.get(k) not in (None, [])}  # fmt: skip
        keep.setdefault("content", "")
        out.append(_with_object_arguments(keep))
    return out


def _exportable(store: RunStore, include_failed: bool) -> Iterator[tuple[Any, Any]]:
    """(trajectory, score) of the trials a conversation export holds (see the module docstring)."""
    for traj, score, _row in store.trials():
        if traj.failed_by_infra or score is None or score.infra_error:
            continue
        if include_failed or score.success:
            yield traj, score


def _tools_of(world: str, cache: dict[str, list[dict[str, Any]]]) -> list[dict[str, Any]]:
    if world not in cache:
        from ..world import get_world

        cache[world] = get_world(world).openai_tools()
    return cache[world]


def chat_records(store: RunStore, *, include_failed: bool = False) -> Iterator[dict[str, Any]]:
    """The run's conversations in OpenAI chat form (rows of the ``chat`` format)."""
    tools: dict[str, list[dict[str, Any]]] = {}
    for traj, score in _exportable(store, include_failed):
        yield {"task_id": traj.task_id, "trial": traj.trial, "world": traj.world, "policy": traj.policy,
               "success": score.success, "reward": score.reward, "messages": chat_messages(traj.messages),
               "tools": _tools_of(traj.world, tools)}  # fmt: skip


# -------------------------------------------------------------------------------------- rendering for SFT


def _turn_ids(template: ChatTemplate, messages: Sequence[Mapping[str, Any]], index: int) -> tuple[list[int], bool]:
    """The ids a model produces for assistant message ``index``, and whether the template let them be sampled.

    Normally the template's render of the turn continues its own generation prompt, and the turn is what follows
    that prompt through the end-of-turn token. Some templates render the history before a final assistant turn
    differently from a prompt (Mistral-Nemo writes the system prompt only into a conversation that ends on a user
    message), so no model could sample the turn token-exactly; then the turn is taken from the render that ends
    on it: what follows the point where it departs from a render ending on a placeholder assistant turn.
    """
    from ..tokens import SENTINEL, lcp
    from ..tokens.audit import reference_assistant_ids

    ids = reference_assistant_ids(template, list(messages), index)
    if ids is not None:
        return ids, True
    msgs = list(messages[:index + 1])
    real = template.render(msgs)
    placeholder = template.render([*msgs[:index], {"role": "assistant", "content": SENTINEL}])
    start = lcp(real, placeholder)
    all_ids, starts = template.encode_offsets(real)
    tail = [i for i, s in zip(all_ids, starts, strict=True) if s >= start]
    last = max((k for k, i in enumerate(tail) if i in template.stop_set), default=None)
    return (tail if last is None else tail[: last + 1]), False


@contextlib.contextmanager
def _quiet_bridge() -> Iterator[None]:
    """The bridge warns on each fallback (a live episode should say so); an export counts them instead."""
    tito = logging.getLogger("toolworld.tito")
    level = tito.level
    tito.setLevel(logging.ERROR)
    try:
        yield
    finally:
        tito.setLevel(level)


def render_sft(template: ChatTemplate, messages: Sequence[Mapping[str, Any]]) -> tuple[list[int], list[int], int]:
    """``(input_ids, assistant_masks, unsampleable_turns)`` of a conversation rendered for training.

    The conversation goes through the same token bridge as a token-level episode of this template, with a
    model that produces exactly the template's own rendering of each assistant turn: so the ids are the ones
    such a model would have seen and produced at inference, turn after turn (for templates that re-render
    history, such as Qwen3 dropping earlier reasoning, that differs from one full render of the conversation),
    and the mask is 1 on the produced tokens only. Messages after the last assistant turn carry no loss and are
    left out.
    """
    from ..tokens import TitoConversation

    msgs = [dict(m) for m in messages]
    last = max((k for k, m in enumerate(msgs) if m.get("role") == "assistant"), default=None)
    if last is None or last == 0:
        raise ValueError("the conversation has no assistant turn after a prompt, so nothing to train on")
    conv = TitoConversation(template)
    unsampleable = 0
    for k in range(last + 1):
        if msgs[k].get("role") != "assistant":
            continue
        conv.prompt_ids(msgs[:k])
        ids, sampleable = _turn_ids(template, msgs, k)
        unsampleable += not sampleable
        conv.record_sampled(ids, [0.0] * len(ids), k)
    return list(conv.buffer.ids), list(conv.buffer.mask), unsampleable


def _prepared_messages(template: ChatTemplate, messages: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The messages as the template renders them (tool prompt, call format and ids, tool role); arguments stay
    JSON objects except for a template that wants JSON text, whose ``prepare`` writes them so."""
    return template.prepare(chat_messages(messages))[0]


def load_export_tokenizer(source: Any) -> tuple[Any, str]:
    """(tokenizer, label) from a tokenizer object, a folder or a .gguf file; ``ExportError`` saying what to pass
    otherwise. The label names the tokenizer in each row: the folder's or file's name, or the object's own."""
    from ..tokens import TemplateError, load_tokenizer

    if source is None:
        raise ExportError("no_tokenizer", "--format sft renders through a model's chat template and needs that "
                          "model's tokenizer: pass --tokenizer FOLDER (a folder with tokenizer_config.json, or a "
                          ".gguf file), or export plain conversations with --format chat")  # fmt: skip
    if not isinstance(source, str | Path):
        return source, str(getattr(source, "name_or_path", "") or type(source).__name__)
    try:
        return load_tokenizer(source), Path(source).name
    except TemplateError as exc:
        raise ExportError("bad_tokenizer", f"{exc} (--tokenizer takes a tokenizer folder or a .gguf file)") from exc
    except ImportError as exc:
        raise ExportError("missing_dependency", f"rendering SFT data needs transformers ({exc}): pip install "
                          "'toolworld[models]'") from exc  # fmt: skip


def sft_records(store: RunStore, tokenizer: Any, *, include_failed: bool = False, label: str | None = None,
                tool_prompt: str = "auto") -> Iterator[dict[str, Any]]:  # fmt: skip
    """Rows of the ``sft`` format: each exportable conversation rendered through ``tokenizer``'s chat template
    (a tokenizer object, a folder or a .gguf file); ``label`` names it in the rows (default: its name);
    ``tool_prompt`` says how the tools are stated (``ChatTemplate``), as the model will see them when it runs."""
    from ..tokens import ChatTemplate, TemplateError

    tok, own_label = load_export_tokenizer(tokenizer)
    label = label or own_label
    templates: dict[str, ChatTemplate] = {}
    tools: dict[str, list[dict[str, Any]]] = {}
    with _quiet_bridge():
        for traj, score in _exportable(store, include_failed):
            world_tools = _tools_of(traj.world, tools)
            try:
                if traj.world not in templates:
                    templates[traj.world] = ChatTemplate(tok, world_tools, tool_prompt=tool_prompt)
                template = templates[traj.world]
                messages = chat_messages(traj.messages)
                ids, mask, unsampleable = render_sft(template, messages)
            except TemplateError as exc:
                raise ExportError(exc.kind, f"{label}: {exc}") from exc
            except ValueError as exc:
                logger.warning("skipped %s trial %d: %s", traj.task_id, traj.trial, exc)
                continue
            yield {"task_id": traj.task_id, "trial": traj.trial, "world": traj.world, "policy": traj.policy,
                   "success": score.success, "reward": score.reward, "tokenizer": label,
                   "messages": _prepared_messages(template, messages), "tools": world_tools, "input_ids": ids,
                   "assistant_masks": mask, "unsampleable_turns": unsampleable}  # fmt: skip


# ------------------------------------------------------------------------------------------ token buffers


def token_records(store: RunStore) -> Iterator[dict[str, Any]]:
    """Rows of the ``tokens`` format: every scored trial that holds a token buffer.

    Raises ``ExportError('no_token_buffers')`` when no trial has one (a message-level policy such as gold or
    openai), since such a run has no sampled tokens to train on.
    """
    from ..tokens import TokenBuffer

    seen = 0
    for traj, score, _row in store.trials():
        if traj.failed_by_infra or score is None or score.infra_error or not traj.token_buffer:
            continue
        buf = TokenBuffer.from_dict(traj.token_buffer)
        seen += 1
        yield {"task_id": traj.task_id, "trial": traj.trial, "world": traj.world, "policy": traj.policy,
               "success": score.success, "reward": score.reward, "termination": traj.termination,
               "input_ids": buf.ids, "loss_mask": buf.mask,
               "logprobs": [lp if m and lp is not None else 0.0 for lp, m in zip(buf.logprobs, buf.mask, strict=True)],
               "breaks": buf.breaks}  # fmt: skip
    if not seen:
        spec = store.config.get("policy_spec") or store.config.get("policy")
        raise ExportError("no_token_buffers", f"no trial of this run has a token buffer (policy {spec!r} is not "
                          "token-level): --format tokens needs a run of hf:, gguf:, vllm: or smollm2; use "
                          "--format sft --tokenizer FOLDER to render this run's conversations instead")  # fmt: skip


# ------------------------------------------------------------------------------------------------ exports


def export_run(store: RunStore, fmt: str, path: str | Path, *, include_failed: bool = False,
               tokenizer: Any = None, tool_prompt: str = "auto") -> int:  # fmt: skip
    """Write the run in ``fmt`` (one of ``EXPORT_FORMATS``) to ``path``; returns the number of records.

    ``tokenizer`` (``sft`` only, and needed there): a tokenizer object, folder or .gguf file. Which tokenizer a
    run's own policy sampled with is the policy layer's to say: :func:`toolworld.pipeline.export_run` fills it
    in from the run's ``--policy`` spec, and ``tool_prompt`` (``sft``) the way it stated the tools. Raises
    ``ExportError`` (with ``kind``) when the export cannot be made as
    asked: ``no_tokenizer``, ``bad_tokenizer``, ``no_token_buffers``, ``missing_dependency``.
    """
    if fmt not in EXPORT_FORMATS:
        raise ValueError(f"unknown export format {fmt!r}; use one of {', '.join(EXPORT_FORMATS)}")
    if tokenizer is not None and fmt != "sft":
        raise ValueError(f"a tokenizer only applies to --format sft, not {fmt}")
    target = Path(path)
    if fmt == "jsonl":

        def write_jsonl(fh: IO[str]) -> int:
            n = 0
            for traj, score, _row in store.trials():
                line = traj.model_dump(mode="python", warnings=False)
                line["score"] = score.model_dump(mode="python", warnings=False) if score is not None else None
                fh.write(encode_json(line))
                fh.write("\n")
                n += 1
            return n

        return _atomic_text(target, write_jsonl)
    if fmt == "chat":
        return _write_rows("chat", chat_records(store, include_failed=include_failed), target)
    if fmt == "sft":
        tok, label = load_export_tokenizer(tokenizer)  # before the output is opened: a bad one writes nothing
        rows = sft_records(store, tok, include_failed=include_failed, label=label, tool_prompt=tool_prompt)
        return _write_rows("sft", rows, target)
    if fmt == "tokens":
        return _write_rows("tokens", token_records(store), target)
    return _write_rows("parquet", trial_records(store), target, lines=False)


def trial_records(store: RunStore) -> Iterator[dict[str, Any]]:
    """Rows of the ``parquet`` format: one per stored trial, flat facts plus trajectory and score as JSON text."""
    tasks = {t.id: t for t in store.tasks()}
    for traj, score, row in store.trials():
        task = tasks.get(traj.task_id)
        yield {
            "task_id": traj.task_id, "trial": traj.trial, "world": traj.world, "policy": traj.policy,
            "kind": task.kind if task else None, "level": task.difficulty.level if task else None,
            "target": ",".join(task.provenance.targets) if task else None, "status": row["status"],
            "termination": traj.termination, "success": None if score is None or score.infra_error else score.success,
            "reward": None if score is None else score.reward,
            "first_divergent_step": None if score is None else score.first_divergent_step,
            "divergence": None if score is None else score.divergence, "turns": traj.num_turns,
            "steps": len(traj.steps), "agent_errors": len(traj.agent_errors),
            "prompt_tokens": traj.usage.prompt_tokens, "completion_tokens": traj.usage.completion_tokens,
            "wall_s": traj.wall_s, "attempts": row["attempts"], "trajectory": encode_model(traj),
            "score": None if score is None else encode_model(score),
        }  # fmt: skip
