"""The quickstart's checkpoint selection: per label-free method and agent, the test accuracy of
the last checkpoint, of the one `logging.select: label_free` chose (RUN/best/) and of the one
the validation accuracy would have chosen (RUN/best-truth/: a diagnostic, it reads answers).

Only the chosen checkpoints that differ from the last are evaluated, greedily (no T=1
samples): at most two extra greedy passes over the test split per agent.

`label_free` may choose no point: it never takes a collapsed one (one agent, one answer on
>= cohort.stop.collapse_share of the validation prompts; corl.trainer.selection), so a run whose
every point collapsed has no RUN/best/. Its entry is then {"checkpoint_step": None, "greedy":
None}, and the table says "none (collapsed)" instead of an accuracy.
"""

from __future__ import annotations

import json
import statistics
from collections.abc import Callable
from pathlib import Path

# the logging options of every label-free run of the quickstart (the validation split has answers)
SELECTION_LOGGING = {"select": "label_free", "select_also": ["truth"]}
RULES = ("last", "label_free", "truth")


def selection_logging(label_source: str) -> dict:
    """GT-Reward trains on the answers: selecting its checkpoint label-free would show nothing."""
    return {} if label_source == "truth" else dict(SELECTION_LOGGING)


def greedy_test_accuracy(model, tokenizer, test, opts, processor, prompts_for: Callable) -> float:
    from corl.config import RolloutConfig
    from corl.evaluation.evaluate import grade, sample_answers
    from corl.rollout import SamplingParams, build_engine

    problems, gold, _ = test
    engine = build_engine(RolloutConfig(engine=opts.engine), model, tokenizer, processor=processor)
    greedy, _ = sample_answers(engine, prompts_for(problems, processor), 1, SamplingParams(0.0, 1.0, opts.max_new_tokens))
    ok = [c[0] for c in grade(greedy, gold)]
    return sum(ok) / len(ok)


def evaluate_selected(run_dir: Path, agent: str, last_greedy: float, accuracy: Callable[[Path], float]) -> dict | None:
    """{rule: {"checkpoint_step", "greedy"}} for last, label_free and truth; `accuracy(folder)`
    evaluates an agent folder. None when the run recorded no selection."""
    path = Path(run_dir) / "selection.json"
    if not path.is_file():
        return None
    record = json.loads(path.read_text())
    final = record["chosen"]["last"]["checkpoint_step"]
    folders = {rule: name for name, rule in record["folders"].items()}
    out = {"last": {"checkpoint_step": final, "greedy": last_greedy}}
    for rule in ("label_free", "truth"):
        chosen = record["chosen"][rule]
        if rule not in folders:
            continue
        if chosen is None:  # label_free: every point collapsed (truth: no answers)
            out[rule] = {"checkpoint_step": None, "greedy": None}
            continue
        step = chosen["checkpoint_step"]
        greedy = last_greedy if step == final else accuracy(Path(run_dir) / folders[rule] / agent)
        out[rule] = {"checkpoint_step": step, "greedy": greedy}
    return out


def summarize_selection(runs: list[dict]) -> dict | None:
    """Over seeds: each rule's mean (and std) test accuracy and its chosen checkpoint steps, over
    the seeds where it chose one ("unchosen": the seeds where it chose none; mean None if all)."""
    selections = [r["selection"] for r in runs if r.get("selection")]
    if not selections:
        return None
    out = {}
    for rule in RULES:
        entries = [s[rule] for s in selections if rule in s]
        chosen = [e for e in entries if e["greedy"] is not None]
        if entries:
            values = [e["greedy"] for e in chosen]
            out[rule] = {
                "mean": statistics.fmean(values) if values else None,
                "std": statistics.pstdev(values) if len(values) > 1 else 0.0,
                "steps": [e["checkpoint_step"] for e in chosen],
                "unchosen": len(entries) - len(chosen),
            }
    return out


def selection_table(results: dict) -> str:
    """Markdown: per label-free method and agent, the test accuracy of each rule's checkpoint."""
    lines = [
        "| method | agent | last | label-free selected | truth selected (diagnostic) |",
        "|---|---|---|---|---|",
    ]
    for method, agents in results["methods"].items():
        for agent, e in agents.items():
            sel = e.get("selection")
            if not sel:
                continue
            cells = [_cell(sel.get(rule)) for rule in RULES]
            lines.append(f"| {method} | {agent} | " + " | ".join(cells) + " |")
    return "\n".join(lines) if len(lines) > 2 else ""


def _cell(entry: dict | None) -> str:
    if entry is None:
        return "-"
    if entry["mean"] is None:
        return "none (collapsed)"
    steps = ",".join(str(s) for s in entry["steps"])
    spread = f" ± {100 * entry['std']:.1f}" if entry["std"] else ""
    unchosen = f"; {entry['unchosen']} seed(s): none (collapsed)" if entry.get("unchosen") else ""
    return f"{100 * entry['mean']:.1f}{spread} (step {steps}{unchosen})"
