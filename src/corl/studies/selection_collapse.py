"""Does `logging.select: label_free` keep away from a collapse? A quickstart TTRL run pushed past its
peak (a high learning rate), validated every few steps, with the label-free and the truth rule side
by side; prints every validation point and the test accuracy of the checkpoint each rule chose.

Usage (the family is pretrained once and cached, as by `corl quickstart`):
    nice python -m corl.studies.selection_collapse                      # TTRL, qwen2-bpe, lr 3e-4, 40 steps
    nice python -m corl.studies.selection_collapse --method co-rl --families llama-char qwen2-bpe
    nice python -m corl.studies.selection_collapse --lr 1e-4 --steps 60 --eval-every 5 --out runs/selection_collapse

The run is the quickstart's own (`corl.studies.quickstart.run_config`: its data, prompt, budget)
with the learning rate and length changed; the test split is the quickstart's (200 problems).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import shutil
import time
from pathlib import Path

from corl.config import validate_config
from corl.models import load_agent_policy
from corl.studies.quickstart import prompts_for, run_config, task_split
from corl.studies.quickstart_methods import METHODS
from corl.studies.quickstart_options import QuickstartOptions
from corl.studies.quickstart_selection import greedy_test_accuracy
from corl.studies.tiny.pretrain import ensure_pretrained
from corl.trainer import CohortTrainer


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--method", default="ttrl", choices=["ttrl", "co-rl"])
    parser.add_argument("--families", nargs="+", default=["qwen2-bpe"])
    parser.add_argument("--lr", type=float, default=3e-4)
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--eval-every", type=int, default=5)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=Path("runs/selection_collapse"))
    args = parser.parse_args()

    opts = dataclasses.replace(
        QuickstartOptions(), lr=args.lr, steps=args.steps, eval_every=args.eval_every, out=args.out, progress=False
    )
    agents = [(name, ensure_pretrained(name), i) for i, name in enumerate(args.families)]
    run_dir = args.out / f"{args.method}-{'+'.join(args.families)}-lr{args.lr:g}-seed{args.seed}"
    shutil.rmtree(run_dir, ignore_errors=True)
    raw = run_config(args.method, METHODS[args.method], agents, opts, args.seed, run_dir)
    trainer = CohortTrainer(validate_config(raw, "selection_collapse"), run_dir)
    observe = trainer.selector.observe

    def keep_keys(step, keys, samples, accuracy):  # every point's vote keys, to try other scores offline
        with open(run_dir / "point_keys.jsonl", "a") as f:
            f.write(json.dumps({"step": step, "accuracy": accuracy, "keys": keys, "samples": samples}) + "\n")
        return observe(step, keys, samples, accuracy)

    trainer.selector.observe = keep_keys
    t0 = time.perf_counter()
    trainer.train()
    print(f"trained {args.steps} steps in {time.perf_counter() - t0:.0f} s")

    record = json.loads((run_dir / "selection.json").read_text())
    print("step  val_acc  agreement  self_agr  chance  label_free  top_share  collapsed")
    for p in record["points"]:
        cells = [p.get(k) for k in ("val_accuracy", "agreement", "self_agreement", "chance_agreement", "label_free")]
        text = "  ".join("   -   " if v is None else f"{v:7.3f}" for v in cells)
        print(f"{p['step']:4d}  {text}  {p['top_answer_share']:7.3f}  {p.get('collapsed')}")

    test = task_split(opts)
    folders = {rule: name for name, rule in record["folders"].items()}
    for rule in ("label_free", "truth"):
        chosen = record["chosen"][rule]
        if chosen is None:
            print(f"{rule}: no point chosen")
            continue
        accuracies = []
        for agent, _, _ in agents:
            model, tok, processor = load_agent_policy(str(run_dir / folders[rule] / agent))
            accuracies.append(greedy_test_accuracy(model, tok, test, opts, processor, prompts_for))
        point = next(p for p in record["points"] if p["step"] == chosen["step"])
        print(
            f"{rule:>10}: step {chosen['step']} (checkpoint {chosen['checkpoint_step']}), validation "
            f"{100 * point['val_accuracy']:.1f}%, greedy test {', '.join(f'{100 * a:.1f}%' for a in accuracies)}"
        )
    last = {
        a.name: greedy_test_accuracy(a.model, a.tokenizer, test, opts, a.processor, prompts_for) for a in trainer.agents.values()
    }
    print(f"      last: step {args.steps - 1}, greedy test " + ", ".join(f"{100 * v:.1f}%" for v in last.values()))


if __name__ == "__main__":
    main()
