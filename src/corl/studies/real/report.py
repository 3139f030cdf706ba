"""OUT/report.md of the real-model study: what was measured, whatever it is."""

from __future__ import annotations

from pathlib import Path

from corl.studies.real.weights import AGENTS


def _pct(x: float | None) -> str:
    return "—" if x is None else f"{100 * x:.1f}"


def write_report(out: Path, results: dict, claims: list[str]) -> None:
    opts = results["options"]
    lines = [
        "# The real-model study",
        "",
        f"SmolLM2-135M-Instruct and Gemma-3-270M (GGUF, dequantized to float32), one-digit arithmetic as bare "
        f"equations; every method {opts['steps']} steps x {opts['prompts_per_step']} prompts x K = "
        f"{opts['samples_per_prompt']}, lr {', '.join(f'{k} {v:g}' for k, v in opts['lr'].items())}, on unlabeled training prompts (GT-Reward alone given answers); "
        f"label-free selection on {opts['val_size']} validation problems; {opts['test_size']} test problems, "
        f"{opts['k_eval']} samples each.",
        "",
        "## Test accuracy (%), each method's label-free choice",
        "",
        "| method | " + " | ".join(f"{a} greedy | {a} avg@k" for a in AGENTS) + " | pooled maj |",
        "|---|" + "---|" * (2 * len(AGENTS) + 1),
    ]
    pools = results.get("pools", {})
    for method, by_agent in results.get("figures", {}).items():
        cells = []
        for a in AGENTS:
            f = by_agent.get(a, {})
            avg = next((v for k, v in f.items() if k.startswith("avg@")), None)
            cells += [_pct(f.get("greedy")), _pct(avg)]
        lines.append(f"| {method} | " + " | ".join(cells) + f" | {_pct(pools.get(method))} |")
    lines += ["", "## Claims (margin ± two paired standard errors over test problems)", ""]
    lines += [f"- {c}" for c in claims] or ["- none could be decided"]
    lines += ["", "## Error decoupling of the bases (test, one T=1 sample each; Cohen's kappa)", ""]
    lines += [f"- {p['pair']} ({p['kind']}): kappa {p['kappa']:.3f}" for p in results.get("decoupling", [])]
    if results.get("regime"):
        lines += ["", "## Theorem 1's regime on validation (bases' T=1 accuracy per type, and the pair's sum)", ""]
        regime = results["regime"]
        kinds = list(next(iter(regime["sampled_by_type"].values())))
        lines += ["| type | " + " | ".join(AGENTS) + " | sum |", "|---|" + "---|" * (len(AGENTS) + 1)]
        for t in kinds:
            row = [f"{regime['sampled_by_type'][a][t]:.2f}" for a in AGENTS]
            lines.append(f"| {t} | " + " | ".join(row) + f" | {sum(regime['sampled_by_type'][a][t] for a in AGENTS):.2f} |")
    lines += ["", "## Cost (2 CPU cores; each command's own CPU-seconds and peak resident memory)", ""]
    lines += ["| method | commands | CPU-s | peak RSS GiB | corl plan's peak GiB |", "|---|---|---|---|---|"]
    for method, entry in results.get("train", {}).items():
        cpu = sum(c["cpu_seconds"] for c in entry["commands"])
        peak = max(c["peak_rss_gib"] for c in entry["commands"])
        shown = " + ".join(
            ("train (Ctrl-C)" if c["interrupted"] else "train") + f" exit {c['exit_code']}" for c in entry["commands"]
        )
        lines.append(f"| {method} | {shown} | {cpu:.0f} | {peak:.2f} | {entry.get('plan') or '—'} |")
    for method, entry in results.get("eval", {}).items():
        c = entry["command"]
        lines.append(f"| eval {method} | exit {c['exit_code']} | {c['cpu_seconds']:.0f} | {c['peak_rss_gib']:.2f} | |")
    if results.get("selection"):
        lines += ["", "## What label-free selection chose (step; the truth rule's choice beside it)", ""]
        for method, chosen in results["selection"].items():
            free, truth = (chosen or {}).get("label_free") or {}, (chosen or {}).get("truth") or {}
            lines.append(f"- {method}: label_free step {free.get('step')}, truth step {truth.get('step')}")
    (out / "report.md").write_text("\n".join(lines) + "\n")
