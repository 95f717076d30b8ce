"""launchbench's analysis: saved pytest-benchmark runs -> tidy frames -> fits, model comparisons, plots."""
