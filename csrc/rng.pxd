# grind's random number generator (csrc/rng.h), shared by the CKY and DMV
# kernels: xoshiro256** seeded by splitmix64.  Header-only (static inline C),
# so cimporting it needs no Python module at run time.
from libc.stdint cimport uint64_t


cdef extern from "rng.h" nogil:
    ctypedef struct grind_rng:
        uint64_t s[4]
    void grind_rng_seed(grind_rng *r, uint64_t seed) noexcept
    double grind_uniform(grind_rng *r) noexcept
