/* error.h - status codes and the error record every fallible function fills.
 * Library code never prints or exits: it returns a status and describes the
 * failure in a gs_error; main() turns that into a message and an exit code. */
#ifndef GS_ERROR_H
#define GS_ERROR_H

#include <stddef.h>

typedef enum gs_status {
    GS_OK = 0,
    GS_ERR_USAGE,       /* bad command line or parameter          -> exit 1 */
    GS_ERR_INPUT,       /* bad input file or matrix property      -> exit 1 */
    GS_ERR_NOMEM,       /* host or device allocation failed       -> exit 3 */
    GS_ERR_CUDA,        /* CUDA / cuSPARSE / cuBLAS call failed   -> exit 3 */
    GS_ERR_IO,          /* cannot open / write a file             -> exit 1 */
    GS_ERR_NUMERIC,     /* breakdown in a setup (zero pivot, ...) -> exit 1 */
    GS_ERR_UNSUPPORTED, /* valid request this build cannot do     -> exit 1 */
    GS_ERR_INTERNAL,    /* a bug: an invariant did not hold       -> exit 3 */
    GS_ERR_TIME_LIMIT   /* --time-limit passed during a setup: not an error of the
                           input; the run ends with reason "time limit", exit 2 */
} gs_status;

#define GS_ERROR_MSG_LEN 1024

typedef struct gs_error {
    gs_status status;
    char msg[GS_ERROR_MSG_LEN];
} gs_error;

/* Record a failure and return its status, so callers write
 *   return gs_error_set(err, GS_ERR_INPUT, "%s:%ld: bad value", file, line);
 * err may be NULL (the message is dropped, the status still returned).
 * A second call keeps the first message: the root cause wins. */
int gs_error_set(gs_error *err, gs_status status, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;

/* Prefix context onto an existing message ("reading A.mtx: " + msg). */
void gs_error_prefix(gs_error *err, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

void gs_error_clear(gs_error *err);

/* Process exit code for a status (DESIGN.md: 1 usage/input, 3 runtime). */
int gs_status_exit_code(gs_status status);

const char *gs_status_name(gs_status status);

/* Allocation helpers that record GS_ERR_NOMEM with the byte count and what
 * was being allocated; they return NULL on failure. The failure injector lets
 * tests reach every error path (CSparse's Tcov idea): after
 * gs_alloc_fail_after(k) the k-th next allocation fails; -1 disables it.
 * The counter is per thread, so it is not global state shared by engines. */
void *gs_malloc(size_t bytes, const char *what, gs_error *err);
void *gs_calloc(size_t count, size_t size, const char *what, gs_error *err);
void *gs_realloc(void *ptr, size_t bytes, const char *what, gs_error *err);
void gs_alloc_fail_after(long k);

/* GS_TRY(expr): evaluate expr (a status); on failure jump to `cleanup`
 * with `status` set. The one-cleanup-label pattern of STYLE.md. */
#define GS_TRY(expr)                                                          \
    do {                                                                      \
        status = (expr);                                                      \
        if (status != GS_OK) goto cleanup;                                    \
    } while (0)

#endif
