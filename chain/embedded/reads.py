"""The storage items and runtime API calls the embedded chain answers, shaped as a node decodes them.

These are what ``bt.Metagraph`` (``client.subnets.metagraph``), the ``SetWeights``
preflight, ``ServeAxon``, registration, staking and our hyperparameter reads ask
for; everything else is refused with :class:`NotServed`, naming the item, so a
gap shows up as a clear error instead of a wrong answer.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import numpy as np

from .state import U16_MAX, ChainState

KAPPA_U16 = 32_767
BONDS_MOVING_AVERAGE = 900_000


class NotServed(Exception):
    """The SDK asked for something the embedded chain does not implement."""


def _u16(x: float) -> int:
    return int(round(float(x) * U16_MAX))


def _column(state: ChainState, field: str) -> list[Any]:
    return [row[field] for row in state.neuron_rows()]


def _subnet_scalar(value: Callable[[ChainState], Any]) -> Callable[[ChainState, list], Any]:
    """An item keyed by netuid: ``None`` (absent) for any netuid but the subnet's, and while it does not exist."""

    def read(state: ChainState, params: list) -> Any:
        if (params and params[0] != state.genesis.netuid) or not state.subnet_exists():
            return None
        return value(state)

    return read


def _uid_of(state: ChainState, params: list) -> int | None:
    netuid, hotkey = params
    if netuid != state.genesis.netuid:
        return None
    for row in state.neuron_rows():
        if row["hotkey"] == hotkey:
            return int(row["uid"])
    return None


def _key_of(state: ChainState, params: list) -> str | None:
    netuid, uid = params
    rows = state.neuron_rows()
    return rows[uid]["hotkey"] if netuid == state.genesis.netuid and 0 <= uid < len(rows) else None


def _account(state: ChainState, params: list) -> dict:
    (address,) = params
    return {
        "nonce": state.next_nonce(address),
        "consumers": 0,
        "providers": 1,
        "sufficients": 0,
        "data": {"free": state.free_balance(address), "reserved": 0, "frozen": 0, "flags": 0},
    }


def _weights_row(state: ChainState, params: list) -> list[tuple[int, int]]:
    netuid, uid = params
    return state.weights_of(uid) if netuid == state.genesis.netuid else []


_g = lambda name: _subnet_scalar(lambda s: getattr(s.genesis, name))  # noqa: E731

STORAGE: dict[tuple[str, str], Callable[[ChainState, list], Any]] = {
    ("SubtensorModule", "Uids"): _uid_of,
    ("SubtensorModule", "Keys"): _key_of,
    ("SubtensorModule", "NetworksAdded"): _subnet_scalar(lambda s: True),
    ("SubtensorModule", "NetworkRegisteredAt"): _subnet_scalar(lambda s: s.subnet_registered_at()),
    ("SubtensorModule", "FirstEmissionBlockNumber"): _subnet_scalar(lambda s: s.subnet_started_at()),
    ("SubtensorModule", "SubtokenEnabled"): _subnet_scalar(lambda s: s.subnet_started_at() is not None),
    ("SubtensorModule", "SubnetOwner"): _subnet_scalar(lambda s: s.subnet_owner()[0] or None),
    ("SubtensorModule", "SubnetOwnerHotkey"): _subnet_scalar(lambda s: s.subnet_owner()[1] or None),
    ("SubtensorModule", "SubnetLocked"): _subnet_scalar(lambda s: int(s.meta().get("subnet_locked", 0))),
    ("SubtensorModule", "StartCallDelay"): lambda s, p: s.genesis.start_call_delay,
    ("SubtensorModule", "SubnetworkN"): _subnet_scalar(lambda s: len(s.neuron_rows())),
    ("SubtensorModule", "Tempo"): _g("tempo"),
    ("SubtensorModule", "WeightsSetRateLimit"): _g("weights_rate_limit"),
    ("SubtensorModule", "ImmunityPeriod"): _g("immunity_period"),
    ("SubtensorModule", "MaxWeightsLimit"): _g("max_weight_limit"),
    ("SubtensorModule", "MinAllowedWeights"): _g("min_allowed_weights"),
    ("SubtensorModule", "ActivityCutoff"): _g("activity_cutoff"),
    ("SubtensorModule", "MaxAllowedUids"): _g("max_uids"),
    ("SubtensorModule", "MaxAllowedValidators"): _g("max_validators"),
    ("SubtensorModule", "WeightsVersionKey"): _g("weights_version"),
    ("SubtensorModule", "Burn"): _g("burn_rao"),
    ("SubtensorModule", "CollateralLockShare"): _subnet_scalar(lambda s: 0),
    ("SubtensorModule", "SubnetOwnerCut"): lambda s, p: _u16(s.genesis.owner_cut),
    ("SubtensorModule", "Kappa"): _subnet_scalar(lambda s: KAPPA_U16),
    ("SubtensorModule", "BondsMovingAverage"): _subnet_scalar(lambda s: BONDS_MOVING_AVERAGE),
    ("SubtensorModule", "CommitRevealWeightsEnabled"): _subnet_scalar(lambda s: False),
    ("SubtensorModule", "SubnetEpochConsensus"): _subnet_scalar(lambda s: "Yuma"),
    ("SubtensorModule", "LastEpochBlock"): _subnet_scalar(lambda s: int(s.meta()["last_epoch_block"])),
    ("SubtensorModule", "BlocksSinceLastStep"): _subnet_scalar(lambda s: s.head() - int(s.meta()["last_epoch_block"])),
    ("SubtensorModule", "LastUpdate"): _subnet_scalar(lambda s: _column(s, "last_update")),
    ("SubtensorModule", "ValidatorPermit"): _subnet_scalar(lambda s: [bool(v) for v in _column(s, "permit")]),
    ("SubtensorModule", "Incentive"): _subnet_scalar(lambda s: [_u16(v) for v in _column(s, "incentive")]),
    ("SubtensorModule", "Dividends"): _subnet_scalar(lambda s: [_u16(v) for v in _column(s, "dividends")]),
    ("SubtensorModule", "Consensus"): _subnet_scalar(lambda s: [_u16(v) for v in _column(s, "consensus")]),
    ("SubtensorModule", "Emission"): _subnet_scalar(lambda s: _column(s, "emission")),
    ("SubtensorModule", "Weights"): _weights_row,
    ("System", "Account"): _account,
    ("Timestamp", "Now"): lambda s, p: int(time.time() * 1000),
    ("MevShield", "NextKey"): lambda s, p: None,
}

MAPS: dict[tuple[str, str], Callable[[ChainState, list], list[tuple[Any, Any]]]] = {
    ("SubtensorModule", "TokenSymbol"): lambda s, p: [],
    ("Commitments", "CommitmentOf"): lambda s, p: [],
    ("Commitments", "RevealedCommitments"): lambda s, p: [],
    ("SubtensorModule", "Uids"): lambda s, p: [(r["hotkey"], int(r["uid"])) for r in s.neuron_rows()],
    ("SubtensorModule", "SubnetOwner"): lambda s, p: (
        [(s.genesis.netuid, s.subnet_owner()[0])] if s.subnet_exists() else []
    ),
}


def query(state: ChainState, module: str, name: str, params: list) -> Any:
    read = STORAGE.get((module, name))
    if read is None:
        raise NotServed(f"the embedded chain does not serve storage {module}.{name}")
    return read(state, params or [])


def query_map(state: ChainState, module: str, name: str, params: list) -> list[tuple[Any, Any]]:
    read = MAPS.get((module, name))
    if read is None:
        raise NotServed(f"the embedded chain does not serve storage map {module}.{name}")
    return read(state, params or [])


def runtime_call(state: ChainState, api: str, method: str, params: Any, block: int) -> Any:
    if (api, method) == ("SubnetInfoRuntimeApi", "get_metagraph"):
        (netuid,) = params
        return metagraph_record(state, block) if netuid == state.genesis.netuid and state.subnet_exists() else None
    if (api, method) == ("SwapRuntimeApi", "sim_swap_tao_for_alpha"):
        return {"alpha_amount": int(params["tao"]), "tao_fee": 0, "alpha_fee": 0}
    raise NotServed(f"the embedded chain does not serve runtime API {api}.{method}")


_RECORD_COLUMNS = (
    "hotkey",
    "coldkey",
    "active",
    "permit",
    "last_update",
    "registered_at",
    "trust",
    "consensus",
    "incentive",
    "dividends",
    "emission",
    "stake",
    "axon_block",
    "axon_version",
    "axon_ip",
    "axon_port",
    "axon_ip_type",
    "axon_protocol",
)


def metagraph_record(state: ChainState, block: int) -> dict:
    """``SubnetInfoRuntimeApi.get_metagraph``'s answer: one column per field, by uid."""
    record = state.memo("metagraph", _metagraph_columns)
    return {**record, "block": block, "blocks_since_last_step": block - record["last_step"]}


def _metagraph_columns(state: ChainState) -> dict:
    """Everything in the metagraph record but the block it is read at."""
    rows = state.conn.execute(f"SELECT {', '.join(_RECORD_COLUMNS)} FROM neurons ORDER BY uid").fetchall()  # noqa: S608
    n = len(rows)
    c = dict(zip(_RECORD_COLUMNS, zip(*rows))) if rows else {name: () for name in _RECORD_COLUMNS}
    meta = state.meta()
    g = state.genesis
    scores = lambda name: np.rint(np.asarray(c[name], dtype=float) * U16_MAX).astype(int).tolist()  # noqa: E731
    return {
        "netuid": g.netuid,
        "name": "dagnet",
        "symbol": "α",
        "tempo": g.tempo,
        "last_step": int(meta["last_epoch_block"]),
        "owner_hotkey": meta.get("owner_hotkey", ""),
        "owner_coldkey": meta.get("owner_coldkey", ""),
        "network_registered_at": state.subnet_registered_at() or 0,
        "num_uids": n,
        "max_uids": g.max_uids,
        "hotkeys": list(c["hotkey"]),
        "coldkeys": list(c["coldkey"]),
        "identities": [None] * n,
        "axons": [_axon(*axon) for axon in zip(*(c[k] for k in _RECORD_COLUMNS[12:]))],
        "active": [bool(v) for v in c["active"]],
        "validator_permit": [bool(v) for v in c["permit"]],
        "last_update": list(c["last_update"]),
        "block_at_registration": list(c["registered_at"]),
        "rank": scores("incentive"),
        "trust": scores("trust"),
        "consensus": scores("consensus"),
        "incentives": scores("incentive"),
        "dividends": scores("dividends"),
        "pruning_score": [0] * n,
        "emission": list(c["emission"]),
        "alpha_stake": list(c["stake"]),
        "tao_stake": [0] * n,
        "total_stake": list(c["stake"]),
    }


def _axon(block: int, version: int, ip: str | None, port: int, ip_type: int, protocol: int) -> dict | None:
    if not ip:
        return None
    return {
        "block": block,
        "version": version,
        "ip": int(ip),
        "port": port,
        "ip_type": ip_type,
        "protocol": protocol,
        "placeholder1": 0,
        "placeholder2": 0,
    }
