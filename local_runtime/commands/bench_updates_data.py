"""The data set of `agent-memory bench updates` (`bench_updates.py`): seeded, generated
update chains and look-alike pairs. Templates and word pools are general English; the
update rules (`agent_memory.tiers.semantic.update_rules`) know nothing of them.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field


def _split(text: str, sep: str | None = None) -> list[str]:
    return text.split(sep)


NAMES = _split(
    "Alice Bruno Chloe Dmitri Elena Farah Goran Hana Ivan Julia Kenji Lena Marco Nadia Omar "
    "Priya Quinn Rosa Samir Tara Umar Vera Wanda Xavier Yusuf Zoe Aaron Bianca Carlos Daria "
    "Emil Fiona Gustav Helga Igor Jonas Karin Luca Maya Nils Olga Pavel Rita Sven Tomas"
)
CITIES = _split(
    "Berlin Lisbon Oslo Madrid Dublin Vienna Prague Warsaw Athens Helsinki Zurich Porto"
)
ROLES = _split(
    "designer;data analyst;product manager;staff engineer;team lead;sales director;"
    "support engineer;researcher;architect;consultant",
    ";",
)
ORGS = _split("Acme Globex Initech Umbrella Hooli Stark Wayne Tyrell")
TOPICS = (
    ("dark mode", "light mode", "high contrast mode", "every editor"),
    ("tea", "coffee", "hot chocolate", "the morning"),
    ("window seats", "aisle seats", "exit row seats", "long flights"),
    ("email", "phone calls", "chat messages", "urgent questions"),
)
MONTHS = _split("January February March April May June July August September October")
PETS = ("cats", "dogs", "rabbits", "parrots")
PROJECTS = _split("Apollo Zeus Hermes Atlas Orion Vega Nova Titan Lyra Draco")
HOBBIES = _split("jazz;chess;hiking;painting;sailing;pottery;tennis;baking", ";")
LANGUAGES = _split("French Spanish German Italian Japanese Polish")


@dataclass
class Chain:
    kind: str
    statements: list[str]
    question: str


@dataclass
class LookAlike:
    kind: str
    statements: list[str]


@dataclass
class Household:
    chains: list[Chain] = field(default_factory=list)
    lookalikes: list[LookAlike] = field(default_factory=list)


def _pick(rng: random.Random, marked: bool, with_marker: list[str], plain: list[str]) -> str:
    return rng.choice(with_marker if marked else plain)


def _chain(kind: str, name: str, rng: random.Random) -> Chain:
    """One update chain of 2-4 statements; each later statement is phrased with a marker
    ("now", "moved to", "switched to", ...) or implicitly (a new value), at random."""
    length = rng.choice((2, 2, 3, 4))
    statements: list[str] = []
    if kind == "preference":
        *options, context = rng.choice(TOPICS)
        values = rng.sample(options, min(length, len(options)))
        statements.append(f"{name} prefers {values[0]} for {context}")
        for v in values[1:]:
            statements.append(
                _pick(
                    rng,
                    rng.random() < 0.6,
                    [
                        f"{name} now prefers {v} for {context}",
                        f"{name} switched to {v} for {context}",
                        f"{name} prefers {v} for {context} these days",
                    ],
                    [f"{name} prefers {v} for {context}", f"{name} likes {v} best for {context}"],
                )
            )
        return Chain(kind, statements, f"What does {name} prefer for {context}?")
    if kind == "location":
        cities = rng.sample(CITIES, length)
        statements.append(f"{name} lives in {cities[0]}")
        for c in cities[1:]:
            statements.append(
                _pick(
                    rng,
                    rng.random() < 0.6,
                    [
                        f"{name} moved to {c}",
                        f"{name} relocated to {c} last month",
                        f"{name} is now based in {c}",
                    ],
                    [f"{name} lives in {c}", f"{name} lives in {c} with two flatmates"],
                )
            )
        return Chain(kind, statements, f"Where does {name} live?")
    if kind == "role":
        roles, org = rng.sample(ROLES, length), rng.choice(ORGS)
        statements.append(f"{name} works as a {roles[0]} at {org}")
        for r in roles[1:]:
            statements.append(
                _pick(
                    rng,
                    rng.random() < 0.6,
                    [f"{name} now works as a {r} at {org}", f"{name} was promoted to {r} at {org}"],
                    [f"{name} works as a {r} at {org}", f"{name}'s job is {r} at {org}"],
                )
            )
        return Chain(kind, statements, f"What is {name}'s job?")
    if kind == "plan":
        cities, month = rng.sample(CITIES, length), rng.choice(MONTHS)
        statements.append(f"{name} plans to visit {cities[0]} in {month}")
        for c in cities[1:]:
            statements.append(
                _pick(
                    rng,
                    rng.random() < 0.6,
                    [
                        f"{name} changed plans and will visit {c} in {month}",
                        f"{name} now plans to visit {c} in {month} instead",
                    ],
                    [f"{name} plans to visit {c} in {month}"],
                )
            )
        return Chain(kind, statements, f"Which city will {name} visit in {month}?")
    pet = rng.choice(PETS)
    counts = rng.sample(range(1, 9), length)
    statements.append(f"{name} has {counts[0]} {pet}")
    for n in counts[1:]:
        statements.append(
            _pick(
                rng,
                rng.random() < 0.6,
                [f"{name} now has {n} {pet}", f"{name} has {n} {pet} now"],
                [f"{name} has {n} {pet}"],
            )
        )
    return Chain(kind, statements, f"How many {pet} does {name} have?")


LOOKALIKE_KINDS = (
    "two_people",
    "two_people",
    "two_projects",
    "additive",
    "additive",
    "same_person_other_topic",
    "same_person_other_attribute",
)


def _lookalike(kind: str, names: list[str], rng: random.Random) -> LookAlike:
    """Two statements that look like an update and are not one."""
    if kind == "two_people":
        a, b = names.pop(), names.pop()
        shape = rng.randrange(3)
        if shape == 0:
            c1, c2 = rng.sample(CITIES, 2)
            return LookAlike(kind, [f"{a} lives in {c1}", f"{b} lives in {c2}"])
        if shape == 1:
            *options, context = rng.choice(TOPICS)
            v1, v2 = rng.sample(options, 2)
            return LookAlike(
                kind, [f"{a} prefers {v1} for {context}", f"{b} prefers {v2} for {context}"]
            )
        r1, r2 = rng.sample(ROLES, 2)
        org = rng.choice(ORGS)
        return LookAlike(kind, [f"{a} works as a {r1} at {org}", f"{b} works as a {r2} at {org}"])
    if kind == "two_projects":
        p1, p2 = rng.sample(PROJECTS, 2)
        m1, m2 = rng.sample(MONTHS, 2)
        return LookAlike(
            kind,
            [f"Project {p1}'s deadline is in {m1}", f"Project {p2}'s deadline is in {m2}"],
        )
    name = names.pop()
    if kind == "same_person_other_topic":
        (v1, *_, c1), (v2, *_, c2) = rng.sample(TOPICS, 2)
        return LookAlike(kind, [f"{name} prefers {v1} for {c1}", f"{name} prefers {v2} for {c2}"])
    if kind == "same_person_other_attribute":
        shape = rng.randrange(3)
        if shape == 0:
            c1, c2 = rng.sample(CITIES, 2)
            return LookAlike(kind, [f"{name} lives in {c1}", f"{name}'s sister lives in {c2}"])
        if shape == 1:
            p1, p2 = rng.sample(PETS, 2)
            n1, n2 = rng.sample(range(1, 9), 2)
            return LookAlike(kind, [f"{name} has {n1} {p1}", f"{name} has {n2} {p2}"])
        role, org = rng.choice(ROLES), rng.choice(ORGS)
        return LookAlike(
            kind,
            [f"{name} works as a {role} at {org}", f"{name} volunteers at the animal shelter"],
        )
    if rng.random() < 0.5:
        h1, h2 = rng.sample(HOBBIES, 2)
        return LookAlike(kind, [f"{name} likes {h1}", f"{name} also likes {h2}"])
    l1, l2 = rng.sample(LANGUAGES, 2)
    return LookAlike(kind, [f"{name} speaks {l1}", f"{name} speaks {l2} too"])


def generate(seed: int = 16, households: int = 20) -> list[Household]:
    """The data set: `households` tenants of 5 chains and 7 look-alikes each."""
    rng = random.Random(seed)
    out: list[Household] = []
    kinds = ("preference", "location", "role", "plan", "quantity")
    for _ in range(households):
        names = rng.sample(NAMES, 24)
        house = Household()
        for kind in kinds:
            house.chains.append(_chain(kind, names.pop(), rng))
        for kind in LOOKALIKE_KINDS:
            house.lookalikes.append(_lookalike(kind, names, rng))
        out.append(house)
    return out
