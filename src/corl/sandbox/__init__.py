"""Run untrusted Python programs: own process, limits, temp dir, no network, minimal env.

    from corl.sandbox import SandboxPool, Limits, run_program
    run_program("print(1)").status            # Status.OK
    with SandboxPool(workers=4) as pool:
        results = pool.map(["print(1)", "1/0"])

`detect()` says which isolation this host gives (bwrap > unshare, the same walls; `none`
only when named, e.g. CORL_SANDBOX=none); see corl.sandbox.isolation for what each
contains, corl.sandbox.view for what a program sees, corl.sandbox.cgroups for the memory
bound on the program as a whole.
"""

from corl.sandbox.isolation import Isolation, SandboxUnavailable, detect
from corl.sandbox.limits import Limits
from corl.sandbox.pool import SandboxPool, close_default_pool, default_pool
from corl.sandbox.result import Result, Status
from corl.sandbox.runner import run_program

__all__ = [
    "Isolation",
    "Limits",
    "Result",
    "SandboxPool",
    "SandboxUnavailable",
    "Status",
    "close_default_pool",
    "default_pool",
    "detect",
    "run_program",
]
