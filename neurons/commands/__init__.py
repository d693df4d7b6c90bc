"""The `dagnet` commands, one module each.

A command module defines its typer command(s) and ``register(app)``, which adds them
to the root app; ``neurons.cli.COMMANDS`` lists the modules. Heavy imports (web
server, chain SDK, benchmarks) go inside the command functions.
"""
