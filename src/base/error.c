/* error.c - the error record, exit-code mapping and checked allocation.
 * See error.h; the fail-after counter follows CSparse's Tcov malloc tests. */
#include "error.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int gs_error_set(gs_error *err, gs_status status, const char *fmt, ...)
{
    if (err && err->status == GS_OK) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err->msg, sizeof err->msg, fmt, ap);
        va_end(ap);
        err->status = status;
    }
    return (int)status;
}

void gs_error_prefix(gs_error *err, const char *fmt, ...)
{
    if (!err || err->status == GS_OK) return;
    char old[GS_ERROR_MSG_LEN];
    memcpy(old, err->msg, sizeof old);
    va_list ap;
    va_start(ap, fmt);
    int len = vsnprintf(err->msg, sizeof err->msg, fmt, ap);
    va_end(ap);
    if (len >= 0 && (size_t)len < sizeof err->msg) {
        size_t room = sizeof err->msg - (size_t)len - 1, keep = strlen(old);
        if (keep > room) keep = room;
        memcpy(err->msg + len, old, keep);
        err->msg[(size_t)len + keep] = '\0';
    }
}

void gs_error_clear(gs_error *err)
{
    if (!err) return;
    err->status = GS_OK;
    err->msg[0] = '\0';
}

int gs_status_exit_code(gs_status status)
{
    switch (status) {
    case GS_OK: return 0;
    case GS_ERR_NOMEM:
    case GS_ERR_CUDA:
    case GS_ERR_INTERNAL: return 3;
    case GS_ERR_TIME_LIMIT: return 2;
    default: return 1;
    }
}

const char *gs_status_name(gs_status status)
{
    static const char *names[] = {"ok",       "usage error",   "input error",
                                  "out of memory", "CUDA error", "I/O error",
                                  "numerical breakdown", "unsupported",
                                  "internal error", "time limit"};
    if ((unsigned)status < sizeof names / sizeof names[0]) return names[status];
    return "unknown error";
}

static _Thread_local long fail_after = -1;

void gs_alloc_fail_after(long k) { fail_after = k; }

static int injected_failure(void)
{
    if (fail_after < 0) return 0;
    if (fail_after == 0) { fail_after = -1; return 1; }
    fail_after--;
    return 0;
}

void *gs_malloc(size_t bytes, const char *what, gs_error *err)
{
    void *p = injected_failure() ? NULL : malloc(bytes ? bytes : 1);
    if (!p)
        gs_error_set(err, GS_ERR_NOMEM, "out of host memory allocating %zu bytes for %s",
                     bytes, what);
    return p;
}

void *gs_calloc(size_t count, size_t size, const char *what, gs_error *err)
{
    void *p = injected_failure() ? NULL : calloc(count ? count : 1, size ? size : 1);
    if (!p)
        gs_error_set(err, GS_ERR_NOMEM, "out of host memory allocating %zu x %zu bytes for %s",
                     count, size, what);
    return p;
}

void *gs_realloc(void *ptr, size_t bytes, const char *what, gs_error *err)
{
    void *p = injected_failure() ? NULL : realloc(ptr, bytes ? bytes : 1);
    if (!p)
        gs_error_set(err, GS_ERR_NOMEM, "out of host memory growing %s to %zu bytes", what,
                     bytes);
    return p;
}
