/* grind's random number generator, shared by the CKY and DMV kernels
 * (csrc/cky.pyx, csrc/dmv.pyx; declared for Cython in csrc/rng.pxd).
 *
 * xoshiro256** (Blackman & Vigna 2018), its state seeded by four draws of
 * splitmix64 from a 64-bit seed; a uniform double in [0, 1) from the top 53
 * bits.  The stream is part of grind's reproducibility contract (sampled
 * trees and resumed runs are bit-identical): do not change the algorithm.
 */
#ifndef GRIND_RNG_H
#define GRIND_RNG_H

#include <stdint.h>

/* xoshiro256** seeded by splitmix64 */
typedef struct { uint64_t s[4]; } grind_rng;
static inline uint64_t grind_splitmix64(uint64_t *x) {
    uint64_t z = (*x += 0x9E3779B97F4A7C15ULL);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
}
static inline void grind_rng_seed(grind_rng *r, uint64_t seed) {
    for (int i = 0; i < 4; i++) r->s[i] = grind_splitmix64(&seed);
}
static inline uint64_t grind_rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
static inline double grind_uniform(grind_rng *r) {
    uint64_t *s = r->s;
    uint64_t out = grind_rotl(s[1] * 5, 7) * 9, t = s[1] << 17;
    s[2] ^= s[0]; s[3] ^= s[1]; s[1] ^= s[2]; s[0] ^= s[3]; s[2] ^= t;
    s[3] = grind_rotl(s[3], 45);
    return (double)(out >> 11) * (1.0 / 9007199254740992.0);
}

#endif /* GRIND_RNG_H */
