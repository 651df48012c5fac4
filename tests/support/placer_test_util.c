/* Definitions of placer_test_util.h. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "placer_test_util.h"

void pt_gb_put(pt_gb_t *b, const char *fmt, ...)
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
static void pt_gb_type(pt_gb_t *b, const char *name, size_t len)
{
    pt_gb_put(b, "DT_");
    for (size_t i = 0; i < len; i++) pt_gb_put(b, "%c", toupper((unsigned char)name[i]));
}

/* One attr "key=value": value is a type name, "#N" (int), "'text'" (a
 * string), or "[a,b]" (a list: strings for _class, types otherwise). */
static void pt_gb_attr(pt_gb_t *b, const char *item, size_t len)
{
    const char *eq = memchr(item, '=', len);
    if (!eq) abort();
    const char *v = eq + 1;
    size_t vlen = len - (size_t)(v - item);
    pt_gb_put(b, " attr { key: \"%.*s\" value { ", (int)(eq - item), item);
    if (v[0] == '#') {
        pt_gb_put(b, "i: %.*s", (int)vlen - 1, v + 1);
    } else if (v[0] == '\'') {
        pt_gb_put(b, "s: \"%.*s\"", (int)vlen - 2, v + 1);
    } else if (v[0] == '[') {
        bool strings = (size_t)(eq - item) == 6 && memcmp(item, "_class", 6) == 0;
        pt_gb_put(b, "list { ");
        for (const char *q = v + 1; q < v + vlen - 1;) {
            size_t n = strcspn(q, ",]");
            if (strings)
                pt_gb_put(b, "s: \"%.*s\" ", (int)n, q);
            else {
                pt_gb_put(b, "type: ");
                pt_gb_type(b, q, n);
                pt_gb_put(b, " ");
            }
            q += n + 1;
        }
        pt_gb_put(b, "}");
    } else {
        pt_gb_put(b, "type: ");
        pt_gb_type(b, v, vlen);
    }
    pt_gb_put(b, " } }");
}

void pt_gb_node(pt_gb_t *b, const char *name, const char *op, const char *inputs,
                const char *device, const char *attrs)
{
    pt_gb_put(b, "node { name: \"%s\" op: \"%s\"", name, op);
    for (const char *q = inputs; q && *q;) {
        size_t n = strcspn(q, ",");
        pt_gb_put(b, " input: \"%.*s\"", (int)n, q);
        q += n + (q[n] ? 1 : 0);
    }
    if (device) pt_gb_put(b, " device: \"%s\"", device);
    for (const char *q = attrs; q && *q;) {
        size_t n = strcspn(q, ";");
        pt_gb_attr(b, q, n);
        q += n + (q[n] ? 1 : 0);
    }
    pt_gb_put(b, " }\n");
}

zf_graph_t *pt_gb_graph(pt_gb_t *b)
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
    *b = (pt_gb_t){0};
    return g;
}

void pt_devs_add(pt_devs_t *ds, const char *job, int replica, int task, const char *type, int id)
{
    if (ds->n == PT_MAX_DEVICES) abort();
    zf_placer_device_t *d = &ds->d[ds->n++];
    d->load = 0;
    zf_status_t s = zf_device_name_make(job, replica, task, type, id, &d->name);
    if (!zf_ok(s)) abort();
}

void pt_devs_fake(pt_devs_t *ds, int n)
{
    ds->n = 0;
    for (int i = 0; i < n; i++) {
        pt_devs_add(ds, "a", 0, 0, "FakeCPU", i);
        pt_devs_add(ds, "a", 0, 0, "FakeGPU", n - 1 - i);
    }
}

void pt_reset_registry(void)
{
    zf_op_registry_reset_kernels();
    if (!zf_ok(zf_device_type_register("FakeCPU", 50))) abort();
    if (!zf_ok(zf_device_type_register("FakeGPU", 51))) abort();
}

void pt_kernels(const char *spec)
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

pt_placed_t pt_place_opts(zf_graph_t *g, const pt_devs_t *devs, const zf_placer_options_t *o)
{
    pt_placed_t r = {g, devs, calloc((size_t)zf_graph_num_nodes(g) + 1, sizeof(int)), ZF_STATUS_OK};
    r.status = zf_placer_run(g, devs->d, devs->n, o, r.assign);
    return r;
}

pt_placed_t pt_place(zf_graph_t *g, const pt_devs_t *devs, bool soft)
{
    zf_placer_options_t o = ZF_PLACER_OPTIONS_DEFAULT;
    o.allow_soft_placement = soft;
    return pt_place_opts(g, devs, &o);
}

void pt_placed_free(pt_placed_t *r)
{
    zf_status_clear(&r->status);
    free(r->assign);
    zf_graph_destroy(&r->g);
}

static int pt_index(const pt_placed_t *r, const char *node)
{
    int i = zf_graph_find_node(r->g, node);
    if (i < 0) abort();
    return r->assign[i];
}

const char *pt_dev(const pt_placed_t *r, const char *node)
{
    static char buf[4][ZF_DEVICE_NAME_MAX];
    static int k;
    int d = pt_index(r, node);
    if (d < 0) return "(unplaced)";
    k = (k + 1) % 4;
    return zf_device_name_format(&r->devs->d[d].name, buf[k], sizeof buf[k]);
}

const char *pt_type(const pt_placed_t *r, const char *node)
{
    int d = pt_index(r, node);
    return d < 0 ? "(unplaced)" : r->devs->d[d].name.type;
}
