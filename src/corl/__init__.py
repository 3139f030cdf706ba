"""corl: Co-RL, training language models to reason without labels by peer supervision."""

__version__ = "0.1.0"
