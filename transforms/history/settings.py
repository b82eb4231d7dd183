"""The fold's settings: conf/*.toml's `[gold]` values that history reads (jobs.config.GoldSettings),
as plain numbers so the fold needs no config object."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class HistorySettings:
    cooperative_round_gap_ms: int = 300_000  # max gap between cooperative rounds when no member states one
    departure_slack_ms: int = 30_000  # silence beyond the session timeout still read as a timeout
    default_session_timeout_ms: int = 45_000  # members whose records state none
    default_heartbeat_interval_ms: int = 5_000  # likewise: a commit may follow the last heartbeat by this much
    storm_rebalances_per_hour: int = 6  # an hour with this many rebalances is a storm


DEFAULT_SETTINGS = HistorySettings()
