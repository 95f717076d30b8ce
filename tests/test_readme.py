"""README.md and docs/contract.md are part of the contract: the data-contract table and the test command must
match the code, and README stays short enough to read in a minute."""

from __future__ import annotations

import re
from pathlib import Path

from benchmarks.records import CONTRACT

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text(encoding="utf-8")
#: The data contract's page, which README links.
CONTRACT_DOC = (ROOT / "docs" / "contract.md").read_text(encoding="utf-8")


def test_every_contract_key_is_documented_in_the_contract_table() -> None:
    documented = set()
    for line in CONTRACT_DOC.splitlines():
        if line.startswith("| `"):
            documented.update(re.findall(r"`([a-z_0-9]+)`", line.split("|")[1]))
    assert set(CONTRACT) <= documented, f"undocumented extra_info keys: {sorted(set(CONTRACT) - documented)}"


def test_readme_opens_with_the_two_commands_and_ci_runs_its_test_command() -> None:
    block = README.split("```bash", 1)[1].split("```", 1)[0]
    commands = [line for line in block.splitlines() if line and not line.startswith("#")]
    assert len(commands) == 2
    main_job, tests = commands
    assert "pytest benchmarks --benchmark-only" in main_job and "python -m analysis report" in main_job
    test_command = tests.rsplit("&& ", 1)[1]
    assert test_command in (ROOT / ".ci" / "run").read_text(encoding="utf-8")


def test_readme_is_read_in_a_minute_and_links_every_page_of_docs() -> None:
    assert len(README.splitlines()) <= 200
    for page in sorted((ROOT / "docs").glob("*.md")):
        assert f"](docs/{page.name})" in README, page.name
