"""The offline extractor keeps exactly the self-statements docs/reflection.md lists, and nothing else."""

from __future__ import annotations

import pytest
from threadloom.reflection.facts import UserStatement
from threadloom.reflection.offline import SelfStatementExtractor


def extract(text: str) -> list[tuple[str, str]]:
    return [(fact.key, fact.value) for fact in SelfStatementExtractor()([UserStatement("m1", text)])]


@pytest.mark.parametrize(
    ("text", "facts"),
    [
        ("My name is Ada Lovelace.", [("Name", "Ada Lovelace")]),
        ("Hi, my name is Ada and I write code.", [("Name", "Ada")]),
        ("Hello! My name is Zoë.", [("Name", "Zoë")]),
        ("my name is O\u2019Brien", [("Name", "O\u2019Brien")]),
        ("Please call me Ada!", [("Preferred name", "Ada")]),
        ("Well, I go by Al.", [("Preferred name", "Al")]),
        ("By the way, my pronouns are she/her", [("Pronouns", "she/her")]),
        ("My favourite colour is deep green.", [("Favorite colour", "deep green")]),
        ("My favorite tea is Earl Grey", [("Favorite tea", "Earl Grey")]),
        ("I prefer short answers.", [("Prefers", "short answers")]),
        ("I prefer tea.\nAlso, call me Bea", [("Prefers", "tea"), ("Preferred name", "Bea")]),
    ],
)
def test_it_keeps_the_listed_self_statements_in_the_users_words(text: str, facts: list[tuple[str, str]]) -> None:
    assert extract(text) == facts


@pytest.mark.parametrize(
    "text",
    [
        "I am tired.",  # not one of the forms
        "My friend's name is Bo.",  # about someone else
        "Her name is Bo and my name is ... no.",  # the form does not start the sentence
        "Is my name Al?",  # a question
        "Can you call me Al?",  # a question
        "My name is not Bob.",  # a negation
        "Call me no names",  # a negation
        "If I prefer tea, what then",  # a hypothetical (does not start with the form)
        "I prefer",  # nothing preferred
        "I prefer " + "x" * 121,  # longer than 120 characters: dropped, not cut
        "What is my name",  # nothing stated
    ],
)
def test_it_ignores_everything_else(text: str) -> None:
    assert extract(text) == []


def test_each_fact_names_the_message_it_comes_from() -> None:
    statements = [UserStatement("u1", "My name is Ada."), UserStatement("u2", "I prefer tea.")]
    facts = SelfStatementExtractor()(statements)
    assert [(fact.line, fact.message_id) for fact in facts] == [("Name: Ada", "u1"), ("Prefers: tea", "u2")]
