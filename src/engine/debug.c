/* debug.c - gs_debug filled from the environment (debug.h says what each
 * variable does) and from the command line's path options; called by main
 * only: the one place the program reads the test knobs. */
#include "debug.h"

#include <stdlib.h>
#include <string.h>

void gs_debug_from_env(gs_debug *d)
{
    const char *v = getenv("GS_FSAI_POSTFILTER");
    memset(d, 0, sizeof *d);
    d->fsai_postfilter_search = v && strcmp(v, "search") == 0;
    v = getenv("GS_FSAI_TRANSPOSE_CHUNK");
    if (v && atoll(v) > 0) d->fsai_transpose_chunk = atoll(v);
    v = getenv("GS_FSAI_PLAN");
    if (v && strcmp(v, "host") == 0) d->fsai_plan = GS_DEBUG_PLAN_HOST;
    if (v && strcmp(v, "device") == 0) d->fsai_plan = GS_DEBUG_PLAN_DEVICE;
    v = getenv("GS_FSAI_CHUNK_BYTES");
    if (v && atoll(v) > 0) d->fsai_chunk_bytes = atoll(v);
    v = getenv("GS_FSAI_GEMM_MIN");
    if (v && atoll(v) > 0) d->fsai_gemm_min = atoll(v);
    if (v && strcmp(v, "off") == 0) d->fsai_gemm_min = -1;
    v = getenv("GS_SPAI_SHARED_CAP");
    if (v && atoll(v) > 0) d->spai_shared_cap = atoll(v);
    v = getenv("GS_SPAI_CUSOLVER_WORK");
    if (v && atoll(v) > 0) d->spai_cusolver_work = atoll(v);
    v = getenv("GS_SPMV_LONG");
    if (v && strcmp(v, "off") == 0) d->spmv_long = GS_DEBUG_LONG_OFF;
    if (v && strcmp(v, "split") == 0) d->spmv_long = GS_DEBUG_LONG_SPLIT;
    if (v && strcmp(v, "merge") == 0) d->spmv_long = GS_DEBUG_LONG_MERGE;
    v = getenv("GS_SPMV_LONG_MIN");
    if (v && atoll(v) > 0) d->spmv_long_min = atoll(v);
    v = getenv("GS_DEVICE_LOOP");
    if (v && strcmp(v, "on") == 0) d->device_loop = GS_DEBUG_FORCE_ON;
    if (v && strcmp(v, "off") == 0) d->device_loop = GS_DEBUG_FORCE_OFF;
    v = getenv("GS_FUSED");
    if (v && strcmp(v, "on") == 0) d->fused = GS_DEBUG_FORCE_ON;
    if (v && strcmp(v, "off") == 0) d->fused = GS_DEBUG_FORCE_OFF;
    if (v && strcmp(v, "cluster") == 0) {
        d->fused = GS_DEBUG_FORCE_ON;
        d->fused_sync = GS_DEBUG_SYNC_CLUSTER;
    }
    if (v && strcmp(v, "grid") == 0) {
        d->fused = GS_DEBUG_FORCE_ON;
        d->fused_sync = GS_DEBUG_SYNC_GRID;
    }
    v = getenv("GS_FUSED_STAGE");
    if (v && strcmp(v, "off") == 0) d->fused_stage = GS_DEBUG_FORCE_OFF;
    v = getenv("GS_ISAI_EXCESS_ABOVE");
    if (v && atoll(v) > 0) d->isai_excess_above = atoll(v);
    v = getenv("GS_FACTOR_SCHEME");
    if (v && strcmp(v, "levels") == 0) d->factor_scheme = GS_DEBUG_SCHEME_LEVELS;
    if (v && strcmp(v, "syncfree") == 0) d->factor_scheme = GS_DEBUG_SCHEME_SYNCFREE;
    if (v && strcmp(v, "host") == 0) d->factor_scheme = GS_DEBUG_SCHEME_HOST;
    v = getenv("GS_TRI_ANALYSIS");
    if (v && strcmp(v, "host") == 0) d->tri_analysis = GS_DEBUG_PLAN_HOST;
    if (v && strcmp(v, "device") == 0) d->tri_analysis = GS_DEBUG_PLAN_DEVICE;
    v = getenv("GS_TRI_BLOCK_ROWS");
    if (v && atoi(v) > 0) d->tri_block_rows = atoi(v);
    v = getenv("GS_TRI_SUPER_ROWS");
    if (v && atoll(v) > 0) d->tri_super_rows = atoll(v);
    v = getenv("GS_TRI_BAND_LEVELS");
    if (v && atoi(v) > 0) d->tri_band_levels = atoi(v);
    v = getenv("GS_SYNCFREE_BLOCKS");
    if (v && strcmp(v, "off") == 0) d->syncfree_blocks = -1;
    if (v && atoi(v) > 0) d->syncfree_blocks = atoi(v);
    v = getenv("GS_SYNCFREE_PREFETCH");
    if (v && strcmp(v, "off") == 0) d->syncfree_prefetch = GS_DEBUG_FORCE_OFF;
    v = getenv("GS_DIST_OVERLAP");
    if (v && *v) d->dist_overlap = strcmp(v, "0") ? GS_DEBUG_FORCE_ON : GS_DEBUG_FORCE_OFF;
    v = getenv("GS_DIST_COMM_TIMING");
    d->dist_comm_timing_off = v && strcmp(v, "0") == 0;
    v = getenv("GS_DIST_MERGE");
    d->dist_merge_off = v && strcmp(v, "0") == 0;
    v = getenv("GS_DIST_TRANSPORT");
    if (v && strcmp(v, "nccl") == 0) d->dist_transport = GS_DEBUG_TRANSPORT_NCCL;
    if (v && strcmp(v, "mpi-staged") == 0) d->dist_transport = GS_DEBUG_TRANSPORT_STAGED;
    if (v && strcmp(v, "ipc") == 0) d->dist_transport = GS_DEBUG_TRANSPORT_IPC;
    v = getenv("GS_DIST_IPC_FAIL");
    if (v && strncmp(v, "engine:", 7) == 0) d->dist_ipc_fail = GS_DEBUG_IPC_FAIL_ENGINE;
    if (v && strncmp(v, "matrix:", 7) == 0) d->dist_ipc_fail = GS_DEBUG_IPC_FAIL_MATRIX;
    if (d->dist_ipc_fail) d->dist_ipc_fail_rank = atoi(v + 7);
    v = getenv("GS_DIST_IPC_ROUND");
    if (v && atoi(v) > 0 && atoi(v) < 256) d->dist_ipc_round = atoi(v);
    v = getenv("GS_CUDA_STEPPED_MIN_BYTES");
    if (v && *v) {
        char *end = NULL;
        const unsigned long long bytes = strtoull(v, &end, 10);
        if (end && *end == '\0') {
            d->has_stepped_min_bytes = 1;
            d->stepped_min_bytes = (size_t)bytes;
        }
    }
}

void gs_debug_choose_paths(gs_debug *d, const char *loop, const char *spmv_long,
                           const char *overlap)
{
    if (strcmp(loop, "host") == 0) {
        d->device_loop = GS_DEBUG_FORCE_OFF;
        d->fused = GS_DEBUG_FORCE_OFF;
        d->fused_sync = 0;
    } else if (strcmp(loop, "device") == 0) {
        d->device_loop = GS_DEBUG_FORCE_ON;
        d->fused = GS_DEBUG_FORCE_OFF;
        d->fused_sync = 0;
    } else if (strcmp(loop, "fused") == 0) {
        d->device_loop = 0; /* the rule's, where the fused kernel declines */
        d->fused = GS_DEBUG_FORCE_ON; /* fused_sync: GS_FUSED=cluster|grid's, if set */
    }
    if (strcmp(spmv_long, "split") == 0) d->spmv_long = GS_DEBUG_LONG_SPLIT;
    if (strcmp(spmv_long, "merge") == 0) d->spmv_long = GS_DEBUG_LONG_MERGE;
    if (strcmp(spmv_long, "off") == 0) d->spmv_long = GS_DEBUG_LONG_OFF;
    if (strcmp(overlap, "on") == 0) d->dist_overlap = GS_DEBUG_FORCE_ON;
    if (strcmp(overlap, "off") == 0) d->dist_overlap = GS_DEBUG_FORCE_OFF;
}
