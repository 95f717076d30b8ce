"""model.tables: aligned plain-text tables, laid out after the terminal's spellings."""

from model.tables import format_table
from model.units import text_for_encoding


def test_numeric_columns_right_aligned() -> None:
    table = format_table(["model", "kernels"], [["big", "387"], ["small", "31"]])
    assert table.splitlines() == ["model  kernels", "-----  -------", "big        387", "small       31"]


def test_format_table_lays_out_spelled_cells() -> None:
    def spell(text: str) -> str:
        return text_for_encoding(text, "ascii")

    table = format_table(["n", "n → ∞"], [["1", "∞"], ["2", "1,000"]], spell)
    assert table.splitlines() == ["n  n -> inf", "-  --------", "1  inf", "2  1,000"]
