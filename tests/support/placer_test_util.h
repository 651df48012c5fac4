/* Helpers shared by the placer's tests: graphs written node by node as
 * text, fake device sets (TensorFlow's placer-test layout), placement and
 * lookups by node name. */
#ifndef ZF_TEST_PLACER_UTIL_H
#define ZF_TEST_PLACER_UTIL_H

#include <ctype.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/device_type.h"
#include "common/graph.h"
#include "common/graphdef_io.h"
#include "common/op_registry.h"
#include "scheduler/graph/placer.h"

#define PT_MAX_DEVICES 64

/* ---- graphs as text --------------------------------------------------- */

typedef struct {
    char *text;
    size_t len, cap;
} pt_gb_t;

void pt_gb_put(pt_gb_t *b, const char *fmt, ...) ZF_PRINTF(2, 3);
void pt_gb_put(pt_gb_t *b, const char *fmt, ...);

/* Adds a node. inputs: "a,b:1,^c" or NULL; device: NULL for none; attrs:
 * "T=float;_class=[loc:@a,loc:@b]" or NULL. */
void pt_gb_node(pt_gb_t *b, const char *name, const char *op, const char *inputs,
                const char *device, const char *attrs);

/* Builds the graph (which owns its GraphDef) and frees the text. */
zf_graph_t *pt_gb_graph(pt_gb_t *b);

/* ---- device sets ------------------------------------------------------ */

typedef struct {
    zf_placer_device_t d[PT_MAX_DEVICES];
    int n;
} pt_devs_t;

void pt_devs_add(pt_devs_t *ds, const char *job, int replica, int task, const char *type, int id);

/* TensorFlow's placer-test device set: n FakeCPUs and n FakeGPUs on
 * /job:a/replica:0/task:0, the GPUs added in reverse order. */
void pt_devs_fake(pt_devs_t *ds, int n);

/* Forgets kernels and registers the fake types (FakeCPU below FakeGPU). */
void pt_reset_registry(void);

/* "Op:FakeCPU,FakeGPU Op2:FakeGPU" */
void pt_kernels(const char *spec);

/* ---- placing ---------------------------------------------------------- */

typedef struct {
    zf_graph_t *g;
    const pt_devs_t *devs;
    int *assign;
    zf_status_t status;
} pt_placed_t;

pt_placed_t pt_place_opts(zf_graph_t *g, const pt_devs_t *devs, const zf_placer_options_t *o);

pt_placed_t pt_place(zf_graph_t *g, const pt_devs_t *devs, bool soft);

void pt_placed_free(pt_placed_t *r);

/* The full device name of node (in a static buffer: one call per statement). */
const char *pt_dev(const pt_placed_t *r, const char *node);

const char *pt_type(const pt_placed_t *r, const char *node);

#endif
