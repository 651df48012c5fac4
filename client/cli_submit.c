/* zflow submit: submits a GraphDef with feeds and fetches to a service as a
 * one-shot job and prints its id, for `zflow wait` to collect. */
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "client/cli.h"
#include "client/zflow_client.h"
#include "common/graph.h"
#include "common/graphdef_io.h"

static const char s_usage[] =
    "usage: zflow submit GRAPH [--broker ENDPOINT] [--feed NAME=VALUE]...\n"
    "                    --fetch T [T...] [--target N]... [--init N]... [--steps N]\n"
    "                    [--place first|balanced] [--allow-soft-placement]\n"
    "                    [--timeout-ms N]\n"
    "\n"
    "Submits the GraphDef GRAPH (.pb or .pbtxt) as a job to the service whose\n"
    "broker is at ENDPOINT (default: $ZFLOW_BROKER, else " ZF_CLI_DEFAULT_BROKER ")\n"
    "and prints the job's id alone on stdout; `zflow wait ID` prints its\n"
    "fetches. The service keeps a result nobody collects for 10 minutes.\n"
    "\n"
    "  --feed, --fetch, --target, --init, --place, --allow-soft-placement\n"
    "                    as for `zflow run`\n"
    "  --steps N         run the step N times (default 1) on the job's\n"
    "                    session, so variables carry over; the fetches are\n"
    "                    the last run's\n"
    "  --timeout-ms N    how long to wait for the service to accept the job\n"
    "                    (default 30000)\n";

typedef struct {
    const char *graph, *broker, *place;
    long steps, timeout_ms;
    const char **feed_specs, **fetches, **targets, **inits;
    int n_feeds, n_fetches, n_targets, n_inits;
    bool soft_placement;
} s_args_t;

static int s_usage_error(const char *fmt, ...) ZF_PRINTF(1, 2);
static int s_usage_error(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "zflow submit: ");
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n%s", s_usage);
    va_end(ap);
    return 2;
}

/* A usage error for a bad number; clears *s. */
static int s_bad_count(zf_status_t *s)
{
    int rc = s_usage_error("%s", zf_status_msg(s));
    zf_status_clear(s);
    return rc;
}

/* Stores the value of an option that takes one; false for other options. */
static bool s_valued_option(s_args_t *a, const char *opt, const char *v, zf_status_t *s)
{
    if (strcmp(opt, "--broker") == 0)
        a->broker = v;
    else if (strcmp(opt, "--feed") == 0)
        a->feed_specs[a->n_feeds++] = v;
    else if (strcmp(opt, "--fetch") == 0)
        a->fetches[a->n_fetches++] = v;
    else if (strcmp(opt, "--target") == 0)
        a->targets[a->n_targets++] = v;
    else if (strcmp(opt, "--place") == 0)
        a->place = v;
    else if (strcmp(opt, "--init") == 0)
        a->inits[a->n_inits++] = v;
    else if (strcmp(opt, "--steps") == 0)
        *s = zf_cli_parse_count("--steps", v, 1000000000L, &a->steps);
    else if (strcmp(opt, "--timeout-ms") == 0)
        *s = zf_cli_parse_count("--timeout-ms", v, INT_MAX, &a->timeout_ms);
    else
        return false;
    return true;
}

static bool s_takes_value(const char *opt)
{
    static const char *const valued[] = {"--broker", "--feed",  "--fetch",      "--target",
                                         "--place",  "--steps", "--timeout-ms", "--init"};
    for (size_t i = 0; i < sizeof valued / sizeof valued[0]; i++)
        if (strcmp(opt, valued[i]) == 0) return true;
    return false;
}

/* Parses argv into *a (arrays sized argc). Returns 0 or the exit code. */
static int s_parse_args(int argc, char **argv, s_args_t *a)
{
    for (int i = 1; i < argc; i++) {
        const char *arg = argv[i];
        zf_status_t s = ZF_STATUS_OK;
        if (strcmp(arg, "--allow-soft-placement") == 0) {
            a->soft_placement = true;
        } else if (i + 1 < argc && s_valued_option(a, arg, argv[i + 1], &s)) {
            i++;
            if (!zf_ok(s)) return s_bad_count(&s);
            /* "--fetch a b c": more fetches follow, once GRAPH is known */
            while (strcmp(arg, "--fetch") == 0 && a->graph && i + 1 < argc && argv[i + 1][0] != '-')
                a->fetches[a->n_fetches++] = argv[++i];
        } else if (arg[0] == '-' && arg[1] != '\0') {
            return s_takes_value(arg) ? s_usage_error("%s needs a value", arg)
                                      : s_usage_error("unknown option '%s'", arg);
        } else if (!a->graph) {
            a->graph = arg;
        } else {
            return s_usage_error("unexpected argument '%s'", arg);
        }
    }
    if (!a->graph) return s_usage_error("need a GRAPH file");
    if (a->place && strcmp(a->place, "first") != 0 && strcmp(a->place, "balanced") != 0)
        return s_usage_error("--place takes first or balanced, not '%s'", a->place);
    if (a->n_fetches == 0 && a->n_targets == 0)
        return s_usage_error("nothing to run: give --fetch or --target");
    return 0;
}

/* Builds the feeds, submits, prints the id. Returns the exit code. */
static int s_submit_job(const s_args_t *a, const Tensorflow__GraphDef *gd, zf_graph_t *graph)
{
    char **names = calloc((size_t)a->n_feeds + 1, sizeof *names);
    zf_tensor_t **values = calloc((size_t)a->n_feeds + 1, sizeof *values);
    zf_status_t s = names && values ? ZF_STATUS_OK : zf_out_of_memory("submit");
    bool usage = false;
    for (int i = 0; i < a->n_feeds && zf_ok(s); i++)
        s = zf_cli_feed_parse(a->feed_specs[i], zf_cli_graph_dtype, graph, &names[i], &values[i],
                              &usage);
    zf_client_t *c = NULL;
    char *id = NULL;
    if (zf_ok(s)) {
        usage = false;
        s = zf_client_connect(a->broker, &c);
    }
    if (zf_ok(s)) {
        zf_client_step_t step = {(const char *const *)names,
                                 values,
                                 a->n_feeds,
                                 a->fetches,
                                 a->n_fetches,
                                 a->targets,
                                 a->n_targets};
        zf_client_session_options_t opts = ZF_CLIENT_SESSION_OPTIONS_DEFAULT;
        opts.allow_soft_placement = a->soft_placement;
        opts.place_first = a->place && strcmp(a->place, "first") == 0;
        zf_client_set_timeout(c, (int)a->timeout_ms);
        zf_client_job_options_t job = {a->steps, a->inits, a->n_inits};
        s = zf_status_prefix(zf_client_submit_job(c, gd, &opts, &step, &job, &id), "%s", a->graph);
    }
    if (zf_ok(s)) printf("%s\n", id);
    int rc = zf_ok(s) ? 0 : zf_cli_fail("submit", &s);
    if (rc && usage) rc = 2;
    zf_client_destroy(&c);
    free(id);
    for (int i = 0; names && i < a->n_feeds; i++) free(names[i]);
    for (int i = 0; values && i < a->n_feeds; i++) zf_tensor_unref(&values[i]);
    free(names);
    free(values);
    return rc;
}

static int s_submit(int argc, char **argv)
{
    if (zf_cli_wants_help(argc, argv)) {
        fputs(s_usage, stdout);
        return 0;
    }
    s_args_t a = {.broker = zf_cli_default_broker(), .steps = 1, .timeout_ms = 30000};
    a.feed_specs = calloc((size_t)argc, sizeof *a.feed_specs);
    a.fetches = calloc((size_t)argc, sizeof *a.fetches);
    a.targets = calloc((size_t)argc, sizeof *a.targets);
    a.inits = calloc((size_t)argc, sizeof *a.inits);
    int rc = a.feed_specs && a.fetches && a.targets && a.inits ? s_parse_args(argc, argv, &a) : 1;
    Tensorflow__GraphDef *gd = NULL;
    zf_graph_t *graph = NULL;
    if (rc == 0) {
        zf_status_t s = zf_graphdef_read_file(a.graph, ZF_FORMAT_AUTO, &gd);
        if (zf_ok(s)) {
            zf_status_t g = zf_graph_new_from_graphdef(gd, &graph);
            zf_status_clear(&g); /* only for feed dtypes; the service reports bad graphs */
        }
        rc = zf_ok(s) ? s_submit_job(&a, gd, graph) : zf_cli_fail("submit", &s);
    }
    zf_graph_destroy(&graph);
    zf_graphdef_free(&gd);
    free(a.feed_specs);
    free(a.fetches);
    free(a.targets);
    free(a.inits);
    return rc;
}

const zf_cli_command_t zf_cli_submit = {"submit", "submit a graph as a job; prints its id",
                                        s_submit};
