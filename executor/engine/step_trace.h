/* Step traces (RunOptions' trace_level above NO_TRACE): the engine
 * records every kernel run of a traced step (zf_engine_args_t.trace), and
 * the runs travel as NodeRun protos (proto/service.proto) to the master
 * and the client. */
#ifndef ZF_STEP_TRACE_H
#define ZF_STEP_TRACE_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/status.h"
#include "proto/node_def.pb-c.h"
#include "proto/service.pb-c.h"

/* A kernel's run in a traced step: when it started and ended (µs of
 * CLOCK_REALTIME, so that the records of processes on one host line up),
 * in which frame instance and iteration, and the bytes of its outputs.
 * node is borrowed from the engine's graph (valid while the engine is);
 * device from its device. */
typedef struct zf_node_run {
    const Tensorflow__NodeDef *node;
    const char *device;
    int64_t start_us, end_us;
    uint64_t frame_id;
    int64_t iter;
    int64_t output_bytes;
} zf_node_run_t;

/* The most runs a trace keeps by default: a traced loop of a million
 * iterations must not hold a record of each (the first ones are kept). */
#define ZF_STEP_TRACE_MAX_RUNS ((size_t)1 << 20)

/* The runs of a traced step, appended by every partition of the step. */
typedef struct zf_step_trace {
    pthread_mutex_t mu;
    zf_node_run_t *runs;
    size_t n, cap;
    size_t max_runs; /* zf_step_trace_init: ZF_STEP_TRACE_MAX_RUNS */
    bool truncated;  /* runs past max_runs, or out of memory: some are missing */
} zf_step_trace_t;

void zf_step_trace_init(zf_step_trace_t *t);
/* Appends run (thread-safe); past max_runs it is dropped and the trace
 * marked truncated. */
void zf_step_trace_add(zf_step_trace_t *t, const zf_node_run_t *run);
/* Frees the runs (not t). */
void zf_step_trace_destroy(zf_step_trace_t *t);
/* The current time as a trace records it. */
int64_t zf_step_trace_now_us(void);

/* The runs as NodeRun protos (with the transfer key of each _Send and
 * _Recv between partitions), appended to *out (an array of *n entries,
 * grown; protobuf-c allocation, each freed with
 * zflow__node_run__free_unpacked). Errors: RESOURCE_EXHAUSTED (*out then
 * holds what was converted). */
zf_status_t zf_step_trace_to_protos(const zf_step_trace_t *t, Zflow__NodeRun ***out, size_t *n);

#endif
