/* Definitions of broker_test_util.h. */
#include <dirent.h>
#include <limits.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "broker_test_util.h"

int zf_test_broker_stop(zf_test_broker_t *tb, int sig)
{
    if (tb->pid <= 0) return -1;
    kill(tb->pid, sig);
    int status = 0;
    pid_t got = 0;
    for (int64_t end = zf_test_now_ms() + 5000; got == 0 && zf_test_now_ms() < end;) {
        got = waitpid(tb->pid, &status, WNOHANG);
        if (got == 0) usleep(10000);
    }
    if (got == 0) {
        kill(tb->pid, SIGKILL);
        waitpid(tb->pid, &status, 0);
    }
    tb->pid = 0;
    bool clean = WIFEXITED(status) && WEXITSTATUS(status) == 0;
    FILE *log = clean || !tb->log_path[0] ? NULL : fopen(tb->log_path, "r");
    for (int c; log && (c = fgetc(log)) != EOF;) fputc(c, stderr); /* why it failed */
    if (log) fclose(log);
    if (tb->log_path[0]) unlink(tb->log_path);
    tb->log_path[0] = '\0';
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

void zf_test_broker_start(zf_test_broker_t *tb, const char *const *args)
{
    memset(tb, 0, sizeof *tb);
    snprintf(tb->log_path, sizeof tb->log_path, "/tmp/zflow-broker-test-XXXXXX");
    int log_fd = mkstemp(tb->log_path);
    assert_true(log_fd >= 0);
    int out[2];
    assert_int_equal(pipe(out), 0);
    const char *argv[32] = {ZF_BIN_DIR "/zflow-broker", "--listen", "tcp://127.0.0.1:0"};
    int argc = 3;
    bool state = false; /* a test's broker keeps its jobs in memory unless told */
    for (int i = 0; args && args[i] && argc < 29; i++) {
        state = state || strcmp(args[i], "--state") == 0;
        argv[argc++] = args[i];
    }
    if (!state) {
        argv[argc++] = "--state";
        argv[argc++] = ":memory:";
    }
    tb->pid = fork();
    assert_true(tb->pid >= 0);
    if (tb->pid == 0) {
        dup2(out[1], STDOUT_FILENO);
        dup2(log_fd, STDERR_FILENO);
        close(out[0]);
        execv(argv[0], (char *const *)argv);
        _exit(127);
    }
    close(out[1]);
    close(log_fd);
    char line[200];
    bool got = zf_test_read_line(out[0], line, sizeof line, 10000);
    close(out[0]);
    if (!got) zf_test_broker_stop(tb, SIGKILL);
    assert_true(got);
    const char *prefix = "zflow-broker listening on ";
    assert_memory_equal(line, prefix, strlen(prefix));
    snprintf(tb->endpoint, sizeof tb->endpoint, "%s", line + strlen(prefix));
}

void zf_test_state_dir(char *dir, size_t size)
{
    snprintf(dir, size, "/tmp/zflow-state-test-XXXXXX");
    assert_non_null(mkdtemp(dir));
}

void zf_test_state_dir_remove(const char *dir)
{
    const char *files[] = {"jobs.db", "jobs.db-wal", "jobs.db-shm", "jobs.db-journal"};
    char path[PATH_MAX];
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
        snprintf(path, sizeof path, "%s/%s", dir, files[i]);
        unlink(path);
    }
    snprintf(path, sizeof path, "%s/requests", dir); /* large requests, kept apart */
    DIR *d = opendir(path);
    for (struct dirent *e; d && (e = readdir(d));)
        if (e->d_name[0] != '.') unlinkat(dirfd(d), e->d_name, 0);
    if (d) closedir(d);
    rmdir(path);
    rmdir(dir);
}

bool zf_test_broker_log_contains(const zf_test_broker_t *tb, const char *text)
{
    FILE *f = fopen(tb->log_path, "r");
    if (!f) return false;
    static char buf[1 << 16];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    return strstr(buf, text) != NULL;
}

zf_socket_t *zf_test_dealer(zf_zctx_t *ctx, const char *endpoint)
{
    zf_socket_t *s = NULL;
    assert_int_equal(zf_socket_new(ctx, ZF_SOCKET_DEALER, &s).code, ZF_OK);
    assert_int_equal(zf_socket_set_send_timeout(s, 2000).code, ZF_OK);
    assert_int_equal(zf_socket_connect(s, endpoint).code, ZF_OK);
    return s;
}

void zf_test_send(zf_socket_t *s, const void *frame, size_t len, Zflow__Envelope *env)
{
    zf_route_t r;
    zf_route_clear(&r);
    if (frame) assert_int_equal(zf_route_push(&r, frame, len).code, ZF_OK);
    env->version = ZFLOW__PROTOCOL_VERSION__PROTOCOL_VERSION_1;
    zf_status_t st = zf_envelope_send(s, &r, env);
    assert_int_equal(st.code, ZF_OK);
}

Zflow__Envelope *zf_test_recv(zf_socket_t *s, int timeout_ms, zf_route_t *route)
{
    zf_route_t r;
    Zflow__Envelope *env = NULL;
    zf_status_t st = zf_envelope_recv(s, timeout_ms, route ? route : &r, &env);
    if (st.code == ZF_DEADLINE_EXCEEDED) {
        zf_status_clear(&st);
        return NULL;
    }
    assert_int_equal(st.code, ZF_OK);
    return env;
}

void zf_test_send_body(zf_socket_t *s, uint64_t request_id, Zflow__Envelope__BodyCase body,
                       void *msg)
{
    Zflow__Envelope env = ZFLOW__ENVELOPE__INIT;
    env.request_id = request_id;
    env.body_case = body;
    env.ping = msg; /* every body is a pointer in the same union */
    zf_test_send(s, NULL, 0, &env);
}

void zf_test_expect_status(zf_socket_t *s, uint64_t request_id, int code, const char *text)
{
    Zflow__Envelope *rep = zf_test_recv(s, 5000, NULL);
    assert_non_null(rep);
    assert_int_equal(rep->request_id, request_id);
    assert_int_equal(rep->body_case, ZFLOW__ENVELOPE__BODY_STATUS_REPLY);
    const Zflow__Status *st = rep->status_reply->status;
    assert_int_equal(st ? st->code : 0, code);
    if (text && (!st || !strstr(st->message, text)))
        fail_msg("'%s' does not contain '%s'", st ? st->message : "", text);
    zflow__envelope__free_unpacked(rep, NULL);
}

Zflow__Envelope *zf_test_call(zf_socket_t *s, Zflow__Envelope *env, uint64_t id, int timeout_ms)
{
    env->request_id = id;
    zf_test_send(s, NULL, 0, env);
    Zflow__Envelope *rep = zf_test_recv(s, timeout_ms, NULL);
    if (!rep) fail_msg("no reply to request %llu", (unsigned long long)id);
    assert_int_equal(rep->request_id, id);
    return rep;
}

Zflow__Envelope *zf_test_register_executor(zf_socket_t *s, uint64_t request_id, const char *name,
                                           const char *type, uint64_t incarnation,
                                           const char *control, const char *rendezvous)
{
    Tensorflow__DeviceAttributes dev = TENSORFLOW__DEVICE_ATTRIBUTES__INIT;
    dev.name = (char *)name;
    dev.device_type = (char *)type;
    dev.incarnation = incarnation;
    Zflow__ExecutorInfo info = ZFLOW__EXECUTOR_INFO__INIT;
    info.device = &dev;
    info.host_id = "test-host";
    info.control_endpoint = (char *)control;
    info.rendezvous_endpoint = (char *)rendezvous;
    Zflow__RegisterExecutor req = ZFLOW__REGISTER_EXECUTOR__INIT;
    req.info = &info;
    Zflow__Envelope env = ZFLOW__ENVELOPE__INIT;
    env.request_id = request_id;
    env.body_case = ZFLOW__ENVELOPE__BODY_REGISTER_EXECUTOR;
    env.register_executor = &req;
    zf_test_send(s, NULL, 0, &env);
    Zflow__Envelope *reply = zf_test_recv(s, 5000, NULL);
    assert_non_null(reply);
    assert_int_equal(reply->request_id, request_id);
    assert_int_equal(reply->body_case, ZFLOW__ENVELOPE__BODY_REGISTER_EXECUTOR_REPLY);
    return reply;
}

int zf_test_heartbeat(zf_socket_t *s, uint64_t request_id, const char *name, uint64_t incarnation,
                      int64_t load)
{
    Zflow__Heartbeat hb = ZFLOW__HEARTBEAT__INIT;
    hb.device_name = (char *)name;
    hb.incarnation = incarnation;
    hb.load = load;
    Zflow__Envelope env = ZFLOW__ENVELOPE__INIT;
    env.request_id = request_id;
    env.body_case = ZFLOW__ENVELOPE__BODY_HEARTBEAT;
    env.heartbeat = &hb;
    zf_test_send(s, NULL, 0, &env);
    Zflow__Envelope *reply = zf_test_recv(s, 5000, NULL);
    assert_non_null(reply);
    assert_int_equal(reply->request_id, request_id);
    assert_int_equal(reply->body_case, ZFLOW__ENVELOPE__BODY_HEARTBEAT_REPLY);
    int code = reply->heartbeat_reply->status ? reply->heartbeat_reply->status->code : 0;
    zflow__envelope__free_unpacked(reply, NULL);
    return code;
}

void zf_test_spawn(zf_test_child_t *c, const char *const *argv, int wait_ms)
{
    if (access(argv[0], X_OK) != 0) fail_msg("%s is not built", argv[0]);
    int fds[2];
    assert_int_equal(pipe(fds), 0);
    c->pid = fork();
    assert_true(c->pid >= 0);
    if (c->pid == 0) {
        dup2(fds[1], STDOUT_FILENO);
        if (!freopen("/dev/null", "w", stderr)) _exit(126);
        close(fds[0]);
        close(fds[1]);
        execv(argv[0], (char *const *)argv);
        _exit(127);
    }
    close(fds[1]);
    bool got = zf_test_read_line(fds[0], c->line, sizeof c->line, wait_ms);
    close(fds[0]);
    if (!got) {
        kill(c->pid, SIGKILL);
        waitpid(c->pid, NULL, 0);
        c->pid = 0;
        fail_msg("%s printed nothing within %d ms", argv[0], wait_ms);
    }
}

int zf_test_child_stop(zf_test_child_t *c, int sig, int wait_ms)
{
    if (c->pid <= 0) return -1;
    /* SIGCONT first: sent after sig, it could reach a child already exiting
     * and discard the SIGSTOP with which LeakSanitizer's exit-time check
     * stops the process's threads, leaving that check waiting forever. */
    kill(c->pid, SIGCONT);
    kill(c->pid, sig);
    int status = 0;
    pid_t got = 0;
    for (int64_t end = zf_test_now_ms() + wait_ms; got == 0 && zf_test_now_ms() < end;) {
        got = waitpid(c->pid, &status, WNOHANG);
        if (got == 0) usleep(10000);
    }
    if (got == 0) {
        fprintf(stderr, "test: child %d did not exit within %d ms of signal %d; killing it\n",
                (int)c->pid, wait_ms, sig);
        kill(c->pid, SIGKILL);
        waitpid(c->pid, &status, 0);
    }
    c->pid = 0;
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}
