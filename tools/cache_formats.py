"""Measure the two stores the cache of parsed runs could use (``analysis.cache``): Parquet files through
pyarrow, and a DuckDB database. The same rows (a storage's, loaded as ``python -m analysis compare`` loads
them) are written and read back into Arrow with each; the import of each library is timed in a fresh
interpreter, since a command pays it once per run.

    python tools/cache_formats.py /tmp/fleet --repeat 3

Prints seconds (best of ``--repeat``) and bytes on disk. Needs pyarrow and duckdb installed.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def _import_s(module: str, repeat: int) -> float:
    """The best of ``repeat`` wall times of importing ``module`` in an interpreter that has imported pandas
    (as every command has, and pandas imports pyarrow itself when it is installed), minus pandas' alone."""

    def best(code: str) -> float:
        times = []
        for _ in range(repeat):
            start = time.perf_counter()
            subprocess.run([sys.executable, "-c", code], check=True)
            times.append(time.perf_counter() - start)
        return min(times)

    return best(f"import pandas, {module}") - best("import pandas")


def _best(function: object, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        function()
        times.append(time.perf_counter() - start)
    return min(times)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("storage", type=Path, help="a run storage (folder of saved runs)")
    parser.add_argument("--repeat", type=int, default=3, help="runs of each (best kept)")
    args = parser.parse_args(argv)

    import duckdb
    import pyarrow as pa
    import pyarrow.parquet as pq

    from analysis.cache import _encode
    from analysis.fits import uses_samples
    from analysis.load import _append_columns, _joined, _read_batch, expand_paths, map_batches

    files, _ = expand_paths([args.storage])
    columns: dict[str, list] = {}
    count = 0
    for batch in map_batches(_read_batch, files, uses_samples, ()):
        count = _append_columns(columns, count, batch.columns)
    table = pa.table({key: _encode(_joined(parts))[0] for key, parts in columns.items()})
    size = f"{table.num_rows} rows, {table.num_columns} columns, {table.nbytes / 1e6:.1f} MB"
    print(f"{len(files)} files, {size}")
    print(
        f"import: pyarrow.parquet {_import_s('pyarrow.parquet', args.repeat):.3f} s, "
        f"duckdb {_import_s('duckdb', args.repeat):.3f} s"
    )
    with tempfile.TemporaryDirectory() as folder:
        parquet = Path(folder) / "rows.parquet"
        database = Path(folder) / "rows.duckdb"

        def write_parquet() -> None:
            pq.write_table(table, parquet, compression="lz4")

        def write_duckdb() -> None:
            database.unlink(missing_ok=True)
            with duckdb.connect(str(database)) as connection:
                connection.register("fresh", table)
                connection.execute("CREATE TABLE rows AS SELECT * FROM fresh")

        def read_parquet() -> object:
            return pq.read_table(parquet)

        def read_duckdb() -> object:
            with duckdb.connect(str(database), read_only=True) as connection:
                return connection.sql("SELECT * FROM rows").to_arrow_table()

        for name, write, read, path in [
            ("Parquet (pyarrow)", write_parquet, read_parquet, parquet),
            ("DuckDB", write_duckdb, read_duckdb, database),
        ]:
            write_s = _best(write, args.repeat)
            read_s = _best(read, args.repeat)
            disk = path.stat().st_size / 1e6
            print(f"{name}: write {write_s:.3f} s, read into Arrow {read_s:.3f} s, {disk:.1f} MB")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
