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
    return 0;
}

static int s_option(const char *a, const char *v, void *arg)
{
    zf_broker_config_t *cfg = arg;
    int *num = strcmp(a, "--heartbeat-ms") == 0          ? &cfg->heartbeat_ms
               : strcmp(a, "--heartbeat-misses") == 0    ? &cfg->heartbeat_misses
               : strcmp(a, "--max-client-requests") == 0 ? &cfg->max_client_requests
               : strcmp(a, "--max-requests") == 0        ? &cfg->max_requests
                                                         : NULL;
    if (num) return s_parse_positive(a, v, num) ? ZF_CMDLINE_BAD : ZF_CMDLINE_TAKEN;
    if (strcmp(a, "--keys") == 0) {
        cfg->keys = v;
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

static void s_install_signals(void)
{
    zf_on_stop_signals(s_on_signal);
    signal(SIGPIPE, SIG_IGN);
}

int main(int argc, char **argv)
{
    zf_log_init("zflow-broker");
    zf_broker_config_t cfg = {"tcp://127.0.0.1:5555", 1000, 3, ZF_BROKER_MAX_CLIENT_REQUESTS,
                              ZF_BROKER_MAX_REQUESTS, NULL};
    if (s_parse_env(&cfg) || s_parse_args(argc, argv, &cfg)) return 2;
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
                "flight per client and %d in all)",
                zf_broker_endpoint(b), cfg.keys ? " with CURVE keys" : "", cfg.heartbeat_ms,
                cfg.heartbeat_misses, cfg.max_client_requests, cfg.max_requests);
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
