"""`python -m corl.launch --standalone --nproc-per-node 2 -m corl train CONFIG`: torchrun, with
SIGTERM read as a preemption (corl.launch.torchrun)."""

import sys

from corl.launch.torchrun import main

sys.exit(main())
