"""launchbench's analysis: saved pytest-benchmark runs -> tidy pandas frames -> fits, model comparisons, plots."""
