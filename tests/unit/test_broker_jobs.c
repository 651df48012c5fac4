/* Tests for the broker's durable jobs (docs/service.md, "Jobs: submit,
 * poll, wait"): the real zflow-broker with a job store in a temporary
 * state directory, and DEALER sockets playing the clients and the
 * schedulers, so that each scheduler's death and the broker's own are
 * exactly where the test puts them. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>
#include <dirent.h>
#include <sqlite3.h>
#include <zmq.h>

#include "broker_test_util.h"
#include "common/graphdef_io.h"
#include "test_util.h"

#define S_SOCKETS 8

typedef struct {
    zf_test_broker_t tb;
    char state[64]; /* the broker's --state directory */
    zf_zctx_t *ctx;
    zf_socket_t *socks[S_SOCKETS];
    int n_socks;
} fixture_t;

static void s_start_broker(fixture_t *f, const char *extra, const char *value)
{
    const char *args[] = {"--state", f->state, extra, value, NULL};
    zf_test_broker_start(&f->tb, args);
}

static int s_setup(void **state)
{
    fixture_t *f = calloc(1, sizeof *f);
    assert_non_null(f);
    *state = f;
    zf_test_state_dir(f->state, sizeof f->state);
    ASSERT_OK(zf_zctx_new(&f->ctx));
    return 0;
}

static int s_teardown(void **state)
{
    fixture_t *f = *state;
    for (int i = 0; i < f->n_socks; i++) zf_socket_destroy(&f->socks[i]);
    zf_zctx_destroy(&f->ctx);
    int rc = f->tb.pid ? zf_test_broker_stop(&f->tb, SIGTERM) : 0; /* a clean exit checks leaks */
    zf_test_state_dir_remove(f->state);
    free(f);
    return rc == 0 ? 0 : -1;
}

static zf_socket_t *s_peer(fixture_t *f)
{
    assert_true(f->n_socks < S_SOCKETS);
    zf_socket_t *s = zf_test_dealer(f->ctx, f->tb.endpoint);
    f->socks[f->n_socks++] = s;
    return s;
}

/* Closes a peer's socket: its connection to the broker closes. */
static void s_close_peer(fixture_t *f, zf_socket_t *s)
{
    for (int i = 0; i < f->n_socks; i++)
        if (f->socks[i] == s) f->socks[i] = f->socks[--f->n_socks];
    zf_socket_destroy(&s);
}

static void s_register(zf_socket_t *s, const char *sid)
{
    Zflow__RegisterScheduler req = ZFLOW__REGISTER_SCHEDULER__INIT;
    req.scheduler_id = (char *)sid;
    zf_test_send_body(s, 1, ZFLOW__ENVELOPE__BODY_REGISTER_SCHEDULER, &req);
    Zflow__Envelope *rep = zf_test_recv(s, 5000, NULL);
    assert_non_null(rep);
    assert_int_equal(rep->body_case, ZFLOW__ENVELOPE__BODY_REGISTER_SCHEDULER_REPLY);
    zflow__envelope__free_unpacked(rep, NULL);
}

/* The byte at i of a large job's padding. */
static char s_pad_byte(size_t i)
{
    return (char)('a' + i % 26);
}

/* A packed SubmitJob whose step fetches `fetch` and whose graph has one
 * node "n", NoOp, with a device name of `pad` bytes and an attr 'value', a
 * tensor of one float whose four bytes are 0x80; *len its size (caller
 * frees). */
static uint8_t *s_pack_padded(const char *fetch, size_t pad, size_t *len)
{
    char *device = malloc(pad + 1);
    assert_non_null(device);
    for (size_t i = 0; i < pad; i++) device[i] = s_pad_byte(i);
    device[pad] = '\0';
    uint32_t bits = 0x80808080u;
    float value;
    memcpy(&value, &bits, sizeof value);
    Tensorflow__TensorProto tp = TENSORFLOW__TENSOR_PROTO__INIT;
    tp.dtype = TENSORFLOW__DATA_TYPE__DT_FLOAT;
    tp.n_float_val = 1;
    tp.float_val = &value;
    Tensorflow__AttrValue av = TENSORFLOW__ATTR_VALUE__INIT;
    av.value_case = TENSORFLOW__ATTR_VALUE__VALUE_TENSOR;
    av.tensor = &tp;
    Tensorflow__NodeDef__AttrEntry attr = TENSORFLOW__NODE_DEF__ATTR_ENTRY__INIT,
                                   *attrs[] = {&attr};
    attr.key = "value";
    attr.value = &av;
    Tensorflow__NodeDef node = TENSORFLOW__NODE_DEF__INIT, *nodes[] = {&node};
    node.name = "n";
    node.op = "NoOp";
    node.device = device;
    node.n_attr = 1;
    node.attr = attrs;
    Tensorflow__GraphDef gd = TENSORFLOW__GRAPH_DEF__INIT;
    gd.n_node = 1;
    gd.node = nodes;
    Zflow__CreateSession cs = ZFLOW__CREATE_SESSION__INIT;
    cs.graph = &gd;
    char *fetches[] = {(char *)fetch};
    Zflow__RunStep rs = ZFLOW__RUN_STEP__INIT;
    rs.n_fetches = 1;
    rs.fetches = fetches;
    Zflow__SubmitJob sj = ZFLOW__SUBMIT_JOB__INIT;
    sj.session = &cs;
    sj.step = &rs;
    *len = zflow__submit_job__get_packed_size(&sj);
    uint8_t *buf = malloc(*len);
    assert_non_null(buf);
    assert_int_equal(zflow__submit_job__pack(&sj, buf), *len);
    free(device);
    return buf;
}

/* Sends the SubmitJob bytes sj (len) in an envelope with request_id, as a
 * client that packs its own envelope would; returns the reply's status
 * (OK with the job's id in id, when given, for an accepted job). */
static zf_status_t s_submit_bytes(zf_socket_t *c, uint64_t request_id, const uint8_t *sj,
                                  size_t len, char *id, size_t id_size)
{
    uint8_t *msg = malloc(len + 32);
    assert_non_null(msg);
    size_t n = 0;
    n += zf_proto_put_varint(msg + n, 1 << 3);
    n += zf_proto_put_varint(msg + n, 1);
    n += zf_proto_put_varint(msg + n, 2 << 3);
    n += zf_proto_put_varint(msg + n, request_id);
    n += zf_proto_put_varint(msg + n, (uint64_t)ZFLOW__ENVELOPE__BODY_SUBMIT_JOB << 3 | 2);
    n += zf_proto_put_varint(msg + n, len);
    memcpy(msg + n, sj, len);
    n += len;
    assert_int_equal(zmq_send(zf_socket_handle(c), msg, n, 0), (int)n);
    free(msg);
    Zflow__Envelope *rep = zf_test_recv(c, 10000, NULL);
    assert_non_null(rep);
    assert_int_equal(rep->request_id, request_id);
    assert_int_equal(rep->body_case, ZFLOW__ENVELOPE__BODY_SUBMIT_JOB_REPLY);
    zf_status_t st = zf_status_from_proto(rep->submit_job_reply->status);
    if (id) snprintf(id, id_size, "%s", rep->submit_job_reply->job_id);
    zflow__envelope__free_unpacked(rep, NULL);
    return st;
}

/* Submits s_pack_padded's job (a SubmitJob of 1 MiB or more is one the
 * broker keeps as it came); returns its id (caller frees). */
static char *s_submit_padded(zf_socket_t *c, uint64_t request_id, const char *fetch, size_t pad)
{
    size_t len = 0;
    uint8_t *sj = s_pack_padded(fetch, pad, &len);
    char id[64];
    ASSERT_OK(s_submit_bytes(c, request_id, sj, len, id, sizeof id));
    free(sj);
    assert_memory_equal(id, "job-", 4); /* the broker's id, no scheduler prefix */
    char *copy = strdup(id);
    assert_non_null(copy);
    return copy;
}

/* Submits a job whose step fetches `fetch`; returns its id (caller frees). */
static char *s_submit(zf_socket_t *c, uint64_t request_id, const char *fetch)
{
    return s_submit_padded(c, request_id, fetch, 0);
}

/* A request from the broker to scheduler s: its body, the broker's own
 * client frame in *from and the request id in *id. */
typedef struct {
    zf_route_t from;
    uint64_t id;
    char fetch[32]; /* a SubmitJob's fetch, which names its job in these tests */
    char job[64];   /* a WaitJob's or PollJob's job id */
    Zflow__Envelope__BodyCase body;
    size_t pad;  /* a SubmitJob's padding (s_submit_padded) ... */
    bool pad_ok; /* ... each byte of it as sent */
} s_req_t;

static bool s_next_req(zf_socket_t *s, int timeout_ms, s_req_t *r)
{
    memset(r, 0, sizeof *r);
    Zflow__Envelope *env = zf_test_recv(s, timeout_ms, &r->from);
    if (!env) return false;
    assert_int_equal(r->from.n, 1);
    r->id = env->request_id;
    r->body = env->body_case;
    if (env->body_case == ZFLOW__ENVELOPE__BODY_SUBMIT_JOB) {
        assert_int_equal(env->submit_job->step->n_fetches, 1);
        snprintf(r->fetch, sizeof r->fetch, "%s", env->submit_job->step->fetches[0]);
        const Tensorflow__GraphDef *gd = env->submit_job->session->graph;
        const char *device = gd && gd->n_node == 1 ? gd->node[0]->device : "";
        r->pad = strlen(device);
        r->pad_ok = true;
        for (size_t i = 0; i < r->pad; i++) r->pad_ok = r->pad_ok && device[i] == s_pad_byte(i);
    } else if (env->body_case == ZFLOW__ENVELOPE__BODY_WAIT_JOB) {
        snprintf(r->job, sizeof r->job, "%s", env->wait_job->job_id);
    } else if (env->body_case == ZFLOW__ENVELOPE__BODY_POLL_JOB) {
        snprintf(r->job, sizeof r->job, "%s", env->poll_job->job_id);
    }
    zflow__envelope__free_unpacked(env, NULL);
    return true;
}

static void s_expect_req(zf_socket_t *s, Zflow__Envelope__BodyCase body, s_req_t *r)
{
    assert_true(s_next_req(s, 5000, r));
    assert_int_equal(r->body, body);
}

/* The scheduler accepts a SubmitJob as sched_job and expects the WaitJob
 * for it, kept in *wait. */
static void s_accept(zf_socket_t *s, const s_req_t *submit, const char *sched_job, s_req_t *wait)
{
    Zflow__SubmitJobReply r = ZFLOW__SUBMIT_JOB_REPLY__INIT;
    r.job_id = (char *)sched_job;
    Zflow__Envelope env = ZFLOW__ENVELOPE__INIT;
    env.request_id = submit->id;
    env.body_case = ZFLOW__ENVELOPE__BODY_SUBMIT_JOB_REPLY;
    env.submit_job_reply = &r;
    zf_test_send(s, submit->from.frame[0], submit->from.len[0], &env);
    s_expect_req(s, ZFLOW__ENVELOPE__BODY_WAIT_JOB, wait);
    assert_string_equal(wait->job, sched_job);
}

/* The scheduler answers the WaitJob with one scalar fetch named name. */
static void s_finish(zf_socket_t *s, const s_req_t *wait, const char *name, float value)
{
    Tensorflow__TensorShapeProto shape = TENSORFLOW__TENSOR_SHAPE_PROTO__INIT;
    Tensorflow__TensorProto tp = TENSORFLOW__TENSOR_PROTO__INIT;
    tp.dtype = TENSORFLOW__DATA_TYPE__DT_FLOAT;
    tp.tensor_shape = &shape;
    tp.n_float_val = 1;
    tp.float_val = &value;
    Zflow__NamedTensor nt = ZFLOW__NAMED_TENSOR__INIT;
    nt.name = (char *)name;
    nt.tensor = &tp;
    Zflow__NamedTensor *fetches[] = {&nt};
    Zflow__RunStepReply r = ZFLOW__RUN_STEP_REPLY__INIT;
    r.n_fetches = 1;
    r.fetches = fetches;
    Zflow__Envelope env = ZFLOW__ENVELOPE__INIT;
    env.request_id = wait->id;
    env.body_case = ZFLOW__ENVELOPE__BODY_RUN_STEP_REPLY;
    env.run_step_reply = &r;
    zf_test_send(s, wait->from.frame[0], wait->from.len[0], &env);
}

/* The scheduler answers the WaitJob with an error. */
static void s_fail(zf_socket_t *s, const s_req_t *wait, int code, const char *message)
{
    Zflow__Status st = ZFLOW__STATUS__INIT;
    st.code = code;
    st.message = (char *)message;
    Zflow__RunStepReply r = ZFLOW__RUN_STEP_REPLY__INIT;
    r.status = &st;
    Zflow__Envelope env = ZFLOW__ENVELOPE__INIT;
    env.request_id = wait->id;
    env.body_case = ZFLOW__ENVELOPE__BODY_RUN_STEP_REPLY;
    env.run_step_reply = &r;
    zf_test_send(s, wait->from.frame[0], wait->from.len[0], &env);
}

/* Scheduler s takes the next two SubmitJobs, in either order, and answers
 * each with one value: v1 for the job fetching f1, v2 for the other. */
static void s_run_two(zf_socket_t *s, const char *f1, float v1, float v2)
{
    s_req_t r[2], wait;
    for (int k = 0; k < 2; k++) s_expect_req(s, ZFLOW__ENVELOPE__BODY_SUBMIT_JOB, &r[k]);
    for (int k = 0; k < 2; k++) {
        s_accept(s, &r[k], r[k].fetch, &wait);
        s_finish(s, &wait, r[k].fetch, strcmp(r[k].fetch, f1) == 0 ? v1 : v2);
    }
}

/* A client's WaitJob for id (timeout 5 s): the reply (caller frees). */
static Zflow__Envelope *s_wait(zf_socket_t *c, uint64_t request_id, const char *id)
{
    Zflow__WaitJob wj = ZFLOW__WAIT_JOB__INIT;
    wj.job_id = (char *)id;
    wj.timeout_ms = 5000;
    zf_test_send_body(c, request_id, ZFLOW__ENVELOPE__BODY_WAIT_JOB, &wj);
    Zflow__Envelope *rep = zf_test_recv(c, 8000, NULL);
    assert_non_null(rep);
    assert_int_equal(rep->request_id, request_id);
    return rep;
}

/* A client's WaitJob for id: expects its result, one fetch name = value
 * after `attempts` attempts. */
static void s_expect_result(zf_socket_t *c, uint64_t request_id, const char *id, const char *name,
                            float value, int attempts)
{
    Zflow__Envelope *rep = s_wait(c, request_id, id);
    assert_int_equal(rep->body_case, ZFLOW__ENVELOPE__BODY_RUN_STEP_REPLY);
    const Zflow__RunStepReply *r = rep->run_step_reply;
    if (r->status && r->status->code != ZF_OK) fail_msg("job %s: %s", id, r->status->message);
    assert_false(r->unfinished);
    assert_int_equal(r->attempts, attempts);
    assert_int_equal(r->n_fetches, 1);
    assert_string_equal(r->fetches[0]->name, name);
    assert_int_equal(r->fetches[0]->tensor->n_float_val, 1);
    assert_true(r->fetches[0]->tensor->float_val[0] == value);
    zflow__envelope__free_unpacked(rep, NULL);
}

/* A client's WaitJob for id is answered with a status with code and text. */
static void s_expect_wait_status(zf_socket_t *c, uint64_t request_id, const char *id, int code,
                                 const char *text)
{
    Zflow__Envelope *rep = s_wait(c, request_id, id);
    const Zflow__Status *st = rep->body_case == ZFLOW__ENVELOPE__BODY_RUN_STEP_REPLY
                                  ? rep->run_step_reply->status
                                  : rep->status_reply->status;
    assert_non_null(st);
    assert_int_equal(st->code, code);
    if (!strstr(st->message, text)) fail_msg("'%s' does not say '%s'", st->message, text);
    zflow__envelope__free_unpacked(rep, NULL);
}

/* Polls job id on c until it is DONE. */
static void s_poll_done(zf_socket_t *c, uint64_t request_id, const char *id)
{
    Zflow__PollJob pj = ZFLOW__POLL_JOB__INIT;
    pj.job_id = (char *)id;
    for (int tries = 0;; tries++) {
        zf_test_send_body(c, request_id, ZFLOW__ENVELOPE__BODY_POLL_JOB, &pj);
        Zflow__Envelope *rep = zf_test_recv(c, 5000, NULL);
        assert_non_null(rep);
        assert_int_equal(rep->body_case, ZFLOW__ENVELOPE__BODY_POLL_JOB_REPLY);
        bool is_done = rep->poll_job_reply->state == ZFLOW__JOB_STATE__JOB_STATE_DONE;
        zflow__envelope__free_unpacked(rep, NULL);
        if (is_done) return;
        assert_true(tries < 500);
        usleep(10000);
    }
}

static void test_broker_jobs_acknowledge_run_and_return_a_job_once(void **state)
{
    fixture_t *f = *state;
    s_start_broker(f, NULL, NULL);
    zf_socket_t *s1 = s_peer(f), *c = s_peer(f);
    s_register(s1, "aaaa0001");
    char *id = s_submit(c, 10, "y:0");
    s_req_t sub, wait, poll;
    s_expect_req(s1, ZFLOW__ENVELOPE__BODY_SUBMIT_JOB, &sub);
    assert_string_equal(sub.fetch, "y:0");
    s_accept(s1, &sub, "aaaa0001/job-1-00000001", &wait);
    /* a poll goes to the scheduler, and comes back with the attempts */
    Zflow__PollJob pj = ZFLOW__POLL_JOB__INIT;
    pj.job_id = id;
    zf_test_send_body(c, 11, ZFLOW__ENVELOPE__BODY_POLL_JOB, &pj);
    s_expect_req(s1, ZFLOW__ENVELOPE__BODY_POLL_JOB, &poll);
    assert_string_equal(poll.job, "aaaa0001/job-1-00000001");
    Zflow__PollJobReply pr = ZFLOW__POLL_JOB_REPLY__INIT;
    pr.state = ZFLOW__JOB_STATE__JOB_STATE_RUNNING;
    pr.steps_total = 1;
    Zflow__Envelope env = ZFLOW__ENVELOPE__INIT;
    env.request_id = poll.id;
    env.body_case = ZFLOW__ENVELOPE__BODY_POLL_JOB_REPLY;
    env.poll_job_reply = &pr;
    zf_test_send(s1, poll.from.frame[0], poll.from.len[0], &env);
    Zflow__Envelope *rep = zf_test_recv(c, 5000, NULL);
    assert_non_null(rep);
    assert_int_equal(rep->request_id, 11);
    assert_int_equal(rep->poll_job_reply->state, ZFLOW__JOB_STATE__JOB_STATE_RUNNING);
    assert_int_equal(rep->poll_job_reply->attempts, 1);
    zflow__envelope__free_unpacked(rep, NULL);
    s_finish(s1, &wait, "y:0", 4.5f);
    s_expect_result(c, 12, id, "y:0", 4.5f, 1);
    s_expect_wait_status(c, 13, id, ZF_NOT_FOUND, "not found"); /* collected */
    free(id);
}

static void test_broker_jobs_hand_a_lost_schedulers_jobs_to_another(void **state)
{
    fixture_t *f = *state;
    s_start_broker(f, NULL, NULL);
    zf_socket_t *s1 = s_peer(f), *c = s_peer(f);
    s_register(s1, "aaaa0001");
    char *a = s_submit(c, 1, "a"), *b = s_submit(c, 2, "b");
    s_req_t sub[2], wait;
    s_expect_req(s1, ZFLOW__ENVELOPE__BODY_SUBMIT_JOB, &sub[0]);
    s_expect_req(s1, ZFLOW__ENVELOPE__BODY_SUBMIT_JOB, &sub[1]);
    s_accept(s1, &sub[0], "aaaa0001/job-1", &wait); /* a runs, b is not even accepted */
    s_close_peer(f, s1);
    zf_socket_t *s2 = s_peer(f);
    s_register(s2, "bbbb0002");
    s_run_two(s2, "a", 1.0f, 2.0f);
    s_expect_result(c, 3, a, "a", 1.0f, 2);
    s_expect_result(c, 4, b, "b", 2.0f, 2);
    s_req_t extra;
    assert_false(s_next_req(s2, 300, &extra)); /* each ran once there */
    free(a);
    free(b);
}

static void test_broker_jobs_end_with_the_last_error_after_max_attempts(void **state)
{
    fixture_t *f = *state;
    s_start_broker(f, "--max-attempts", "2");
    zf_socket_t *c = s_peer(f);
    char *id = s_submit(c, 1, "y");
    for (int k = 0; k < 2; k++) {
        zf_socket_t *s = s_peer(f);
        s_register(s, k ? "bbbb0002" : "aaaa0001");
        s_req_t sub, wait;
        s_expect_req(s, ZFLOW__ENVELOPE__BODY_SUBMIT_JOB, &sub);
        s_accept(s, &sub, "x/job", &wait);
        s_close_peer(f, s);
    }
    s_expect_wait_status(c, 2, id, ZF_UNAVAILABLE, "failed 2 times (--max-attempts 2)");
    free(id);
}

/* A job run again after an UNAVAILABLE result that then fails otherwise
 * (its executor died, and the next attempt finds no such device) ends with
 * that error, which also says why the job was run again. */
static void test_broker_jobs_say_why_a_job_that_failed_again_was_run_again(void **state)
{
    static const int codes[2] = {ZF_UNAVAILABLE, ZF_INVALID_ARGUMENT};
    static const char *const errors[2] = {
        "step 3 of 9: executor /job:w/replica:0/task:2/device:CPU:0 died",
        "no device /job:w/replica:0/task:2/device:CPU:0"};
    fixture_t *f = *state;
    s_start_broker(f, NULL, NULL);
    zf_socket_t *s = s_peer(f), *c = s_peer(f);
    s_register(s, "aaaa0001");
    char *id = s_submit(c, 1, "y");
    for (int k = 0; k < 2; k++) { /* the first attempt's error, then the second's */
        s_req_t sub, wait;
        s_expect_req(s, ZFLOW__ENVELOPE__BODY_SUBMIT_JOB, &sub);
        s_accept(s, &sub, k ? "aaaa0001/job-2" : "aaaa0001/job-1", &wait);
        s_fail(s, &wait, codes[k], errors[k]);
    }
    s_expect_wait_status(
        c, 2, id, ZF_INVALID_ARGUMENT,
        "no device /job:w/replica:0/task:2/device:CPU:0 (run again after attempt 1 "
        "failed: step 3 of 9: executor /job:w/replica:0/task:2/device:CPU:0 died)");
    free(id);
}

static void test_broker_jobs_survive_a_broker_restart(void **state)
{
    fixture_t *f = *state;
    s_start_broker(f, NULL, NULL);
    zf_socket_t *c = s_peer(f);
    /* done (result not collected), dispatched and running, queued */
    char *done = s_submit(c, 1, "done"), *running = s_submit(c, 2, "running"),
         *queued = s_submit(c, 3, "queued");
    zf_socket_t *s1 = s_peer(f);
    s_register(s1, "aaaa0001");
    s_req_t sub[3], wait;
    for (int k = 0; k < 3; k++) s_expect_req(s1, ZFLOW__ENVELOPE__BODY_SUBMIT_JOB, &sub[k]);
    for (int k = 0; k < 2; k++) {
        s_accept(s1, &sub[k], k ? "aaaa0001/job-r" : "aaaa0001/job-d", &wait);
        if (k == 0) s_finish(s1, &wait, "done", 7.0f);
    }
    s_poll_done(c, 4, done); /* the result is in once a poll says so */
    assert_int_equal(zf_test_broker_stop(&f->tb, SIGKILL), 128 + SIGKILL);
    for (int i = 0; i < f->n_socks; i++) zf_socket_destroy(&f->socks[i]);
    f->n_socks = 0;
    s_start_broker(f, NULL, NULL); /* the same state directory, a new port */
    c = s_peer(f);
    s_expect_result(c, 5, done, "done", 7.0f, 1);
    zf_socket_t *s2 = s_peer(f);
    s_register(s2, "bbbb0002");
    s_run_two(s2, "running", 8.0f, 9.0f);
    s_expect_result(c, 6, running, "running", 8.0f, 2); /* its first run was lost */
    s_expect_result(c, 7, queued, "queued", 9.0f, 2);   /* dispatched, not accepted: lost too */
    free(done);
    free(running);
    free(queued);
}

/* Waits up to 10 s for the broker's log to say that job id's result was
 * dropped for `why`. */
static void s_expect_dropped(const fixture_t *f, const char *id, const char *why)
{
    char line[160];
    snprintf(line, sizeof line, "dropped the uncollected result of job %s (%s)", id, why);
    for (int tries = 0; !zf_test_broker_log_contains(&f->tb, line); tries++) {
        if (tries >= 1000) fail_msg("the broker's log does not say '%s'", line);
        usleep(10000);
    }
}

/* Past --job-results, the results dropped are those that ended first,
 * whatever order their jobs came in, and so after a restart too, where
 * the store lists them in the order they were accepted. */
static void test_broker_jobs_drop_the_results_that_ended_first(void **state)
{
    fixture_t *f = *state;
    s_start_broker(f, "--job-results", "2");
    zf_socket_t *s1 = s_peer(f), *c = s_peer(f);
    s_register(s1, "aaaa0001");
    const char *names[4] = {"a", "b", "c", "d"};
    char *ids[4];
    for (int k = 0; k < 4; k++) ids[k] = s_submit(c, 1 + (uint64_t)k, names[k]);
    s_req_t sub[4], wait[4];
    for (int k = 0; k < 4; k++) s_expect_req(s1, ZFLOW__ENVELOPE__BODY_SUBMIT_JOB, &sub[k]);
    for (int k = 0; k < 4; k++) {
        int i = sub[k].fetch[0] - 'a';
        assert_true(i >= 0 && i < 4);
        s_accept(s1, &sub[k], names[i], &wait[i]);
    }
    /* they end c, a, d, b, each in a later millisecond than the one before */
    const int order[4] = {2, 0, 3, 1};
    for (int k = 0; k < 4; k++) {
        int i = order[k];
        s_finish(s1, &wait[i], names[i], (float)i);
        if (k < 3) s_poll_done(c, 10 + (uint64_t)k, ids[i]); /* d's end drops c, b's drops a */
        usleep(5000);
    }
    s_expect_dropped(f, ids[2], "too many results waiting");
    s_expect_dropped(f, ids[0], "too many results waiting");
    s_expect_wait_status(c, 20, ids[2], ZF_NOT_FOUND, "at most 2 of them");
    s_expect_wait_status(c, 21, ids[0], ZF_NOT_FOUND, "at most 2 of them");
    /* b (accepted before d) ended after it: a broker keeping one result
     * keeps b's */
    assert_int_equal(zf_test_broker_stop(&f->tb, SIGTERM), 0);
    for (int i = 0; i < f->n_socks; i++) zf_socket_destroy(&f->socks[i]);
    f->n_socks = 0;
    s_start_broker(f, "--job-results", "1");
    c = s_peer(f);
    s_expect_dropped(f, ids[3], "too many results waiting");
    s_expect_wait_status(c, 22, ids[3], ZF_NOT_FOUND, "at most 1 of them");
    s_expect_result(c, 23, ids[1], "b", 1.0f, 1);
    for (int k = 0; k < 4; k++) free(ids[k]);
}

/* The files in the state directory's requests/, where large requests are kept. */
static int s_requests_kept(const fixture_t *f)
{
    char path[128];
    snprintf(path, sizeof path, "%s/requests", f->state);
    DIR *d = opendir(path);
    assert_non_null(d);
    int n = 0;
    for (struct dirent *e; (e = readdir(d));) n += e->d_name[0] != '.';
    closedir(d);
    return n;
}

/* Makes an empty file name in the state directory's requests/. */
static void s_touch_request(const fixture_t *f, const char *name)
{
    char path[160];
    snprintf(path, sizeof path, "%s/requests/%s", f->state, name);
    FILE *fp = fopen(path, "w");
    assert_non_null(fp);
    fclose(fp);
}

static void test_broker_jobs_keep_a_large_job_acknowledged_through_a_broker_restart(void **state)
{
    fixture_t *f = *state;
    s_start_broker(f, NULL, NULL);
    zf_socket_t *c = s_peer(f);
    size_t pad = (size_t)3 << 20; /* past the 1 MiB from which a SubmitJob is kept as it came */
    char *big = s_submit_padded(c, 1, "big", pad), *small = s_submit(c, 2, "small");
    assert_int_equal(s_requests_kept(f), 1); /* durable before its id was told */
    /* killed with both queued, and with what a broker killed while
     * writing a request could leave: a request of no job, a partial one */
    assert_int_equal(zf_test_broker_stop(&f->tb, SIGKILL), 128 + SIGKILL);
    for (int i = 0; i < f->n_socks; i++) zf_socket_destroy(&f->socks[i]);
    f->n_socks = 0;
    s_touch_request(f, "job-99-0123abcd");
    s_touch_request(f, "job-98-0123abcd.tmp");
    s_start_broker(f, NULL, NULL);
    assert_int_equal(s_requests_kept(f), 1);
    assert_true(zf_test_broker_log_contains(&f->tb, "removed 2 request(s) of no job"));
    c = s_peer(f);
    zf_socket_t *s1 = s_peer(f);
    s_register(s1, "aaaa0001");
    s_req_t sub[2], wait;
    for (int k = 0; k < 2; k++) s_expect_req(s1, ZFLOW__ENVELOPE__BODY_SUBMIT_JOB, &sub[k]);
    for (int k = 0; k < 2; k++) { /* the large one whole, as it was sent */
        bool is_big = strcmp(sub[k].fetch, "big") == 0;
        assert_int_equal(sub[k].pad, is_big ? pad : 0);
        assert_true(sub[k].pad_ok);
        s_accept(s1, &sub[k], is_big ? "aaaa0001/job-b" : "aaaa0001/job-s", &wait);
        s_finish(s1, &wait, sub[k].fetch, is_big ? 1.5f : 2.5f);
    }
    s_expect_result(c, 3, big, "big", 1.5f, 1);
    s_expect_result(c, 4, small, "small", 2.5f, 1);
    /* a large job's request goes once its result is stored */
    for (int tries = 0; s_requests_kept(f) > 0; tries++) {
        assert_true(tries < 500);
        usleep(10000);
    }
    free(big);
    free(small);
}

/* Where the n bytes of what first stand in buf's len. */
static size_t s_find_bytes(const uint8_t *buf, size_t len, const char *what, size_t n)
{
    for (size_t i = 0; i + n <= len; i++)
        if (memcmp(buf + i, what, n) == 0) return i;
    fail_msg("the bytes looked for are not there");
    return 0;
}

/* The rows of the stopped broker's job store. */
static int s_rows(const fixture_t *f)
{
    char path[128];
    snprintf(path, sizeof path, "%s/jobs.db", f->state);
    sqlite3 *db = NULL;
    sqlite3_stmt *st = NULL;
    assert_int_equal(sqlite3_open(path, &db), SQLITE_OK);
    assert_int_equal(sqlite3_prepare_v2(db, "SELECT count(*) FROM jobs", -1, &st, NULL), SQLITE_OK);
    assert_int_equal(sqlite3_step(st), SQLITE_ROW);
    int n = sqlite3_column_int(st, 0);
    sqlite3_finalize(st);
    sqlite3_close(db);
    return n;
}

/* A SubmitJob of 1 MiB or more, which the broker keeps without decoding
 * it, is checked whole on the store's thread: one malformed anywhere in
 * its graph is refused INVALID_ARGUMENT saying what is wrong and where,
 * and is neither stored nor handed to a scheduler; a well-formed one of
 * the same size is taken after them. */
static void test_broker_jobs_refuse_a_large_malformed_submit_job_and_keep_nothing(void **state)
{
    fixture_t *f = *state;
    s_start_broker(f, NULL, NULL);
    zf_socket_t *s1 = s_peer(f), *c = s_peer(f);
    s_register(s1, "aaaa0001");
    size_t pad = (size_t)2 << 20, len = 0;
    uint8_t *good = s_pack_padded("big", pad, &len);
    assert_true(len > (size_t)2 << 20);
    uint8_t *bad = malloc(len);
    assert_non_null(bad);
    char want[512];
    /* the node's name as a varint */
    memcpy(bad, good, len);
    size_t at = s_find_bytes(bad, len, "\x0a\x01n\x12\x04NoOp", 9);
    bad[at] = 1 << 3 | 0;
    snprintf(want, sizeof want,
             "SubmitJob refused: malformed zflow.SubmitJob (%zu bytes; byte offsets count from "
             "its start): field 'name' (1) of tensorflow.NodeDef at byte %zu has wire type "
             "varint, expected length-delimited",
             len, at);
    zf_status_t st = s_submit_bytes(c, 1, bad, len, NULL, 0);
    zf_test_expect_error(st, ZF_INVALID_ARGUMENT, want);
    /* the tensor's four bytes of float_val made a packed int_val: four
     * bytes of 0x80, a varint that never ends */
    memcpy(bad, good, len);
    at = s_find_bytes(bad, len, "\x2a\x04\x80\x80\x80\x80", 6);
    bad[at] = 7 << 3 | 2;
    snprintf(want, sizeof want,
             "SubmitJob refused: malformed zflow.SubmitJob (%zu bytes; byte offsets count from "
             "its start): packed field 'int_val' (7) of tensorflow.TensorProto at byte %zu holds "
             "a truncated varint",
             len, at);
    st = s_submit_bytes(c, 2, bad, len, NULL, 0);
    zf_test_expect_error(st, ZF_INVALID_ARGUMENT, want);
    assert_int_equal(s_requests_kept(f), 0); /* nothing of them was written */
    s_req_t r;
    assert_false(s_next_req(s1, 300, &r)); /* nor handed on */
    /* the same request well-formed is taken, kept and handed on whole */
    char id[64];
    ASSERT_OK(s_submit_bytes(c, 3, good, len, id, sizeof id));
    assert_memory_equal(id, "job-", 4);
    assert_int_equal(s_requests_kept(f), 1);
    s_expect_req(s1, ZFLOW__ENVELOPE__BODY_SUBMIT_JOB, &r);
    assert_string_equal(r.fetch, "big");
    assert_int_equal(r.pad, pad);
    assert_true(r.pad_ok);
    assert_int_equal(zf_test_broker_stop(&f->tb, SIGTERM), 0);
    assert_int_equal(s_rows(f), 1); /* its row alone */
    free(bad);
    free(good);
}

/* Adds rows (SQL) to the stopped broker's job store. */
static void s_add_rows(const fixture_t *f, const char *rows)
{
    char path[128];
    snprintf(path, sizeof path, "%s/jobs.db", f->state);
    sqlite3 *db = NULL;
    assert_int_equal(sqlite3_open(path, &db), SQLITE_OK);
    assert_int_equal(sqlite3_exec(db, rows, NULL, NULL, NULL), SQLITE_OK);
    sqlite3_close(db);
}

static void test_broker_jobs_end_a_job_whose_stored_record_is_bad_with_data_loss(void **state)
{
    fixture_t *f = *state;
    s_start_broker(f, NULL, NULL); /* makes the store */
    assert_int_equal(zf_test_broker_stop(&f->tb, SIGTERM), 0);
    const char *rows =
        "INSERT INTO jobs(id, seq, state, request) VALUES('job-1-bad', 1, 1, x'0a0bffff');"
        "INSERT INTO jobs(id, seq, state, result, ended_ms) VALUES('job-2-bad', 2, 3, "
        "x'0a0bffff', CAST(strftime('%s', 'now') AS INTEGER) * 1000);"
        "INSERT INTO jobs(id, seq, state) VALUES('job-3-bad', 3, 99);"
        /* well-formed, but no Envelope{version 1, SubmitJob}: 0801 is version 1,
         * a20200 an empty SubmitJob (field 36), ea0200 a Ping (45) */
        "INSERT INTO jobs(id, seq, state, request) VALUES('job-4-v2', 4, 1, x'0802a20200');"
        "INSERT INTO jobs(id, seq, state, request) VALUES('job-5-none', 5, 1, x'08011007');"
        "INSERT INTO jobs(id, seq, state, request) VALUES('job-6-two', 6, 1, "
        "x'0801a20200a20200');"
        "INSERT INTO jobs(id, seq, state, request) VALUES('job-7-ping', 7, 1, x'0801ea0200');";
    s_add_rows(f, rows);
    s_start_broker(f, NULL, NULL);
    zf_socket_t *c = s_peer(f), *s1 = s_peer(f);
    s_register(s1, "aaaa0001"); /* nothing reaches it: the request does not decode */
    s_expect_wait_status(c, 1, "job-1-bad", ZF_DATA_LOSS,
                         "the stored request of job 'job-1-bad' cannot be read");
    s_expect_wait_status(c, 2, "job-2-bad", ZF_DATA_LOSS,
                         "the stored result of job 'job-2-bad' cannot be read");
    s_expect_wait_status(c, 3, "job-3-bad", ZF_NOT_FOUND, "not found"); /* skipped */
    const char *const ids[4] = {"job-4-v2", "job-5-none", "job-6-two", "job-7-ping"};
    const char *const why[4] = {"protocol version 2 is not supported (this side speaks 1)",
                                "it has no body", "it has 2 bodies", "it holds a Ping"};
    for (int k = 0; k < 4; k++) {
        char want[160];
        snprintf(want, sizeof want, "the stored request of job '%s' cannot be read: %s", ids[k],
                 why[k]);
        s_expect_wait_status(c, 10 + (uint64_t)k, ids[k], ZF_DATA_LOSS, want);
    }
    s_req_t r;
    assert_false(s_next_req(s1, 300, &r));
    free(s_submit(c, 4, "y")); /* and it goes on */
}

/* Rows with numbers no broker writes are not taken up: each is logged with
 * why and skipped, a wait for it is NOT_FOUND, the ids go on from the
 * jobs that are, and those run as before. (A seq at the top of int64, an
 * attempt count that one more would overflow, an end at the bottom of
 * int64: each used to be trusted into arithmetic that overflows.) */
static void test_broker_jobs_skip_stored_rows_with_absurd_numbers(void **state)
{
    fixture_t *f = *state;
    s_start_broker(f, NULL, NULL);
    zf_socket_t *c = s_peer(f);
    char *good = s_submit(c, 1, "good"); /* seq 1, queued */
    assert_int_equal(zf_test_broker_stop(&f->tb, SIGTERM), 0);
    for (int i = 0; i < f->n_socks; i++) zf_socket_destroy(&f->socks[i]);
    f->n_socks = 0;
    const char *rows =
        "INSERT INTO jobs(id, seq, state, steps, request) VALUES("
        "'job-9223372036854775807-ffffffff', 9223372036854775807, 1, 1, x'0801');"
        "INSERT INTO jobs(id, seq, state, steps, request) VALUES('job-3-steps', 3, 1, -7, "
        "x'0801');"
        "INSERT INTO jobs(id, seq, state, steps) VALUES('job-4-state', 4, 9, 1);"
        "INSERT INTO jobs(id, seq, state, steps, scheduler, attempts) VALUES('job-5-attempts', "
        "5, 2, 1, 'aaaa0001', 2147483647);"
        "INSERT INTO jobs(id, seq, state, steps, result, ended_ms) VALUES('job-6-ended', 6, 3, "
        "1, x'', -9223372036854775808);";
    s_add_rows(f, rows);
    s_start_broker(f, NULL, NULL);
    const char *logged[] = {
        "(id 'job-9223372036854775807-ffffffff') is no job: seq 9223372036854775807 is not "
        "from 1 to 9007199254740992; skipped",
        "(id 'job-3-steps') is no job: steps -7 is not from 0 to 1000000000000; skipped",
        "(id 'job-4-state') is no job: state 9 is none of 1 (queued), 2 (dispatched), 3 (done); "
        "skipped",
        "(id 'job-5-attempts') is no job: attempts 2147483647 is not from 0 to 100000000; "
        "skipped",
        "(id 'job-6-ended') is no job: ended_ms -9223372036854775808 is not from 0 to ",
        "skipped 5 unreadable row(s)",
    };
    for (size_t k = 0; k < sizeof logged / sizeof logged[0]; k++)
        if (!zf_test_broker_log_contains(&f->tb, logged[k]))
            fail_msg("the broker's log does not say '%s'", logged[k]);
    c = s_peer(f);
    const char *skipped[] = {"job-9223372036854775807-ffffffff", "job-3-steps", "job-4-state",
                             "job-5-attempts", "job-6-ended"};
    for (size_t k = 0; k < 5; k++)
        s_expect_wait_status(c, 10 + k, skipped[k], ZF_NOT_FOUND, "not found");
    char *next = s_submit(c, 20, "next");
    assert_memory_equal(next, "job-2-", 6); /* after the one job taken up */
    zf_socket_t *s1 = s_peer(f);
    s_register(s1, "aaaa0001");
    s_run_two(s1, "good", 1.0f, 2.0f);
    s_expect_result(c, 21, good, "good", 1.0f, 1);
    s_expect_result(c, 22, next, "next", 2.0f, 1);
    s_req_t extra;
    assert_false(s_next_req(s1, 300, &extra)); /* none of the skipped rows ran */
    free(good);
    free(next);
}

/* Runs zflow-broker with args, stderr folded in; returns its exit code. */
static int s_run_broker(const char *args, char *out, size_t size)
{
    return zf_test_run_program(ZF_BIN_DIR "/zflow-broker", args, out, size);
}

static void test_broker_jobs_refuse_a_bad_state_directory_at_start(void **state)
{
    fixture_t *f = *state;
    char out[4096], path[128];
    /* not a database */
    snprintf(path, sizeof path, "%s/jobs.db", f->state);
    FILE *fp = fopen(path, "w");
    assert_non_null(fp);
    for (int i = 0; i < 512; i++) fputs("not a database, ", fp);
    fclose(fp);
    char corrupt[160];
    snprintf(corrupt, sizeof corrupt, "--listen tcp://127.0.0.1:0 --state %s", f->state);
    assert_int_equal(s_run_broker(corrupt, out, sizeof out), 1);
    assert_non_null(strstr(out, "zflow-broker: DATA_LOSS: job store "));
    assert_non_null(strstr(out, path));
    unlink(path);
    /* a directory that cannot be made: its parent is a file */
    snprintf(path, sizeof path, "%s/file", f->state);
    fp = fopen(path, "w");
    assert_non_null(fp);
    fclose(fp);
    char sub[160];
    snprintf(sub, sizeof sub, "%s/state", path);
    char unmakable[200];
    snprintf(unmakable, sizeof unmakable, "--listen tcp://127.0.0.1:0 --state %s", sub);
    assert_int_equal(s_run_broker(unmakable, out, sizeof out), 1);
    assert_non_null(strstr(out, "FAILED_PRECONDITION: cannot make state directory"));
    unlink(path);
    /* one broker per directory */
    s_start_broker(f, NULL, NULL);
    assert_int_equal(s_run_broker(corrupt, out, sizeof out), 1);
    assert_non_null(strstr(out, "in use by another broker"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
#define T(name) cmocka_unit_test_setup_teardown(name, s_setup, s_teardown)
        T(test_broker_jobs_acknowledge_run_and_return_a_job_once),
        T(test_broker_jobs_hand_a_lost_schedulers_jobs_to_another),
        T(test_broker_jobs_end_with_the_last_error_after_max_attempts),
        T(test_broker_jobs_say_why_a_job_that_failed_again_was_run_again),
        T(test_broker_jobs_survive_a_broker_restart),
        T(test_broker_jobs_drop_the_results_that_ended_first),
        T(test_broker_jobs_keep_a_large_job_acknowledged_through_a_broker_restart),
        T(test_broker_jobs_refuse_a_large_malformed_submit_job_and_keep_nothing),
        T(test_broker_jobs_end_a_job_whose_stored_record_is_bad_with_data_loss),
        T(test_broker_jobs_skip_stored_rows_with_absurd_numbers),
        T(test_broker_jobs_refuse_a_bad_state_directory_at_start),
#undef T
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
