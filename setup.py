"""Build grind's Cython chart kernels (csrc/*.pyx -> grind.kernels._cky, _dmv, _segment, _latent_tree, _latent_parse, _ln).

GRIND_KERNELS=cky builds only the named kernels (comma-separated).  Set GRIND_NATIVE=0 to build without -march=native (for a binary moved to
another machine); the default optimises for the building machine.
"""
import glob
import os

import numpy
from Cython.Build import cythonize
from setuptools import Extension, setup

native = os.environ.get("GRIND_NATIVE", "1") != "0"
cflags = ["-O3", "-ffp-contract=fast"] + (["-march=native"] if native else [])


#: the logistic-normal kernel's contiguous loops (exps, the sigma~^2 solves) run 8 doubles a vector where the
#: machine has AVX-512, as its lane-vector solvers do (GCC's default is 4); its sqrt and log set no errno
WIDE = ["-mprefer-vector-width=512", "-fno-math-errno"] if native else ["-fno-math-errno"]


def kernel(name):
    return Extension(
        f"grind.kernels._{name}",
        [f"csrc/{name}.pyx"],
        include_dirs=[numpy.get_include(), "csrc"],
        depends=sorted(glob.glob("csrc/*.pxd") + glob.glob("csrc/*.h")),   # rebuild when they change
        extra_compile_args=cflags + (WIDE if name == "ln" else []),
        define_macros=[("NPY_NO_DEPRECATED_API", "NPY_1_7_API_VERSION")],
    )


KERNELS = [k for k in os.environ.get("GRIND_KERNELS", "cky,dmv,segment,latent_tree,latent_parse,ln").split(",")
           if os.path.exists(f"csrc/{k}.pyx")]

setup(
    ext_modules=cythonize(
        [kernel(k) for k in KERNELS],
        compiler_directives={
            "language_level": 3,
            "boundscheck": False,
            "wraparound": False,
            "cdivision": True,
            "initializedcheck": False,
        },
    ),
)
