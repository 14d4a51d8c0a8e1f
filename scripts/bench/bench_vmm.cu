/* bench_vmm.cu - host time of the driver's virtual memory management calls
 * (create, map, set access, unmap, release) by chunk size: what a chunk of
 * the engine's stepped layout costs (docs/perf-notebook.md, "Stepped layout").
 * Build and run on the GPU machine (it links the driver library itself):
 *   nvcc -O2 -arch=sm_90 -o build/bench_vmm scripts/bench/bench_vmm.cu -lcuda &&
 * build/bench_vmm */
#include <chrono>
#include <cstdio>
#include <cuda.h>
#include <cuda_runtime.h>
static double now() {
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch())
        .count();
}
#define CK(x)                                                                                      \
    do {                                                                                           \
        CUresult r = (x);                                                                          \
        if (r != CUDA_SUCCESS) {                                                                   \
            printf("%s failed %d\n", #x, (int)r);                                                  \
            return 1;                                                                              \
        }                                                                                          \
    } while (0)
int main() {
    cudaFree(0);
    CUmemAllocationProp prop = {};
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = 0;
    size_t gmin = 0, grec = 0;
    CK(cuMemGetAllocationGranularity(&gmin, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM));
    CK(cuMemGetAllocationGranularity(&grec, &prop, CU_MEM_ALLOC_GRANULARITY_RECOMMENDED));
    printf("granularity min %zu recommended %zu\n", gmin, grec);
    CUmemAccessDesc acc = {};
    acc.location = prop.location;
    acc.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    const int N = 16;
    for (size_t mb : {2, 4, 8, 16, 32, 64}) {
        size_t sz = mb << 20;
        CUdeviceptr va;
        CK(cuMemAddressReserve(&va, sz * N, 0, 0, 0));
        CUmemGenericAllocationHandle h[N];
        double t0 = now();
        for (int i = 0; i < N; i++)
            CK(cuMemCreate(&h[i], sz, &prop, 0));
        double t1 = now();
        for (int i = 0; i < N; i++)
            CK(cuMemMap(va + i * sz, sz, 0, h[i], 0));
        double t2 = now();
        for (int i = 0; i < N; i++)
            CK(cuMemSetAccess(va + i * sz, sz, &acc, 1));
        double t3 = now();
        cudaMemset((void *)va, 0, sz * N);
        cudaDeviceSynchronize();
        double t4 = now();
        for (int i = 0; i < N; i++)
            CK(cuMemUnmap(va + i * sz, sz));
        double t5 = now();
        for (int i = 0; i < N; i++)
            CK(cuMemRelease(h[i]));
        double t6 = now();
        // remap reuse: create once, map/setaccess/unmap cycles
        CK(cuMemCreate(&h[0], sz, &prop, 0));
        double t7 = now();
        for (int i = 0; i < N; i++) {
            CK(cuMemMap(va + i * sz, sz, 0, h[0], 0));
            CK(cuMemSetAccess(va + i * sz, sz, &acc, 1));
            CK(cuMemUnmap(va + i * sz, sz));
        }
        double t8 = now();
        CK(cuMemRelease(h[0]));
        CK(cuMemAddressFree(va, sz * N));
        printf("%3zu MB: create %7.1f us map %6.1f setaccess %7.1f unmap %7.1f "
               "release %7.1f | map+access+unmap cycle %7.1f us (memset %.1f us)\n",
               mb, (t1 - t0) / N * 1e6, (t2 - t1) / N * 1e6, (t3 - t2) / N * 1e6,
               (t5 - t4) / N * 1e6, (t6 - t5) / N * 1e6, (t8 - t7) / N * 1e6, (t4 - t3) * 1e6);
    }
    // one big setaccess over many chunks
    {
        size_t sz = 4 << 20;
        CUdeviceptr va;
        CUmemGenericAllocationHandle h[N];
        CK(cuMemAddressReserve(&va, sz * N, 0, 0, 0));
        for (int i = 0; i < N; i++) {
            CK(cuMemCreate(&h[i], sz, &prop, 0));
            CK(cuMemMap(va + i * sz, sz, 0, h[i], 0));
        }
        double t0 = now();
        CK(cuMemSetAccess(va, sz * N, &acc, 1));
        double t1 = now();
        printf("setaccess of 16 x 4 MB at once: %.1f us\n", (t1 - t0) * 1e6);
        for (int i = 0; i < N; i++) {
            CK(cuMemUnmap(va + i * sz, sz));
            CK(cuMemRelease(h[i]));
        }
        CK(cuMemAddressFree(va, sz * N));
    }
    // cudaMallocAsync for comparison (fresh pool)
    {
        cudaStream_t s;
        cudaStreamCreate(&s);
        void *p;
        double t0 = now();
        cudaMallocAsync(&p, 192 << 20, s);
        cudaStreamSynchronize(s);
        double t1 = now();
        cudaFreeAsync(p, s);
        cudaStreamSynchronize(s);
        printf("cudaMallocAsync 192 MB (first): %.1f us\n", (t1 - t0) * 1e6);
    }
    return 0;
}
