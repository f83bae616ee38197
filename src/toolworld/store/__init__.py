"""Crash-safe run store (SQLite, WAL) and exports of what a run produced."""

from .export import EXPORT_FORMATS, export_run
from .runstore import DB_NAME, RunStore, StoreError

__all__ = ["DB_NAME", "EXPORT_FORMATS", "RunStore", "StoreError", "export_run"]
