"""Image math datasets as corl vision rows: open-r1 multimodal and MMR1 (training), MathVista,
MathVerse, MathVision and We-Math (evaluation).

No data ships with corl. Each dataset is read from a local file in its own published
fields, or from the hub where one is reachable (`load_hub_rows`):

    <dir>/<split>.jsonl      one record per line (a .json array works too), the dataset's own
    <dir>/images/...         field names; image fields hold paths relative to the file's folder

`export_split` writes that layout from any iterable of records (e.g. a hub split) so later
runs need no hub. Every record maps to a corl row:

    {"id", "problem", "answer", "images": [path | {"bytes","path"} | PIL], "options": [..] | None,
     "source", "extra": {...}}

`images` is a list (MMR1 rows carry several); `corl.vision.inputs.build_inputs` loads them
(long side capped at 1,024 px). `problem` has the dataset's image tags ("<image>",
"<image1>") removed: corl's chat template puts the images before the text. For multiple
choice, `options` lists the option texts in letter order, `answer` is the gold letter and
the problem text shows the options as "(A) ..." lines; grade with `corl.answers.choice`.
"""

from __future__ import annotations

import io
import json
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

from PIL import Image

from corl.answers.choice import LETTERS, option_letter

_IMAGE_TAG = re.compile(r"<image\d*>\s*")
_ANSWER_TAG = re.compile(r"<answer>(.*?)</answer>", re.DOTALL)
# "Choices:\nA:3\nB:5", "A. 3;B. 5", "(A) 3": a letter label, then its text up to the next label.
_OPTION = re.compile(r"(?:^|[\n;])\s*\(?([A-H])\s*[.:)]\s*(.+?)(?=(?:[\n;]\s*\(?[A-H]\s*[.:)])|$)", re.DOTALL)
_CHOICES_HEADER = re.compile(r"\n\s*(?:Choices|Options)\s*:?\s*\n", re.IGNORECASE)


@dataclass(frozen=True)
class VisionDataset:
    """Where a dataset lives on the hub and how its records map to corl rows."""

    name: str
    hub: str  # HF dataset id
    config: str | None
    split: str  # the split corl trains or evaluates on
    role: str  # "train" | "eval"
    to_row: Callable[[dict, int], dict]


def _images(value) -> list:
    """A record's image field as a list (None -> [], one value -> [value])."""
    if value is None or value == "":
        return []
    return list(value) if isinstance(value, (list, tuple)) else [value]


def _clean(text: str) -> str:
    return _IMAGE_TAG.sub("", str(text)).strip()


def with_options(question: str, options: list[str]) -> str:
    """The question followed by its options, one "(A) text" line each."""
    return question + "\nChoices:\n" + "\n".join(f"({LETTERS[i]}) {o}" for i, o in enumerate(options))


def options_in_text(text: str) -> tuple[str, list[str] | None]:
    """(question, options) of a question that lists "Choices:" A, B, ... in its text; (text, None) otherwise."""
    head = _CHOICES_HEADER.split(text, maxsplit=1)
    if len(head) != 2:
        return text, None
    found = _OPTION.findall(head[1])
    letters = [letter for letter, _ in found]
    if not letters or letters != list(LETTERS[: len(letters)]):  # labels must run A, B, C, ...
        return text, None
    return head[0].strip(), [t.strip() for _, t in found]


def _row(source: str, rid, problem: str, answer, images: list, options: list[str] | None, **extra) -> dict:
    return {
        "id": f"{source}/{rid}",
        "problem": with_options(problem, options) if options else problem,
        "answer": str(answer).strip(),
        "images": images,
        "options": options,
        "source": source,
        "extra": {k: v for k, v in extra.items() if v is not None},
    }


def _letter_of(answer: str, options: list[str]) -> str:
    """The gold letter: the answer itself when it is one, else the letter of the option it equals."""
    answer = str(answer).strip()
    if len(answer) == 1 and answer.upper() in LETTERS[: len(options)]:
        return answer.upper()
    if answer in options:
        return LETTERS[options.index(answer)]
    letter = option_letter(answer, options)  # "(C)", "C. 12", "12.0" for option "12"
    if letter is None:
        raise ValueError(f"answer {answer!r} is neither a letter nor one of the options {options}")
    return letter


def _train_choice(question: str, options: list[str] | None, answer: str) -> tuple[list[str] | None, str]:
    """Training data is machine-made: an answer that names no option makes the row free-form, not an error."""
    if not options:
        return None, str(answer).strip()
    try:
        return options, _letter_of(answer, options)
    except ValueError:
        return None, str(answer).strip()


# --- per-dataset mappings ----------------------------------------------------------------


def _open_r1(raw: dict, i: int) -> dict:
    # Fields: image, problem, solution ("<answer> ... </answer>" holds the final answer).
    solution = str(raw["solution"])
    m = _ANSWER_TAG.search(solution)
    question, options = options_in_text(_clean(raw["problem"]))
    options, answer = _train_choice(question, options, m.group(1) if m else solution)
    if options is None:
        question = _clean(raw["problem"])
    return _row("open-r1-mm", raw.get("id", i), question, answer, _images(raw.get("image")), options)


def _mmr1(raw: dict, i: int) -> dict:
    # Fields: images (list), problem (with "<image>" tags), answer.
    question, options = options_in_text(_clean(raw["problem"]))
    options, answer = _train_choice(question, options, raw["answer"])
    if options is None:
        question = _clean(raw["problem"])
    return _row("mmr1", raw.get("id", i), question, answer, _images(raw.get("images", raw.get("image"))), options)


def _mathvista(raw: dict, i: int) -> dict:
    # Fields: pid, question, image (path) / decoded_image, choices, answer (the choice's text for
    # multi_choice), question_type ("multi_choice" | "free_form"), answer_type, unit, precision.
    image = raw.get("decoded_image") or raw.get("image")
    options = [str(c) for c in raw["choices"]] if raw.get("question_type") == "multi_choice" and raw.get("choices") else None
    answer = _letter_of(raw["answer"], options) if options else raw["answer"]
    return _row(
        "mathvista", raw.get("pid", i), _clean(raw["question"]), answer, _images(image), options,
        answer_type=raw.get("answer_type"), unit=raw.get("unit") or None, precision=raw.get("precision"),
    )  # fmt: skip


def _mathverse(raw: dict, i: int) -> dict:
    # Fields: sample_index, problem_index, problem_version, question (choices inside the text
    # for "multi-choice"), image, answer (a letter for multi-choice), question_type, query_cot.
    question, options = options_in_text(_clean(raw["question"]))
    if raw.get("question_type") != "multi-choice":
        question, options = _clean(raw["question"]), None
    answer = _letter_of(raw["answer"], options) if options else raw["answer"]
    return _row(
        "mathverse", raw.get("sample_index", i), question, answer, _images(raw.get("image")), options,
        problem_version=raw.get("problem_version"), problem_index=raw.get("problem_index"),
    )  # fmt: skip


def _mathvision(raw: dict, i: int) -> dict:
    # Fields: id, question ("<image1>" tags), options (list, empty for free-form), image (path) /
    # decoded_image, answer (a letter when there are options), solution, level, subject.
    image = raw.get("decoded_image") or raw.get("image")
    options = [str(o) for o in raw["options"]] if raw.get("options") else None
    answer = _letter_of(raw["answer"], options) if options else raw["answer"]
    return _row(
        "mathvision", raw.get("id", i), _clean(raw["question"]), answer, _images(image), options,
        level=raw.get("level"), subject=raw.get("subject"),
    )  # fmt: skip


def _wemath(raw: dict, i: int) -> dict:
    # Fields: ID, split, knowledge concept, question, option ("A. 3;B. 5;...; E. No correct answer"),
    # answer (letter), image_path, key ("2steps_1", ...), question number.
    _, options = options_in_text("\nChoices:\n" + str(raw["option"]))
    if not options:
        raise ValueError(f"We-Math record {raw.get('ID')!r}: no options in {raw['option']!r}")
    return _row(
        "wemath", i, _clean(raw["question"]), _letter_of(raw["answer"], options), _images(raw.get("image_path")), options,
        wemath_id=raw.get("ID"), key=raw.get("key"), concept=raw.get("knowledge concept"),
    )  # fmt: skip


DATASETS: dict[str, VisionDataset] = {
    d.name: d
    for d in (
        VisionDataset("open-r1-mm", "lmms-lab/multimodal-open-r1-8k-verified", None, "train", "train", _open_r1),
        VisionDataset("mmr1", "MMR1/MMR1-Math-RL-Data-v0", None, "train", "train", _mmr1),
        VisionDataset("mathvista", "AI4Math/MathVista", None, "testmini", "eval", _mathvista),
        VisionDataset("mathverse", "AI4Math/MathVerse", "testmini", "testmini", "eval", _mathverse),
        VisionDataset("mathvision", "MathLLMs/MathVision", None, "test", "eval", _mathvision),
        VisionDataset("wemath", "We-Math/We-Math", None, "testmini", "eval", _wemath),
    )
}


def _corl(raw: dict, i: int) -> dict:
    """corl's own row shape (e.g. `corl.studies.tiny_vl.task.write_task`), images as a list of paths."""
    return {**raw, "id": raw.get("id", i), "images": _images(raw.get("images")), "options": raw.get("options")}


def _resolve(image, base_dir: Path):
    """A local relative path made absolute (rows outlive the working directory); other values as they are."""
    if isinstance(image, str) and not Path(image).is_absolute():
        return str(base_dir / image)
    if isinstance(image, dict) and not image.get("bytes") and image.get("path") and not Path(image["path"]).is_absolute():
        return {**image, "path": str(base_dir / image["path"])}
    return image


def rows_from_records(dataset: str, records: Iterable[dict], base_dir: str | Path | None = None) -> list[dict]:
    """corl rows of `dataset`'s records (a local file's, a hub split's); relative image paths against base_dir."""
    to_row = _corl if dataset == "corl" else _get(dataset).to_row
    rows = []
    for i, raw in enumerate(records):
        row = to_row(dict(raw), i)
        if base_dir is not None:
            row["images"] = [_resolve(x, Path(base_dir)) for x in row["images"]]
        rows.append(row)
    return rows


def load_rows(path: str | Path, dataset: str, limit: int | None = None) -> list[dict]:
    """corl rows of a local JSONL (or JSON array) file in `dataset`'s format ("corl" for corl rows)."""
    path = Path(path)
    text = path.read_text(encoding="utf-8")
    if path.suffix == ".json":
        records = json.loads(text)
    else:
        records = [json.loads(line) for line in text.splitlines() if line.strip()]
    return rows_from_records(dataset, records[:limit] if limit is not None else records, path.parent)


def load_hub_rows(dataset: str, split: str | None = None, limit: int | None = None) -> list[dict]:
    """corl rows from the hub (needs network access to it; image features arrive as PIL images)."""
    from datasets import load_dataset

    spec = _get(dataset)
    data = load_dataset(spec.hub, spec.config, split=split or spec.split)
    if limit is not None:
        data = data.select(range(min(limit, len(data))))
    return rows_from_records(dataset, data)


def export_split(records: Iterable[dict], out_dir: str | Path, split: str) -> Path:
    """Write records in the local layout: `<out_dir>/<split>.jsonl`, images under `<out_dir>/images/`.

    Every PIL image or {"bytes"} value in a record (top level or in a list) is saved as a PNG
    and replaced by its relative path; other fields are kept as they are.
    """
    out_dir = Path(out_dir)
    (out_dir / "images").mkdir(parents=True, exist_ok=True)
    path = out_dir / f"{split}.jsonl"

    def save(value, name: str):
        if isinstance(value, dict) and value.get("bytes"):
            value = Image.open(io.BytesIO(value["bytes"]))
        if isinstance(value, Image.Image):
            value.save(out_dir / name)
            return name
        return value

    with path.open("w", encoding="utf-8") as f:
        for i, raw in enumerate(records):
            record = {}
            for key, value in raw.items():
                if isinstance(value, list):
                    record[key] = [save(v, f"images/{split}-{i}-{key}-{j}.png") for j, v in enumerate(value)]
                else:
                    record[key] = save(value, f"images/{split}-{i}-{key}.png")
            f.write(json.dumps(record, ensure_ascii=False, default=str) + "\n")
    return path


def _get(dataset: str) -> VisionDataset:
    if dataset not in DATASETS:
        raise KeyError(f"unknown vision dataset {dataset!r}; choose one of {', '.join(DATASETS)} (or 'corl')")
    return DATASETS[dataset]
