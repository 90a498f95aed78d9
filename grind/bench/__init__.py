"""``make bench``: kernel throughput against references measured in the same run."""

import os

# Before the benchmarks import numpy: one BLAS thread (as the CLI,
# grind.cli.threads), unless the environment says otherwise.
for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")
