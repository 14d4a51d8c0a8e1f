/* fuzz_mmio.c - libFuzzer target for the Matrix Market reader (src/io/mmio.c).
 * Reference: libFuzzer (llvm.org/docs/LibFuzzer.html); NIST Matrix Market format.
 *
 * Each input is read three ways: as a matrix and as a vector (of a set
 * length: gs_mm_read_vector_of_length) from a file
 * holding the bytes as they are (a fuzzed .gz seed exercises corrupt gzip),
 * and as a matrix from the same bytes gzip-compressed (valid gzip, any text),
 * since the reader tells gzip by content. Beyond the sanitizers' findings,
 * the reader's contract is checked: a read either succeeds with a valid
 * CSR or fails with an input, I/O or out-of-memory status whose message
 * names the file, and nothing is returned on failure. Build: make fuzz. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

#include "csr.h"
#include "error.h"
#include "mmio.h"

/* A broken contract is a finding: report it and abort, so libFuzzer saves the input. */
#define REQUIRE(cond, ...)                                                    \
    do {                                                                      \
        if (!(cond)) {                                                        \
            fprintf(stderr, "fuzz_mmio: contract broken: " __VA_ARGS__);      \
            fprintf(stderr, "\n");                                            \
            abort();                                                          \
        }                                                                     \
    } while (0)

static char raw_path[64], gz_path[64];

static void remove_files(void)
{
    remove(raw_path);
    remove(gz_path);
}

/* One pair of files per process (libFuzzer's -jobs run several), in memory
 * where there is a tmpfs: ext4 flushes a truncated, rewritten file at close,
 * which made /tmp 40 times slower. */
static void make_paths(void)
{
    if (raw_path[0]) return;
    const char *dir = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
    snprintf(raw_path, sizeof raw_path, "%s/fuzz_mmio_%ld.mtx", dir, (long)getpid());
    snprintf(gz_path, sizeof gz_path, "%s/fuzz_mmio_%ld.mtx.gz", dir, (long)getpid());
    atexit(remove_files);
}

static void write_file(const char *path, const uint8_t *data, size_t size, int compress)
{
    if (compress) {
        gzFile gz = gzopen(path, "wb1");
        REQUIRE(gz && (size == 0 || gzwrite(gz, data, (unsigned)size) == (int)size) &&
                    gzclose(gz) == Z_OK, "cannot write %s", path);
        return;
    }
    FILE *f = fopen(path, "wb");
    REQUIRE(f && fwrite(data, 1, size, f) == size && fclose(f) == 0, "cannot write %s", path);
}

/* A failed read: a status the reader may give for a file, a message that
 * starts with the path ("PATH:LINE: " for content errors). */
static void check_failure(const char *path, int status, const gs_error *err)
{
    size_t n = strlen(path);
    REQUIRE(status == GS_ERR_INPUT || status == GS_ERR_IO || status == GS_ERR_NOMEM,
            "%s: status %d: %s", path, status, err->msg);
    REQUIRE(err->status == (gs_status)status, "%s: err.status %d != %d", path, err->status,
            status);
    REQUIRE(strncmp(err->msg, path, n) == 0 && err->msg[n] == ':',
            "message '%s' does not start with '%s:'", err->msg, path);
    if (status == GS_ERR_INPUT) {
        const char *p = err->msg + n + 1;
        REQUIRE(*p >= '1' && *p <= '9', "input error '%s' names no line", err->msg);
    }
}

static void check_matrix(const char *path)
{
    gs_csr A;
    gs_mm_info info;
    gs_error err = {GS_OK, ""};
    int status = gs_mm_read_csr(path, &A, &info, &err);
    if (status != GS_OK) {
        check_failure(path, status, &err);
        REQUIRE(!A.row_ptr && !A.col && !A.val, "%s: arrays returned with an error", path);
        return;
    }
    gs_error invalid = {GS_OK, ""};
    REQUIRE(gs_csr_validate(&A, &invalid) == GS_OK, "%s: %s", path, invalid.msg);
    REQUIRE(A.n_rows == info.rows && A.n_cols == info.cols, "%s: size differs from info", path);
    int64_t reach = info.entries_stored * (info.symmetry == GS_MM_GENERAL ? 1 : 2);
    REQUIRE(A.n_rows <= reach || A.n_rows == 0, "%s: %d rows, %lld entries: empty rows read",
            path, (int)A.n_rows, (long long)info.entries_stored);
    REQUIRE(A.nnz <= reach, "%s: nnz %lld beyond the entries", path, (long long)A.nnz);
    REQUIRE(info.duplicates >= 0 && info.duplicates <= info.entries_stored,
            "%s: duplicates %lld", path, (long long)info.duplicates);
    for (int64_t k = 0; k < A.nnz; k++) {
        REQUIRE(isfinite(A.val[k]), "%s: a value is %g", path, A.val[k]);
        REQUIRE(info.field != GS_MM_PATTERN || A.val[k] == 1.0, "%s: pattern value", path);
    }
    gs_csr_free(&A);
}

/* The run reads a vector for a matrix of known size; a coordinate vector's
 * absent entries are 0, so without a length its size line alone would set
 * the allocation (up to 16 GiB). Any fixed length stands for the matrix's. */
enum { VECTOR_LENGTH = 3 };

static void check_vector(const char *path)
{
    double *x = NULL;
    int64_t n = -1;
    gs_error err = {GS_OK, ""};
    int status = gs_mm_read_vector_of_length(path, VECTOR_LENGTH, &x, &n, &err);
    if (status != GS_OK) {
        check_failure(path, status, &err);
        REQUIRE(!x, "%s: vector returned with an error", path);
        return;
    }
    REQUIRE(n == VECTOR_LENGTH && x, "%s: n = %lld", path, (long long)n);
    for (int64_t i = 0; i < n; i++) REQUIRE(isfinite(x[i]), "%s: x[%lld] = %g", path, (long long)i, x[i]);
    free(x);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    make_paths();
    write_file(raw_path, data, size, 0);
    check_matrix(raw_path);
    check_vector(raw_path);
    write_file(gz_path, data, size, 1);
    check_matrix(gz_path);
    return 0;
}
