/* testutil.h - helpers shared by the Check suites: where the real matrices
 * are, random inputs, and small comparisons. Header-only on purpose (each
 * suite is one executable). */
#ifndef GS_TESTUTIL_H
#define GS_TESTUTIL_H

#include <check.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Folder of the shared SuiteSparse matrices: $GS_MATRICES, else
 * ../shared/matrices (tests run from the repository root). NULL if absent:
 * suites then skip those tests with a message. */
static inline const char *tu_matrices_dir(void)
{
    const char *env = getenv("GS_MATRICES");
    const char *dir = env && *env ? env : "../shared/matrices";
    char probe[1024];
    snprintf(probe, sizeof probe, "%s/MANIFEST.tsv", dir);
    if (access(probe, R_OK) != 0) return NULL;
    return dir;
}

static inline void tu_matrix_path(char *buf, size_t len, const char *name)
{
    snprintf(buf, len, "%s/%s.mtx", tu_matrices_dir(), name);
}

/* Deterministic per-test generator (xorshift64*), seeded per call site. */
typedef struct tu_rng { uint64_t s; } tu_rng;
static inline tu_rng tu_rng_seed(uint64_t seed)
{
    tu_rng r = {seed * 0x9E3779B97F4A7C15ull + 1};
    return r;
}
static inline uint64_t tu_next(tu_rng *r)
{
    r->s ^= r->s >> 12;
    r->s ^= r->s << 25;
    r->s ^= r->s >> 27;
    return r->s * 2685821657736338717ull;
}
static inline double tu_uniform(tu_rng *r) /* [0, 1) */
{
    return (double)(tu_next(r) >> 11) * (1.0 / 9007199254740992.0);
}

/* A fresh temporary file name under /tmp (the file is created empty). */
static inline void tu_tmpname(char *buf, size_t len, const char *suffix)
{
    snprintf(buf, len, "/tmp/gs_test_XXXXXX");
    int fd = mkstemp(buf);
    if (fd >= 0) close(fd);
    if (suffix && *suffix) {
        char old[64];
        memcpy(old, buf, sizeof "/tmp/gs_test_XXXXXX"); /* mkstemp keeps the length */
        size_t used = strlen(buf);
        if (used + strlen(suffix) < len) {
            memcpy(buf + used, suffix, strlen(suffix) + 1);
            rename(old, buf);
        }
    }
}

static inline void tu_write_text(const char *path, const char *text)
{
    FILE *f = fopen(path, "wb");
    ck_assert_ptr_nonnull(f);
    fputs(text, f);
    fclose(f);
}

static inline double tu_max_abs_diff(const double *a, const double *b, int64_t n)
{
    double m = 0;
    for (int64_t i = 0; i < n; i++) {
        double d = fabs(a[i] - b[i]);
        if (!(d <= m)) m = d; /* NaN propagates as the max */
    }
    return m;
}

/* Run a Check suite with the usual runner and return the process status. */
static inline int tu_run_suite(Suite *s)
{
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? 0 : 1;
}

#endif
