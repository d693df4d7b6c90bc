"""The embedded chain's state: (at most) one subnet in a SQLite file, and the calls that change it.

Only the chain process (:mod:`chain.embedded.node`) writes; every write is one
transaction, so a crash leaves the chain at the last whole block or call. The
chain keeps the head state only (like a node that prunes everything behind
the head): a read pinned to an older block is served while nothing has changed
since that block, and refused as discarded after.

Refusals are :class:`Refusal` with subtensor's error names
(``SettingWeightsTooFast``, ``NeuronNoValidatorPermit``...), so the SDK
classifies them exactly as it does a live node's.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

import numpy as np

from storage import open_shared

from ..base import blocks_until_epoch
from ..epoch import EpochInputs, run_epoch, split_emission
from .genesis import RAO_PER_TAO, Genesis

U16_MAX = 65_535
Event = tuple[str, dict]
"""A ``SubtensorModule`` event a call raised: its name and attributes."""
T = TypeVar("T")

SCHEMA = (
    "CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
    """CREATE TABLE IF NOT EXISTS neurons (
        uid INTEGER PRIMARY KEY, hotkey TEXT NOT NULL UNIQUE, coldkey TEXT NOT NULL,
        registered_at INTEGER NOT NULL, last_update INTEGER NOT NULL DEFAULT 0,
        stake INTEGER NOT NULL DEFAULT 0, permit INTEGER NOT NULL DEFAULT 0,
        active INTEGER NOT NULL DEFAULT 1,
        axon_ip TEXT, axon_port INTEGER NOT NULL DEFAULT 0, axon_ip_type INTEGER NOT NULL DEFAULT 4,
        axon_version INTEGER NOT NULL DEFAULT 0, axon_protocol INTEGER NOT NULL DEFAULT 0,
        axon_block INTEGER NOT NULL DEFAULT 0,
        consensus REAL NOT NULL DEFAULT 0, trust REAL NOT NULL DEFAULT 0,
        validator_trust REAL NOT NULL DEFAULT 0, incentive REAL NOT NULL DEFAULT 0,
        dividends REAL NOT NULL DEFAULT 0, emission INTEGER NOT NULL DEFAULT 0)""",
    "CREATE TABLE IF NOT EXISTS weights (src INTEGER, dst INTEGER, value INTEGER, PRIMARY KEY (src, dst))",
    "CREATE TABLE IF NOT EXISTS bonds (src INTEGER, dst INTEGER, value REAL, PRIMARY KEY (src, dst))",
    "CREATE TABLE IF NOT EXISTS accounts (address TEXT PRIMARY KEY, free INTEGER NOT NULL, nonce INTEGER NOT NULL DEFAULT 0)",
)


class Refusal(Exception):
    """The chain refused a call; ``name`` is subtensor's error name for it."""

    def __init__(self, name: str, message: str) -> None:
        super().__init__(message)
        self.name = name
        self.message = message


class StateDiscarded(Exception):
    """A read pinned to a block whose state this chain no longer keeps."""


class ChainState:
    """One embedded chain's SQLite file. Not thread-safe: one per thread or task loop."""

    def __init__(self, path: Path, genesis: Genesis | None = None) -> None:
        self.path = Path(path)
        self.conn = open_shared(self.path, SCHEMA)
        with self._write():
            if self._meta_get("head") is None:
                self._init_genesis(genesis or Genesis())
            self.genesis = Genesis.from_meta(self.meta())
            if self.genesis.subnet_at_genesis and self._meta_get("subnet_registered_at") is None:
                self._meta_set(subnet_registered_at=0, subnet_started_at=0)  # a file from before subnets were created
        self._memo: dict[str, tuple[int, Any]] = {}

    def close(self) -> None:
        self.conn.close()

    # -- meta ------------------------------------------------------------------------

    def meta(self) -> dict[str, str]:
        return dict(self.conn.execute("SELECT key, value FROM meta"))

    def _meta_get(self, key: str) -> str | None:
        return meta_value(self.conn, key)

    def _meta_set(self, **values: object) -> None:
        self.conn.executemany(
            "INSERT INTO meta (key, value) VALUES (?, ?) ON CONFLICT(key) DO UPDATE SET value = excluded.value",
            [(k, str(v)) for k, v in values.items()],
        )

    def _meta_int(self, key: str) -> int:
        return int(self._meta_get(key) or 0)

    def _init_genesis(self, genesis: Genesis) -> None:
        self._meta_set(**genesis.to_meta())
        self._meta_set(head=0, last_epoch_block=0, pending_emission=0, changed_at=0, genesis_time=time.time())
        if genesis.subnet_at_genesis:
            self._meta_set(subnet_registered_at=0, subnet_started_at=0)

    # -- the subnet ------------------------------------------------------------------------

    def _meta_block(self, key: str) -> int | None:
        value = self._meta_get(key)
        return None if value is None else int(value)

    def subnet_registered_at(self) -> int | None:
        """The block ``register_network`` created the subnet at (0: genesis); ``None`` while there is none."""
        return self._meta_block("subnet_registered_at")

    def subnet_started_at(self) -> int | None:
        """The subnet's first emission block (set by ``start_call``); ``None`` until then."""
        return self._meta_block("subnet_started_at")

    def subnet_exists(self) -> bool:
        return self.subnet_registered_at() is not None

    def subnet_owner(self) -> tuple[str, str]:
        """The owner's coldkey and hotkey; empty for a subnet made at genesis."""
        return self._meta_get("owner_coldkey") or "", self._meta_get("owner_hotkey") or ""

    def publish_url(self, url: str) -> None:
        """Where the node answers RPC; empty while no node runs."""
        with self._write():
            self._meta_set(rpc_url=url)

    def set_block_time(self, seconds: float) -> None:
        with self._write():
            self._meta_set(block_time=repr(float(seconds)))
        self.genesis = Genesis.from_meta(self.meta())

    @contextmanager
    def _write(self) -> Iterator[None]:
        self.conn.execute("BEGIN IMMEDIATE")
        try:
            yield
        except BaseException:
            self.conn.execute("ROLLBACK")
            raise
        self.conn.execute("COMMIT")

    # -- blocks ------------------------------------------------------------------------

    def head(self) -> int:
        return self._meta_int("head")

    def blocks_until_epoch(self, block: int) -> int:
        """Subtensor's schedule: an epoch runs at the block where this reaches 0."""
        return blocks_until_epoch(block, self.genesis.netuid, self.genesis.tempo)

    def produce_block(self) -> int:
        """Advance the head by one block; once the subnet is started, accrue emission and run the epoch when due."""
        with self._write():
            block = self.head() + 1
            if self.subnet_started_at() is None:
                self._meta_set(head=block)
                return block
            pending = self._meta_int("pending_emission") + self.genesis.emission_per_block_rao
            self._meta_set(head=block, pending_emission=pending)
            if self.blocks_until_epoch(block) == 0:
                self._epoch(block, pending)
        return block

    def check_readable(self, block: int | None) -> int:
        """The block a read is served at; refuses blocks ahead of or discarded behind the head."""
        head = self.head()
        if block is None:
            return head
        if block > head:
            raise StateDiscarded(f"block {block} is not produced yet (head is {head})")
        if block < self._meta_int("changed_at"):
            raise StateDiscarded(
                f"state at block {block} is discarded: the embedded chain keeps the head state only (head {head})"
            )
        return block

    def _changed(self) -> None:
        self._meta_set(changed_at=self.head(), version=self._meta_int("version") + 1)

    def memo(self, name: str, compute: Callable[[ChainState], T]) -> T:
        """``compute(self)``, reused until the state next changes (a call applied or an epoch run).

        Plain block production leaves it valid: what a new block alone changes
        (the head, the pending emission) is read outside the memo.
        """
        version = self._meta_int("version")
        hit = self._memo.get(name)
        if hit is None or hit[0] != version:
            hit = self._memo[name] = (version, compute(self))
        return hit[1]

    # -- accounts ------------------------------------------------------------------------

    def _account(self, address: str) -> tuple[int, int]:
        row = self.conn.execute("SELECT free, nonce FROM accounts WHERE address = ?", (address,)).fetchone()
        if row is None:
            free = self.genesis.endowment_tao * RAO_PER_TAO
            self.conn.execute("INSERT INTO accounts (address, free) VALUES (?, ?)", (address, free))
            return free, 0
        return int(row[0]), int(row[1])

    def free_balance(self, address: str) -> int:
        row = self.conn.execute("SELECT free FROM accounts WHERE address = ?", (address,)).fetchone()
        return self.genesis.endowment_tao * RAO_PER_TAO if row is None else int(row[0])

    def next_nonce(self, address: str) -> int:
        row = self.conn.execute("SELECT nonce FROM accounts WHERE address = ?", (address,)).fetchone()
        return 0 if row is None else int(row[0])

    def _debit(self, address: str, amount: int, error: str) -> None:
        free, _ = self._account(address)
        if free < amount:
            raise Refusal(error, f"The coldkey balance {free} rao is below the {amount} rao this call needs.")
        self.conn.execute("UPDATE accounts SET free = free - ? WHERE address = ?", (amount, address))

    # -- extrinsics ------------------------------------------------------------------------

    def apply(self, signer: str, nonce: int, function: str, params: dict) -> tuple[int, list[Event]]:
        """Apply one signed call at the head block; returns the block it landed in and the events it raised."""
        handler = _CALLS.get(function)
        if handler is None:
            raise Refusal("CallNotServed", f"the embedded chain does not implement SubtensorModule.{function}")
        with self._write():
            _, expected = self._account(signer)
            if nonce != expected:
                raise Refusal("BadProof", f"Transaction has a bad nonce: {nonce}, expected {expected}")
            if function != "register_network":
                self._check_netuid(params.get("netuid"))
            events = handler(self, signer, params) or []
            self.conn.execute("UPDATE accounts SET nonce = nonce + 1 WHERE address = ?", (signer,))
            self._changed()
            return self.head(), events

    def _check_netuid(self, netuid: object) -> None:
        if netuid != self.genesis.netuid or not self.subnet_exists():
            raise Refusal("SubNetworkDoesNotExist", f"The subnet {netuid} does not exist.")

    def _register_network(self, coldkey: str, params: dict) -> list[Event]:
        """Create the subnet owned by ``coldkey``; its hotkey becomes uid 0, as subtensor appends the owner."""
        if self.subnet_exists():
            raise Refusal(
                "SubnetLimitReached",
                f"The embedded chain holds one subnet (netuid {self.genesis.netuid}), and it exists already.",
            )
        hotkey = str(params["hotkey"])
        self._debit(coldkey, self.genesis.network_lock_rao, "NotEnoughBalanceToStake")
        self._meta_set(
            subnet_registered_at=self.head(),
            owner_coldkey=coldkey,
            owner_hotkey=hotkey,
            subnet_locked=self.genesis.network_lock_rao,
            last_epoch_block=self.head(),
        )
        self._append_neuron(hotkey, coldkey)
        return [("NetworkAdded", {"netuid": self.genesis.netuid, "mechid": 1})]

    def _start_call(self, coldkey: str, params: dict) -> None:
        if coldkey != self.subnet_owner()[0]:
            raise Refusal("NotSubnetOwner", f"{coldkey} does not own subnet {self.genesis.netuid}.")
        if self.subnet_started_at() is not None:
            raise Refusal("FirstEmissionBlockNumberAlreadySet", f"Subnet {self.genesis.netuid} is started already.")
        earliest = (self.subnet_registered_at() or 0) + self.genesis.start_call_delay
        if self.head() < earliest:
            raise Refusal(
                "StartCallNotReady",
                f"Subnet {self.genesis.netuid} can start at block {earliest}; the head is {self.head()}.",
            )
        self._meta_set(subnet_started_at=self.head() + 1, last_epoch_block=self.head())

    def _uid(self, hotkey: str) -> int | None:
        row = self.conn.execute("SELECT uid FROM neurons WHERE hotkey = ?", (hotkey,)).fetchone()
        return None if row is None else int(row[0])

    def _registered_uid(self, hotkey: str) -> int:
        uid = self._uid(hotkey)
        if uid is None:
            raise Refusal("HotKeyNotRegisteredInSubNet", f"The hotkey {hotkey} is not registered in this subnet.")
        return uid

    def _burned_register(self, coldkey: str, params: dict) -> None:
        hotkey = str(params["hotkey"])
        if self._uid(hotkey) is not None:
            raise Refusal("HotKeyAlreadyRegisteredInSubNet", "The hotkey is already registered in this subnet.")
        self._debit(coldkey, self.genesis.burn_rao, "NotEnoughBalanceToPayRegistration")
        self._append_neuron(hotkey, coldkey)

    def _append_neuron(self, hotkey: str, coldkey: str) -> None:
        uid = self._free_uid()
        self._clear_uid(uid)
        self.conn.execute(
            "INSERT INTO neurons (uid, hotkey, coldkey, registered_at) VALUES (?, ?, ?, ?)",
            (uid, hotkey, coldkey, self.head()),
        )

    def _free_uid(self) -> int:
        count = self.conn.execute("SELECT COUNT(*) FROM neurons").fetchone()[0]
        if count < self.genesis.max_uids:
            return int(count)
        immune_after = self.head() - self.genesis.immunity_period
        row = self.conn.execute(
            "SELECT uid FROM neurons WHERE registered_at < ? ORDER BY emission, registered_at, uid LIMIT 1",
            (immune_after,),
        ).fetchone()
        if row is None:
            raise Refusal("NoNeuronIdAvailable", "All uids are immune to deregistration; no uid is available.")
        return int(row[0])

    def _clear_uid(self, uid: int) -> None:
        self.conn.execute("DELETE FROM neurons WHERE uid = ?", (uid,))
        self.conn.execute("DELETE FROM weights WHERE src = ? OR dst = ?", (uid, uid))
        self.conn.execute("DELETE FROM bonds WHERE src = ? OR dst = ?", (uid, uid))

    def _add_stake(self, coldkey: str, params: dict) -> None:
        hotkey, amount = str(params["hotkey"]), int(params["amount_staked"])
        uid = self._uid(hotkey)
        if uid is None:
            raise Refusal("HotKeyAccountNotExists", f"The hotkey {hotkey} is not registered on this subnet.")
        if self.subnet_started_at() is None:
            raise Refusal(
                "SubtokenDisabled", "SubToken disabled now: the subnet's owner has not called start_call yet."
            )
        if amount < self.genesis.min_stake_rao:
            raise Refusal(
                "AmountTooLow", f"Stake amount {amount} rao is below the minimum {self.genesis.min_stake_rao}."
            )
        self._debit(coldkey, amount, "NotEnoughBalanceToStake")
        self.conn.execute("UPDATE neurons SET stake = stake + ? WHERE uid = ?", (amount, uid))

    def _serve_axon(self, hotkey: str, params: dict) -> None:
        uid = self._uid(hotkey)
        if uid is None:
            raise Refusal("HotKeyNotRegisteredInNetwork", f"The hotkey {hotkey} is not registered on this subnet.")
        port, ip_type = int(params["port"]), int(params["ip_type"])
        if ip_type not in (4, 6):
            raise Refusal("InvalidIpType", f"Invalid ip type {ip_type}: only 4 and 6 exist.")
        if not 0 < port < 65_536:
            raise Refusal("InvalidPort", f"Invalid port {port}.")
        self.conn.execute(
            "UPDATE neurons SET axon_ip = ?, axon_port = ?, axon_ip_type = ?, axon_version = ?, "
            "axon_protocol = ?, axon_block = ? WHERE uid = ?",
            (str(int(params["ip"])), port, ip_type, int(params["version"]), int(params["protocol"]), self.head(), uid),
        )

    def _set_weights(self, hotkey: str, params: dict) -> None:
        if int(params.get("mecid", 0)) != 0:
            raise Refusal("MechanismDoesNotExist", "The embedded subnet has one mechanism (0).")
        uids, values = [int(u) for u in params["dests"]], [int(v) for v in params["weights"]]
        uid = self._registered_uid(hotkey)
        row = self.conn.execute("SELECT permit, last_update, stake FROM neurons WHERE uid = ?", (uid,)).fetchone()
        permit, last_update = bool(row[0]), int(row[1])
        self._check_weights(uid, permit, last_update, uids, values, int(params.get("version_key", 0)))
        self.conn.execute("DELETE FROM weights WHERE src = ?", (uid,))
        self.conn.executemany(
            "INSERT INTO weights (src, dst, value) VALUES (?, ?, ?)",
            [(uid, dst, v) for dst, v in zip(uids, _max_upscale(values)) if v > 0],
        )
        self.conn.execute("UPDATE neurons SET last_update = ? WHERE uid = ?", (self.head(), uid))

    def _check_weights(
        self, uid: int, permit: bool, last_update: int, uids: list[int], values: list[int], version: int
    ) -> None:
        g = self.genesis
        if len(uids) != len(values):
            raise Refusal("WeightVecNotEqualSize", "The uids and weights vectors differ in length.")
        if version < g.weights_version:
            raise Refusal("IncorrectWeightVersionKey", f"Weights version key {version} is below {g.weights_version}.")
        self_weight = uids == [uid]
        if not permit and not self_weight:
            raise Refusal("NeuronNoValidatorPermit", f"uid {uid} has no validator permit on this subnet.")
        since = self.head() - last_update
        if last_update > 0 and since < g.weights_rate_limit:
            raise Refusal(
                "SettingWeightsTooFast",
                f"Weights were set {since} blocks ago; the rate limit is {g.weights_rate_limit} blocks.",
            )
        if len(set(uids)) != len(uids):
            raise Refusal("DuplicateUids", "The uids vector has duplicates.")
        count = self.conn.execute("SELECT COUNT(*) FROM neurons").fetchone()[0]
        if any(u < 0 or u >= count for u in uids):
            raise Refusal("UidVecContainInvalidOne", f"A uid is not registered (subnet has {count} uids).")
        if not self_weight and len(uids) < min(g.min_allowed_weights, count):
            raise Refusal("WeightVecLengthIsLow", f"At least {g.min_allowed_weights} weights are required.")
        total = sum(values)
        if not self_weight and total and max(values) * U16_MAX > g.max_weight_limit * total:
            raise Refusal("MaxWeightExceeded", "A weight exceeds the subnet's max_weight_limit.")

    # -- the epoch ------------------------------------------------------------------------

    def _epoch(self, block: int, pot: int) -> None:
        neurons = self.conn.execute(
            "SELECT uid, stake, last_update, registered_at, permit FROM neurons ORDER BY uid"
        ).fetchall()
        last_epoch_block = self._meta_int("last_epoch_block") or block - self.genesis.tempo - 1
        self._meta_set(last_epoch_block=block, pending_emission=0)
        self._changed()
        if not neurons:
            self._meta_set(owner_emission=self._meta_int("owner_emission") + pot)
            return
        n = neurons[-1][0] + 1
        column = lambda i: np.array([row[i] for row in neurons], dtype=np.float64)  # noqa: E731
        inputs = EpochInputs(
            block=block,
            stake=column(1),
            weights=self._matrix("weights", n),
            bonds=self._matrix("bonds", n),
            last_update=column(2),
            registered_at=column(3),
            validator_permit=column(4).astype(bool),
            last_epoch_block=last_epoch_block,
            activity_cutoff=self.genesis.activity_cutoff,
            max_validators=self.genesis.max_validators,
        )
        result = run_epoch(inputs)
        servers, validators, owner = split_emission(pot, self.genesis.owner_cut, result)
        self._store_epoch(result, servers + validators)
        self._meta_set(owner_emission=self._meta_int("owner_emission") + owner, last_pot=pot, last_owner_share=owner)

    def _matrix(self, table: str, n: int) -> np.ndarray:
        m = np.zeros((n, n))
        rows = self.conn.execute(f"SELECT src, dst, value FROM {table}").fetchall()  # noqa: S608 - fixed names
        if rows:
            src, dst, value = (np.array(c) for c in zip(*rows))
            m[src.astype(int), dst.astype(int)] = value
        return m

    def _store_epoch(self, result, paid: np.ndarray) -> None:
        self.conn.executemany(
            "UPDATE neurons SET active = ?, permit = ?, consensus = ?, trust = ?, validator_trust = ?, "
            "incentive = ?, dividends = ?, emission = ?, stake = stake + ? WHERE uid = ?",
            [
                (
                    int(result.active[i]),
                    int(result.validator_permit[i]),
                    float(result.consensus[i]),
                    float(result.trust[i]),
                    float(result.validator_trust[i]),
                    float(result.incentive[i]),
                    float(result.dividends[i]),
                    int(paid[i]),
                    int(paid[i]),
                    i,
                )
                for i in range(len(paid))
            ],
        )
        self.conn.execute("DELETE FROM bonds")
        src, dst = np.nonzero(result.bonds)
        self.conn.executemany(
            "INSERT INTO bonds (src, dst, value) VALUES (?, ?, ?)",
            [(int(i), int(j), float(result.bonds[i, j])) for i, j in zip(src, dst)],
        )

    # -- reads ------------------------------------------------------------------------

    def neuron_rows(self) -> list[sqlite3.Row]:
        self.conn.row_factory = sqlite3.Row
        try:
            return self.conn.execute("SELECT * FROM neurons ORDER BY uid").fetchall()
        finally:
            self.conn.row_factory = None

    def weights_of(self, uid: int) -> list[tuple[int, int]]:
        return [
            tuple(r) for r in self.conn.execute("SELECT dst, value FROM weights WHERE src = ? ORDER BY dst", (uid,))
        ]


def meta_value(conn: sqlite3.Connection, key: str) -> str | None:
    """One value of the ``meta`` table (``head``, ``rpc_url``...), None when unset.

    ``fetchall`` runs the statement to its end, which ends its read transaction:
    a statement left mid-way would pin a long-lived connection to an old snapshot.
    """
    rows = conn.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchall()
    return rows[0][0] if rows else None


_CALLS = {
    "register_network": ChainState._register_network,
    "start_call": ChainState._start_call,
    "burned_register": ChainState._burned_register,
    "add_stake": ChainState._add_stake,
    "serve_axon": ChainState._serve_axon,
    "set_mechanism_weights": ChainState._set_weights,
}


def _max_upscale(values: Sequence[int]) -> list[int]:
    top = max(values, default=0)
    return [round(v * U16_MAX / top) for v in values] if top else list(values)
