"""The embedded chain's genesis: its one subnet's parameters, and whether that subnet exists from block 0."""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields

RAO_PER_TAO = 1_000_000_000


@dataclass(frozen=True, slots=True)
class Genesis:
    """Subnet parameters, named as subtensor names its hyperparameters.

    Defaults suit a development chain: short tempo, a weights rate limit shorter
    than a tempo, commit-reveal off, no serving rate limit, no stake threshold,
    and every coldkey endowed with ``endowment_tao`` the first time it is seen
    (as a local subtensor pre-funds its dev accounts).

    With ``subnet_at_genesis`` the subnet exists and is started from block 0 (no
    owner); without it the chain starts with no subnet, and ``register_network``
    creates it with these parameters (its owner then calls ``start_call`` after
    ``start_call_delay`` blocks), as on a fresh subtensor.
    """

    netuid: int = 1
    tempo: int = 100
    weights_rate_limit: int = 20
    immunity_period: int = 1000
    max_weight_limit: int = 65_535
    """u16: the largest share one uid may get is ``max_weight_limit / 65535``."""
    min_allowed_weights: int = 1
    activity_cutoff: int = 5_000
    max_uids: int = 256
    max_validators: int = 64
    weights_version: int = 0
    owner_cut: float = 0.18
    emission_per_block_rao: int = RAO_PER_TAO
    burn_rao: int = RAO_PER_TAO
    endowment_tao: int = 1_000_000
    min_stake_rao: int = 2_000_000
    block_time: float = 12.0
    subnet_at_genesis: bool = True
    network_lock_rao: int = 1_000 * RAO_PER_TAO
    """What ``register_network`` takes from the owner's coldkey."""
    start_call_delay: int = 10
    """Blocks between a subnet's registration and its ``start_call`` (a fast-blocks localnet's)."""

    def to_meta(self) -> dict[str, str]:
        return {key: repr(value) for key, value in asdict(self).items()}

    @classmethod
    def from_meta(cls, meta: dict[str, str]) -> Genesis:
        parse = {"float": float, "bool": lambda v: v == "True"}
        types = {f.name: str(f.type) for f in fields(cls)}  # a string already (postponed annotations)
        return cls(**{k: parse.get(types[k], int)(v) for k, v in meta.items() if k in types})
