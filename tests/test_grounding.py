"""Made-up argument values (``toolworld.scoring.grounding``): what counts as shown to the agent, and what not."""

from __future__ import annotations

import json
from typing import Any

from toolworld.scoring.grounding import Invented, grounded, invented_arguments, made_up_counts


def call(name: str, arguments: Any) -> dict[str, Any]:
    raw = arguments if isinstance(arguments, str) else json.dumps(arguments)
    return {"role": "assistant", "content": "", "tool_calls": [
        {"id": "c", "type": "function", "function": {"name": name, "arguments": raw}}]}  # fmt: skip


def test_a_value_the_customer_gave_is_grounded_and_one_they_did_not_is_made_up() -> None:
    messages = [
        {"role": "system", "content": "You are a support agent."},
        {"role": "user", "content": "Hi, I'm Mia Garcia, zip 78701. Where is my order?"},
        call("find_user_by_email", {"email": "mia.garcia@example.com"}),
        {"role": "tool", "content": '{"error": {"type": "not_found"}}'},
        call("find_user_by_name_zip", {"first_name": "mia", "last_name": "GARCIA", "zip": "78701"}),
        {"role": "tool", "content": '{"user_id": "mia_garcia_4412"}'},
        call("list_user_orders", {"user_id": "mia_garcia_4412"}),
    ]
    # the made-up address is the only one: case does not matter, a tool's result grounds what it returned
    assert invented_arguments(messages) == [Invented(0, "find_user_by_email", "email", "mia.garcia@example.com")]


def test_only_whole_values_in_earlier_messages_that_the_agent_did_not_write_count() -> None:
    messages = [
        {"role": "user", "content": "My family name is Smith and my email is xa@b.com."},
        {"role": "assistant", "content": "Let me look up order #W1234567 for you."},  # its own words ground nothing
        call("get_order_details", {"order_id": "#W1234567"}),
        call("find_user_by_name_zip", {"first_name": "mia", "last_name": "smith", "zip": 12345}),
        call("find_user_by_email", {"email": "a@b.com"}),  # inside a longer address: not given
        {"role": "tool", "content": '{"orders": ["#W7654321"]}'},
        call("return_items", {"order_id": "#W7654321", "items": [{"item_id": "I-9"}], "refund": True, "amount": 2.5}),
        call("broken", "{not json"),  # malformed: the environment already answered it with an error
    ]
    assert [(i.turn, i.tool, i.argument, i.value) for i in invented_arguments(messages)] == [
        (1, "get_order_details", "order_id", "#W1234567"),
        (2, "find_user_by_name_zip", "first_name", "mia"),  # in "family" only
        (2, "find_user_by_name_zip", "zip", "12345"),
        (3, "find_user_by_email", "email", "a@b.com"),
        (4, "return_items", "items.0.item_id", "I-9"),  # nested values are checked; booleans and floats are not
    ]
    assert grounded("SMITH", ["my family name is smith and my email is xa@b.com."])
    assert not grounded("xa@b.co", ["my email is xa@b.com."])


def test_an_error_that_echoes_a_made_up_value_does_not_ground_its_retry() -> None:
    """The world's error repeats what it was given ("No customer has the email '...'"): a retry with the same
    made-up value is made up again, and a name taken from the front of an address was not given either."""
    made = "jane.doe@example.com"
    messages = [
        {"role": "user", "content": "Hi, my email is mia.garcia@example.com."},
        call("find_user_by_email", {"email": made}),
        {"role": "tool", "content": json.dumps({"error": {"type": "not_found",
                                                          "message": f"No customer has the email '{made}'."}})},
        call("find_user_by_email", {"email": made}),
        call("find_user_by_name_zip", {"first_name": "Mia", "last_name": "Garcia", "zip": "78701"}),
    ]
    assert [(i.turn, i.argument) for i in invented_arguments(messages)] == [
        (0, "email"), (1, "email"), (2, "first_name"), (2, "last_name"), (2, "zip")]  # names only inside the address


def test_made_up_counts_fold_list_positions_and_count_failed_trials() -> None:
    made_up = [call("return_items", {"order_id": "#W1", "items": [{"item_id": "a1"}, {"item_id": "b2"}]})]
    given = [{"role": "user", "content": "order #W1, items a1 and b2"}, *made_up]
    assert made_up_counts([(made_up, False), (given, False), (made_up, True)]) == {
        "trials": 2, "failed": 1, "values": {"return_items.items.*.item_id": 4, "return_items.order_id": 2}}
