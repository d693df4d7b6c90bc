"""Reference tools: what a node's ``action`` runs when it runs locally or on a miner.

- ``base``: the tool interface (``ToolSpec``, ``ToolRegistry``, ``ToolError``).
- ``registry.default_registry()``: every tool below under its action name.
- ``runner.LocalRunner``: a ``protocol.runner.NodeRunner`` over a registry.
- Tools: ``echo``, ``calculator``, ``transform`` (json_transform, csv_to_json,
  json_to_csv), ``text`` (text_transform), ``retrieval`` (search),
  ``python_exec`` (in the sandbox), ``llm`` (only when configured).

Nothing is imported here, so importing ``subnets.base`` stays cheap.
"""
