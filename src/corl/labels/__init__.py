"""Where a prompt's label comes from: majority votes, the answers table, label sources.

Label sources are registered by name with a spec of what they need
(`corl.labels.registry`); a new one is a module that calls `register_label_source`,
imported below (or named in the config's `plugins`).
"""

from corl.labels import pooled, random_label, ring2, sources, star  # noqa: F401  (register the built-in label sources)
from corl.labels.registry import (
    LABEL_SOURCES,
    LabelContext,
    LabelSourceSpec,
    build_label_source,
    label_source_spec,
    register_label_source,
)
from corl.labels.sources import ema_labels, peer_labels, ring_teacher, self_labels, truth_labels
from corl.labels.vote import AnswersTable, Labels, LabelSource, SampleInfo, Vote, majority_vote, vote_shares

__all__ = [
    "LABEL_SOURCES",
    "AnswersTable",
    "LabelContext",
    "LabelSource",
    "LabelSourceSpec",
    "Labels",
    "SampleInfo",
    "Vote",
    "build_label_source",
    "ema_labels",
    "label_source_spec",
    "majority_vote",
    "vote_shares",
    "peer_labels",
    "register_label_source",
    "ring_teacher",
    "self_labels",
    "truth_labels",
]
