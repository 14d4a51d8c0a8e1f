/* bench_sync.cu - what one iteration of the fused kernel (cuda/engine/fused.cu)
 * cannot go below (issue 24, docs/perf-notebook.md): the time of a barrier among
 * the blocks of a cooperative grid (grid.sync), of one thread-block cluster
 * (cluster.sync) and of one block (__syncthreads), alone and followed by the
 * exchange the fused CG makes after each of its barriers (every block sums
 * the blocks' partials from L2 in block order and broadcasts the sum in
 * shared memory). Microseconds per barrier, over 20,000 in one launch.
 * Then what a substitution's level can cost at least (issue 33, docs/results-mic.md,
 * "The bound"): a cluster barrier followed by a dependent read of another block's shared
 * memory (distributed shared memory, as a level scheme inside one cluster would hand its
 * x_j over), a block barrier followed by a dependent shared-memory read, and the one-way
 * hand-over of a flag through L2 between two blocks (a sync-free solve's level).
 * Build and run on the GPU machine:
 *   nvcc -O3 -arch=sm_90 -o build/bench_sync scripts/bench/bench_sync.cu && build/bench_sync */
#include <cooperative_groups.h>
#include <cstdio>
#include <cuda/atomic>
#include <cuda_runtime.h>

namespace cg = cooperative_groups;

#define CK(x)                                                                                      \
    do {                                                                                           \
        cudaError_t r_ = (x);                                                                      \
        if (r_ != cudaSuccess) {                                                                   \
            printf("%s: %s\n", #x, cudaGetErrorString(r_));                                        \
            return -1.0;                                                                           \
        }                                                                                          \
    } while (0)

enum { GRID = 0, CLUSTER = 1, BLOCK = 2, L2FLAG = 3 }; /* L2FLAG: handover_us's ping-pong */

template <int MODE, bool EXCHANGE>
__global__ void __launch_bounds__(1024) barrier_kernel(int iters, double *part, double *out)
{
    __shared__ double bcast;
    double acc = 0.0;
    for (int it = 0; it < iters; it++) {
        if (EXCHANGE && threadIdx.x == 0) part[blockIdx.x] = acc + it;
        if (MODE == GRID) cg::this_grid().sync();
        else if (MODE == CLUSTER) cg::this_cluster().sync();
        else __syncthreads();
        if (EXCHANGE) {
            if (threadIdx.x < 32) {
                double s = 0.0;
                for (unsigned j = threadIdx.x; j < gridDim.x; j += 32) s += __ldcg(part + j);
                for (int o = 16; o > 0; o >>= 1) s += __shfl_down_sync(0xffffffffu, s, o);
                if (threadIdx.x == 0) bcast = s;
            }
            __syncthreads();
            acc += 1e-30 * bcast;
            __syncthreads();
        }
    }
    if (threadIdx.x == 0) out[blockIdx.x] = acc;
}

/* A dependent chain of iters steps: each block writes a value that depends on the one it
 * read, a barrier, then a read of the next block's value (distributed shared memory in a
 * cluster; the block's own shared memory, another warp's slot, for one block). Double
 * buffered so that no write races a read of the step before. */
template <int MODE>
__global__ void __launch_bounds__(1024) handover_kernel(int iters, double *out)
{
    __shared__ double val[2][32];
    double acc = 1.0;
    if (threadIdx.x < 32) val[0][threadIdx.x] = acc;
    if (MODE == CLUSTER) cg::this_cluster().sync();
    else __syncthreads();
    for (int it = 0; it < iters; it++) {
        const int cur = it & 1;
        if (threadIdx.x < 32) {
            double v;
            if (MODE == CLUSTER) {
                cg::cluster_group cl = cg::this_cluster();
                const double *peer = cl.map_shared_rank(&val[cur][threadIdx.x],
                                                        (cl.block_rank() + 1) % cl.num_blocks());
                v = *(volatile const double *)peer;
            } else {
                v = ((volatile double *)val[cur])[(threadIdx.x + 1) & 31];
            }
            acc = acc * 0.5 + v * 0.5;
            val[cur ^ 1][threadIdx.x] = acc;
        }
        if (MODE == CLUSTER) cg::this_cluster().sync();
        else __syncthreads();
    }
    if (threadIdx.x == 0) out[blockIdx.x] = acc;
}

/* Two blocks pass a flag back and forth through L2 (release stores, acquire loads at
 * device scope), iters round trips: a one-way hand-over is the time / (2 iters). */
__global__ void pingpong_kernel(int iters, unsigned *flag, double *out)
{
    if (threadIdx.x != 0) return;
    cuda::atomic_ref<unsigned, cuda::thread_scope_device> f(*flag);
    const unsigned me = blockIdx.x;
    for (int it = 0; it < iters; it++) {
        const unsigned want = 2u * (unsigned)it + me;
        while (f.load(cuda::memory_order_acquire) != want) {
        }
        f.store(want + 1u, cuda::memory_order_release);
    }
    out[blockIdx.x] = 1.0;
}

/* A one-block-a-cluster launch configuration of blocks x threads (attr must outlive cfg). */
static void cluster_config(cudaLaunchConfig_t *cfg, cudaLaunchAttribute *attr, unsigned blocks,
                           unsigned threads)
{
    attr->id = cudaLaunchAttributeClusterDimension;
    attr->val.clusterDim.x = blocks;
    attr->val.clusterDim.y = attr->val.clusterDim.z = 1;
    *cfg = {};
    cfg->gridDim = dim3(blocks);
    cfg->blockDim = dim3(threads);
    cfg->attrs = attr;
    cfg->numAttrs = 1;
}

/* Microseconds per step of launch() (the second of two runs, the first a warm-up), over
 * steps steps; before() runs ahead of each launch, untimed. */
template <typename B, typename L>
static double timed_us(double steps, B before, L launch)
{
    cudaEvent_t t0, t1;
    CK(cudaEventCreate(&t0));
    CK(cudaEventCreate(&t1));
    for (int rep = 0; rep < 2; rep++) {
        CK(before());
        CK(cudaEventRecord(t0));
        CK(launch());
        CK(cudaGetLastError());
        CK(cudaEventRecord(t1));
        CK(cudaEventSynchronize(t1));
    }
    float ms = 0.0f;
    CK(cudaEventElapsedTime(&ms, t0, t1));
    cudaEventDestroy(t0);
    cudaEventDestroy(t1);
    return 1000.0 * ms / steps;
}

static double handover_us(int mode, unsigned blocks, double *out, unsigned *flag)
{
    const int iters = 20000;
    cudaLaunchConfig_t cfg = {};
    cudaLaunchAttribute attr;
    if (mode == CLUSTER) {
        CK(cudaFuncSetAttribute((const void *)handover_kernel<CLUSTER>,
                                cudaFuncAttributeNonPortableClusterSizeAllowed, 1));
        cluster_config(&cfg, &attr, blocks, 1024);
    }
    return timed_us(
        mode == L2FLAG ? 2.0 * iters : iters,
        [&] { return cudaMemset(flag, 0, sizeof(unsigned)); },
        [&] {
            if (mode == CLUSTER) return cudaLaunchKernelEx(&cfg, handover_kernel<CLUSTER>, iters, out);
            if (mode == BLOCK) handover_kernel<BLOCK><<<1, 1024>>>(iters, out);
            else pingpong_kernel<<<2, 32>>>(iters, flag, out);
            return cudaSuccess;
        });
}

template <int MODE, bool EXCHANGE>
static double time_us(unsigned blocks, unsigned threads, double *part, double *out)
{
    const int iters = 20000;
    auto kernel = barrier_kernel<MODE, EXCHANGE>;
    int n = iters;
    void *params[] = {&n, &part, &out};
    cudaLaunchConfig_t cfg = {};
    cudaLaunchAttribute attr;
    if (MODE == CLUSTER) {
        CK(cudaFuncSetAttribute((const void *)kernel,
                                cudaFuncAttributeNonPortableClusterSizeAllowed, 1));
        cluster_config(&cfg, &attr, blocks, threads);
    }
    return timed_us(
        iters, [] { return cudaSuccess; },
        [&] {
            if (MODE == GRID)
                return cudaLaunchCooperativeKernel((const void *)kernel, dim3(blocks),
                                                   dim3(threads), params, 0, 0);
            if (MODE == CLUSTER) return cudaLaunchKernelEx(&cfg, kernel, n, part, out);
            kernel<<<blocks, threads>>>(n, part, out);
            return cudaSuccess;
        });
}

int main()
{
    cudaDeviceProp prop;
    double *part = nullptr, *out = nullptr;
    if (cudaGetDeviceProperties(&prop, 0) != cudaSuccess || cudaMalloc(&part, 4096 * 8) ||
        cudaMalloc(&out, 4096 * 8)) {
        printf("bench_sync: no usable CUDA device\n");
        return 1;
    }
    printf("%s, %d SMs: us per barrier (20000 in one launch)\n", prop.name,
           prop.multiProcessorCount);
    printf("%-10s %7s %8s %10s %16s\n", "barrier", "blocks", "threads", "barrier", "+ L2 exchange");
    const unsigned grid_blocks[] = {4, 16, 64, 128, 4u * prop.multiProcessorCount};
    for (unsigned b : grid_blocks)
        printf("%-10s %7u %8d %10.3f %16.3f\n", "grid", b, 256,
               time_us<GRID, false>(b, 256, part, out), time_us<GRID, true>(b, 256, part, out));
    for (unsigned b : {2u, 4u, 8u, 16u})
        printf("%-10s %7u %8d %10.3f %16.3f\n", "cluster", b, 1024,
               time_us<CLUSTER, false>(b, 1024, part, out),
               time_us<CLUSTER, true>(b, 1024, part, out));
    printf("%-10s %7u %8d %10.3f %16.3f\n", "block", 1u, 1024,
           time_us<BLOCK, false>(1, 1024, part, out), time_us<BLOCK, true>(1, 1024, part, out));
    printf("\nus per dependent step (20000 in one launch): barrier + a read of another\n"
           "block's shared memory (cluster) or another warp's (block); L2: one-way flag\n");
    for (unsigned b : {2u, 4u, 8u, 16u})
        printf("%-26s %3u blocks %8.3f\n", "cluster + DSMEM read", b,
               handover_us(CLUSTER, b, out, (unsigned *)part));
    printf("%-26s %3u blocks %8.3f\n", "block + shared read", 1u,
           handover_us(BLOCK, 1, out, (unsigned *)part));
    printf("%-26s %3u blocks %8.3f\n", "L2 flag hand-over", 2u,
           handover_us(L2FLAG, 2, out, (unsigned *)part));
    cudaFree(part);
    cudaFree(out);
    return 0;
}
