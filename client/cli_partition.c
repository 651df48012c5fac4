/* zflow partition: places a GraphDef on a device list, prunes it by feeds,
 * fetches and targets, partitions it with Send/Recv pairs and writes one
 * GraphDef per partition (or a Graphviz drawing), with a summary. */
#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "client/cli.h"
#include "executor/engine/graph_optimizer.h"
#include "common/graph.h"
#include "common/graphdef_io.h"
#include "executor/kernels/kernel.h"
#include "scheduler/graph/partition.h"
#include "scheduler/graph/placer.h"

extern char **environ;

static const char s_usage[] =
    "usage: zflow partition GRAPH --devices LIST [--feed T]... [--fetch T]...\n"
    "                       [--target N]... [--by device|task] [--bf16] [--optimize]\n"
    "                       [--recv-scheduling]\n"
    "                       [--out DIR]\n"
    "                       [--format pbtxt|pb|dot] [--png] [--soft]\n"
    "                       [--mode first|balanced] [--load DEV=N]...\n"
    "\n"
    "Places the GraphDef GRAPH (.pb or .pbtxt) on the devices of LIST as\n"
    "'zflow place' does, prunes it to what the fetches and targets need (the\n"
    "whole graph when there are none), splits it into one GraphDef per device\n"
    "(or task) with _Send/_Recv pairs on the cut edges, writes one file per\n"
    "partition to DIR, named after its device (characters other than\n"
    "[A-Za-z0-9_.-] become '_'), and prints the nodes, sends and recvs of\n"
    "each partition.\n"
    "\n"
    "  --devices LIST  comma-separated full device names, or cpu:2,gpu:4\n"
    "  --feed T        a tensor (node or node:port) the client feeds\n"
    "  --fetch T       a tensor the client fetches\n"
    "  --target N      a node run for its effects\n"
    "  --by device|task  one partition per device (default) or per task\n"
    "  --bf16          send FLOAT tensors between devices as BFLOAT16\n"
    "  --recv-scheduling\n"
    "                  give each recv its ASAP _start_time and a control input\n"
    "                  from the node it should wait for, and list them\n"
    "                  (TensorFlow's enable_recv_scheduling; docs/design.md)\n"
    "  --optimize      show each partition as its executor runs it, after the\n"
    "                  graph optimizer (constant folding, common subexpressions,\n"
    "                  Identity removal; what opt_level L1 does)\n"
    "  --out DIR       where to write (default: the current directory;\n"
    "                  created if missing)\n"
    "  --format FMT    pbtxt (default) or pb: one GraphDef per partition; dot:\n"
    "                  one drawing, partitions.dot, of the placed graph with a\n"
    "                  cluster per partition and the cut edges in red\n"
    "  --png           also draw partitions.dot and render it to partitions.png\n"
    "                  with Graphviz's 'dot' (Debian package graphviz)\n"
    "  --soft, --mode, --load  placement options, as for 'zflow place'\n"
    "\n"
    "Incarnations in the files are derived from the device names (the CLI has\n"
    "no running executors). Exits 1 when the graph cannot be loaded, placed,\n"
    "partitioned or written, 2 on bad usage.\n";

typedef enum { S_OUT_PBTXT, S_OUT_PB, S_OUT_DOT } s_out_format_t;

typedef struct {
    const char *path, *devices, *out_dir;
    s_out_format_t format;
    bool png, optimize;
    zf_placer_options_t place;
    zf_partition_options_t part;
    const char **feeds, **fetches, **targets, **loads;
    int n_loads;
} s_args_t;

static int s_usage_error(const char *fmt, ...) ZF_PRINTF(1, 2);
static int s_usage_error(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs("zflow partition: ", stderr);
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n%s", s_usage);
    va_end(ap);
    return 2;
}

/* "--flag VALUE" or "--flag=VALUE"; *value is NULL when it is missing. */
static bool s_flag(int argc, char **argv, int *i, const char *flag, const char **value)
{
    size_t n = strlen(flag);
    if (strncmp(argv[*i], flag, n) != 0 || (argv[*i][n] != '\0' && argv[*i][n] != '='))
        return false;
    *value = argv[*i][n] == '=' ? argv[*i] + n + 1 : *i + 1 < argc ? argv[++*i] : NULL;
    return true;
}

/* --by, --mode and --format take one of a few words. */
static int s_parse_choice(const char *flag, const char *v, s_args_t *a)
{
    static const struct {
        const char *flag, *word;
        int value;
    } words[] = {
        {"--by", "device", ZF_PARTITION_BY_DEVICE},
        {"--by", "task", ZF_PARTITION_BY_TASK},
        {"--mode", "first", ZF_PLACE_FIRST},
        {"--mode", "balanced", ZF_PLACE_BALANCED},
        {"--format", "pbtxt", S_OUT_PBTXT},
        {"--format", "pb", S_OUT_PB},
        {"--format", "dot", S_OUT_DOT},
    };
    for (size_t k = 0; k < sizeof words / sizeof words[0]; k++) {
        if (strcmp(flag, words[k].flag) != 0 || !v || strcmp(v, words[k].word) != 0) continue;
        if (strcmp(flag, "--by") == 0) a->part.by = (zf_partition_by_t)words[k].value;
        if (strcmp(flag, "--mode") == 0) a->place.mode = (zf_place_mode_t)words[k].value;
        if (strcmp(flag, "--format") == 0) a->format = (s_out_format_t)words[k].value;
        return 0;
    }
    return s_usage_error("unknown %s '%s'", flag, v ? v : "");
}

/* Flags with a value: the repeatable ones append to their list, --devices
 * and --out set one, --by, --mode and --format choose. */
static int s_parse_valued(int argc, char **argv, int *i, s_args_t *a, bool *matched)
{
    const struct {
        const char *flag;
        const char **list; /* NULL: a single value, stored in *one */
        int *count;
        const char **one;
    } valued[] = {
        {"--feed", a->feeds, &a->part.n_feeds, NULL},
        {"--fetch", a->fetches, &a->part.n_fetches, NULL},
        {"--target", a->targets, &a->part.n_targets, NULL},
        {"--load", a->loads, &a->n_loads, NULL},
        {"--devices", NULL, NULL, &a->devices},
        {"--out", NULL, NULL, &a->out_dir},
    };
    static const char *const choices[] = {"--by", "--mode", "--format"};
    const char *v = NULL;
    *matched = true;
    for (size_t k = 0; k < sizeof valued / sizeof valued[0]; k++) {
        if (!s_flag(argc, argv, i, valued[k].flag, &v)) continue;
        if (!v) return s_usage_error("%s needs a value", valued[k].flag);
        if (valued[k].list)
            valued[k].list[(*valued[k].count)++] = v;
        else
            *valued[k].one = v;
        return 0;
    }
    for (size_t k = 0; k < sizeof choices / sizeof choices[0]; k++)
        if (s_flag(argc, argv, i, choices[k], &v)) return s_parse_choice(choices[k], v, a);
    *matched = false;
    return 0;
}

static int s_parse_arg(int argc, char **argv, int *i, s_args_t *a)
{
    bool matched = false;
    int rc = s_parse_valued(argc, argv, i, a, &matched);
    if (matched) return rc;
    if (strcmp(argv[*i], "--soft") == 0)
        a->place.allow_soft_placement = true;
    else if (strcmp(argv[*i], "--bf16") == 0)
        a->part.bfloat16_sendrecv = true;
    else if (strcmp(argv[*i], "--recv-scheduling") == 0)
        a->part.recv_scheduling = true;
    else if (strcmp(argv[*i], "--png") == 0)
        a->png = true;
    else if (strcmp(argv[*i], "--optimize") == 0)
        a->optimize = true;
    else if (argv[*i][0] == '-' || a->path)
        return s_usage_error("unexpected argument '%s'", argv[*i]);
    else
        a->path = argv[*i];
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
    a->part.feeds = a->feeds;
    a->part.fetches = a->fetches;
    a->part.targets = a->targets;
    return 0;
}

/* ---- devices ---------------------------------------------------------------- */

static zf_status_t s_devices(const s_args_t *a, zf_placer_device_t **out, int *n)
{
    return zf_cli_placer_devices(a->devices, (const char *const *)a->loads, a->n_loads, out, n);
}

/* A stable stand-in incarnation: FNV-1a of the device name, never 0. */
static uint64_t s_incarnation(const zf_device_name_t *name)
{
    char buf[ZF_DEVICE_NAME_MAX];
    zf_device_name_format(name, buf, sizeof buf);
    uint64_t h = 0xcbf29ce484222325ull;
    for (const char *c = buf; *c; c++) h = (h ^ (unsigned char)*c) * 0x100000001b3ull;
    return h ? h : 1;
}

/* ---- output ------------------------------------------------------------------ */

static zf_status_t s_write_text(const char *path, const char *text, size_t len)
{
    FILE *f = fopen(path, "wb");
    if (!f) return zf_status_new(ZF_NOT_FOUND, "cannot write '%s': %s", path, strerror(errno));
    bool ok = fwrite(text, 1, len, f) == len;
    ok = fclose(f) == 0 && ok;
    return ok ? ZF_STATUS_OK : zf_status_new(ZF_DATA_LOSS, "cannot write '%s'", path);
}

static void s_print_part(const zf_partition_t *p, const char *path)
{
    printf("  %s  nodes=%zu sends=%d recvs=%d feeds=%d fetches=%d", p->device, p->graph->n_node,
           p->n_send, p->n_recv, p->n_feeds, p->n_fetches);
    printf(path ? " -> %s\n" : "\n", path);
    /* With --recv-scheduling: each recv's start time and control inputs. */
    for (size_t i = 0; i < p->graph->n_node; i++) {
        const Tensorflow__NodeDef *nd = p->graph->node[i];
        const Tensorflow__AttrValue *t = zf_node_attr(nd, "_start_time");
        if (!t) continue;
        printf("    %s %s _start_time=%" PRId64, nd->op, nd->name, (int64_t)t->i);
        for (size_t k = 0; k < nd->n_input; k++)
            if (nd->input[k][0] == '^') printf(" %s", nd->input[k]);
        printf("\n");
    }
}

static zf_status_t s_write_graphs(const s_args_t *a, const zf_partition_set_t *set)
{
    const char *ext = a->format == S_OUT_PB ? ".pb" : ".pbtxt";
    zf_graph_format_t format = a->format == S_OUT_PB ? ZF_FORMAT_PB : ZF_FORMAT_PBTXT;
    for (int i = 0; i < set->n_parts; i++) {
        char *path = zf_cli_file_path(a->out_dir, set->parts[i].device, ext);
        if (!path) return zf_out_of_memory("file name");
        zf_status_t s = zf_graphdef_write_file(set->parts[i].graph, path, format);
        if (zf_ok(s)) s_print_part(&set->parts[i], path);
        free(path);
        ZF_TRY(s);
    }
    return ZF_STATUS_OK;
}

/* Renders DIR/partitions.png from the .dot with Graphviz. */
static zf_status_t s_render_png(const char *dot_path, const char *png_path)
{
    char *argv[] = {"dot", "-Tpng", "-o", (char *)png_path, (char *)dot_path, NULL};
    pid_t pid;
    int rc = posix_spawnp(&pid, "dot", NULL, NULL, argv, environ);
    if (rc == ENOENT)
        return zf_status_new(ZF_FAILED_PRECONDITION,
                             "--png needs Graphviz's 'dot' program (Debian package graphviz)");
    if (rc != 0) return zf_internal("cannot run 'dot': %s", strerror(rc));
    int status = 0;
    if (waitpid(pid, &status, 0) < 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0)
        return zf_internal("'dot' failed to render '%s'", png_path);
    printf("wrote %s\n", png_path);
    return ZF_STATUS_OK;
}

static zf_status_t s_write_drawing(const s_args_t *a, const zf_graph_t *g,
                                   const zf_partition_device_t *devs, int n, const int *assign)
{
    char *dot = NULL, *dot_path = zf_cli_file_path(a->out_dir, "partitions", ".dot");
    char *png_path = zf_cli_file_path(a->out_dir, "partitions", ".png");
    size_t len = 0;
    zf_status_t s = dot_path && png_path
                        ? zf_partition_dot(g, devs, n, assign, &a->part, &dot, &len)
                        : zf_out_of_memory("file name");
    if (zf_ok(s)) s = s_write_text(dot_path, dot, len);
    if (zf_ok(s)) printf("wrote %s\n", dot_path);
    if (zf_ok(s) && a->png) s = s_render_png(dot_path, png_path);
    free(dot);
    free(dot_path);
    free(png_path);
    return s;
}

/* ---- the command -------------------------------------------------------------- */

static zf_status_t s_partition(const s_args_t *a, const zf_graph_t *g,
                               const zf_placer_device_t *pdevs, int n, const int *assign)
{
    zf_partition_device_t *devs = calloc((size_t)n, sizeof *devs);
    if (!devs) return zf_out_of_memory("device list");
    for (int d = 0; d < n; d++)
        devs[d] = (zf_partition_device_t){pdevs[d].name, s_incarnation(&pdevs[d].name)};
    zf_partition_set_t *set = NULL;
    zf_status_t s = zf_partition_graph(g, devs, n, assign, &a->part, &set);
    for (int i = 0; zf_ok(s) && a->optimize && i < set->n_parts; i++) {
        zf_optimizer_options_t oo = {ZF_OPT_L1, 0};
        zf_optimizer_stats_t st;
        s = zf_optimize_graph(set->parts[i].graph, &oo, &st);
        if (zf_ok(s))
            printf("optimized %s: %d folded, %d merged, %d forwarded, %d removed\n",
                   set->parts[i].device, st.folded, st.merged, st.forwarded, st.removed);
    }
    if (zf_ok(s)) s = zf_cli_make_dir(a->out_dir);
    if (zf_ok(s)) {
        int pairs = 0;
        for (int i = 0; i < set->n_parts; i++) pairs += set->parts[i].n_send;
        printf("partitions: %d (by %s), send/recv pairs: %d\n", set->n_parts,
               a->part.by == ZF_PARTITION_BY_TASK ? "task" : "device", pairs);
        if (a->format != S_OUT_DOT) s = s_write_graphs(a, set);
        for (int i = 0; i < set->n_parts && a->format == S_OUT_DOT; i++)
            s_print_part(&set->parts[i], NULL);
        if (zf_ok(s) && (a->format == S_OUT_DOT || a->png))
            s = s_write_drawing(a, g, devs, n, assign);
    }
    zf_partition_set_destroy(&set);
    free(devs);
    return s;
}

static bool s_has_gpu(const zf_placer_device_t *devs, int n)
{
    for (int d = 0; d < n; d++)
        if (strcmp(devs[d].name.type, "GPU") == 0) return true;
    return false;
}

static int s_execute(const s_args_t *a, const zf_placer_device_t *devs, int n)
{
    zf_graph_t *g = NULL;
    zf_status_t s = zf_cli_load_graph(a->path, ZF_FORMAT_AUTO, &g);
    if (!zf_ok(s)) return zf_cli_fail("partition", &s);
    zf_kernels_register_builtin(s_has_gpu(devs, n));
    int *assign = malloc(((size_t)zf_graph_num_nodes(g) + 1) * sizeof *assign);
    s = assign ? zf_placer_run(g, devs, n, &a->place, assign) : zf_out_of_memory("placement");
    if (zf_ok(s)) s = s_partition(a, g, devs, n, assign);
    free(assign);
    zf_graph_destroy(&g);
    return zf_ok(s) ? 0 : zf_cli_fail("partition", &s);
}

static int s_run(int argc, char **argv)
{
    if (zf_cli_wants_help(argc, argv)) {
        fputs(s_usage, stdout);
        return 0;
    }
    s_args_t a = {.out_dir = ".", .place = ZF_PLACER_OPTIONS_DEFAULT};
    size_t slots = (size_t)argc + 1;
    a.feeds = calloc(slots, sizeof *a.feeds);
    a.fetches = calloc(slots, sizeof *a.fetches);
    a.targets = calloc(slots, sizeof *a.targets);
    a.loads = calloc(slots, sizeof *a.loads);
    int rc = a.feeds && a.fetches && a.targets && a.loads ? s_parse_args(argc, argv, &a) : 1;
    zf_placer_device_t *devs = NULL;
    int n = 0;
    if (rc == 0) {
        zf_status_t s = s_devices(&a, &devs, &n);
        if (!zf_ok(s)) {
            zf_cli_fail("partition", &s);
            rc = 2;
        }
    }
    if (rc == 0) rc = s_execute(&a, devs, n);
    free(devs);
    free(a.feeds);
    free(a.fetches);
    free(a.targets);
    free(a.loads);
    return rc;
}

const zf_cli_command_t zf_cli_partition = {
    "partition", "prune and partition a placed GraphDef into per-device GraphDefs", s_run};
