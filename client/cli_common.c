/* Helpers shared by the CLI's commands: usage and failure conventions,
 * --load and --devices lists, feed values (literals and .npy files), the
 * options and feeds of a step (zflow run, submit), the printing of fetched
 * tensors, and the progress line of a job. */
#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/cmdline.h"
#include "client/cli.h"
#include "common/dtype.h"
#include "common/npy.h"
#include "common/tensor_print.h"
#include "scheduler/graph/functions.h"

bool zf_cli_wants_help(int argc, char **argv)
{
    for (int i = 1; i < argc; i++)
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) return true;
    return false;
}

int zf_cli_fail(const char *command, zf_status_t *s)
{
    fprintf(stderr, "zflow %s: %s: %s\n", command, zf_code_name(s->code), zf_status_msg(s));
    zf_status_clear(s);
    return 1;
}

static volatile sig_atomic_t s_interrupted;

static void s_on_sigint(int sig)
{
    (void)sig;
    s_interrupted = 1;
    signal(SIGINT, SIG_DFL); /* a second Ctrl-C kills */
}

const volatile sig_atomic_t *zf_cli_catch_interrupt(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = s_on_sigint; /* no SA_RESTART: a waiting poll wakes up */
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    return &s_interrupted;
}

int zf_cli_interrupted_rc(const zf_status_t *s)
{
    return s_interrupted && s->code == ZF_CANCELLED ? 130 : 0;
}

int zf_cli_usage_error(const char *command, const char *usage, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "zflow %s: ", command);
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n%s", usage);
    va_end(ap);
    return 2;
}

/* DEV as a spec: a device name, or type:id (gpu:1 -> /device:GPU:1). */
static zf_status_t s_load_spec(const char *dev, size_t len, zf_device_name_t *spec)
{
    char buf[ZF_DEVICE_NAME_MAX + 16];
    if (len >= ZF_DEVICE_NAME_MAX)
        return zf_invalid_argument("device '%.*s' is too long", (int)len, dev);
    if (memchr(dev, '/', len)) {
        snprintf(buf, sizeof buf, "%.*s", (int)len, dev);
    } else {
        snprintf(buf, sizeof buf, "/device:%.*s", (int)len, dev);
        for (char *c = buf + 8; *c && *c != ':'; c++) *c = (char)toupper((unsigned char)*c);
    }
    return zf_device_name_parse(buf, spec);
}

zf_status_t zf_cli_apply_load(const char *item, zf_placer_device_t *devices, int n)
{
    const char *eq = strrchr(item, '=');
    if (!eq || eq == item) return zf_invalid_argument("--load '%s' is not DEV=N", item);
    char *end = NULL;
    errno = 0;
    long long load = strtoll(eq + 1, &end, 10);
    if (eq[1] == '\0' || *end != '\0' || errno || load < 0)
        return zf_invalid_argument("--load '%s': N must be a count (0 or more)", item);
    zf_device_name_t spec;
    ZF_TRY(zf_status_prefix(s_load_spec(item, (size_t)(eq - item), &spec), "--load '%s'", item));
    int found = -1, matches = 0;
    for (int d = 0; d < n; d++) {
        if (!zf_device_name_matches(&spec, &devices[d].name)) continue;
        found = d;
        matches++;
    }
    if (matches != 1)
        return zf_invalid_argument("--load '%s' names %s", item,
                                   matches ? "more than one device of the list"
                                           : "no device of the list");
    devices[found].load = load;
    return ZF_STATUS_OK;
}

/* The devices of a --devices LIST with the loads of --load DEV=N options. */
zf_status_t zf_cli_placer_devices(const char *list, const char *const *loads, int n_loads,
                                  zf_placer_device_t **out, int *n)
{
    zf_device_name_t *names = NULL;
    *out = NULL;
    ZF_TRY(zf_status_prefix(zf_device_list_parse(list, &names, n), "--devices"));
    zf_placer_device_t *devices = calloc((size_t)*n, sizeof *devices);
    if (!devices) {
        free(names);
        return zf_out_of_memory("device list");
    }
    for (int d = 0; d < *n; d++) devices[d].name = names[d];
    free(names);
    for (int k = 0; k < n_loads; k++) {
        zf_status_t s = zf_cli_apply_load(loads[k], devices, *n);
        if (!zf_ok(s)) {
            free(devices);
            return s;
        }
    }
    *out = devices;
    return ZF_STATUS_OK;
}

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

/* ---- feeds ---------------------------------------------------------------------- */

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

zf_status_t zf_cli_feed_parse(const char *spec, zf_cli_dtype_fn dtype_of, void *arg, char **name,
                              zf_tensor_t **out, bool *usage)
{
    zf_dtype_t dtype = ZF_INVALID;
    const char *value = NULL;
    *name = NULL;
    *out = NULL;
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
    if (dtype == ZF_INVALID && dtype_of) dtype = dtype_of(arg, *name); /* when the graph knows */
    return zf_status_prefix(s_parse_literal(value, dtype, out), "--feed '%s'", spec);
}

zf_dtype_t zf_cli_graph_dtype(void *graph, const char *name)
{
    const zf_graph_t *g = graph;
    zf_dtype_t dtype = ZF_INVALID;
    int port = 0;
    if (!g) return ZF_INVALID;
    int id = zf_graph_find_tensor(g, name, &port);
    if (id >= 0) {
        zf_status_t s = zf_graph_output_type(g, id, port, &dtype);
        zf_status_clear(&s);
    }
    return zf_dtype_base(dtype);
}

zf_status_t zf_cli_parse_count(const char *option, const char *text, long max, long *out)
{
    *out = 0;
    if (!zf_parse_long(text, 1, max, out))
        return zf_invalid_argument("%s must be a number from 1 to %ld, not '%s'", option, max,
                                   text);
    return ZF_STATUS_OK;
}

const char *zf_cli_default_broker(void)
{
    const char *env = getenv("ZFLOW_BROKER");
    return env && env[0] ? env : ZF_CLI_DEFAULT_BROKER;
}

/* ---- the step of `zflow run` and `zflow submit` --------------------------------- */

static const char *const s_step_valued[] = {
    "--feed",  "--fetch", "--target",           "--init",
    "--place", "--steps", "--checkpoint-every", "--checkpoint-dir"};

static bool s_listed(const char *const *list, const char *opt)
{
    for (int i = 0; list && list[i]; i++)
        if (strcmp(list[i], opt) == 0) return true;
    return false;
}

static bool s_step_valued_option(const char *opt)
{
    for (size_t i = 0; i < sizeof s_step_valued / sizeof s_step_valued[0]; i++)
        if (strcmp(opt, s_step_valued[i]) == 0) return true;
    return false;
}

bool zf_cli_step_args_init(zf_cli_step_args_t *a, int argc)
{
    *a = (zf_cli_step_args_t){.steps = 1};
    a->feed_specs = calloc((size_t)argc, sizeof *a->feed_specs);
    a->fetches = calloc((size_t)argc, sizeof *a->fetches);
    a->targets = calloc((size_t)argc, sizeof *a->targets);
    a->inits = calloc((size_t)argc, sizeof *a->inits);
    return a->feed_specs && a->fetches && a->targets && a->inits;
}

void zf_cli_step_args_free(zf_cli_step_args_t *a)
{
    free(a->feed_specs);
    free(a->fetches);
    free(a->targets);
    free(a->inits);
    a->feed_specs = a->fetches = a->targets = a->inits = NULL;
}

/* Stores the value of a step option that takes one; false for others. */
static bool s_step_option(zf_cli_step_args_t *a, const char *opt, const char *v)
{
    if (strcmp(opt, "--feed") == 0)
        a->feed_specs[a->n_feeds++] = v;
    else if (strcmp(opt, "--fetch") == 0)
        a->fetches[a->n_fetches++] = v;
    else if (strcmp(opt, "--target") == 0)
        a->targets[a->n_targets++] = v;
    else if (strcmp(opt, "--init") == 0)
        a->inits[a->n_inits++] = v;
    else if (strcmp(opt, "--place") == 0)
        a->place = v;
    else if (strcmp(opt, "--steps") == 0)
        a->steps_text = v;
    else if (strcmp(opt, "--checkpoint-every") == 0)
        a->checkpoint_every_text = v;
    else if (strcmp(opt, "--checkpoint-dir") == 0)
        a->checkpoint_dir = v;
    else
        return false;
    return true;
}

/* Takes argv[*i], an option, with its value when it has one: 1 taken, 0
 * not an option taken here, 2 bad usage (printed). */
static int s_take_option(const char *command, const char *usage, int argc, char **argv, int *i,
                         const zf_cli_own_options_t *own, zf_cli_step_args_t *a)
{
    const char *arg = argv[*i];
    zf_status_t s = ZF_STATUS_OK;
    if (strcmp(arg, "--allow-soft-placement") == 0) {
        a->soft_placement = true;
        return 1;
    }
    if (strcmp(arg, "--bf16") == 0) {
        a->bf16 = true;
        return 1;
    }
    if (strcmp(arg, "--recv-scheduling") == 0) {
        a->recv_scheduling = true;
        return 1;
    }
    if (strcmp(arg, "--place-pruned-graph") == 0) {
        a->place_pruned = true;
        return 1;
    }
    if (strcmp(arg, "--opt-level") == 0 && *i + 1 < argc) {
        const char *v = argv[++*i];
        if (strcmp(v, "L0") != 0 && strcmp(v, "L1") != 0)
            return zf_cli_usage_error(command, usage, "--opt-level takes L0 or L1, not '%s'", v);
        a->opt_level = strcmp(v, "L0") == 0 ? -1 : 0;
        return 1;
    }
    if (strcmp(arg, "--partition-by") == 0 && *i + 1 < argc) {
        const char *v = argv[++*i];
        if (strcmp(v, "device") != 0 && strcmp(v, "task") != 0)
            return zf_cli_usage_error(command, usage,
                                      "--partition-by takes device or task, not '%s'", v);
        a->partition_by = v;
        return 1;
    }
    if (own && s_listed(own->flags, arg))
        s = own->set(own->arg, arg, NULL);
    else if (*i + 1 >= argc)
        return 0;
    else if (own && s_listed(own->valued, arg))
        s = own->set(own->arg, arg, argv[++*i]);
    else if (s_step_option(a, arg, argv[*i + 1]))
        ++*i;
    else
        return 0;
    if (!zf_ok(s)) {
        int rc = zf_cli_usage_error(command, usage, "%s", zf_status_msg(&s));
        zf_status_clear(&s);
        return rc;
    }
    /* "--fetch a b c": more fetches follow, once GRAPH is known */
    while (strcmp(arg, "--fetch") == 0 && a->graph && *i + 1 < argc && argv[*i + 1][0] != '-')
        a->fetches[a->n_fetches++] = argv[++*i];
    return 1;
}

int zf_cli_step_args_parse(const char *command, const char *usage, int argc, char **argv,
                           const zf_cli_own_options_t *own, zf_cli_step_args_t *a)
{
    for (int i = 1; i < argc; i++) {
        const char *arg = argv[i];
        int taken = s_take_option(command, usage, argc, argv, &i, own, a);
        if (taken == 2) return 2;
        if (taken) continue;
        if (arg[0] == '-' && arg[1] != '\0') {
            bool valued = s_step_valued_option(arg) || (own && s_listed(own->valued, arg));
            return valued ? zf_cli_usage_error(command, usage, "%s needs a value", arg)
                          : zf_cli_usage_error(command, usage, "unknown option '%s'", arg);
        }
        if (a->graph) return zf_cli_usage_error(command, usage, "unexpected argument '%s'", arg);
        a->graph = arg;
    }
    return a->graph ? 0 : zf_cli_usage_error(command, usage, "need a GRAPH file");
}

/* Parses text (when given) as a count of option opt into *out: 0, or 2
 * after reporting bad usage. */
static int s_count_option(const char *command, const char *usage, const char *opt, const char *text,
                          long *out)
{
    if (!text) return 0;
    zf_status_t s = zf_cli_parse_count(opt, text, 1000000000L, out);
    if (zf_ok(s)) return 0;
    int rc = zf_cli_usage_error(command, usage, "%s", zf_status_msg(&s));
    zf_status_clear(&s);
    return rc;
}

int zf_cli_step_args_check(const char *command, const char *usage, zf_cli_step_args_t *a)
{
    int rc = s_count_option(command, usage, "--steps", a->steps_text, &a->steps);
    if (!rc)
        rc = s_count_option(command, usage, "--checkpoint-every", a->checkpoint_every_text,
                            &a->checkpoint_every);
    if (rc) return rc;
    if (!a->checkpoint_every_text != !a->checkpoint_dir)
        return zf_cli_usage_error(command, usage,
                                  "--checkpoint-every and --checkpoint-dir go together");
    if (a->place && strcmp(a->place, "first") != 0 && strcmp(a->place, "balanced") != 0)
        return zf_cli_usage_error(command, usage, "--place takes first or balanced, not '%s'",
                                  a->place);
    if (a->n_fetches == 0 && a->n_targets == 0)
        return zf_cli_usage_error(command, usage, "nothing to run: give --fetch or --target");
    return 0;
}

zf_status_t zf_cli_feeds_parse(const zf_cli_step_args_t *a, zf_cli_dtype_fn dtype_of, void *arg,
                               zf_cli_feeds_t *f, bool *usage)
{
    *usage = false;
    f->n = 0;
    f->names = calloc((size_t)a->n_feeds + 1, sizeof *f->names);
    f->values = calloc((size_t)a->n_feeds + 1, sizeof *f->values);
    if (!f->names || !f->values) return zf_out_of_memory("feeds");
    f->n = a->n_feeds;
    for (int i = 0; i < a->n_feeds; i++)
        ZF_TRY(
            zf_cli_feed_parse(a->feed_specs[i], dtype_of, arg, &f->names[i], &f->values[i], usage));
    *usage = false;
    return ZF_STATUS_OK;
}

void zf_cli_feeds_free(zf_cli_feeds_t *f)
{
    for (int i = 0; f->names && i < f->n; i++) free(f->names[i]);
    for (int i = 0; f->values && i < f->n; i++) zf_tensor_unref(&f->values[i]);
    free(f->names);
    free(f->values);
    *f = (zf_cli_feeds_t){NULL, NULL, 0};
}

zf_client_step_t zf_cli_client_step(const zf_cli_step_args_t *a, const zf_cli_feeds_t *f)
{
    return (zf_client_step_t){(const char *const *)f->names,
                              f->values,
                              f->n,
                              a->fetches,
                              a->n_fetches,
                              a->targets,
                              a->n_targets};
}

zf_client_session_options_t zf_cli_session_options(const zf_cli_step_args_t *a)
{
    zf_client_session_options_t opts = ZF_CLIENT_SESSION_OPTIONS_DEFAULT;
    opts.allow_soft_placement = a->soft_placement;
    opts.opt_level = a->opt_level;
    opts.bfloat16_sendrecv = a->bf16;
    opts.recv_scheduling = a->recv_scheduling;
    opts.place_pruned_graph = a->place_pruned;
    opts.partition_by = a->partition_by;
    opts.place_first = a->place && strcmp(a->place, "first") == 0;
    return opts;
}

zf_client_job_options_t zf_cli_job_options(const zf_cli_step_args_t *a)
{
    return (zf_client_job_options_t){
        a->steps, a->inits, a->n_inits, 0, false, a->checkpoint_every, a->checkpoint_dir};
}

zf_status_t zf_cli_load_graph(const char *path, zf_graph_format_t format, zf_graph_t **g)
{
    Tensorflow__GraphDef *gd = NULL, *lowered = NULL;
    zf_status_t s = zf_graphdef_read_file(path, format, &gd);
    if (zf_ok(s)) s = zf_status_prefix(zf_functions_lower(gd, &lowered), "%s", path);
    if (zf_ok(s) && lowered) {
        zf_graphdef_free(&gd);
        gd = lowered;
    }
    if (zf_ok(s)) s = zf_status_prefix(zf_graph_new_from_graphdef(gd, g), "%s", path);
    if (!zf_ok(s)) {
        zf_graphdef_free(&gd);
        return s;
    }
    zf_graph_adopt_graphdef(*g, &gd);
    return ZF_STATUS_OK;
}

zf_graph_t *zf_cli_graph_for_dtypes(Tensorflow__GraphDef *gd)
{
    zf_graph_t *graph = NULL;
    zf_status_t s = zf_graph_new_from_graphdef(gd, &graph);
    zf_status_clear(&s);
    return graph;
}

/* ---- fetches -------------------------------------------------------------------- */

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

zf_status_t zf_cli_print_fetches(const char *const *names, zf_tensor_t *const *tensors, int n,
                                 const char *out_dir, bool quiet)
{
    if (out_dir) ZF_TRY(s_make_dir(out_dir));
    for (int j = 0; j < n; j++) {
        if (!quiet) {
            char *text = NULL;
            ZF_TRY(zf_tensor_format(tensors[j], &text));
            printf("%s =\n%s\n", names[j], text);
            free(text);
        }
        if (out_dir) ZF_TRY(s_write_npy(out_dir, names[j], tensors[j]));
    }
    return ZF_STATUS_OK;
}

/* ---- progress ------------------------------------------------------------------- */

void zf_cli_progress_format(char *buf, size_t size, const char *job_id,
                            const zf_client_job_progress_t *p)
{
    double secs = (double)p->elapsed_ms / 1000.0;
    int64_t step = p->steps_done < p->steps_total ? p->steps_done + 1 : p->steps_total;
    if (p->state == ZF_CLIENT_JOB_QUEUED)
        snprintf(buf, size, "%s: queued", job_id);
    else if (p->state == ZF_CLIENT_JOB_DONE)
        snprintf(buf, size, "%s: done, %lld/%lld steps, %.1f s", job_id, (long long)p->steps_done,
                 (long long)p->steps_total, secs);
    else if (p->partitions_total == 0)
        snprintf(buf, size, "%s: step %lld/%lld, placing, %.1f s", job_id, (long long)step,
                 (long long)p->steps_total, secs);
    else
        snprintf(buf, size, "%s: step %lld/%lld, %d/%d partitions running, %.1f s", job_id,
                 (long long)step, (long long)p->steps_total, p->partitions_running,
                 p->partitions_total, secs);
    size_t n = strlen(buf);
    if (p->attempts > 1 && n < size) /* handed on after a scheduler was lost */
        snprintf(buf + n, size - n, " (attempt %d)", p->attempts);
}

bool zf_cli_progress_wanted(bool quiet)
{
    return !quiet && isatty(STDERR_FILENO);
}

/* "\r" and "erase to the end of the line": the line is redrawn in place. */
#define S_ERASE "\r\033[K"

void zf_cli_progress_draw(void *arg, const char *job_id, const zf_client_job_progress_t *p)
{
    zf_cli_progress_t *pr = arg;
    char line[256];
    zf_cli_progress_format(line, sizeof line, job_id, p);
    fprintf(stderr, S_ERASE "%s", line);
    fflush(stderr);
    pr->drawn = true;
}

void zf_cli_progress_end(zf_cli_progress_t *pr)
{
    if (!pr->drawn) return;
    fputs(S_ERASE, stderr);
    fflush(stderr);
    pr->drawn = false;
}

/* ---- files ------------------------------------------------------------------- */

zf_status_t zf_cli_make_dir(const char *dir)
{
    struct stat st;
    if (mkdir(dir, 0777) != 0 && errno != EEXIST)
        return zf_status_new(ZF_NOT_FOUND, "cannot create directory '%s': %s", dir,
                             strerror(errno));
    if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode))
        return zf_invalid_argument("'%s' is not a directory", dir);
    return ZF_STATUS_OK;
}

/* DIR/<device with [^A-Za-z0-9_.-] as '_'><ext>; caller frees. */
char *zf_cli_file_path(const char *dir, const char *device, const char *ext)
{
    size_t size = strlen(dir) + strlen(device) + strlen(ext) + 2;
    char *path = malloc(size);
    if (!path) return NULL;
    int at = snprintf(path, size, "%s/", dir);
    for (const char *c = device; *c; c++)
        path[at++] = isalnum((unsigned char)*c) || strchr("_.-", *c) ? *c : '_';
    snprintf(path + at, size - (size_t)at, "%s", ext);
    return path;
}

zf_status_t zf_cli_write_partition_graphs(const char *dir, Tensorflow__GraphDef *const *graphs,
                                          size_t n)
{
    ZF_TRY(zf_cli_make_dir(dir));
    for (size_t i = 0; i < n; i++) {
        const char *device = "partition";
        for (size_t k = 0; k < graphs[i]->n_node; k++)
            if (graphs[i]->node[k]->device && *graphs[i]->node[k]->device) {
                device = graphs[i]->node[k]->device;
                break;
            }
        char *path = zf_cli_file_path(dir, device, ".pbtxt");
        if (!path) return zf_out_of_memory("file name");
        zf_status_t s = zf_graphdef_write_file(graphs[i], path, ZF_FORMAT_PBTXT);
        free(path);
        ZF_TRY(s);
    }
    return ZF_STATUS_OK;
}
