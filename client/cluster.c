/* A local cluster of child processes: starting zflow-broker, executors and
 * zflow-scheduler, reading their startup lines, and stopping and reaping
 * every one of them, also after a failed start. */
#include "client/cluster.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common/device_name.h"
#include "common/keys.h"

#define S_LINE_MAX 512

typedef struct s_proc {
    pid_t pid; /* 0 once reaped */
    int out_fd;
    int status; /* wait status once reaped */
    char what[96];
    char **argv;        /* owned copy, to start it again */
    const char *expect; /* what its startup line must contain (static) */
    int restarts;       /* within the current window */
    int64_t window_ms;  /* when that window began */
    int64_t restart_ms; /* > 0: start it again at this time */
} s_proc_t;

struct zf_cluster {
    s_proc_t *procs; /* [0] broker, then executors, last the scheduler */
    int n, cap;
    char endpoint[S_LINE_MAX];
    char bin_dir[PATH_MAX];
    int timeout_ms;
    bool quiet;
    char keys[PATH_MAX]; /* "" for a plain cluster */
    bool own_keys;       /* made by zf_cluster_start: removed at stop */
};

static int64_t s_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static zf_status_t s_bin_dir(const zf_cluster_options_t *o, char *dir, size_t size)
{
    const char *env = getenv("ZFLOW_BIN_DIR");
    if (o->bin_dir || (env && env[0])) {
        snprintf(dir, size, "%s", o->bin_dir ? o->bin_dir : env);
        return ZF_STATUS_OK;
    }
    ssize_t n = readlink("/proc/self/exe", dir, size - 1);
    if (n <= 0) return zf_status_new(ZF_UNKNOWN, "cannot find this program's directory");
    dir[n] = '\0';
    char *slash = strrchr(dir, '/');
    if (slash) *slash = '\0';
    return ZF_STATUS_OK;
}

/* Reads one line from fd within timeout_ms. UNAVAILABLE on timeout or EOF. */
static zf_status_t s_read_line(int fd, const char *what, int timeout_ms, char *buf, size_t size)
{
    size_t n = 0;
    int64_t deadline = s_now_ms() + timeout_ms;
    while (n + 1 < size) {
        struct pollfd p = {fd, POLLIN, 0};
        int64_t left = deadline - s_now_ms();
        int r = left > 0 ? poll(&p, 1, (int)left) : 0;
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0)
            return zf_status_new(ZF_UNAVAILABLE, "%s did not start within %d ms", what, timeout_ms);
        char ch;
        ssize_t got = read(fd, &ch, 1);
        if (got < 0 && errno == EINTR) continue;
        if (got != 1) return zf_status_new(ZF_UNAVAILABLE, "%s exited while starting", what);
        if (ch == '\n') break;
        buf[n++] = ch;
    }
    buf[n] = '\0';
    return ZF_STATUS_OK;
}

/* In the child: only async-signal-safe calls until execv. */
static void s_child(pid_t parent, int out_fd, int read_fd, bool quiet, char *const *argv)
{
    setpgid(0, 0);                     /* the terminal's Ctrl-C is the parent's to handle */
    prctl(PR_SET_PDEATHSIG, SIGTERM);  /* never outlive the parent */
    if (getppid() != parent) _exit(1); /* it died before prctl */
    dup2(out_fd, STDOUT_FILENO);
    if (quiet) {
        int null_fd = open("/dev/null", O_WRONLY);
        if (null_fd >= 0) dup2(null_fd, STDERR_FILENO);
    }
    close(out_fd);
    close(read_fd);
    execv(argv[0], argv);
    _exit(127);
}

static void s_argv_free(char **argv)
{
    for (char **a = argv; a && *a; a++) free(*a);
    free(argv);
}

static char **s_argv_copy(char *const *argv)
{
    int n = 0;
    while (argv[n]) n++;
    char **copy = calloc((size_t)n + 1, sizeof *copy);
    for (int i = 0; copy && i < n; i++) {
        if (!(copy[i] = strdup(argv[i]))) {
            s_argv_free(copy);
            return NULL;
        }
    }
    return copy;
}

/* Forks p->argv into p and reads its startup line into line. */
static zf_status_t s_fork(zf_cluster_t *c, s_proc_t *p, char *line)
{
    if (access(p->argv[0], X_OK) != 0)
        return zf_not_found("%s: cannot run %s: %s", p->what, p->argv[0], strerror(errno));
    int fds[2];
    if (pipe(fds) != 0) return zf_status_new(ZF_UNKNOWN, "pipe: %s", strerror(errno));
    fflush(NULL);
    pid_t parent = getpid();
    pid_t pid = fork();
    if (pid < 0) {
        close(fds[0]);
        close(fds[1]);
        return zf_status_new(ZF_UNKNOWN, "fork: %s", strerror(errno));
    }
    if (pid == 0) s_child(parent, fds[1], fds[0], c->quiet, p->argv);
    close(fds[1]);
    if (p->out_fd >= 0) close(p->out_fd);
    p->pid = pid;
    p->out_fd = fds[0];
    p->status = 0;
    ZF_TRY(s_read_line(fds[0], p->what, c->timeout_ms, line, S_LINE_MAX));
    if (p->expect && !strstr(line, p->expect))
        return zf_status_new(ZF_UNAVAILABLE, "%s printed '%s', not '%s'", p->what, line, p->expect);
    return ZF_STATUS_OK;
}

/* Starts argv (copied, for restarts) as a new process of the cluster and
 * reads its startup line, which must contain expect (NULL: anything). */
static zf_status_t s_spawn(zf_cluster_t *c, const char *what, char *const *argv, const char *expect,
                           char *line)
{
    if (c->n == c->cap) {
        int cap = c->cap ? c->cap * 2 : 8;
        s_proc_t *p = realloc(c->procs, (size_t)cap * sizeof *p);
        if (!p) return zf_out_of_memory("cluster");
        c->procs = p;
        c->cap = cap;
    }
    s_proc_t *p = &c->procs[c->n];
    *p = (s_proc_t){.out_fd = -1, .expect = expect, .argv = s_argv_copy(argv)};
    if (!p->argv) return zf_out_of_memory("cluster");
    snprintf(p->what, sizeof p->what, "%s", what);
    c->n++;
    return s_fork(c, p, line);
}

/* Puts "--keys DIR" at argv[at] for a secure cluster (argv has room). */
static void s_add_keys(zf_cluster_t *c, char **argv, int at)
{
    if (!c->keys[0]) return;
    argv[at] = "--keys";
    argv[at + 1] = c->keys;
}

/* A fresh key directory with every role's keypair, for a secure cluster. */
static zf_status_t s_make_keys(zf_cluster_t *c)
{
    const char *tmp = getenv("TMPDIR");
    snprintf(c->keys, sizeof c->keys, "%s/zflow-keys-XXXXXX", tmp && tmp[0] ? tmp : "/tmp");
    if (!mkdtemp(c->keys)) {
        zf_status_t s = zf_status_new(ZF_UNAVAILABLE, "cannot make a key directory %s: %s", c->keys,
                                      strerror(errno));
        c->keys[0] = '\0';
        return s;
    }
    c->own_keys = true;
    return zf_keygen_cluster(c->keys);
}

/* Removes a key directory the cluster made: its files, then itself. */
static void s_remove_keys(zf_cluster_t *c)
{
    if (!c->own_keys) return;
    static const char *const names[] = {"broker", "scheduler", "executor", "client"};
    static const char *const exts[] = {"key", "pub"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        for (size_t j = 0; j < 2; j++) {
            char path[PATH_MAX + 32];
            snprintf(path, sizeof path, "%s/%s.%s", c->keys, names[i], exts[j]);
            unlink(path);
        }
    }
    rmdir(c->keys);
}

static zf_status_t s_start_broker(zf_cluster_t *c, int port, const char *state)
{
    char prog[PATH_MAX + 32], listen[64], line[S_LINE_MAX];
    snprintf(prog, sizeof prog, "%s/zflow-broker", c->bin_dir);
    snprintf(listen, sizeof listen, "tcp://127.0.0.1:%d", port);
    /* without a state directory its jobs live as long as the cluster
     * (docs/service.md, "Durable jobs") */
    char *argv[] = {
        prog, "--listen", listen, "--state", state ? (char *)state : ":memory:", NULL, NULL, NULL};
    s_add_keys(c, argv, 5);
    const char *prefix = "zflow-broker listening on ";
    ZF_TRY(s_spawn(c, "zflow-broker", argv, prefix, line));
    if (strncmp(line, prefix, strlen(prefix)) != 0)
        return zf_status_new(ZF_UNAVAILABLE, "zflow-broker printed '%s', not its address", line);
    snprintf(c->endpoint, sizeof c->endpoint, "%s", line + strlen(prefix));
    /* a restart listens where everyone already connects, not on a new port */
    s_proc_t *p = &c->procs[c->n - 1];
    free(p->argv[2]);
    p->argv[2] = strdup(c->endpoint);
    return p->argv[2] ? ZF_STATUS_OK : zf_out_of_memory("cluster");
}

static zf_status_t s_start_executor(zf_cluster_t *c, const zf_device_name_t *dev)
{
    char prog[PATH_MAX + 32], name[ZF_DEVICE_NAME_MAX], device[64], line[S_LINE_MAX];
    snprintf(prog, sizeof prog, "%s/zflow-executor", c->bin_dir);
    zf_device_name_format(dev, name, sizeof name);
    snprintf(device, sizeof device, "%s:%d", dev->type, dev->id);
    char *argv[] = {prog,     "--broker", c->endpoint, "--device", device,
                    "--name", name,       NULL,        NULL,       NULL};
    s_add_keys(c, argv, 7);
    char what[96];
    snprintf(what, sizeof what, "zflow-executor %s", device);
    ZF_TRY(s_spawn(c, what, argv, NULL, line));
    if (!strstr(line, name))
        return zf_status_new(ZF_UNAVAILABLE, "%s printed '%s', not its name", what, line);
    return ZF_STATUS_OK;
}

static zf_status_t s_start_scheduler(zf_cluster_t *c)
{
    char prog[PATH_MAX + 32], line[S_LINE_MAX];
    snprintf(prog, sizeof prog, "%s/zflow-scheduler", c->bin_dir);
    char *argv[] = {prog, "--broker", c->endpoint, NULL, NULL, NULL};
    s_add_keys(c, argv, 3);
    return s_spawn(c, "zflow-scheduler", argv, "zflow-scheduler connected", line);
}

static zf_status_t s_start_all(zf_cluster_t *c, const zf_cluster_options_t *o)
{
    zf_device_name_t *devs = NULL;
    int n = 0;
    ZF_TRY(zf_status_prefix(zf_device_list_parse(o->devices ? o->devices : "cpu:1", &devs, &n),
                            "cluster devices"));
    zf_status_t s = ZF_STATUS_OK;
    for (int i = 0; i < n && zf_ok(s); i++) {
        if (!devs[i].has_type || !devs[i].has_id)
            s = zf_invalid_argument("cluster devices: entry %d names no single device", i);
    }
    if (zf_ok(s)) s = s_start_broker(c, o->port, o->state);
    for (int i = 0; i < n && zf_ok(s); i++) s = s_start_executor(c, &devs[i]);
    if (zf_ok(s)) s = s_start_scheduler(c);
    free(devs);
    return s;
}

zf_status_t zf_cluster_start(const zf_cluster_options_t *opts, zf_cluster_t **out)
{
    *out = NULL;
    zf_cluster_options_t o = opts ? *opts : ZF_CLUSTER_OPTIONS_DEFAULT;
    if (o.port < 0 || o.port > 65535)
        return zf_invalid_argument("cluster: port %d is outside 0..65535", o.port);
    zf_cluster_t *c = calloc(1, sizeof *c);
    if (!c) return zf_out_of_memory("cluster");
    c->timeout_ms = o.start_timeout_ms > 0 ? o.start_timeout_ms : 10000;
    c->quiet = o.quiet;
    zf_status_t s = s_bin_dir(&o, c->bin_dir, sizeof c->bin_dir);
    if (zf_ok(s) && o.keys)
        snprintf(c->keys, sizeof c->keys, "%s", o.keys);
    else if (zf_ok(s) && o.secure)
        s = s_make_keys(c);
    if (zf_ok(s)) s = s_start_all(c, &o);
    if (!zf_ok(s)) {
        zf_cluster_destroy(&c);
        return zf_status_prefix(s, "starting a local cluster");
    }
    *out = c;
    return ZF_STATUS_OK;
}

const char *zf_cluster_endpoint(const zf_cluster_t *c)
{
    return c->endpoint;
}

const char *zf_cluster_keys(const zf_cluster_t *c)
{
    return c->keys[0] ? c->keys : NULL;
}

int zf_cluster_process_count(const zf_cluster_t *c)
{
    return c->n;
}

pid_t zf_cluster_poll_exited(zf_cluster_t *c, const char **what)
{
    for (int i = 0; i < c->n; i++) {
        s_proc_t *p = &c->procs[i];
        if (p->pid > 0 && waitpid(p->pid, &p->status, WNOHANG) == p->pid) {
            pid_t pid = p->pid;
            p->pid = 0;
            if (what) *what = p->what;
            return pid;
        }
    }
    return 0;
}

/* How a process ended, for the log: "exited with status N" or "was
 * killed by signal N". */
static void s_describe_exit(int status, char *buf, size_t size)
{
    if (WIFSIGNALED(status))
        snprintf(buf, size, "was killed by signal %d", WTERMSIG(status));
    else
        snprintf(buf, size, "exited with status %d", WIFEXITED(status) ? WEXITSTATUS(status) : -1);
}

/* The wait before restart k (1, 2, ...) of a window: 100 ms, doubling, at
 * most ZF_CLUSTER_MAX_BACKOFF_MS. */
static int64_t s_backoff_ms(int k)
{
    int64_t ms = 100;
    for (int i = 1; i < k && ms < ZF_CLUSTER_MAX_BACKOFF_MS; i++) ms *= 2;
    return ms < ZF_CLUSTER_MAX_BACKOFF_MS ? ms : ZF_CLUSTER_MAX_BACKOFF_MS;
}

/* p died (its wait status in p->status): schedules its restart, or gives
 * up when it died too often within the window. */
static zf_status_t s_schedule_restart(s_proc_t *p, zf_cluster_log_fn log, void *arg)
{
    int64_t now = s_now_ms();
    if (p->restarts == 0 || now - p->window_ms > ZF_CLUSTER_RESTART_WINDOW_MS) {
        p->window_ms = now;
        p->restarts = 0;
    }
    char how[64], msg[256];
    s_describe_exit(p->status, how, sizeof how);
    if (p->restarts >= ZF_CLUSTER_MAX_RESTARTS)
        return zf_status_new(ZF_UNAVAILABLE,
                             "%s keeps dying: it %s after %d restarts within %d s; stopping the "
                             "cluster",
                             p->what, how, p->restarts, ZF_CLUSTER_RESTART_WINDOW_MS / 1000);
    p->restarts++;
    int64_t wait = s_backoff_ms(p->restarts);
    p->restart_ms = now + wait;
    snprintf(msg, sizeof msg, "%s %s; starting it again in %lld ms (restart %d of %d within %d s)",
             p->what, how, (long long)wait, p->restarts, ZF_CLUSTER_MAX_RESTARTS,
             ZF_CLUSTER_RESTART_WINDOW_MS / 1000);
    if (log) log(msg, arg);
    return ZF_STATUS_OK;
}

zf_status_t zf_cluster_supervise(zf_cluster_t *c, zf_cluster_log_fn log, void *arg)
{
    for (int i = 0; i < c->n; i++) {
        s_proc_t *p = &c->procs[i];
        if (p->pid > 0 && waitpid(p->pid, &p->status, WNOHANG) == p->pid) {
            p->pid = 0;
            ZF_TRY(s_schedule_restart(p, log, arg));
        }
        if (p->pid > 0 || p->restart_ms == 0 || s_now_ms() < p->restart_ms) continue;
        p->restart_ms = 0;
        char line[S_LINE_MAX], msg[S_LINE_MAX + 128];
        zf_status_t s = s_fork(c, p, line);
        if (zf_ok(s)) {
            snprintf(msg, sizeof msg, "%s started again: %s", p->what, line);
            if (log) log(msg, arg);
            continue;
        }
        snprintf(msg, sizeof msg, "%s did not start again: %s", p->what, zf_status_msg(&s));
        zf_status_clear(&s);
        if (log) log(msg, arg);
        if (p->pid > 0) { /* it runs but said the wrong thing, or nothing in time */
            kill(p->pid, SIGKILL);
            while (waitpid(p->pid, &p->status, 0) < 0 && errno == EINTR) {
            }
            p->pid = 0;
        }
        ZF_TRY(s_schedule_restart(p, log, arg));
    }
    return ZF_STATUS_OK;
}

/* Waits until every child is reaped or the deadline passes. */
static void s_reap_until(zf_cluster_t *c, int64_t deadline)
{
    for (;;) {
        bool alive = false;
        for (int i = 0; i < c->n; i++) {
            s_proc_t *p = &c->procs[i];
            if (p->pid > 0 && waitpid(p->pid, &p->status, WNOHANG) == p->pid) p->pid = 0;
            alive = alive || p->pid > 0;
        }
        if (!alive || s_now_ms() >= deadline) return;
        usleep(10000);
    }
}

zf_status_t zf_cluster_stop(zf_cluster_t **c_p, int grace_ms)
{
    if (!c_p || !*c_p) return ZF_STATUS_OK;
    zf_cluster_t *c = *c_p;
    for (int i = c->n - 1; i >= 0; i--) /* scheduler first, broker last */
        if (c->procs[i].pid > 0) kill(c->procs[i].pid, SIGTERM);
    s_reap_until(c, s_now_ms() + (grace_ms > 0 ? grace_ms : 0));
    zf_status_t s = ZF_STATUS_OK;
    for (int i = 0; i < c->n; i++) {
        s_proc_t *p = &c->procs[i];
        if (p->pid > 0) {
            kill(p->pid, SIGKILL);
            while (waitpid(p->pid, &p->status, 0) < 0 && errno == EINTR) {
            }
            p->pid = 0;
            if (zf_ok(s))
                s = zf_status_new(ZF_UNKNOWN, "%s did not stop within %d ms; killed", p->what,
                                  grace_ms);
        } else if (zf_ok(s) && !(WIFEXITED(p->status) && WEXITSTATUS(p->status) == 0)) {
            s = zf_status_new(ZF_UNKNOWN, "%s exited with status %d", p->what,
                              WIFEXITED(p->status) ? WEXITSTATUS(p->status)
                                                   : 128 + WTERMSIG(p->status));
        }
        if (p->out_fd >= 0) close(p->out_fd);
        s_argv_free(p->argv);
    }
    s_remove_keys(c);
    free(c->procs);
    free(c);
    *c_p = NULL;
    return s;
}

void zf_cluster_destroy(zf_cluster_t **c_p)
{
    zf_status_t s = zf_cluster_stop(c_p, 5000);
    zf_status_clear(&s);
}
