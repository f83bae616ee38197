"""Property test: random call sequences on an episode and its forks agree with a pure-Python model.

Every episode (the root and forks taken at random points, forks of forks included) is paired with a model
of the library's tables. After every call the called episode's result type and *every* episode's rows must
match their models (so nothing leaks between forks and failed writes leave no trace), ``changes()`` must
equal the diff between the seed and the model, and across all pairs ``state_hash()`` equality must hold
exactly when ``content_hash()`` equality and model equality do.
"""

from __future__ import annotations

import copy
import json
from dataclasses import dataclass
from datetime import date, timedelta
from typing import Any

from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

import sdkworld
from toolworld.world import Episode

WORLD = sdkworld.world
KEYS = WORLD.table_keys
TABLES = sorted(KEYS)
MEMBERS = ["M001", "M002", "M003", "M004", "M005", "M006", "M100", "M404"]
BORROWERS = ["M001", "M001", "M002", "M002", "M003", "M004", "M100", "M404"]  # M001 is at its loan limit
BOOKS = [f"B{i:03d}" for i in range(1, 13)] + ["B404"]
LOANS = [f"L{i:04d}" for i in (1, 2, 3, 4, 5, 5, 6, 6, 7, 8)] + ["L0404"]
NAMES = ["Ada", "Bob", None]  # None: the member's name at the seed (so renames can undo each other)

Rows = dict[str, dict[tuple[Any, ...], dict[str, Any]]]


def read_rows(ep: Episode) -> Rows:
    return {t: {tuple(r[k] for k in KEYS[t]): r for r in ep.query(f"SELECT * FROM {t}")} for t in TABLES}


BASE: dict[int, Rows] = {}


def base_rows(seed: int) -> Rows:
    if seed not in BASE:
        with WORLD.episode(seed) as ep:
            BASE[seed] = read_rows(ep)
    return BASE[seed]


@dataclass
class Model:
    """The library's tables as dicts keyed by primary-key tuples, with the tools' rules re-implemented."""

    seed: int
    rows: Rows

    def clone(self) -> Model:
        return Model(self.seed, copy.deepcopy(self.rows))

    # -- helpers --------------------------------------------------------------------------------------
    def member(self, m: str) -> dict[str, Any] | None:
        return self.rows["members"].get((m,))

    def loan(self, loan_id: str) -> dict[str, Any] | None:
        return self.rows["loans"].get((loan_id,))

    def active_loans(self, m: str) -> int:
        return sum(1 for r in self.rows["loans"].values() if r["member_id"] == m and not r["returned"])

    # -- tools: return the expected error type (None for success) and apply the effects ---------------------
    def borrow_book(self, member_id: str, book_id: str, days: int) -> str | None:
        if not 1 <= days <= 28:
            return "invalid_arguments"
        if self.member(member_id) is None or (book_id,) not in self.rows["books"]:
            return "not_found"
        if not self.rows["books"][(book_id,)]["available"]:
            return "conflict"
        if self.active_loans(member_id) >= sdkworld.MAX_LOANS[self.member(member_id)["tier"]]:
            return "policy_violation"
        loan_id = sdkworld.next_loan_id(max((k[0] for k in self.rows["loans"]), default=None))
        due = (date.fromisoformat(sdkworld.CLOCK[:10]) + timedelta(days=days)).isoformat()
        self.rows["loans"][(loan_id,)] = {
            "loan_id": loan_id,
            "member_id": member_id,
            "book_id": book_id,
            "due": due,
            "returned": 0,
        }
        self.rows["books"][(book_id,)]["available"] = 0
        return None

    def return_book(self, loan_id: str, condition: str) -> str | None:
        loan = self.loan(loan_id)
        if loan is None:
            return "not_found"
        if loan["returned"]:
            return "conflict"
        if condition == "lost":
            return "policy_violation"
        self.rows["books"][(loan["book_id"],)]["available"] = 1
        loan["returned"] = 1
        if condition == "damaged":
            key = (loan["member_id"], loan_id)
            self.rows["fines"][key] = {"member_id": key[0], "loan_id": loan_id, "amount": sdkworld.DAMAGE_FINE_CENTS}
        return None

    def rename_member(self, member_id: str, name: str | None) -> str | None:
        row = self.member(member_id)
        if row is None:
            return "not_found"
        if row["name"] == name:
            return "conflict"
        row["name"] = name
        return None

    def change_member_id(self, member_id: str, new_member_id: str) -> str | None:
        if self.member(member_id) is None:
            return "not_found"
        if self.member(new_member_id) is not None:
            return "conflict"
        row = self.rows["members"].pop((member_id,))
        self.rows["members"][(new_member_id,)] = {**row, "member_id": new_member_id}
        for loan in self.rows["loans"].values():
            if loan["member_id"] == member_id:
                loan["member_id"] = new_member_id
        fines = self.rows["fines"]
        for key in [k for k in fines if k[0] == member_id]:
            fine = fines.pop(key)
            fines[(new_member_id, key[1])] = {**fine, "member_id": new_member_id}
        return None

    def delete_loan(self, loan_id: str) -> str | None:
        loan = self.loan(loan_id)
        if loan is None:
            return "not_found"
        if not loan["returned"]:
            self.rows["books"][(loan["book_id"],)]["available"] = 1
        for key in [k for k in self.rows["fines"] if k[1] == loan_id]:
            del self.rows["fines"][key]
        del self.rows["loans"][(loan_id,)]
        return None

    def buggy_upgrade_member(self, member_id: str) -> str | None:
        return "not_found" if self.member(member_id) is None else "internal_error"

    def expected_changes(self) -> dict[str, dict[str, list[Any]]]:
        """``ChangeSet.to_dict()`` computed from scratch: the diff between the seed's rows and the model's."""
        base = base_rows(self.seed)
        out: dict[str, dict[str, list[Any]]] = {}
        for t in TABLES:
            before, after = base[t], self.rows[t]
            keys = sorted(set(before) | set(after), key=lambda k: json.dumps(list(k), separators=(",", ":")))
            ins = [after[k] for k in keys if k not in before]
            dele = [before[k] for k in keys if k not in after]
            upd = [
                {
                    "key": list(k),
                    "changed": {c: [before[k][c], v] for c, v in sorted(after[k].items()) if before[k][c] != v},
                }
                for k in keys
                if k in before and k in after and before[k] != after[k]
            ]
            if ins or dele or upd:
                out[t] = {"inserted": ins, "updated": upd, "deleted": dele}
        return out


# -- operations ---------------------------------------------------------------------------------------------------
ops = st.one_of(
    st.tuples(st.just("borrow_book"), st.sampled_from(BORROWERS), st.sampled_from(BOOKS), st.integers(0, 29)),
    st.tuples(st.just("return_book"), st.sampled_from(LOANS), st.sampled_from(["good", "damaged", "lost"])),
    st.tuples(st.just("rename_member"), st.sampled_from(MEMBERS), st.sampled_from(NAMES)),
    st.tuples(st.just("change_member_id"), st.sampled_from(MEMBERS), st.sampled_from(["M001", "M100", "M101"])),
    st.tuples(st.just("delete_loan"), st.sampled_from(LOANS)),
    st.tuples(st.just("buggy_upgrade_member"), st.sampled_from(MEMBERS)),
    st.tuples(st.just("get_member"), st.sampled_from(MEMBERS)),
    st.tuples(st.just("bad"), st.sampled_from(["unknown", "json", "missing", "extra"])),
    st.tuples(st.just("fork")),
    st.tuples(st.just("fork")),
)


def apply(ep: Episode, model: Model, op: tuple[Any, ...]) -> None:
    """Run ``op`` on the episode and the model; the result's error type must be the model's."""
    name, *args = op
    if name == "bad":
        call = {
            "unknown": ("borrow_books", {}),
            "json": ("rename_member", '{"member_id": "M003", "name": '),
            "missing": ("rename_member", {"member_id": "M003"}),
            "extra": ("delete_loan", {"loan_id": "L0001", "force": True}),
        }[args[0]]
        expected = "unknown_tool" if args[0] == "unknown" else "invalid_arguments"
        result = ep.call(*call)
    elif name == "get_member":
        (member_id,) = args
        result = ep.call("get_member", {"member_id": member_id})
        expected = None if model.member(member_id) else "not_found"
        if expected is None:
            active = sorted(
                (k[0], r) for k, r in model.rows["loans"].items() if r["member_id"] == member_id and not r["returned"]
            )
            assert result.output == {
                **model.member(member_id),
                "loans": [{"loan_id": r["loan_id"], "book_id": r["book_id"], "due": r["due"]} for _, r in active],
            }
    else:
        arguments = dict(zip(sdkworld.world.tools[name].spec.parameters["properties"], args, strict=False))
        if name == "rename_member" and args[1] is None:
            base = base_rows(model.seed)["members"].get((args[0],))
            args = [args[0], base["name"] if base else "Nobody"]
            arguments["name"] = args[1]
        before = model.clone()
        expected = getattr(model, name)(*args)
        if expected is not None:
            model.rows = before.rows  # a failed call changes nothing
        result = ep.call(name, arguments)
    got = result.error.type if result.error else None
    event(f"{name}: {got or 'ok'}")
    assert got == expected, (op, result.error)


def check_all(episodes: list[Episode], models: list[Model]) -> None:
    hashes = []
    for ep, model in zip(episodes, models, strict=True):
        assert read_rows(ep) == model.rows
        assert ep.changes().to_dict() == model.expected_changes()
        hashes.append((ep.state_hash(), ep.content_hash(), model.rows))
    for i, a in enumerate(hashes):
        for b in hashes[i + 1 :]:
            if a[2] == b[2]:
                event("two episodes in the same state")
            assert (a[0] == b[0]) == (a[1] == b[1]) == (a[2] == b[2])


@settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    seed=st.sampled_from([0, 1]),
    steps=st.lists(st.tuples(st.integers(0, 1000), ops), min_size=8, max_size=40),
)
def test_random_calls_on_forks_match_the_model(seed, steps):
    episodes = [WORLD.episode(seed)]
    models = [Model(seed, copy.deepcopy(base_rows(seed)))]
    try:
        for pick, op in steps:
            i = pick % len(episodes)
            if op[0] == "fork":
                episodes.append(episodes[i].fork())
                models.append(models[i].clone())
            else:
                apply(episodes[i], models[i], op)
            check_all(episodes, models)
        # a fork taken now starts equal to its parent, and the restored snapshot of the last one too
        last = episodes[-1]
        restored = WORLD.episode(seed, snapshot=last.snapshot())
        assert restored.state_hash() == last.state_hash() and read_rows(restored) == models[-1].rows
        restored.close()
    finally:
        for ep in episodes:
            ep.close()
