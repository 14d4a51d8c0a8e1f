/* small.h - the Krylov methods' small dense work as engine operations on
 * the scalar slots (the engine op small_run): GMRES's Givens rotations and
 * its triangular least-squares solve, IDR(s)'s s x s lower-triangular
 * systems and omega. One description (gs_small), one slot layout per
 * method and one implementation (gs_small_exec), compiled for the host
 * (engine_cpu.c) and for the device (cuda/engine/small.cu): the loop on
 * the device runs it without the host, and the host loop issues the same
 * operations, so both loops compute the same numbers on an engine.
 *
 * A failed test leaves a slot that the method's breakdown tests
 * (src/engine/loop.h) see: GMRES's col (FINITE) and rot, yok (POSITIVE);
 * IDR's mkk (FINITE, NONZERO) and omok (POSITIVE). Every operation keeps
 * the update it guards harmless where it fails (a zero coefficient, y = 0),
 * so a check after it finds the residual as it was. */
#ifndef GS_SMALL_H
#define GS_SMALL_H

#include <math.h>

#ifdef __CUDACC__
#define GS_HD __host__ __device__
#else
#define GS_HD
#endif

typedef enum gs_small_kind {
    GS_SMALL_GMRES_RESTART = 1, /* g = (beta, 0, ..), beta = sqrt(S[rr]); 1/beta; jn = 0
                                 * (yok as it was: set it to 1 before the first) */
    GS_SMALL_GMRES_GIVENS,      /* column j from the two CGS passes, rotated; g; S[rr] */
    GS_SMALL_GMRES_SOLVE,       /* y = R(0:j, 0:j) \ g(0:j) (y = 0 if not finite) */
    GS_SMALL_IDR_C,             /* c = M(k:s, k:s) \ f(k:s) (k = j) */
    GS_SMALL_IDR_ALPHA,         /* alpha = M(0:k, 0:k) \ (P'G_k)(0:k); M(k:s, k); beta; f */
    GS_SMALL_IDR_OMEGA,         /* omega from t't, t'r and S[rr] */
    GS_SMALL_LOG,               /* the residual log (gs_small_log): S[rr] appended to a
                                 * ring of m slots from base + 1, S[base] counting */
    GS_SMALL_CG1_STEP           /* cg1's alpha and beta from gamma, delta (gs_small_cg1) */
} gs_small_kind;

typedef struct gs_small {
    int kind; /* gs_small_kind */
    int j;    /* GMRES: the step (column), or the columns solved; IDR: the inner step k */
    int m;    /* GMRES: the restart length; IDR: s */
    int base; /* the first slot of the method's layout below */
    int rr;   /* the slot of ||r||^2 */
} gs_small;

/* GMRES's slots from base on (gs_small_gmres_layout): the three tests'
 * slots first, so that a check reads ||r||^2 and them in one read when rr
 * is base - 1. R is the triangle of the rotated Hessenberg matrix, packed
 * by columns (column l holds rows 0..l from R + l (l + 1) / 2). */
typedef struct gs_small_gmres {
    int col, rot, yok; /* ||H(:, j)|| (finite), rotation nonsingular (1/0), y finite (1/0) */
    int jn;            /* the columns of this cycle done */
    int invh;          /* 1 / h(j+1, j) (0 if h = 0): V[j+1]'s scale (step j+1 applies it) */
    int invbeta;       /* 1 / ||r|| at the restart: V[0]'s scale */
    int phase;         /* 1 after a restart, 0 after a step */
    int rr0;           /* ||r||^2 at the restart */
    int h1, h2, nw;    /* the two passes' V'w (m + 1 each), then w'w */
    int y, cs, sn, g, R;
    int end; /* one past the last slot */
} gs_small_gmres;

static inline GS_HD gs_small_gmres gs_small_gmres_layout(int base, int m)
{
    gs_small_gmres L;
    L.col = base;
    L.rot = base + 1;
    L.yok = base + 2;
    L.jn = base + 3;
    L.invh = base + 4;
    L.invbeta = base + 5;
    L.phase = base + 6;
    L.rr0 = base + 7;
    L.h1 = base + 8;
    L.h2 = L.h1 + m + 1;
    L.nw = L.h2 + m + 1;
    L.y = L.nw + 1;
    L.cs = L.y + m;
    L.sn = L.cs + m;
    L.g = L.sn + m;
    L.R = L.g + m + 1;
    L.end = L.R + m * (m + 1) / 2;
    return L;
}

/* IDR(s)'s slots from base on: the tests' first (read with ||r||^2 when
 * rr is base - 1); M is s x s by rows. */
typedef struct gs_small_idr {
    int mkk, omok;    /* M(k, k) (finite, nonzero), omega fine (1/0) */
    int beta, mbeta;  /* f(k) / M(k, k) and its negative (0 where M(k, k) fails) */
    int om;           /* omega */
    int uom, muom;    /* omega and -omega for the update (0 where omega fails) */
    int f, pg, c;     /* s each: P'r, P'G_k, the solves' results */
    int tt;           /* t't, then t'r in tt + 1 */
    int M;
    int end;
} gs_small_idr;

static inline GS_HD gs_small_idr gs_small_idr_layout(int base, int s)
{
    gs_small_idr L;
    L.mkk = base;
    L.omok = base + 1;
    L.beta = base + 2;
    L.mbeta = base + 3;
    L.om = base + 4;
    L.uom = base + 5;
    L.muom = base + 6;
    L.f = base + 8;
    L.pg = L.f + s;
    L.c = L.pg + s;
    L.tt = L.c + s;
    L.M = L.tt + 2;
    L.end = L.M + s * s;
    return L;
}

/* cg1's slots from base on (src/krylov/cg1.c): gamma = r.u and delta = w.u
 * first (the iteration's dots, with ||r||^2 at base - 1: one sum over the
 * ranks), then p'Ap, the previous gamma and alpha, and the step's alpha and
 * beta (the vector updates' coefficients). */
enum { GS_CG1_GAMMA, GS_CG1_DELTA, GS_CG1_PAP, GS_CG1_GAMMA_OLD, GS_CG1_ALPHA_OLD,
       GS_CG1_ALPHA, GS_CG1_BETA, GS_CG1_END };

/* |R(j,j)| at or below this fraction of ||H(:,j)||: A M v_j lies in the
 * span of A M v_0 .. A M v_j-1 up to rounding, so R is singular. A
 * nonsingular A M keeps the ratio above 1 / cond(A M); rounding leaves it
 * at 1e-14 or more where A M is singular (1.8e-14 seen at the 17th step of
 * a 36-unknown Neumann Laplacian, the Arnoldi errors adding up), so only
 * cond(A M) > 1e12 on the Krylov space is taken for singular. */
#define GS_GMRES_SINGULAR 1e-12
/* IDR(s)'s "maintaining the convergence" angle (Sleijpen & van der Vorst). */
#define GS_IDR_KAPPA 0.7

/* sqrt(a^2 + b^2) without overflow, written out here rather than taken
 * from the math library: the host's hypot and the device's round
 * differently, and the host loop (GMRES keeps its state on the host) and
 * the device loop must compute the same bits. With no fused multiply-add
 * on either side (cuda/engine/small.cu is built with -fmad=false, the C
 * code with -ffp-contract=off) every operation below rounds the same. */
static inline GS_HD double gs_small_hypot(double a, double b)
{
    a = fabs(a);
    b = fabs(b);
    const double big = a > b ? a : b, little = a > b ? b : a;
    if (!(big > 0.0)) return big == 0.0 ? 0.0 : big + little; /* 0, or NaN */
    if (isinf(big)) return big;
    const double r = little / big; /* NaN where little is */
    return big * sqrt(1.0 + r * r);
}

/* The slots op touches lie in [0, limit): 1, else 0 (checked by the
 * engines before they run it). */
static inline int gs_small_valid(const gs_small *op, int limit)
{
    if (op->base < 0 || op->rr < 0 || op->rr >= limit || op->m < 1 || op->j < 0) return 0;
    switch (op->kind) {
    case GS_SMALL_GMRES_RESTART:
    case GS_SMALL_GMRES_GIVENS:
    case GS_SMALL_GMRES_SOLVE:
        return op->j <= op->m && (op->kind != GS_SMALL_GMRES_GIVENS || op->j < op->m) &&
               gs_small_gmres_layout(op->base, op->m).end <= limit;
    case GS_SMALL_IDR_C:
    case GS_SMALL_IDR_ALPHA:
    case GS_SMALL_IDR_OMEGA:
        return op->j < op->m && gs_small_idr_layout(op->base, op->m).end <= limit;
    case GS_SMALL_LOG: return op->base + 1 + op->m <= limit;
    case GS_SMALL_CG1_STEP: return op->base + GS_CG1_END <= limit;
    }
    return 0;
}

/* The residual log of --history: a method that checks its residual only
 * every few iterations (CG, BiCGSTAB) appends ||r||^2 = S[rr] after every
 * iteration to a ring of m slots, S[base + 1 + q mod m] for the q-th
 * entry, S[base] = entries so far. The ring sits on the device with the
 * other slots, so an iteration costs no read; the host loop reads the ring
 * with the slots it reads at a check anyway, the loop on the device copies
 * it into its history at each check (loop.h). */
static inline GS_HD void gs_small_log(const gs_small *op, double *S)
{
    const double q = S[op->base];
    S[op->base + 1 + (long long)fmod(q, (double)op->m)] = S[op->rr];
    S[op->base] = q + 1.0;
}

static inline GS_HD void gs_small_gmres_restart(const gs_small *op, double *S)
{
    const gs_small_gmres L = gs_small_gmres_layout(op->base, op->m);
    const double beta = sqrt(S[op->rr]);
    S[L.rr0] = S[op->rr];
    S[L.g] = beta;
    for (int i = 1; i <= op->m; i++) S[L.g + i] = 0.0;
    S[L.invbeta] = beta > 0.0 ? 1.0 / beta : 0.0;
    S[L.jn] = 0.0;
    S[L.phase] = 1.0;
    S[L.col] = 0.0; /* the step tests pass until a step says otherwise; yok is left as
                     * the last solve set it (1 at the start): an overflowing y ends the
                     * solve, and the check after a cycle's end and restart must see it */
    S[L.rot] = 1.0;
}

/* Column j of H is h1 + h2 (rows 0..j) and sqrt(|w'w|) (row j+1): apply
 * rotations 0..j-1, make rotation j, update g. Where ||H(:, j)|| is not
 * finite or R(0:j, 0:j) is singular, g and jn stay as they were (the
 * least-squares problem over the first j columns stays solved) and S[rr]
 * holds the old estimate g(j)^2. */
static inline GS_HD void gs_small_gmres_givens(const gs_small *op, double *S)
{
    const gs_small_gmres L = gs_small_gmres_layout(op->base, op->m);
    const int j = op->j;
    double *Rc = S + L.R + j * (j + 1) / 2;
    const double hn = sqrt(fabs(S[L.nw]));
    const double gj = S[L.g + j];
    double col = 0.0; /* ||H(0:j+1, j)||: rotations keep it */
    S[L.invh] = hn > 0.0 ? 1.0 / hn : 0.0;
    S[L.phase] = 0.0;
    for (int i = 0; i <= j; i++) {
        Rc[i] = S[L.h1 + i] + S[L.h2 + i];
        col = gs_small_hypot(col, Rc[i]);
    }
    col = gs_small_hypot(col, hn);
    S[L.col] = col;
    S[L.rot] = 0.0;
    S[op->rr] = gj * gj;
    if (!isfinite(col)) return;
    for (int i = 0; i < j; i++) {
        const double a = Rc[i], b = Rc[i + 1], c = S[L.cs + i], s = S[L.sn + i];
        Rc[i] = c * a + s * b;
        Rc[i + 1] = -s * a + c * b;
    }
    const double a = Rc[j], b = hn, rr = gs_small_hypot(a, b);
    if (!(rr > GS_GMRES_SINGULAR * col)) return;
    S[L.rot] = 1.0;
    const double c = a / rr, s = b / rr; /* h = 0 gives s = 0, g(j+1) = 0: happy breakdown */
    S[L.cs + j] = c;
    S[L.sn + j] = s;
    Rc[j] = rr;
    S[L.g + j + 1] = -s * gj;
    S[L.g + j] = c * gj;
    S[L.jn] = j + 1;
    S[op->rr] = S[L.g + j + 1] * S[L.g + j + 1];
}

/* y = R(0:j, 0:j) \ g(0:j) (the diagonal is nonzero: gs_small_gmres_givens);
 * yok = 0 and y = 0 where a y(i) overflows (the solution is not
 * representable in the space: A M numerically singular, or x too large). */
static inline GS_HD void gs_small_gmres_solve(const gs_small *op, double *S)
{
    const gs_small_gmres L = gs_small_gmres_layout(op->base, op->m);
    const int jn = op->j;
    double *y = S + L.y;
    const double *R = S + L.R;
    int finite = 1;
    for (int i = jn - 1; i >= 0; i--) {
        double s = S[L.g + i];
        for (int l = i + 1; l < jn; l++) s -= R[l * (l + 1) / 2 + i] * y[l];
        y[i] = s / R[i * (i + 1) / 2 + i];
        if (!isfinite(y[i])) finite = 0;
    }
    if (!finite)
        for (int i = 0; i < jn; i++) y[i] = 0.0;
    S[L.yok] = finite ? 1.0 : 0.0;
}

/* out(0:k1-k0) = M(k0:k1, k0:k1) \ rhs (rhs(i - k0) for row i), M lower
 * triangular by rows of s; a zero diagonal gives 0. */
static inline GS_HD void gs_small_lower_solve(const double *M, int s, int k0, int k1,
                                             const double *rhs, double *out)
{
    for (int i = k0; i < k1; i++) {
        double acc = rhs[i - k0];
        for (int j = k0; j < i; j++) acc -= M[i * s + j] * out[j - k0];
        out[i - k0] = M[i * s + i] == 0.0 ? 0.0 : acc / M[i * s + i];
    }
}

/* After G_k = A U_k and pg = P'G_k: alpha = M(0:k, 0:k) \ pg(0:k) into c
 * (G_k and U_k lose their components along G_0..G_k-1, U_0..U_k-1 next),
 * M(i, k) = P_i'G_k after that subtraction for i >= k, then beta =
 * f(k) / M(k, k) and f(i) -= beta M(i, k) for i > k; beta = 0 where M(k, k)
 * is 0 or not finite. */
static inline GS_HD void gs_small_idr_alpha(const gs_small *op, double *S)
{
    const gs_small_idr L = gs_small_idr_layout(op->base, op->m);
    const int s = op->m, k = op->j;
    double *M = S + L.M, *c = S + L.c, *f = S + L.f;
    const double *pg = S + L.pg;
    gs_small_lower_solve(M, s, 0, k, pg, c);
    for (int i = k; i < s; i++) {
        double m = pg[i];
        for (int j = 0; j < k; j++) m -= c[j] * M[i * s + j];
        M[i * s + k] = m;
    }
    const double mkk = M[k * s + k];
    double beta = 0.0;
    S[L.mkk] = mkk;
    if (mkk != 0.0 && isfinite(mkk)) {
        beta = f[k] / mkk;
        for (int i = k + 1; i < s; i++) f[i] -= beta * M[i * s + k];
    }
    S[L.beta] = beta;
    S[L.mbeta] = -beta;
}

/* omega = t'r / t't, moved away from 0 where the angle between t and r is
 * below kappa; omok = 0 and a zero update where t't <= 0 or t'r = 0 or
 * either is not finite. */
static inline GS_HD void gs_small_idr_omega(const gs_small *op, double *S)
{
    const gs_small_idr L = gs_small_idr_layout(op->base, op->m);
    const double tt = S[L.tt], tr = S[L.tt + 1], rr = S[op->rr];
    const int ok = isfinite(tt) && tt > 0.0 && tr != 0.0 && isfinite(tr);
    S[L.omok] = ok ? 1.0 : 0.0;
    S[L.uom] = S[L.muom] = 0.0;
    if (!ok) return;
    const double rho = fabs(tr) / (sqrt(tt) * sqrt(rr));
    double om = tr / tt;
    if (rho < GS_IDR_KAPPA) om *= GS_IDR_KAPPA / rho;
    S[L.om] = om;
    S[L.uom] = om;
    S[L.muom] = -om;
}

/* Chronopoulos-Gear: beta = gamma / gamma_old, p'Ap = delta - beta gamma /
 * alpha_old, alpha = gamma / p'Ap; then alpha_old = alpha, gamma_old = gamma.
 * Where p'Ap or gamma is not finite and positive the step is none (alpha =
 * beta = 0: x and r stay) and the state stays, so every later step fails
 * the same way; a failed p'Ap stays too: the check's tests see the first
 * failure, whatever steps ran after it. */
static inline GS_HD void gs_small_cg1_step(const gs_small *op, double *S)
{
    double *c = S + op->base;
    const double g = c[GS_CG1_GAMMA];
    const int failed = !(c[GS_CG1_PAP] > 0.0) || !isfinite(c[GS_CG1_PAP]);
    const double beta = g / c[GS_CG1_GAMMA_OLD];
    const double pap = failed ? c[GS_CG1_PAP] : c[GS_CG1_DELTA] - beta * g / c[GS_CG1_ALPHA_OLD];
    const int ok = !failed && isfinite(pap) && pap > 0.0 && isfinite(g) && g > 0.0;
    c[GS_CG1_PAP] = pap;
    c[GS_CG1_ALPHA] = ok ? g / pap : 0.0;
    c[GS_CG1_BETA] = ok ? beta : 0.0;
    if (!ok) return;
    c[GS_CG1_ALPHA_OLD] = c[GS_CG1_ALPHA];
    c[GS_CG1_GAMMA_OLD] = g;
}

/* Run op on S (gs_small_valid(op) holds). */
static inline GS_HD void gs_small_exec(const gs_small *op, double *S)
{
    switch (op->kind) {
    case GS_SMALL_GMRES_RESTART: gs_small_gmres_restart(op, S); break;
    case GS_SMALL_GMRES_GIVENS: gs_small_gmres_givens(op, S); break;
    case GS_SMALL_GMRES_SOLVE: gs_small_gmres_solve(op, S); break;
    case GS_SMALL_IDR_C: {
        const gs_small_idr L = gs_small_idr_layout(op->base, op->m);
        gs_small_lower_solve(S + L.M, op->m, op->j, op->m, S + L.f + op->j, S + L.c);
        break;
    }
    case GS_SMALL_IDR_ALPHA: gs_small_idr_alpha(op, S); break;
    case GS_SMALL_LOG: gs_small_log(op, S); break;
    case GS_SMALL_IDR_OMEGA: gs_small_idr_omega(op, S); break;
    case GS_SMALL_CG1_STEP: gs_small_cg1_step(op, S); break;
    }
}

#endif
