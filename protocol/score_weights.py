"""The weights of the composite score (docs/scoring.md). They are public so a miner can
plan for what the validator pays: ``scoring.composite`` computes with them, the
reference planner trades cost against latency with them."""

W_SUCCESS = 0.50
W_COST = 0.25
W_LATENCY = 0.15
W_RELIABILITY = 0.10
GATE = 0.7
"""S_cost and S_latency count only when S_success is strictly above this."""
