"""The journal of finished rows and the all-or-nothing output write (format: see corl.studies.rephrase)."""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path


def text_sha(text: str) -> str:
    """Short content hash that ties a journal entry to the text it was made from."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def journal_path(output: Path) -> Path:
    return output.with_name(output.name + ".journal.jsonl")


@dataclass(frozen=True)
class JournalEntry:
    """One finished row: the rewrite and hashes of what it was made from."""

    source_sha: str
    instruction_sha: str
    model: str
    text: str


class RewriteJournal:
    """Append-only record of finished rows, one fsynced JSON line each (see module doc)."""

    def __init__(self, path: Path):
        self.path = Path(path)
        self.torn_lines = 0  # unreadable lines dropped when reading
        self._file = None

    def read(self) -> dict[str, JournalEntry]:
        """Entries by row id (the last one wins); cuts a torn tail off the file first."""
        if not self.path.exists():
            return {}
        data = self.path.read_bytes()
        end = data.rfind(b"\n") + 1
        if end < len(data):  # a crash mid-write left a line without its newline
            with self.path.open("r+b") as f:
                f.truncate(end)
                f.flush()
                os.fsync(f.fileno())
            self.torn_lines += 1
        entries: dict[str, JournalEntry] = {}
        for line in data[:end].splitlines():
            if not line.strip():
                continue
            try:
                rec = json.loads(line)
                entries[str(rec["id"])] = JournalEntry(rec["source_sha"], rec["instruction_sha"], rec["model"], rec["text"])
            except (ValueError, KeyError, TypeError):
                self.torn_lines += 1
        return entries

    def append(self, row_id, entry: JournalEntry) -> None:
        """Write one finished row durably: it survives a crash right after this returns."""
        if self._file is None:
            created = not self.path.exists()
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._file = self.path.open("a", encoding="utf-8")
            if created:
                _fsync_dir(self.path.parent)
        rec = {"id": row_id, "source_sha": entry.source_sha, "instruction_sha": entry.instruction_sha}
        rec |= {"model": entry.model, "text": entry.text}
        self._file.write(json.dumps(rec, ensure_ascii=False) + "\n")
        self._file.flush()
        os.fsync(self._file.fileno())

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None


def _fsync_dir(path: Path) -> None:
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:  # pragma: no cover - directories cannot be opened on Windows
        return
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _jsonable(value):
    """json.dumps fallback for values from Parquet/HF datasets (numpy scalars and arrays, dates)."""
    if hasattr(value, "tolist"):
        return value.tolist()
    if hasattr(value, "isoformat"):
        return value.isoformat()
    return str(value)


def write_rows_atomically(rows: Sequence[dict], output: Path) -> None:
    """Write JSONL rows to `output` all or nothing: temp file, fsync, rename."""
    tmp = output.with_name(output.name + ".tmp")
    with tmp.open("w", encoding="utf-8") as f:
        for row in rows:
            f.write(json.dumps(row, ensure_ascii=False, default=_jsonable) + "\n")
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, output)
    _fsync_dir(output.parent)
