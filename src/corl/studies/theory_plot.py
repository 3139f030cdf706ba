"""The figure of `corl theory`: the ODE drifts, the phase portrait and the real-code runs."""

from __future__ import annotations

import numpy as np

from corl.studies.theory import SimSettings, sim_horizon
from corl.studies.theory_ode import integrate, ring_drift, self_drift


def plot_theory(report: dict, path: str) -> None:
    """Self-reward drift and the Co-RL phase portrait with the separatrix, as one PNG."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    sim = report["settings"]["sim"]
    k, eta = sim["k"], sim["lr"]
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(12, 5.2))

    p = np.linspace(0.0, 1.0, 201)
    for kk, style in ((k, "-"), (k + 1 if k % 2 else k - 1, "--")):
        ax1.plot(p, self_drift(p, kk, eta), style, label=f"ODE, K={kk}")
    for i, row in enumerate(report["self_grid"]["rows"]):
        colour = {"correct": "tab:green", "wrong": "tab:red"}.get(row["sim"], "tab:grey")
        label = "real code's end from p(0): green 1, red 0" if i == 0 else None
        ax1.scatter(row["p0"], 0.0, color=colour, zorder=3, label=label)
    ax1.axhline(0.0, color="black", lw=0.6)
    ax1.axvline(0.5, color="black", lw=0.6, ls=":")
    ax1.set(xlabel="p (probability of the correct answer)", ylabel="dp/dt")
    ax1.set_title("Self-reward (Prop. 2): p = 1/2 repels")
    ax1.legend(loc="upper left", fontsize=8)

    grid = np.linspace(0.0, 1.0, 25)
    pa, pb = np.meshgrid(grid, grid)
    field_ = ring_drift(np.stack([pa, pb], -1), k, eta)
    ax2.streamplot(pa, pb, field_[..., 0], field_[..., 1], color="0.75", density=1.1, linewidth=0.7)
    ax2.plot([0, 1], [1, 0], color="black", lw=1.5, label="separatrix $p_A + p_B = 1$")
    for row in report["peer_grid"]["rows"]:
        start = np.array([row["p_a"], row["p_b"]])
        traj = integrate(lambda x: ring_drift(x, k, eta), start, t_end=sim_horizon(SimSettings(**sim)), dt=0.5)
        colour = {"correct": "tab:green", "wrong": "tab:red"}.get(row["ode"], "tab:grey")
        ax2.plot(traj[:, 0], traj[:, 1], color=colour, lw=0.6, alpha=0.6)
        marker = {"correct": "^", "wrong": "v"}.get(row["sim"], "o")
        ax2.scatter(*start, marker=marker, color=colour, s=22, zorder=3)
    ax2.set(xlim=(0, 1), ylim=(0, 1), xlabel="$p_A$", ylabel="$p_B$", aspect="equal")
    ax2.set_title(f"Co-RL (Thm. 1), K={k}: ODE paths; marker = real code (^ correct, v wrong)", fontsize=9)
    ax2.legend(loc="lower left", fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
