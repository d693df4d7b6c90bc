"""Validator side: the DAG executor, node runners, one validation step, weights."""
