"""Loading a tokenizer, offline, from whatever a user points at: one loader for rollouts, engines and exports.

:func:`load_tokenizer` takes a loaded tokenizer (returned as is), a tokenizer folder (``tokenizer.json`` /
``tokenizer_config.json``), or a ``.gguf`` model file, whose vocabulary, merges, token types and chat template
are rebuilt into a transformers tokenizer (:func:`build_gguf_tokenizer`; cached by :func:`load_gguf_tokenizer`).
Anything else is a :class:`TemplateError` whose ``kind`` says what was wrong (``not_found``, ``not_a_tokenizer``,
``unsupported_tokenizer``) and whose message says what to pass instead.

transformers, tokenizers and gguf are imported only when a tokenizer is actually loaded, so importing
``toolworld.tokens`` stays cheap.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..core.errors import ToolworldError
from ..core.files import atomic_directory
from ..core.paths import cache_dir

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerBase

__all__ = ["TOKENIZER_FILES", "TemplateError", "build_gguf_tokenizer", "gguf_metadata", "load_gguf_tokenizer",
           "load_tokenizer"]

#: Files whose presence makes a folder a tokenizer folder for transformers.
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "tokenizer.model")


class TemplateError(ToolworldError, ValueError):
    """A tokenizer or chat template that cannot be used; ``kind`` says which problem (for structured errors).

    Also a ``ValueError``: a tokenizer path is an argument like any other, and callers that treat bad arguments
    alike (a ``--policy`` spec whose ``tokenizer=`` is wrong is a bad spec) need no special case for it.
    """

    default_kind = "template_error"

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message, kind=kind)


def load_tokenizer(source: str | os.PathLike[str] | PreTrainedTokenizerBase) -> PreTrainedTokenizerBase:
    """A tokenizer from a folder, a ``.gguf`` file, or an already-loaded tokenizer (returned as is).

    Loads offline only (``local_files_only``). Raises :class:`TemplateError`: ``not_found`` for a missing path,
    ``not_a_tokenizer`` for a file or folder that holds no tokenizer, ``unsupported_tokenizer`` for a GGUF whose
    vocabulary cannot be rebuilt. ``ImportError`` when transformers (or gguf, for a ``.gguf``) is not installed.
    """
    if source is None:
        raise TemplateError("not_a_tokenizer", "no tokenizer given: pass a tokenizer folder (with tokenizer.json), "
                            "a .gguf model file, or a loaded tokenizer")  # fmt: skip
    if not isinstance(source, str | os.PathLike):
        return source
    path = Path(source).expanduser()
    if not path.exists():
        raise TemplateError("not_found", f"{path} does not exist; pass a tokenizer folder (with tokenizer.json) "
                            "or a .gguf model file")  # fmt: skip
    if path.is_file():
        if path.suffix.lower() == ".gguf":
            return load_gguf_tokenizer(path)
        hint = f"pass its folder {path.parent}" if path.name in TOKENIZER_FILES else \
            "pass the folder that holds tokenizer.json, or a .gguf model file"  # fmt: skip
        raise TemplateError("not_a_tokenizer", f"{path} is a file, not a tokenizer: {hint}")
    if not any((path / name).is_file() for name in TOKENIZER_FILES):
        # A folder holding just a GGUF model is a common slip: name the file to pass instead.
        ggufs = sorted(p.name for p in path.glob("*.gguf"))
        hint = f"pass the model file itself ({path / ggufs[0]})" if ggufs else \
            "pass a tokenizer folder or a .gguf model file"  # fmt: skip
        raise TemplateError("not_a_tokenizer", f"{path} has no {', '.join(TOKENIZER_FILES)}: {hint}")
    from transformers import AutoTokenizer

    try:
        return AutoTokenizer.from_pretrained(str(path), local_files_only=True)
    except Exception as exc:  # transformers raises many types for a broken folder
        raise TemplateError("not_a_tokenizer", f"{path} could not be loaded as a tokenizer: {exc}") from exc


# -- tokenizers rebuilt from a GGUF's metadata -----------------------------------------------------------------

# llama.cpp pre-tokenizer names (``tokenizer.ggml.pre``) -> the equivalent `tokenizers` pre-tokenizer. Each is
# checked against llama.cpp itself by the gguf engine (``GGUFEngine.check_tokenizer``); a name missing here gets
# GPT-2's byte-level split, and a mismatch is reported there rather than silently producing other ids.
_LLAMA3_SPLIT = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+"
    r"|\s+(?!\S)|\s+"
)
_QWEN2_SPLIT = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+"
    r"|\s+(?!\S)|\s+"
)


def _byte_level_after(pt: Any, pattern: str) -> Any:
    return pt.Sequence([pt.Split(_tk_regex(pattern), behavior="isolated", invert=False),
                        pt.ByteLevel(add_prefix_space=False, trim_offsets=False, use_regex=False)])  # fmt: skip


def _tk_regex(pattern: str) -> Any:
    from tokenizers import Regex

    return Regex(pattern)


_PRE_TOKENIZERS = {
    # SmolLM/SmolLM2: digits are split one by one before the GPT-2 byte-level regex.
    "smollm": lambda pt: pt.Sequence(
        [pt.Digits(individual_digits=True), pt.ByteLevel(add_prefix_space=False, trim_offsets=True, use_regex=True)]
    ),
    "llama-bpe": lambda pt: _byte_level_after(pt, _LLAMA3_SPLIT),
    "qwen2": lambda pt: _byte_level_after(pt, _QWEN2_SPLIT),
    "gpt-2": lambda pt: pt.ByteLevel(add_prefix_space=False, trim_offsets=True, use_regex=True),
}
_TOKEN_CONTROL, _TOKEN_USER_DEFINED = 3, 4


def gguf_metadata(path: str | Path | Any, keys: tuple[str, ...]) -> dict[str, Any]:
    """Read a few scalar/string metadata keys of a GGUF file or open ``GGUFReader`` (tensors are not loaded)."""
    from gguf import GGUFReader

    reader = path if isinstance(path, GGUFReader) else GGUFReader(str(path))
    out: dict[str, Any] = {}
    for key in keys:
        field = reader.fields.get(key)
        if field is None or not field.data:
            continue
        part = field.parts[field.data[0]]
        out[key] = bytes(part).decode("utf-8") if field.types[0].name == "STRING" else part.tolist()[0]
    return out


def _tokenizer_cache_dir(gguf: Path) -> Path:
    """Where the tokenizer of ``gguf`` is saved: keyed by the file's path, size and mtime, so a replaced file
    gets a fresh entry."""
    st = gguf.stat()
    key = hashlib.sha256(f"{gguf.resolve()}|{st.st_size}|{st.st_mtime_ns}".encode()).hexdigest()[:16]
    return cache_dir() / "tokenizers" / f"{gguf.stem}-{key}"


def _gguf_array(reader: Any, key: str) -> list[Any]:
    field = reader.fields.get(key)
    if field is None:
        return []
    return list(field.contents())


def _gguf_reader(path: Path) -> Any:
    from gguf import GGUFReader

    if not path.is_file():
        raise TemplateError("not_found", f"GGUF file {path} does not exist")
    try:
        return GGUFReader(str(path))
    except Exception as exc:  # gguf raises ValueError, struct.error, IndexError... for a file that is not GGUF
        raise TemplateError("not_a_tokenizer", f"{path} is not a readable GGUF file ({type(exc).__name__}: "
                            f"{exc}); pass a .gguf model file or a tokenizer folder") from exc  # fmt: skip


def build_gguf_tokenizer(gguf_path: str | Path) -> PreTrainedTokenizerBase:
    """A fast tokenizer built straight from a GGUF's vocabulary, merges, token types and chat template.

    Built with `tokenizers` alone (no torch, no model weights), so the embedded default runs on a machine with
    neither; transformers' own GGUF loader needs torch. Only byte-level BPE vocabularies
    (``tokenizer.ggml.model == "gpt2"``: SmolLM, Llama 3, Qwen, ...) are supported; for others a
    :class:`TemplateError` (``unsupported_tokenizer``) asks for the model's tokenizer folder.
    """
    from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    path = Path(gguf_path).expanduser()
    reader = _gguf_reader(path)
    meta = gguf_metadata(reader, ("tokenizer.ggml.model", "tokenizer.ggml.pre", "tokenizer.chat_template",
                                "tokenizer.ggml.bos_token_id", "tokenizer.ggml.eos_token_id",
                                "tokenizer.ggml.unknown_token_id", "tokenizer.ggml.padding_token_id"))  # fmt: skip
    kind = meta.get("tokenizer.ggml.model")
    if kind != "gpt2":
        raise TemplateError("unsupported_tokenizer", f"{path.name}: tokenizer type {kind!r} cannot be rebuilt from "
                            "the GGUF (only byte-level BPE, 'gpt2'); pass the model's tokenizer folder "
                            "(tokenizer=PATH)")  # fmt: skip
    tokens = _gguf_array(reader, "tokenizer.ggml.tokens")
    types = _gguf_array(reader, "tokenizer.ggml.token_type") or [1] * len(tokens)
    merges = [tuple(m.split(" ", 1)) for m in _gguf_array(reader, "tokenizer.ggml.merges")]
    vocab = {tok: i for i, tok in enumerate(tokens)}
    backend = Tokenizer(models.BPE(vocab=vocab, merges=merges, fuse_unk=False, byte_fallback=False))
    pre = meta.get("tokenizer.ggml.pre") or "gpt-2"
    backend.pre_tokenizer = _PRE_TOKENIZERS.get(pre, _PRE_TOKENIZERS["gpt-2"])(pre_tokenizers)
    backend.decoder = decoders.ByteLevel()
    added = [AddedToken(tok, special=(kind_ == _TOKEN_CONTROL), normalized=False)
             for tok, kind_ in zip(tokens, types, strict=False) if kind_ in (_TOKEN_CONTROL, _TOKEN_USER_DEFINED)]  # fmt: skip
    backend.add_tokens(added)

    def name(key: str) -> str | None:
        idx = meta.get(f"tokenizer.ggml.{key}_token_id")
        return tokens[idx] if isinstance(idx, int) and 0 <= idx < len(tokens) else None

    tok = PreTrainedTokenizerFast(tokenizer_object=backend, bos_token=name("bos"), eos_token=name("eos"),
                                  unk_token=name("unknown"), pad_token=name("padding"),
                                  clean_up_tokenization_spaces=False)  # fmt: skip
    if meta.get("tokenizer.chat_template"):
        tok.chat_template = meta["tokenizer.chat_template"]
    return tok


def load_gguf_tokenizer(gguf_path: str | Path, *, use_cache: bool = True) -> PreTrainedTokenizerBase:
    """A transformers tokenizer (with the GGUF's chat template) built from the GGUF's own vocabulary.

    See :func:`build_gguf_tokenizer`. Reading tens of thousands of strings out of the GGUF takes about a second,
    so the result is saved under ``<cache>/tokenizers/`` keyed by the file's path, size and mtime; later loads
    take a fraction of that.
    """
    gguf = Path(gguf_path).expanduser()
    if not gguf.is_file():
        raise TemplateError("not_found", f"GGUF file {gguf} does not exist")
    saved = _tokenizer_cache_dir(gguf)
    if use_cache and (saved / "tokenizer_config.json").is_file():
        from transformers import AutoTokenizer

        try:
            return AutoTokenizer.from_pretrained(str(saved), local_files_only=True)
        except Exception:  # an unreadable cache entry is rebuilt, never trusted
            shutil.rmtree(saved, ignore_errors=True)
    tok = build_gguf_tokenizer(gguf)
    if use_cache:
        # A reader sees the whole folder or none. OSError: another process won the race, or the cache is
        # read-only; either way the tokenizer in hand still works.
        with contextlib.suppress(OSError), atomic_directory(saved) as tmp:
            tok.save_pretrained(str(tmp))
    return tok
