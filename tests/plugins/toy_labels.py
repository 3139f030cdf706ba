"""A label source from outside corl (docs/architecture.md, "Add a label source").

`confident_peer`: agent n is labelled by its ring teacher n-1's samples, each vote weighed by
the sampler's confidence in it (exp of its mean token log-prob) and never by a truncated
sample: it reads the answers table's per-sample metadata (`AnswersTable.samples`).
"""

from __future__ import annotations

import math

from corl.labels import AnswersTable, LabelSourceSpec, Vote, register_label_source

SEEN: list[AnswersTable] = []  # the tables it labelled: evidence that the loop called it


def weighted_vote(keys, answers, samples) -> Vote | None:
    """[K] keys, answers and SampleInfo -> the key with the most confidence-weighted votes."""
    weight: dict[str, float] = {}
    first: dict[str, int] = {}
    for i, (key, info) in enumerate(zip(keys, samples)):
        if key is None or info.truncated:
            continue
        mean = info.logprob / max(info.length, 1)
        weight[key] = weight.get(key, 0.0) + (math.exp(mean) if math.isfinite(mean) else 1.0)
        first.setdefault(key, i)
    if not weight:
        return None
    winner = max(weight, key=lambda k: (weight[k], -first[k]))
    count = sum(k == winner for k in keys)
    return Vote(key=winner, answer=answers[first[winner]], count=count, total=len(keys))


def confident_peer(table: AnswersTable):
    SEEN.append(table)
    n_agents = table.num_agents
    return [
        [
            weighted_vote(
                table.keys[(n - 1) % n_agents][b], table.answers[(n - 1) % n_agents][b], table.samples[(n - 1) % n_agents][b]
            )
            for b in range(len(table.prompt_ids))
        ]
        for n in range(n_agents)
    ]


register_label_source(
    LabelSourceSpec(
        "confident_peer",
        build=lambda context: confident_peer,
        description="Co-RL with confidence-weighted votes: the ring teacher's votes weighed by exp(mean log-prob)",
        min_agents=2,
        teachers=lambda n, num: ((n - 1) % num,),
    )
)
