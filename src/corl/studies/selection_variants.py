"""Variants of the label_free score's variety term, scored offline on recorded runs' validation points.

Every `selection.json` under the given folders (the studies' run folders: `python -m corl.studies.seeds
--out`) records, per validation point, the label-free scores and the validation accuracy. This rescores
the points with each variant of the variety term and prints the mean validation regret of the point each
variant chooses (best candidate's validation accuracy minus the chosen one's), the runs it loses more
than 5 points on, and where two variants choose differently. Validation accuracy only: no test split is
read, so a variant may be chosen from it.

Usage:
    python -m corl.studies.selection_variants runs/quickstart-seeds [more study folders]
"""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path

from corl.trainer import selection
from corl.trainer.scores import label_free_score, variety_kept


def entropy_kept(variety, reference) -> float:
    """The share of its answers' entropy (log of the effective number) the worst agent kept."""
    return min((math.log(v) / math.log(r) if r > 1 else 1.0) if v >= 1 else 0.0 for v, r in zip(variety, reference, strict=True))


def own_reference(variety, reference) -> float:
    """Every agent measured against its own most varied point (the rule before the cohort's bar)."""
    return min(v / r if r > 0 else 1.0 for v, r in zip(variety, reference, strict=True))


VARIANTS = {
    "shipped (variety kept)": variety_kept,
    "each agent's own reference": own_reference,
    "entropy kept": entropy_kept,
    "no variety term": lambda variety, reference: 1.0,
}


def choose(points: list[dict], kept) -> dict | None:
    """The label_free rule's choice (`corl.trainer.selection.choose`) with every point rescored by
    `label_free_score` with `kept` as its variety term; the reference as `point_scores` builds it."""
    rescored, seen = [], []
    for point in points:
        seen.append(point["variety"])
        reference = [max(column) for column in zip(*seen, strict=True)]
        rescored.append({**point, "label_free": label_free_score({**point, "variety_kept": kept(point["variety"], reference)})})
    return selection.choose(rescored, "label_free")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folders", nargs="+", type=Path)
    args = parser.parse_args()
    runs = {}
    for folder in args.folders:
        for path in sorted(folder.rglob("selection.json")):
            if any(part.startswith("best") for part in path.parent.relative_to(folder).parts):
                continue  # the copies inside published best*/ folders
            points = json.loads(path.read_text())["points"]
            if points and all(p.get("val_accuracy") is not None and p.get("variety") for p in points):
                runs[path] = points
    if not runs:
        raise SystemExit(f"no selection.json with validation accuracies under {', '.join(map(str, args.folders))}")
    print(f"{len(runs)} runs")
    chosen = {}
    for name, kept in VARIANTS.items():
        regrets = {}
        for path, points in runs.items():
            point = choose(points, kept)
            if point is not None:
                best = max(p["val_accuracy"] for p in points if p["candidate"] and not p.get("collapsed"))
                regrets[path] = (best - point["val_accuracy"], point["step"])
        chosen[name] = regrets
        worst = sorted(regrets.items(), key=lambda kv: -kv[1][0])[:3]
        print(
            f"{name:28s} mean regret {100 * sum(r for r, _ in regrets.values()) / len(regrets):.2f} points, "
            f"over 5 on {sum(r > 0.05 for r, _ in regrets.values())} runs; worst: "
            + ", ".join(f"{100 * r:.1f} ({path.parent})" for path, (r, _) in worst)
        )
    shipped = chosen["shipped (variety kept)"]
    for name, regrets in chosen.items():
        for path, (regret, step) in regrets.items():
            if path in shipped and shipped[path][1] != step:
                print(
                    f"  {name}: {path.parent} step {step} ({100 * regret:.1f}) where shipped chose step {shipped[path][1]} ({100 * shipped[path][0]:.1f})"
                )


if __name__ == "__main__":
    main()
