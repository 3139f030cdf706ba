"""Where agents live and how they meet: layout and placement, the exchange of the answers
table (with the heartbeat that names a missing peer), and one agent's data parallelism.

These pieces know nothing of the trainer; `corl.launch.run` puts them together with it.
"""

from corl.parallel.data_parallel import DataParallel
from corl.parallel.exchange import Exchange, Heartbeat, LauncherStopped, LocalExchange, PeerFailure, WorldExchange, collective
from corl.parallel.layout import Layout, Placement, plan_layout, under_torchrun

__all__ = [
    "DataParallel",
    "Exchange",
    "Heartbeat",
    "LauncherStopped",
    "Layout",
    "LocalExchange",
    "PeerFailure",
    "Placement",
    "WorldExchange",
    "collective",
    "plan_layout",
    "under_torchrun",
]
