/* zflow-broker: parses flags and the environment, binds the broker, prints
 * its endpoint and serves until SIGINT or SIGTERM. */
#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/cmdline.h"
#include "broker/broker.h"
#include "common/keys.h"
#include "common/log.h"

static const char s_usage[] =
    "usage: zflow-broker [--listen ENDPOINT] [--heartbeat-ms N] [--heartbeat-misses N]\n"
    "                    [--max-client-requests N] [--max-requests N] [--keys DIR]\n"
    "                    [--state DIR] [--max-attempts N] [--job-results N]\n"
    "                    [--job-ttl-ms MS] [--max-job-steps N]\n"
    "\n"
    "The zflow broker: the one address clients, schedulers and executors\n"
    "connect to. Keeps the executor registry and passes client requests to a\n"
    "scheduler.\n"
    "\n"
    "  --listen ENDPOINT       where to bind (default tcp://127.0.0.1:5555; env\n"
    "                          ZFLOW_BROKER_LISTEN); tcp://*:PORT for every\n"
    "                          interface, port 0 or * for an ephemeral port\n"
    "  --heartbeat-ms N        executor heartbeat period (default 1000; env\n"
    "                          ZFLOW_HEARTBEAT_MS)\n"
    "  --heartbeat-misses N    missed heartbeats before an executor is dead\n"
    "                          (default 3; env ZFLOW_HEARTBEAT_MISSES)\n"
    "  --max-client-requests N requests one client may have in flight through\n"
    "                          the broker (default 4096); one more is refused\n"
    "                          with RESOURCE_EXHAUSTED until replies come back\n"
    "  --max-requests N        requests all clients together may have in flight\n"
    "                          through the broker (default 65536), the\n"
    "                          broker-wide limit; one more is refused the same way\n"
    "  --keys DIR              CurveZMQ keys (env ZFLOW_KEYS): only peers whose\n"
    "                          public keys DIR trusts may connect, each limited\n"
    "                          to what its role may ask (docs/service.md)\n"
    "  --state DIR             where the accepted jobs are kept (DIR/jobs.db; env\n"
    "                          ZFLOW_STATE_DIR; default $XDG_STATE_HOME/zflow or\n"
    "                          ~/.local/state/zflow): a broker restarted on it\n"
    "                          runs or returns every job not yet collected;\n"
    "                          :memory: keeps them in memory only\n"
    "  --max-attempts N        times a job whose scheduler is lost is handed to a\n"
    "                          scheduler (default 3); then it ends with the last\n"
    "                          error\n"
    "  --job-results N         uncollected job results kept at most (default 1024)\n"
    "  --job-ttl-ms MS         ... each for at most MS after its job ended (default\n"
    "                          600000); the oldest go first\n"
    "  --max-job-steps N       steps a job may ask for (default 1000000); more is\n"
    "                          refused at submit time\n"
    "\n"
    "Prints 'zflow-broker listening on ENDPOINT' as its first line. Logs go to\n"
    "stderr (ZFLOW_LOG_LEVEL). SIGINT or SIGTERM stops it.\n";

static zf_broker_t *volatile s_broker;

static void s_on_signal(int sig)
{
    (void)sig;
    if (s_broker) zf_broker_stop(s_broker);
}

static int s_parse_positive(const char *what, const char *text, int *out)
{
    long v = 0;
    if (!zf_parse_long(text, 1, INT_MAX / 1000, &v)) {
        fprintf(stderr, "zflow-broker: %s must be a whole number from 1 to %d, not '%s'\n", what,
                INT_MAX / 1000, text);
        return 2;
    }
    *out = (int)v;
    return 0;
}

static int s_parse_env(zf_broker_config_t *cfg)
{
    const char *v = getenv("ZFLOW_BROKER_LISTEN");
    if (v && v[0]) cfg->listen = v;
    v = getenv("ZFLOW_HEARTBEAT_MS");
    if (v && v[0] && s_parse_positive("ZFLOW_HEARTBEAT_MS", v, &cfg->heartbeat_ms)) return 2;
    v = getenv("ZFLOW_HEARTBEAT_MISSES");
    if (v && v[0] && s_parse_positive("ZFLOW_HEARTBEAT_MISSES", v, &cfg->heartbeat_misses))
        return 2;
    v = getenv("ZFLOW_STATE_DIR");
    if (v && v[0]) cfg->state = v;
    return 0;
}

static int s_option(const char *a, const char *v, void *arg)
{
    zf_broker_config_t *cfg = arg;
    int *num = strcmp(a, "--heartbeat-ms") == 0          ? &cfg->heartbeat_ms
               : strcmp(a, "--heartbeat-misses") == 0    ? &cfg->heartbeat_misses
               : strcmp(a, "--max-client-requests") == 0 ? &cfg->max_client_requests
               : strcmp(a, "--max-requests") == 0        ? &cfg->max_requests
               : strcmp(a, "--max-attempts") == 0        ? &cfg->max_attempts
                                                         : NULL;
    if (num) return s_parse_positive(a, v, num) ? ZF_CMDLINE_BAD : ZF_CMDLINE_TAKEN;
    num = strcmp(a, "--job-results") == 0  ? &cfg->job_results
          : strcmp(a, "--job-ttl-ms") == 0 ? &cfg->job_ttl_ms
                                           : NULL;
    long n = 0;
    if (strcmp(a, "--max-job-steps") == 0) {
        if (!zf_parse_long(v, 1, 1000000000000L, &n)) {
            fprintf(stderr,
                    "zflow-broker: %s must be a whole number from 1 to 1000000000000, "
                    "not '%s'\n",
                    a, v);
            return ZF_CMDLINE_BAD;
        }
        cfg->max_job_steps = n;
        return ZF_CMDLINE_TAKEN;
    }
    if (num && !zf_parse_long(v, 1, INT_MAX, &n)) {
        fprintf(stderr, "zflow-broker: %s must be a whole number from 1 to %d, not '%s'\n", a,
                INT_MAX, v);
        return ZF_CMDLINE_BAD;
    }
    if (num) {
        *num = (int)n;
        return ZF_CMDLINE_TAKEN;
    }
    if (strcmp(a, "--keys") == 0) {
        cfg->keys = v;
        return ZF_CMDLINE_TAKEN;
    }
    if (strcmp(a, "--state") == 0) {
        cfg->state = v;
        return ZF_CMDLINE_TAKEN;
    }
    if (strcmp(a, "--listen") != 0) return ZF_CMDLINE_UNKNOWN;
    cfg->listen = v;
    return ZF_CMDLINE_TAKEN;
}

static int s_parse_args(int argc, char **argv, zf_broker_config_t *cfg)
{
    return zf_cmdline_parse("zflow-broker", s_usage, argc, argv, s_option, cfg);
}

/* The per-user state directory: $XDG_STATE_HOME/zflow, else
 * ~/.local/state/zflow; NULL when neither is known. */
static const char *s_default_state(char *buf, size_t size)
{
    const char *xdg = getenv("XDG_STATE_HOME"), *home = getenv("HOME");
    int n = xdg && xdg[0] == '/' ? snprintf(buf, size, "%s/zflow", xdg)
            : home && home[0]    ? snprintf(buf, size, "%s/.local/state/zflow", home)
                                 : -1;
    return n > 0 && (size_t)n < size ? buf : NULL;
}

static void s_install_signals(void)
{
    zf_on_stop_signals(s_on_signal);
    signal(SIGPIPE, SIG_IGN);
}

int main(int argc, char **argv)
{
    zf_log_init("zflow-broker");
    zf_broker_config_t cfg = {"tcp://127.0.0.1:5555",
                              1000,
                              3,
                              ZF_BROKER_MAX_CLIENT_REQUESTS,
                              ZF_BROKER_MAX_REQUESTS,
                              NULL,
                              NULL,
                              ZF_BROKER_MAX_ATTEMPTS,
                              ZF_BROKER_JOB_RESULTS,
                              ZF_BROKER_JOB_TTL_MS,
                              ZF_BROKER_JOB_STEPS_MAX};
    if (s_parse_env(&cfg) || s_parse_args(argc, argv, &cfg)) return 2;
    char state[PATH_MAX];
    if (!cfg.state && !(cfg.state = s_default_state(state, sizeof state))) {
        fprintf(stderr, "zflow-broker: neither XDG_STATE_HOME nor HOME is set: name the job "
                        "store's directory with --state DIR\n");
        return 2;
    }
    cfg.keys = zf_keys_dir_from(cfg.keys);
    zf_broker_t *b = NULL;
    zf_status_t s = zf_broker_new(&cfg, &b);
    if (!zf_ok(s)) {
        fprintf(stderr, "zflow-broker: %s: %s\n", zf_code_name(s.code), zf_status_msg(&s));
        zf_status_clear(&s);
        return 1;
    }
    s_broker = b;
    s_install_signals();
    printf("zflow-broker listening on %s\n", zf_broker_endpoint(b));
    fflush(stdout);
    zf_log_info("broker",
                "listening on %s%s (heartbeat %d ms, dead after %d misses, at most %d requests in "
                "flight per client and %d in all; jobs in %s, %d attempts each at most)",
                zf_broker_endpoint(b), cfg.keys ? " with CURVE keys" : "", cfg.heartbeat_ms,
                cfg.heartbeat_misses, cfg.max_client_requests, cfg.max_requests, cfg.state,
                cfg.max_attempts);
    s = zf_broker_run(b);
    s_broker = NULL;
    zf_broker_destroy(&b);
    if (!zf_ok(s)) {
        fprintf(stderr, "zflow-broker: %s: %s\n", zf_code_name(s.code), zf_status_msg(&s));
        zf_status_clear(&s);
        return 1;
    }
    zf_log_info("broker", "stopped");
    return 0;
}
