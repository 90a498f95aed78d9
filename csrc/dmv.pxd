# Declarations of the split-head DMV kernel (csrc/dmv.pyx cimports the types;
# Cython builds it as grind._dmv, so this file is cimported as `dmv`).

from rng cimport grind_rng

ctypedef long long i64
ctypedef unsigned long long u64

# Per-sentence tables and charts, allocated once per call for the longest
# sentence and reused (stride n = the current sentence's length).  Words are
# 0-based; "left half of h from a" covers words a..h (split tokens 2a..2h+1).
cdef struct Work:
    Py_ssize_t nmax
    double *A          # A[h*n+d]: choose(d | h, dir) * Y(d), 0 where impossible
    double *R          # R[i]: root(i) * Y(i)
    double *st         # st[q*n+i], q = sL0 nL0 sL1 nL1 sR0 nR0 sR1 nR1 (STOPs scaled)
    double *tmp        # n scratch
    double *CL0        # CL_v[h*n+a]: L0_h / L_h over words a..h (inside)
    double *CL1
    double *CR0        # CR_v[h*n+b]: R0_h / R_h over words h..b
    double *CR1
    double *CL0s       # CL0 again, indexed [a*n+h] (start-major)
    double *CR0e       # CR0 again, indexed [b*n+h] (end-major)
    double *I          # I[h*n+d]: arc h -> d: choose * Y_d's inner half * head's half
    double *oCL0       # outside (adjoints) of the above
    double *oCL1
    double *oCR0
    double *oCR1
    double *oCL0s
    double *oCR0e
    double *oI
    double *cst        # 8n expected STOP/¬STOP counts (times Z), layout of st
    int *bpC           # Viterbi back-pointers: dependent d of complete items
    int *bpI           # split point m of incomplete items
    int *heads         # 1-based heads, 0 = root
    int *lo            # subtree extents (derivation building)
    int *hi
    int *chs           # children in CSR form (n+1 offsets)
    int *ch
    int *stack
    int *trb           # 10n token rules of the current sentence (see Corpus.tables)
    int *arb           # n*n arc rules of the current sentence, when looked up (not stored)

# Rule weights computed from counts instead of read from a weight vector (the
# collapsed Metropolis-Hastings sweep, Corpus.hastings): over the joint index
# space of grind.infer.hastings (rule r at r, its LHS A at lhs_at[r] = R + A),
#   theta_r = ((cnt[r] + a[r]) / (cnt[lhs_at[r]] + a[lhs_at[r]]))^inv;
# for inv != 1 as pw[r] / pw[lhs_at[r]] with pw[u] = (cnt[u] + a[u])^inv
# cached: valid while cnt[u] == pwn[u], the count it was computed at.
cdef struct Theta:
    const i64 *cnt
    const double *a
    const i64 *lhs_at
    double inv
    double *pw         # NULL when inv = 1
    i64 *pwn

# Kernel functions (csrc/dmv.pyx), all nogil:
#   cdef Work *work_new(Py_ssize_t nmax) noexcept nogil       (NULL: out of memory; work_or_raise: MemoryError)
#   cdef void work_free(Work *w) noexcept nogil
#   cdef const int *tables(Work *w, const int *ty, const int *type_rules, const int *dense, i64 T,
#                          const int *tab, Py_ssize_t n) noexcept nogil
#   cdef void gather(Work *w, const int *tr, const int *ar, const double *wt, Py_ssize_t n) noexcept nogil
#   cdef int scale(Work *w, Py_ssize_t n, double target, i64 *E) noexcept nogil
#   cdef void gather_theta(Work *w, const int *tr, const int *ar, const Theta *th, Py_ssize_t n) noexcept nogil
#   cdef int prepare(Work *w, const int *tr, const int *ar, const double *wt, const Theta *th, Py_ssize_t n,
#                    double *Z, i64 *E) noexcept nogil
#   cdef double inside(Work *w, Py_ssize_t n) noexcept nogil
#   cdef void outside(Work *w, Py_ssize_t n) noexcept nogil
#   cdef void logify(Work *w, Py_ssize_t n) noexcept nogil
#   cdef double viterbi(Work *w, Py_ssize_t n, int *root) noexcept nogil
#   cdef void traverse(Work *w, Py_ssize_t n, int root, grind_rng *g) noexcept nogil
#   cdef Py_ssize_t derivation(Work *w, const int *tr, const int *ar, Py_ssize_t n, i64 *rows) noexcept nogil
