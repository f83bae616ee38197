"""The tool-dependency graph, built only from the SDK's entity types, so it works for any world.

Nodes are tools plus one ``fact:<kind>`` source node per kind the user can know (an email, a name, an order
number on a receipt). There is an edge A → B when A's result yields an entity kind that B needs, labelled
with those kinds. Samplers ask three questions of it: which tools can run with what is known (``legal``),
how far a tool is from a target (``distance_to``), and which read tools reach a kind from the user's facts
(``path_to_kind``).
"""

from __future__ import annotations

from collections.abc import Iterable
from functools import cached_property

import networkx as nx

from ..world import ToolSpec, World

SOURCE = "__known__"


def fact_node(kind: str) -> str:
    return f"fact:{kind}"


class ToolGraph:
    """Dependency graph of one world's tools, seeded from the kinds the user knows."""

    def __init__(self, world: World, known_kinds: Iterable[str]) -> None:
        self.world = world
        self.known_kinds = frozenset(known_kinds)
        self.specs: dict[str, ToolSpec] = {s.name: s for s in world.specs()}
        g: nx.DiGraph = nx.DiGraph()
        g.add_node(SOURCE)
        for name, spec in self.specs.items():
            g.add_node(name, mutates=spec.mutates)
        for kind in sorted(self.known_kinds):
            g.add_edge(SOURCE, fact_node(kind), kinds={kind})
            for spec in self.specs.values():
                if kind in spec.consumes:
                    g.add_edge(fact_node(kind), spec.name, kinds={kind})
        for a in self.specs.values():
            for b in self.specs.values():
                shared = a.produces & b.consumes
                if shared and a.name != b.name:
                    g.add_edge(a.name, b.name, kinds=set(shared))
        self.graph = g

    @property
    def write_tools(self) -> list[str]:
        return sorted(n for n, s in self.specs.items() if s.mutates)

    @property
    def read_tools(self) -> list[str]:
        return sorted(n for n, s in self.specs.items() if not s.mutates)

    def legal(self, available: Iterable[str]) -> list[str]:
        """Tools whose required entity kinds are all available (sorted, for determinism)."""
        have = set(available)
        return sorted(n for n, s in self.specs.items() if s.requires <= have)

    @cached_property
    def _reverse_distances(self) -> dict[str, dict[str, int]]:
        rev = self.graph.reverse(copy=False)
        return {name: dict(nx.single_source_shortest_path_length(rev, name)) for name in self.specs}

    def distance_to(self, tool: str, target: str) -> int | None:
        """Hops from ``tool`` to ``target`` along yields → needs edges (None when unreachable)."""
        return self._reverse_distances[target].get(tool)

    def reachable_from_facts(self, tool: str) -> bool:
        return self.distance_to(SOURCE, tool) is not None

    def producers(self, kind: str) -> list[str]:
        """Read tools whose results yield ``kind``, nearest to the user's facts first."""
        dist = nx.single_source_shortest_path_length(self.graph, SOURCE)
        names = [n for n, s in self.specs.items() if kind in s.produces and not s.mutates and n in dist]
        return sorted(names, key=lambda n: (dist[n], n))

    def path_to_kind(self, kind: str) -> list[str]:
        """The shortest chain of read tools from the user's facts to a tool yielding ``kind`` (networkx).

        Only read tools are walked, so following the path never changes state. Empty when ``kind`` is known.
        """
        if kind in self.known_kinds:
            return []
        reads = [SOURCE, *(fact_node(k) for k in self.known_kinds), *self.read_tools]
        sub = self.graph.subgraph(reads)
        best: list[str] | None = None
        for producer in self.producers(kind):
            try:
                path = nx.shortest_path(sub, SOURCE, producer)
            except nx.NetworkXNoPath:
                continue
            tools = [n for n in path if n in self.specs]
            if best is None or len(tools) < len(best):
                best = tools
        return best or []

    def to_dict(self) -> dict[str, object]:
        """A JSON-ready view (for ``tasks graph`` and docs)."""
        return {
            "nodes": sorted(n for n in self.graph.nodes if n != SOURCE),
            "edges": sorted(
                [a, b, sorted(d["kinds"])] for a, b, d in self.graph.edges(data=True) if a != SOURCE
            ),
        }
