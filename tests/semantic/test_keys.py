"""Keys for free text (`agent_memory.tiers.semantic.keys`) and the update rules
(`update_rules`) on sentences written by hand, not by the benchmark's generator: what a
user storing free text would expect to be read as an update, and look-alikes that must not
be."""

from __future__ import annotations

import pytest

from agent_memory.tiers.semantic.keys import FactKey, derive_key, judge_update, near_duplicate
from agent_memory.tiers.semantic.keys import judge as judge_with_separation

UPDATES = [
    ("Alice prefers dark mode in every editor", "Alice now prefers light mode in every editor"),
    ("I live in Toronto", "I just moved to Vancouver"),
    ("My manager is Sarah", "My manager is now Tom"),
    ("Our standup is at 9am", "Our standup moved to 10am"),
    ("Priya uses VS Code", "Priya switched to Neovim"),
    ("The deploy freeze starts on Friday", "The deploy freeze now starts on Monday"),
    ("Ben is vegetarian", "Ben is no longer vegetarian"),
    ("Maria's phone number is 555-1234", "Maria's phone number is 555-9876"),
    ("The team uses Jira for tickets", "The team now uses Linear for tickets"),
    ("Sam drives a Toyota", "Sam drives a Tesla now"),
    ("Lee's favourite colour is blue", "Lee's favourite colour is green"),
    ("I prefer Python for scripting", "These days I prefer Go for scripting"),
    ("Ana works at Google", "Ana left Google and joined Stripe"),
    ("Bob lives in Berlin", "Bob lives in Munich"),
    ("Carol has 3 cats", "Carol has 4 cats"),
]
NOT_UPDATES = [
    ("I live in Toronto", "My brother lives in Vancouver"),
    ("Priya uses VS Code", "Priya uses Slack"),
    ("Ben likes pizza", "Ben likes sushi as well"),
    ("Maria's phone number is 555-1234", "Maria's birthday is March 3"),
    ("The backend team uses Go", "The frontend team uses TypeScript"),
    ("Sam drives a Toyota", "Sam owns a bike"),
    ("Lee visited Paris in 2019", "Lee visited Rome in 2021"),
    ("Ana has a meeting at 3pm", "Ana has lunch at noon"),
    ("I prefer tea in the morning", "I prefer coffee in the afternoon"),
    ("Tom speaks French", "Tom speaks German"),
    ("Carol has 3 cats", "Carol has 2 dogs"),
    ("Project Apollo's deadline is March 3", "Project Zeus's deadline is April 5"),
    ("Alice prefers tea", "Alice prefers dark mode in every editor"),
    ("Our Paris office opens at 9", "Our Paris office is on Rue Oberkampf"),
]


def judge(older: str, newer: str) -> str:
    return judge_update(older, derive_key(older), newer, derive_key(newer)).decision


@pytest.mark.parametrize(("older", "newer"), UPDATES)
def test_a_newer_statement_of_the_same_thing_is_an_update(older: str, newer: str) -> None:
    assert judge(older, newer) == "update"


@pytest.mark.parametrize(("older", "newer"), NOT_UPDATES)
def test_look_alikes_are_not_updates(older: str, newer: str) -> None:
    assert judge(older, newer) != "update"


@pytest.mark.parametrize(
    ("older", "newer"),
    [
        ("Sam's wife's number is 555-0190.", "Sam changed his number to 555-0177."),
        ("My sister's flight lands at 6.", "My flight was moved to 9."),
    ],
)
def test_a_subject_owned_through_another_owner_is_never_superseded(older: str, newer: str) -> None:
    verdict = judge_with_separation(older, derive_key(older), newer, derive_key(newer))
    assert verdict.decision == "compatible"


@pytest.mark.parametrize(
    ("older", "newer"),
    [
        ("Irene is the treasurer of the book club.", "Irene is the treasurer of the chess club."),
        # a name in place of another between shared words: two clubs, not a new value
        (
            "Hana is the secretary of the Eastside Rowing Club.",
            "Hana is the secretary of the Eastside Sailing Club.",
        ),
    ],
)
def test_the_same_role_in_another_group_is_never_superseded_on_the_rules_word(
    older: str, newer: str
) -> None:
    verdict = judge_with_separation(older, derive_key(older), newer, derive_key(newer))
    assert verdict.decision in ("compatible", "unsure")


@pytest.mark.parametrize(("older", "newer"), UPDATES)
def test_an_update_keeps_its_evidence_when_checked_for_two_things(older: str, newer: str) -> None:
    verdict = judge_with_separation(older, derive_key(older), newer, derive_key(newer))
    assert verdict.decision == "update", verdict


def test_the_same_role_moved_to_another_group_is_an_update() -> None:
    book = "Irene is the treasurer of the book club."
    moved = "Irene is now the treasurer of the chess club."
    assert (
        judge_with_separation(book, derive_key(book), moved, derive_key(moved)).decision == "update"
    )


def test_moving_a_thing_is_a_change_of_that_thing_not_of_where_the_speaker_lives() -> None:
    rotation, bedtime = (
        "We moved the on-call rotation to every two weeks.",
        "I moved my bedtime to 10 pm.",
    )
    assert (
        judge_with_separation(rotation, derive_key(rotation), bedtime, derive_key(bedtime)).decision
        == "compatible"
    )
    assert judge("I live in Toronto", "I just moved to Vancouver") == "update"


def test_the_speakers_changes_of_two_things_are_two_facts() -> None:
    server, beans = (
        "We upgraded the build server to 64 GB.",
        "We switched coffee suppliers to Acme.",
    )
    verdict = judge_with_separation(server, derive_key(server), beans, derive_key(beans))
    assert verdict.decision != "update"
    assert judge("We use Jenkins for CI", "We switched from Jenkins to GitHub Actions") == "update"


def test_a_change_to_what_is_done_to_one_thing_leaves_another_thing_alone() -> None:
    def verdict(older: str, newer: str) -> str:
        return judge_with_separation(older, derive_key(older), newer, derive_key(newer)).decision

    assert verdict("Nora waters the cactus once a month.", "Nora now waters the ferns daily.") == (
        "compatible"
    )
    assert verdict("Nora waters the ferns twice a week.", "Nora now waters the ferns daily.") == (
        "update"
    )


def test_a_name_that_says_which_kind_of_thing_is_not_a_new_value() -> None:
    figma, notion = "We have 20 Figma licenses.", "We have 20 Notion licenses."
    verdict = judge_with_separation(figma, derive_key(figma), notion, derive_key(notion))
    assert verdict.decision == "compatible"
    cut = "We now have 12 Figma licenses."
    assert judge_with_separation(figma, derive_key(figma), cut, derive_key(cut)).decision == (
        "update"
    )


def test_a_sentence_opening_with_a_common_word_finds_its_verb_past_a_preposition() -> None:
    spain, portugal = "Shipping to Spain costs 9 euros.", "Shipping to Portugal costs 9 euros."
    rise = "Shipping to Spain went up to 12 euros."

    def verdict(older: str, newer: str) -> str:
        return judge_with_separation(older, derive_key(older), newer, derive_key(newer)).decision

    assert verdict(portugal, rise) == "compatible"
    assert verdict(spain, portugal) == "compatible"
    assert verdict(spain, rise) == "update"


def test_a_subject_written_in_capitals_is_a_name_not_a_pronoun() -> None:
    # "IT rotated …": "IT" is a department acting, so "rotated" is the verb and the guest
    # password (another thing) is left alone.
    guest = "The guest Wi-Fi password is birch19."
    rotated = "IT rotated the office Wi-Fi password; it is now cedar77."
    verdict = judge_with_separation(guest, derive_key(guest), rotated, derive_key(rotated))
    assert verdict.decision == "compatible"
    assert derive_key(rotated).attribute == "rotated"


def test_a_look_alike_owned_by_another_is_not_a_near_duplicate() -> None:
    def alike(a: str, b: str) -> str | None:
        ka, kb = derive_key(a).entity, derive_key(b).entity
        return near_duplicate(a, ka, b, kb, states_a_change=False)

    assert alike("Zoe's dog is called Biscuit.", "Zoe's neighbour's dog is called Biscuit.")
    assert alike("Hana's restaurant is Sakura.", "Hana's parents' restaurant is Sakura.")
    assert alike("Zoe's dog is called Biscuit.", "Zoe's dog is named Biscuit.") is None


def test_the_same_words_are_a_duplicate() -> None:
    assert judge("Alice likes jazz.", "alice likes jazz") == "duplicate"


@pytest.mark.parametrize(
    ("content", "kwargs", "expected"),
    [
        ("Alice prefers dark mode", {}, FactKey("alice", "preference", "named_entity")),
        ("Alice's manager is Bob", {}, FactKey("alice", "manager", "named_entity")),
        ("My budget is 500 dollars", {}, FactKey("user", "budget", "speaker")),
        ("I moved to Rome", {}, FactKey("user", "location", "speaker")),
        ("the budget is 700", {}, FactKey("budget", "state", "sentence_subject")),
        (
            "prefers the aisle",
            {"metadata": {"entity": "Dana"}},
            FactKey("dana", "preference", "metadata"),
        ),
        (
            "likes the blue one",
            {"subject": "contact:42", "predicate": "likes"},
            FactKey("contact:42", "likes", "structured"),
        ),
        (
            "yesterday alice said she prefers window seats",
            {"known_entities": {"alice"}},
            FactKey("alice", "preference", "known_subject"),
        ),
        ("ok thanks", {}, FactKey("", "", "none")),
    ],
)
def test_keys_say_how_they_were_derived(
    content: str, kwargs: dict[str, object], expected: FactKey
) -> None:
    assert derive_key(content, **kwargs) == expected  # type: ignore[arg-type]


def test_a_title_is_part_of_the_name_not_a_sentence_of_its_own() -> None:
    # "Dr." ended a sentence, so every doctor was the entity "dr": two doctors' statements
    # were weighed as one person's, and a move of one went to the adjudicator as a maybe-update
    # of the other.
    patel, moss = "Dr. Patel lives in Leeds.", "Dr. Moss moved to York."
    assert (derive_key(patel).entity, derive_key(moss).entity) == ("dr patel", "dr moss")
    verdict = judge_with_separation(patel, derive_key(patel), moss, derive_key(moss))
    assert verdict.decision == "compatible"
