"""What a W&B run has stored: the rows of its offline transaction logs (RUN/wandb/offline-run-*/run-<id>.wandb).

W&B's service writes every row it receives to that log (what `wandb sync` uploads); a row the
training process handed to `wandb.log` just before a SIGKILL may never get there. A resume
asks this module (offline) or the W&B run's summary (online) which rows W&B holds, and sends
the others again. wandb 0.31 ships no reader for the log: it is a LevelDB-style log of protobuf
`Record`s, a 7-byte ":W&B" header and then 32 KiB blocks of chunks, each with a 7-byte header
(crc32, length, type FULL/FIRST/MIDDLE/LAST). A torn tail (the kill) ends the reading.
"""

from __future__ import annotations

import json
import struct
from collections.abc import Iterator
from pathlib import Path

BLOCK = 32768
FULL, FIRST, LAST = 1, 2, 4


def history_rows(path: Path) -> Iterator[dict]:
    """Every history row of one .wandb file, in order (a torn or unreadable tail ends it)."""
    from wandb.proto import wandb_internal_pb2

    try:
        data = path.read_bytes()
    except OSError:
        return
    if data[:4] != b":W&B":
        return
    pos, pending = 7, b""
    while pos + 7 <= len(data):
        left = BLOCK - pos % BLOCK
        if left < 7:  # a block's tail too short for a header is padding
            pos += left
            continue
        _, length, kind = struct.unpack("<IHB", data[pos : pos + 7])
        if kind == 0:  # zero padding up to the next block
            pos += 7 + length
            pos += BLOCK - pos % BLOCK if pos % BLOCK else 0
            continue
        if pos + 7 + length > len(data):
            return  # torn
        chunk = data[pos + 7 : pos + 7 + length]
        pos += 7 + length
        pending = chunk if kind in (FULL, FIRST) else pending + chunk
        if kind not in (FULL, LAST):
            continue
        record = wandb_internal_pb2.Record()
        try:
            record.ParseFromString(pending)
        except Exception:  # a damaged record: what follows cannot be trusted
            return
        if record.WhichOneof("record_type") == "history":
            row = {}
            for item in record.history.item:
                try:
                    row[item.key or "/".join(item.nested_key)] = json.loads(item.value_json)
                except ValueError:
                    continue
            yield row


def stored_offline(run_dir: Path, run_id: str, key: str) -> int | None:
    """The highest `key` (corl's row number) in any offline segment of W&B run `run_id`; None where none holds it."""
    found = [
        row[key]
        for path in sorted((Path(run_dir) / "wandb").glob(f"offline-run-*-{run_id}/run-{run_id}.wandb"))
        for row in history_rows(path)
        if isinstance(row.get(key), (int, float))
    ]
    return int(max(found)) if found else None
