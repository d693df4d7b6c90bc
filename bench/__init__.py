"""``dagnet bench``: one module per benchmark, each ``run_*`` (a JSON-able dict of
ratios and medians) plus ``render_*`` (the same dict as tables). docs/benchmarks.md
says what each measures."""
