"""The files `corl grade` reads: a data file, a W&B table, or a folder of one tool's files.

Besides what `corl.data.rows.load_rows` reads (JSONL, JSON lists, Parquet, CSV, Hugging Face
datasets), two shapes other tools write:

- a **W&B table** (`*.table.json`, as `wandb.Table` is stored in a run's media or an artifact:
  an object with `columns` and `data`, the rows as lists), e.g. the `completions` table TRL's
  GRPOTrainer logs with `log_completions=True`;
- a **folder** of data files of one kind, read in name order, e.g. TRL's
  `OUTPUT_DIR/completions/completions_00010.parquet, ...` (one file per logged step).

Each row keeps where it came from ("FILE line 3" for JSONL and CSV, "FILE row 3" otherwise),
so that an error names it.
"""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

from corl.data.rows import LOCAL_SUFFIXES, DataError, load_rows
from corl.evaluation.grade import GradeError, Rows


def read_rows(source: str, warn=None) -> Rows:
    """Rows of a file, a W&B table or a folder of files (or a Hugging Face dataset), with their lines."""
    path = Path(source).expanduser()
    if path.is_dir():
        return _read_folder(source, path, warn)
    table = _wandb_table(path) if path.suffix.lower() == ".json" and path.is_file() else None
    if table is not None:
        return _rows_or_empty(source, table, [f"{source} row {i}" for i in range(len(table))])
    try:
        rows = load_rows(source)
    except DataError as err:
        raise GradeError(str(err)) from None
    return _rows_or_empty(source, rows, _where(source, path, len(rows)))


def _rows_or_empty(source: str, rows: list[dict], where: list[str]) -> Rows:
    if not rows:
        raise GradeError(f"{source}: no rows")
    return Rows(source, rows, where)


def _where(source: str, path: Path, n: int) -> list[str]:
    if path.suffix.lower() == ".jsonl":
        lines = [i for i, line in enumerate(path.read_bytes().split(b"\n"), 1) if line.strip()]
        return [f"{source} line {n}" for n in lines]
    if path.suffix.lower() == ".csv":
        return [f"{source} line {n}" for n in _csv_lines(path)]
    return [f"{source} row {i}" for i in range(n)]


def _csv_lines(path: Path) -> list[int]:
    """The line each CSV record starts on (a quoted field may span lines; blank lines are no records)."""
    reader = csv.reader(io.StringIO(path.read_text(encoding="utf-8"), newline=""))
    next(reader, None)  # the header
    starts, end = [], reader.line_num
    for record in reader:
        if record:
            starts.append(end + 1)
        end = reader.line_num
    return starts


def _wandb_table(path: Path) -> list[dict] | None:
    """A W&B table's rows ({"columns": [...], "data": [[...], ...]}), or None for any other JSON."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError):
        return None  # load_rows says what is wrong, with the line
    if not (isinstance(data, dict) and isinstance(data.get("columns"), list) and isinstance(data.get("data"), list)):
        return None
    columns = [str(c) for c in data["columns"]]
    for i, row in enumerate(data["data"]):
        if not isinstance(row, list) or len(row) != len(columns):
            raise GradeError(f"{path} row {i}: a W&B table row needs {len(columns)} values (columns: {', '.join(columns)})")
    return [dict(zip(columns, row)) for row in data["data"]]


def _read_folder(source: str, path: Path, warn) -> Rows:
    """Every data file of a folder, in name order: they must be of one kind (TRL's per-step completion files)."""
    files = sorted(p for p in path.iterdir() if p.is_file() and p.suffix.lower() in LOCAL_SUFFIXES)
    kinds = sorted({p.suffix.lower() for p in files})
    if not files:
        raise GradeError(f"{source}: a folder with no {'/'.join(LOCAL_SUFFIXES)} file in it; give a file")
    if len(kinds) > 1:
        raise GradeError(f"{source}: a folder of {', '.join(kinds)} files; give one file, or a folder of one kind")
    rows, where = [], []
    for file in files:
        part = read_rows(str(file))
        rows += part.rows
        where += part.where
    if warn is not None and len(files) > 1:
        warn(f"read {len(files)} files of {source} in name order ({files[0].name} ... {files[-1].name})")
    return Rows(source, rows, where)
