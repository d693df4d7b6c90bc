"""The validator neuron: its loop and state, the signed miner client, remote runners, providers, adapters and routing, sampling, one validation step; it runs plans through :mod:`engine`."""
