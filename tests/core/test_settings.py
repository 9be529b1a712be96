"""Settings from wrangler vars: typed, validated once, overrides that reach the code."""

from __future__ import annotations

import json

import pytest
from pydantic import ValidationError

from agent_memory.memory import retrieval_config
from bindings.environment import Bindings
from bindings.ports.clock import FixedClock
from bindings.settings import Settings
from local_runtime.background import LocalBackgroundTasks


def test_vars_arrive_as_strings_and_come_out_typed() -> None:
    settings = Settings.from_vars(
        {"MAX_BODY_BYTES": "2048", "EPISODE_RETENTION_DAYS": "30", "UNRELATED": "x"}
    )
    assert settings.max_body_bytes == 2048
    assert settings.episode_retention_days == 30


def test_retrieval_weights_can_be_overridden_per_tier_by_a_var() -> None:
    override = {
        "tiers": {
            "semantic": {
                "relevance": 1.0,
                "recency": 0.0,
                "confidence": 0.0,
                "density": 0.0,
                "recency_half_life_days": 7,
            }
        }
    }
    settings = Settings.from_vars({"MEMORY_RETRIEVAL_CONFIG": json.dumps(override)})
    bindings = Bindings(settings=settings, clock=FixedClock(), background=LocalBackgroundTasks())
    weights = retrieval_config(bindings).weights_for("semantic")
    assert (weights.relevance, weights.recency, weights.recency_half_life_days) == (1.0, 0.0, 7)
    default = retrieval_config(
        Bindings(settings=Settings(), clock=FixedClock(), background=LocalBackgroundTasks())
    )
    assert default.weights_for("semantic") != weights


@pytest.mark.parametrize("bad", ["{not json", "[1, 2]"])
def test_a_malformed_retrieval_config_is_refused_at_startup(bad: str) -> None:
    with pytest.raises(ValidationError, match="MEMORY_RETRIEVAL_CONFIG"):
        Settings.from_vars({"MEMORY_RETRIEVAL_CONFIG": bad})


def test_namespace_flags_and_placement_come_from_vars() -> None:
    from agent_memory.placement import parse_placement
    from agent_memory.tiers.working import NamespaceFlags

    default = Settings.from_vars({})
    assert not default.memory_namespace_compat_read
    assert not default.memory_namespace_write_canonical
    settings = Settings.from_vars(
        {
            "MEMORY_NAMESPACE_COMPAT_READ": "true",
            "MEMORY_NAMESPACE_WRITE_CANONICAL": "false",
            "MEMORY_PLACEMENT": '{"log": {"cold_retention_days": 30}}',
        }
    )
    bindings = Bindings(settings=settings, clock=FixedClock(), background=LocalBackgroundTasks())
    assert NamespaceFlags.of(bindings.settings).phase == "dual-read"
    assert (
        parse_placement(bindings.settings.memory_placement).placement("log").cold_retention_days
        == 30
    )
    with pytest.raises(ValidationError, match="MEMORY_PLACEMENT"):
        Settings.from_vars({"MEMORY_PLACEMENT": "[1]"})


def test_platform_admins_are_parsed_into_one_kind_each() -> None:
    settings = Settings.from_vars(
        {
            "PLATFORM_ADMINS": " Ada@Example.com , email:root@example.com,"
            "common_name:ci-bot.access, 88bf3b6d.access ,common_name:ops@example.com"
        }
    )
    assert settings.platform_admin_identities == {
        ("email", "ada@example.com"),
        ("email", "root@example.com"),
        ("common_name", "ci-bot.access"),
        ("common_name", "88bf3b6d.access"),
        ("common_name", "ops@example.com"),
    }


@pytest.mark.parametrize("bad", ["group:sre", "email:ci-bot.access", "common_name:", "email:"])
def test_a_platform_admin_entry_of_no_known_kind_is_refused_at_startup(bad: str) -> None:
    with pytest.raises(ValidationError, match="PLATFORM_ADMINS"):
        Settings.from_vars({"PLATFORM_ADMINS": f"ops@example.com,{bad}"})
