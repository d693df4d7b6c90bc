"""The embedded chain's genesis: one subnet and the parameters it starts with."""

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

    def to_meta(self) -> dict[str, str]:
        return {key: repr(value) for key, value in asdict(self).items()}

    @classmethod
    def from_meta(cls, meta: dict[str, str]) -> Genesis:
        types = {f.name: f.type for f in fields(cls)}
        return cls(**{k: (float if types[k] == "float" else int)(v) for k, v in meta.items() if k in types})
