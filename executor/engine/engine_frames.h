/* The static frame structure of a partition (internal to the engine): which
 * while-loop frame each node runs in, computed once from the Enter and
 * Exit nodes as TensorFlow's executor does. Every node runs in one frame;
 * frame 0 is the root. An Enter runs in its input's frame and its outputs
 * are in the child frame its frame_name names; an Exit runs in the loop's
 * frame and its outputs are in the parent frame; every other node's
 * outputs are in its own frame. */
#ifndef ZF_ENGINE_FRAMES_H
#define ZF_ENGINE_FRAMES_H

#include <stddef.h>
#include <stdint.h>

#include "common/graph.h"
#include "common/status.h"

typedef struct zf__eframe {
    const uint8_t *name; /* the Enters' frame_name (borrowed from the graph); NULL: root */
    size_t len;
    int32_t parent;   /* -1 for the root */
    int32_t parallel; /* parallel_iterations of the frame's first Enter */
} zf__eframe_t;

typedef struct zf__eframes {
    int32_t *node_frame; /* per node: the frame it runs in */
    int32_t *out_frame;  /* per node: the frame its outputs are in */
    zf__eframe_t *frames;
    int32_t num_frames;
} zf__eframes_t;

/* Computes g's frames. INVALID_ARGUMENT, naming the node, for an Enter
 * without frame_name or with parallel_iterations < 1, an Exit or a
 * NextIteration outside any frame, a node whose inputs come from
 * different frames, one frame name entered from two different frames, and
 * a node that no path from a node without inputs reaches;
 * RESOURCE_EXHAUSTED. Free with zf__eframes_free(), also on error. */
zf_status_t zf__eframes_build(const zf_graph_t *g, zf__eframes_t *out);

void zf__eframes_free(zf__eframes_t *f);

#endif
