/* Failures across real hosts: three network namespaces joined by a bridge
 * in a fourth stand for three machines on a private subnet. Host A runs
 * zflow-broker and zflow-scheduler, hosts B and C a zflow-executor each,
 * every process bound to its host's own address; jobs (`zflow run`) and a
 * session's steps run from clients on host A. Cutting C's link fails a
 * step that needs C with UNAVAILABLE once the broker misses C's
 * heartbeats (a job in flight then ends saying so), a job on B alone still
 * runs, healing the link brings C back, and 100 ms of delay on every link
 * (netem, or a delaying hub where the kernel has no netem) changes no
 * result. Without root, ip(8) and tc(8), or when `ip netns add` fails,
 * every test skips and the program exits 77, which CTest reports as
 * skipped. */
#define _GNU_SOURCE /* vasprintf */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>
#include <linux/if_packet.h>
#include <net/ethernet.h>
#include <net/if.h>
#include <poll.h>
#include <sched.h>
#include <sys/socket.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cmocka.h>

#include "common/graphdef_io.h"
#include "common/tensor.h"
#include "service_test_util.h"

#define ZFLOW            ZF_BIN_DIR "/zflow"
#define BROKER           ZF_BIN_DIR "/zflow-broker"
#define WAIT_MS          60000 /* the test's own limit on every wait */
#define HEARTBEAT_MS     "300"
#define HEARTBEAT_MISSES "6" /* dead after 1.8 s without a heartbeat */
#define DEV_B            "/job:worker/replica:0/task:1/device:CPU:0"
#define DEV_C            "/job:worker/replica:0/task:2/device:CPU:0"
#define FEED             "x=[1.5,-2,3,0.25]"
#define SKIP_EXIT_CODE   77 /* CTest's SKIP_RETURN_CODE for this test */

enum { HOST_A, HOST_B, HOST_C, HOST_NET, N_NS };
static const char s_host_letter[N_NS] = {'a', 'b', 'c', 'n'};
static const float s_x[] = {1.5f, -2.0f, 3.0f, 0.25f}; /* FEED */
#define N_X ((int)(sizeof s_x / sizeof s_x[0]))

/* The three hosts and what runs on them. */
typedef struct {
    char ns[N_NS][32]; /* zfh<pid>-a, -b, -c and the bridge's -n */
    bool made[N_NS];
    char ip[3][16];           /* 10.231.S.1 .. 3 */
    char ip_tool[32];         /* ip(8) */
    char tc_tool[32];         /* tc(8) */
    char *dir;                /* graphs and the processes' logs */
    char log[4][300];         /* stderr of broker, scheduler, executor B, C */
    char span[300];           /* x on B, x*x on C, -(x*x) on B */
    char on_b[300];           /* the same chain on B alone */
    char endpoint[64];        /* the broker's */
    zf_test_child_t procs[4]; /* broker, scheduler, executors B and C */
    const char *skip;         /* why every test skips, or NULL */
    char skip_why[512];
    bool started;
    pid_t hub; /* the delaying hub, 0 when none */
    int skipped;
} s_hosts_t;

enum { P_BROKER, P_SCHEDULER, P_EXEC_B, P_EXEC_C };

static s_hosts_t s_h;
static int s_teardown_failures; /* cmocka's result leaves a group teardown's out */

/* ---- the hosts' network ------------------------------------------------------- */

/* The first of paths that exists, copied into out; false when none. */
static bool s_find_tool(const char *const *paths, char *out, size_t size)
{
    for (int i = 0; paths[i]; i++)
        if (access(paths[i], X_OK) == 0) {
            snprintf(out, size, "%s", paths[i]);
            return true;
        }
    return false;
}

/* Runs "tool args" (args printf-formatted), its output into out; returns
 * its exit code. */
static int s_tool(const char *tool, char *out, size_t size, const char *fmt, ...)
{
    char *args = NULL;
    va_list ap;
    va_start(ap, fmt);
    int n = vasprintf(&args, fmt, ap);
    va_end(ap);
    assert_true(n >= 0);
    int rc = zf_test_run_program(tool, args, out, size);
    free(args);
    return rc;
}

/* Removes namespaces that runs of this test killed before their teardown
 * left behind (zfh<pid>-*, that pid gone). */
static void s_remove_stale_namespaces(void)
{
    static char list[16384];
    if (s_tool(s_h.ip_tool, list, sizeof list, "netns list") != 0) return;
    char *save = NULL;
    for (char *line = strtok_r(list, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        char name[64];
        long pid = 0;
        if (sscanf(line, "%63s", name) != 1 || sscanf(name, "zfh%ld-", &pid) != 1) continue;
        if (pid <= 0 || pid == (long)getpid() || kill((pid_t)pid, 0) == 0 || errno != ESRCH)
            continue;
        char out[256];
        s_tool(s_h.ip_tool, out, sizeof out, "netns del %s", name);
    }
}

/* Makes the namespaces, the bridge, a veth pair per host and the
 * addresses. NULL, or why it could not (then nothing is left). */
static const char *s_make_network(void)
{
    static char out[1024];
    int sub = 1 + (int)(getpid() % 250);
    for (int h = 0; h < N_NS; h++)
        snprintf(s_h.ns[h], sizeof s_h.ns[h], "zfh%ld-%c", (long)getpid(), s_host_letter[h]);
    for (int h = 0; h < 3; h++) snprintf(s_h.ip[h], sizeof s_h.ip[h], "10.231.%d.%d", sub, h + 1);
    for (int h = 0; h < N_NS; h++) {
        if (s_tool(s_h.ip_tool, out, sizeof out, "netns add %s", s_h.ns[h]) != 0) {
            snprintf(s_h.skip_why, sizeof s_h.skip_why, "`ip netns add %s` failed: %.300s",
                     s_h.ns[h], out);
            return s_h.skip_why;
        }
        s_h.made[h] = true;
    }
    const char *net = s_h.ns[HOST_NET];
    int rc = s_tool(s_h.ip_tool, out, sizeof out,
                    "-n %s link add br0 type bridge && %s -n %s link set br0 up && %s -n %s link "
                    "set lo up",
                    net, s_h.ip_tool, net, s_h.ip_tool, net);
    /* Each host's eth0 is one end of a veth pair; the other end, p<host>,
     * is a port of the bridge. Nothing is added to the caller's namespace. */
    for (int h = 0; rc == 0 && h < 3; h++) {
        const char *ns = s_h.ns[h], *ip = s_h.ip_tool;
        char c = s_host_letter[h];
        rc = s_tool(ip, out, sizeof out,
                    "-n %s link add p%c type veth peer name eth0 netns %s && "
                    "%s -n %s link set p%c master br0 up && "
                    "%s -n %s addr add %s/24 dev eth0 && %s -n %s link set eth0 up && "
                    "%s -n %s link set lo up",
                    net, c, ns, ip, net, c, ip, ns, s_h.ip[h], ip, ns, ip, ns);
    }
    if (rc != 0) {
        snprintf(s_h.skip_why, sizeof s_h.skip_why, "cannot make the hosts' network: %.300s", out);
        return s_h.skip_why;
    }
    return NULL;
}

/* Deletes the namespaces this run made (the processes in them are gone). */
static void s_remove_network(void)
{
    char out[512];
    for (int h = 0; h < N_NS; h++)
        if (s_h.made[h] && s_tool(s_h.ip_tool, out, sizeof out, "netns del %s", s_h.ns[h]) == 0)
            s_h.made[h] = false;
}

/* Sets host h's link (its eth0) up or down. */
static void s_link(int h, bool up)
{
    char out[512];
    int rc = s_tool(s_h.ip_tool, out, sizeof out, "-n %s link set eth0 %s", s_h.ns[h],
                    up ? "up" : "down");
    if (rc != 0) fail_msg("setting %s's link %s: %s", s_h.ns[h], up ? "up" : "down", out);
}

/* ---- processes on the hosts ------------------------------------------------- */

/* Starts tail (NULL-terminated) in host h's namespace with stderr appended
 * to log, killed when this test dies; fails the test unless its first
 * stdout line, kept in c->line, comes within wait_ms. */
static void s_spawn_on(zf_test_child_t *c, int h, const char *log, const char *const *tail,
                       int wait_ms)
{
    const char *argv[40] = {s_h.ip_tool, "netns", "exec", s_h.ns[h]};
    int argc = 4;
    for (int i = 0; tail[i] && argc < 39; i++) argv[argc++] = tail[i];
    int fds[2];
    assert_int_equal(pipe(fds), 0);
    int err = open(log, O_WRONLY | O_CREAT | O_APPEND, 0600);
    assert_true(err >= 0);
    c->pid = fork();
    assert_true(c->pid >= 0);
    if (c->pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL); /* a killed test leaves no process behind */
        dup2(fds[1], STDOUT_FILENO);
        dup2(err, STDERR_FILENO);
        close(fds[0]);
        close(fds[1]);
        execv(argv[0], (char *const *)argv);
        _exit(127);
    }
    close(fds[1]);
    close(err);
    bool got = zf_test_read_line(fds[0], c->line, sizeof c->line, wait_ms);
    close(fds[0]);
    if (!got) {
        kill(c->pid, SIGKILL);
        waitpid(c->pid, NULL, 0);
        c->pid = 0;
        fail_msg("%s on %s printed nothing within %d ms (log %s)", tail[0], s_h.ns[h], wait_ms,
                 log);
    }
}

/* How many times text occurs in file path. */
static int s_count_in_file(const char *path, const char *text)
{
    static char buf[1 << 20];
    FILE *f = fopen(path, "r");
    if (!f) return 0;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    int count = 0;
    for (const char *p = strstr(buf, text); p; p = strstr(p + 1, text)) count++;
    return count;
}

/* Waits until text occurs in path more than `more_than` times. Milliseconds
 * it took, or -1 when it did not within WAIT_MS. */
static int64_t s_wait_in_file(const char *path, const char *text, int more_than)
{
    int64_t start = zf_test_now_ms();
    while (zf_test_now_ms() - start < WAIT_MS) {
        if (s_count_in_file(path, text) > more_than) return zf_test_now_ms() - start;
        usleep(20000);
    }
    return -1;
}

/* The chain x -> x*x -> -(x*x) on devices b, c, b, as a pbtxt file. */
static void s_write_chain(char *path, size_t size, const char *name, const char *b, const char *c)
{
    snprintf(path, size, "%s/%s.pbtxt", s_h.dir, name);
    const char *devices[] = {b, c, b};
    Tensorflow__GraphDef *gd = zf_test_neg_chain(devices, 3);
    ASSERT_OK(zf_graphdef_write_file(gd, path, ZF_FORMAT_PBTXT));
    zf_graphdef_free(&gd);
}

/* Starts the broker and the scheduler on A and the executors on B and C,
 * each bound to its host's address. */
static void s_start_processes(void)
{
    int wait = WAIT_MS;
    char listen[64], sched_listen[64], control[2][64];
    snprintf(listen, sizeof listen, "tcp://%s:0", s_h.ip[HOST_A]);
    const char *broker[] = {BROKER,       "--listen",           listen,
                            "--state",    ":memory:",           "--heartbeat-ms",
                            HEARTBEAT_MS, "--heartbeat-misses", HEARTBEAT_MISSES,
                            NULL};
    s_spawn_on(&s_h.procs[P_BROKER], HOST_A, s_h.log[P_BROKER], broker, wait);
    const char *prefix = "zflow-broker listening on ";
    assert_memory_equal(s_h.procs[P_BROKER].line, prefix, strlen(prefix));
    const char *ep = s_h.procs[P_BROKER].line + strlen(prefix);
    assert_true(strlen(ep) < sizeof s_h.endpoint);
    memcpy(s_h.endpoint, ep, strlen(ep) + 1);
    for (int k = 0; k < 2; k++) {
        const char *task = k == 0 ? "1" : "2";
        snprintf(control[k], sizeof control[k], "tcp://%s:*", s_h.ip[HOST_B + k]);
        const char *exec[] = {
            ZF_TEST_EXECUTOR, "--broker",     s_h.endpoint, "--device",  "CPU:0", "--job",
            "worker",         "--task",       task,         "--threads", "1",     "--control",
            control[k],       "--rendezvous", control[k],   NULL};
        s_spawn_on(&s_h.procs[P_EXEC_B + k], HOST_B + k, s_h.log[P_EXEC_B + k], exec, wait);
    }
    snprintf(sched_listen, sizeof sched_listen, "tcp://%s:*", s_h.ip[HOST_A]);
    const char *sched[] = {ZF_TEST_SCHEDULER, "--broker",   s_h.endpoint,
                           "--listen",        sched_listen, NULL};
    s_spawn_on(&s_h.procs[P_SCHEDULER], HOST_A, s_h.log[P_SCHEDULER], sched, wait);
    assert_non_null(strstr(s_h.procs[P_SCHEDULER].line, "zflow-scheduler connected to"));
}

/* The hosts with everything running, or skips the test saying why. */
static void s_hosts_or_skip(void)
{
    if (s_h.skip) {
        print_message("skipped: %s\n", s_h.skip);
        s_h.skipped++;
        skip();
    }
    if (s_h.started) return;
    s_h.started = true; /* once, even when starting fails the test */
    s_write_chain(s_h.span, sizeof s_h.span, "span", DEV_B, DEV_C);
    s_write_chain(s_h.on_b, sizeof s_h.on_b, "on_b", DEV_B, DEV_B);
    s_start_processes();
}

/* ---- the client on host A ---------------------------------------------------- */

/* A job in flight from host A: the zflow run process and its pipes. */
typedef struct {
    pid_t pid;
    int out, err;
} s_job_t;

/* Starts `zflow run GRAPH --broker <A> --feed FEED --fetch z [--steps
 * steps]` in host A's namespace. */
static s_job_t s_start_job(const char *graph, const char *steps)
{
    const char *argv[] = {s_h.ip_tool,  "netns",
                          "exec",       s_h.ns[HOST_A],
                          ZFLOW,        "run",
                          graph,        "--broker",
                          s_h.endpoint, "--feed",
                          FEED,         "--fetch",
                          "z",          steps ? "--steps" : NULL,
                          steps,        NULL};
    s_job_t j = {0, -1, -1};
    j.pid = zf_test_spawn_piped(argv, &j.out, &j.err);
    return j;
}

/* Waits for job's end: stdout into out, stderr into err. Its exit code. */
static int s_finish_job(s_job_t *job, char *out, size_t out_size, char *err, size_t err_size)
{
    int64_t deadline = zf_test_now_ms() + WAIT_MS;
    zf_test_drain(job->out, out, out_size, deadline); /* stderr is small: its pipe holds it */
    zf_test_drain(job->err, err, err_size, deadline);
    close(job->out);
    close(job->err);
    return zf_test_reap(job->pid, deadline);
}

/* Runs a job (as s_start_job) to its end. Its exit code. */
static int s_run_job(const char *graph, const char *steps, char *out, size_t out_size, char *err,
                     size_t err_size)
{
    s_job_t job = s_start_job(graph, steps);
    return s_finish_job(&job, out, out_size, err, err_size);
}

/* Checks `zflow run`'s output is "z =" and -(x*x) for every x of FEED,
 * computed here. */
static void s_expect_chain_values(const char *out)
{
    const char *head = "z =\n";
    if (strncmp(out, head, strlen(head)) != 0) fail_msg("unexpected output: %s", out);
    const char *p = out + strlen(head);
    for (int i = 0; i < N_X; i++) {
        while (*p == '[' || *p == ' ' || *p == '\n') p++;
        char *end = NULL;
        float got = strtof(p, &end);
        if (end == p) fail_msg("value %d missing in: %s", i, out);
        float want = -(s_x[i] * s_x[i]);
        if (fabsf(got - want) > 1e-6f) fail_msg("z[%d] = %g, want %g in: %s", i, got, want, out);
        p = end;
    }
    while (*p == ']' || *p == ' ' || *p == '\n') p++;
    assert_string_equal(p, "");
}

/* Runs the spanning job and checks its values. */
static void s_expect_span_runs(void)
{
    static char out[4096], err[8192];
    int rc = s_run_job(s_h.span, NULL, out, sizeof out, err, sizeof err);
    if (rc != 0) fail_msg("the spanning job exited %d: %s", rc, err);
    s_expect_chain_values(out);
}

/* ---- tests ----------------------------------------------------------------- */

/* Every TCP socket listening in host h's namespace is on h's address;
 * returns how many there are. */
static int s_listeners_on_own_address(int h)
{
    static char out[65536];
    int rc = s_tool(s_h.ip_tool, out, sizeof out, "netns exec %s cat /proc/net/tcp /proc/net/tcp6",
                    s_h.ns[h]);
    assert_int_equal(rc, 0);
    unsigned a, b, c, d;
    assert_int_equal(sscanf(s_h.ip[h], "%u.%u.%u.%u", &a, &b, &c, &d), 4);
    char want[16]; /* /proc/net/tcp prints the address as a host-order word */
    snprintf(want, sizeof want, "%02X%02X%02X%02X", d, c, b, a);
    int n = 0;
    char *save = NULL;
    for (char *line = strtok_r(out, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        char local[64], remote[64], st[8];
        if (sscanf(line, "%*s %63s %63s %7s", local, remote, st) != 3 || strcmp(st, "0A") != 0)
            continue; /* the header, or not listening */
        n++;
        if (strncmp(local, want, 8) != 0 || local[8] != ':')
            fail_msg("%s has a listener on %s, not on %s (%s)", s_h.ns[h], local, s_h.ip[h], want);
    }
    return n;
}

/* The processes run on their hosts, each bound to its host's address
 * only, and the executors are the tasks the graphs name. */
static void test_hosts_bind_every_process_to_its_host_address(void **state)
{
    (void)state;
    s_hosts_or_skip();
    char want[128];
    for (int k = 0; k < 2; k++) {
        const char *line = s_h.procs[P_EXEC_B + k].line;
        snprintf(want, sizeof want, "zflow-executor %s control tcp://%s:", k ? DEV_C : DEV_B,
                 s_h.ip[HOST_B + k]);
        if (strncmp(line, want, strlen(want)) != 0) fail_msg("executor said: %s", line);
        snprintf(want, sizeof want, " rendezvous tcp://%s:", s_h.ip[HOST_B + k]);
        assert_non_null(strstr(line, want));
    }
    snprintf(want, sizeof want, "tcp://%s:", s_h.ip[HOST_A]);
    assert_memory_equal(s_h.endpoint, want, strlen(want));
    /* the broker and the scheduler's client endpoint; control and
     * rendezvous on each executor's host */
    assert_int_equal(s_listeners_on_own_address(HOST_A), 2);
    assert_int_equal(s_listeners_on_own_address(HOST_B), 2);
    assert_int_equal(s_listeners_on_own_address(HOST_C), 2);
}

static void test_hosts_run_a_job_spanning_two_executors(void **state)
{
    (void)state;
    s_hosts_or_skip();
    s_expect_span_runs();
}

/* The client of the cut test, in a child process that joins host A's
 * namespace: a session of the spanning chain whose step it runs until one
 * fails, checking every result against -(x*x). Writes "running" to fd
 * after the first good step, then "<CODE>\t<message>" of the step that
 * failed ("WRONG" for a wrong result). Never returns. */
static void s_stepping_client(int fd)
{
    char path[128];
    snprintf(path, sizeof path, "/var/run/netns/%s", s_h.ns[HOST_A]);
    int ns = open(path, O_RDONLY | O_CLOEXEC);
    if (ns < 0 || setns(ns, CLONE_NEWNET) != 0) {
        dprintf(fd, "SETNS\t%s: %s\n", path, strerror(errno));
        _exit(1);
    }
    close(ns);
    const char *devices[] = {DEV_B, DEV_C, DEV_B};
    Tensorflow__GraphDef *gd = zf_test_neg_chain(devices, 3);
    zf_client_t *c = NULL;
    char *session = NULL;
    zf_tensor_t *x = NULL;
    zf_shape_t shape = {.rank = 1, .dims = {N_X}};
    zf_status_t s = zf_tensor_new_from_bytes(ZF_FLOAT, &shape, s_x, sizeof s_x, &x);
    if (zf_ok(s)) s = zf_client_connect(s_h.endpoint, &c);
    if (zf_ok(s)) zf_client_set_timeout(c, WAIT_MS);
    zf_client_session_options_t opts = ZF_CLIENT_SESSION_OPTIONS_DEFAULT;
    if (zf_ok(s)) s = zf_client_session_create(c, gd, &opts, &session);
    const char *feeds[] = {"x"}, *fetches[] = {"z"};
    zf_client_step_t step = {feeds, &x, 1, fetches, 1, NULL, 0};
    bool wrong = false;
    for (int64_t k = 0, end = zf_test_now_ms() + WAIT_MS; zf_ok(s) && zf_test_now_ms() < end; k++) {
        zf_tensor_t *z = NULL;
        s = zf_client_session_run(c, session, &step, WAIT_MS, &z);
        if (!zf_ok(s)) break;
        const float *got = zf_tensor_data(z);
        for (int i = 0; i < N_X; i++) wrong = wrong || got[i] != -(s_x[i] * s_x[i]);
        zf_tensor_unref(&z);
        if (wrong) break;
        if (k == 0) dprintf(fd, "running\n");
    }
    if (wrong)
        dprintf(fd, "WRONG\ta step's result is not -(x*x)\n");
    else
        dprintf(fd, "%s\t%s\n", zf_code_name(s.code),
                zf_ok(s) ? "no step failed" : zf_status_msg(&s));
    zf_status_clear(&s);
    free(session);
    zf_tensor_unref(&x);
    zf_client_destroy(&c);
    zf_graphdef_free(&gd);
    _exit(0);
}

/* C's link goes down while a session's steps span B and C: a step fails
 * UNAVAILABLE naming C's device once the broker has missed C's heartbeats;
 * meanwhile a job on B alone runs and a new job needing C cannot be placed;
 * with the link up again C registers again and the spanning job runs. */
static void test_hosts_a_cut_off_host_fails_its_steps_and_comes_back(void **state)
{
    (void)state;
    s_hosts_or_skip();
    const char *c_log = s_h.log[P_EXEC_C];
    int registered_before = s_count_in_file(c_log, "registered with ");
    char joined[128];
    snprintf(joined, sizeof joined, "executor %s joined", DEV_C);
    int joined_before = s_count_in_file(s_h.log[P_SCHEDULER], joined);

    /* a many-step job across B and C, whose steps run once C has its
     * partition, and a session's steps from a client on A */
    int graphs_before = s_count_in_file(c_log, "registered graph");
    s_job_t job = s_start_job(s_h.span, "1000000");
    int64_t job_ran = s_wait_in_file(c_log, "registered graph", graphs_before);
    int fds[2];
    assert_int_equal(pipe(fds), 0);
    pid_t client = fork();
    assert_true(client >= 0);
    if (client == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        close(fds[0]);
        s_stepping_client(fds[1]);
    }
    close(fds[1]);
    char running[256] = "", failed[2048] = "";
    bool ran = zf_test_read_line(fds[0], running, sizeof running, WAIT_MS);
    int64_t cut_at = zf_test_now_ms();
    if (ran) s_link(HOST_C, false);
    bool answered = ran && zf_test_read_line(fds[0], failed, sizeof failed, WAIT_MS);
    int64_t failed_after = zf_test_now_ms() - cut_at;
    close(fds[0]);
    if (!answered) kill(client, SIGKILL);
    int rc = zf_test_reap(client, zf_test_now_ms() + WAIT_MS);
    if (!ran) fail_msg("the client's first step: %s", running);
    print_message("a step needing the cut-off host failed %lld ms after its link went down "
                  "(heartbeat %s ms x %s misses)\n",
                  (long long)failed_after, HEARTBEAT_MS, HEARTBEAT_MISSES);
    assert_true(answered);
    assert_int_equal(rc, 0);
    if (strncmp(failed, "UNAVAILABLE\t", 12) != 0 || !strstr(failed, DEV_C))
        fail_msg("want UNAVAILABLE naming %s, got: %s", DEV_C, failed);
    assert_non_null(strstr(failed, "died: no heartbeat for"));
    assert_true(failed_after < WAIT_MS / 2);
    /* The job's step failed the same way; the broker ran the job again,
     * which no longer finds C's device, and the error says both. */
    static char out[4096], err[8192];
    rc = s_finish_job(&job, out, sizeof out, err, sizeof err);
    assert_true(job_ran >= 0);
    assert_int_equal(rc, 1);
    assert_string_equal(out, "");
    if (!strstr(err, "zflow run: INVALID_ARGUMENT: ") ||
        !strstr(err, "no devices matching that specification are registered") ||
        !strstr(err, " (run again after attempt 1 failed: step ") ||
        !strstr(err, "of 1000000: executor " DEV_C " died: no heartbeat for "))
        fail_msg("the job in flight: %s", err);

    /* B alone still serves; a new job needing C finds no such device */
    rc = s_run_job(s_h.on_b, NULL, out, sizeof out, err, sizeof err);
    if (rc != 0) fail_msg("the job on B exited %d: %s", rc, err);
    s_expect_chain_values(out);
    rc = s_run_job(s_h.span, NULL, out, sizeof out, err, sizeof err);
    assert_int_equal(rc, 1);
    if (!strstr(err, "zflow run: INVALID_ARGUMENT: ") || !strstr(err, DEV_C) ||
        !strstr(err, "no devices matching that specification are registered"))
        fail_msg("want INVALID_ARGUMENT naming %s, got: %s", DEV_C, err);

    int64_t healed_at = zf_test_now_ms();
    s_link(HOST_C, true);
    int64_t back = s_wait_in_file(s_h.log[P_SCHEDULER], joined, joined_before);
    print_message("the cut-off host's executor was back at the scheduler %lld ms after its link "
                  "came up\n",
                  (long long)(back >= 0 ? zf_test_now_ms() - healed_at : -1));
    assert_true(back >= 0);
    assert_true(s_count_in_file(c_log, "registered with ") > registered_before);
    assert_true(s_count_in_file(c_log, "the broker forgot") > 0); /* its heartbeats: NOT_FOUND */
    s_expect_span_runs();
}

/* ---- delay ---------------------------------------------------------------------- */

#define DELAY_MS   100
#define HUB_FRAMES 8192 /* frames in flight through the hub, at most */

/* One frame held by the hub until it is due. */
typedef struct {
    int64_t due;
    int from;
    ssize_t len;
    unsigned char *data;
} s_frame_t;

/* The hub that stands in for netem where the kernel has none: in the
 * bridge's namespace, with the ports taken off the bridge, it reads every
 * frame arriving at port p<host> and sends it out of the other two ports
 * DELAY_MS later, as a hub whose links each delay a frame by that much.
 * The sockets carry virtio-net headers so that segmentation offloads pass
 * through as they came. Never returns. */
static void s_delaying_hub(void)
{
    char path[128];
    snprintf(path, sizeof path, "/var/run/netns/%s", s_h.ns[HOST_NET]);
    int ns = open(path, O_RDONLY | O_CLOEXEC);
    if (ns < 0 || setns(ns, CLONE_NEWNET) != 0) _exit(1);
    struct pollfd pfd[3];
    for (int h = 0; h < 3; h++) {
        char port[8];
        snprintf(port, sizeof port, "p%c", s_host_letter[h]);
        int fd = socket(AF_PACKET, SOCK_RAW, htons(ETH_P_ALL)), one = 1;
        struct sockaddr_ll at = {.sll_family = AF_PACKET,
                                 .sll_protocol = htons(ETH_P_ALL),
                                 .sll_ifindex = (int)if_nametoindex(port)};
        if (fd < 0 || at.sll_ifindex == 0 ||
            setsockopt(fd, SOL_PACKET, PACKET_VNET_HDR, &one, sizeof one) != 0 ||
            bind(fd, (struct sockaddr *)&at, sizeof at) != 0)
            _exit(2);
        pfd[h] = (struct pollfd){.fd = fd, .events = POLLIN};
    }
    static s_frame_t q[HUB_FRAMES]; /* a ring: every frame waits as long */
    static unsigned char buf[65536 + 64];
    size_t head = 0, n = 0;
    for (;;) {
        int64_t now = zf_test_now_ms();
        int wait = n ? (int)(q[head].due > now ? q[head].due - now : 0) : -1;
        if (poll(pfd, 3, wait) < 0 && errno != EINTR) _exit(3);
        for (int h = 0; h < 3; h++) {
            if (!(pfd[h].revents & POLLIN)) continue;
            struct sockaddr_ll from;
            socklen_t len = sizeof from;
            ssize_t got =
                recvfrom(pfd[h].fd, buf, sizeof buf, MSG_DONTWAIT, (struct sockaddr *)&from, &len);
            if (got <= 0 || from.sll_pkttype == PACKET_OUTGOING || n == HUB_FRAMES) continue;
            s_frame_t *f = &q[(head + n) % HUB_FRAMES];
            if (!(f->data = malloc((size_t)got))) continue; /* dropped, as a full link would */
            memcpy(f->data, buf, (size_t)got);
            *f = (s_frame_t){zf_test_now_ms() + DELAY_MS, h, got, f->data};
            n++;
        }
        for (now = zf_test_now_ms(); n && q[head].due <= now; n--) {
            for (int h = 0; h < 3; h++)
                if (h != q[head].from) (void)send(pfd[h].fd, q[head].data, (size_t)q[head].len, 0);
            free(q[head].data);
            head = (head + 1) % HUB_FRAMES;
        }
    }
}

/* Delays every frame between the hosts by DELAY_MS: netem on each host's
 * link, or where the kernel has no netem the hub above. Says which. */
static void s_add_delay(void)
{
    char out[1024];
    int rc = s_tool(s_h.tc_tool, out, sizeof out, "-n %s qdisc add dev eth0 root netem delay %dms",
                    s_h.ns[HOST_A], DELAY_MS);
    if (rc == 0) {
        for (int h = HOST_B; h <= HOST_C; h++) {
            rc = s_tool(s_h.tc_tool, out, sizeof out,
                        "-n %s qdisc add dev eth0 root netem delay %dms", s_h.ns[h], DELAY_MS);
            if (rc != 0) fail_msg("tc netem on %s: %s", s_h.ns[h], out);
        }
        for (int h = 0; h < 3; h++) {
            rc = s_tool(s_h.tc_tool, out, sizeof out, "-n %s qdisc show dev eth0", s_h.ns[h]);
            assert_int_equal(rc, 0);
            if (!strstr(out, "netem") || !strstr(out, "delay 100ms")) fail_msg("qdisc: %s", out);
        }
        print_message("delay: netem %d ms on each host's link\n", DELAY_MS);
        return;
    }
    if (!strstr(out, "qdisc kind is unknown")) fail_msg("tc netem on %s: %s", s_h.ns[HOST_A], out);
    out[strcspn(out, "\n")] = '\0';
    print_message("delay: the kernel has no netem qdisc (CONFIG_NET_SCH_NETEM; tc said: %.200s); "
                  "a hub in the bridge's namespace delays each frame %d ms instead\n",
                  out, DELAY_MS);
    for (int h = 0; h < 3; h++) {
        rc = s_tool(s_h.ip_tool, out, sizeof out, "-n %s link set p%c nomaster promisc on",
                    s_h.ns[HOST_NET], s_host_letter[h]);
        if (rc != 0) fail_msg("taking p%c off the bridge: %s", s_host_letter[h], out);
    }
    s_h.hub = fork();
    assert_true(s_h.hub >= 0);
    if (s_h.hub == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        s_delaying_hub();
    }
}

/* The spanning job's wall time in ms, its values checked. */
static int64_t s_timed_span(void)
{
    int64_t start = zf_test_now_ms();
    s_expect_span_runs();
    return zf_test_now_ms() - start;
}

/* 100 ms of delay on every host's link changes no result (run as
 * `test_hosts_netns --delay`, its own CTest entry). */
static void test_hosts_delay_on_every_link_keeps_results_correct(void **state)
{
    (void)state;
    s_hosts_or_skip();
    int64_t plain = s_timed_span();
    s_add_delay();
    int64_t delayed = s_timed_span();
    static char err[8192], got[4096];
    int rc = s_run_job(s_h.span, "5", got, sizeof got, err, sizeof err);
    if (rc != 0) fail_msg("5 steps exited %d: %s", rc, err);
    s_expect_chain_values(got);
    print_message("the spanning job took %lld ms without delay, %lld ms with it\n",
                  (long long)plain, (long long)delayed);
}

/* ---- group fixture ------------------------------------------------------------- */

static int s_setup(void **state)
{
    (void)state;
    memset(&s_h, 0, sizeof s_h);
    const char *ips[] = {"/usr/sbin/ip", "/sbin/ip", "/usr/bin/ip", "/bin/ip", NULL};
    const char *tcs[] = {"/usr/sbin/tc", "/sbin/tc", "/usr/bin/tc", "/bin/tc", NULL};
    if (geteuid() != 0) {
        s_h.skip = "network namespaces need root";
    } else if (!s_find_tool(ips, s_h.ip_tool, sizeof s_h.ip_tool)) {
        s_h.skip = "no ip(8) (iproute2) installed";
    } else if (!s_find_tool(tcs, s_h.tc_tool, sizeof s_h.tc_tool)) {
        s_h.skip = "no tc(8) (iproute2) installed";
    } else {
        s_remove_stale_namespaces();
        s_h.skip = s_make_network();
    }
    if (s_h.skip) {
        s_remove_network();
        return 0;
    }
    s_h.dir = zf_test_tmpdir("zflow-hosts");
    static const char *const names[4] = {"broker", "scheduler", "executor-b", "executor-c"};
    for (int i = 0; i < 4; i++)
        snprintf(s_h.log[i], sizeof s_h.log[i], "%s/%s.log", s_h.dir, names[i]);
    return 0;
}

/* Prints the end of a process's log to stderr. */
static void s_print_log_tail(const char *path)
{
    static char buf[8192];
    FILE *f = fopen(path, "r");
    if (!f) return;
    if (fseek(f, -(long)(sizeof buf - 1), SEEK_END) != 0) rewind(f);
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    fprintf(stderr, "%s:\n%s\n", path, buf);
}

/* Stops every process and deletes the namespaces; fails when a process
 * did not exit 0 on SIGTERM (a sanitizer's report among the reasons; its
 * log is printed) or `ip netns list` still shows a namespace. */
static int s_teardown(void **state)
{
    (void)state;
    int left = 0;
    for (int i = 3; i >= 0; i--) {
        if (s_h.procs[i].pid <= 0) continue;
        int rc = zf_test_child_stop(&s_h.procs[i], SIGTERM, WAIT_MS / 6);
        if (rc == 0) continue;
        fprintf(stderr, "process %d exited %d on SIGTERM\n", i, rc);
        s_print_log_tail(s_h.log[i]);
        left++;
    }
    if (s_h.hub > 0) {
        kill(s_h.hub, SIGKILL);
        waitpid(s_h.hub, NULL, 0);
    }
    s_remove_network();
    if (!s_h.skip) {
        static char list[16384];
        s_tool(s_h.ip_tool, list, sizeof list, "netns list");
        for (int h = 0; h < N_NS; h++) {
            char name[40];
            snprintf(name, sizeof name, "%s ", s_h.ns[h]); /* "NAME (id: N)" or "NAME\n" */
            bool listed = strstr(list, name) != NULL;
            snprintf(name, sizeof name, "%s\n", s_h.ns[h]);
            listed = listed || strstr(list, name) != NULL;
            if (listed) {
                fprintf(stderr, "namespace %s was left behind\n", s_h.ns[h]);
                left++;
            }
        }
    }
    if (s_h.dir) {
        zf_test_rm_rf(s_h.dir);
        free(s_h.dir);
    }
    s_teardown_failures += left;
    return left ? -1 : 0;
}

/* Without arguments the hosts' failures; with --delay the delay case, a
 * CTest entry of its own. */
int main(int argc, char **argv)
{
    const struct CMUnitTest failures[] = {
        cmocka_unit_test(test_hosts_bind_every_process_to_its_host_address),
        cmocka_unit_test(test_hosts_run_a_job_spanning_two_executors),
        cmocka_unit_test(test_hosts_a_cut_off_host_fails_its_steps_and_comes_back),
    };
    const struct CMUnitTest delay[] = {
        cmocka_unit_test(test_hosts_delay_on_every_link_keeps_results_correct),
    };
    bool with_delay = argc > 1 && strcmp(argv[1], "--delay") == 0;
    int n = with_delay ? (int)(sizeof delay / sizeof delay[0])
                       : (int)(sizeof failures / sizeof failures[0]);
    int failed = with_delay
                     ? cmocka_run_group_tests_name("delay", delay, s_setup, s_teardown)
                     : cmocka_run_group_tests_name("failures", failures, s_setup, s_teardown);
    failed += s_teardown_failures;
    if (failed == 0 && s_h.skipped == n) {
        printf("all %d tests skipped: %s\n", n, s_h.skip);
        return SKIP_EXIT_CODE;
    }
    return failed;
}
