/* zflow place: places a GraphDef's nodes on a device list with the placer
 * (TensorFlow's rules, first or balanced choice) and prints the result. */
#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "client/cli.h"
#include "common/graph.h"
#include "common/graphdef_io.h"
#include "executor/kernels/kernel.h"
#include "scheduler/graph/placer.h"

#define S_MAX_LOADS 256

static const char s_usage[] =
    "usage: zflow place GRAPH --devices LIST [--soft] [--mode first|balanced]\n"
    "                   [--load DEV=N ...] [--format pb|pbtxt]\n"
    "\n"
    "Places every node of the GraphDef GRAPH (.pb or .pbtxt) on one of the "
    "devices\n"
    "in LIST with TensorFlow's placement rules (colocation groups, requested\n"
    "devices, kernels per device type, generator and metadata heuristics) and\n"
    "prints one line per node, in graph order: <node name><TAB><device name>.\n"
    "\n"
    "  --devices LIST  comma-separated full device names, or the shorthand\n"
    "                  cpu:2,gpu:4 for "
    "/job:localhost/replica:0/task:0/device:CPU:0\n"
    "                  and :1, and .../device:GPU:0 to :3\n"
    "  --soft          soft placement: a requested device that cannot be met "
    "falls\n"
    "                  back to the best valid device\n"
    "  --mode MODE     first: TensorFlow's choice, the first valid device in "
    "order\n"
    "                  (type priority, then name); balanced (default): the "
    "least\n"
    "                  loaded valid device of the best type, ties by name\n"
    "  --load DEV=N    the load of device DEV (a device name, or type:id as "
    "in\n"
    "                  gpu:1) for --mode balanced; repeatable; 0 by default\n"
    "\n"
    "Exits 1 with the error when the graph cannot be loaded or placed, 2 on "
    "bad\n"
    "usage.\n";

typedef struct {
    const char *path;
    const char *devices;
    zf_graph_format_t format;
    zf_placer_options_t opts;
    const char *loads[S_MAX_LOADS];
    int n_loads;
} s_args_t;

static int s_usage_error(const char *fmt, ...) ZF_PRINTF(1, 2);
static int s_usage_error(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "zflow place: ");
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n%s", s_usage);
    va_end(ap);
    return 2;
}

/* "--flag VALUE" or "--flag=VALUE": *value set and true when argv[*i] is it. */
static bool s_flag(int argc, char **argv, int *i, const char *flag, const char **value)
{
    size_t n = strlen(flag);
    if (strncmp(argv[*i], flag, n) != 0) return false;
    if (argv[*i][n] == '=') {
        *value = argv[*i] + n + 1;
        return true;
    }
    if (argv[*i][n] != '\0') return false;
    *value = *i + 1 < argc ? argv[++*i] : NULL;
    return true;
}

static int s_parse_mode(const char *mode, s_args_t *a)
{
    if (mode && strcmp(mode, "first") == 0)
        a->opts.mode = ZF_PLACE_FIRST;
    else if (mode && strcmp(mode, "balanced") == 0)
        a->opts.mode = ZF_PLACE_BALANCED;
    else
        return s_usage_error("--mode must be first or balanced, not '%s'", mode ? mode : "");
    return 0;
}

static int s_parse_format(const char *name, s_args_t *a)
{
    zf_status_t s = zf_graph_format_parse(name ? name : "", &a->format);
    if (zf_ok(s)) return 0;
    zf_status_clear(&s);
    return s_usage_error("unknown --format '%s'", name ? name : "");
}

static int s_parse_arg(int argc, char **argv, int *i, s_args_t *a)
{
    const char *v = NULL;
    if (strcmp(argv[*i], "--soft") == 0) {
        a->opts.allow_soft_placement = true;
    } else if (s_flag(argc, argv, i, "--devices", &v)) {
        if (!v) return s_usage_error("%s needs a device list", "--devices");
        a->devices = v;
    } else if (s_flag(argc, argv, i, "--mode", &v)) {
        return s_parse_mode(v, a);
    } else if (s_flag(argc, argv, i, "--format", &v)) {
        return s_parse_format(v, a);
    } else if (s_flag(argc, argv, i, "--load", &v)) {
        if (!v) return s_usage_error("%s needs DEV=N", "--load");
        if (a->n_loads == S_MAX_LOADS) return s_usage_error("%s", "too many --load flags");
        a->loads[a->n_loads++] = v;
    } else if (argv[*i][0] == '-' || a->path) {
        return s_usage_error("unexpected argument '%s'", argv[*i]);
    } else {
        a->path = argv[*i];
    }
    return 0;
}

static int s_parse_args(int argc, char **argv, s_args_t *a)
{
    for (int i = 1; i < argc; i++) {
        int rc = s_parse_arg(argc, argv, &i, a);
        if (rc) return rc;
    }
    if (!a->path) return s_usage_error("%s", "need a GRAPH file");
    if (!a->devices) return s_usage_error("%s", "need --devices LIST");
    return 0;
}

/* ---- loads ------------------------------------------------------------------
 */

static zf_status_t s_devices(const s_args_t *a, zf_placer_device_t **out, int *n)
{
    return zf_cli_placer_devices(a->devices, (const char *const *)a->loads, a->n_loads, out, n);
}

/* ---- placing
 * ------------------------------------------------------------------ */

static bool s_has_type(const zf_placer_device_t *devices, int n, const char *type)
{
    for (int d = 0; d < n; d++)
        if (strcmp(devices[d].name.type, type) == 0) return true;
    return false;
}

static void s_print(const zf_graph_t *g, const zf_placer_device_t *devices, const int *assign)
{
    for (int i = 0; i < zf_graph_num_nodes(g); i++) {
        char name[ZF_DEVICE_NAME_MAX];
        zf_device_name_format(&devices[assign[i]].name, name, sizeof name);
        printf("%s\t%s\n", zf_graph_node_name(g, i), name);
    }
}

static int s_place(const s_args_t *a, zf_placer_device_t *devices, int n)
{
    zf_graph_t *g = NULL;
    zf_status_t s = zf_cli_load_graph(a->path, a->format, &g);
    if (!zf_ok(s)) return zf_cli_fail("place", &s);
    zf_kernels_register_builtin(s_has_type(devices, n, "GPU"));
    int *assign = malloc(((size_t)zf_graph_num_nodes(g) + 1) * sizeof *assign);
    s = assign ? zf_placer_run(g, devices, n, &a->opts, assign) : zf_out_of_memory("placement");
    int rc = zf_ok(s) ? 0 : zf_cli_fail("place", &s);
    if (rc == 0) s_print(g, devices, assign);
    free(assign);
    zf_graph_destroy(&g);
    return rc;
}

static int s_run(int argc, char **argv)
{
    if (zf_cli_wants_help(argc, argv)) {
        fputs(s_usage, stdout);
        return 0;
    }
    s_args_t a = {.opts = ZF_PLACER_OPTIONS_DEFAULT};
    int rc = s_parse_args(argc, argv, &a);
    if (rc) return rc;
    zf_placer_device_t *devices = NULL;
    int n = 0;
    zf_status_t s = s_devices(&a, &devices, &n);
    if (!zf_ok(s)) {
        zf_cli_fail("place", &s);
        return 2;
    }
    rc = s_place(&a, devices, n);
    free(devices);
    return rc;
}

const zf_cli_command_t zf_cli_place = {"place", "place a GraphDef's nodes on devices", s_run};
