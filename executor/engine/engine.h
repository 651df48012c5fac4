/* The engine: the dataflow executor that runs one partition GraphDef on
 * one device, step after step (TensorFlow's Executor; the executor
 * process runs one engine per registered partition).
 *
 * Design note. zf_engine_new() does everything that does not depend on a
 * step, once: it builds the graph, resolves every node's kernel for the
 * device type (so a graph with an op zflow cannot run fails here, naming
 * the op and the node, before anything runs), calls each kernel's create(),
 * and lays the graph out in flat arrays — per node its first input slot,
 * output slot and out-edge, per edge the destination slot, and the initial
 * pending count (data + control inputs) of every node.
 *
 * A step copies the pending counts, then runs the nodes whose count is
 * zero. A finished node moves its outputs into its consumers' input slots
 * (one reference per consumer, so a tensor is freed as soon as its last
 * consumer has run) and decrements their counts; a node reaching zero is
 * ready. Cheap kernels run inline on the thread that made them ready;
 * ZF_KERNEL_EXPENSIVE ones go to the device's thread pool; asynchronous
 * kernels (_Recv) start inline and continue, when their callback fires on
 * another thread, on the pool (or on that thread, when it is an event loop
 * and the partition is light: zf_engine_set_inline_thread()). Dead inputs (control flow) make a
 * node dead without running it, except Send/Recv nodes, which forward deadness.
 *
 * Control flow (docs/design.md, "Control flow"): a partition with
 * control-flow ops has its nodes split into while-loop frames when built
 * (engine_frames.h); its steps keep per frame and iteration their own
 * counts and slots, start at most parallel_iterations iterations of a frame
 * at once and free each as it finishes. Merge fires on its first live input,
 * ControlTrigger is never dead, a dead Exit gives its dead value when its
 * frame finishes.
 *
 * Errors: the first kernel that fails sets the step's status — prefixed
 * with the device name — and aborts the step's rendezvous with it; nodes
 * not yet started are skipped. A kernel failing after the rendezvous was
 * aborted (by this partition or by another one) failed because of the
 * abort: the step then reports the abort's status, not a new cause.
 *
 * Thread-safety: an engine is immutable once built; any number of steps
 * may run on it concurrently. It must outlive its running steps. */
#ifndef ZF_ENGINE_H
#define ZF_ENGINE_H

#include <stdbool.h>
#include <pthread.h>
#include <stdint.h>

#include "common/status.h"
#include "executor/devices/device.h"
#include "executor/engine/step_trace.h"
#include "executor/rendezvous/rendezvous.h"
#include "executor/kernels/resource.h"
#include "proto/graph.pb-c.h"

typedef struct zf_engine zf_engine_t;

typedef struct zf_engine_params {
    zf_device_t *device;          /* borrowed; outlives the engine */
    zf_resource_mgr_t *resources; /* borrowed per-session store; may be NULL */
} zf_engine_params_t;

/* Builds the engine for gd, which it BORROWS until destroyed (see
 * zf_engine_adopt_graphdef()). Errors, naming the node: INVALID_ARGUMENT
 * for an invalid graph or a node whose outputs its attrs do not determine;
 * NOT_FOUND "No OpKernel was registered to support Op '<op>' used by node
 * <name> ..." for a node without a kernel on the device's type;
 * INVALID_ARGUMENT naming the node for malformed loops (engine_frames.h);
 * whatever a kernel's create() returns; RESOURCE_EXHAUSTED. Caller owns
 * *out. */
zf_status_t zf_engine_new(Tensorflow__GraphDef *gd, const zf_engine_params_t *params,
                          zf_engine_t **out);

/* Hands gd (the engine's own, allocated as protobuf-c's unpack does) over
 * to the engine, which frees it when destroyed; sets *gd_p to NULL. */
void zf_engine_adopt_graphdef(zf_engine_t *ex, Tensorflow__GraphDef **gd_p);

/* Destroys the kernels' states and frees the engine; no step may be
 * running. NULL-safe, sets *ex_p to NULL. */
void zf_engine_destroy(zf_engine_t **ex_p);

int zf_engine_num_nodes(const zf_engine_t *ex);

/* A partition of at most ZF_ENGINE_LIGHT_NODES nodes, none of them
 * ZF_KERNEL_EXPENSIVE. An event loop may start a step of it on its own
 * thread (when its feeds are small) and continue it there when a recv
 * completes: what runs then is short, and two thread hand-offs are saved. */
#define ZF_ENGINE_LIGHT_NODES 64
bool zf_engine_is_light(const zf_engine_t *ex);

/* The most bytes an asynchronous kernel (a _Recv) may produce for its
 * light partition to continue inline on an event loop (see below). */
#define ZF_ENGINE_INLINE_BYTES (256 * 1024)

/* Marks the calling thread as an event loop (or not; the default): when a
 * recv callback fires on it for a light partition and the value is at most
 * ZF_ENGINE_INLINE_BYTES, the step continues on this thread instead of
 * going to the device's pool. Even then a node that may take long goes to
 * the pool, and what it makes ready continues there: one whose inputs
 * total more than ZF_ENGINE_INLINE_BYTES, whose inputs' shapes broadcast
 * to more than that, or whose kernel is ZF_KERNEL_SIZED_BY_VALUE.
 * Thread-local. */
void zf_engine_set_inline_thread(bool on);

typedef struct zf_engine_args {
    int64_t step_id;
    /* The step's rendezvous, shared by every partition of the step and the
     * client's feeds and fetches; the step holds its own reference while it
     * runs. NULL: a private one for this step only. */
    zf_rendezvous_t *rendezvous;
    /* NULL, or where every kernel run of the step is recorded (RunOptions'
     * trace_level above NONE): borrowed, must outlive the step. */
    zf_step_trace_t *trace;
} zf_engine_args_t;

/* Called once when a step ends; owns status (OK or the step's error). The
 * step's state is already freed when it runs. */
typedef void (*zf_engine_done_fn)(zf_status_t status, void *arg);

/* Starts a step. Nodes ready at once run on the calling thread until the
 * step needs to wait (an asynchronous recv) or hands work to the pool;
 * done fires exactly once, possibly before this returns, on whichever
 * thread finishes the last node. */
void zf_engine_run_async(zf_engine_t *ex, const zf_engine_args_t *args, zf_engine_done_fn done,
                         void *arg);

/* Runs a step and waits for it to end; returns its status. */
zf_status_t zf_engine_run(zf_engine_t *ex, const zf_engine_args_t *args);

/* The control-flow state every engine of the process holds now: loop
 * iterations alive (at most parallel_iterations per running frame) and the
 * most alive at once since zf_engine_cf_stats_reset_peak(), and frames
 * alive. For tests and benchmarks. */
typedef struct zf_engine_cf_stats {
    long long live_iterations, peak_iterations, live_frames;
} zf_engine_cf_stats_t;

void zf_engine_cf_stats(zf_engine_cf_stats_t *out);
void zf_engine_cf_stats_reset_peak(void);

#endif
