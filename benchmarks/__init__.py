"""launchbench's measuring code: pytest-benchmark cases that record their coordinates in ``extra_info``."""
