"""``@tool``: JSON schemas, specs, docstring parsing, ``extract_path`` and decorator errors."""

from __future__ import annotations

from typing import Annotated, Any, Literal, Optional

import pydantic
import pytest
from pydantic import Field

import sdkworld
from toolworld.world import Entity, EntityParam, Tool, ToolError, ToolSpec, WorldError, extract_path, tool
from toolworld.world.tool import get_entity_kinds, parse_docstring


def _walk_keys(value: Any, parent: str = "") -> list[tuple[str, str]]:
    """Every (parent key, key) pair in a nested JSON value, so tests can look for stray ``title`` keys."""
    out: list[tuple[str, str]] = []
    if isinstance(value, dict):
        for k, v in value.items():
            out.append((parent, k))
            out.extend(_walk_keys(v, k))
    elif isinstance(value, list):
        for v in value:
            out.extend(_walk_keys(v, parent))
    return out


# -- schemas -------------------------------------------------------------------------------------------------
def test_borrow_book_schema_is_exact():
    assert sdkworld.borrow_book.spec.parameters == {
        "type": "object",
        "properties": {
            "member_id": {"type": "string", "description": "the borrowing member."},
            "book_id": {"type": "string", "description": "the book to lend."},
            "days": {
                "type": "integer",
                "default": 14,
                "minimum": 1,
                "maximum": 28,
                "description": "loan length in days (1-28).",
            },
        },
        "required": ["member_id", "book_id"],
        "additionalProperties": False,
    }
    # the ctx parameter is not part of the schema, and property order follows the signature
    assert list(sdkworld.borrow_book.spec.parameters["properties"]) == ["member_id", "book_id", "days"]


def test_optional_literal_and_defaults_schema_is_exact():
    params = sdkworld.search_books.spec.parameters
    assert params == {
        "type": "object",
        "properties": {
            "genre": {
                "anyOf": [{"type": "string", "enum": ["fiction", "history", "science", "poetry"]}, {"type": "null"}],
                "default": None,
                "description": "only books of this genre.",
            },
            "author": {
                "anyOf": [{"type": "string"}, {"type": "null"}],
                "default": None,
                "description": "only books by this author (exact surname).",
            },
            "limit": {
                "type": "integer",
                "default": 5,
                "minimum": 1,
                "maximum": 20,
                "description": "at most this many books.",
            },
        },
        "additionalProperties": False,
    }
    assert "required" not in params  # every parameter has a default


def test_literal_with_default_and_array_schemas():
    assert sdkworld.return_book.spec.parameters["properties"]["condition"] == {
        "type": "string",
        "enum": ["good", "damaged", "lost"],
        "default": "good",
        "description": "the state the book comes back in; damaged adds a fine.",
    }
    assert sdkworld.get_books.spec.parameters == {
        "type": "object",
        "properties": {"book_ids": {"type": "array", "items": {"type": "string"}, "description": "the books' ids."}},
        "required": ["book_ids"],
        "additionalProperties": False,
    }


def test_typed_and_wrapped_args_docs():
    # "name (type, optional): text" and continuation lines are both understood
    props = sdkworld.get_book.spec.parameters["properties"]
    assert props["book_id"]["description"] == "the book's id, such as B001."
    assert props["member_id"]["description"] == (
        "when given, the answer also says whether this member may borrow the book now."
    )
    assert sdkworld.get_book.spec.parameters["required"] == ["book_id"]


class Address(pydantic.BaseModel):
    """A nested model parameter (module level so that string annotations resolve)."""

    title: str
    city: str = "Paris"


def test_no_title_noise_anywhere_but_property_names_called_title_survive():
    @tool
    def ship(title: str, address: Address, tags: list[str] | None = None) -> str:
        """Ship something.

        Args:
            title: the parcel's label.
        """
        return title

    params = ship.spec.parameters
    assert ("", "title") not in _walk_keys(params)
    titles = [(parent, key) for parent, key in _walk_keys(params) if key == "title"]
    # only the two *property names* remain: the parameter and the nested model's field
    assert titles == [("properties", "title"), ("properties", "title")]
    assert params["properties"]["title"] == {"type": "string", "description": "the parcel's label."}
    assert params["properties"]["address"] == {"$ref": "#/$defs/Address"}
    assert params["$defs"]["Address"] == {
        "type": "object",
        "description": "A nested model parameter (module level so that string annotations resolve).",
        "properties": {"title": {"type": "string"}, "city": {"type": "string", "default": "Paris"}},
        "required": ["title"],
    }
    assert params["required"] == ["title", "address"]
    for model_schema in [sdkworld.borrow_book.spec.parameters, sdkworld.search_books.spec.parameters]:
        assert all(key != "title" for _, key in _walk_keys(model_schema))


def test_field_description_used_without_docstring_args():
    @tool
    def greet(who: Annotated[str, Field(description="whom to greet")], times: int = 1) -> str:
        """Say hello."""
        return "hi " * times + who

    assert greet.spec.parameters == {
        "type": "object",
        "properties": {
            "who": {"type": "string", "description": "whom to greet"},
            "times": {"type": "integer", "default": 1},
        },
        "required": ["who"],
        "additionalProperties": False,
    }


def test_tool_without_parameters_has_empty_properties():
    @tool
    def ping() -> str:
        """Check the service is up."""
        return "pong"

    assert ping.spec.parameters == {"type": "object", "properties": {}, "additionalProperties": False}
    assert ping.validate({}) == {}
    with pytest.raises(ToolError) as info:
        ping.validate({"x": 1})
    assert "unexpected argument 'x'" in info.value.message
    assert "It takes: no arguments." in info.value.message


def test_to_openai_shape():
    spec = sdkworld.rename_member.spec
    assert spec.to_openai() == {
        "type": "function",
        "function": {"name": "rename_member", "description": "Change a member's name.", "parameters": spec.parameters},
    }
    assert set(spec.to_openai()["function"]) == {"name", "description", "parameters"}


# -- spec metadata -------------------------------------------------------------------------------------------
def test_mutates_and_repr():
    assert sdkworld.borrow_book.mutates is True
    assert sdkworld.borrow_book.spec.mutates is True
    assert sdkworld.get_member.mutates is False
    assert repr(sdkworld.borrow_book) == "<Tool borrow_book (write)>"
    assert repr(sdkworld.get_member) == "<Tool get_member (read)>"
    assert isinstance(sdkworld.get_member, Tool)
    assert sdkworld.get_member.name == "get_member"
    assert sdkworld.get_member.__name__ == "get_member"
    assert sdkworld.get_member.__doc__.startswith("Get a member's profile")


def test_entity_params_consumes_requires_produces():
    spec = sdkworld.get_book.spec
    assert spec.entity_params == (
        EntityParam("book_id", "book", many=False, required=True),
        EntityParam("member_id", "member", many=False, required=False),
    )
    assert spec.consumes == frozenset({"book", "member"})
    assert spec.requires == frozenset({"book"})
    assert spec.produces == frozenset({"book"})

    many = sdkworld.get_books.spec
    assert many.entity_params == (EntityParam("book_ids", "book", many=True, required=True),)
    assert dict(many.yields) == {"book": "[].book_id"}

    member = sdkworld.get_member.spec
    assert dict(member.yields) == {"member": "member_id", "loan": "loans[].loan_id", "book": "loans[].book_id"}
    assert member.produces == frozenset({"member", "loan", "book"})
    assert member.consumes == member.requires == frozenset({"member"})

    search = sdkworld.search_books.spec
    assert search.entity_params == ()
    assert search.consumes == search.requires == frozenset()
    assert search.returns == '{"books": [...], "total": n} where total counts every match, not only those listed.'
    assert get_entity_kinds(sdkworld.TOOLS) == {"member", "book", "loan", "email"}


def test_entity_detection_through_optional_and_lists():
    @tool
    def pick(
        a: Optional[Annotated[str, Entity("x")]] = None,  # noqa: UP045 - the old spelling must work too
        b: list[Annotated[str, Entity("y")]] | None = None,
        c: tuple[Annotated[str, Entity("z")], ...] = (),
        d: Annotated[int, Field(ge=0)] = 0,
    ) -> None:
        """Pick."""

    assert pick.spec.entity_params == (
        EntityParam("a", "x", many=False, required=False),
        EntityParam("b", "y", many=True, required=False),
        EntityParam("c", "z", many=True, required=False),
    )
    assert pick.spec.requires == frozenset()


def test_entity_marker_on_a_list_annotation_means_many():
    """Regression: the marker on a list annotation used to give many=False, so Episode.call bound the whole
    list as one SQL parameter and answered internal_error instead of checking each id."""

    @tool
    def take(ids: Annotated[list[str], Entity("book")]) -> list[str]:
        """Take books."""
        return ids

    world = sdkworld.make_world("library_annotated_list", tools=[take])
    with world.episode(0) as ep:
        result = ep.call("take", {"ids": ["B001", "B999"]})
    assert result.error is not None
    assert result.error.type == "not_found", result.error.message
    assert take.spec.entity_params == (EntityParam("ids", "book", many=True, required=True),)


def test_validate_coerces_fills_defaults_and_names_problems():
    assert sdkworld.borrow_book.validate({"member_id": "M003", "book_id": "B001"}) == {
        "member_id": "M003",
        "book_id": "B001",
        "days": 14,
    }
    assert sdkworld.search_books.validate({"limit": "7"})["limit"] == 7
    with pytest.raises(ToolError) as info:
        sdkworld.borrow_book.validate({"book_id": 5, "days": 0, "extra": True})
    err = info.value
    assert err.type == "invalid_arguments"
    assert err.message.startswith("Invalid arguments for borrow_book: ")
    assert "missing required argument 'member_id' (the borrowing member.)" in err.message
    assert "argument 'book_id': Input should be a valid string (got 5)" in err.message
    assert "argument 'days': Input should be greater than or equal to 1 (got 0)" in err.message
    assert "unexpected argument 'extra'" in err.message
    assert err.message.endswith("It takes: member_id, book_id, days?.")
    assert {e["type"] for e in err.details["errors"]} == {
        "missing",
        "string_type",
        "greater_than_equal",
        "extra_forbidden",
    }


def test_long_bad_values_are_truncated_in_messages():
    with pytest.raises(ToolError) as info:
        sdkworld.borrow_book.validate({"member_id": "M1", "book_id": "B1", "days": "x" * 200})
    got = info.value.message.split("(got ", 1)[1].split(")", 1)[0]
    assert len(got) == 80 and got.endswith("...")


def test_list_item_errors_name_the_index():
    with pytest.raises(ToolError) as info:
        sdkworld.get_books.validate({"book_ids": ["B001", 7]})
    assert "argument 'book_ids.1': Input should be a valid string (got 7)" in info.value.message


def test_tool_is_still_a_plain_function():
    @tool
    def add(a: int, b: int = 2) -> int:
        """Add."""
        return a + b

    assert add(1) == 3
    assert add.run(None, {"a": 4, "b": 5}) == 9
    assert add.__wrapped__(1, b=1) == 2


def test_custom_name():
    @tool(name="look-up_2")
    def f(q: str) -> str:
        """Look up."""
        return q

    assert f.name == "look-up_2" and f.spec.name == "look-up_2"
    assert f.__name__ == "f"


# -- ToolError ------------------------------------------------------------------------------------------------
def test_tool_error_types_and_dict():
    err = ToolError("conflict", "already done", order="#1")
    assert err.to_dict() == {"type": "conflict", "message": "already done", "details": {"order": "#1"}}
    assert ToolError("not_found", "x").to_dict() == {"type": "not_found", "message": "x"}
    assert not err.is_infra and ToolError("internal_error", "boom").is_infra
    assert str(err) == "already done"
    assert repr(err) == "ToolError('conflict', 'already done')"
    with pytest.raises(ValueError, match="unknown tool error type 'oops'"):
        ToolError("oops", "x")  # type: ignore[arg-type]


# -- docstring parsing ---------------------------------------------------------------------------------------
def test_parse_docstring_full():
    doc = """
        Find orders
        by customer.

        Second paragraph.

        Args:
            user_id (str): the customer,
                found with find_user.
            status: one of pending, delivered.
                Note: case matters.
            *args: ignored.
            **kwargs: also ignored.

        Returns:
            a list
            of orders.

        Raises:
            ToolError: never: really.

        Example:
            find_orders("u1")
    """
    desc, args, returns = parse_docstring(doc)
    assert desc == "Find orders by customer.\n\nSecond paragraph."
    assert args == {
        "user_id": "the customer, found with find_user.",
        "status": "one of pending, delivered. Note: case matters.",
        "args": "ignored.",
        "kwargs": "also ignored.",
    }
    assert returns == "a list of orders."


@pytest.mark.parametrize("header", ["Args", "Arguments", "Parameters"])
def test_parse_docstring_arg_section_aliases(header):
    desc, args, returns = parse_docstring(f"Do it.\n\n{header}:\n    x: the x.\n")
    assert (desc, args, returns) == ("Do it.", {"x": "the x."}, "")


def test_parse_docstring_edge_cases():
    assert parse_docstring("") == ("", {}, "")
    assert parse_docstring("   One line.   ") == ("One line.", {}, "")
    # a section header with text after it is prose, not a section
    assert parse_docstring("Note: this is prose.\nStill prose.") == ("Note: this is prose. Still prose.", {}, "")
    # a docstring that is only sections has no description
    assert parse_docstring("Args:\n    x: the x.") == ("", {"x": "the x."}, "")
    # an arg with an empty first line takes its text from the continuation
    assert parse_docstring("D.\n\nArgs:\n    x:\n        the x.")[1] == {"x": "the x."}
    # sections after Args stop it; Raises/Example never leak into description or args
    desc, args, _ = parse_docstring("D.\n\nRaises:\n    ValueError: bad.\n\nArgs:\n    y: why.")
    assert desc == "D." and args == {"y": "why."}


def test_docstring_description_becomes_spec_description():
    assert (
        sdkworld.search_books.spec.description
        == "Search the catalogue.\n\nBooks are listed by id; filters combine with AND."
    )


# -- extract_path -------------------------------------------------------------------------------------------
RESULT = {
    "user_id": "u1",
    "orders": [
        {"order_id": "o1", "items": [{"sku": "a"}, {"sku": "b"}]},
        {"order_id": "o2", "items": []},
        {"order_id": None, "items": [{"sku": "c"}, {"other": 1}]},
        {"no_id": True},
        "not-a-dict",
    ],
    "profile": {"address": {"zip": "75001"}},
    "by_id": {"k1": 1, "k2": 2},
}


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        ("user_id", ["u1"]),
        ("profile.address.zip", ["75001"]),
        ("orders[].order_id", ["o1", "o2"]),  # None values and missing keys give nothing
        ("orders[].items[].sku", ["a", "b", "c"]),
        ("by_id[]", ["k1", "k2"]),  # [] on a dict steps into its keys
        ("missing", []),
        ("missing[].x", []),
        ("profile.missing.zip", []),
        ("user_id.deeper", []),  # a step into a non-dict gives nothing
        ("user_id[]", []),  # [] on a scalar gives nothing
    ],
)
def test_extract_path(path, expected):
    assert extract_path(RESULT, path) == expected


def test_extract_path_on_the_value_itself():
    assert extract_path("u1", "") == ["u1"]
    assert extract_path(None, "") == []
    assert extract_path(["a", "b", None], "[]") == ["a", "b"]
    assert extract_path([{"book_id": "B1"}, {"book_id": "B2"}], "[].book_id") == ["B1", "B2"]
    assert extract_path(RESULT, "") == [RESULT]


# -- decorator errors ------------------------------------------------------------------------------------------
def test_missing_docstring_is_an_error():
    def nodoc(x: int) -> int:
        return x

    with pytest.raises(WorldError, match="'nodoc' needs a docstring"):
        tool(nodoc)

    def only_args(x: int) -> int:
        """Args:
        x: the x.
        """
        return x

    with pytest.raises(WorldError, match="needs a docstring"):
        tool(only_args)


def test_missing_type_hint_is_an_error():
    def untyped(ctx, x, y: int) -> int:  # ctx needs no hint: it is not a parameter of the tool
        """Untyped."""
        return y

    with pytest.raises(WorldError, match="tool 'untyped': parameter 'x' needs a type hint"):
        tool(untyped)


@pytest.mark.parametrize("name", ["has space", "a" * 65, "dots.not.allowed", "ünïcode"])
def test_bad_name_is_an_error(name):
    with pytest.raises(WorldError, match="must be 1-64 letters, digits"):

        @tool(name=name)
        def f() -> None:
            """F."""


def test_good_name_at_the_length_limit():
    @tool(name="a" * 64)
    def f() -> None:
        """F."""

    assert f.name == "a" * 64


def test_variadic_and_positional_only_parameters_are_errors():
    def var(*items: str) -> None:
        """Var."""

    def kw(**items: str) -> None:
        """Kw."""

    def pos(x: int, /) -> None:
        """Pos."""

    for fn, param in [(var, "items"), (kw, "items"), (pos, "x")]:
        with pytest.raises(WorldError, match=f"parameter '{param}' must be a plain keyword parameter"):
            tool(fn)


def test_yields_must_be_path_strings():
    with pytest.raises(WorldError, match=r"yields\['order'\] must be a path string"):

        @tool(yields={"order": ["orders", "id"]})  # type: ignore[dict-item]
        def f() -> None:
            """F."""


def test_spec_is_immutable():
    spec = sdkworld.get_member.spec
    assert isinstance(spec, ToolSpec)
    with pytest.raises(AttributeError):
        spec.name = "other"  # type: ignore[misc]


def test_literal_int_and_nested_lists():
    @tool
    def f(level: Literal[1, 2, 3], grid: list[list[int]]) -> None:
        """F."""

    props = f.spec.parameters["properties"]
    assert props["level"] == {"enum": [1, 2, 3], "type": "integer"}
    assert props["grid"] == {"type": "array", "items": {"type": "array", "items": {"type": "integer"}}}
    with pytest.raises(ToolError, match="argument 'level'"):
        f.validate({"level": 4, "grid": []})
