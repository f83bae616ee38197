"""``toolworld new-world NAME``: write a small, working world package to grow into your own.

The template (``template/``, shipped inside the wheel) is a gym membership desk that meets the bar as written:
``toolworld check-world DIR/NAME`` passes and its own tests run with pytest. Files end in ``.tmpl`` so that the
template is never imported, linted or collected as part of toolworld; ``__WORLD__`` in them becomes the name,
``__TITLE__`` its title ("Gym Desk") and ``__DIST__`` its distribution name ("gym-desk").
"""

from __future__ import annotations

import importlib.util
import keyword
import shutil
from pathlib import Path

from ..core.errors import ToolworldError
from ..world.registry import WORLDS

TEMPLATE = Path(__file__).parent / "template"
PLACEHOLDER = "__WORLD__"

__all__ = ["TEMPLATE", "ScaffoldError", "new_world", "validate_name"]


class ScaffoldError(ToolworldError):
    """A name or a target folder ``new-world`` cannot use."""

    default_kind = "invalid_name"


def validate_name(name: str, folder: Path | None = None) -> None:
    """Refuse a name that is not a lower-case Python identifier, is a keyword, names an installed world, or
    would shadow an importable module (the world is imported by its name); ``folder`` itself, about to be
    replaced with ``--force``, does not count as such a module."""
    if not name.isidentifier() or keyword.iskeyword(name) or name != name.lower() or name.startswith("_"):
        raise ScaffoldError(f"world name {name!r} must be a lower-case Python identifier such as 'gym_desk' (letters, "
                            "digits and '_', not starting with a digit or '_', not a keyword)")  # fmt: skip
    if name in WORLDS.names():
        raise ScaffoldError(f"a world named {name!r} is already installed ({WORLDS.origin(name)}); pick another name",
                            kind="world_exists")  # fmt: skip
    spec = importlib.util.find_spec(name)
    if spec is not None and not (folder is not None and spec.origin and Path(spec.origin).resolve().parent == folder):
        raise ScaffoldError(f"{name!r} is the name of an importable module; pick a name that will not shadow it",
                            kind="name_taken")  # fmt: skip


def new_world(name: str, directory: str | Path = ".", *, force: bool = False) -> Path:
    """Write the template as ``directory/name`` with ``name`` filled in; return the folder.

    An existing folder is refused unless ``force`` (then it is replaced). Raises :class:`ScaffoldError`.
    """
    folder = Path(directory).expanduser().resolve() / name
    validate_name(name, folder)
    if folder.exists():
        if not force:
            raise ScaffoldError(f"{folder} already exists; pick another name or --dir, or pass --force to replace it",
                                kind="folder_exists")  # fmt: skip
        shutil.rmtree(folder) if folder.is_dir() else folder.unlink()
    for source in sorted(TEMPLATE.rglob("*.tmpl")):
        target = folder / source.relative_to(TEMPLATE).with_suffix("")
        target.parent.mkdir(parents=True, exist_ok=True)
        text = source.read_text(encoding="utf-8")
        text = text.replace("__TITLE__", name.replace("_", " ").title()).replace("__DIST__", name.replace("_", "-"))
        target.write_text(text.replace(PLACEHOLDER, name), encoding="utf-8")
    return folder
