/* cliutil.h - running the built program from a Check suite: its exit code and
 * output, and fields of its CSV report. Header-only (each suite is one
 * executable); used by the suites that test gpusolve as users run it. */
#ifndef GS_CLIUTIL_H
#define GS_CLIUTIL_H

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

static inline const char *tu_binary(void)
{
    const char *b = getenv("GPUSOLVE");
    return b && *b ? b : "build/gpusolve";
}

typedef struct tu_cmd_out {
    int code;   /* exit status; -1 if killed by a signal */
    char *text; /* stdout and stderr, in the order written */
} tu_cmd_out;

/* Run `env_prefix gpusolve args` through the shell, one OpenMP thread. */
static inline tu_cmd_out tu_run_env(const char *env_prefix, const char *args)
{
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "OMP_NUM_THREADS=1 %s %s %s 2>&1", env_prefix, tu_binary(), args);
    FILE *p = popen(cmd, "r");
    ck_assert_ptr_nonnull(p);
    size_t cap = 1 << 16, len = 0, got;
    char *buf = malloc(cap);
    ck_assert_ptr_nonnull(buf);
    while ((got = fread(buf + len, 1, cap - len - 1, p)) > 0) {
        len += got;
        if (len + 1 == cap) {
            buf = realloc(buf, cap *= 2);
            ck_assert_ptr_nonnull(buf);
        }
    }
    buf[len] = '\0';
    const int st = pclose(p);
    tu_cmd_out o = {WIFEXITED(st) ? WEXITSTATUS(st) : -1, buf};
    return o;
}

static inline tu_cmd_out tu_run(const char *args) { return tu_run_env("", args); }

#define TU_ASSERT_HAS(out, frag)                                                                   \
    ck_assert_msg(strstr((out).text, frag) != NULL, "expected '%s' in:\n%s", frag, (out).text)
#define TU_ASSERT_LACKS(out, frag)                                                                 \
    ck_assert_msg(strstr((out).text, frag) == NULL, "did not expect '%s' in:\n%s", frag, (out).text)

static inline void tu_assert_exit(tu_cmd_out o, int code)
{
    ck_assert_msg(o.code == code, "exit %d (want %d):\n%s", o.code, code, o.text);
}

/* Split one CSV line in place into fields (quotes honoured, "" is a quote);
 * returns the count. */
static inline int tu_csv_split(char *line, char **f, int max)
{
    int n = 0;
    char *w = line, *r = line;
    while (n < max) {
        f[n++] = w;
        if (*r == '"') {
            r++;
            while (*r && !(*r == '"' && r[1] != '"')) {
                if (*r == '"') r++;
                *w++ = *r++;
            }
            if (*r == '"') r++;
        } else {
            while (*r && *r != ',' && *r != '\n') *w++ = *r++;
        }
        if (*r != ',') {
            *w = '\0';
            break;
        }
        *w++ = '\0';
        r++;
    }
    return n;
}

/* Field `name` of data row `row` (0-based) of a CSV report inside text (the
 * first line starting "matrix," is the header), copied to out; 0 if absent. */
static inline int tu_csv_field(const char *text, int row, const char *name, char *out, size_t len)
{
    enum { MAXF = 96 };
    const char *h = strstr(text, "matrix,");
    if (!h || (h != text && h[-1] != '\n')) return 0;
    char *copy = strdup(h), *f[MAXF], *g[MAXF];
    char *line = strtok(copy, "\n"), *data = NULL;
    const int nh = line ? tu_csv_split(line, f, MAXF) : 0;
    for (int r = 0; r <= row && line; r++) data = line = strtok(NULL, "\n");
    int found = 0;
    if (data) {
        const int nd = tu_csv_split(data, g, MAXF);
        for (int i = 0; i < nh && i < nd && !found; i++)
            if (strcmp(f[i], name) == 0) found = snprintf(out, len, "%s", g[i]) >= 0;
    }
    free(copy);
    return found;
}

#endif
