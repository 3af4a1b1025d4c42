"""The store contract: every behaviour of the :class:`~alma_schedule.stores.base.Store` protocol that
all backends share, as one pytest class to inherit (see :mod:`alma_schedule.testing` for usage).
docs/architecture.md, section "The modules, in detail" (testing/store_contract.py).
"""

from __future__ import annotations

from alma_schedule.testing.contract_backfills import BackfillContract
from alma_schedule.testing.contract_backoff import BackoffContract
from alma_schedule.testing.contract_blocked import BlockedContract
from alma_schedule.testing.contract_buffered import BufferedContract
from alma_schedule.testing.contract_calendars import CalendarContract
from alma_schedule.testing.contract_claims import ClaimContract
from alma_schedule.testing.contract_events import EventsContract
from alma_schedule.testing.contract_fixed_delay import FixedDelayContract
from alma_schedule.testing.contract_fleet import FleetContract
from alma_schedule.testing.contract_hostile import HostileContract
from alma_schedule.testing.contract_input import InputContract
from alma_schedule.testing.contract_jitter import JitterContract
from alma_schedule.testing.contract_limits import LimitsContract
from alma_schedule.testing.contract_missed import MissedContract
from alma_schedule.testing.contract_money import MoneyContract
from alma_schedule.testing.contract_overdue import OverdueContract
from alma_schedule.testing.contract_owner import OwnerContract
from alma_schedule.testing.contract_probe import ProbeContract
from alma_schedule.testing.contract_provenance import ProvenanceContract
from alma_schedule.testing.contract_put_many import PutManyContract
from alma_schedule.testing.contract_reads import ReadContract
from alma_schedule.testing.contract_record import RecordCostContract
from alma_schedule.testing.contract_retention import RetentionContract
from alma_schedule.testing.contract_routines import RoutineContract
from alma_schedule.testing.contract_runs import RunContract
from alma_schedule.testing.contract_settlement import SettlementContract
from alma_schedule.testing.contract_staging import StagingContract
from alma_schedule.testing.contract_start import StartContract
from alma_schedule.testing.contract_streak import StreakContract
from alma_schedule.testing.contract_ticklog import TickLogContract
from alma_schedule.testing.contract_wake import DeadlinePollContract, WakeContract, ZoneDataContract

__all__ = [
    "BackfillContract",
    "BackoffContract",
    "DeadlinePollContract",
    "BlockedContract",
    "BufferedContract",
    "CalendarContract",
    "ClaimContract",
    "EventsContract",
    "FixedDelayContract",
    "FleetContract",
    "HostileContract",
    "InputContract",
    "JitterContract",
    "LimitsContract",
    "MissedContract",
    "MoneyContract",
    "OwnerContract",
    "OverdueContract",
    "ProbeContract",
    "ProvenanceContract",
    "PutManyContract",
    "ReadContract",
    "RecordCostContract",
    "RetentionContract",
    "RoutineContract",
    "RunContract",
    "SettlementContract",
    "StagingContract",
    "StartContract",
    "StoreContract",
    "StreakContract",
    "TickLogContract",
    "WakeContract",
    "ZoneDataContract",
]


class StoreContract(
    RoutineContract,
    ClaimContract,
    StagingContract,
    BufferedContract,
    BackoffContract,
    RunContract,
    StartContract,
    StreakContract,
    MoneyContract,
    SettlementContract,
    BlockedContract,
    RecordCostContract,
    OwnerContract,
    ReadContract,
    InputContract,
    WakeContract,
    ZoneDataContract,
    DeadlinePollContract,
    LimitsContract,
    HostileContract,
    BackfillContract,
    TickLogContract,
    JitterContract,
    ProbeContract,
    MissedContract,
    ProvenanceContract,
    PutManyContract,
    CalendarContract,
    RetentionContract,
    EventsContract,
    OverdueContract,
    FixedDelayContract,
    FleetContract,
):
    """Everything a backend must do, single-threaded. Provide a ``store`` fixture."""
