"""logging.log_completions: every completion a step trained on, with what the step made of it.

    RUN/completions/step_000012.jsonl     one row per completion of step 12 (steps count from 1)

A row: `step`, `agent`, `id` (the problem's), `sample` (0..K-1), `prompt` (as the agent's engine
received it), `completion`, `extracted_answer` (None: no answer, or a truncated completion under
cohort.truncated_answers: drop), `label` (the answer its label source gave it; None: unlabeled)
and `label_agreement` (the label's vote share), `reward`, `advantage` (GRPO's, from the step's
rewards), `truncated`, and `gold` where the training data has answers (a diagnostic: no reward
reads it). With W&B on, the same rows go to a W&B table `completions`, TRL's name and columns
(step, prompt, completion, reward, advantage) plus the others. `corl grade FILE` grades a step's
file against its gold answers, agent by agent (its format told from the columns: --format corl).

Each step's file is written whole (a temporary name, then a rename). A resumed run removes the
files of the steps after its checkpoint (the interrupted run's, which it redoes), and sends W&B
no table of a step W&B holds already.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from corl.grpo import group_advantages

FOLDER = "completions"
STEP_KEY = "corl/completions_step"  # hidden in W&B: the step of a completions table, what a resume compares


def step_file(run_dir: str | Path, step: int) -> Path:
    """The file of step `step`'s completions (steps count from 1)."""
    return Path(run_dir) / FOLDER / f"step_{step:06d}.jsonl"


def agent_rows(
    step: int, agent: str, problems, prompts, texts, answers, labels, rewards, scale: str, truncated, gold
) -> list[dict]:
    """One agent's rows of a step, prompt by prompt and sample by sample: `problems` and `prompts` [B]
    (this process's), `texts` [B*K] its completions, `answers` [B] its K answers each, `labels` [B]
    its votes (None: unlabeled), `rewards` [B, K], `scale` grpo.scale_rewards, `truncated` [B*K]
    bool, `gold` id -> answer (empty for unlabeled data)."""
    k = rewards.shape[1]
    advantages = group_advantages(rewards.float(), scale)  # [B, K], as the update computes them
    rows = []
    for b, problem in enumerate(problems):
        vote = labels[b]
        for j in range(k):
            i = b * k + j
            row = {
                "step": step,
                "agent": agent,
                "id": problem.id,
                "sample": j,
                "prompt": getattr(prompts[b], "text", prompts[b]),  # an image prompt: its text
                "completion": texts[i],
                "extracted_answer": answers[b][j],
                "label": vote.answer if vote is not None else None,
                "label_agreement": vote.agreement if vote is not None else None,
                "reward": float(rewards[b, j]),
                "advantage": float(advantages[b, j]),
                "truncated": bool(truncated[i]),
            }
            if gold:
                row["gold"] = gold.get(problem.id)
            rows.append(row)
    return rows


def gather_rows(exchange, rows: dict[int, list[dict]], positions: list[int], k: int) -> list[dict]:
    """Every process's rows (a collective: every process calls it), in the order of the agents, then of
    the batch's prompts and samples. `rows`: this process's, by agent index; `positions`: its prompts'."""
    tagged = [(n, positions[i // k], i % k, row) for n, agent in rows.items() for i, row in enumerate(agent)]
    everyone = [entry for part in exchange.all_gather(tagged) for entry in part]
    return [row for *_, row in sorted(everyone, key=lambda entry: entry[:3])]


class CompletionsLog:
    """Writes a step's completion rows every `every` steps; on the main process only."""

    def __init__(self, run_dir: str | Path, every: int, first_step: int, wandb: bool):
        """`first_step`: the first step this run does (steps count from 1); files from it on are removed."""
        self.folder = Path(run_dir) / FOLDER
        self.every = every
        self.wandb = wandb
        self._wandb_holds: int | None = None  # the last step whose table W&B has (asked once, on the first table)
        for path in self.folder.glob("step_*.jsonl") if self.folder.is_dir() else []:
            if _step_of(path) is not None and _step_of(path) >= first_step:
                path.unlink()

    def wants(self, step: int) -> bool:
        return step % self.every == 0

    def write(self, step: int, rows: list[dict]) -> Path:
        path = step_file(self.folder.parent, step)
        self.folder.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        try:
            with tmp.open("w", encoding="utf-8") as f:
                f.writelines(json.dumps(row, ensure_ascii=False) + "\n" for row in rows)
            os.replace(tmp, path)
        finally:
            tmp.unlink(missing_ok=True)
        if self.wandb:
            self._send_table(step, rows)
        return path

    def _send_table(self, step: int, rows: list[dict]) -> None:
        import wandb

        run = wandb.run
        if run is None:
            return
        if self._wandb_holds is None:
            self._wandb_holds = _tables_held(run, self.folder.parent)
        if step <= self._wandb_holds:
            return  # a resumed run redoing a step whose table W&B has
        columns = list(rows[0]) if rows else ["step", "prompt", "completion", "reward", "advantage"]
        table = wandb.Table(columns=columns, data=[[row.get(c) for c in columns] for row in rows])
        run.log({"step": step, STEP_KEY: step, "completions": table})
        self._wandb_holds = step


def _tables_held(run, run_dir: Path) -> int:
    """The last step whose completions table this W&B run holds (0: none)."""
    if run.offline:
        from corl.tracking.wandb_log import stored_offline

        found = stored_offline(run_dir, run.id, STEP_KEY)
    else:
        found = run.summary.get(STEP_KEY)
    return int(found) if found is not None else 0


def _step_of(path: Path) -> int | None:
    try:
        return int(path.stem.removeprefix("step_"))
    except ValueError:
        return None
