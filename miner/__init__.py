"""Miner side: the FastAPI app, auth layers, reference planners and reference tools."""
