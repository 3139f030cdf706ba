"""A synthetic image task: a number drawn in an image, arithmetic on it asked in the text.

Each problem shows a number x (1-9 at difficulty 1, 10-99 at 2, 100-999 at 3) drawn with PIL on a
canvas of random size, position and colours, and asks about it in the text:

    read    image "47", text "x=?"      x=47. \\boxed{47}
    plus    image "47", text "x+2=?"    x=47. 47+2=49. \\boxed{49}
    minus   image "47", text "x-3=?"    x=47. 47-3=44. \\boxed{44}

with b from 1 to 3, so the answer is hidden from a text-only reader. Splits are disjoint by *image*: a row's
split is a hash of its problem, its number and its rendering seed (20% test, 10%
validation, 70% train, like `corl.studies.tiny.task`), so every number is read in training and a
held-out row is always a drawing never trained on. (Splitting by problem alone would put
each one-digit "x=?" in a single split: a held-out digit would never be seen.) Rows of a
split are drawn from a `random.Random` seeded by (seed, split, difficulty): the same list,
images included, on every machine with the same Pillow.

Rows: {"id", "problem", "answer", "images": [PIL image], "solution", "type", "source": "vtiny"}
(corl's vision row shape, as `corl.vision.datasets` maps every dataset to);
`write_task` stores a split in the local dataset layout of `corl.vision.datasets`
(a JSONL next to an images/ folder).
"""

from __future__ import annotations

import hashlib
import json
import random
from collections.abc import Iterator, Mapping, Sequence
from functools import lru_cache
from itertools import islice
from pathlib import Path

from PIL import Image, ImageDraw, ImageFont

from corl.studies.tiny.task import SPLIT_SHARES, SPLITS, boxed

TYPES = ("read", "plus", "minus")
SOURCE = "vtiny"
# px: a one-digit canvas is ~40-70 px, so Qwen2-VL's native-resolution ViT sees it as ~6-20 merged
# tokens of 16x16 px (at 22 px it got 4, too coarse to learn to read; docs/vision.md section 5) and
# SigLIP's fixed 48x48 resize keeps the digit filling much of its 6x6 patches.
FONT_SIZE = 56
MARGIN = FONT_SIZE // 8  # the canvas's spacing unit around the number


@lru_cache(maxsize=4)
def _font(size: int) -> ImageFont.ImageFont:
    # Pillow's bundled font: no system fonts needed; scalable when FreeType is present.
    try:
        return ImageFont.load_default(size=size)
    except TypeError:  # Pillow < 10.1: bitmap font only
        return ImageFont.load_default()


def render_number(text: str, rng: random.Random) -> Image.Image:
    """`text` drawn at a random place on a canvas of random size and colours (deterministic in rng)."""
    font = _font(FONT_SIZE)
    left, top, right, bottom = font.getbbox(text)
    w, h = right - left, bottom - top
    # A tight canvas: the digits fill much of it, so the tiny towers see them at a readable scale.
    m = MARGIN
    width, height = rng.randint(w + 2 * m, w + 6 * m), rng.randint(h + 2 * m, h + 4 * m)
    background = tuple(rng.randint(210, 255) for _ in range(3))
    ink = tuple(rng.randint(0, 60) for _ in range(3))
    image = Image.new("RGB", (width, height), background)
    x, y = rng.randint(m, width - w - m), rng.randint(m, height - h - m)
    ImageDraw.Draw(image).text((x - left, y - top), text, fill=ink, font=font)
    return image


def split_of(key: str) -> str:
    h = int.from_bytes(hashlib.blake2b(key.encode(), digest_size=8).digest(), "big") / 2**64
    if h < SPLIT_SHARES["test"]:
        return "test"
    if h < SPLIT_SHARES["test"] + SPLIT_SHARES["validation"]:
        return "validation"
    return "train"


def _problem(rng: random.Random, kind: str, difficulty: int) -> tuple[int, str, list[str], int]:
    lo, hi = {1: (1, 9), 2: (10, 99), 3: (100, 999)}[difficulty]
    x = rng.randint(lo, hi)
    if kind == "read":
        return x, "x=?", [f"x={x}."], x
    # b of 1-3: the tiny VL models' 2-layer text halves learn those sums within their pretraining;
    # 9x9 tables they had not learnt after 600 mixed steps (docs/vision.md, section 5).
    b = rng.randint(1, 3)
    if kind == "plus":
        return x, f"x+{b}=?", [f"x={x}.", f"{x}+{b}={x + b}."], x + b
    return x, f"x-{b}=?", [f"x={x}.", f"{x}-{b}={x - b}."], x - b


def iter_problems(
    split: str, seed: int = 0, difficulty: int = 1, types: Sequence[str] = TYPES, weights: Mapping[str, float] | None = None
) -> Iterator[dict]:
    """An endless seeded stream of `split` rows (repeats possible); `weights`: relative frequency per
    type (default uniform over `types`: the stream every split was drawn with)."""
    if split not in SPLITS:
        raise ValueError(f"unknown split {split!r}; choose one of {', '.join(SPLITS)}")
    if difficulty not in (1, 2, 3):
        raise ValueError(f"difficulty must be 1, 2 or 3, got {difficulty!r}")
    unknown = [t for t in types if t not in TYPES]
    if unknown or not types:
        raise ValueError(f"unknown problem type(s) {unknown or types}; choose from {', '.join(TYPES)}")
    if weights is not None and (set(weights) - set(types) or not any(weights.get(t, 0) > 0 for t in types)):
        raise ValueError(f"mixture weights {dict(weights)} need positive weights over the types {', '.join(types)}")
    rng = random.Random(f"corl-vtiny/{seed}/{split}/{difficulty}")
    w = [float(weights.get(t, 0.0)) for t in types] if weights is not None else None
    i = 0
    while True:
        kind = rng.choice(list(types)) if w is None else rng.choices(list(types), weights=w)[0]
        x, problem, steps, value = _problem(rng, kind, difficulty)
        render_seed = rng.random()  # rendering draws from its own stream
        if split_of(f"{kind}/{x}/{problem}/{render_seed!r}") != split:
            continue
        yield {
            "id": f"{SOURCE}/{split}/{i}",
            "problem": problem,
            "answer": str(value),
            "images": [render_number(str(x), random.Random(render_seed))],
            "solution": " ".join([*steps, boxed(str(value))]),
            "type": kind,
            "source": SOURCE,
        }
        i += 1


def make_split(split: str, n: int, seed: int = 0, difficulty: int = 1, types: Sequence[str] = TYPES) -> list[dict]:
    """The first `n` rows of `split`'s stream, deterministic in the arguments.

    A (text, number) pair may come back with another rendering: at difficulty 1 a split has
    only a few dozen pairs, and a new canvas, place and colours make a new image to read.
    """
    return list(islice(iter_problems(split, seed, difficulty, types), n))


def bpe_corpus(rows: int = 3000) -> list[str]:
    """Texts a BPE tokenizer for this task trains on (prompt text + solution; fixed seed)."""
    return [row["problem"] + "\n" + row["solution"] for row in islice(iter_problems("train", seed=1), rows)]


def write_task(rows: Sequence[dict], path: str | Path) -> Path:
    """Rows as a JSONL with images saved as PNGs under `images/` beside it (paths relative to the file).

    `corl.vision.datasets.load_rows(path, "corl")` reads it back."""
    path = Path(path)
    (path.parent / "images").mkdir(parents=True, exist_ok=True)
    with path.open("w", encoding="utf-8") as f:
        for row in rows:
            names = []
            for j, image in enumerate(row["images"]):
                names.append(f"images/{row['id'].replace('/', '_')}-{j}.png")
                image.save(path.parent / names[-1])
            f.write(json.dumps({**{k: v for k, v in row.items() if k != "images"}, "images": names}) + "\n")
    return path
