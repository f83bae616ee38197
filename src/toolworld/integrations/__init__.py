"""Bridges from ``ToolEnv`` to other frameworks' environment APIs (Gymnasium in ``integrations.gym``).

Each bridge imports its framework, an optional extra: importing this package alone imports none of them.
"""
