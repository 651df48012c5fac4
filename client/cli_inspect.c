/* zflow inspect: loads, validates and summarises a GraphDef. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "client/cli.h"
#include "common/device_name.h"
#include "common/dtype.h"
#include "common/graph.h"
#include "common/graphdef_io.h"
#include "common/kernel_def.h"
#include "common/strmap.h"
#include "session/local_session.h"

static const char s_usage[] =
    "usage: zflow inspect GRAPH [--format pb|pbtxt] [--devices LIST]\n"
    "\n"
    "Loads and validates the GraphDef GRAPH (.pb or .pbtxt) and prints a\n"
    "summary: node and edge counts, ops with their counts, ops zflow does not\n"
    "know or cannot run, the function library, requested devices and the\n"
    "Placeholders a run can feed. Exits 1 with the error on an invalid graph.\n"
    "\n"
    "  --devices LIST  the devices of the run, as `zflow place` takes them\n"
    "                  (cpu:2,gpu:1 or full names); default: those `zflow run\n"
    "                  --inprocess` uses. A node whose op has a kernel on\n"
    "                  none of their types is one zflow cannot run.\n";

/* The distinct device types of the run (kernels are known for 16 at most). */
#define S_TYPES_MAX 16

typedef struct {
    char types[S_TYPES_MAX][ZF_DEVICE_TYPE_MAX + 1];
    int n;
} s_types_t;

static zf_status_t s_device_types(const char *list, s_types_t *t)
{
    char defaults[64];
    if (!list) list = zf_local_session_default_devices(defaults, sizeof defaults);
    zf_device_name_t *names = NULL;
    int n = 0;
    ZF_TRY(zf_status_prefix(zf_device_list_parse(list, &names, &n), "--devices"));
    t->n = 0;
    for (int d = 0; d < n; d++) {
        int k = 0;
        while (k < t->n && strcmp(t->types[k], names[d].type) != 0) k++;
        if (k == S_TYPES_MAX) {
            free(names);
            return zf_invalid_argument("--devices: more than %d device types", S_TYPES_MAX);
        }
        if (k == t->n) snprintf(t->types[t->n++], sizeof t->types[0], "%s", names[d].type);
    }
    free(names);
    zf_kernel_defs_register_builtin();
    return ZF_STATUS_OK;
}

/* Whether a node of this op can run on one of the run's device types. */
static bool s_has_kernel(const zf_op_stat_t *st, const s_types_t *t)
{
    if (st->support != ZF_NODE_SUPPORTED) return false;
    for (int k = 0; k < t->n; k++)
        if (zf_op_has_kernel(st->def, t->types[k])) return true;
    return false;
}

/* Writes a possibly partial shape as "[?,4]" or "<unknown rank>". */
static void s_format_shape(const Tensorflow__TensorShapeProto *shape, char *buf, size_t n)
{
    if (!shape || shape->unknown_rank) {
        snprintf(buf, n, "<unknown rank>");
        return;
    }
    size_t used = (size_t)snprintf(buf, n, "[");
    for (size_t d = 0; d < shape->n_dim && used < n; d++) {
        int64_t size = shape->dim[d]->size;
        used += size < 0 ? (size_t)snprintf(buf + used, n - used, "%s?", d ? "," : "")
                         : (size_t)snprintf(buf + used, n - used, "%s%" PRId64, d ? "," : "", size);
    }
    if (used < n) snprintf(buf + used, n - used, "]");
}

/* "no kernel on CPU, GPU" */
static void s_print_no_kernel(const s_types_t *t)
{
    printf("  no kernel on ");
    for (int k = 0; k < t->n; k++) printf("%s%s", k ? ", " : "", t->types[k]);
}

/* Lists the ops; nodes zflow cannot run are those of ops it does not
 * support and of ops without a kernel on any device type of the run. */
static void s_print_ops(const zf_graph_t *g, const s_types_t *t)
{
    int n = zf_graph_num_ops(g), cannot_run = 0;
    printf("ops (%d distinct):\n", n);
    for (int k = 0; k < n; k++) {
        zf_op_stat_t st = zf_graph_op_stat(g, k);
        printf("  %-32s %8d", st.op, st.count);
        if (st.support != ZF_NODE_SUPPORTED)
            printf("  %s", zf_node_support_name(st.support));
        else if (!s_has_kernel(&st, t))
            s_print_no_kernel(t);
        printf("\n");
        if (!s_has_kernel(&st, t)) cannot_run += st.count;
    }
    int unknown = zf_graph_num_unknown_ops(g);
    printf("unknown ops: ");
    if (unknown == 0) printf("none");
    for (int k = 0; k < unknown; k++) printf("%s%s", k ? ", " : "", zf_graph_unknown_op(g, k));
    printf("\n");
    printf("nodes zflow cannot run yet: %d\n", cannot_run);
}

static void s_print_library(const zf_graph_t *g)
{
    if (!zf_graph_has_library(g)) {
        printf("function library: none\n");
        return;
    }
    printf("function library: %d functions (running library functions is not supported)\n",
           zf_graph_num_library_functions(g));
}

static void s_print_devices(const zf_graph_t *g)
{
    int n = zf_graph_num_nodes(g);
    zf_strmap_t *devices = zf_strmap_new(8, 0);
    const char **order = calloc((size_t)n + 1, sizeof *order);
    int *counts = calloc((size_t)n + 1, sizeof *counts);
    int distinct = 0, unplaced = 0;
    if (!devices || !order || !counts) {
        fprintf(stderr, "zflow inspect: out of memory\n");
    } else {
        for (int i = 0; i < n; i++) {
            const char *dev = zf_graph_node_device(g, i);
            if (!*dev) {
                unplaced++;
                continue;
            }
            uintptr_t k;
            if (zf_strmap_insert(devices, dev, (uintptr_t)distinct, &k) == 0) {
                order[distinct] = dev;
                k = (uintptr_t)distinct++;
            }
            counts[k]++;
        }
        printf("requested devices: %s\n", distinct ? "" : "none");
        for (int k = 0; k < distinct; k++) printf("  %-48s %8d nodes\n", order[k], counts[k]);
        if (distinct) printf("  %-48s %8d nodes\n", "(no device requested)", unplaced);
    }
    free(order);
    free(counts);
    zf_strmap_destroy(&devices);
}

static void s_print_feeds(const zf_graph_t *g)
{
    int n = zf_graph_num_nodes(g), found = 0;
    for (int i = 0; i < n; i++) {
        const char *op = zf_graph_node_op(g, i);
        if (strcmp(op, "Placeholder") != 0 && strcmp(op, "PlaceholderWithDefault") != 0) continue;
        const Tensorflow__NodeDef *nd = zf_graph_node_def(g, i);
        zf_dtype_t dtype = ZF_INVALID;
        const Tensorflow__TensorShapeProto *shape = NULL;
        zf_status_t s = zf_node_attr_type(nd, "dtype", &dtype);
        zf_status_clear(&s);
        s = zf_node_attr_shape(nd, "shape", &shape);
        zf_status_clear(&s);
        char buf[256];
        s_format_shape(shape, buf, sizeof buf);
        if (!found++) printf("feeds (Placeholders):\n");
        printf("  %-32s %-10s %s%s\n", zf_graph_node_name(g, i), zf_dtype_name((int)dtype), buf,
               op[11] ? "  (has a default)" : "");
    }
    if (!found) printf("feeds (Placeholders): none\n");
}

static int s_run(int argc, char **argv)
{
    if (zf_cli_wants_help(argc, argv)) {
        fputs(s_usage, stdout);
        return 0;
    }
    const char *path = NULL, *devices = NULL;
    zf_graph_format_t format = ZF_FORMAT_AUTO;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--format") == 0 && i + 1 < argc) {
            zf_status_t s = zf_graph_format_parse(argv[++i], &format);
            if (!zf_ok(s)) {
                zf_cli_fail("inspect", &s);
                return 2;
            }
        } else if (strcmp(argv[i], "--devices") == 0 && i + 1 < argc) {
            devices = argv[++i];
        } else if (argv[i][0] == '-' || path) {
            fprintf(stderr, "zflow inspect: unexpected argument '%s'\n%s", argv[i], s_usage);
            return 2;
        } else {
            path = argv[i];
        }
    }
    if (!path) {
        fprintf(stderr, "zflow inspect: need a GRAPH file\n%s", s_usage);
        return 2;
    }
    s_types_t types;
    zf_status_t s = s_device_types(devices, &types);
    if (!zf_ok(s)) {
        zf_cli_fail("inspect", &s);
        return 2;
    }
    Tensorflow__GraphDef *gd = NULL;
    zf_graph_t *g = NULL;
    s = zf_graphdef_read_file(path, format, &gd);
    if (zf_ok(s)) s = zf_status_prefix(zf_graph_new_from_graphdef(gd, &g), "%s", path);
    if (!zf_ok(s)) {
        zf_graphdef_free(&gd);
        return zf_cli_fail("inspect", &s);
    }
    zf_graph_adopt_graphdef(g, &gd);
    const Tensorflow__GraphDef *def = zf_graph_graphdef(g);
    int data = 0, control = 0;
    for (int i = 0; i < zf_graph_num_nodes(g); i++) {
        data += zf_graph_num_data_inputs(g, i);
        control += zf_graph_num_control_inputs(g, i);
    }
    printf("graph: %s\n", path);
    printf("nodes: %d\nedges: %d (%d data, %d control)\n", zf_graph_num_nodes(g), data + control,
           data, control);
    if (def->versions)
        printf("versions: producer %d, min_consumer %d\n", def->versions->producer,
               def->versions->min_consumer);
    s_print_ops(g, &types);
    s_print_library(g);
    s_print_devices(g);
    s_print_feeds(g);
    printf("valid: yes\n");
    zf_graph_destroy(&g);
    return 0;
}

const zf_cli_command_t zf_cli_inspect = {"inspect", "validate and summarise a GraphDef", s_run};
