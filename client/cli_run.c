/* zflow run: runs a GraphDef with feeds and fetches — through a service
 * (--broker, or a local cluster started for the run) or in this process
 * (--inprocess), once or --steps times, with a progress line on a
 * terminal. Feed parsing and fetch printing are in cli_common.c. */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "client/cli.h"
#include "client/cluster.h"
#include "client/zflow_client.h"
#include "common/graph.h"
#include "common/dtype.h"
#include "common/graphdef_io.h"
#include "common/keys.h"
#include "scheduler/graph/partition.h"
#include "session/local_session.h"

static const char s_usage[] =
    "usage: zflow run GRAPH --inprocess [--devices LIST] [--feed NAME=VALUE]...\n"
    "                 --fetch T [T...] [--target N]... [--init N]... [--steps N]\n"
    "                 [--out-dir DIR] [--quiet]\n"
    "       zflow run GRAPH [--broker ENDPOINT | --devices LIST] [--keys DIR]\n"
    "                 [the same options]\n"
    "\n"
    "Runs the GraphDef GRAPH (.pb or .pbtxt) once (or --steps times): places\n"
    "it on the devices, partitions it, runs every partition and prints the\n"
    "fetched tensors as NumPy prints arrays. On the service, a terminal shows\n"
    "the job's progress on stderr while it runs, and Ctrl-C cancels the job\n"
    "on every executor (exit status 130; a second Ctrl-C leaves at once).\n"
    "\n"
    "  --broker ENDPOINT run as a job on the service whose broker is at\n"
    "                    ENDPOINT (see `zflow up`)\n"
    "  --keys DIR        CurveZMQ client keys for a secure service (default:\n"
    "                    $ZFLOW_KEYS; see `zflow keygen`); a local cluster then\n"
    "                    runs with them too\n"
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
    "  --opt-level L0|L1 L1 (the default) runs the graph optimizer on every\n"
    "                    partition (constant folding, common subexpressions,\n"
    "                    Identity removal); L0 runs the graph as written\n"
    "  --bf16            FLOAT tensors cross between devices as BFLOAT16 (half\n"
    "                    the bytes; TensorFlow's enable_bfloat16_sendrecv)\n"
    "  --recv-scheduling hold each recv back until its value is about to be\n"
    "                    needed (ASAP times from a unit cost model; TensorFlow's\n"
    "                    enable_recv_scheduling)\n"
    "  --place-pruned-graph  place only the nodes the step needs (TensorFlow's\n"
    "                    place_pruned_graph; a node it does not need may be\n"
    "                    unplaceable; not for --inprocess)\n"
    "  --partition-by device|task  (service) device (the default) cuts every\n"
    "                    edge between devices; task cuts the graph between\n"
    "                    tasks first, then each task's part between its\n"
    "                    devices (TensorFlow's master and workers), so a\n"
    "                    tensor one task sends to several devices of another\n"
    "                    crosses between the tasks once\n"
    "  --allow-soft-placement  put a node whose device has no kernel for it\n"
    "                    on a valid device of the same task instead\n"
    "  --steps N         run the step N times (default 1) on one session, so\n"
    "                    variables carry over; prints the last run's fetches\n"
    "  --init N          node to run once, without feeds, before the first\n"
    "                    step, e.g. a variable's initializer (repeatable)\n"
    "  --checkpoint-every N --checkpoint-dir DIR  (service) save the job's\n"
    "                    variables every N steps into DIR (TensorFlow's\n"
    "                    checkpoint format; DIR on the executors' file system);\n"
    "                    a job started where a checkpoint is, or run again\n"
    "                    after its scheduler was lost, restores it and goes on\n"
    "                    after its step\n"
    "  --cost-graph FILE.tsv  (service) write the cost model the scheduler\n"
    "                    built over the steps: per node and device, the mean\n"
    "                    kernel time and output bytes per step, tab-separated,\n"
    "                    most expensive first (GraphOptions.build_cost_model)\n"
    "  --trace FILE.json write the (last) step as a Chrome trace (trace-event\n"
    "                    JSON for chrome://tracing and Perfetto): a process per\n"
    "                    device, every kernel run, an arrow per tensor that\n"
    "                    crossed between devices\n"
    "  --partition-graphs DIR  write the partitions the (last) step ran to\n"
    "                    DIR/<device>.pbtxt (RunOptions' output_partition_graphs;\n"
    "                    in process after the graph optimizer, on the service as\n"
    "                    the scheduler registered them)\n"
    "  --quiet           print nothing but errors (and no progress line)\n"
    "  --timeout-ms N    how long to wait for the service's answer (default\n"
    "                    60000; not for --inprocess)\n";

/* ---- the command -------------------------------------------------------------- */

typedef struct {
    zf_cli_step_args_t step;
    const char *devices, *out_dir, *broker, *timeout_text, *keys, *trace, *partition_graphs,
        *cost_graph;
    int timeout_ms;
    bool inprocess, quiet;
} s_args_t;

/* What runs the step: the local session (--inprocess) or a service client
 * (with the graph, for feed dtypes). */
typedef struct {
    zf_local_session_t *sess;
    zf_client_t *client;
    const Tensorflow__GraphDef *gd;
    zf_graph_t *graph;
} s_runner_t;

/* The dtype of tensor name as the graph says (a zf_cli_dtype_fn over a
 * runner); ZF_INVALID when it does not know. */
static zf_dtype_t s_graph_dtype(void *arg, const char *name)
{
    const s_runner_t *r = arg;
    if (!r->sess) return zf_cli_graph_dtype(r->graph, name);
    zf_dtype_t dtype = ZF_INVALID;
    zf_status_t s = zf_local_session_tensor_dtype(r->sess, name, &dtype);
    zf_status_clear(&s);
    return dtype;
}

/* The in-process step's trace, written as the service's would be. */
static zf_status_t s_write_local_trace(const char *path, const zf_step_trace_t *t, int64_t start,
                                       int64_t end)
{
    Zflow__NodeRun **runs = NULL;
    size_t n = 0;
    zf_status_t s = zf_step_trace_to_protos(t, &runs, &n);
    if (zf_ok(s)) s = zf_cli_write_trace(path, runs, n, start, end);
    for (size_t k = 0; k < n; k++) zflow__node_run__free_unpacked(runs[k], NULL);
    free(runs);
    return s;
}

/* Runs the step a->steps times in this process; got holds the last run's
 * fetches. */
static zf_status_t s_run_local(const s_runner_t *r, const zf_cli_step_args_t *a,
                               const char *trace_path, const zf_cli_feeds_t *f, zf_tensor_t **got)
{
    if (a->n_inits > 0)
        ZF_TRY(zf_status_prefix(
            zf_local_session_run(r->sess, NULL, NULL, 0, NULL, 0, a->inits, a->n_inits, NULL),
            "init targets"));
    for (long k = 1; k <= a->steps; k++) {
        for (int j = 0; j < a->n_fetches; j++) zf_tensor_unref(&got[j]);
        bool traced = trace_path && k == a->steps;
        zf_step_trace_t trace;
        if (traced) zf_step_trace_init(&trace);
        int64_t start = zf_step_trace_now_us();
        zf_status_t s = zf_local_session_run_traced(
            r->sess, (const char *const *)f->names, f->values, f->n, a->fetches, a->n_fetches,
            a->targets, a->n_targets, got, traced ? &trace : NULL);
        int64_t end = zf_step_trace_now_us();
        if (traced && zf_ok(s)) s = s_write_local_trace(trace_path, &trace, start, end);
        if (traced) zf_step_trace_destroy(&trace);
        if (!zf_ok(s))
            return a->steps > 1 ? zf_status_prefix(s, "step %ld of %ld", k, a->steps) : s;
    }
    return ZF_STATUS_OK;
}

/* Submits the job and waits for its fetches, drawing its progress on a
 * terminal. */
static zf_status_t s_run_job(const s_runner_t *r, const s_args_t *a, const zf_client_step_t *step,
                             const zf_client_session_options_t *opts, zf_tensor_t **got)
{
    char *id = NULL;
    int n_fetches = a->step.n_fetches;
    zf_client_job_options_t job = zf_cli_job_options(&a->step);
    job.trace_level = a->trace ? 3 : 0; /* FULL_TRACE */
    job.partition_graphs = a->partition_graphs != NULL;
    int64_t start = zf_step_trace_now_us();
    ZF_TRY(zf_client_submit_job(r->client, r->gd, opts, step, &job, &id));
    zf_cli_progress_t pr = {false};
    zf_client_job_result_t *res = NULL;
    zf_client_progress_fn draw = zf_cli_progress_wanted(a->quiet) ? zf_cli_progress_draw : NULL;
    zf_status_t s = zf_client_wait_result(r->client, id, a->timeout_ms, draw, &pr, &res);
    zf_cli_progress_end(&pr);
    if (zf_ok(s) && res->n_fetches != n_fetches)
        s = zf_internal("the service returned %d tensors for %d fetches", res->n_fetches,
                        n_fetches);
    for (int j = 0; zf_ok(s) && j < n_fetches; j++) {
        got[j] = res->tensors[j];
        res->tensors[j] = NULL;
    }
    /* the job's wall time bounds its last step's */
    if (zf_ok(s) && a->trace)
        s = zf_cli_write_trace(a->trace, res->runs, res->n_runs, start, zf_step_trace_now_us());
    if (zf_ok(s) && a->partition_graphs)
        s = zf_cli_write_partition_graphs(a->partition_graphs, res->graphs, res->n_graphs);
    if (zf_ok(s) && a->cost_graph) s = zf_cli_write_cost_graph(a->cost_graph, res->cost, res->n_cost);
    zf_client_job_result_free(&res);
    free(id);
    return s;
}

static zf_status_t s_run_step(const s_runner_t *r, const s_args_t *a, const zf_cli_feeds_t *f,
                              zf_tensor_t **got)
{
    if (r->sess) {
        ZF_TRY(s_run_local(r, &a->step, a->trace, f, got));
        const zf_partition_set_t *set = zf_local_session_last_partitions(r->sess);
        if (!a->partition_graphs || !set) return ZF_STATUS_OK;
        Tensorflow__GraphDef **graphs = calloc((size_t)set->n_parts + 1, sizeof *graphs);
        if (!graphs) return zf_out_of_memory("run");
        for (int i = 0; i < set->n_parts; i++) graphs[i] = set->parts[i].graph;
        zf_status_t s =
            zf_cli_write_partition_graphs(a->partition_graphs, graphs, (size_t)set->n_parts);
        free(graphs);
        return s;
    }
    zf_client_step_t step = zf_cli_client_step(&a->step, f);
    zf_client_set_timeout(r->client, a->timeout_ms);
    zf_client_set_interrupt(r->client, zf_cli_catch_interrupt()); /* Ctrl-C cancels the job */
    zf_client_session_options_t opts = zf_cli_session_options(&a->step);
    if (a->cost_graph) opts.build_cost_model = a->step.steps; /* the last step returns it */
    return zf_status_prefix(s_run_job(r, a, &step, &opts, got), "%s", a->step.graph);
}

/* Builds the feeds, runs, prints. Returns the exit code. */
static int s_execute(const s_args_t *a, const s_runner_t *r)
{
    const zf_cli_step_args_t *st = &a->step;
    zf_cli_feeds_t feeds = {NULL, NULL, 0};
    zf_tensor_t **got = calloc((size_t)st->n_fetches + 1, sizeof *got);
    bool usage = false;
    zf_status_t s = got ? zf_cli_feeds_parse(st, s_graph_dtype, (void *)r, &feeds, &usage)
                        : zf_out_of_memory("run");
    if (zf_ok(s)) s = s_run_step(r, a, &feeds, got);
    if (zf_ok(s)) s = zf_cli_print_fetches(st->fetches, got, st->n_fetches, a->out_dir, a->quiet);
    int interrupted = zf_cli_interrupted_rc(&s);
    int rc = zf_ok(s) ? 0 : zf_cli_fail("run", &s);
    if (interrupted) rc = interrupted;
    if (rc && usage) rc = 2;
    zf_cli_feeds_free(&feeds);
    for (int j = 0; got && j < st->n_fetches; j++) zf_tensor_unref(&got[j]);
    free(got);
    return rc;
}

/* Stores an option of run's own (a zf_cli_own_options_t's set). */
static zf_status_t s_set_option(void *arg, const char *opt, const char *value)
{
    s_args_t *a = arg;
    if (strcmp(opt, "--inprocess") == 0)
        a->inprocess = true;
    else if (strcmp(opt, "--quiet") == 0 || strcmp(opt, "-q") == 0)
        a->quiet = true;
    else if (strcmp(opt, "--devices") == 0)
        a->devices = value;
    else if (strcmp(opt, "--out-dir") == 0)
        a->out_dir = value;
    else if (strcmp(opt, "--broker") == 0)
        a->broker = value;
    else if (strcmp(opt, "--keys") == 0)
        a->keys = value;
    else if (strcmp(opt, "--trace") == 0)
        a->trace = value;
    else if (strcmp(opt, "--partition-graphs") == 0)
        a->partition_graphs = value;
    else if (strcmp(opt, "--cost-graph") == 0)
        a->cost_graph = value;
    else
        a->timeout_text = value;
    return ZF_STATUS_OK;
}

/* *a->timeout_ms from --timeout-ms; 0 or the exit code. */
static int s_parse_timeout(s_args_t *a)
{
    char *end = NULL;
    errno = 0;
    long v = strtol(a->timeout_text, &end, 10);
    if (!a->timeout_text[0] || *end || errno || v < 1 || v > INT_MAX)
        return zf_cli_usage_error(
            "run", s_usage, "--timeout-ms must be a positive number, not '%s'", a->timeout_text);
    a->timeout_ms = (int)v;
    return 0;
}

/* Parses argv into *a (step arrays sized argc). Returns 0 or the exit code. */
static int s_parse_args(int argc, char **argv, s_args_t *a)
{
    static const char *const flags[] = {"--inprocess", "--quiet", "-q", NULL};
    static const char *const valued[] = {"--devices",          "--out-dir", "--broker",
                                         "--timeout-ms",       "--keys",    "--trace",
                                         "--partition-graphs", "--cost-graph", NULL};
    const zf_cli_own_options_t own = {flags, valued, s_set_option, a};
    int rc = zf_cli_step_args_parse("run", s_usage, argc, argv, &own, &a->step);
    if (rc) return rc;
    if (a->inprocess && a->broker)
        return zf_cli_usage_error("run", s_usage, "give --broker or --inprocess, not both");
    if (a->timeout_text && (rc = s_parse_timeout(a)) != 0) return rc;
    if (a->inprocess && a->step.checkpoint_dir)
        return zf_cli_usage_error("run", s_usage,
                                  "--checkpoint-every is for jobs on the service (drop "
                                  "--inprocess)");
    if (a->inprocess && a->step.place_pruned)
        return zf_cli_usage_error("run", s_usage,
                                  "--place-pruned-graph is a session option of the service "
                                  "(drop --inprocess)");
    if (a->inprocess && a->step.partition_by)
        return zf_cli_usage_error("run", s_usage,
                                  "--partition-by is a session option of the service (drop "
                                  "--inprocess)");
    if (a->inprocess && a->cost_graph)
        return zf_cli_usage_error("run", s_usage,
                                  "--cost-graph needs the service: the scheduler keeps the cost "
                                  "model (drop --inprocess)");
    if (a->broker && a->devices)
        return zf_cli_usage_error(
            "run", s_usage, "--devices does not apply with --broker: the service has its own");
    return zf_cli_step_args_check("run", s_usage, &a->step);
}

static int s_run_inprocess(const s_args_t *a, Tensorflow__GraphDef *gd)
{
    s_runner_t r = {0};
    zf_local_session_options_t opts = ZF_LOCAL_SESSION_OPTIONS_DEFAULT;
    opts.devices = a->devices;
    opts.allow_soft_placement = a->step.soft_placement;
    opts.opt_level = a->step.opt_level;
    opts.bfloat16_sendrecv = a->step.bf16;
    opts.recv_scheduling = a->step.recv_scheduling;
    opts.balanced_placement = a->step.place && strcmp(a->step.place, "balanced") == 0;
    zf_status_t s = zf_status_prefix(zf_local_session_new(gd, &opts, &r.sess), "%s", a->step.graph);
    int rc = zf_ok(s) ? s_execute(a, &r) : zf_cli_fail("run", &s);
    zf_local_session_destroy(&r.sess);
    return rc;
}

/* Runs as a job on the service at --broker, or on a local cluster started
 * for this run and stopped after it. */
static int s_run_service(const s_args_t *a, Tensorflow__GraphDef *gd)
{
    s_runner_t r = {.gd = gd, .graph = zf_cli_graph_for_dtypes(gd)};
    zf_status_t s = ZF_STATUS_OK;
    zf_cluster_t *cluster = NULL;
    if (!a->broker) {
        zf_cluster_options_t o = ZF_CLUSTER_OPTIONS_DEFAULT;
        o.devices = a->devices;
        o.quiet = true;
        o.keys = zf_keys_dir_from(a->keys);
        s = zf_cluster_start(&o, &cluster);
    }
    if (zf_ok(s))
        s = zf_client_connect_keys(a->broker ? a->broker : zf_cluster_endpoint(cluster),
                                   zf_keys_dir_from(a->keys), &r.client);
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
    int rc = zf_cli_step_args_init(&a.step, argc) ? s_parse_args(argc, argv, &a) : 1;
    Tensorflow__GraphDef *gd = NULL;
    if (rc == 0) {
        zf_status_t s = zf_graphdef_read_file(a.step.graph, ZF_FORMAT_AUTO, &gd);
        if (!zf_ok(s))
            rc = zf_cli_fail("run", &s);
        else
            rc = a.inprocess ? s_run_inprocess(&a, gd) : s_run_service(&a, gd);
    }
    zf_graphdef_free(&gd);
    zf_cli_step_args_free(&a.step);
    return rc;
}

const zf_cli_command_t zf_cli_run = {"run", "run a graph with feeds and fetches", s_run};
