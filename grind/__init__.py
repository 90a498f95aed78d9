"""grind: unsupervised grammar induction with Bayesian probabilistic grammars."""

import os

# The numerical work is many small matrices (or grind's own nogil kernels,
# threaded with --jobs); BLAS threads only contend for the cores.  An
# explicit setting in the environment wins.
for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

__version__ = "0.1.0"
