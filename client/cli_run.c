/* zflow run: runs a GraphDef with feeds and fetches — through a service
 * (--broker, or a local cluster started for the run) or in this process
 * (--inprocess). Owns the parsing of feed values (literals and .npy files)
 * and the printing of fetched tensors. */
#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "client/cli.h"
#include "client/cluster.h"
#include "client/zflow_client.h"
#include "common/graph.h"
#include "common/dtype.h"
#include "common/graphdef_io.h"
#include "common/npy.h"
#include "common/tensor_print.h"
#include "executor/local_session.h"

static const char s_usage[] =
    "usage: zflow run GRAPH --inprocess [--devices LIST] [--feed NAME=VALUE]...\n"
    "                 --fetch T [T...] [--target N]... [--out-dir DIR] [--quiet]\n"
    "       zflow run GRAPH [--broker ENDPOINT | --devices LIST] [the same options]\n"
    "\n"
    "Runs the GraphDef GRAPH (.pb or .pbtxt) once: places it on the devices,\n"
    "partitions it, runs every partition and prints the fetched tensors as\n"
    "NumPy prints arrays.\n"
    "\n"
    "  --broker ENDPOINT run as a job on the service whose broker is at\n"
    "                    ENDPOINT (see `zflow up`)\n"
    "  --inprocess       run inside this process\n"
    "                    With neither, a local cluster (broker, scheduler and\n"
    "                    one executor per device) is started on 127.0.0.1 for\n"
    "                    the run and stopped after it.\n"
    "  --devices LIST    devices as for `zflow place`, e.g. cpu:2 or full names\n"
    "                    (--inprocess: default cpu:1 plus one per visible GPU;\n"
    "                    local cluster: default cpu:1); nodes pinned to devices\n"
    "                    of the list run there, each device as its own partition\n"
    "  --feed NAME=VALUE feed tensor NAME (x or x:0). VALUE is @FILE.npy or a\n"
    "                    literal such as 3, [1,2] or [[1,2],[3,4]]; the dtype is\n"
    "                    the graph's, or NAME:DTYPE=VALUE (x:float32=[1,2])\n"
    "  --fetch T [T...]  tensors to fetch (repeatable)\n"
    "  --target N        node to run for its effects (repeatable)\n"
    "  --out-dir DIR     also write each fetch to DIR/<name>.npy, with '/' and\n"
    "                    ':' in the name replaced by '_'\n"
    "  --place MODE      first (the first valid device, TensorFlow's rule;\n"
    "                    the --inprocess default) or balanced (the least\n"
    "                    loaded valid device; the service's default)\n"
    "  --allow-soft-placement  put a node whose device has no kernel for it\n"
    "                    on a valid device of the same task instead\n"
    "  --quiet           print nothing but errors\n"
    "  --timeout-ms N    how long to wait for the service's answer (default\n"
    "                    60000; not for --inprocess)\n";

/* ---- literals ----------------------------------------------------------- */

typedef struct {
    double d;
    long long i;
    bool is_int, is_bool;
} s_num_t;

typedef struct {
    const char *text, *p;
    s_num_t *vals;
    size_t n, cap;
    int leaf;                  /* depth of the scalars, -1 until one is seen */
    int deepest;               /* deepest list */
    int64_t dims[ZF_MAX_RANK]; /* element count per depth, -1 until known */
} s_lit_t;

static zf_status_t s_lit_error(const s_lit_t *l, const char *what)
{
    return zf_invalid_argument("bad value '%s' at offset %d: %s", l->text, (int)(l->p - l->text),
                               what);
}

static void s_skip_space(s_lit_t *l)
{
    while (isspace((unsigned char)*l->p)) l->p++;
}

static zf_status_t s_lit_push(s_lit_t *l, s_num_t v)
{
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 16;
        s_num_t *vals = realloc(l->vals, cap * sizeof *vals);
        if (!vals) return zf_out_of_memory("feed value");
        l->vals = vals;
        l->cap = cap;
    }
    l->vals[l->n++] = v;
    return ZF_STATUS_OK;
}

static zf_status_t s_lit_scalar(s_lit_t *l, int depth)
{
    if (l->leaf >= 0 && l->leaf != depth) return s_lit_error(l, "nesting is not rectangular");
    l->leaf = depth;
    s_num_t v = {0, 0, false, false};
    const char *words[] = {"true", "True", "false", "False"};
    for (int w = 0; w < 4; w++) {
        size_t len = strlen(words[w]);
        if (strncmp(l->p, words[w], len) == 0 && !isalnum((unsigned char)l->p[len])) {
            v.is_bool = true;
            v.i = w < 2;
            v.d = (double)v.i;
            l->p += len;
            return s_lit_push(l, v);
        }
    }
    char *end = NULL;
    errno = 0;
    v.d = strtod(l->p, &end);
    if (end == l->p) return s_lit_error(l, "expected a number, true, false or '['");
    size_t len = (size_t)(end - l->p);
    v.is_int = strcspn(l->p, ".eEnNiIxX") >= len; /* no point, exponent, nan, inf, hex */
    if (v.is_int) {
        errno = 0;
        v.i = strtoll(l->p, NULL, 10);
        if (errno == ERANGE) return s_lit_error(l, "integer out of range");
    }
    l->p = end;
    return s_lit_push(l, v);
}

static zf_status_t s_lit_value(s_lit_t *l, int depth);

static zf_status_t s_lit_list(s_lit_t *l, int depth)
{
    if (depth >= ZF_MAX_RANK) return s_lit_error(l, "nested too deeply");
    if (l->leaf >= 0 && depth >= l->leaf) return s_lit_error(l, "nesting is not rectangular");
    l->p++; /* '[' */
    if (depth + 1 > l->deepest) l->deepest = depth + 1;
    int64_t count = 0;
    s_skip_space(l);
    if (*l->p != ']') {
        for (;;) {
            ZF_TRY(s_lit_value(l, depth + 1));
            count++;
            s_skip_space(l);
            if (*l->p == ']') break;
            if (*l->p != ',') return s_lit_error(l, "expected ',' or ']'");
            l->p++;
        }
    }
    l->p++; /* ']' */
    if (l->dims[depth] >= 0 && l->dims[depth] != count)
        return s_lit_error(l, "nesting is not rectangular");
    l->dims[depth] = count;
    return ZF_STATUS_OK;
}

static zf_status_t s_lit_value(s_lit_t *l, int depth)
{
    s_skip_space(l);
    return *l->p == '[' ? s_lit_list(l, depth) : s_lit_scalar(l, depth);
}

/* The dtype a literal gets when neither NAME:DTYPE nor the graph says. */
static zf_dtype_t s_lit_default_dtype(const s_lit_t *l)
{
    bool all_bool = l->n > 0, all_int = true;
    for (size_t i = 0; i < l->n; i++) {
        all_bool = all_bool && l->vals[i].is_bool;
        all_int = all_int && (l->vals[i].is_int || l->vals[i].is_bool);
    }
    return all_bool ? ZF_BOOL : all_int ? ZF_INT32 : ZF_FLOAT;
}

/* Stores v as element i of t (dtype checked by the caller). */
static zf_status_t s_store(zf_tensor_t *t, size_t i, const s_num_t *v)
{
    void *data = zf_tensor_data(t);
    zf_dtype_t dt = zf_tensor_dtype(t);
    if (zf_dtype_is_integer(dt) || dt == ZF_BOOL) {
        bool integral = v->is_int || v->is_bool || (isfinite(v->d) && v->d == floor(v->d));
        long long x = v->is_int || v->is_bool ? v->i : (long long)v->d;
        if (!integral || (dt == ZF_BOOL && x != 0 && x != 1))
            return zf_invalid_argument("value %g is not a %s", v->d, zf_dtype_name(dt));
        switch (dt) {
        case ZF_BOOL: ((bool *)data)[i] = x != 0; return ZF_STATUS_OK;
        case ZF_INT8: ((int8_t *)data)[i] = (int8_t)x; break;
        case ZF_UINT8: ((uint8_t *)data)[i] = (uint8_t)x; break;
        case ZF_INT16: ((int16_t *)data)[i] = (int16_t)x; break;
        case ZF_UINT16: ((uint16_t *)data)[i] = (uint16_t)x; break;
        case ZF_INT32: ((int32_t *)data)[i] = (int32_t)x; break;
        case ZF_UINT32: ((uint32_t *)data)[i] = (uint32_t)x; break;
        case ZF_INT64: ((int64_t *)data)[i] = (int64_t)x; break;
        case ZF_UINT64: ((uint64_t *)data)[i] = (uint64_t)x; break;
        default: break;
        }
        return ZF_STATUS_OK;
    }
    switch (dt) {
    case ZF_FLOAT: ((float *)data)[i] = (float)v->d; break;
    case ZF_DOUBLE: ((double *)data)[i] = v->d; break;
    case ZF_HALF: ((uint16_t *)data)[i] = zf_float_to_half((float)v->d); break;
    case ZF_BFLOAT16: ((uint16_t *)data)[i] = zf_float_to_bfloat16((float)v->d); break;
    default: return zf_unimplemented("literal values of dtype %s", zf_dtype_name(dt));
    }
    return ZF_STATUS_OK;
}

/* Parses text into a tensor of dtype (ZF_INVALID: guess from the text). */
static zf_status_t s_parse_literal(const char *text, zf_dtype_t dtype, zf_tensor_t **out)
{
    s_lit_t l = {.text = text, .p = text, .leaf = -1};
    for (int d = 0; d < ZF_MAX_RANK; d++) l.dims[d] = -1;
    zf_status_t s = s_lit_value(&l, 0);
    s_skip_space(&l);
    if (zf_ok(s) && *l.p) s = s_lit_error(&l, "unexpected text after the value");
    int rank = l.leaf >= 0 ? l.leaf : l.deepest;
    zf_shape_t shape = {.rank = rank};
    for (int d = 0; d < rank; d++) shape.dims[d] = l.dims[d];
    if (zf_ok(s) && dtype == ZF_INVALID) dtype = s_lit_default_dtype(&l);
    if (zf_ok(s)) s = zf_tensor_new(dtype, &shape, out);
    for (size_t i = 0; zf_ok(s) && i < l.n; i++) s = s_store(*out, i, &l.vals[i]);
    if (!zf_ok(s)) zf_tensor_unref(out);
    free(l.vals);
    return s;
}

/* ---- the command -------------------------------------------------------------- */

typedef struct {
    const char *graph, *devices, *out_dir, *broker, *timeout_text, *place;
    int timeout_ms;
    const char **feed_specs, **fetches, **targets;
    int n_feeds, n_fetches, n_targets;
    bool inprocess, quiet, soft_placement;
} s_args_t;

static bool s_is_digits(const char *s)
{
    if (!*s) return false;
    for (; *s; s++)
        if (!isdigit((unsigned char)*s)) return false;
    return true;
}

/* Splits "NAME[:DTYPE]=VALUE"; *name is malloc'd. */
static zf_status_t s_split_feed(const char *spec, char **name, zf_dtype_t *dtype,
                                const char **value)
{
    *dtype = ZF_INVALID;
    const char *eq = strchr(spec, '=');
    if (!eq || eq == spec) return zf_invalid_argument("--feed '%s': expected NAME=VALUE", spec);
    *value = eq + 1;
    *name = strndup(spec, (size_t)(eq - spec));
    if (!*name) return zf_out_of_memory("feed");
    char *colon = strrchr(*name, ':');
    if (colon && !s_is_digits(colon + 1)) {
        if (!zf_dtype_parse(colon + 1, dtype))
            return zf_invalid_argument("--feed '%s': unknown dtype '%s'", spec, colon + 1);
        *colon = '\0';
    }
    return ZF_STATUS_OK;
}

/* What runs the step: the local session (--inprocess) or a service client
 * (with the graph, for feed dtypes). */
typedef struct {
    zf_local_session_t *sess;
    zf_client_t *client;
    const Tensorflow__GraphDef *gd;
    zf_graph_t *graph;
} s_runner_t;

/* The graph's dtype for tensor name; ZF_INVALID when it does not know. */
static zf_dtype_t s_graph_dtype(const s_runner_t *r, const char *name)
{
    zf_dtype_t dtype = ZF_INVALID;
    zf_status_t s = ZF_STATUS_OK;
    if (r->sess) {
        s = zf_local_session_tensor_dtype(r->sess, name, &dtype);
    } else if (r->graph) {
        const char *node = NULL;
        size_t len = 0;
        int port = 0;
        s = zf_tensor_name_parse(name, &node, &len, &port);
        int id = zf_ok(s) ? zf_graph_find_node_n(r->graph, node, len) : -1;
        if (id >= 0 && port >= 0) s = zf_graph_output_type(r->graph, id, port, &dtype);
        if (zf_ok(s)) dtype = zf_dtype_base(dtype);
    }
    zf_status_clear(&s);
    return dtype;
}

/* Builds feed i's tensor; bad text is a usage error (*usage set). */
static zf_status_t s_feed_value(const s_runner_t *r, const char *spec, char **name,
                                zf_tensor_t **out, bool *usage)
{
    zf_dtype_t dtype = ZF_INVALID;
    const char *value = NULL;
    *usage = true;
    ZF_TRY(s_split_feed(spec, name, &dtype, &value));
    if (value[0] == '@') {
        *usage = false;
        ZF_TRY(zf_npy_read_file(value + 1, out));
        if (dtype != ZF_INVALID && zf_tensor_dtype(*out) != dtype)
            return zf_invalid_argument("--feed '%s': %s holds %s, not %s", spec, value + 1,
                                       zf_dtype_name(zf_tensor_dtype(*out)), zf_dtype_name(dtype));
        return ZF_STATUS_OK;
    }
    if (dtype == ZF_INVALID) dtype = s_graph_dtype(r, *name); /* when the graph knows it */
    return zf_status_prefix(s_parse_literal(value, dtype, out), "--feed '%s'", spec);
}

/* "layer1/relu:0" -> DIR/layer1_relu_0.npy */
static zf_status_t s_write_npy(const char *dir, const char *fetch, const zf_tensor_t *t)
{
    size_t len = strlen(dir) + strlen(fetch) + 8;
    char *path = malloc(len);
    if (!path) return zf_out_of_memory("output path");
    int n = snprintf(path, len, "%s/", dir);
    for (const char *c = fetch; *c; c++) path[n++] = (*c == '/' || *c == ':') ? '_' : *c;
    strcpy(path + n, ".npy");
    zf_status_t s = zf_npy_write_file(path, t);
    free(path);
    return s;
}

static zf_status_t s_make_dir(const char *dir)
{
    struct stat st;
    if (stat(dir, &st) == 0) {
        return S_ISDIR(st.st_mode) ? ZF_STATUS_OK
                                   : zf_invalid_argument("--out-dir '%s' is not a directory", dir);
    }
    if (mkdir(dir, 0777) != 0)
        return zf_status_new(ZF_UNKNOWN, "cannot create directory '%s': %s", dir, strerror(errno));
    return ZF_STATUS_OK;
}

static zf_status_t s_print_and_save(const s_args_t *a, zf_tensor_t **got)
{
    if (a->out_dir) ZF_TRY(s_make_dir(a->out_dir));
    for (int j = 0; j < a->n_fetches; j++) {
        if (!a->quiet) {
            char *text = NULL;
            ZF_TRY(zf_tensor_format(got[j], &text));
            printf("%s =\n%s\n", a->fetches[j], text);
            free(text);
        }
        if (a->out_dir) ZF_TRY(s_write_npy(a->out_dir, a->fetches[j], got[j]));
    }
    return ZF_STATUS_OK;
}

static zf_status_t s_run_step(const s_runner_t *r, const s_args_t *a, char **names,
                              zf_tensor_t **values, zf_tensor_t **got)
{
    if (r->sess)
        return zf_local_session_run(r->sess, (const char *const *)names, values, a->n_feeds,
                                    a->fetches, a->n_fetches, a->targets, a->n_targets, got);
    zf_client_step_t step = {(const char *const *)names,
                             values,
                             a->n_feeds,
                             a->fetches,
                             a->n_fetches,
                             a->targets,
                             a->n_targets};
    zf_client_set_timeout(r->client, a->timeout_ms);
    zf_client_session_options_t opts = ZF_CLIENT_SESSION_OPTIONS_DEFAULT;
    opts.allow_soft_placement = a->soft_placement;
    opts.place_first = a->place && strcmp(a->place, "first") == 0;
    return zf_status_prefix(zf_client_run_job(r->client, r->gd, &opts, &step, a->timeout_ms, got),
                            "%s", a->graph);
}

/* Builds the feeds, runs, prints. Returns the exit code. */
static int s_execute(const s_args_t *a, const s_runner_t *r)
{
    char **names = calloc((size_t)a->n_feeds + 1, sizeof *names);
    zf_tensor_t **values = calloc((size_t)a->n_feeds + 1, sizeof *values);
    zf_tensor_t **got = calloc((size_t)a->n_fetches + 1, sizeof *got);
    zf_status_t s = names && values && got ? ZF_STATUS_OK : zf_out_of_memory("run");
    bool usage = false;
    for (int i = 0; i < a->n_feeds && zf_ok(s); i++)
        s = s_feed_value(r, a->feed_specs[i], &names[i], &values[i], &usage);
    if (zf_ok(s)) {
        usage = false;
        s = s_run_step(r, a, names, values, got);
    }
    if (zf_ok(s)) s = s_print_and_save(a, got);
    int rc = zf_ok(s) ? 0 : zf_cli_fail("run", &s);
    if (rc && usage) rc = 2;
    for (int i = 0; names && i < a->n_feeds; i++) free(names[i]);
    for (int i = 0; values && i < a->n_feeds; i++) zf_tensor_unref(&values[i]);
    for (int j = 0; got && j < a->n_fetches; j++) zf_tensor_unref(&got[j]);
    free(names);
    free(values);
    free(got);
    return rc;
}

static int s_usage_error(const char *fmt, ...) ZF_PRINTF(1, 2);
static int s_usage_error(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "zflow run: ");
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n%s", s_usage);
    va_end(ap);
    return 2;
}

/* Stores the value of an option that takes one; false for other options. */
static bool s_valued_option(s_args_t *a, const char *opt, const char *v)
{
    if (strcmp(opt, "--devices") == 0)
        a->devices = v;
    else if (strcmp(opt, "--out-dir") == 0)
        a->out_dir = v;
    else if (strcmp(opt, "--broker") == 0)
        a->broker = v;
    else if (strcmp(opt, "--timeout-ms") == 0)
        a->timeout_text = v;
    else if (strcmp(opt, "--place") == 0)
        a->place = v;
    else if (strcmp(opt, "--feed") == 0)
        a->feed_specs[a->n_feeds++] = v;
    else if (strcmp(opt, "--target") == 0)
        a->targets[a->n_targets++] = v;
    else if (strcmp(opt, "--fetch") == 0)
        a->fetches[a->n_fetches++] = v;
    else
        return false;
    return true;
}

/* Parses argv into *a (arrays sized argc). Returns 0 or the exit code. */
static int s_parse_args(int argc, char **argv, s_args_t *a)
{
    for (int i = 1; i < argc; i++) {
        const char *arg = argv[i];
        if (strcmp(arg, "--inprocess") == 0) {
            a->inprocess = true;
        } else if (strcmp(arg, "--quiet") == 0 || strcmp(arg, "-q") == 0) {
            a->quiet = true;
        } else if (strcmp(arg, "--allow-soft-placement") == 0) {
            a->soft_placement = true;
        } else if (i + 1 < argc && s_valued_option(a, arg, argv[i + 1])) {
            i++;
            /* "--fetch a b c": more fetches follow, once GRAPH is known */
            while (strcmp(arg, "--fetch") == 0 && a->graph && i + 1 < argc && argv[i + 1][0] != '-')
                a->fetches[a->n_fetches++] = argv[++i];
        } else if (arg[0] == '-' && arg[1] != '\0') {
            bool valued = strcmp(arg, "--devices") == 0 || strcmp(arg, "--out-dir") == 0 ||
                          strcmp(arg, "--feed") == 0 || strcmp(arg, "--target") == 0 ||
                          strcmp(arg, "--fetch") == 0 || strcmp(arg, "--broker") == 0 ||
                          strcmp(arg, "--timeout-ms") == 0 || strcmp(arg, "--place") == 0;
            return valued ? s_usage_error("%s needs a value", arg)
                          : s_usage_error("unknown option '%s'", arg);
        } else if (!a->graph) {
            a->graph = arg;
        } else {
            return s_usage_error("unexpected argument '%s'", arg);
        }
    }
    if (!a->graph) return s_usage_error("need a GRAPH file");
    if (a->inprocess && a->broker) return s_usage_error("give --broker or --inprocess, not both");
    if (a->timeout_text) {
        char *end = NULL;
        errno = 0;
        long v = strtol(a->timeout_text, &end, 10);
        if (!a->timeout_text[0] || *end || errno || v < 1 || v > INT_MAX)
            return s_usage_error("--timeout-ms must be a positive number, not '%s'",
                                 a->timeout_text);
        a->timeout_ms = (int)v;
    }
    if (a->place && strcmp(a->place, "first") != 0 && strcmp(a->place, "balanced") != 0)
        return s_usage_error("--place takes first or balanced, not '%s'", a->place);
    if (a->broker && a->devices)
        return s_usage_error("--devices does not apply with --broker: the service has its own");
    if (a->n_fetches == 0 && a->n_targets == 0)
        return s_usage_error("nothing to run: give --fetch or --target");
    return 0;
}

static int s_run_inprocess(const s_args_t *a, const Tensorflow__GraphDef *gd)
{
    s_runner_t r = {0};
    zf_local_session_options_t opts = ZF_LOCAL_SESSION_OPTIONS_DEFAULT;
    opts.devices = a->devices;
    opts.allow_soft_placement = a->soft_placement;
    opts.balanced_placement = a->place && strcmp(a->place, "balanced") == 0;
    zf_status_t s = zf_status_prefix(zf_local_session_new(gd, &opts, &r.sess), "%s", a->graph);
    int rc = zf_ok(s) ? s_execute(a, &r) : zf_cli_fail("run", &s);
    zf_local_session_destroy(&r.sess);
    return rc;
}

/* Runs as a job on the service at --broker, or on a local cluster started
 * for this run and stopped after it. */
static int s_run_service(const s_args_t *a, const Tensorflow__GraphDef *gd)
{
    s_runner_t r = {.gd = gd};
    zf_status_t s = zf_graph_new_from_graphdef(gd, &r.graph);
    zf_status_clear(&s); /* only for feed dtypes; the service reports bad graphs */
    zf_cluster_t *cluster = NULL;
    if (!a->broker) {
        zf_cluster_options_t o = ZF_CLUSTER_OPTIONS_DEFAULT;
        o.devices = a->devices;
        o.quiet = true;
        s = zf_cluster_start(&o, &cluster);
    }
    if (zf_ok(s))
        s = zf_client_connect(a->broker ? a->broker : zf_cluster_endpoint(cluster), &r.client);
    int rc = zf_ok(s) ? s_execute(a, &r) : zf_cli_fail("run", &s);
    zf_client_destroy(&r.client);
    s = zf_cluster_stop(&cluster, 5000);
    if (!zf_ok(s)) fprintf(stderr, "zflow run: warning: stopping the local cluster: %s\n", s.msg);
    zf_status_clear(&s);
    zf_graph_destroy(&r.graph);
    return rc;
}

static int s_run(int argc, char **argv)
{
    if (zf_cli_wants_help(argc, argv)) {
        fputs(s_usage, stdout);
        return 0;
    }
    s_args_t a = {.timeout_ms = 60000};
    a.feed_specs = calloc((size_t)argc, sizeof *a.feed_specs);
    a.fetches = calloc((size_t)argc, sizeof *a.fetches);
    a.targets = calloc((size_t)argc, sizeof *a.targets);
    int rc = a.feed_specs && a.fetches && a.targets ? s_parse_args(argc, argv, &a) : 1;
    Tensorflow__GraphDef *gd = NULL;
    if (rc == 0) {
        zf_status_t s = zf_graphdef_read_file(a.graph, ZF_FORMAT_AUTO, &gd);
        if (!zf_ok(s))
            rc = zf_cli_fail("run", &s);
        else
            rc = a.inprocess ? s_run_inprocess(&a, gd) : s_run_service(&a, gd);
    }
    zf_graphdef_free(&gd);
    free(a.feed_specs);
    free(a.fetches);
    free(a.targets);
    return rc;
}

const zf_cli_command_t zf_cli_run = {"run", "run a graph with feeds and fetches", s_run};
