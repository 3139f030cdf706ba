"""corl: Co-RL, training language models to reason without labels by peer supervision."""

__version__ = "0.1.0"

from corl import _moved

_moved.install()  # the old paths of modules that moved in 0.2, for one release
