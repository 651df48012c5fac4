/* Small-step latency through the whole service: a client's RunStep goes
 * client -> scheduler -> two executors (one scalar crossing between them)
 * and back, straight to the scheduler's client endpoint (the default
 * path), and also through the broker (client -> broker -> scheduler ...). Median over
 * ZFLOW_BENCH_REPS runs (default 2000), as a ratio to a raw ZeroMQ REQ/REP round trip over tcp
 * loopback measured in the same run (target: <= 3x), between two threads of this process and
 * also between two processes (what each hop of a step is), and over the same messages relayed
 * by raw ZeroMQ processes (the least a step can cost with this design). Starts zflow-broker, two
 * zflow-executor and zflow-scheduler from the bin directory next to this program's (build/bin), or
 * ZFLOW_BIN_DIR. Then the same cluster again with CurveZMQ keys (a fresh key directory): the
 * direct step's median with CURVE against the plain one (target <= 1.2x). Also the direct
 * step with RunOptions' FULL_TRACE (every kernel run recorded and returned) against the plain
 * one (target <= 1.2x).
 */
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include <zmq.h>

#include "bench/bench_util.h"
#include "common/graphdef_io.h"
#include "common/keys.h"
#include "common/tensor_proto.h"
#include "common/transport.h"

#define CPU(k) "/job:localhost/replica:0/task:0/device:CPU:" #k

static char s_bin[PATH_MAX];
static pid_t s_pids[4];
static int s_n_pids;

/* Starts bin/name with args and returns its first stdout line in line. */
static bool s_spawn(const char *name, const char *const *args, char *line, size_t size)
{
    char path[PATH_MAX + 64];
    snprintf(path, sizeof path, "%s/%s", s_bin, name);
    const char *argv[16] = {path};
    int argc = 1;
    for (int i = 0; args[i] && argc < 15; i++) argv[argc++] = args[i];
    int fds[2];
    if (pipe(fds) != 0) return false;
    pid_t pid = fork();
    if (pid == 0) {
        dup2(fds[1], STDOUT_FILENO);
        if (!freopen("/dev/null", "w", stderr)) _exit(126);
        close(fds[0]);
        close(fds[1]);
        execv(path, (char *const *)argv);
        _exit(127);
    }
    close(fds[1]);
    s_pids[s_n_pids++] = pid;
    FILE *f = fdopen(fds[0], "r");
    bool ok = f && fgets(line, (int)size, f);
    if (f) fclose(f);
    if (ok) line[strcspn(line, "\n")] = '\0';
    return ok;
}

static void s_stop_all(void)
{
    for (int i = s_n_pids - 1; i >= 0; i--) {
        kill(s_pids[i], SIGTERM);
        waitpid(s_pids[i], NULL, 0);
    }
    s_n_pids = 0;
}

static int s_cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double s_median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, s_cmp_double);
    return v[n / 2];
}

/* ---- baseline: REQ/REP round trip ------------------------------------------ */

static void *s_echo(void *arg)
{
    void *rep = arg;
    char buf[64];
    for (;;) {
        int n = zmq_recv(rep, buf, sizeof buf, 0);
        if (n < 0) break;
        if (zmq_send(rep, buf, (size_t)n, 0) < 0) break;
    }
    return NULL;
}

static double s_reqrep_median(int reps)
{
    void *ctx = zmq_ctx_new();
    void *rep = zmq_socket(ctx, ZMQ_REP), *req = zmq_socket(ctx, ZMQ_REQ);
    char ep[128];
    size_t len = sizeof ep;
    zmq_bind(rep, "tcp://127.0.0.1:*");
    zmq_getsockopt(rep, ZMQ_LAST_ENDPOINT, ep, &len);
    zmq_connect(req, ep);
    pthread_t t;
    pthread_create(&t, NULL, s_echo, rep);
    double *v = malloc((size_t)reps * sizeof *v);
    char buf[64] = "ping";
    for (int i = 0; i < reps; i++) {
        double t0 = zf_bench_now();
        zmq_send(req, buf, 8, 0);
        zmq_recv(req, buf, sizeof buf, 0);
        v[i] = zf_bench_now() - t0;
    }
    double m = s_median(v, reps);
    free(v);
    int linger = 0;
    zmq_setsockopt(req, ZMQ_LINGER, &linger, sizeof linger);
    zmq_close(req);
    zmq_ctx_shutdown(ctx); /* wakes the echo thread with ETERM */
    pthread_join(t, NULL);
    zmq_setsockopt(rep, ZMQ_LINGER, &linger, sizeof linger);
    zmq_close(rep);
    zmq_ctx_term(ctx);
    return m;
}

/* The same round trip between two processes, as every hop of a step is:
 * each side then has its own ZeroMQ I/O thread to wake, where the
 * in-process pair above shares one. */
static double s_reqrep_process_median(int reps)
{
    int fds[2];
    if (pipe(fds) != 0) return -1;
    pid_t pid = fork();
    if (pid == 0) { /* the echo: binds, tells the port, answers until killed */
        close(fds[0]);
        void *cctx = zmq_ctx_new(), *rep = zmq_socket(cctx, ZMQ_REP);
        char ep[128];
        size_t len = sizeof ep;
        if (zmq_bind(rep, "tcp://127.0.0.1:*") != 0) _exit(1);
        zmq_getsockopt(rep, ZMQ_LAST_ENDPOINT, ep, &len);
        if (write(fds[1], ep, strlen(ep) + 1) < 0) _exit(1);
        close(fds[1]);
        s_echo(rep);
        _exit(0);
    }
    close(fds[1]);
    char ep[128] = "";
    ssize_t n = pid > 0 ? read(fds[0], ep, sizeof ep - 1) : -1;
    close(fds[0]);
    if (n <= 0) return -1;
    ep[n] = '\0';
    void *ctx = zmq_ctx_new(), *req = zmq_socket(ctx, ZMQ_REQ);
    zmq_connect(req, ep);
    double *v = malloc((size_t)reps * sizeof *v);
    char buf[64] = "ping";
    for (int i = -reps / 10; i < reps; i++) {
        double t0 = zf_bench_now();
        zmq_send(req, buf, 8, 0);
        zmq_recv(req, buf, sizeof buf, 0);
        if (i >= 0) v[i] = zf_bench_now() - t0;
    }
    double m = s_median(v, reps);
    free(v);
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    int linger = 0;
    zmq_setsockopt(req, ZMQ_LINGER, &linger, sizeof linger);
    zmq_close(req);
    zmq_ctx_term(ctx);
    return m;
}

/* ---- baseline: a step's messages, relayed by raw ZeroMQ processes ----------------- */

/* The messages of one step, between processes doing nothing else: the
 * client pushes to a "scheduler", which pushes to two "executors"; the first
 * pushes a scalar to the second and both answer the scheduler, which answers
 * the client when it has both. The critical path has the step's five hops
 * (client -> scheduler -> A -> B -> scheduler -> client), so this is the
 * least a step can cost with this design on this machine; the service's
 * figure over it is what zflow itself adds. PUSH/PULL over tcp loopback. */
enum { S_EP_SCHED, S_EP_A, S_EP_B, S_EP_B_RDV, S_EP_CLIENT, S_N_EP };
typedef char s_eps_t[S_N_EP][128];

static void *s_pull_bound(void *ctx, char *ep)
{
    void *s = zmq_socket(ctx, ZMQ_PULL);
    size_t len = 128;
    if (!s || zmq_bind(s, "tcp://127.0.0.1:*") != 0 ||
        zmq_getsockopt(s, ZMQ_LAST_ENDPOINT, ep, &len) != 0)
        _exit(1);
    return s;
}

static void *s_push_to(void *ctx, const char *ep)
{
    void *s = zmq_socket(ctx, ZMQ_PUSH);
    if (!s || zmq_connect(s, ep) != 0) _exit(1);
    return s;
}

/* One relay process: binds its PULL sockets, tells the parent their
 * endpoints through up, learns every endpoint through down, then relays
 * until killed. role: S_EP_SCHED, S_EP_A or S_EP_B. */
static void s_relay(int role, int up, int down)
{
    void *ctx = zmq_ctx_new();
    s_eps_t eps = {{0}};
    void *in = s_pull_bound(ctx, eps[role]), *rdv = NULL;
    if (role == S_EP_B) rdv = s_pull_bound(ctx, eps[S_EP_B_RDV]);
    if (write(up, eps, sizeof eps) != (ssize_t)sizeof eps ||
        read(down, eps, sizeof eps) != (ssize_t)sizeof eps)
        _exit(1);
    char buf[64];
    if (role == S_EP_SCHED) {
        void *a = s_push_to(ctx, eps[S_EP_A]), *b = s_push_to(ctx, eps[S_EP_B]);
        void *client = s_push_to(ctx, eps[S_EP_CLIENT]);
        int answers = 0;
        for (;;) { /* 'q': a client's step; 'r': an executor's answer */
            int n = zmq_recv(in, buf, sizeof buf, 0);
            if (n <= 0) break;
            if (buf[0] == 'q') {
                zmq_send(a, buf, (size_t)n, 0);
                zmq_send(b, buf, (size_t)n, 0);
            } else if (++answers == 2) {
                answers = 0;
                zmq_send(client, buf, (size_t)n, 0);
            }
        }
    } else if (role == S_EP_A) {
        void *b = s_push_to(ctx, eps[S_EP_B_RDV]), *sched = s_push_to(ctx, eps[S_EP_SCHED]);
        for (;;) {
            int n = zmq_recv(in, buf, sizeof buf, 0);
            if (n <= 0) break;
            zmq_send(b, buf, (size_t)n, 0); /* the scalar crossing */
            buf[0] = 'r';
            zmq_send(sched, buf, (size_t)n, 0);
        }
    } else {
        void *sched = s_push_to(ctx, eps[S_EP_SCHED]);
        zmq_pollitem_t items[2] = {{in, 0, ZMQ_POLLIN, 0}, {rdv, 0, ZMQ_POLLIN, 0}};
        int steps = 0, scalars = 0;
        while (zmq_poll(items, 2, -1) >= 0) {
            if (items[0].revents & ZMQ_POLLIN) steps += zmq_recv(in, buf, sizeof buf, 0) > 0;
            if (items[1].revents & ZMQ_POLLIN) scalars += zmq_recv(rdv, buf, sizeof buf, 0) > 0;
            for (; steps > 0 && scalars > 0; steps--, scalars--) {
                buf[0] = 'r';
                zmq_send(sched, buf, 8, 0);
            }
        }
    }
    _exit(0);
}

static double s_pattern_median(int reps)
{
    pid_t pids[3] = {0};
    int up[3][2] = {{-1, -1}, {-1, -1}, {-1, -1}}, down[3][2] = {{-1, -1}, {-1, -1}, {-1, -1}};
    bool ok = true;
    for (int i = 0; i < 3 && ok; i++) { /* before this process has a ZeroMQ context */
        ok = pipe(up[i]) == 0 && pipe(down[i]) == 0 && (pids[i] = fork()) >= 0;
        if (ok && pids[i] == 0)
            s_relay(i == 0 ? S_EP_SCHED : i == 1 ? S_EP_A : S_EP_B, up[i][1], down[i][0]);
        if (ok) { /* the child's ends: closed here, so a relay that dies is seen */
            close(up[i][1]);
            close(down[i][0]);
            up[i][1] = down[i][0] = -1;
        }
    }
    s_eps_t eps = {{0}};
    void *ctx = zmq_ctx_new();
    void *in = s_pull_bound(ctx, eps[S_EP_CLIENT]);
    int wait_ms = 10000;
    zmq_setsockopt(in, ZMQ_RCVTIMEO, &wait_ms, sizeof wait_ms);
    for (int i = 0; i < 3 && ok; i++) { /* gather the endpoints each relay bound */
        s_eps_t got;
        ok = read(up[i][0], got, sizeof got) == (ssize_t)sizeof got;
        for (int e = 0; ok && e < S_N_EP; e++)
            if (got[e][0]) memcpy(eps[e], got[e], sizeof eps[e]);
    }
    for (int i = 0; i < 3 && ok; i++)
        ok = write(down[i][1], eps, sizeof eps) == (ssize_t)sizeof eps;
    double m = -1;
    if (ok) {
        void *out = s_push_to(ctx, eps[S_EP_SCHED]);
        double *v = malloc((size_t)reps * sizeof *v);
        char buf[64] = "q-step";
        for (int i = -reps / 10; v && i < reps; i++) {
            double t0 = zf_bench_now();
            buf[0] = 'q';
            zmq_send(out, buf, 8, 0);
            if (zmq_recv(in, buf, sizeof buf, 0) < 0) break; /* a relay died */
            if (i >= 0) v[i] = zf_bench_now() - t0;
            if (i == reps - 1) m = s_median(v, reps);
        }
        free(v);
        int linger = 0;
        zmq_setsockopt(out, ZMQ_LINGER, &linger, sizeof linger);
        zmq_close(out);
    }
    for (int i = 0; i < 3; i++) {
        if (pids[i] > 0) {
            kill(pids[i], SIGKILL);
            waitpid(pids[i], NULL, 0);
        }
        for (int k = 0; k < 2; k++) {
            if (up[i][k] >= 0) close(up[i][k]);
            if (down[i][k] >= 0) close(down[i][k]);
        }
    }
    zmq_close(in);
    zmq_ctx_term(ctx);
    return m;
}

/* ---- the service ------------------------------------------------------------ */

static Zflow__Envelope *s_call(zf_socket_t *s, Zflow__Envelope *env, uint64_t id)
{
    env->request_id = id;
    zf_status_t st = zf_envelope_send(s, NULL, env);
    zf_route_t route;
    Zflow__Envelope *rep = NULL;
    if (zf_ok(st)) st = zf_envelope_recv(s, 10000, &route, &rep);
    if (!zf_ok(st) || rep->request_id != id) {
        fprintf(stderr, "bench_step: %s\n", zf_ok(st) ? "reply out of order" : zf_status_msg(&st));
        s_stop_all();
        exit(1);
    }
    return rep;
}

static char *s_create_session(zf_socket_t *client, char **endpoint)
{
    const char *text = "node { name: 'x' op: 'Placeholder' device: '" CPU(
        0) "'"
           "  attr { key: 'dtype' value { type: DT_FLOAT } } }"
           "node { name: 'y' op: 'Neg' input: 'x' device: '" CPU(
               1) "'"
                  "  attr { key: 'T' value { type: DT_FLOAT } } }";
    Tensorflow__GraphDef *gd = NULL;
    zf_status_t st = zf_graphdef_read_mem(text, strlen(text), ZF_FORMAT_PBTXT, &gd);
    if (!zf_ok(st)) return NULL;
    Zflow__CreateSession cs = ZFLOW__CREATE_SESSION__INIT;
    cs.graph = gd;
    Zflow__Envelope env = ZFLOW__ENVELOPE__INIT;
    env.body_case = ZFLOW__ENVELOPE__BODY_CREATE_SESSION;
    env.create_session = &cs;
    Zflow__Envelope *rep = s_call(client, &env, 1);
    bool ok = rep->body_case == ZFLOW__ENVELOPE__BODY_CREATE_SESSION_REPLY;
    char *id = ok ? strdup(rep->create_session_reply->session) : NULL;
    const char *ep = ok ? rep->create_session_reply->scheduler_endpoint : NULL;
    *endpoint = ep && ep[0] ? strdup(ep) : NULL;
    zflow__envelope__free_unpacked(rep, NULL);
    zf_graphdef_free(&gd);
    return id;
}

/* Median seconds of a RunStep feeding a scalar x and fetching y, at
 * RunOptions' trace_level (0: untraced; 3: FULL_TRACE). */
static double s_step_median(zf_socket_t *client, const char *session, int reps, int trace_level)
{
    zf_tensor_t *x = NULL;
    Tensorflow__TensorProto *tp = NULL;
    if (!zf_ok(zf_tensor_new_scalar_float(2.0f, &x)) || !zf_ok(zf_tensor_to_proto(x, &tp, true)))
        return -1;
    Zflow__NamedTensor nt = ZFLOW__NAMED_TENSOR__INIT;
    nt.name = "x:0";
    nt.tensor = tp;
    Zflow__NamedTensor *feeds[1] = {&nt};
    char *fetches[1] = {"y:0"};
    Zflow__RunStep rs = ZFLOW__RUN_STEP__INIT;
    rs.session = (char *)session;
    rs.n_feeds = 1;
    rs.feeds = feeds;
    rs.n_fetches = 1;
    rs.fetches = fetches;
    rs.trace_level = trace_level;
    Zflow__Envelope env = ZFLOW__ENVELOPE__INIT;
    env.body_case = ZFLOW__ENVELOPE__BODY_RUN_STEP;
    env.run_step = &rs;
    double *v = malloc((size_t)reps * sizeof *v);
    int bad = 0;
    for (int i = -reps / 10; i < reps; i++) { /* the first tenth warms up */
        double t0 = zf_bench_now();
        Zflow__Envelope *rep = s_call(client, &env, (uint64_t)(i + reps + 10));
        double dt = zf_bench_now() - t0;
        if (rep->body_case != ZFLOW__ENVELOPE__BODY_RUN_STEP_REPLY ||
            (rep->run_step_reply->status && rep->run_step_reply->status->code != 0))
            bad++;
        zflow__envelope__free_unpacked(rep, NULL);
        if (i >= 0) v[i] = dt;
    }
    double m = bad ? -1 : s_median(v, reps);
    free(v);
    tensorflow__tensor_proto__free_unpacked(tp, NULL);
    zf_tensor_unref(&x);
    return m;
}

/* keys: every process's --keys, or NULL for a plain cluster. */
static bool s_start_cluster(char *broker, size_t size, const char *keys)
{
    char line[512];
    const char *bargs[] = {"--listen", "tcp://127.0.0.1:0", keys ? "--keys" : NULL, keys, NULL};
    if (!s_spawn("zflow-broker", bargs, line, sizeof line)) return false;
    const char *p = strstr(line, "listening on ");
    if (!p) return false;
    snprintf(broker, size, "%s", p + strlen("listening on "));
    const char *names[2] = {CPU(0), CPU(1)}, *devs[2] = {"CPU:0", "CPU:1"};
    for (int i = 0; i < 2; i++) {
        const char *eargs[] = {"--broker",  broker,   "--device",
                               devs[i],     "--name", names[i],
                               "--threads", "1",      keys ? "--keys" : NULL,
                               keys,        NULL};
        if (!s_spawn("zflow-executor", eargs, line, sizeof line)) return false;
    }
    const char *sargs[] = {"--broker", broker, keys ? "--keys" : NULL, keys, NULL};
    return s_spawn("zflow-scheduler", sargs, line, sizeof line) && strstr(line, "connected");
}

/* The medians of a direct step and of one through the broker on a fresh
 * cluster (keys: CURVE with that key directory, NULL: plain), and with
 * traced non-NULL of a direct FULL_TRACE step. */
static bool s_measure(const char *keys, int reps, double *step, double *via_broker, double *traced)
{
    char broker[256];
    if (!s_start_cluster(broker, sizeof broker, keys)) {
        fprintf(stderr, "bench_step: cannot start the cluster from %s\n", s_bin);
        s_stop_all();
        return false;
    }
    zf_zctx_t *ctx = NULL;
    zf_socket_t *client = NULL;
    if (!zf_ok(zf_zctx_new(&ctx)) ||
        (keys && !zf_ok(zf_zctx_set_keys(ctx, keys, ZF_ROLE_CLIENT))) ||
        !zf_ok(zf_socket_new(ctx, ZF_SOCKET_DEALER, &client)) ||
        !zf_ok(zf_socket_secure_client(client, ZF_ROLE_BROKER)) ||
        !zf_ok(zf_socket_connect(client, broker))) {
        zf_socket_destroy(&client);
        zf_zctx_destroy(&ctx);
        s_stop_all();
        return false;
    }
    char *endpoint = NULL;
    char *session = s_create_session(client, &endpoint);
    *via_broker = session ? s_step_median(client, session, reps, 0) : -1;
    zf_socket_t *direct = NULL;
    if (!endpoint || !zf_ok(zf_socket_new(ctx, ZF_SOCKET_DEALER, &direct)) ||
        !zf_ok(zf_socket_secure_client(direct, ZF_ROLE_SCHEDULER)) ||
        !zf_ok(zf_socket_connect(direct, endpoint)))
        *via_broker = -1;
    *step = *via_broker > 0 ? s_step_median(direct, session, reps, 0) : -1;
    if (traced) *traced = *step > 0 ? s_step_median(direct, session, reps, 3) : -1;
    free(session);
    free(endpoint);
    zf_socket_destroy(&direct);
    zf_socket_destroy(&client);
    zf_zctx_destroy(&ctx);
    s_stop_all();
    if (*step < 0) fprintf(stderr, "bench_step: the steps failed%s\n", keys ? " with keys" : "");
    return *step > 0;
}

int main(int argc, char **argv)
{
    (void)argc;
    zf_bench_bin_dir(argv[0], s_bin, sizeof s_bin);
    int reps = zf_bench_reps(2000);
    double base = s_reqrep_median(reps);
    double base_proc = s_reqrep_process_median(reps);
    double pattern = s_pattern_median(reps);
    double step = -1, via_broker = -1, step_curve = -1, via_broker_curve = -1, step_traced = -1;
    char keys[] = "/tmp/zflow-bench-keys-XXXXXX";
    if (!mkdtemp(keys) || !zf_ok(zf_keygen_cluster(keys))) {
        fprintf(stderr, "bench_step: cannot make keys in %s\n", keys);
        return 1;
    }
    bool ok = s_measure(NULL, reps, &step, &via_broker, &step_traced) &&
              s_measure(keys, reps, &step_curve, &via_broker_curve, NULL);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", keys);
    if (system(cmd) != 0) fprintf(stderr, "bench_step: cannot remove %s\n", keys);
    if (!ok) return 1;
    printf("step latency (2 partitions, 1 scalar crossing), median of %d runs\n", reps);
    printf("  raw ZeroMQ REQ/REP round trip, one process    %8.1f us\n", base * 1e6);
    printf("  raw ZeroMQ REQ/REP round trip, two processes  %8.1f us\n", base_proc * 1e6);
    if (pattern > 0)
        printf(
            "  a step's messages, raw ZeroMQ processes %8.1f us   %.2fx the one-process round trip "
            "(this design's floor)\n",
            pattern * 1e6, pattern / base);
    else
        printf("  a step's messages, raw ZeroMQ processes: the relays failed\n");
    printf("  RunStep, client -> scheduler    %8.1f us   %.2fx the one-process round trip (target "
           "<= 3x), %.2fx the two-process one",
           step * 1e6, step / base, step / base_proc);
    if (pattern > 0) printf(", %.2fx the floor", step / pattern);
    printf("\n  RunStep through the broker      %8.1f us   %.2fx the one-process round trip, %.2fx "
           "the two-process one\n",
           via_broker * 1e6, via_broker / base, via_broker / base_proc);
    printf("  RunStep with FULL_TRACE         %8.1f us   %.2fx the plain step (target <= 1.2x)\n",
           step_traced * 1e6, step_traced / step);
    printf("  RunStep with CurveZMQ keys      %8.1f us   %.2fx the plain step (target <= 1.2x)\n",
           step_curve * 1e6, step_curve / step);
    printf("  ... through the broker          %8.1f us   %.2fx the plain one\n",
           via_broker_curve * 1e6, via_broker_curve / via_broker);
    return 0;
}
