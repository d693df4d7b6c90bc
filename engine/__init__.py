"""The engine under the neurons: the scheduler, the executor, simulated time, owned execution, the run report and evaluate (docs/architecture.md)."""
