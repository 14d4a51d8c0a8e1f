/* loop.h - the iteration loop on the device (the engine's optional
 * loop_run): what the check after each iteration tests on the scalar slots,
 * and what it found. The Krylov layer fills a gs_loop (krylov.c:
 * kr_device_loop); the engine runs body, check, body, check ... without the
 * host until the check says stop, then hands back the outcome once. A body
 * may hold several iterations (per_body): the check then comes after each
 * per_body iterations, and the loop hands the last maxit - it0 mod per_body
 * iterations back to the host (GS_LOOP_HANDOFF). A body may instead be
 * several steps (n_steps, krylov.c: kr_device_steps; GMRES's cycle, IDR's),
 * each with a check after it. */
#ifndef GS_LOOP_H
#define GS_LOOP_H

#define GS_LOOP_MAX_TESTS 12
#define GS_LOOP_MAX_MOVES 4
/* More possible checks than this (maxit / check_every) with a residual
 * history asked for: the engine declines (the history would not fit). */
#define GS_LOOP_MAX_HISTORY (1L << 20)
/* At most this many iterations in one captured body (kr_loop_per_body). */
#define GS_LOOP_MAX_PER_BODY 8
/* At most this many steps in a body of steps (gs_loop.n_steps). */
#define GS_LOOP_MAX_STEPS 1024

/* A breakdown predicate on one slot: the method broke down when it fails. */
typedef enum gs_loop_test_kind {
    GS_LOOP_FINITE = 0, /* S[slot] is finite */
    GS_LOOP_POSITIVE,   /* S[slot] > 0 (NaN fails) */
    GS_LOOP_NONZERO     /* S[slot] != 0 (NaN passes: test FINITE first) */
} gs_loop_test_kind;

typedef struct gs_loop_test {
    int kind; /* gs_loop_test_kind */
    int slot;
} gs_loop_test;

/* Why the loop stopped; the order of the tests is kr_check_breakdown's. */
typedef enum gs_loop_stop {
    GS_LOOP_RUNNING = 0, /* not stopped (only between yields) */
    GS_LOOP_CONVERGED,   /* sqrt(|S[slot_rr]|) / bnorm <= tol */
    GS_LOOP_NAN,         /* that quotient is not finite */
    GS_LOOP_BREAKDOWN,   /* test[failed_test] failed (residual above tol) */
    GS_LOOP_MAXIT,       /* it == maxit */
    GS_LOOP_TIME_LIMIT,  /* deadline passed */
    GS_LOOP_HANDOFF      /* no verdict at it0 + per_body floor((maxit - it0) / per_body) <
                          * maxit: the host does the iterations left */
} gs_loop_stop;

typedef struct gs_loop {
    /* --- in --- */
    long it0;         /* iterations done before the loop; the first check's is it0 + 1.. */
    long maxit;       /* > it0 */
    long per_body;    /* >= 1, at most maxit - it0: iterations in one run of the body */
    long check_every; /* a multiple of per_body: a check at it0 + c, it0 + 2c, ... and
                       * at maxit */
    double tol, bnorm;
    int slot_rr;      /* ||r||^2 */
    int n_tests;      /* the first failing test is the breakdown */
    gs_loop_test test[GS_LOOP_MAX_TESTS];
    int n_moves;      /* after every iteration (checked or not, tests first): */
    int move_dst[GS_LOOP_MAX_MOVES], move_src[GS_LOOP_MAX_MOVES]; /* S[dst] = S[src] */
    double deadline;  /* gs_now() past which a check stops with TIME_LIMIT; 0: none */
    /* History (history_cap > 0): one entry per check, in the caller's
     * arrays of history_cap >= the number of checks possible: the
     * iteration, sqrt(|rr|) / bnorm and the gs_now() time of the check. */
    long history_cap;
    long *history_it;
    double *history_rel, *history_time;
    /* With a history: an entry for every iteration, not only the checks'
     * (record_every). The fused kernel records each iteration's residual
     * with its time; the loop of a body (n_steps <= 1) whose iterations
     * append ||r||^2 to the ring of log_cap slots after S[log_base]
     * (small.h, GS_SMALL_LOG; log_base GS_SLOT_NONE: none) copies the
     * iterations since the last check from it at each check, their time
     * NaN (the caller interpolates). history_cap then counts iterations. */
    int record_every;
    int log_base, log_cap;
    /* Called on the host every so often while the loop runs (the engine
     * hands control back to the host about every quarter second for it)
     * with the last check's iteration and residual; NULL: never. */
    void (*progress)(void *ctx, long it, double rel);
    void *progress_ctx;
    /* A body of steps (n_steps > 1, with per_body 1 and check_every 1; the
     * engine's body argument is then unused): step(ctx, i) for i = 0 ..
     * n_steps - 1, each followed by a check that first adds step_its[i]
     * (0 or 1) to the iteration count; a step runs only when no check
     * before it stopped the loop, and the loop hands control back to the
     * host (progress) only after the last step. GMRES: the m steps of a
     * cycle and its end; IDR(s): s inner steps and the reduction step.
     * n_steps <= 1: the body, per_body iterations and one check. */
    int n_steps;
    int (*step)(void *ctx, int i);
    const int *step_its;
    /* --- out --- */
    int ran;          /* 0: the engine declined (nothing ran): run the host loop */
    char declined[160]; /* why it declined ("" when it ran) */
    int stop;         /* gs_loop_stop */
    int failed_test;  /* GS_LOOP_BREAKDOWN: index into test */
    long last_it;     /* the last check's iteration */
    long it_done;     /* the iterations done (last_it but for GS_LOOP_HANDOFF) */
    double last_rel;  /* and its sqrt(|rr|) / bnorm */
    long history_len;
} gs_loop;

/* The fused path (the engine's optional fused_run): a whole solve in one
 * kernel, for a method and a preconditioner simple enough to write inside
 * it: CG and BiCGSTAB with M = diag(d) (jacobi), M = I (none), M a
 * product of one or two sparse matrices (gs_pc.product) or M given by
 * unit triangular factors (gs_pc.factor: mic). The Krylov layer sets
 * the vectors up as its own loop would start (cg.c), fills a gs_loop
 * (per_body 1; the tests name the slots below) and reads the outcome from
 * it as from loop_run. */
typedef enum gs_fused_method { GS_FUSED_CG = 1, GS_FUSED_BICGSTAB } gs_fused_method;

/* The most rows for which the fused kernel can take M as triangular
 * factors: it keeps M u, n doubles, in each block's shared memory (227 KiB
 * a block on an H100 or H200; the launch checks the device's own limit).
 * Setups need not describe larger factors. */
#define GS_FUSED_FACTOR_MAX_ROWS 28672

typedef struct gs_fused {
    int method;          /* gs_fused_method */
    const struct gs_mat *A;
    const struct gs_vec *d; /* M = diag(d); NULL: M = I (with nprod 0) */
    /* M = prod[0] (prod[1] r) (nprod 2) or prod[0] r (nprod 1), matrices
     * of the same engine (gs_pc.product); BiCGSTAB then needs phat, shat */
    const struct gs_mat *prod[2];
    int nprod;
    /* M r = factor[1]^-1 (factor_dinv .* (factor[0]^-1 r)) where factor[0]
     * is set (nprod 0, d NULL): factor[0] unit lower, factor[1] unit upper,
     * their diagonals not read (gs_pc.factor); BiCGSTAB then needs phat,
     * shat */
    const struct gs_mat *factor[2];
    const struct gs_vec *factor_dinv;
    /* CG: on entry r = b - A x, z = M r, p = z, S[slot_rho] = r'z; q is work.
     * After each iteration S[slot_pap] = p'Ap, S[slot_rho_new] = r'z (the
     * tests' slots), then S[slot_rho] = S[slot_rho_new]. */
    struct gs_vec *x, *r, *z, *p, *q;
    int slot_rho, slot_rho_new, slot_pap;
    /* BiCGSTAB (x, r, p and slot_rho above; z and q unused): on entry r = r0
     * = b - A x, p = r, S[slot_rho] = r0'r; v and t are work. After each
     * step S[slot_rho] = r0'r (the new rho), S[slot_r0v] = r0'v,
     * S[slot_ts] = t's, S[slot_tt] = t't, S[KR_RR] = r'r (bicgstab.c). */
    struct gs_vec *r0, *v, *t;
    struct gs_vec *phat, *shat; /* with nprod > 0 or factors: M p and M s */
    int slot_r0v, slot_ts, slot_tt;
} gs_fused;

#endif
