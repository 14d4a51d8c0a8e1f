/* mmio.h - Matrix Market reader and writer (NIST Matrix Market exchange
 * format: https://math.nist.gov/MatrixMarket/formats.html), plain or gzip. */
#ifndef GS_MMIO_H
#define GS_MMIO_H

#include <stdint.h>

#include "csr.h"
#include "error.h"

typedef enum gs_mm_field { GS_MM_REAL, GS_MM_INTEGER, GS_MM_PATTERN } gs_mm_field;
typedef enum gs_mm_symmetry {
    GS_MM_GENERAL,
    GS_MM_SYMMETRIC,
    GS_MM_SKEW_SYMMETRIC
} gs_mm_symmetry;

typedef struct gs_mm_info {
    int is_array;            /* 1 for the dense `array` format */
    gs_mm_field field;
    gs_mm_symmetry symmetry;
    int64_t rows, cols;
    int64_t entries_stored;  /* entries in the file (before expansion) */
    int64_t duplicates;      /* coordinate entries summed into another */
} gs_mm_info;

/* Read a `coordinate` matrix into full CSR: symmetric and skew-symmetric
 * storage expanded, duplicates summed, rows sorted; pattern files get value 1
 * for every entry (so they can be solved with). `.gz` files (by content, not
 * name) are read through zlib. complex/hermitian/array-matrix files are
 * refused. Errors name the file and line. info may be NULL.
 *
 * Details (mmio.c): content errors are GS_ERR_INPUT with the message
 * "FILE:LINE: what" (a premature end of file names the file's last line);
 * open/read failures are GS_ERR_IO "FILE: cannot ...: strerror" (corrupt or
 * truncated gzip data too); out of memory is GS_ERR_NOMEM "FILE: ...". Values
 * are bit for bit what strtod gives; nan, inf, values overflowing a double,
 * nonzero values that underflow (below DBL_MIN: strtod gives 0 or a
 * subnormal) and hex floats are refused. A skew-symmetric file may store explicit zeros on
 * the diagonal, not other values; pattern + skew-symmetric is refused (as in
 * NIST's mm_is_valid). Entries in the "wrong" triangle of symmetric storage
 * are mirrored like the others. duplicates counts stored entries summed into
 * another (for symmetric storage, a_ij and a_ji stored both count once).
 * Sizes must fit int32; a size line announcing more entries than
 * rows*cols is refused. Pattern duplicates are merged (value 1, not 2).
 * Memory and time are bounded by the file, not by its size line: entry
 * arrays hold at most the entries the text can contain (decompressed bytes
 * for gzip), and a matrix announcing more rows than its entries (mirrors
 * included) can fill is refused at the size line ("row R has no entries")
 * before any per-row array is allocated: it has an empty row, so it is
 * singular. Other matrices with empty rows are read.
 * Parsing runs in parallel (OpenMP) on files of more than 256 KiB. */
int gs_mm_read_csr(const char *path, gs_csr *A, gs_mm_info *info, gs_error *err);

/* ---- one part of a file per process (mpirun; docs/multigpu.md) ----
 * The body (the lines after the size line) is cut into `parts` byte ranges
 * of equal length; part r holds the whole lines that start in its range (a
 * range that starts mid-line skips to the next line; the line a range ends
 * in is finished). Only that part is read (pread), never the whole file. */

/* Coordinate entries: 0-based indices (NULL for array files), values (NULL
 * for pattern files). */
typedef struct gs_mm_entries {
    int32_t *row, *col;
    double *val;
    int64_t count;
} gs_mm_entries;
void gs_mm_entries_free(gs_mm_entries *e);

/* The banner and size line of a file, as gs_mm_read_csr checks them (same
 * messages), read from its first bytes only. whole = 1 (a gzip file, by its
 * magic bytes, or not a regular file: a pipe) parses nothing: such a file
 * has no byte ranges, read it whole (gs_mm_read_csr). */
typedef struct gs_mm_head {
    gs_mm_info info;
    int64_t expected;  /* entry lines the size line announces */
    int64_t body;      /* file offset of the first line after the size line */
    int64_t body_line; /* its line number */
    int64_t head_newlines; /* '\n' bytes before body */
    int64_t size;      /* file bytes */
    int ends_in_newline;
    int whole;
} gs_mm_head;
int gs_mm_read_head(const char *path, gs_mm_head *h, gs_error *err);

/* Part `part` of `parts`: read and counted (lines = its '\n' bytes, entries =
 * its entry lines), ready to parse once the parts before it are counted. */
typedef struct gs_mm_part {
    char *text;       /* the part's lines, NUL-padded */
    size_t len;
    int64_t lines, entries;
    void *chunks;     /* the parse's chunks (mmio.c) */
    int n_chunks;
} gs_mm_part;
int gs_mm_part_read(const char *path, const gs_mm_head *h, int part, int parts, gs_mm_part *p,
                    gs_error *err);
/* Parses the part's entries into e (stored entries only: no mirrors), its
 * first line being number first_line and its first entry line entry number
 * first_entry of the file (the counts of the parts before it): the checks
 * and messages of gs_mm_read_csr, "too many entries" included; a part's
 * first error is the file's first error among its lines. */
int gs_mm_part_parse(const char *path, const gs_mm_head *h, gs_mm_part *p, int64_t first_line,
                     int64_t first_entry, gs_mm_entries *e, gs_error *err);
void gs_mm_part_free(gs_mm_part *p);
/* gs_mm_read_csr's errors about the whole file: fewer entries than announced
 * (last_line: the line the file ends on), and a row that no entry reaches
 * (count entries with mirrors, empty the first such row, 0-based). */
int gs_mm_fail_premature_end(const char *path, int64_t last_line, int64_t expected,
                             int64_t found, gs_error *err);
int gs_mm_fail_empty_row(const char *path, const gs_mm_head *h, int64_t empty, int64_t count,
                         gs_error *err);

/* Read a dense vector: `array real general` n x 1 (or 1 x n), or a
 * `coordinate` n x 1 file. *x is malloc'ed, *n set. A coordinate vector's
 * absent entries are 0: its n doubles are allocated (calloc) once its
 * entries are read and valid. */
int gs_mm_read_vector(const char *path, double **x, int64_t *n, gs_error *err);
/* The same for a vector that must have `length` entries (the matrix's rows):
 * any other length is refused at the size line (GS_ERR_INPUT, FILE:LINE),
 * before anything is allocated for it, so a lying size line costs nothing.
 * length < 0 accepts any length, as gs_mm_read_vector. */
int gs_mm_read_vector_of_length(const char *path, int64_t length, double **x, int64_t *n,
                                gs_error *err);

/* Write A as `coordinate real general` (or `pattern` when A->val is NULL);
 * symmetric = 1 writes only the lower triangle under a `symmetric` header
 * (caller guarantees A is symmetric). A path ending in .gz is gzip-compressed.
 * comment (may be NULL) becomes a `%` line. Values are written with 17
 * significant digits so that a round trip is exact.
 * Every write is checked (a full disk is GS_ERR_IO); on failure the file may
 * be left incomplete. A multi-line comment gives one `%` line per line. */
int gs_mm_write_csr(const char *path, const gs_csr *A, int symmetric, const char *comment,
                    gs_error *err);
/* Write x as `array real general` n x 1. */
int gs_mm_write_vector(const char *path, const double *x, int64_t n, const char *comment,
                       gs_error *err);

#endif
