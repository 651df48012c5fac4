/* Helpers shared by the placer's tests: graphs written node by node as
 * text, fake device sets (TensorFlow's placer-test layout), placement and
 * lookups by node name. Header-only: each test is one program. */
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

#define S_MAX_DEVICES 64

/* ---- graphs as text --------------------------------------------------- */

typedef struct {
    char *text;
    size_t len, cap;
} s_gb_t;

static inline void s_gb_put(s_gb_t *b, const char *fmt, ...) ZF_PRINTF(2, 3);
static inline void s_gb_put(s_gb_t *b, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (b->len + (size_t)n + 1 > b->cap) {
        b->cap = (b->len + (size_t)n + 1) * 2;
        b->text = realloc(b->text, b->cap);
        if (!b->text) abort();
    }
    va_start(ap, fmt);
    vsnprintf(b->text + b->len, b->cap - b->len, fmt, ap);
    va_end(ap);
    b->len += (size_t)n;
}

/* "float" -> DT_FLOAT, "float_ref" -> DT_FLOAT_REF. */
static inline void s_gb_type(s_gb_t *b, const char *name, size_t len)
{
    s_gb_put(b, "DT_");
    for (size_t i = 0; i < len; i++) s_gb_put(b, "%c", toupper((unsigned char)name[i]));
}

/* One attr "key=value": value is a type name, "#N" (int), "'text'" (a
 * string), or "[a,b]" (a list: strings for _class, types otherwise). */
static inline void s_gb_attr(s_gb_t *b, const char *item, size_t len)
{
    const char *eq = memchr(item, '=', len);
    if (!eq) abort();
    const char *v = eq + 1;
    size_t vlen = len - (size_t)(v - item);
    s_gb_put(b, " attr { key: \"%.*s\" value { ", (int)(eq - item), item);
    if (v[0] == '#') {
        s_gb_put(b, "i: %.*s", (int)vlen - 1, v + 1);
    } else if (v[0] == '\'') {
        s_gb_put(b, "s: \"%.*s\"", (int)vlen - 2, v + 1);
    } else if (v[0] == '[') {
        bool strings = (size_t)(eq - item) == 6 && memcmp(item, "_class", 6) == 0;
        s_gb_put(b, "list { ");
        for (const char *q = v + 1; q < v + vlen - 1;) {
            size_t n = strcspn(q, ",]");
            if (strings)
                s_gb_put(b, "s: \"%.*s\" ", (int)n, q);
            else {
                s_gb_put(b, "type: ");
                s_gb_type(b, q, n);
                s_gb_put(b, " ");
            }
            q += n + 1;
        }
        s_gb_put(b, "}");
    } else {
        s_gb_put(b, "type: ");
        s_gb_type(b, v, vlen);
    }
    s_gb_put(b, " } }");
}

/* Adds a node. inputs: "a,b:1,^c" or NULL; device: NULL for none; attrs:
 * "T=float;_class=[loc:@a,loc:@b]" or NULL. */
static inline void s_gb_node(s_gb_t *b, const char *name, const char *op, const char *inputs,
                             const char *device, const char *attrs)
{
    s_gb_put(b, "node { name: \"%s\" op: \"%s\"", name, op);
    for (const char *q = inputs; q && *q;) {
        size_t n = strcspn(q, ",");
        s_gb_put(b, " input: \"%.*s\"", (int)n, q);
        q += n + (q[n] ? 1 : 0);
    }
    if (device) s_gb_put(b, " device: \"%s\"", device);
    for (const char *q = attrs; q && *q;) {
        size_t n = strcspn(q, ";");
        s_gb_attr(b, q, n);
        q += n + (q[n] ? 1 : 0);
    }
    s_gb_put(b, " }\n");
}

/* Builds the graph (which owns its GraphDef) and frees the text. */
static inline zf_graph_t *s_gb_graph(s_gb_t *b)
{
    Tensorflow__GraphDef *gd = NULL;
    zf_graph_t *g = NULL;
    zf_status_t s = zf_graphdef_read_mem(b->text ? b->text : "", b->len, ZF_FORMAT_PBTXT, &gd);
    if (zf_ok(s)) s = zf_graph_new_from_graphdef(gd, &g);
    if (!zf_ok(s)) {
        fprintf(stderr, "test graph: %s\n%s\n", zf_status_msg(&s), b->text);
        abort();
    }
    zf_graph_adopt_graphdef(g, &gd);
    free(b->text);
    *b = (s_gb_t){0};
    return g;
}

/* ---- device sets ------------------------------------------------------ */

typedef struct {
    zf_placer_device_t d[S_MAX_DEVICES];
    int n;
} s_devs_t;

static inline void s_devs_add(s_devs_t *ds, const char *job, int replica, int task,
                              const char *type, int id)
{
    if (ds->n == S_MAX_DEVICES) abort();
    zf_placer_device_t *d = &ds->d[ds->n++];
    d->load = 0;
    zf_status_t s = zf_device_name_make(job, replica, task, type, id, &d->name);
    if (!zf_ok(s)) abort();
}

/* TensorFlow's placer-test device set: n FakeCPUs and n FakeGPUs on
 * /job:a/replica:0/task:0, the GPUs added in reverse order. */
static inline void s_devs_fake(s_devs_t *ds, int n)
{
    ds->n = 0;
    for (int i = 0; i < n; i++) {
        s_devs_add(ds, "a", 0, 0, "FakeCPU", i);
        s_devs_add(ds, "a", 0, 0, "FakeGPU", n - 1 - i);
    }
}

/* Forgets kernels and registers the fake types (FakeCPU below FakeGPU). */
static inline void s_reset_registry(void)
{
    zf_op_registry_reset_kernels();
    if (!zf_ok(zf_device_type_register("FakeCPU", 50))) abort();
    if (!zf_ok(zf_device_type_register("FakeGPU", 51))) abort();
}

/* "Op:FakeCPU,FakeGPU Op2:FakeGPU" */
static inline void s_kernels(const char *spec)
{
    char buf[1024];
    snprintf(buf, sizeof buf, "%s", spec);
    for (char *save = NULL, *op = strtok_r(buf, " ", &save); op; op = strtok_r(NULL, " ", &save)) {
        char *colon = strchr(op, ':');
        if (!colon) abort();
        *colon = '\0';
        char *save2 = NULL;
        for (char *t = strtok_r(colon + 1, ",", &save2); t; t = strtok_r(NULL, ",", &save2)) {
            zf_status_t s = zf_op_register_kernel(op, t);
            if (!zf_ok(s)) {
                fprintf(stderr, "register %s on %s: %s\n", op, t, zf_status_msg(&s));
                abort();
            }
        }
    }
}

/* ---- placing ---------------------------------------------------------- */

typedef struct {
    zf_graph_t *g;
    const s_devs_t *devs;
    int *assign;
    zf_status_t status;
} s_placed_t;

static inline s_placed_t s_place_opts(zf_graph_t *g, const s_devs_t *devs,
                                      const zf_placer_options_t *o)
{
    s_placed_t r = {g, devs, calloc((size_t)zf_graph_num_nodes(g) + 1, sizeof(int)), ZF_STATUS_OK};
    r.status = zf_placer_run(g, devs->d, devs->n, o, r.assign);
    return r;
}

static inline s_placed_t s_place(zf_graph_t *g, const s_devs_t *devs, bool soft)
{
    zf_placer_options_t o = ZF_PLACER_OPTIONS_DEFAULT;
    o.allow_soft_placement = soft;
    return s_place_opts(g, devs, &o);
}

static inline void s_placed_free(s_placed_t *r)
{
    zf_status_clear(&r->status);
    free(r->assign);
    zf_graph_destroy(&r->g);
}

static inline int s_index(const s_placed_t *r, const char *node)
{
    int i = zf_graph_find_node(r->g, node);
    if (i < 0) abort();
    return r->assign[i];
}

/* The full device name of node (in a static buffer: one call per statement). */
static inline const char *s_dev(const s_placed_t *r, const char *node)
{
    static char buf[4][ZF_DEVICE_NAME_MAX];
    static int k;
    int d = s_index(r, node);
    if (d < 0) return "(unplaced)";
    k = (k + 1) % 4;
    return zf_device_name_format(&r->devs->d[d].name, buf[k], sizeof buf[k]);
}

static inline const char *s_type(const s_placed_t *r, const char *node)
{
    int d = s_index(r, node);
    return d < 0 ? "(unplaced)" : r->devs->d[d].name.type;
}

#endif
