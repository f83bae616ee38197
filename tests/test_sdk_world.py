"""``World``: definition checks, the seed-image cache, determinism, stats, the registry and ``Rng``."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import threading
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

import sdkworld
from toolworld.core import registry as core_registry
from toolworld.world import Entity, EntityRef, Rng, World, WorldError, cache_dir, get_world, list_worlds, registry, tool

TESTS = Path(__file__).resolve().parent
SRC = TESTS.parent / "src"


@pytest.fixture
def cache(tmp_path, monkeypatch) -> Path:
    """A fresh, empty seed-image cache for one test."""
    root = tmp_path / "cache"
    monkeypatch.setenv("TOOLWORLD_CACHE", str(root))
    return root


class CountingSeed:
    """A seed generator that counts how often it runs (the cache's job is to make that rare)."""

    def __init__(self, fail_first: bool = False) -> None:
        self.calls: list[int] = []
        self.fail_first = fail_first

    def __call__(self, db, rng) -> None:
        self.calls.append(1)
        if self.fail_first and len(self.calls) == 1:
            db.execute("INSERT INTO members VALUES ('M999', 'half', 'h@x', 'basic')")
            raise RuntimeError("generator failed")
        sdkworld.seed_library(db, rng)


def counted_world(seed_fn: CountingSeed, name: str = "library_cache", **kw: Any) -> World:
    return sdkworld.make_world(name, seed_data=seed_fn, **kw)


def cache_files(root: Path) -> list[str]:
    return sorted(p.name for p in (root / "worlds").iterdir())


# -- definition checks -------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("schema", "message"),
    [
        ("CREATE TABLE t (a TEXT);", "world 'bad': table 't' needs a PRIMARY KEY"),
        ("CREATE TABLE t (id INTEGER PRIMARY KEY, data blob);", "world 'bad': table 't' has a BLOB column"),
        (
            "CREATE TABLE _tw_notes (id INTEGER PRIMARY KEY);",
            "world 'bad': table names starting with _tw_ are reserved",
        ),
        ("CREATE TABLE t (id INTEGER PRIMARY KEY,", "world 'bad': schema does not execute: "),
        (
            "CREATE TABLE t (id INTEGER PRIMARY KEY); INSERT INTO nowhere VALUES (1);",
            "schema does not execute: no such table: nowhere",
        ),
    ],
)
def test_bad_schemas(schema, message):
    with pytest.raises(WorldError) as info:
        sdkworld.make_world("bad", schema=schema, tools=[], entities={})
    assert message in str(info.value)


def test_schema_introspection():
    w = sdkworld.make_world(
        "shapes",
        schema="CREATE TABLE t (id INTEGER PRIMARY KEY AUTOINCREMENT, v TEXT);"
        "CREATE TABLE pair (b TEXT, a TEXT, n INTEGER, PRIMARY KEY (a, b)) WITHOUT ROWID;",
        tools=[],
        entities={},
    )
    assert w.table_keys == {"pair": ["a", "b"], "t": ["id"]}  # sqlite_sequence is not a world table
    assert w.table_columns == {"pair": ["b", "a", "n"], "t": ["id", "v"]}
    assert sdkworld.world.table_keys["fines"] == ["member_id", "loan_id"]
    assert repr(sdkworld.world) == "<World library: 11 tools, 4 tables>"


def test_any_blob_affinity_column_is_rejected():
    """Regression: only a type spelled exactly BLOB was rejected, but any type containing BLOB has BLOB
    affinity (and bytes there break the change-capture trigger's json_object())."""
    with pytest.raises(WorldError, match="BLOB column"):
        sdkworld.make_world(
            "bad", schema="CREATE TABLE t (id INTEGER PRIMARY KEY, data LONGBLOB);", tools=[], entities={}
        )


def test_undeclared_entity_kind_used_by_a_parameter():
    with pytest.raises(WorldError) as info:
        sdkworld.make_world("bad", tools=[sdkworld.rename_member], entities={"book": "books.book_id"})
    assert str(info.value) == (
        "world 'bad': tool 'rename_member' uses entity kind 'member', which the world does not declare; "
        "add it to entities= (known: ['book'])"
    )


def test_undeclared_entity_kind_used_by_yields():
    @tool(yields={"author": "books[].author"})
    def list_authors() -> dict:
        """List authors."""
        return {}

    with pytest.raises(WorldError, match="tool 'list_authors' uses entity kind 'author'"):
        sdkworld.make_world("bad", tools=[list_authors], entities={})
    # declaring it (even without a table) is enough
    w = sdkworld.make_world("ok_authors", tools=[list_authors], entities={"author": None})
    assert w.entities == {"author": None}


@pytest.mark.parametrize(
    ("ref", "message"),
    [
        ("members.nope", "world 'bad': entity 'member' points at missing column members.nope"),
        ("ghosts.member_id", "world 'bad': entity 'member' points at missing column ghosts.member_id"),
        ("members", "world 'bad': entity 'member' must map to 'table.column', got 'members'"),
    ],
)
def test_bad_entity_refs(ref, message):
    with pytest.raises(WorldError) as info:
        sdkworld.make_world("bad", tools=[], entities={"member": ref})
    assert str(info.value) == message


def test_duplicate_and_non_tools():
    with pytest.raises(WorldError, match="world 'bad': two tools named 'get_member'"):
        sdkworld.make_world("bad", tools=[sdkworld.get_member, sdkworld.get_book, sdkworld.get_member])
    with pytest.raises(WorldError, match="is not a @tool"):
        sdkworld.make_world("bad", tools=[sdkworld.seed_library])


def test_entities_resolve_to_refs():
    assert sdkworld.world.entities == {
        "member": EntityRef("members", "member_id"),
        "book": EntityRef("books", "book_id"),
        "loan": EntityRef("loans", "loan_id"),
        "email": None,
    }


def test_tool_graph_and_openai_tools():
    w = sdkworld.world
    assert [s.name for s in w.specs()] == [t.name for t in sdkworld.TOOLS]
    assert w.openai_tools() == [t.spec.to_openai() for t in sdkworld.TOOLS]
    assert all(t["type"] == "function" for t in w.openai_tools())
    assert [s.name for s in w.tools_consuming("loan")] == ["return_book", "delete_loan"]
    assert [s.name for s in w.tools_consuming("email")] == ["find_member_by_email"]
    assert [s.name for s in w.tools_yielding("loan")] == ["get_member", "borrow_book"]
    assert [s.name for s in w.tools_yielding("member")] == ["find_member_by_email", "get_member", "change_member_id"]
    assert w.tools_consuming("nothing") == [] and w.tools_yielding("email") == []


def test_stats():
    assert sdkworld.world.stats(0) == {
        "name": "library",
        "description": "A lending library: members borrow, return and are fined for books.",
        "tools": 11,
        "write_tools": 6,
        "read_tools": 5,
        "tables": 4,
        "rows": 22,
        "rows_by_table": {"books": 12, "fines": 0, "loans": 4, "members": 6},
    }


# -- seed-image cache --------------------------------------------------------------------------------------------
def test_seed_image_is_built_once_per_world_object(cache):
    seed = CountingSeed()
    w = counted_world(seed)
    first = w.seed_image(0)
    assert w.seed_image(0) is first
    with w.episode(0) as ep:
        assert ep.state_hash() == first[1]
    assert len(seed.calls) == 1
    w.seed_image(1)
    assert len(seed.calls) == 2
    assert cache_files(cache) == [
        f"library_cache-{w.fingerprint()[:16]}-seed0.sqlite",
        f"library_cache-{w.fingerprint()[:16]}-seed1.sqlite",
    ]  # and no temporary files left behind


def test_a_new_world_object_loads_the_disk_cache(cache):
    seed = CountingSeed()
    image, digest = counted_world(seed).seed_image(0)
    again = counted_world(seed)
    assert again.seed_image(0) == (image, digest)
    assert len(seed.calls) == 1
    with again.episode(0) as ep:
        assert ep.content_hash() == digest


def test_concurrent_first_use_builds_once(cache):
    seed = CountingSeed()
    w = counted_world(seed)
    barrier = threading.Barrier(8)
    results: list[str] = []

    def use() -> None:
        barrier.wait()
        results.append(w.seed_image(3)[1])

    threads = [threading.Thread(target=use) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(seed.calls) == 1 and len(set(results)) == 1 and len(results) == 8


def _other_version_image(seed: CountingSeed) -> bytes:
    return counted_world(seed, version="other").seed_image(0)[0]


@pytest.mark.parametrize("corruption", ["garbage", "truncated", "wrong_fingerprint"])
def test_a_corrupted_cache_file_is_rebuilt(cache, corruption):
    seed = CountingSeed()
    w = counted_world(seed)
    image, digest = w.seed_image(0)
    path = w._cache_path(0)
    assert path.read_bytes() == image
    bad = {
        "garbage": lambda: b"not a sqlite database" * 100,
        "truncated": lambda: image[: len(image) // 2],
        "wrong_fingerprint": lambda: _other_version_image(seed),
    }[corruption]()
    path.write_bytes(bad)
    calls = len(seed.calls)
    assert counted_world(seed).seed_image(0) == (image, digest)
    assert len(seed.calls) == calls + 1
    assert path.read_bytes() == image  # overwritten with a good image...
    assert counted_world(seed).seed_image(0)[1] == digest
    assert len(seed.calls) == calls + 1  # ...which the next world object loads


def test_an_empty_cache_file_is_rebuilt(cache):
    """Regression: deserialize(b"") raises MemoryError, which _load_cached did not catch, so a zero-length cache
    file (disk full, interrupted copy) crashed seed_image() instead of being rebuilt."""
    seed = CountingSeed()
    w = counted_world(seed)
    _, digest = w.seed_image(0)
    w._cache_path(0).write_bytes(b"")
    assert counted_world(seed).seed_image(0)[1] == digest
    assert len(seed.calls) == 2
    assert w._cache_path(0).stat().st_size > 0


def test_fingerprint_keys_the_cache(cache, tmp_path):
    seed = CountingSeed()
    v1 = counted_world(seed)
    assert v1.fingerprint() == counted_world(seed).fingerprint()
    assert len(v1.fingerprint()) == 64
    v2 = counted_world(seed, version="2")
    assert v2.fingerprint() != v1.fingerprint()
    assert counted_world(seed, schema=sdkworld.SCHEMA + "\n").fingerprint() != v1.fingerprint()
    renamed = sdkworld.make_world("library_other", seed_data=seed)
    assert renamed.fingerprint() != v1.fingerprint()

    extra = tmp_path / "rules.json"
    extra.write_text("{}")
    with_file = counted_world(seed, source_files=[extra])
    fp = with_file.fingerprint()
    extra.write_text('{"max": 4}')
    assert counted_world(seed, source_files=[extra]).fingerprint() != fp
    assert with_file.fingerprint() == fp  # computed once per world object

    v1.seed_image(0)
    assert len(seed.calls) == 1
    assert v2.seed_image(0)[1] == v1.seed_image(0)[1]  # same data...
    assert len(seed.calls) == 2  # ...but v2 could not reuse v1's image
    assert len(cache_files(cache)) == 2


def test_default_fingerprint_files_are_the_generators_folder(cache, tmp_path):
    pkg = tmp_path / "myworld"
    pkg.mkdir()
    (pkg / "gen.py").write_text("def seed(db, rng):\n    db.execute('INSERT INTO t VALUES (?)', (rng.below(1000),))\n")
    (pkg / "schema.sql").write_text("-- v1\n")
    (pkg / "notes.md").write_text("v1")
    (pkg / "data.bin").write_bytes(b"v1")
    spec = importlib.util.spec_from_file_location("tw_test_myworld_gen", pkg / "gen.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)

    def make() -> World:
        return World(
            "mine",
            description="d",
            policy="p",
            schema="CREATE TABLE t (n INTEGER PRIMARY KEY);",
            seed_data=module.seed,
            tools=[],
            entities={},
        )

    fp = make().fingerprint()
    (pkg / "data.bin").write_bytes(b"v2")  # not a source suffix
    assert make().fingerprint() == fp
    (pkg / "schema.sql").write_text("-- v2\n")
    fp2 = make().fingerprint()
    assert fp2 != fp
    (pkg / "notes.md").write_text("v2")
    assert make().fingerprint() != fp2


def test_build_image_never_uses_the_cache(cache):
    seed = CountingSeed()
    w = counted_world(seed)
    _, digest = w.seed_image(0)
    assert w.build_image(0)[1] == digest
    assert w.build_image(0)[1] == digest
    assert len(seed.calls) == 3


def test_unwritable_cache_still_works(tmp_path, monkeypatch):
    blocker = tmp_path / "a-file"
    blocker.write_text("x")
    monkeypatch.setenv("TOOLWORLD_CACHE", str(blocker / "cache"))
    seed = CountingSeed()
    assert counted_world(seed).seed_image(0)[1] == counted_world(seed).seed_image(0)[1]
    assert len(seed.calls) == 2  # nothing could be cached, so each world object built its own


def test_a_failing_generator_caches_nothing(cache):
    seed = CountingSeed(fail_first=True)
    w = counted_world(seed)
    with pytest.raises(RuntimeError, match="generator failed"):
        w.seed_image(0)
    assert not (cache / "worlds").exists() or cache_files(cache) == []
    _, digest = w.seed_image(0)
    assert digest == w.build_image(0)[1]
    with w.episode(0) as ep:
        assert ep.query("SELECT count(*) AS n FROM members WHERE member_id = 'M999'") == [{"n": 0}]
    assert len(seed.calls) == 3


def test_cache_dir(monkeypatch, tmp_path):
    monkeypatch.setenv("TOOLWORLD_CACHE", str(tmp_path / "tw"))
    assert cache_dir() == tmp_path / "tw"
    monkeypatch.delenv("TOOLWORLD_CACHE")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert cache_dir() == tmp_path / "xdg" / "toolworld"
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert cache_dir() == tmp_path / "home" / ".cache" / "toolworld"


# -- determinism ---------------------------------------------------------------------------------------------------
PROBE = (
    "import sdkworld, os, pathlib;"
    "w = sdkworld.world;"
    "root = pathlib.Path(os.environ['TOOLWORLD_CACHE']);"
    "assert not (root / 'worlds').exists(), 'cache not fresh';"
    "e = w.episode(0);"
    "print(w.seed_image(0)[1], e.content_hash(), w.seed_image(1)[1], w.fingerprint())"
)


def test_seed_content_is_identical_across_processes():
    procs = []
    for hash_seed in ("1", "2"):
        env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(SRC), str(TESTS)]), "PYTHONHASHSEED": hash_seed}
        env.pop("TOOLWORLD_CACHE", None)  # sdkworld points it at a new temporary folder in each process
        procs.append(
            subprocess.Popen(
                [sys.executable, "-c", PROBE], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
            )
        )
    outputs = []
    for p in procs:
        out, err = p.communicate(timeout=60)
        assert p.returncode == 0, err
        outputs.append(out.split())
    assert outputs[0] == outputs[1]
    seed0, content0, seed1, fingerprint = outputs[0]
    assert seed0 == content0 != seed1
    assert seed0 == sdkworld.world.seed_image(0)[1]
    assert seed1 == sdkworld.world.seed_image(1)[1]
    assert fingerprint == sdkworld.world.fingerprint()


def test_seeds_differ_and_rebuilds_agree():
    w = sdkworld.world
    hashes = {w.build_image(s)[1] for s in range(5)}
    assert len(hashes) == 5
    assert w.build_image(2)[1] == w.build_image(2)[1]
    with w.episode(0) as a, w.episode(1) as b:
        assert a.query("SELECT name FROM members") != b.query("SELECT name FROM members")
        assert [r["member_id"] for r in a.query("SELECT member_id FROM members")] == [
            r["member_id"] for r in b.query("SELECT member_id FROM members")
        ]


def test_the_world_name_seeds_the_generator(cache):
    a = sdkworld.make_world("library_a").seed_image(0)[1]
    b = sdkworld.make_world("library_b").seed_image(0)[1]
    assert a != b


# -- registry -----------------------------------------------------------------------------------------------------
def test_get_world_unknown_names_the_available_worlds():
    with pytest.raises(WorldError) as info:
        get_world("nope")
    message = str(info.value)
    assert message.startswith("unknown world 'nope'; available worlds: ")
    assert "retail" in message.split(": ", 1)[1].split(", ")


@pytest.fixture
def fake_registry(monkeypatch):
    targets = {
        "library": "sdkworld:world",
        "factory": "sdkworld:make_world",
        "not_a_world": "sdkworld:CLOCK",
        "missing": "sdkworld:no_such_attribute",
    }
    with registry.WORLDS.isolated():  # these worlds and nothing else, for this test only
        monkeypatch.setattr(core_registry, "entry_points", lambda group: [])
        for name in registry.WORLDS.names():
            registry.WORLDS.unregister(name)
        for name, target in targets.items():
            registry.WORLDS.register_lazy(name, target)
        yield targets


def test_get_world_loads_objects_and_factories_once(fake_registry):
    assert get_world("library") is sdkworld.world
    made = get_world("factory")
    assert isinstance(made, World) and made is not sdkworld.world
    assert get_world("factory") is made  # loaded once
    with pytest.raises(WorldError, match="sdkworld:CLOCK is not a toolworld World"):
        get_world("not_a_world")
    with pytest.raises(WorldError, match="available worlds: factory, library, missing, not_a_world"):
        get_world("nope")


def test_list_worlds_skips_broken_ones_with_a_warning(fake_registry):
    with pytest.warns(UserWarning) as record:
        worlds = list_worlds()
    assert worlds[1] is sdkworld.world and [w.name for w in worlds] == ["library", "library"]
    messages = sorted(str(w.message) for w in record)
    assert messages == [
        "world 'missing' failed to load: AttributeError: module 'sdkworld' has no attribute 'no_such_attribute'",
        "world 'not_a_world' failed to load: WorldError: sdkworld:CLOCK is not a toolworld World",
    ]


def test_real_registry_lists_builtins():
    assert registry.available()["retail"] == "toolworld.worlds.retail:world"
    assert registry.ENTRY_POINT_GROUP == "toolworld.worlds"


# -- Rng --------------------------------------------------------------------------------------------------------------
def test_rng_pinned_outputs():
    # SplitMix64's published reference stream for seed 0 (0xE220A8397B1DCDAF, ...)
    r = Rng(0)
    assert [r.next_u64() for _ in range(3)] == [16294208416658607535, 7960286522194355700, 487617019471545679]
    r = Rng(42)
    assert [r.below(100) for _ in range(5)] == [13, 91, 58, 64, 50]
    assert r.random() == 0.8682280765465323
    assert r.digits(8) == "58547685"
    assert Rng(0).child("x").next_u64() == 12014692435295786395
    assert Rng("library").next_u64() == 12568981712191884727
    items = list(range(10))
    Rng(7).shuffle(items)
    assert items == [8, 1, 5, 9, 0, 4, 3, 2, 6, 7]
    assert Rng(7).sample(range(10), 4) == [7, 0, 4, 6]
    assert Rng(9).weighted("abc", [1, 2, 3]) == "c"


def test_rng_seeds():
    assert Rng(-1).next_u64() == Rng(2**64 - 1).next_u64()  # seeds are taken mod 2**64
    assert Rng("a").next_u64() == Rng("a").next_u64() != Rng("b").next_u64()
    assert Rng(1).next_u64() != Rng(2).next_u64()


def test_rng_below_range_and_rough_uniformity():
    r = Rng(123)
    counts = Counter(r.below(6) for _ in range(60_000))
    assert set(counts) == set(range(6))
    assert all(9_400 < c < 10_600 for c in counts.values()), counts
    assert {Rng(s).below(1) for s in range(20)} == {0}
    big = 2**63 + 12345
    assert all(0 <= r.below(big) < big for _ in range(200))
    assert {r.randint(-2, 2) for _ in range(500)} == {-2, -1, 0, 1, 2}
    floats = [r.random() for _ in range(2000)]
    assert all(0.0 <= f < 1.0 for f in floats) and 0.45 < sum(floats) / len(floats) < 0.55
    for n in (0, -3):
        with pytest.raises(ValueError, match="n > 0"):
            r.below(n)


def test_rng_below_has_no_modulo_bias():
    # with n = 0.75 * 2**64, a plain "x % n" would land below 2**62 half the time instead of a third
    n = 3 * 2**62
    r = Rng(2024)
    low = sum(r.below(n) < 2**62 for _ in range(3000)) / 3000
    assert 0.29 < low < 0.38, low


def test_rng_child_independence():
    parent = Rng(5)
    untouched = Rng(5)
    a = parent.child("users")
    assert parent.next_u64() == untouched.next_u64()  # taking a child draws nothing
    a2 = Rng(5).child("users")
    assert [a.next_u64() for _ in range(5)] == [a2.next_u64() for _ in range(5)]
    b = Rng(5).child("orders")
    c = Rng(6).child("users")
    streams = [[g.next_u64() for _ in range(5)] for g in (Rng(5).child("users"), b, c)]
    assert len({tuple(s) for s in streams}) == 3
    # drawing from a child does not move its parent, and a child depends on the parent's current state
    p1, p2 = Rng(8), Rng(8)
    kid = p1.child("x")
    for _ in range(10):
        kid.next_u64()
    assert p1.next_u64() == p2.next_u64()
    assert p1.child("x").next_u64() != Rng(8).child("x").next_u64()


def test_rng_sample_shuffle_choice_weighted():
    r = Rng(11)
    seq = list(range(20))
    for k in (0, 1, 7, 20):
        s = r.sample(seq, k)
        assert len(s) == k and len(set(s)) == k and set(s) <= set(seq)
    assert sorted(r.sample(seq, 20)) == seq
    assert seq == list(range(20))  # sample does not touch its input
    items = list("abcdefgh")
    r.shuffle(items)
    assert sorted(items) == list("abcdefgh") and items != list("abcdefgh")
    orders = {tuple(Rng(s).sample("abc", 3)) for s in range(60)}
    assert len(orders) == 6  # every permutation shows up
    assert Counter(Rng(s).choice("xyz") for s in range(300)).keys() == {"x", "y", "z"}
    w = Counter(r.weighted("ab", [1, 3]) for _ in range(4000))
    assert 2700 < w["b"] < 3300
    assert all(r.weighted("ab", [0, 1]) == "b" for _ in range(50))
    with pytest.raises(ValueError, match="sample of 4 from 3 items"):
        r.sample("abc", 4)
    with pytest.raises(ValueError, match="empty sequence"):
        r.choice([])
    with pytest.raises(ValueError, match="one positive integer weight per item"):
        r.weighted("ab", [1])
    assert len(r.digits(12)) == 12 and r.digits(0) == ""


def test_entity_marker_is_a_frozen_value():
    assert Entity("order") == Entity("order") and hash(Entity("order")) == hash(Entity("order"))
    with pytest.raises(AttributeError):
        Entity("order").kind = "user"  # type: ignore[misc]
