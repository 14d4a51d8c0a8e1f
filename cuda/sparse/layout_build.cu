/* layout_build.cu - the layouts built on the device from CSR: slice plans and pointers, the sigma
 * sort, SELL-C-sigma fill (Kreutzer et al. 2014), vector-CSR, the triangular factor's copy. */
#include <cub/block/block_reduce.cuh>
#include <cub/block/block_scan.cuh>
#include <cub/device/device_radix_sort.cuh>
#include <cub/device/device_reduce.cuh>
#include <cub/device/device_scan.cuh>

#include "layout.h"

/* ------------------------------------------------------ building a matrix */

/* size[s] = 32 * (longest row of slice s), rows taken through perm. */
__global__ void slice_size_kernel(const int32_t *__restrict__ len, const int32_t *__restrict__ perm,
                                  int64_t n, int64_t n_slices, int64_t *__restrict__ size)
{
    const int64_t t = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    const int64_t s = t >> 5;
    if (s >= n_slices) return; /* whole warps leave together: n_slices * 32 threads */
    const int64_t r = t;
    int l = r < n ? len[perm ? perm[r] : r] : 0;
    l = __reduce_max_sync(0xffffffffu, l);
    if ((t & 31) == 0) size[s] = (int64_t)SELL_C * l;
}

/* key = (window, longest first): one radix sort orders every window. */
__global__ void sort_key_kernel(const int32_t *__restrict__ len, int64_t n, int64_t sigma,
                                unsigned long long *__restrict__ key, int32_t *__restrict__ idx)
{
    int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    key[i] = ((unsigned long long)(i / sigma) << 32) | (0xffffffffu - (unsigned)len[i]);
    idx[i] = (int32_t)i;
}

template <typename V>
__global__ void convert_values_kernel(const double *__restrict__ in, int64_t n, V *__restrict__ out)
{
    int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = (V)in[i];
}

/* Triangular factor for SpSV: int32 row pointers, fp64 values rounded
 * through float when the matrix is stored in fp32 (as the CPU engine does). */
__global__ void tri_copy_kernel(const int64_t *__restrict__ row_ptr, int64_t n, int64_t nnz,
                                const double *__restrict__ val, int round_fp32,
                                int32_t *__restrict__ row_ptr32, double *__restrict__ val_out)
{
    int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i <= n) row_ptr32[i] = (int32_t)row_ptr[i];
    if (i < nnz) val_out[i] = round_fp32 ? (double)(float)val[i] : val[i];
}

/* The row (1-based) whose zero or missing diagonal the CPU engine's
 * substitution meets first: the lowest for a lower triangle (*first starts
 * at n + 1), the highest for an upper one (*first starts at 0). */
__global__ void zero_diagonal_kernel(const int32_t *__restrict__ row_ptr,
                                     const int32_t *__restrict__ col,
                                     const double *__restrict__ val, int64_t n, int upper,
                                     int *__restrict__ first)
{
    int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    double d = 0.0;
    for (int32_t k = row_ptr[i]; k < row_ptr[i + 1]; k++)
        if (col[k] == i) d = val[k];
    if (d != 0.0) return;
    if (upper)
        atomicMax(first, (int)i + 1);
    else
        atomicMin(first, (int)i + 1);
}

#define SLICE_INFO_BLOCK 1024

struct max_op {
    __device__ int64_t operator()(int64_t a, int64_t b) const { return a > b ? a : b; }
};

/* info = {slice_ptr[ns], sizes[ns - 1], the largest size}: the three read in
 * one round trip; info[2] is zero on entry. Each block takes a strided share
 * of the slices and folds its largest into info[2] (sizes are >= 0). */
__global__ void __launch_bounds__(SLICE_INFO_BLOCK)
    slice_info_kernel(const int64_t *slice_ptr, const int64_t *sizes, int64_t ns, int64_t *info)
{
    typedef cub::BlockReduce<int64_t, SLICE_INFO_BLOCK> block_reduce;
    __shared__ typename block_reduce::TempStorage tmp;
    int64_t widest = 0;
    for (int64_t s = (int64_t)blockIdx.x * SLICE_INFO_BLOCK + threadIdx.x; s < ns;
         s += (int64_t)gridDim.x * SLICE_INFO_BLOCK)
        widest = max(widest, sizes[s]);
    widest = block_reduce(tmp).Reduce(widest, max_op());
    if (threadIdx.x == 0) atomicMax((unsigned long long *)&info[2], (unsigned long long)widest);
    if (threadIdx.x == 0 && blockIdx.x == 0) {
        info[0] = slice_ptr[ns];
        info[1] = sizes[ns - 1];
    }
}

/* The host's share of a slice plan from its info = {stored entries, the
 * last slice's size, the widest slice's size}: P, the padding measure over
 * real rows (ghost rows of the last slice excluded) and the widest slice's
 * width. slice_plan_read brings the info in a round trip of its own. */
void slice_plan_sizes(const gs_mat *m, const int64_t info[3], int64_t *P, int64_t *P_real,
                             int64_t *width_max)
{
    *P = info[0];
    *P_real = info[0] - (m->n_slices * SELL_C - m->n_rows) * (info[1] / SELL_C);
    *width_max = info[2] / SELL_C;
}

static int slice_plan_read(gs_engine *e, const gs_mat *m, const int64_t *d_info, int64_t *P,
                           int64_t *P_real, int64_t *width_max)
{
    gs_cuda_impl *c = gs_cuda_of(e);
    int64_t info[3] = {0, 0, 0};
    int status = CUDA_CALL(&e->err, cudaMemcpyAsync(info, d_info, sizeof info,
                                                    cudaMemcpyDeviceToHost, c->stream));
    if (status == GS_OK) status = CUDA_CALL(&e->err, cudaStreamSynchronize(c->stream));
    slice_plan_sizes(m, info, P, P_real, width_max);
    return status;
}

/* Matrices of at most SLICE_SMALL_BLOCK slices in their own row order: the
 * slice sizes straight from the row pointers (a thread a slice), their scan
 * into slice_ptr and the info of slice_info_kernel, in one block: one launch
 * where build_slice_ptr takes six, each a few us of the host's time while
 * the device waits on small matrices (three builds in a small FSAI setup:
 * A, G and G^T). */
__global__ void __launch_bounds__(SLICE_SMALL_BLOCK)
    slice_small_kernel(const int64_t *__restrict__ row_ptr, int64_t n, int64_t ns,
                       int64_t *__restrict__ slice_ptr, int64_t *__restrict__ info)
{
    typedef cub::BlockScan<int64_t, SLICE_SMALL_BLOCK, cub::BLOCK_SCAN_WARP_SCANS> block_scan;
    typedef cub::BlockReduce<int64_t, SLICE_SMALL_BLOCK> block_reduce;
    __shared__ union {
        typename block_scan::TempStorage scan;
        typename block_reduce::TempStorage reduce;
    } tmp;
    const int64_t s = threadIdx.x;
    int64_t size = 0, incl = 0;
    if (s < ns) {
        const int64_t r1 = (s + 1) * SELL_C < n ? (s + 1) * SELL_C : n;
        int64_t widest = 0;
        for (int64_t r = s * SELL_C; r < r1; r++) widest = max(widest, row_ptr[r + 1] - row_ptr[r]);
        size = SELL_C * widest;
    }
    block_scan(tmp.scan).InclusiveSum(size, incl);
    if (s < ns) slice_ptr[s + 1] = incl;
    if (s == 0) slice_ptr[0] = 0;
    if (s == ns - 1) {
        info[0] = incl;
        info[1] = size;
    }
    __syncthreads(); /* tmp is reused */
    const int64_t widest = block_reduce(tmp.reduce).Reduce(size, max_op());
    if (s == 0) info[2] = widest;
}

int gs_cuda_sell_plan_start(gs_engine *e, int32_t n_rows, const int64_t *row_ptr,
                            gs_cuda_sell_plan *p)
{
    const int64_t ns = ((int64_t)n_rows + SELL_C - 1) / SELL_C;
    int status = GS_OK;
    *p = gs_cuda_sell_plan{};
    p->n_slices = ns;
    if (ns == 0 || ns > SLICE_SMALL_BLOCK) return GS_OK; /* no plan: built as usual */
    GS_TRY(gs_cuda_alloc(e, &p->slice_ptr, ((size_t)ns + 1) * sizeof(int64_t),
                         "SELL slice pointers"));
    GS_TRY(gs_cuda_alloc(e, &p->info, 3 * sizeof(int64_t), "SELL build: sizes"));
    GS_TRY(CUDA_LAUNCH(&e->err, slice_small_kernel, 1, SLICE_SMALL_BLOCK, 0, gs_cuda_of(e)->stream,
                       row_ptr, (int64_t)n_rows, ns, p->slice_ptr, p->info));
cleanup:
    if (status != GS_OK) gs_cuda_sell_plan_free(e, p);
    return status;
}

void gs_cuda_sell_plan_free(gs_engine *e, gs_cuda_sell_plan *p)
{
    if (!p) return;
    gs_cuda_free(e, p->slice_ptr, ((size_t)p->n_slices + 1) * sizeof(int64_t));
    gs_cuda_free(e, p->info, 3 * sizeof(int64_t));
    p->slice_ptr = NULL, p->info = NULL;
}

int build_slice_ptr_small(gs_engine *e, gs_mat *m, const int64_t *row_ptr, int64_t *P,
                                 int64_t *P_real, int64_t *width_max)
{
    gs_cuda_impl *c = gs_cuda_of(e);
    int status = GS_OK;
    int64_t *d_info = NULL;
    GS_TRY(gs_cuda_alloc(e, &d_info, 3 * sizeof(int64_t), "SELL build: sizes"));
    GS_TRY(CUDA_LAUNCH(&e->err, slice_small_kernel, 1, SLICE_SMALL_BLOCK, 0, c->stream, row_ptr,
                       (int64_t)m->n_rows, m->n_slices, m->slice_ptr, d_info));
    GS_TRY(slice_plan_read(e, m, d_info, P, P_real, width_max));
cleanup:
    gs_cuda_free(e, d_info, 3 * sizeof(int64_t));
    return status;
}

/* slice_ptr = [0, cumulative sizes]; returns P = stored entries and the
 * padding measure over real rows (ghost rows of the last slice excluded). */
int build_slice_ptr(gs_engine *e, gs_mat *m, const int32_t *len, int64_t *sizes,
                           int64_t *P, int64_t *P_real, int64_t *width_max)
{
    gs_cuda_impl *c = gs_cuda_of(e);
    int status = GS_OK;
    int64_t *d_info = NULL; /* stored, last slice, widest slice */
    const int64_t ns = m->n_slices;
    GS_TRY(CUDA_LAUNCH(&e->err, slice_size_kernel, blocks_for(ns * 32), GS_CUDA_BLOCK, 0, c->stream,
                       len, (const int32_t *)m->perm, (int64_t)m->n_rows, ns, sizes));
    GS_TRY(CUDA_CALL(&e->err, cudaMemsetAsync(m->slice_ptr, 0, sizeof(int64_t), c->stream)));
    GS_TRY(gs_dscan_inclusive(e, sizes, m->slice_ptr + 1, ns));
    GS_TRY(gs_cuda_alloc(e, &d_info, 3 * sizeof(int64_t), "SELL build: sizes"));
    GS_TRY(CUDA_CALL(&e->err, cudaMemsetAsync(d_info + 2, 0, sizeof(int64_t), c->stream)));
    {
        /* a block per 16 x 1024 slices (one block up to n = 512K rows), at
         * most the device's resident blocks */
        int64_t grid = (ns + 16 * SLICE_INFO_BLOCK - 1) / (16 * SLICE_INFO_BLOCK);
        if (grid > 2 * (int64_t)c->sm_count) grid = 2 * (int64_t)c->sm_count;
        GS_TRY(CUDA_LAUNCH(&e->err, slice_info_kernel, grid < 1 ? 1 : grid, SLICE_INFO_BLOCK, 0,
                           c->stream, (const int64_t *)m->slice_ptr, (const int64_t *)sizes, ns,
                           d_info));
    }
    GS_TRY(slice_plan_read(e, m, d_info, P, P_real, width_max));
cleanup:
    gs_cuda_free(e, d_info, 3 * sizeof(int64_t));
    return status;
}

/* perm = rows sorted by length (longest first) within windows of sigma. */
int sort_rows(gs_engine *e, gs_mat *m, const int32_t *len)
{
    gs_cuda_impl *c = gs_cuda_of(e);
    const int64_t n = m->n_rows;
    unsigned long long *key_in = NULL, *key_out = NULL;
    int32_t *idx = NULL;
    void *tmp = NULL;
    size_t tmp_bytes = 0;
    int status = GS_OK, end_bit = 32;
    const int64_t sigma = m->sigma;
    while (end_bit < 64 && ((n - 1) / sigma) >> (end_bit - 32)) end_bit++;
    GS_TRY(gs_cuda_alloc(e, &key_in, n * sizeof *key_in, "SELL build: sort keys"));
    GS_TRY(gs_cuda_alloc(e, &key_out, n * sizeof *key_out, "SELL build: sort keys"));
    GS_TRY(gs_cuda_alloc(e, &idx, n * sizeof *idx, "SELL build: row indices"));
    GS_TRY(gs_cuda_alloc(e, &m->perm, n * sizeof *m->perm, "SELL row permutation"));
    m->bytes += n * sizeof *m->perm;
    GS_TRY(CUDA_LAUNCH(&e->err, sort_key_kernel, blocks_for(n), GS_CUDA_BLOCK, 0, c->stream, len,
                       n, sigma, key_in, idx));
    GS_TRY(CUDA_CALL(&e->err, cub::DeviceRadixSort::SortPairs(NULL, tmp_bytes, key_in, key_out,
                                                              idx, m->perm, n, 0, end_bit,
                                                              c->stream)));
    GS_TRY(gs_cuda_alloc(e, &tmp, tmp_bytes, "SELL build: sort workspace"));
    GS_TRY(CUDA_CALL(&e->err, cub::DeviceRadixSort::SortPairs(tmp, tmp_bytes, key_in, key_out,
                                                              idx, m->perm, n, 0, end_bit,
                                                              c->stream)));
cleanup: /* stream-ordered frees */
    gs_cuda_free(e, tmp, tmp_bytes);
    gs_cuda_free(e, idx, n * sizeof *idx);
    gs_cuda_free(e, key_out, n * sizeof *key_out);
    gs_cuda_free(e, key_in, n * sizeof *key_in);
    return status;
}

int fill_sell(gs_engine *e, gs_mat *m, const int64_t *row_ptr, const int32_t *col,
                     const double *val)
{
    gs_cuda_impl *c = gs_cuda_of(e);
    const size_t vsize = m->prec == GS_FP32 ? sizeof(float) : sizeof(double);
    int status = gs_cuda_alloc(e, &m->sell_col, m->padded * sizeof(int32_t), "SELL column indices");
    if (status == GS_OK)
        status = gs_cuda_alloc(e, &m->sell_val, m->padded * vsize, "SELL values");
    if (status != GS_OK) return status;
    m->bytes += m->padded * (sizeof(int32_t) + vsize);
    const unsigned grid = blocks_for(m->n_slices * SELL_C);
    if (m->prec == GS_FP32)
        return CUDA_LAUNCH(&e->err, sell_fill_kernel<float>, grid, GS_CUDA_BLOCK, 0, c->stream,
                           row_ptr, col, val, (const int32_t *)m->perm, (int64_t)m->n_rows,
                           (int64_t)0, m->n_slices, (const int64_t *)m->slice_ptr, m->sell_col,
                           (float *)m->sell_val);
    return CUDA_LAUNCH(&e->err, sell_fill_kernel<double>, grid, GS_CUDA_BLOCK, 0, c->stream,
                       row_ptr, col, val, (const int32_t *)m->perm, (int64_t)m->n_rows,
                       (int64_t)0, m->n_slices, (const int64_t *)m->slice_ptr, m->sell_col,
                       (double *)m->sell_val);
}

/* Vector-CSR from device arrays: a copy of them, values in the stored
 * precision, or the arrays themselves taken over (the matrix then owns
 * them, with src, their chunk-mapped ranges where they have them: zeroed
 * here) where adopt is set and the values stay fp64; lanes per row = the
 * power of two at or above the mean row length, 2 to 32. */
int fill_csr(gs_engine *e, gs_mat *m, const int64_t *row_ptr, const int32_t *col,
                    const double *val, int adopt, gs_cuda_vmm *src)
{
    gs_cuda_impl *c = gs_cuda_of(e);
    const int64_t n = m->n_rows, nnz = m->nnz;
    const size_t vsize = m->prec == GS_FP32 ? sizeof(float) : sizeof(double);
    int status = GS_OK;
    m->format = GS_CUDA_CSR;
    m->lanes = 2;
    while (m->lanes < 32 && (double)m->lanes * (double)n < (double)nnz) m->lanes *= 2;
    if (adopt && m->prec == GS_FP64) {
        m->row_ptr = (int64_t *)row_ptr;
        m->csr_col = (int32_t *)col;
        m->csr_val = (void *)val;
        m->bytes += (n + 1) * sizeof(int64_t) + nnz * (sizeof(int32_t) + vsize);
        if (src) {
            m->csr_vm[0] = src[0], m->csr_vm[1] = src[1];
            src[0] = gs_cuda_vmm{}, src[1] = gs_cuda_vmm{};
        }
        return GS_OK;
    }
    GS_TRY(gs_cuda_alloc(e, &m->row_ptr, (n + 1) * sizeof(int64_t), "CSR row pointers"));
    GS_TRY(gs_cuda_alloc(e, &m->csr_col, nnz * sizeof(int32_t), "CSR column indices"));
    GS_TRY(gs_cuda_alloc(e, &m->csr_val, nnz * vsize, "CSR values"));
    m->bytes += (n + 1) * sizeof(int64_t) + nnz * (sizeof(int32_t) + vsize);
    GS_TRY(CUDA_CALL(&e->err, cudaMemcpyAsync(m->row_ptr, row_ptr, (n + 1) * sizeof(int64_t),
                                              cudaMemcpyDeviceToDevice, c->stream)));
    if (nnz > 0)
        GS_TRY(CUDA_CALL(&e->err, cudaMemcpyAsync(m->csr_col, col, nnz * sizeof(int32_t),
                                                  cudaMemcpyDeviceToDevice, c->stream)));
    if (m->prec == GS_FP32)
        GS_TRY(CUDA_LAUNCH(&e->err, convert_values_kernel<float>, blocks_for(nnz), GS_CUDA_BLOCK,
                           0, c->stream, val, nnz, (float *)m->csr_val));
    else if (nnz > 0)
        GS_TRY(CUDA_CALL(&e->err, cudaMemcpyAsync(m->csr_val, val, nnz * sizeof(double),
                                                  cudaMemcpyDeviceToDevice, c->stream)));
cleanup:
    return status;
}

int keep_triangle(gs_engine *e, gs_mat *m, const int64_t *row_ptr, const int32_t *col,
                         const double *val)
{
    gs_cuda_impl *c = gs_cuda_of(e);
    const int64_t n = m->n_rows, nnz = m->nnz;
    const int upper = m->tri == GS_CUDA_TRI_UPPER;
    int status = GS_OK, first = 0, *d_first = NULL;
    if (nnz > INT32_MAX)
        return gs_error_set(&e->err, GS_ERR_UNSUPPORTED,
                            "cuda: triangular matrix with %lld entries exceeds cuSPARSE's int32 "
                            "indices", (long long)nnz);
    GS_TRY(gs_cuda_alloc(e, &m->tri_row_ptr, (n + 1) * sizeof(int32_t), "triangular row pointers"));
    GS_TRY(gs_cuda_alloc(e, &m->tri_col, nnz * sizeof(int32_t), "triangular column indices"));
    GS_TRY(gs_cuda_alloc(e, &m->tri_val, nnz * sizeof(double), "triangular values"));
    m->bytes += (n + 1) * sizeof(int32_t) + nnz * (sizeof(int32_t) + sizeof(double));
    if (nnz > 0)
        GS_TRY(CUDA_CALL(&e->err, cudaMemcpyAsync(m->tri_col, col, nnz * sizeof(int32_t),
                                                  cudaMemcpyDeviceToDevice, c->stream)));
    GS_TRY(CUDA_LAUNCH(&e->err, tri_copy_kernel, blocks_for((nnz > n ? nnz : n) + 1),
                       GS_CUDA_BLOCK, 0, c->stream, row_ptr, n, nnz, val,
                       m->prec == GS_FP32 ? 1 : 0, m->tri_row_ptr, m->tri_val));
    GS_TRY(gs_cuda_alloc(e, &d_first, sizeof(int), "zero-diagonal flag"));
    first = upper ? 0 : (int)n + 1;
    GS_TRY(CUDA_CALL(&e->err, cudaMemcpyAsync(d_first, &first, sizeof(int),
                                              cudaMemcpyHostToDevice, c->stream)));
    GS_TRY(CUDA_LAUNCH(&e->err, zero_diagonal_kernel, blocks_for(n), GS_CUDA_BLOCK, 0, c->stream,
                       (const int32_t *)m->tri_row_ptr, (const int32_t *)m->tri_col,
                       (const double *)m->tri_val, n, upper, d_first));
    GS_TRY(CUDA_CALL(&e->err, cudaMemcpyAsync(&first, d_first, sizeof(int),
                                              cudaMemcpyDeviceToHost, c->stream)));
    GS_TRY(CUDA_CALL(&e->err, cudaStreamSynchronize(c->stream)));
    m->tri_zero_diag_row = first >= 1 && first <= n ? first : 0;
cleanup:
    gs_cuda_free(e, d_first, sizeof(int));
    return status;
}
