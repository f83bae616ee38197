"""Pieces every layer shares, each with one home: the error base, atomic file writes, retry delays, seed
derivation, canonical JSON, the cache folder and the plugin registry. Nothing here imports the rest of toolworld.
"""

from .errors import InfraError, ToolworldError
from .files import (
    atomic_directory,
    atomic_path,
    atomic_text_writer,
    atomic_write_bytes,
    atomic_write_text,
    atomic_writer,
)
from .jsonutil import canonical_json
from .paths import cache_dir
from .registry import Registry, RegistryError
from .retry import backoff_delay
from .seeds import derive_seed

__all__ = ["InfraError", "Registry", "RegistryError", "ToolworldError", "atomic_directory", "atomic_path", "atomic_text_writer", "atomic_write_bytes",
           "atomic_write_text", "atomic_writer", "backoff_delay", "cache_dir", "canonical_json", "derive_seed"]
