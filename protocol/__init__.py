"""dagnet wire protocol: models, DataRef grammar, plan validation. Pure: no I/O."""
