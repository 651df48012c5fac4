/* zflow-executor: parses flags and the environment, creates the device and
 * the executor service, registers with the broker and heartbeats until
 * SIGINT or SIGTERM. */
#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/cmdline.h"
#include "common/device_type.h"
#include "common/log.h"
#include "common/transport.h"
#include "executor/devices/device.h"
#include "executor/devices/gpu.h"
#include "executor/worker/member.h"
#include "executor/worker/service.h"

#define S_REGISTER_TIMEOUT_MS   10000
#define S_LOOP_MS               100
#define S_DEREGISTER_TIMEOUT_MS 1000

static const char s_usage[] =
    "usage: zflow-executor --device CPU:N|GPU:N [--broker ENDPOINT]\n"
    "                      [--name FULLNAME | --job NAME --task N]\n"
    "                      [--heartbeat-ms N] [--control ENDPOINT] [--rendezvous ENDPOINT]\n"
    "                      [--threads N] [--max-unclaimed-mib N] [--max-graphs N]\n"
    "                      [--max-graph-bytes N] [--shm-mib N] [--keys DIR]\n"
    "                      [--host-cache-idle-s N]\n"
    "\n"
    "A zflow executor: one device, the partitions schedulers register on it,\n"
    "and its steps.\n"
    "\n"
    "  --device CPU:N|GPU:N    the device (GPU:N is the CUDA ordinal)\n"
    "  --broker ENDPOINT       the broker to register with (env ZFLOW_BROKER);\n"
    "                          without one the executor runs unregistered and\n"
    "                          is driven directly on its control endpoint\n"
    "  --name FULLNAME         the device's full name; default: the broker picks\n"
    "                          /job:worker/replica:0/task:<n>/device:<TYPE>:<i>\n"
    "                          (unregistered: /job:localhost/replica:0/task:0/...)\n"
    "  --job NAME --task N     run as task N of job NAME: the device is\n"
    "                          /job:NAME/replica:0/task:N/device:<TYPE>:<i>, a\n"
    "                          stable name that a restart takes back (with a new\n"
    "                          incarnation) once this process has left; while\n"
    "                          it is registered a second claim is ALREADY_EXISTS\n"
    "  --heartbeat-ms N        heartbeat period (default: the broker's)\n"
    "  --control ENDPOINT      where the control ROUTER binds (default\n"
    "                          tcp://127.0.0.1:*, an ephemeral port)\n"
    "  --rendezvous ENDPOINT   where the rendezvous PULL binds (same default)\n"
    "  --threads N             the CPU device's worker threads (default: one\n"
    "                          per core)\n"
    "  --max-unclaimed-mib N   the most MiB that tensors arriving for steps not\n"
    "                          yet started here may hold (default 1024); past\n"
    "                          it the oldest such steps are dropped, and a\n"
    "                          tensor larger on its own fails its step\n"
    "  --max-graphs N          partitions registered here at once, at most\n"
    "                          (default 16384); one more is refused with\n"
    "                          RESOURCE_EXHAUSTED\n"
    "  --max-graph-bytes N     their serialized GraphDefs together, at most\n"
    "                          (default 4294967296)\n"
    "  --shm-mib N             the shared-memory arena through which tensors of\n"
    "                          64 KiB and more go to executors on this host, in\n"
    "                          MiB (default 256; 0: none, they go as bytes); a\n"
    "                          full arena sends bytes. /dev/shm must have room\n"
    "                          (containers: ipc: host or shm_size)\n"
    "  --host-cache-idle-s N   once no step has run or arrived for N seconds,\n"
    "                          give the freed tensor blocks kept for later\n"
    "                          steps back to the system (default 60; 0: never;\n"
    "                          docs/design.md, \"Host memory\")\n"
    "  --keys DIR              CurveZMQ keys (env ZFLOW_KEYS): this executor's\n"
    "                          keypair DIR/executor.key and the keys it trusts;\n"
    "                          only scheduler keys may drive it and only executor\n"
    "                          keys push tensors to it (docs/service.md)\n"
    "\n"
    "Prints 'zflow-executor <device name> control <endpoint> rendezvous\n"
    "<endpoint>' once registered. Logs go to stderr (ZFLOW_LOG_LEVEL). SIGINT\n"
    "or SIGTERM stops it; it then leaves the broker's registry at once.\n";

typedef struct {
    const char *broker, *device, *name, *control, *rendezvous, *keys, *job;
    int heartbeat_ms, threads, max_unclaimed_mib, task, max_graphs, shm_mib, host_cache_idle_s;
    long max_graph_bytes;
    bool task_set, shm_mib_set;
    char job_name[ZF_DEVICE_NAME_MAX];
    char type[16];
    int index;
} s_flags_t;

static volatile sig_atomic_t s_stop;

static void s_on_signal(int sig)
{
    (void)sig;
    s_stop = 1;
}

static int s_fail(int code, const char *what, const char *arg)
{
    fprintf(stderr, "zflow-executor: %s%s%s\n", what, arg ? " " : "", arg ? arg : "");
    if (code == 2) fputs("run 'zflow-executor --help' for usage\n", stderr);
    return code;
}

/* The numeric flags that take 0 too, and what their number counts (the
 * others take a positive number); NULL for any other flag. */
static const char *s_zero_ok(const char *flag)
{
    static const char *const flags[][2] = {
        {"--task", "a number"},
        {"--shm-mib", "a number"},
        {"--host-cache-idle-s", "a number of seconds"},
    };
    for (size_t i = 0; i < sizeof flags / sizeof flags[0]; i++)
        if (strcmp(flag, flags[i][0]) == 0) return flags[i][1];
    return NULL;
}

static bool s_parse_int(const char *text, int min, int *out)
{
    long v = 0;
    if (!zf_parse_long(text, min, INT_MAX, &v)) return false;
    *out = (int)v;
    return true;
}

/* "CPU:0" or "gpu:1" -> type "CPU"/"GPU" and index. */
static bool s_parse_device(s_flags_t *f)
{
    const char *colon = strchr(f->device, ':');
    size_t len = colon ? (size_t)(colon - f->device) : 0;
    if (!colon || len == 0 || len >= sizeof f->type) return false;
    for (size_t i = 0; i < len; i++) f->type[i] = (char)toupper((unsigned char)f->device[i]);
    f->type[len] = '\0';
    return (strcmp(f->type, ZF_DEVICE_TYPE_CPU) == 0 || strcmp(f->type, ZF_DEVICE_TYPE_GPU) == 0) &&
           s_parse_int(colon + 1, 0, &f->index);
}

/* TensorFlow's job names: a letter, then letters, digits and '_'. */
static bool s_valid_job(const char *job)
{
    if (!isalpha((unsigned char)job[0]) || strlen(job) > 64) return false;
    for (const char *c = job; *c; c++)
        if (!isalnum((unsigned char)*c) && *c != '_') return false;
    return true;
}

/* Returns -1 to go on, else the exit code. */
static int s_parse(int argc, char **argv, s_flags_t *f)
{
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            fputs(s_usage, stdout);
            return 0;
        }
        const char **str = strcmp(a, "--broker") == 0       ? &f->broker
                           : strcmp(a, "--device") == 0     ? &f->device
                           : strcmp(a, "--name") == 0       ? &f->name
                           : strcmp(a, "--control") == 0    ? &f->control
                           : strcmp(a, "--rendezvous") == 0 ? &f->rendezvous
                           : strcmp(a, "--keys") == 0       ? &f->keys
                           : strcmp(a, "--job") == 0        ? &f->job
                                                            : NULL;
        int *num = strcmp(a, "--heartbeat-ms") == 0        ? &f->heartbeat_ms
                   : strcmp(a, "--threads") == 0           ? &f->threads
                   : strcmp(a, "--max-unclaimed-mib") == 0 ? &f->max_unclaimed_mib
                   : strcmp(a, "--task") == 0              ? &f->task
                   : strcmp(a, "--max-graphs") == 0        ? &f->max_graphs
                   : strcmp(a, "--shm-mib") == 0           ? &f->shm_mib
                   : strcmp(a, "--host-cache-idle-s") == 0 ? &f->host_cache_idle_s
                                                           : NULL;
        bool bytes = strcmp(a, "--max-graph-bytes") == 0;
        if (!str && !num && !bytes) return s_fail(2, "unknown argument", a);
        if (i + 1 >= argc) return s_fail(2, "a value is missing after", a);
        const char *v = argv[++i];
        if (str) *str = v;
        const char *zero_ok = s_zero_ok(a);
        if (zero_ok) {
            if (!s_parse_int(v, 0, num)) {
                char what[96];
                snprintf(what, sizeof what, "%s takes %s >= 0, not", a, zero_ok);
                return s_fail(2, what, v);
            }
            f->task_set |= num == &f->task;
            f->shm_mib_set |= num == &f->shm_mib;
            continue;
        }
        if (num && !s_parse_int(v, 1, num)) return s_fail(2, "a positive number must follow", a);
        if (bytes && !zf_parse_long(v, 1, LONG_MAX, &f->max_graph_bytes))
            return s_fail(2, "a positive number must follow", a);
    }
    if (!f->broker) f->broker = getenv("ZFLOW_BROKER");
    if (f->broker && !*f->broker) f->broker = NULL;
    f->keys = zf_keys_dir_from(f->keys);
    if (!f->device) return s_fail(2, "--device is required", NULL);
    if (!s_parse_device(f)) return s_fail(2, "--device takes CPU:N or GPU:N, not", f->device);
    if (f->job || f->task_set) {
        if (f->name) return s_fail(2, "--name and --job/--task exclude each other", NULL);
        if (!f->job || !f->task_set) return s_fail(2, "--job and --task go together", NULL);
        if (!s_valid_job(f->job))
            return s_fail(2, "a job name is [A-Za-z][A-Za-z0-9_]*, not", f->job);
        snprintf(f->job_name, sizeof f->job_name, "/job:%s/replica:0/task:%d/device:%s:%d", f->job,
                 f->task, f->type, f->index);
        f->name = f->job_name;
    }
    return -1;
}

static zf_status_t s_make_device(const s_flags_t *f, zf_device_t **out)
{
    char name[ZF_DEVICE_NAME_MAX];
    if (f->name)
        snprintf(name, sizeof name, "%s", f->name);
    else
        snprintf(name, sizeof name, "/job:%s/replica:0/task:0/device:%s:%d",
                 f->broker ? "worker" : "localhost", f->type, f->index);
    if (strcmp(f->type, ZF_DEVICE_TYPE_GPU) == 0) return zf_device_gpu_new(name, f->index, out);
    return zf_device_cpu_new(name, f->threads, out);
}

/* Serves until a signal; membership rounds when there is a broker. */
static zf_status_t s_loop(zf_exec_member_t *m)
{
    while (!s_stop) {
        if (!m) {
            struct timespec ts = {0, S_LOOP_MS * 1000000L};
            nanosleep(&ts, NULL);
            continue;
        }
        ZF_TRY(zf_exec_member_poll(m, S_LOOP_MS));
    }
    return ZF_STATUS_OK;
}

static zf_status_t s_run(const s_flags_t *f)
{
    zf_zctx_t *ctx = NULL;
    zf_device_t *dev = NULL;
    zf_exec_service_t *svc = NULL;
    zf_exec_member_t *m = NULL;
    zf_status_t s = zf_zctx_new(&ctx);
    if (zf_ok(s) && f->keys) s = zf_zctx_set_keys(ctx, f->keys, ZF_ROLE_EXECUTOR);
    if (zf_ok(s)) s = s_make_device(f, &dev);
    zf_exec_service_options_t opts = {f->control, f->rendezvous, 0,
                                      !f->shm_mib_set ? 0
                                      : f->shm_mib    ? f->shm_mib
                                                      : -1};
    if (zf_ok(s)) s = zf_exec_service_new(ctx, dev, &opts, &svc);
    if (zf_ok(s) && f->max_unclaimed_mib > 0)
        zf_exec_service_set_max_unclaimed_bytes(svc, (size_t)f->max_unclaimed_mib << 20);
    if (zf_ok(s)) zf_exec_service_set_graph_limits(svc, f->max_graphs, f->max_graph_bytes);
    if (zf_ok(s)) zf_exec_service_set_host_cache_idle_ms(svc, (int64_t)f->host_cache_idle_s * 1000);
    zf_exec_member_config_t mc = {f->broker, f->name == NULL, f->heartbeat_ms};
    if (zf_ok(s) && f->broker) s = zf_exec_member_new(ctx, svc, dev, &mc, &m);
    if (zf_ok(s) && m) s = zf_exec_member_register(m, S_REGISTER_TIMEOUT_MS);
    if (zf_ok(s)) {
        printf("zflow-executor %s control %s rendezvous %s\n", dev->name_str,
               zf_exec_service_control_endpoint(svc), zf_exec_service_rendezvous_endpoint(svc));
        fflush(stdout);
        s = s_loop(m);
    }
    if (zf_ok(s)) zf_log_info("executor", "%s stopping", dev->name_str);
    if (zf_ok(s) && m) {
        zf_status_t d = zf_exec_member_deregister(m, S_DEREGISTER_TIMEOUT_MS);
        if (!zf_ok(d)) zf_log_warn("executor", "leaving the broker: %s", zf_status_msg(&d));
        zf_status_clear(&d);
    }
    zf_exec_member_destroy(&m);
    zf_exec_service_destroy(&svc);
    zf_device_destroy(&dev);
    zf_zctx_destroy(&ctx);
    return s;
}

int main(int argc, char **argv)
{
    zf_log_init("zflow-executor");
    s_flags_t f = {.host_cache_idle_s = ZF_EXEC_HOST_CACHE_IDLE_S};
    int code = s_parse(argc, argv, &f);
    if (code >= 0) return code;
    zf_on_stop_signals(s_on_signal);
    zf_status_t s = s_run(&f);
    if (zf_ok(s)) return 0;
    zf_log_error("executor", "%s", zf_status_msg(&s));
    zf_status_clear(&s);
    return 1;
}
