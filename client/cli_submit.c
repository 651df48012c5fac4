/* zflow submit: submits a GraphDef with feeds and fetches to a service as a
 * one-shot job and prints its id, for `zflow wait` to collect. */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "client/cli.h"
#include "client/zflow_client.h"
#include "common/graph.h"
#include "common/graphdef_io.h"
#include "common/keys.h"

static const char s_usage[] =
    "usage: zflow submit GRAPH [--broker ENDPOINT] [--feed NAME=VALUE]...\n"
    "                    --fetch T [T...] [--target N]... [--init N]... [--steps N]\n"
    "                    [--place first|balanced] [--allow-soft-placement]\n"
    "                    [--checkpoint-every N --checkpoint-dir DIR]\n"
    "                    [--timeout-ms N] [--keys DIR]\n"
    "\n"
    "Submits the GraphDef GRAPH (.pb or .pbtxt) as a job to the service whose\n"
    "broker is at ENDPOINT (default: $ZFLOW_BROKER, else " ZF_CLI_DEFAULT_BROKER ")\n"
    "and prints the job's id alone on stdout; `zflow wait ID` prints its\n"
    "fetches. The service keeps a result nobody collects for 10 minutes.\n"
    "\n"
    "  --feed, --fetch, --target, --init, --place, --allow-soft-placement,\n"
    "  --opt-level, --bf16, --recv-scheduling, --place-pruned-graph,\n"
    "  --partition-by\n"
    "                    as for `zflow run`\n"
    "  --steps N         run the step N times (default 1) on the job's\n"
    "                    session, so variables carry over; the fetches are\n"
    "                    the last run's\n"
    "  --checkpoint-every N --checkpoint-dir DIR  save the job's variables\n"
    "                    every N steps into DIR (TensorFlow's checkpoint\n"
    "                    format, on the executors' file system); a job that\n"
    "                    starts where a checkpoint is (run again after its\n"
    "                    scheduler was lost, or submitted again) restores it\n"
    "                    and goes on after its step\n"
    "  --timeout-ms N    how long to wait for the service to accept the job\n"
    "                    (default 30000)\n"
    "  --keys DIR        CurveZMQ client keys for a secure service (default:\n"
    "                    $ZFLOW_KEYS)\n";

typedef struct {
    zf_cli_step_args_t step;
    const char *broker, *keys;
    long timeout_ms;
} s_args_t;

/* Stores --broker or --timeout-ms (a zf_cli_own_options_t's set). */
static zf_status_t s_set_option(void *arg, const char *opt, const char *value)
{
    s_args_t *a = arg;
    if (strcmp(opt, "--broker") == 0) {
        a->broker = value;
        return ZF_STATUS_OK;
    }
    if (strcmp(opt, "--keys") == 0) {
        a->keys = value;
        return ZF_STATUS_OK;
    }
    return zf_cli_parse_count("--timeout-ms", value, INT_MAX, &a->timeout_ms);
}

/* Parses argv into *a (step arrays sized argc). Returns 0 or the exit code. */
static int s_parse_args(int argc, char **argv, s_args_t *a)
{
    static const char *const valued[] = {"--broker", "--timeout-ms", "--keys", NULL};
    const zf_cli_own_options_t own = {NULL, valued, s_set_option, a};
    int rc = zf_cli_step_args_parse("submit", s_usage, argc, argv, &own, &a->step);
    return rc ? rc : zf_cli_step_args_check("submit", s_usage, &a->step);
}

/* Builds the feeds, submits, prints the id. Returns the exit code. */
static int s_submit_job(const s_args_t *a, const Tensorflow__GraphDef *gd, zf_graph_t *graph)
{
    const zf_cli_step_args_t *st = &a->step;
    zf_cli_feeds_t feeds = {NULL, NULL, 0};
    bool usage = false;
    zf_status_t s = zf_cli_feeds_parse(st, zf_cli_graph_dtype, graph, &feeds, &usage);
    zf_client_t *c = NULL;
    char *id = NULL;
    if (zf_ok(s)) s = zf_client_connect_keys(a->broker, zf_keys_dir_from(a->keys), &c);
    if (zf_ok(s)) {
        zf_client_step_t step = zf_cli_client_step(st, &feeds);
        zf_client_session_options_t opts = zf_cli_session_options(st);
        zf_client_job_options_t job = zf_cli_job_options(st);
        zf_client_set_timeout(c, (int)a->timeout_ms);
        s = zf_status_prefix(zf_client_submit_job(c, gd, &opts, &step, &job, &id), "%s", st->graph);
    }
    if (zf_ok(s)) printf("%s\n", id);
    int rc = zf_ok(s) ? 0 : zf_cli_fail("submit", &s);
    if (rc && usage) rc = 2;
    zf_client_destroy(&c);
    free(id);
    zf_cli_feeds_free(&feeds);
    return rc;
}

static int s_submit(int argc, char **argv)
{
    if (zf_cli_wants_help(argc, argv)) {
        fputs(s_usage, stdout);
        return 0;
    }
    s_args_t a = {.broker = zf_cli_default_broker(), .timeout_ms = 30000};
    int rc = zf_cli_step_args_init(&a.step, argc) ? s_parse_args(argc, argv, &a) : 1;
    Tensorflow__GraphDef *gd = NULL;
    zf_graph_t *graph = NULL;
    if (rc == 0) {
        zf_status_t s = zf_graphdef_read_file(a.step.graph, ZF_FORMAT_AUTO, &gd);
        if (zf_ok(s)) graph = zf_cli_graph_for_dtypes(gd);
        rc = zf_ok(s) ? s_submit_job(&a, gd, graph) : zf_cli_fail("submit", &s);
    }
    zf_graph_destroy(&graph);
    zf_graphdef_free(&gd);
    zf_cli_step_args_free(&a.step);
    return rc;
}

const zf_cli_command_t zf_cli_submit = {"submit", "submit a graph as a job; prints its id",
                                        s_submit};
