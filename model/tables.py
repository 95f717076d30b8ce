"""Plain-text tables for the CLI: pure formatting of already formatted cells."""

from __future__ import annotations

from collections.abc import Callable, Sequence

_COLUMN_GAP = "  "


def _is_numeric(cell: str) -> bool:
    return cell[:1].isdigit()


def format_table(
    headers: Sequence[str], rows: Sequence[Sequence[str]], spell: Callable[[str], str] | None = None
) -> str:
    """Return ``rows`` under ``headers`` as aligned text lines; columns whose cells all start with a digit are
    right-aligned, others left-aligned. ``spell``, if given, rewrites every cell before the layout (e.g.
    ``lambda text: model.units.text_for_stream(text, sys.stdout)``), so that a terminal's ASCII spellings
    ("n -> inf" for "n → ∞") are aligned at their own widths."""
    if spell is not None:
        headers = [spell(header) for header in headers]
        rows = [[spell(cell) for cell in row] for row in rows]
    columns = list(zip(headers, *rows, strict=True)) if rows else [(header,) for header in headers]
    widths = [max(len(cell) for cell in column) for column in columns]
    right_aligned = [bool(rows) and all(_is_numeric(cell) for cell in column[1:]) for column in columns]

    def line(cells: Sequence[str]) -> str:
        padded = (
            cell.rjust(width) if right else cell.ljust(width)
            for cell, width, right in zip(cells, widths, right_aligned, strict=True)
        )
        return _COLUMN_GAP.join(padded).rstrip()

    rule = _COLUMN_GAP.join("-" * width for width in widths)
    return "\n".join([line(headers), rule, *(line(row) for row in rows)])


def format_markdown(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """Return ``rows`` under ``headers`` as a Markdown (GitHub) table, one line per row; a "|" inside a cell
    is escaped so that it stays in its cell."""

    def line(cells: Sequence[str]) -> str:
        return "| " + " | ".join(cell.replace("|", "\\|") for cell in cells) + " |"

    return "\n".join([line(headers), "|" + "---|" * len(headers), *(line(row) for row in rows)])
