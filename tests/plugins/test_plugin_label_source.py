"""Recipe "Add a label source" (docs/architecture.md): one module outside corl
(tests/plugins/toy_labels.py) that weighs votes by per-sample metadata, named in `plugins:`,
trains a step."""

from __future__ import annotations

import math
from pathlib import Path

from corl.config import validate_config
from corl.labels import SampleInfo
from corl.trainer import CohortTrainer
from tests.helpers import tiny_config

PLUGINS = Path(__file__).parent


def test_confidence_weighs_votes(monkeypatch):
    monkeypatch.syspath_prepend(str(PLUGINS))
    from toy_labels import weighted_vote

    # "1" has two votes of mean log-prob -2 each: weight 2 e^-2 = 0.27; "2" one vote of mean
    # log-prob -0.1: e^-0.1 = 0.90 -> "2" wins against the plain majority. "3" is truncated: no vote.
    infos = [SampleInfo(-4.0, 2, False, 0.5), SampleInfo(-4.0, 2, False, 0.5), SampleInfo(-0.2, 2, False, 0.25)]
    infos.append(SampleInfo(-0.01, 2, True, 0.25))
    vote = weighted_vote(["1", "1", "2", "3"], ["1", "1", "2", "3"], infos)
    assert (vote.key, vote.count, vote.total) == ("2", 1, 4) and math.isclose(2 * math.exp(-2.0), 0.2707, abs_tol=1e-4)


def test_a_label_source_from_outside_trains_a_step(tiny_models, tiny_data, tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(str(PLUGINS))
    raw = tiny_config(tmp_path, tiny_models, tiny_data, cohort={"label_source": "confident_peer"})
    raw["plugins"] = ["toy_labels"]
    trainer = CohortTrainer(validate_config(raw))
    import toy_labels

    metrics = trainer.step(0)
    table = toy_labels.SEEN[-1]
    # the table it read carries every sample's metadata: [N][B][K], lengths as the metrics count them
    assert len(table.samples) == 2 and all(len(group) == 4 for agent in table.samples for group in agent)
    assert all(isinstance(info, SampleInfo) for agent in table.samples for group in agent for info in group)
    labels = toy_labels.confident_peer(table)
    for n, agent in trainer.agents.items():
        labeled = sum(label is not None for label in labels[n]) / len(labels[n])
        assert metrics[f"{agent.name}/labeled_fraction"] == labeled
    assert sum(metrics[f"{a.name}/optimizer_steps"] for a in trainer.agents.values()) >= 1
