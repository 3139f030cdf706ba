"""Reports for people: a markdown page with tables and PNG plots, from a run's metrics.

The quickstart's report mirrors the paper: Table 1 (methods x agents, accuracy per
problem type), Figure 4 (validation accuracy, normalized reward std and completion
length over steps, per method) and Figure 5 (Co-RL's agreement between agents and the
accuracy of the exchanged pseudo-labels).
"""

from __future__ import annotations

import math
from pathlib import Path

from corl.studies.claims import describe
from corl.studies.quickstart_selection import selection_table
from corl.tracking.metrics import read_metrics


def _fmt(entry: dict, key: str = "mean") -> str:
    mean, std = entry["mean"], entry["std"]
    return f"{100 * mean:.1f}" + (f" ± {100 * std:.1f}" if std else "")


def results_table(results: dict) -> str:
    """Table 1: one row per (method, agent); greedy test accuracy per type and average, in %."""
    methods = results["methods"]
    types = sorted({t for m in methods.values() for a in m.values() for t in a["greedy_by_type"]})
    head = "| method | agent | " + " | ".join(types) + " | avg (greedy) | avg@4 (T=1) |"
    lines = [head, "|" + "---|" * (len(types) + 4)]
    for method, agents in methods.items():
        for agent, e in agents.items():
            cells = [_fmt(e["greedy_by_type"][t]) for t in types]
            lines.append(f"| {method} | {agent} | " + " | ".join(cells) + f" | **{_fmt(e['greedy'])}** | {_fmt(e['avg@4'])} |")
    return "\n".join(lines)


def regime_table(regime: dict) -> str:
    """The bases' sampled (T=1) validation accuracy per type, and every pair's per-type sum."""
    per_agent = regime["sampled_by_type"]
    types = sorted(next(iter(per_agent.values())))
    lines = ["| base | " + " | ".join(types) + " | avg@4 |", "|---|" + "---|" * (len(types) + 1)]
    for name, by in per_agent.items():
        lines.append(f"| {name} | " + " | ".join(f"{by[t]:.2f}" for t in types) + f" | {regime['sampled'][name]:.2f} |")
    for pair, by in regime["pair_sums"].items():
        lines.append(
            f"| sum {pair} | "
            + " | ".join(("**" if by[t] > 1 else "") + f"{by[t]:.2f}" + ("**" if by[t] > 1 else "") for t in types)
            + " | |"
        )
    return "\n".join(lines)


def theorem_table(claims: list[dict]) -> str:
    """Theorem 1's split: Co-RL's gain over TTRL on each side of p_A + p_B = 1, with its noise and a sign test."""
    lines = ["| split | side | problems | Co-RL - TTRL (points) | sign test (+ / -, p) |", "|---|---|---|---|---|"]
    for c in claims:
        if not c["claim"].startswith("Theorem 1:"):
            continue
        split = "per problem" if "per-problem" in c["claim"] else "per type"
        for side, label in (("above", "p_A + p_B > 1"), ("below", "p_A + p_B < 1")):
            e = c["numbers"].get(side)
            if e is None:
                lines.append(f"| {split} | {label} | 0 | - | - |")
                continue
            noise = f" ± {100 * e['noise']:.1f}" if e["noise"] is not None else ""
            lines.append(
                f"| {split} | {label} | {e['problems']} | {100 * e['gain']:+.1f}{noise} | "
                f"{e['positive']} / {e['negative']}, p = {e['p']:.3f} |"
            )
    return "\n".join(lines) if len(lines) > 2 else ""


def ensembles_table(ensembles: dict) -> str:
    """One row per method: the pooled majority of all its agents' T=1 samples on the test split."""
    lines = ["| method | pooled maj@k | k |", "|---|---|---|"]
    for method, e in ensembles.items():
        lines.append(f"| {method} | {_fmt(e['maj'])} | {e['k']} |")
    return "\n".join(lines)


def _numbers(numbers: dict) -> str:
    """A claim's numbers with floats at 3 decimals (the raw ones are in results.json)."""

    def short(v):
        if isinstance(v, float):
            return round(v, 3)
        if isinstance(v, dict):
            return {k: short(x) for k, x in v.items()}
        if isinstance(v, list):
            return [short(x) for x in v]
        return v

    return str(short(numbers))


def smoothed(ys: list[float], window: int) -> list[float]:
    """Trailing moving average over `window` points (fewer at the start)."""
    out, total = [], 0.0
    for i, y in enumerate(ys):
        total += y
        if i >= window:
            total -= ys[i - window]
        out.append(total / min(i + 1, window))
    return out


def diversity_table(pairs: list[dict]) -> str:
    lines = ["| pair | kind | acc A | acc B | kappa | c | w | u |", "|---|---|---|---|---|---|---|---|"]
    for p in sorted(pairs, key=lambda p: p["kappa"]):
        lines.append(
            f"| {p['a']} ~ {p['b']} | {p['kind']} | {p['accuracy_a']:.3f} | {p['accuracy_b']:.3f} | {p['kappa']:.3f} | "
            f"{p['c']:.3f} | {p['w']:.3f} | {p['u']:.3f} |"
        )
    return "\n".join(lines)


def _series(records: list[dict], key: str) -> tuple[list[int], list[float]]:
    xs, ys = [], []
    for r in records:
        v = r.get(key)
        if v is not None and not (isinstance(v, float) and math.isnan(v)):
            xs.append(r["step"])
            ys.append(v)
    return xs, ys


def _runs(results: dict) -> list[tuple[str, str, Path]]:
    """(method, agent, run_dir) of seed 0 of every trained method."""
    out = []
    for method, agents in results["methods"].items():
        for agent, e in agents.items():
            if e.get("run_dirs"):
                out.append((method, agent, Path(e["run_dirs"][0])))
    return out


def plot_dynamics(results: dict, path: Path) -> Path | None:
    """Figure 4: validation accuracy, normalized reward std and completion length per method."""
    runs = _runs(results)
    if not runs:
        return None
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 3, figsize=(15, 4))
    panels = [
        ("val", "val_accuracy", "validation accuracy (greedy)"),
        ("train", "reward_std_normalized", "reward std / first-step std"),
        ("train", "completion_length", "completion length (tokens)"),
    ]
    for ax, (kind, metric, title) in zip(axes, panels):
        for i, (method, agent, run) in enumerate(runs):
            xs, ys = _series(read_metrics(run, kind), f"{agent}/{metric}")
            if not xs:
                continue
            color = f"C{i % 10}"
            if kind == "val":  # a few points: as measured
                ax.plot(xs, ys, marker="o", ms=3, color=color, label=f"{method}: {agent}")
            else:  # a noisy point per step: the raw curve faint, a moving average over it
                ax.plot(xs, ys, color=color, alpha=0.2, lw=0.8)
                ax.plot(xs, smoothed(ys, max(1, len(ys) // 8)), color=color, lw=1.6, label=f"{method}: {agent}")
        ax.set_title(title)
        ax.set_xlabel("step")
        ax.grid(alpha=0.3)
    axes[0].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def plot_peer_signal(results: dict, path: Path) -> Path | None:
    """Figure 5: agreement between Co-RL agents and accuracy of the labels they exchanged."""
    agents = results["methods"].get("co-rl")
    if not agents:
        return None
    run = Path(next(iter(agents.values()))["run_dirs"][0])
    records = read_metrics(run, "train")
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    for key in sorted({k for r in records for k in r if k.startswith("agreement/")}):
        axes[0].plot(*_series(records, key), label=key.split("/", 1)[1])
    axes[0].set_title("agreement of majority answers")
    for agent in agents:
        axes[1].plot(*_series(records, f"{agent}/pseudo_label_accuracy"), label=f"labels given to {agent}")
        axes[1].plot(*_series(records, f"{agent}/majority_accuracy"), ls="--", label=f"{agent}'s own majority")
    axes[1].set_title("pseudo-label accuracy (diagnostic only)")
    for ax in axes:
        ax.set_xlabel("step")
        ax.set_ylim(-0.02, 1.02)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def write_report(results: dict, out: Path) -> Path:
    """`out/report.md` with the tables, the claims and the figures."""
    out = Path(out)
    fig4 = plot_dynamics(results, out / "dynamics.png")
    fig5 = plot_peer_signal(results, out / "peer_signal.png")
    opts = results["options"]
    lines = [
        "# corl quickstart",
        "",
        f"Cohort: {', '.join(results['families'])}. Every method: {opts['steps']} steps x {opts['prompts_per_step']} prompts x "
        f"K={opts['samples_per_prompt']} per agent, lr {opts['lr']}, {opts['seeds']} seed(s). Test: {opts['test_size']} held-out "
        f"problems. Wall time: {results.get('wall_time_s', 'see results.json')} s (cohort build {results['cohort_seconds']} s, "
        f"base evaluation {results.get('base_eval_seconds', '?')} s; CPU time {results.get('cpu_seconds', '?')} s).",
        "",
        f"Voting methods (TTRL, Co-RL, Co-rewarding-II) label a prompt only when at least {opts.get('min_agreement', 0):.0%} of "
        "the teacher's K answers agree (`cohort.min_agreement`); 0 would be the paper's plain majority. "
        "Greedy accuracy is the headline; avg@4 samples at T=1.",
        "",
        "## Test accuracy (%; the paper's Table 1)",
        "",
        results_table(results),
        "",
    ]
    selection = selection_table(results)
    if selection:
        lines += [
            "## Checkpoint selection without labels (test accuracy %)",
            "",
            "Each label-free run kept the checkpoint of the validation point with the best label-free score "
            "(`logging.select: label_free`: the agents' greedy agreement beyond chance, never a collapsed point; no answer "
            "read) and, as a diagnostic, the one the validation accuracy picks (`select_also: [truth]`).",
            "",
            selection,
            "",
        ]
    lines += [
        "## The bases before RL: Theorem 1's regime (validation split)",
        "",
        "Sampled (T=1) accuracy per problem type; Co-RL's peer labels beat self labels where a pair's sum exceeds 1 (bold).",
        "",
        regime_table(results["regime"]) if results.get("regime") else "(not measured)",
        "",
        "## Error decoupling before RL (the paper's Tables 6-7)",
        "",
        "kappa: Cohen's kappa on correctness; c: exactly one correct; w: both wrong with the same answer; u: at least one correct. "
        "'seed' pairs a model with a second T=1 sample of itself (same weights, another sampling seed): the stand-in "
        "for a seed-only peer, since a separately pretrained seed sibling would cost another pretraining "
        "(`corl diversity --models tiny:llama-char tiny:llama-char-seed1 ...` compares those).",
        "",
        diversity_table(results["diversity"]),
        "",
        "## The paper's expectations, as measured here",
        "",
    ]
    lines += [
        "Margin: the measured quantity minus the claim's threshold (positive = holds). ± is two standard errors over "
        "the test problems (paired; kappa: bootstrap); 'within noise' means the verdict could flip on another draw. "
        "'Outside the design': the claim's precondition failed before RL (a base with under 8 points to gain on "
        "validation; no problem type on one side of Theorem 1's line), so this run does not test it.",
        "",
    ]
    for claim in results["claims"]:
        lines.append(f"- {describe(claim)} — `{_numbers(claim['numbers'])}`")
    theorem = theorem_table(results["claims"])
    if theorem:
        lines += [
            "",
            "Theorem 1 where it predicts: Co-RL's greedy test gain over TTRL (agent by agent, averaged per problem, ± two "
            "standard errors over problems) on each side of p_A + p_B = 1, A an agent and B its Co-RL teacher, p their "
            "sampled accuracy before RL (per type: on validation; per problem: their T=1 samples of that test problem). "
            "The theorem predicts a gain above the line and none below.",
            "",
            theorem,
        ]
    if results.get("ensembles"):
        lines += ["", "## Budget-matched ensembles (the paper's Table 10)", "", ensembles_table(results["ensembles"])]
    if results.get("skipped"):
        lines += ["", "Skipped: " + "; ".join(results["skipped"])]
    if fig4:
        lines += ["", "## Training dynamics (the paper's Figure 4)", "", f"![dynamics]({fig4.name})"]
    if fig5:
        lines += ["", "## Co-RL's peer signal (the paper's Figure 5)", "", f"![peer signal]({fig5.name})"]
    path = out / "report.md"
    path.write_text("\n".join(lines) + "\n")
    return path
