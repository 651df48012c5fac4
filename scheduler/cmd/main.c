/* zflow-scheduler: parses flags and the environment, registers with the
 * broker and serves sessions until SIGINT or SIGTERM. */
#include <errno.h>
#include <limits.h>
#include <malloc.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/cmdline.h"
#include "common/host_memory.h"
#include "common/keys.h"
#include "common/log.h"
#include "scheduler/server/server.h"

static const char s_usage[] =
    "usage: zflow-scheduler [--broker ENDPOINT] [--workers N] [--job-workers N]\n"
    "                       [--listen ENDPOINT] [--advertise ENDPOINT] [--job-results N]\n"
    "                       [--job-ttl-ms MS] [--max-job-steps N] [--max-queued-jobs N]\n"
    "                       [--max-client-requests N] [--max-sessions N]\n"
    "                       [--max-sessions-per-client N] [--session-idle-timeout-ms MS]\n"
    "                       [--max-graph-nodes N] [--max-graph-bytes N]\n"
    "                       [--step-timeout-ms MS] [--keys DIR]\n"
    "\n"
    "The zflow scheduler: serves the sessions clients open through the broker\n"
    "(placement, partitioning, plan cache, steps) on the executors the broker\n"
    "knows.\n"
    "\n"
    "  --broker ENDPOINT   the broker to register with (default\n"
    "                      tcp://127.0.0.1:5555; env ZFLOW_BROKER)\n"
    "  --workers N         sessions' requests served at once (default 16)\n"
    "  --job-workers N     jobs (zflow submit) run at once (default 4); more wait\n"
    "                      queued, and no job holds up a session's request\n"
    "  --listen ENDPOINT   where clients send a session's steps directly (default\n"
    "                      tcp://127.0.0.1:*, an ephemeral port; told to clients\n"
    "                      through the broker)\n"
    "  --advertise ENDPOINT  what clients are told to connect to instead of the\n"
    "                      bound endpoint (NAT, bridge networks); a client that\n"
    "                      cannot reach it sends the steps through the broker\n"
    "  --job-results N     results of one-shot jobs kept until collected, at\n"
    "                      most (default 1024; the oldest go first)\n"
    "  --job-ttl-ms MS     how long such a result is kept (default 600000)\n"
    "  --max-job-steps N   steps one job may ask for, at most (default 1000000);\n"
    "                      a job asking for more is refused when submitted\n"
    "  --max-queued-jobs N  jobs waiting for a job worker, at most (default\n"
    "                      4096); one more is refused with RESOURCE_EXHAUSTED\n"
    "  --max-client-requests N  requests one client may have in flight at the\n"
    "                      client endpoint (default 4096); one more is refused\n"
    "                      with RESOURCE_EXHAUSTED until replies come back\n"
    "  --max-sessions N    sessions open at once, at most (default 4096); one more\n"
    "                      is refused with RESOURCE_EXHAUSTED (jobs' own sessions\n"
    "                      do not count)\n"
    "  --max-sessions-per-client N  sessions one client may hold open (default\n"
    "                      256); a client is its CURVE identity or connection\n"
    "  --session-idle-timeout-ms MS  a session without a step for that long is\n"
    "                      closed (default 3600000; 0: never); its later requests\n"
    "                      are NOT_FOUND\n"
    "  --max-graph-nodes N  nodes a session's or job's graph may have (default\n"
    "                      4000000); a larger one is refused with RESOURCE_EXHAUSTED\n"
    "  --max-graph-bytes N  serialized size such a graph may have (default\n"
    "                      268435456)\n"
    "  --step-timeout-ms MS  deadline of a step whose request and session give\n"
    "                      none (default 3600000; 0: none); past it the step is\n"
    "                      aborted everywhere and answered DEADLINE_EXCEEDED\n"
    "  --keys DIR          CurveZMQ keys (env ZFLOW_KEYS): this scheduler's keypair\n"
    "                      DIR/scheduler.key and the keys it trusts and connects\n"
    "                      with (docs/service.md, \"Security\")\n"
    "\n"
    "Prints 'zflow-scheduler connected to ENDPOINT' once registered. Logs go to\n"
    "stderr (ZFLOW_LOG_LEVEL). SIGINT or SIGTERM stops it.\n";

static zf_sched_server_t *volatile s_server;

static void s_on_signal(int sig)
{
    (void)sig;
    if (s_server) zf_sched_server_stop(s_server);
}

/* v as a whole number from 1 to max; false (with the message printed)
 * otherwise. */
static bool s_parse_long(const char *flag, const char *v, long max, long *out)
{
    if (zf_parse_long(v, 1, max, out)) return true;
    fprintf(stderr, "zflow-scheduler: %s must be from 1 to %ld, not '%s'\n", flag, max, v);
    return false;
}

/* The most each numeric flag takes (each takes at least 1). */
static long s_max(const char *flag)
{
    if (strcmp(flag, "--workers") == 0 || strcmp(flag, "--job-workers") == 0)
        return ZF_SCHED_WORKERS_MAX;
    if (strcmp(flag, "--job-ttl-ms") == 0) return 7L * 24 * 3600 * 1000;
    if (strcmp(flag, "--max-job-steps") == 0) return 1000000000000L;
    return 1000000;
}

/* The flags that take 0 for "never" (stored as -1) and are in ms. */
static int64_t *s_ms_flag(zf_sched_server_config_t *cfg, const char *a)
{
    if (strcmp(a, "--session-idle-timeout-ms") == 0) return &cfg->limits.session_idle_ms;
    if (strcmp(a, "--step-timeout-ms") == 0) return &cfg->limits.step_timeout_ms;
    return NULL;
}

/* The limits that take a whole number from 1 to max. */
static int64_t *s_limit_flag(zf_sched_server_config_t *cfg, const char *a, long *max)
{
    *max = 1000000000000L;
    if (strcmp(a, "--max-graph-nodes") == 0) return &cfg->limits.max_graph_nodes;
    if (strcmp(a, "--max-graph-bytes") == 0) return &cfg->limits.max_graph_bytes;
    return NULL;
}

static int s_option(const char *a, const char *v, void *arg)
{
    zf_sched_server_config_t *cfg = arg;
    int64_t *ms = s_ms_flag(cfg, a);
    if (ms) {
        long n = 0;
        if (!zf_parse_long(v, 0, 7L * 24 * 3600 * 1000, &n)) {
            fprintf(stderr, "zflow-scheduler: %s must be from 0 to %ld, not '%s'\n", a,
                    7L * 24 * 3600 * 1000, v);
            return ZF_CMDLINE_BAD;
        }
        *ms = n > 0 ? n : -1;
        return ZF_CMDLINE_TAKEN;
    }
    long max = 0;
    int64_t *lim = s_limit_flag(cfg, a, &max);
    if (lim) {
        long n = 0;
        if (!s_parse_long(a, v, max, &n)) return ZF_CMDLINE_BAD;
        *lim = n;
        return ZF_CMDLINE_TAKEN;
    }
    if (strcmp(a, "--broker") == 0) {
        cfg->broker = v;
        return ZF_CMDLINE_TAKEN;
    }
    if (strcmp(a, "--keys") == 0) {
        cfg->keys = v;
        return ZF_CMDLINE_TAKEN;
    }
    if (strcmp(a, "--listen") == 0) {
        cfg->listen = v;
        return ZF_CMDLINE_TAKEN;
    }
    if (strcmp(a, "--advertise") == 0) {
        if (strncmp(v, "tcp://", 6) != 0 && strncmp(v, "ipc://", 6) != 0) {
            fprintf(stderr,
                    "zflow-scheduler: --advertise must be a tcp:// or ipc:// endpoint, "
                    "not '%s'\n",
                    v);
            return ZF_CMDLINE_BAD;
        }
        cfg->advertise = v;
        return ZF_CMDLINE_TAKEN;
    }
    int *inum = strcmp(a, "--workers") == 0                   ? &cfg->workers
                : strcmp(a, "--job-workers") == 0             ? &cfg->job_workers
                : strcmp(a, "--job-results") == 0             ? &cfg->job_results
                : strcmp(a, "--max-queued-jobs") == 0         ? &cfg->max_queued_jobs
                : strcmp(a, "--max-client-requests") == 0     ? &cfg->max_client_requests
                : strcmp(a, "--max-sessions") == 0            ? &cfg->limits.max_sessions
                : strcmp(a, "--max-sessions-per-client") == 0 ? &cfg->limits.max_sessions_per_client
                                                              : NULL;
    bool lnum = strcmp(a, "--job-ttl-ms") == 0 || strcmp(a, "--max-job-steps") == 0;
    if (!inum && !lnum) return ZF_CMDLINE_UNKNOWN;
    long n = 0;
    if (!s_parse_long(a, v, s_max(a), &n)) return ZF_CMDLINE_BAD;
    if (inum)
        *inum = (int)n;
    else if (strcmp(a, "--job-ttl-ms") == 0)
        cfg->job_ttl_ms = n;
    else
        cfg->max_steps = n;
    return ZF_CMDLINE_TAKEN;
}

static int s_parse_args(int argc, char **argv, zf_sched_server_config_t *cfg)
{
    return zf_cmdline_parse("zflow-scheduler", s_usage, argc, argv, s_option, cfg);
}

static void s_install_signals(void)
{
    zf_on_stop_signals(s_on_signal);
    signal(SIGPIPE, SIG_IGN);
}

static int s_fail(zf_status_t s)
{
    fprintf(stderr, "zflow-scheduler: %s: %s\n", zf_code_name(s.code), zf_status_msg(&s));
    zf_status_clear(&s);
    return 1;
}

/* Fixed thresholds for glibc's heap. By default it raises them as large
 * blocks are freed (up to 32 MB to mmap, twice that to keep on top of an
 * arena), so that after one large graph every worker thread's arena keeps
 * a large graph's worth of freed memory for good (malloc_trim does not
 * shrink the top of a thread's arena). Fixed, blocks from 256 KiB are
 * mapped and unmapped on their own, and an arena gives back what it has
 * free past 1 MiB on its top as soon as it is freed. */
static void s_tune_heap(void)
{
    mallopt(M_MMAP_THRESHOLD, 256 << 10);
    mallopt(M_TRIM_THRESHOLD, 1 << 20);
    /* the tensors a scheduler holds (feeds, folded constants) are not a
     * step's working set: no cache of freed blocks (common/host_memory.h) */
    zf_host_memory_set_cache_limit(0);
}

int main(int argc, char **argv)
{
    s_tune_heap();
    zf_log_init("zflow-scheduler");
    zf_sched_server_config_t cfg = {.broker = "tcp://127.0.0.1:5555"};
    const char *env = getenv("ZFLOW_BROKER");
    if (env && env[0]) cfg.broker = env;
    if (s_parse_args(argc, argv, &cfg)) return 2;
    cfg.keys = zf_keys_dir_from(cfg.keys);
    zf_sched_server_t *srv = NULL;
    zf_status_t s = zf_sched_server_new(&cfg, &srv);
    if (!zf_ok(s)) return s_fail(s);
    s_server = srv;
    s_install_signals();
    s = zf_sched_server_register(srv, -1);
    if (zf_ok(s)) {
        printf("zflow-scheduler connected to %s\n", cfg.broker);
        fflush(stdout);
        s = zf_sched_server_run(srv);
    }
    s_server = NULL;
    zf_sched_server_destroy(&srv);
    if (s.code == ZF_CANCELLED) zf_status_clear(&s); /* stopped before registering */
    if (!zf_ok(s)) return s_fail(s);
    zf_log_info("scheduler", "stopped");
    return 0;
}
