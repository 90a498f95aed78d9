# C-level declarations of the general CKY kernel (csrc/cky.pyx -> grind._cky).
#
# Cimported by csrc/cky.pyx as `cky` (types and the C helpers of cky_kernels.h).
#
# Symbols are ints 0..S-1 (the grammar's nonterminals, binarisation
# intermediates and terminal wrappers); a chart cell is a float64 vector of
# length S.  Internal rules: binary A -> B C, unary A -> B (topological order,
# child before parent) and lexical A -> t1..tk (matched per sentence at
# construction).  ``*_orig`` maps an internal rule to the grammar's rule index
# (-1 for the weight-1 helper rules, which emit no derivation row).
from libc.stdint cimport int64_t, uint64_t


# C helpers (csrc/cky_kernels.h): small register-tiled matrix products, the
# sparse path's LANES-wide loops, power-of-two scaling.  grind_push, grind_outer,
# grind_atb_rows and grind_atb_kreg return 0 (and do nothing) outside the narrow
# sizes they handle; the caller then uses the general grind_atb / grind_abt.
cdef extern from "cky_kernels.h":
    void grind_atb(int K, int m, int n, const double *A, int64_t sak, int64_t sai,
                   const double *B, int64_t ldb, const double *f, const double *g,
                   double *C, int64_t ldc, int acc) noexcept nogil
    void grind_abt(int K, int m, int n, const double *A, int64_t lda,
                   const double *B, int64_t ldb, const double *g, double *C, int64_t ldc) noexcept nogil
    double grind_vmax(const double *x, int n) noexcept nogil
    int grind_atb_rows(int K, int m, int n, const double *A, int64_t sak, int64_t sai,
                       const double *B, int64_t ldb, double *C, int64_t ldc, int acc) noexcept nogil
    int grind_atb_kreg(int K, int m, int n, const double *A, int64_t sak, int64_t sai,
                       const double *B, int64_t ldb, double *C, int64_t ldc) noexcept nogil
    int grind_outer(int nl, int nr, int K, const double *bL, const double *bR, int64_t ld,
                    const double *f, double *M) noexcept nogil
    int grind_push(int nl, int nr, int K, const double *A, const double *bL, const double *bR,
                   int64_t ld, const double *f, double *aL, double *aR) noexcept nogil
    void grind_sparse_in(int S, int K, const int *ptr, const int *lhs, const int *right,
                         const double *wl, int r0, const double *LT, const double *RT,
                         const char *nzL, const char *nzR, double *outT) noexcept nogil
    void grind_sparse_out(int S, int K, const int *ptr, const int *lhs, const int *right,
                          const double *wl, int r0, const double *LT,
                          const double *RT, const char *nzL, const char *nzR,
                          const double *aT, const char *nzA, double *PL, double *PR,
                          double *cnt) noexcept nogil
    char grind_any(const double *x, int64_t n) noexcept nogil
    enum: GRIND_LANES
    void grind_scatter(int S, const double *f, const double **src, double *dst, int64_t stride,
                       char *nz) noexcept nogil
    double grind_pow2(double d) noexcept nogil
    double grind_expo(double x) noexcept nogil
    void grind_scal(int n, double a, double *x) noexcept nogil
    void grind_transpose(int m, int n, const double *a, double *t) noexcept nogil


cdef struct Gram:
    int S                   # number of symbols
    int start
    int r0, r1              # binary left-hand sides lie in [r0, r1)
    int n_bin, n_un, n_lex
    int max_lex             # longest lexical rule (tokens)
    int *bin_lhs
    int *bin_left
    int *bin_right
    int *left_ptr           # CSR (S+1) of binary rules by left child
    int *left_rule
    int *left_lhs           # bin_lhs and bin_right in the order of left_rule
    int *left_right
    int *lhs_ptr            # CSR (S+1) of binary rules by left-hand side
    int *lhs_rule
    int *un_parent          # unary rules in topological order
    int *un_child
    int *unp_ptr            # CSR (S+1) of unary rules by parent
    int *unp_rule
    int *lex_lhs
    int *bin_orig
    int *un_orig
    int *lex_orig
    # dense path: split class (left width > 1) * 2 + (right width > 1) -> block
    # (-1: never contributes).  W is (r1-r0) x coff[4], row-major; block b
    # holds columns coff[b] + (B - lo_l[b]) * nr_b + (C - lo_r[b]).  Blocks are
    # ordered so that those used by the spans of one width are adjacent.
    int dense
    int64_t gemm_doubles    # size of the batched GEMM operands (sets spans per GEMM)
    int block_of[4]
    int lo_l[4]
    int hi_l[4]
    int lo_r[4]
    int hi_r[4]
    int64_t coff[5]
    int *rid                # internal binary rule at each W position (-1: none)


cdef struct Corpus:
    int n_sent
    int *length
    int64_t *pos_off        # sentence s, start p: matches mptr[pos_off[s]+p] .. mptr[pos_off[s]+p+1]
    int *mptr
    int *m_end
    int *m_rule


cdef struct Weights:
    double *bin
    double *un
    double *lex
    double *W               # dense W, (r1-r0) x coff[4], or NULL
    double *logbin          # log weights (Viterbi only)
    double *logun
    double *loglex
    double *logW


cdef struct Deriv:
    int64_t *off            # request q owns rows off[q] .. off[q+1]-1
    int64_t *n_rows         # rows written for request q (-1: no derivation)
    int64_t *rows           # (rule, start, end) triples


cdef struct Chunk:
    int n                   # sentences in the chunk
    int maxlen
    int64_t *sid            # corpus index of each sentence
    int *q                  # its position in the request
    int *len
    int64_t *base           # its first span; spans are row-packed (i, j)
    int64_t n_span
    double *beta            # n_span x S, inside vectors normalised to max in [1, 2)
    double *betaT           # the same, column-packed (j, i)
    double *alpha           # n_span x S, outside vectors at scale 2^-s (pushes as a left
                            # child, then the total), row-packed
    double *alphaR          # n_span x S, pushes as a right child, column-packed
    double *s               # inside base-2 scale, row-packed
    double *sT              # inside base-2 scale, column-packed
    double *m               # base-2 scale of the split sum M_ij


cdef struct Work:
    int cap                 # spans per batched GEMM
    int live[4]             # for the current width: blocks in use, their splits i+dk0 .. j-dk1
    int dk0[4]
    int dk1[4]
    int R
    int *col_c
    int *col_i
    double *colt            # outside scale t_ij = -s_ij of each span (-inf: alpha_ij = 0)
    double *M               # cap x coff[4]: vec(M_ij^b) per span, blocks side by side
    double *A               # cap x coff[4]: W^T alpha_ij per span
    double *out             # cap x R
    double *am              # cap x R: alpha_ij[r0:r1]
    double *ac              # cap x R: alpha_ij[r0:r1] * 2^(t_ij + m_ij)
    double *scr             # (maxlen + 1) x S scratch (split factors)
    double *AT              # a transposed block of A_ij
    double *LT              # sparse path, LANES spans at a time: S x K x LANES children (left)
    double *RT              # (right)
    double *PL              # pushes to the left / right children
    double *PR
    double *fq              # K x LANES split factors
    double *aT              # R x LANES outside vectors
    double *outT            # R x LANES inside sums
    double *zero            # S zeros
    char *nzL               # non-zero flags of LT, RT, aT rows
    char *nzR
    char *nzA
    double *binL            # binary weights in left-child order
    double *cntL            # binary counts in left-child order, LANES lanes


# Kernel entry points (csrc/cky.pyx; Cython builds it as grind._cky, so this
# file is cimported as `cky` for its types and the functions are listed here):
#   cdef int inside_outside(Gram *g, Corpus *c, Weights *w, int64_t *idx, int n_idx, int64_t budget,
#                           double *cnt_bin, double *cnt_un, double *cnt_lex, double *G,
#                           double *logz) except -1 nogil
#
#   cdef int viterbi(Gram *g, Corpus *c, Weights *w, int64_t *idx, int n_idx,
#                    Deriv *out, double *logp) except -1 nogil
#
#   cdef int sample(Gram *g, Corpus *c, Weights *w, int64_t *idx, int n_idx, int64_t budget,
#                   uint64_t *seeds, Deriv *out, double *logz) except -1 nogil
