/* Internals shared by the pruning and partitioning files (prune.c,
 * partition.c, partition_cut.c, partition_node.c, partition_dot.c): the
 * pruned graph with its feed and fetch endpoints, the state of
 * one partitioning run, and NodeDef building helpers. Not a public
 * interface. */
#ifndef ZF_PARTITION_INTERNAL_H
#define ZF_PARTITION_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "common/graph.h"
#include "common/status.h"
#include "common/kernel_def.h"
#include "scheduler/graph/nodedef_build.h"
#include "scheduler/graph/partition.h"

/* ---- the pruned graph: rewritten for feeds and fetches, then pruned ---- */

/* A client endpoint: output port of original node `node`, as the client
 * spelled it (`spec`, borrowed from the options). */
typedef struct zf__endpoint {
    int node, port;
    const char *spec;
    bool moves_control; /* a fed Placeholder: its control out-edges move to the feed */
} zf__endpoint_t;

/* Plan nodes are the graph's nodes 0..n_orig-1, then one feed node per feed
 * (a client-terminated _Recv), then one fetch node per fetch (a
 * client-terminated _Send). Edges out of a fed tensor come from its feed
 * node instead. */
typedef struct zf__pruned {
    const zf_graph_t *g;
    int n_orig, n_feeds, n_fetches, n_nodes;
    zf__endpoint_t *feeds;   /* n_feeds */
    zf__endpoint_t *fetches; /* n_fetches */
    int *feed_head;          /* per original node: its first feed, or -1; NULL with no feeds */
    int *feed_next;          /* per feed: the next feed of the same node, or -1 */
    int *in_base;            /* per original node: id of its first in-edge */
    int n_edges;             /* edges of the graph; fetch k's edge has id n_edges + k */
    uint8_t *keep;           /* per pruned node: survives pruning */
    int n_kept;
} zf__pruned_t;

/* One in-edge of a pruned node, after feed redirection. src_port and dst_port
 * are ZF_CONTROL_PORT for a control edge. */
typedef struct zf__pedge {
    int src, src_port, dst_port;
    int id; /* stable edge id: position among all in-edges, dst-major */
} zf__pedge_t;

/* Validates feeds, fetches and targets against g, rewrites and prunes.
 * Errors (INVALID_ARGUMENT) name the offending tensor or node. On error the
 * pruned holds nothing to free. */
zf_status_t zf__pruned_build(const zf_graph_t *g, const zf_partition_options_t *opts,
                             zf__pruned_t *pruned);
void zf__pruned_free(zf__pruned_t *pruned);

int zf__pruned_num_in(const zf__pruned_t *p, int node);
zf__pedge_t zf__pruned_in_edge(const zf__pruned_t *p, int node, int k);

/* The original node a pruned node stands for (feed or fetch: its tensor's node). */
int zf__pruned_origin(const zf__pruned_t *p, int node);

static inline bool zf__pruned_is_feed(const zf__pruned_t *p, int node)
{
    return node >= p->n_orig && node < p->n_orig + p->n_feeds;
}
static inline bool zf__pruned_is_fetch(const zf__pruned_t *p, int node)
{
    return node >= p->n_orig + p->n_feeds;
}

/* ---- one partitioning run (partition.c, partition_cut.c) ---------------- */

typedef struct zf__pdev {
    char name[ZF_DEVICE_NAME_MAX]; /* canonical full name */
    char task[ZF_DEVICE_NAME_MAX]; /* /job:../replica:../task:.. */
    char type[ZF_DEVICE_TYPE_MAX + 1];
    bool cpu; /* all memory is host memory */
    uint64_t incarnation;
    int slot; /* its partition's index in zf__pctx_t.parts */
} zf__pdev_t;

/* A partition being built; parts are in partition-key order. */
typedef struct zf__ppart {
    Tensorflow__NodeDef **nodes;
    int n_nodes, cap_nodes;
    zf_partition_io_t *feeds, *fetches;
    int n_feeds, n_fetches;
    int n_send, n_recv;
    int first_dev;
} zf__ppart_t;

/* An input of the node being built that a reference recv must wait for
 * (TensorFlow's "read control"); check: only if src:port is not a ref. */
typedef struct zf__refc {
    const char *name;
    int src, port;
    bool check;
} zf__refc_t;

typedef struct zf__dup_slot {
    uint64_t a, b;
    const char *name; /* NULL: empty slot */
    int rec;          /* its recv's entry in zf__pctx_t.srecvs, or -1 */
} zf__dup_slot_t;

/* A recv made for a cut edge, with what recv scheduling needs of it
 * (partition_sched.c). */
typedef struct zf__srecv {
    Tensorflow__NodeDef *recv; /* the partition's */
    int slot, frame;           /* its partition, and the frame it runs in */
    int64_t start;             /* earliest ASAP start among its readers */
    int64_t lead;              /* the transfer cost of its edge */
} zf__srecv_t;

/* A while-loop frame: its name (borrowed from the Enter node), parent,
 * parallel_iterations (its first Enter's) and LoopCond node (-1: none). */
typedef struct zf__frame {
    const uint8_t *name;
    size_t len;
    int parent;
    int parallel;
    int loop_cond;
} zf__frame_t;

/* A control loop (partition_frames.c): the Enter, Merge and NextIteration
 * that run frame f's iterations in one partition, in step with the
 * partition of the frame's LoopCond (borrowed names; NULL: none yet). */
typedef struct zf__cloop {
    const char *enter, *merge, *next;
} zf__cloop_t;

typedef struct zf__pctx {
    const zf_graph_t *g;
    const zf_partition_options_t *opts;
    bool by_task, any_accel;
    zf__pruned_t pruned;
    zf__pdev_t *devs;
    int n_devs;
    zf__ppart_t *parts;
    int n_parts;
    uint64_t client_incarnation;
    int *node_dev;                 /* per pruned node */
    const zf_kernel_def_t **kdefs; /* per original node, when any_accel */
    uint8_t *kdef_done;
    char **feed_names, **fetch_names;
    bool *feed_host, *fetch_host; /* endpoint lives in host memory (_HostRecv/_HostSend) */
    bool names_may_clash;         /* an original name ends like a new one */
    uint64_t next_id;             /* the n of the next `_S<n>` name */
    /* the node being built */
    char **inputs;
    int n_inputs, cap_inputs;
    zf__refc_t *refc;
    int n_refc, cap_refc;
    Tensorflow__NodeDef **ref_recvs;
    int n_ref_recvs, cap_ref_recvs;
    /* recv dedup: (src, port, dst partition, on host) -> name of the node to read */
    zf__dup_slot_t *dup;
    size_t dup_cap, dup_n;
    /* dtypes resolved per original node: 0 not yet, -1 unknown, else 1 + pool offset
     * of [count, types...] */
    int64_t *out_at, *in_at;
    int32_t *pool;
    size_t n_pool, cap_pool;
    zf_dtype_t *scratch;
    int cap_scratch;
    /* while-loop frames (partition_frames.c): NULL / 0 when the graph has none */
    int *frame; /* per original node; 0 is the root frame */
    zf__frame_t *frames;
    int n_frames;
    zf__cloop_t *cloops; /* per frame and partition slot: [f * n_parts + slot] */
    /* recv scheduling (partition_sched.c): NULL / 0 without the option */
    int64_t *asap; /* per pruned node: its ASAP start time */
    int *topo;     /* the kept nodes (and per-frame end nodes, ids past n_nodes), in the
                      order their times were found */
    int n_topo;
    zf__srecv_t *srecvs;
    int n_srecvs, cap_srecvs;
} zf__pctx_t;

/* Validates the inputs, builds the pruned and names the client endpoints:
 * everything before the walk. zf__pctx_free() in any case. */
zf_status_t zf__pctx_setup(zf__pctx_t *c, const zf_graph_t *g, const zf_partition_device_t *devices,
                           int n_devices, const int *assignment,
                           const zf_partition_options_t *opts);
void zf__pctx_free(zf__pctx_t *c);

const char *zf__pctx_name(const zf__pctx_t *c, int node);
/* `<prefix><suffix>_S<n>`, unique in the graph and among new names
 * (caller frees); NULL when out of memory. */
char *zf__pctx_new_name(zf__pctx_t *c, const char *prefix, const char *suffix);
/* Appends nd to the partition of device dev (nd is freed on failure). */
bool zf__pctx_push(zf__pctx_t *c, int dev, Tensorflow__NodeDef *nd);

/* Grows *arr (of *cap elements of elem bytes, doubling from 16) to hold
 * need; false when out of memory (*arr is kept). */
bool zf__grow(void **arr, int *cap, int need, size_t elem);

zf_status_t zf__pctx_cut_init(zf__pctx_t *c);
void zf__pctx_cut_free(zf__pctx_t *c);
/* Memory type of a pruned node's output / input on its (non-CPU) device. */
bool zf__pctx_out_host(zf__pctx_t *c, int node, int port);
bool zf__pctx_in_host(zf__pctx_t *c, int node, int port);
/* "Incomplete graph, missing N inputs for X" when the op wants more. */
zf_status_t zf__pctx_check_arity(zf__pctx_t *c, int node);
/* Wires one in-edge of node v, cutting it when it crosses partitions. */
zf_status_t zf__pctx_input(zf__pctx_t *c, int v, const zf__pedge_t *e);
/* Gives every reference recv of the node control inputs from the rest. */
zf_status_t zf__pctx_read_controls(zf__pctx_t *c);

/* Frames of the original nodes (partition_frames.c). */
zf_status_t zf__pctx_frames_init(zf__pctx_t *c);
/* The frame a node's outputs are in (an Exit's are in its parent's). */
int zf__pctx_out_frame(const zf__pctx_t *c, int node);
/* The node the _Recv of a cut edge out of src, received on device dev,
 * takes a control input from so that it runs in src's frame, once per
 * iteration (TensorFlow's control loops, made here on first use); *driver
 * is NULL for an edge outside every loop. Errors: INVALID_ARGUMENT for a
 * frame without a LoopCond, UNIMPLEMENTED when dev is not a CPU. */
zf_status_t zf__pctx_loop_driver(zf__pctx_t *c, int src, int dev, const char **driver);
/* Cuts src:0 (a LoopCond) towards device dev outside any node being
 * built, its recv driven by driver; *read names the node to read
 * (partition_cut.c). */
zf_status_t zf__pctx_cut_pred(zf__pctx_t *c, int src, int dev, const char *driver,
                              const char **read);

/* Recv scheduling (partition_sched.c). ASAP start times of the pruned
 * nodes, before the walk; INVALID_ARGUMENT for a cycle that passes no
 * NextIteration. */
zf_status_t zf__pctx_asap(zf__pctx_t *c);
/* Records the recv made for the cut edge src -> v (devices sd -> dd);
 * *rec is its entry. false when out of memory. */
bool zf__pctx_note_recv(zf__pctx_t *c, Tensorflow__NodeDef *recv, int v, int src, int sd, int dd,
                        int *rec);
/* Another reader v of recorded recv rec (-1: none recorded). */
void zf__pctx_note_reader(zf__pctx_t *c, int rec, int v);
/* After the walk: `_start_time` attrs and the control edges. */
zf_status_t zf__pctx_schedule_recvs(zf__pctx_t *c);

#endif
