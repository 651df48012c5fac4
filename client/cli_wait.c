/* zflow wait: waits for a job that `zflow submit` started and prints its
 * fetches as `zflow run` does, with a progress line on a terminal. */
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "client/cli.h"
#include "client/zflow_client.h"
#include "common/keys.h"

static const char s_usage[] =
    "usage: zflow wait JOB [--broker ENDPOINT] [--timeout-ms N]\n"
    "                  [--out-dir DIR] [--quiet] [--keys DIR]\n"
    "\n"
    "Waits for job JOB (an id `zflow submit` printed) on the service whose\n"
    "broker is at ENDPOINT (default: $ZFLOW_BROKER, else " ZF_CLI_DEFAULT_BROKER "),\n"
    "and prints its fetches as `zflow run` prints them. A result is collected\n"
    "once: a second wait for the same job fails with NOT_FOUND. On a terminal\n"
    "a status line on stderr shows the job's progress while it runs.\n"
    "\n"
    "  --timeout-ms N    give up after N ms (default 60000); the job goes\n"
    "                    on, and a later wait can still collect it\n"
    "  --out-dir DIR     also write each fetch to DIR/<name>.npy, with\n"
    "                    '/' and ':' in the name replaced by '_'\n"
    "  --quiet           print nothing but errors, and no progress line\n"
    "  --keys DIR        CurveZMQ client keys for a secure service (default:\n"
    "                    $ZFLOW_KEYS)\n"
    "\n"
    "Ctrl-C cancels the job (as `zflow cancel JOB` does) and waits for its\n"
    "CANCELLED result; a second Ctrl-C leaves at once.\n"
    "\n"
    "Exits 0 with the job's fetches, 1 when the job failed (its error is\n"
    "printed), was not found or did not finish in time, 2 on bad usage,\n"
    "130 when Ctrl-C cancelled it.\n";

typedef struct {
    const char *job, *broker, *out_dir, *keys;
    long timeout_ms;
    bool quiet;
} s_args_t;

/* Parses argv into *a. Returns 0 or the exit code. */
static int s_parse_args(int argc, char **argv, s_args_t *a)
{
    for (int i = 1; i < argc; i++) {
        const char *arg = argv[i];
        bool valued = strcmp(arg, "--broker") == 0 || strcmp(arg, "--timeout-ms") == 0 ||
                      strcmp(arg, "--out-dir") == 0 || strcmp(arg, "--keys") == 0;
        if (strcmp(arg, "--quiet") == 0 || strcmp(arg, "-q") == 0) {
            a->quiet = true;
        } else if (valued && i + 1 == argc) {
            return zf_cli_usage_error("wait", s_usage, "%s needs a value", arg);
        } else if (strcmp(arg, "--broker") == 0) {
            a->broker = argv[++i];
        } else if (strcmp(arg, "--keys") == 0) {
            a->keys = argv[++i];
        } else if (strcmp(arg, "--out-dir") == 0) {
            a->out_dir = argv[++i];
        } else if (strcmp(arg, "--timeout-ms") == 0) {
            zf_status_t s = zf_cli_parse_count("--timeout-ms", argv[++i], INT_MAX, &a->timeout_ms);
            if (!zf_ok(s)) {
                int rc = zf_cli_usage_error("wait", s_usage, "%s", zf_status_msg(&s));
                zf_status_clear(&s);
                return rc;
            }
        } else if (arg[0] == '-' && arg[1] != '\0') {
            return zf_cli_usage_error("wait", s_usage, "unknown option '%s'", arg);
        } else if (!a->job) {
            a->job = arg;
        } else {
            return zf_cli_usage_error("wait", s_usage, "unexpected argument '%s'", arg);
        }
    }
    return a->job ? 0 : zf_cli_usage_error("wait", s_usage, "need a JOB id");
}

static int s_wait(int argc, char **argv)
{
    if (zf_cli_wants_help(argc, argv)) {
        fputs(s_usage, stdout);
        return 0;
    }
    s_args_t a = {.broker = zf_cli_default_broker(), .timeout_ms = 60000};
    int rc = s_parse_args(argc, argv, &a);
    if (rc) return rc;
    zf_client_t *c = NULL;
    zf_client_job_result_t *res = NULL;
    zf_cli_progress_t pr = {false};
    zf_status_t s = zf_client_connect_keys(a.broker, zf_keys_dir_from(a.keys), &c);
    if (zf_ok(s)) {
        zf_client_set_timeout(c, (int)a.timeout_ms);
        zf_client_set_interrupt(c, zf_cli_catch_interrupt()); /* Ctrl-C cancels the job */
        zf_client_progress_fn draw = zf_cli_progress_wanted(a.quiet) ? zf_cli_progress_draw : NULL;
        s = zf_client_wait_result(c, a.job, (int)a.timeout_ms, draw, &pr, &res);
        zf_cli_progress_end(&pr);
    }
    if (zf_ok(s) && res->resumed_from_step > 0 && !a.quiet)
        fprintf(stderr, "zflow wait: job %s resumed from its checkpoint of step %" PRId64 "\n",
                a.job, res->resumed_from_step);
    if (zf_ok(s) && res->attempts > 1 && !a.quiet)
        fprintf(stderr, "zflow wait: job %s ran %d times: a scheduler running it was lost\n", a.job,
                res->attempts);
    if (zf_ok(s))
        s = zf_cli_print_fetches((const char *const *)res->names, res->tensors, res->n_fetches,
                                 a.out_dir, a.quiet);
    int interrupted = zf_cli_interrupted_rc(&s);
    rc = zf_ok(s) ? 0 : zf_cli_fail("wait", &s);
    if (interrupted) rc = interrupted;
    zf_client_job_result_free(&res);
    zf_client_destroy(&c);
    return rc;
}

const zf_cli_command_t zf_cli_wait = {"wait", "wait for a submitted job and print its fetches",
                                      s_wait};
