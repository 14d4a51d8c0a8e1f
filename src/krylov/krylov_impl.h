/* krylov_impl.h - what the Krylov methods share (krylov.c): slot names, the
 * stopping test, breakdown records and captured iteration blocks. Private
 * to src/krylov/krylov.c, cg.c, bicgstab.c, gmres.c, idr.c. */
#ifndef GS_KRYLOV_IMPL_H
#define GS_KRYLOV_IMPL_H

#include "krylov.h"
#include "loop.h"

/* Scalar slots common to all methods; each method numbers its own from
 * KR_FREE on. KR_RR must stay right after KR_BB (read together). */
enum { KR_BB = 0, KR_RR = 1, KR_FREE = 2 };

typedef struct kr_ctx {
    gs_engine *e;
    const gs_engine_ops *ops;
    const gs_mat *A;
    gs_pc *pc;
    const gs_krylov_opts *opts;
    gs_krylov_result *res;
    double bnorm;
    long history_cap;
    double start;    /* gs_now() when the method began (history.seconds) */
    void *seq[2];    /* captured iterations, by key (see kr_run_iteration) */
    long auto_block; /* iterations until the next check when check_every = 0 */
    long last_it;    /* the previous check, for the convergence rate */
    double last_rel;
    /* The residual log (opts.record_history, methods that check every few
     * iterations: kr_log_begin): the ring's slots, and the slots from KR_RR
     * to its end as the last check read them (log_fresh: not yet used). */
    int log_base, log_cap;
    double *log_read;
    int log_fresh;
    unsigned char next_flags; /* GS_HISTORY_* for the next check's entry */
    int repeat_is_true; /* a device loop's check repeating an iteration judged b - A x (gmres) */
} kr_ctx;

typedef int (*kr_body_fn)(kr_ctx *k, void *state);

int kr_init(kr_ctx *k, gs_engine *e, const gs_mat *A, gs_pc *pc, const gs_krylov_opts *opts,
            gs_krylov_result *res);
int kr_initial_residual(kr_ctx *k, const gs_vec *b, gs_vec *x, gs_vec *r, int *done);
/* The check at iteration it, ||r_it||^2 = rr: records the residual and
 * returns 1 if the method should stop. A non-finite residual stops with
 * GS_REASON_NAN, then ||r|| <= tol ||b|| with GS_REASON_CONVERGED; only a
 * residual above tol can be a breakdown (what: the method's scalars showed
 * one, NULL: none), then maxit and opts->deadline stop the method. */
int kr_check_breakdown(kr_ctx *k, long it, double rr, const char *what);
int kr_check(kr_ctx *k, long it, double rr); /* kr_check_breakdown(k, it, rr, NULL) */
/* kr_check of a residual computed as b - A x (flagged GS_HISTORY_TRUE). */
int kr_check_true(kr_ctx *k, long it, double rr);
/* The residual log (small.h, GS_SMALL_LOG) of a method that checks only
 * every few iterations, where opts.record_history asks for every one: its
 * ring from slot base on (past the method's slots), emptied. kr_log
 * appends S[KR_RR] (call it once an iteration, after the iteration's r.r;
 * nothing where the log is off); kr_check_read reads count slots from
 * KR_RR into v as scalar_read would, the log with them in the same read, so
 * that the next kr_check_breakdown records the iterations since the last
 * check from it. */
int kr_log_begin(kr_ctx *k, int base);
int kr_log(kr_ctx *k);
int kr_check_read(kr_ctx *k, int count, double *v);
/* 1 if v is finite and > 0: a denominator or an SPD product the methods
 * may divide by (NaN, Inf, 0 and negatives are not). */
int kr_positive(double v);
void kr_breakdown(kr_ctx *k, long it, const char *what);
/* Run one iteration. Where the engine records sequences, the iteration is
 * captured once per key and replayed after (one launch, no host sync): a
 * method whose body alternates between two forms passes the form as key. */
int kr_run_iteration(kr_ctx *k, kr_body_fn body, void *state, int key);
/* How many iterations to run before the next residual check: check_every,
 * or with check_every = 0 about half the iterations the convergence rate
 * since the last check predicts are left (1 to KR_AUTO_MAX), never past
 * maxit. */
long kr_next_block(const kr_ctx *k, long it);
#define KR_AUTO_MAX 16
void kr_finish(kr_ctx *k);

/* A breakdown test of a method (loop.h) with what it means when it fails:
 * the one list both the host check (kr_test_failed) and the device loop
 * (kr_device_loop) evaluate, so each method states its breakdowns once. */
typedef struct kr_test {
    gs_loop_test t;
    const char *what;
} kr_test;
/* The first of tests[0..n) that fails on the slot values v (v[i] holds
 * slot slot0 + i), as its what, or NULL when all pass. */
const char *kr_test_failed(const kr_test *tests, int n, const double *v, int slot0);
/* Iterations per run of the captured body of the device loop: check_every
 * when it is at most GS_LOOP_MAX_PER_BODY, else its largest divisor up to
 * that; GS_LOOP_MAX_PER_BODY with adaptive checks (a check per body). */
long kr_loop_per_body(const kr_ctx *k);
/* Run the iterations it0 + 1 .. on the device where the engine can
 * (opts->use_capture and the engine's loop_run): body captured per_body
 * times in a row, the tests and moves (S[dst] = S[src] after each body;
 * moves[i] = {dst, src}) evaluated by the engine's check after them. When
 * *finished, the result holds what kr_check_breakdown would have made of
 * the same checks (iterations, reason, breakdown, residual and history);
 * else the method iterates on the host from *it_done (it0 where nothing
 * ran; else the last whole body before maxit, its checks recorded). */
int kr_device_loop(kr_ctx *k, long it0, long per_body, kr_body_fn body, void *state,
                   const kr_test *tests, int n_tests, const int (*moves)[2], int n_moves,
                   long *it_done, int *finished);
/* The loop on the device for a method whose body is several steps
 * (loop.h: GMRES's cycle, IDR(s)'s): step(k, state, i) for i < n_steps,
 * each captured once and followed by the check of the tests, step i
 * counting step_its[i] (0 or 1) iterations; the loop starts after it0 and
 * runs until a check stops it (every check a verdict: maxit included), with
 * at most `checks` checks. *finished = 1 when it ran: the result holds the
 * verdict of its last check and *it_done its iteration; the method reads
 * whatever else it needs from the slots. *finished = 0: nothing ran. */
typedef int (*kr_step_fn)(kr_ctx *k, void *state, int i);
int kr_device_steps(kr_ctx *k, long it0, int n_steps, kr_step_fn step, void *state,
                    const int *step_its, long checks, const kr_test *tests, int n_tests,
                    long *it_done, int *finished);
/* 1 where k's preconditioner can run inside a fused kernel (pointwise,
 * the identity, or sparse products: gs_pc), with f zeroed and its method,
 * A and M filled; 0 (f untouched) where it cannot. */
int kr_fused_begin(kr_ctx *k, int method, gs_fused *f);
/* The whole solve in the engine's fused kernel where it can (opts->use_capture
 * and the engine's fused_run; f as loop.h says, set up by the method): a
 * check after every opts->check_every iterations (1 when adaptive), the
 * tests and moves as for kr_device_loop. *finished = 1 when it ran (the
 * result then holds the verdict), else 0 and nothing ran. */
int kr_fused(kr_ctx *k, const gs_fused *f, const kr_test *tests, int n_tests,
             const int (*moves)[2], int n_moves, int *finished);


#endif
