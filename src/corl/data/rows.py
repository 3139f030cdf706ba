"""Datasets, prompts and batches.

Rows come from a local JSONL / JSON / Parquet / CSV file or a Hugging Face dataset name
(a local folder is refused by name, never handed to `datasets`).
A training row becomes a `Problem`: an id and the prompt text of each field the agents
read (data decoupling: agents may read different wordings of the same row). The ground
truth, when present, goes into a separate `AnswerKey` that only the `truth` label source
and the diagnostics receive: a `Problem` has no answer attribute to leak.
"""

from __future__ import annotations

import csv
import io
import json
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from corl.config.sections import DEFAULT_INSTRUCTION  # not corl.config: its suite section reads this module
from corl.registry import DATA_SOURCES

LOCAL_SUFFIXES = (".jsonl", ".json", ".parquet", ".csv")


class DataError(ValueError):
    """A dataset is missing, unreadable or has a malformed row; the message says where (rows count
    from 1: row N of a JSONL file without blank lines is its line N)."""


def _looks_local(source: str) -> bool:
    """A name only a local path can be: a file suffix, ./ ../ ~ /, a backslash, more than one
    slash (hub datasets are "name" or "org/name"), or a first part that is a folder here."""
    if source.endswith(LOCAL_SUFFIXES) or source.startswith((".", "/", "~")) or "\\" in source or source.count("/") > 1:
        return True
    return "/" in source and Path(source.split("/")[0]).expanduser().is_dir()


def _nearest(path: Path) -> str:
    """Where a missing path stops existing: "'/data/math' has no 'train.jsonl'"."""
    full = Path(os.path.abspath(path))
    parent = next(p for p in full.parents if p.is_dir())  # the root at worst
    return f"{str(parent)!r} has no {full.relative_to(parent).parts[0]!r}"


def _refuse_folder(source: str, path: Path) -> DataError:
    """A folder is never handed to `datasets` (it would read whatever files it finds there)."""
    files = sorted(str(p) for p in path.iterdir() if p.suffix.lower() in LOCAL_SUFFIXES)[:5]
    found = f"data files in it: {', '.join(files)}" if files else f"no {'/'.join(LOCAL_SUFFIXES)} file in it"
    return DataError(f"dataset {source!r} is a folder ({found}); give the path of one file (a Hugging Face dataset by its name)")


# Named data sources, `<prefix>:<spec>` (the embedded task is `tiny:<split>[:<rows>]`): a
# loader registered under the prefix turns the spec into rows. Built-in sources register
# in `corl.data.sources`.
def register_data_source(prefix: str, loader: Callable[[str, str], list[dict]]) -> None:
    """`loader(spec, source)` returns the rows of `<prefix>:<spec>` (raising DataError on a bad spec)."""
    DATA_SOURCES.register(prefix, loader)


def _named_source(source: str) -> Callable[[str, str], list[dict]] | None:
    prefix, sep, _ = source.partition(":")
    if not sep or len(prefix) < 2 or prefix not in DATA_SOURCES:  # "C:\data" and plain names are not sources
        return None
    return DATA_SOURCES.get(prefix)


def load_rows(source: str, split: str | None = None) -> list[dict]:
    """Rows of a local file (by suffix), of a named source (`tiny:<split>[:<rows>]`, e.g.
    `tiny:train:2000`, the embedded synthetic task), or of a Hugging Face dataset (by name)."""
    loader = _named_source(source)
    if loader is not None:
        return loader(source.partition(":")[2], source)
    path = Path(source).expanduser()
    if path.is_file():
        return _read_local(path)
    if path.is_dir():
        raise _refuse_folder(source, path)
    if source in DATA_SOURCES:  # `--data tiny`: a built-in source without its split, not a hub name
        raise DataError(f"{source!r} is corl's built-in data source: give {source}:<split>[:<rows>], e.g. {source}:test:200")
    if _looks_local(source):
        first = source.split("/")[0]
        if first and not first.startswith((".", "~")) and "/" in source and Path(first).is_dir():
            why = f"read as a path: {first!r} is a folder here"  # "mydata/test": not the hub's "org/name"
        else:
            why = _nearest(path)
        raise DataError(f"dataset file {source!r} not found ({why})")
    try:
        import datasets

        ds = datasets.load_dataset(source, split=split or "train")
    except Exception as err:  # datasets raises many types; the user needs the name and the cause
        raise DataError(f"could not load Hugging Face dataset {source!r} (split {split or 'train'!r}): {err}") from err
    return [dict(r) for r in ds]


def _utf8(data: bytes, path: Path, lineno: int | None = None) -> str:
    """Decode UTF-8, or say which line (and byte) is not."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as err:
        if lineno is None:  # a whole file: count the lines before the bad byte
            lineno = data.count(b"\n", 0, err.start) + 1
            column = err.start - (data.rfind(b"\n", 0, err.start) + 1) + 1
        else:
            column = err.start + 1
        bad = data[err.start : err.end].hex(" ")
        raise DataError(
            f"dataset '{path}' line {lineno}: byte {column} (0x{bad}) is not UTF-8; "
            "re-encode the file as UTF-8 (e.g. iconv -f latin1 -t utf-8)"
        ) from None


def _read_local(path: Path) -> list[dict]:
    suffix = path.suffix.lower()
    if suffix == ".jsonl":
        rows = []
        with path.open("rb") as f:  # decoded line by line, so that a bad byte is reported with its line
            for lineno, raw in enumerate(f, 1):
                line = _utf8(raw, path, lineno)
                if not line.strip():
                    continue
                try:
                    row = json.loads(line)
                except json.JSONDecodeError as err:
                    raise DataError(f"dataset '{path}' line {lineno}: not valid JSON ({err.msg})") from None
                if not isinstance(row, dict):
                    raise DataError(f"dataset '{path}' line {lineno}: expected a JSON object, got {type(row).__name__}")
                rows.append(row)
        return rows
    if suffix == ".json":
        try:
            data = json.loads(_utf8(path.read_bytes(), path))
        except json.JSONDecodeError as err:
            raise DataError(f"dataset '{path}': not valid JSON ({err.msg} at line {err.lineno})") from None
        if not isinstance(data, list) or not all(isinstance(r, dict) for r in data):
            raise DataError(f"dataset '{path}': expected a JSON list of objects")
        return data
    if suffix == ".csv":
        return _read_csv(path)
    if suffix == ".parquet":
        return _read_parquet(path)
    raise DataError(f"dataset '{path}': unsupported file type {suffix!r} (use one of {', '.join(LOCAL_SUFFIXES)})")


def _read_csv(path: Path) -> list[dict]:
    """A CSV's rows, as csv.DictReader reads them; malformed quoting (a quote never closed swallows every
    line after it) is an error naming the line its record starts on."""
    reader = csv.reader(io.StringIO(_utf8(path.read_bytes(), path), newline=""), strict=True)
    rows: list[dict] = []
    header, start = None, 1
    try:
        while True:
            start = reader.line_num + 1
            record = next(reader)
            if not record:  # a blank line
                continue
            if header is None:
                header = record
                continue
            row = dict(zip(header, record))
            if len(record) > len(header):
                row[None] = record[len(header) :]
            row.update(dict.fromkeys(header[len(record) :]))
            rows.append(row)
    except StopIteration:
        return rows
    except csv.Error as err:
        raise DataError(
            f"dataset '{path}' line {start}: malformed CSV quoting ({err}); close the quote that opens a field, "
            'and write a quote inside a quoted field as two ("")'
        ) from None


def _read_parquet(path: Path) -> list[dict]:
    """A Parquet file's rows; a damaged or truncated file is one line naming it, not pyarrow's traceback."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        return pq.read_table(path).to_pylist()
    except (pa.ArrowException, OSError) as err:
        why = str(err).splitlines()[0] if str(err) else type(err).__name__
        raise DataError(
            f"dataset '{path}': not a readable Parquet file ({why}); write it again (e.g. DataFrame.to_parquet)"
        ) from None


@dataclass(frozen=True)
class Problem:
    """One unlabeled training row: its id and the prompt text per field (no answer)."""

    id: str
    texts: dict[str, str]  # field name -> problem text
    # What the task kind may read besides the text (a code problem's entry point and
    # public test inputs), copied from the fields its spec names; never the answer.
    inputs: dict = field(default_factory=dict)


AnswerKey = dict[str, str]  # row id -> ground-truth answer

# Problem.inputs keys the trainer itself reads: a row's images (a vision-language agent sees
# them with its text; data.image_field names the column) and a multiple-choice row's options.
IMAGES_INPUT = "images"
OPTIONS_INPUT = "options"


def _field(row: dict, field: str, source: str, index: int, option: str) -> str:
    if field not in row or row[field] is None:
        columns = ", ".join(sorted(row)) or "none"
        raise DataError(f"dataset '{source}' row {index}: field {field!r} is missing (columns: {columns}); set {option}")
    value = row[field]
    if not isinstance(value, (str, int, float)):
        raise DataError(f"dataset '{source}' row {index}: field {field!r} must be text, got {type(value).__name__}")
    return str(value)


def row_ids(rows: Sequence[dict], source: str, id_field: str = "id") -> list[str]:
    """Each row's id as a string (its index where the id field is absent); ids must be
    unique, because labels and other wordings of a problem are matched by id."""
    ids: list[str] = []
    seen: dict[str, int] = {}
    for i, row in enumerate(rows):
        rid = str(row[id_field]) if row.get(id_field) is not None else str(i)
        if rid in seen:
            raise DataError(f"dataset '{source}' row {i + 1}: id {rid!r} repeats row {seen[rid] + 1}; ids must be unique")
        seen[rid] = i
        ids.append(rid)
    return ids


def row_images(row: dict, image_field: str | None, source: str, index: int) -> list | None:
    """A row's images as a list (one image or several; None when the row has none).

    A relative path is taken from the dataset file's folder (rows outlive the working
    directory); PIL images and {"bytes", "path"} dicts pass as they are.
    """
    if not image_field or row.get(image_field) is None:
        return None
    value = row[image_field]
    images = list(value) if isinstance(value, (list, tuple)) else [value]
    base = Path(source).expanduser().parent if _looks_local(source) else None
    out = []
    for image in images:
        if isinstance(image, str):
            path = Path(image).expanduser()
            if not path.is_absolute() and base is not None:
                path = base / path
            if not path.is_file():
                raise DataError(f"dataset '{source}' row {index}: image {image!r} (field {image_field!r}) not found at {path}")
            image = str(path)
        out.append(image)
    return out


def build_problems(
    rows: Sequence[dict],
    source: str,
    prompt_fields: Sequence[str],
    id_field: str = "id",
    answer_field: str | None = None,
    input_fields: Sequence[str] = (),
    image_field: str | None = None,
    answers_optional: bool = False,
) -> tuple[list[Problem], AnswerKey]:
    """Split rows into label-free problems and a separate answer key.

    `answers_optional`: rows none of which has `answer_field` are unlabeled (an empty key); a
    column some rows have and others lack is still an error naming the first row without it.

    Rows without the id field get their row index as id. Ids must be unique: labels and
    data-decoupled wordings are matched by id. A row's images (`image_field`) go into
    Problem.inputs["images"], for the vision-language agents.
    """
    if not rows:
        raise DataError(f"dataset '{source}' has no rows")
    problems: list[Problem] = []
    key: AnswerKey = {}
    if answers_optional and answer_field and all(row.get(answer_field) is None for row in rows):
        answer_field = None
    for i, (pid, row) in enumerate(zip(row_ids(rows, source, id_field), rows)):
        number = i + 1  # rows count from 1, as a file's lines do
        texts = {f: _field(row, f, source, number, "data.prompt_field or agents[].prompt_field") for f in prompt_fields}
        inputs = {f: row[f] for f in input_fields if f in row}
        images = row_images(row, image_field, source, number)
        if images:
            inputs[IMAGES_INPUT] = images
        problems.append(Problem(id=pid, texts=texts, inputs=inputs))
        if answer_field:
            key[pid] = _field(row, answer_field, source, number, "data.answer_field (or null for unlabeled data)")
    return problems, key


def attach_wording(
    problems: list[Problem], rows: Sequence[dict], source: str, field: str, key: str, id_field: str = "id"
) -> list[Problem]:
    """Add another wording of the same problems (data decoupling) from rows aligned by id.

    Every problem id must be present in `rows`; a mismatch is refused, because labels
    cross agents by row id and a misaligned wording would teach the wrong problem.
    """
    by_id = {}
    for i, row in enumerate(rows):
        if row.get(id_field) is None:
            raise DataError(
                f"dataset '{source}' row {i + 1}: field {id_field!r} is missing; rows must align with data.train by id"
            )
        by_id[str(row[id_field])] = (i, row)
    missing = [p.id for p in problems if p.id not in by_id]
    if missing:
        raise DataError(
            f"dataset '{source}': {len(missing)} of {len(problems)} training ids have no row here "
            f"(e.g. {', '.join(repr(m) for m in missing[:3])}); its rows must align with data.train by {id_field!r}"
        )
    out = []
    for p in problems:
        i, row = by_id[p.id]
        out.append(
            Problem(id=p.id, texts={**p.texts, key: _field(row, field, source, i + 1, "agents[].prompt_field")}, inputs=p.inputs)
        )
    return out


@dataclass(frozen=True)
class PromptTemplate:
    """Turns a problem into the text a model is prompted with."""

    format: str = "{problem}\n{instruction}"
    instruction: str = DEFAULT_INSTRUCTION
    chat: bool = False

    def text(self, problem: str) -> str:
        """The problem in this template's format, before any chat template."""
        return self.format.format(problem=problem, instruction=self.instruction)

    def render(self, problem: str, tokenizer=None) -> str:
        text = self.text(problem)
        if self.chat:
            if tokenizer is None or not getattr(tokenizer, "chat_template", None):
                raise ValueError("chat_template is on but the tokenizer has no chat template; set chat_template: false")
            return tokenizer.apply_chat_template([{"role": "user", "content": text}], tokenize=False, add_generation_prompt=True)
        return text


def batch_indices(step: int, num_rows: int, batch_size: int, seed: int) -> list[int]:
    """Row indices of a step's batch: a pure function of (step, seed), so a resumed run
    draws exactly the batches the uninterrupted run would have drawn.

    Rows are visited in a fresh seeded permutation per epoch; a batch that crosses an
    epoch boundary takes the tail of one permutation and the head of the next.
    """
    out: list[int] = []
    start = step * batch_size
    while len(out) < batch_size:
        epoch, offset = divmod(start + len(out), num_rows)
        perm = np.random.default_rng([seed, epoch]).permutation(num_rows)
        take = min(batch_size - len(out), num_rows - offset)
        out.extend(int(i) for i in perm[offset : offset + take])
    return out
