/* zflow up: runs a local cluster (broker, executors, scheduler) in the
 * foreground, starting again whatever process dies, until SIGINT or
 * SIGTERM, then stops every process. */
#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/cmdline.h"
#include "client/cli.h"
#include "client/cluster.h"

static const char s_usage[] =
    "usage: zflow up [--cpu N | --devices LIST] [--port P] [--secure | --keys DIR]\n"
    "                [--state DIR]\n"
    "\n"
    "Starts a local zflow cluster on 127.0.0.1 — a broker, one executor per\n"
    "device and a scheduler — prints the broker's address and runs until\n"
    "Ctrl-C (SIGINT) or SIGTERM, which stop every process. A process that\n"
    "dies is started again (an executor under the same device name) after\n"
    "a backoff of 100 ms doubling up to 5 s, each time said on stderr; one\n"
    "that dies again after 5 restarts within 60 s stops the cluster (exit\n"
    "status 1).\n"
    "\n"
    "  --cpu N         N CPU executors (default 1)\n"
    "  --devices LIST  devices as for `zflow run`, e.g. cpu:2\n"
    "  --port P        the broker's port (default 5555; 0: any free port)\n"
    "  --secure        CurveZMQ on every connection, with a fresh key directory\n"
    "                  (printed as 'keys: DIR'; removed when the cluster stops)\n"
    "  --keys DIR      CurveZMQ with the keys of DIR (see `zflow keygen`)\n"
    "  --state DIR     keep the broker's accepted jobs in DIR/jobs.db, so that a\n"
    "                  restarted broker runs or returns them (default: in memory)\n"
    "\n"
    "Run graphs on it with `zflow run GRAPH --broker ADDRESS ...`; on a secure\n"
    "cluster with ZFLOW_KEYS=DIR (or --keys DIR) as well.\n";

static volatile sig_atomic_t s_stop_signal;

static void s_on_signal(int sig)
{
    s_stop_signal = sig;
}

static int s_parse(int argc, char **argv, char *devices, size_t size, zf_cluster_options_t *o)
{
    snprintf(devices, size, "cpu:1");
    o->port = 5555;
    for (int i = 1; i < argc; i++) {
        long v = 0;
        bool has_value = i + 1 < argc;
        if (strcmp(argv[i], "--cpu") == 0 && has_value) {
            if (!zf_parse_long(argv[++i], 1, 4096, &v)) {
                fprintf(stderr, "zflow up: --cpu must be 1..4096, not '%s'\n", argv[i]);
                return 2;
            }
            snprintf(devices, size, "cpu:%ld", v);
        } else if (strcmp(argv[i], "--devices") == 0 && has_value) {
            snprintf(devices, size, "%s", argv[++i]);
        } else if (strcmp(argv[i], "--port") == 0 && has_value) {
            if (!zf_parse_long(argv[++i], 0, 65535, &v)) {
                fprintf(stderr, "zflow up: --port must be 0..65535, not '%s'\n", argv[i]);
                return 2;
            }
            o->port = (int)v;
        } else if (strcmp(argv[i], "--secure") == 0) {
            o->secure = true;
        } else if (strcmp(argv[i], "--keys") == 0 && has_value) {
            o->keys = argv[++i];
        } else if (strcmp(argv[i], "--state") == 0 && has_value) {
            o->state = argv[++i];
        } else {
            fprintf(stderr, "zflow up: unexpected argument '%s'\n%s", argv[i], s_usage);
            return 2;
        }
    }
    return 0;
}

static void s_log(const char *line, void *arg)
{
    (void)arg;
    fprintf(stderr, "zflow up: %s\n", line);
}

/* Supervises until a stop signal (true) or a process that keeps dying. */
static bool s_wait(zf_cluster_t *c)
{
    while (!s_stop_signal) {
        zf_status_t s = zf_cluster_supervise(c, s_log, NULL);
        if (!zf_ok(s)) {
            fprintf(stderr, "zflow up: %s\n", zf_status_msg(&s));
            zf_status_clear(&s);
            return false;
        }
        struct timespec ts = {0, 50 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    return true;
}

static int s_run(int argc, char **argv)
{
    if (zf_cli_wants_help(argc, argv)) {
        fputs(s_usage, stdout);
        return 0;
    }
    char devices[1024];
    zf_cluster_options_t o = ZF_CLUSTER_OPTIONS_DEFAULT;
    int rc = s_parse(argc, argv, devices, sizeof devices, &o);
    if (rc) return rc;
    o.devices = devices;
    zf_on_stop_signals(s_on_signal);
    zf_cluster_t *c = NULL;
    zf_status_t s = zf_cluster_start(&o, &c);
    if (!zf_ok(s)) return zf_cli_fail("up", &s);
    printf("zflow cluster listening on %s (%s, %d processes)\n", zf_cluster_endpoint(c), devices,
           zf_cluster_process_count(c));
    if (zf_cluster_keys(c)) printf("keys: %s\n", zf_cluster_keys(c));
    fflush(stdout);
    bool by_signal = s_wait(c);
    s = zf_cluster_stop(&c, 5000);
    if (!zf_ok(s)) return zf_cli_fail("up", &s);
    if (!by_signal) return 1;
    printf("zflow cluster stopped\n");
    return 0;
}

const zf_cli_command_t zf_cli_up = {"up", "run a local cluster until Ctrl-C", s_run};
