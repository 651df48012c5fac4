/* Transport: owns the ZeroMQ context and socket wrappers and the
 * control-plane envelope codec (routing frames + one protobuf Envelope). */
#include "common/transport.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <zmq.h>

#include "common/graphdef_io.h"
#include "common/log.h"

#define S_ENDPOINT_MAX 1024
#define S_ZAP_ENDPOINT "inproc://zeromq.zap.01"
#define S_ZAP_DOMAIN   "zflow/" /* followed by the admitted roles' mask */

struct zf_zctx {
    void *handle;
    zf_keys_t *keys;
    pthread_t zap_thread;
    bool zap_running;
};

struct zf_socket {
    void *handle;
    zf_zctx_t *ctx;
    void *monitor;       /* PAIR receiving the socket's events, or NULL */
    bool secure_server;  /* CURVE server */
    bool secure_client;  /* CURVE client */
    int handshake_event; /* last handshake failure event seen, 0 after a success */
    int handshake_value;
    char handshake_endpoint[S_ENDPOINT_MAX];
    zf_socket_type_t type;
    int send_timeout_ms; /* mirrors ZMQ_SNDTIMEO, for error messages */
    char endpoint[S_ENDPOINT_MAX];
};

/* ---- errors -------------------------------------------------------------- */

zf_status_t zf__zmq_error(int err, const char *what)
{
    const char *text = zmq_strerror(err);
    switch (err) {
    case ETERM: return zf_status_new(ZF_CANCELLED, "%s: the ZeroMQ context is terminating", what);
    case EAGAIN: return zf_status_new(ZF_DEADLINE_EXCEEDED, "%s: timed out", what);
    case EHOSTUNREACH:
        return zf_status_new(ZF_UNAVAILABLE, "%s: no connected peer has that routing id", what);
    case ENOMEM:
    case EMFILE: return zf_status_new(ZF_RESOURCE_EXHAUSTED, "%s: %s", what, text);
    case EINVAL:
    case EPROTONOSUPPORT:
    case ENOCOMPATPROTO: return zf_invalid_argument("%s: %s", what, text);
    case EFSM:
        return zf_status_new(ZF_FAILED_PRECONDITION, "%s: %s (out of turn for this socket type)",
                             what, text);
    default: return zf_status_new(ZF_UNAVAILABLE, "%s: %s", what, text);
    }
}

/* ---- contexts -------------------------------------------------------------- */

zf_status_t zf_zctx_new(zf_zctx_t **out)
{
    *out = NULL;
    zf_zctx_t *ctx = calloc(1, sizeof *ctx);
    if (!ctx) return zf_out_of_memory("a ZeroMQ context");
    ctx->handle = zmq_ctx_new();
    if (!ctx->handle) {
        free(ctx);
        return zf_status_new(ZF_RESOURCE_EXHAUSTED, "cannot create a ZeroMQ context: %s",
                             zmq_strerror(errno));
    }
    *out = ctx;
    return ZF_STATUS_OK;
}

void zf_zctx_destroy(zf_zctx_t **ctx_p)
{
    if (!ctx_p || !*ctx_p) return;
    zf_zctx_t *ctx = *ctx_p;
    *ctx_p = NULL;
    if (ctx->zap_running) {
        /* The handler's receive fails with ETERM, and it closes its socket. */
        zmq_ctx_shutdown(ctx->handle);
        pthread_join(ctx->zap_thread, NULL);
    }
    while (zmq_ctx_term(ctx->handle) != 0 && errno == EINTR) {
    }
    zf_keys_destroy(&ctx->keys);
    free(ctx);
}

/* ---- the ZAP handler (ZeroMQ RFC 27) ------------------------------------- */

#define S_ZAP_FRAMES 7 /* version, id, domain, address, routing id, mechanism, key */

typedef struct s_zap_args {
    void *rep;
    const zf_keys_t *keys;
} s_zap_args_t;

/* Decides one request: 200 with the identity, or 400 with why. */
static const char *s_zap_decide(const zf_keys_t *keys, zmq_msg_t *f, int n, char *user,
                                size_t user_cap)
{
    user[0] = '\0';
    if (n != S_ZAP_FRAMES) return "malformed request";
    if (zmq_msg_size(&f[0]) != 3 || memcmp(zmq_msg_data(&f[0]), "1.0", 3) != 0)
        return "unsupported ZAP version";
    if (zmq_msg_size(&f[5]) != 5 || memcmp(zmq_msg_data(&f[5]), "CURVE", 5) != 0)
        return "only CURVE is accepted";
    char domain[32] = "";
    size_t dlen = zmq_msg_size(&f[2]);
    if (dlen < sizeof domain) {
        memcpy(domain, zmq_msg_data(&f[2]), dlen);
        domain[dlen] = '\0';
    }
    if (strncmp(domain, S_ZAP_DOMAIN, strlen(S_ZAP_DOMAIN)) != 0) return "unknown ZAP domain";
    unsigned roles = (unsigned)strtoul(domain + strlen(S_ZAP_DOMAIN), NULL, 10);
    if (zmq_msg_size(&f[6]) != 32) return "malformed CURVE key";
    char z85[ZF_KEY_Z85_LEN + 1];
    zmq_z85_encode(z85, zmq_msg_data(&f[6]), 32);
    char address[64] = "";
    size_t alen = zmq_msg_size(&f[3]);
    if (alen >= sizeof address) alen = sizeof address - 1;
    memcpy(address, zmq_msg_data(&f[3]), alen);
    address[alen] = '\0';
    zf_role_t role = ZF_ROLE_NONE;
    const char *name = NULL;
    if (!zf_keys_lookup(keys, z85, &role, &name)) {
        zf_log_warn("security", "refused CURVE key %s from %s: not a trusted key in %s", z85,
                    address, zf_keys_dir(keys));
        return "unknown key";
    }
    if (!(roles & (unsigned)role)) {
        zf_log_warn("security", "refused %s:%s (key %s) from %s: a %s key may not connect here",
                    zf_role_name(role), name, z85, address, zf_role_name(role));
        return "role not admitted";
    }
    snprintf(user, user_cap, "%s:%s", zf_role_name(role), name);
    return NULL;
}

static void *s_zap_main(void *arg)
{
    s_zap_args_t a = *(s_zap_args_t *)arg;
    free(arg);
    for (;;) {
        zmq_msg_t f[S_ZAP_FRAMES + 1];
        int n = 0;
        bool more = true, term = false;
        while (more) {
            zmq_msg_t m;
            zmq_msg_init(&m);
            if (zmq_msg_recv(&m, a.rep, 0) < 0) {
                zmq_msg_close(&m);
                if (errno == EINTR) continue;
                term = true;
                break;
            }
            more = zmq_msg_more(&m);
            if (n < S_ZAP_FRAMES + 1)
                f[n++] = m;
            else
                zmq_msg_close(&m);
        }
        if (term) {
            for (int i = 0; i < n; i++) zmq_msg_close(&f[i]);
            break;
        }
        char user[ZF_PEER_ID_MAX];
        const char *why = s_zap_decide(a.keys, f, n, user, sizeof user);
        const char *code = why ? "400" : "200";
        /* version, request id (echoed), status code, text, user id, metadata */
        zmq_send(a.rep, "1.0", 3, ZMQ_SNDMORE);
        if (n >= 2)
            zmq_send(a.rep, zmq_msg_data(&f[1]), zmq_msg_size(&f[1]), ZMQ_SNDMORE);
        else
            zmq_send(a.rep, "", 0, ZMQ_SNDMORE);
        zmq_send(a.rep, code, 3, ZMQ_SNDMORE);
        zmq_send(a.rep, why ? why : "OK", strlen(why ? why : "OK"), ZMQ_SNDMORE);
        zmq_send(a.rep, user, strlen(user), ZMQ_SNDMORE);
        zmq_send(a.rep, "", 0, 0);
        for (int i = 0; i < n; i++) zmq_msg_close(&f[i]);
    }
    int zero = 0;
    zmq_setsockopt(a.rep, ZMQ_LINGER, &zero, sizeof zero);
    zmq_close(a.rep);
    return NULL;
}

zf_status_t zf_zctx_set_keys(zf_zctx_t *ctx, const char *dir, zf_role_t role)
{
    if (ctx->keys) return zf_status_new(ZF_FAILED_PRECONDITION, "the context already has keys");
    zf_keys_t *keys = NULL;
    ZF_TRY(zf_keys_load(dir, role, &keys));
    void *rep = zmq_socket(ctx->handle, ZMQ_REP);
    s_zap_args_t *args = malloc(sizeof *args);
    zf_status_t s = ZF_STATUS_OK;
    if (!rep || !args)
        s = zf_out_of_memory("the ZAP handler");
    else if (zmq_bind(rep, S_ZAP_ENDPOINT) != 0)
        s = zf__zmq_error(errno, "cannot bind the ZAP handler");
    if (zf_ok(s)) {
        *args = (s_zap_args_t){rep, keys};
        if (pthread_create(&ctx->zap_thread, NULL, s_zap_main, args) != 0)
            s = zf_internal("cannot start the ZAP handler thread");
    }
    if (!zf_ok(s)) {
        free(args);
        if (rep) zmq_close(rep);
        zf_keys_destroy(&keys);
        return s;
    }
    ctx->keys = keys;
    ctx->zap_running = true;
    return ZF_STATUS_OK;
}

const zf_keys_t *zf_zctx_keys(const zf_zctx_t *ctx)
{
    return ctx->keys;
}

void *zf_zctx_handle(const zf_zctx_t *ctx)
{
    return ctx->handle;
}

/* ---- sockets --------------------------------------------------------------- */

static const int s_zmq_types[] = {ZMQ_PAIR,   ZMQ_REQ,  ZMQ_REP, ZMQ_DEALER,
                                  ZMQ_ROUTER, ZMQ_PUSH, ZMQ_PULL};

zf_status_t zf_socket_new(zf_zctx_t *ctx, zf_socket_type_t type, zf_socket_t **out)
{
    *out = NULL;
    if ((unsigned)type >= sizeof s_zmq_types / sizeof s_zmq_types[0])
        return zf_invalid_argument("unknown socket type %d", (int)type);
    zf_socket_t *s = calloc(1, sizeof *s);
    if (!s) return zf_out_of_memory("a socket");
    s->handle = zmq_socket(ctx->handle, s_zmq_types[type]);
    if (!s->handle) {
        int err = errno;
        free(s);
        return zf__zmq_error(err, "cannot create a socket");
    }
    s->type = type;
    s->ctx = ctx;
    s->send_timeout_ms = -1;
    *out = s;
    return ZF_STATUS_OK;
}

void zf_socket_destroy(zf_socket_t **s_p)
{
    if (!s_p || !*s_p) return;
    zf_socket_t *s = *s_p;
    *s_p = NULL;
    int zero = 0;
    if (s->monitor) {
        zmq_socket_monitor(s->handle, NULL, 0);
        zmq_setsockopt(s->monitor, ZMQ_LINGER, &zero, sizeof zero);
        zmq_close(s->monitor);
    }
    zmq_setsockopt(s->handle, ZMQ_LINGER, &zero, sizeof zero);
    zmq_close(s->handle);
    free(s);
}

/* Whether a tcp:// endpoint listens on loopback only. */
static bool s_loopback(const char *endpoint)
{
    if (strncmp(endpoint, "tcp://", 6) != 0) return true;
    const char *host = endpoint + 6;
    return strncmp(host, "127.", 4) == 0 || strncmp(host, "localhost:", 10) == 0 ||
           strncmp(host, "[::1]:", 6) == 0;
}

zf_status_t zf_socket_bind(zf_socket_t *s, const char *endpoint, const char **bound)
{
    if (bound) *bound = NULL;
    if (!s->ctx->keys && !s_loopback(endpoint))
        zf_log_warn("security",
                    "listening on %s without keys: any host that reaches it may use it "
                    "(run with --keys DIR or ZFLOW_KEYS=DIR for CURVE security)",
                    endpoint);
    if (zmq_bind(s->handle, endpoint) != 0) {
        char what[S_ENDPOINT_MAX + 32];
        snprintf(what, sizeof what, "cannot bind '%s'", endpoint);
        return zf__zmq_error(errno, what);
    }
    size_t cap = sizeof s->endpoint;
    if (zmq_getsockopt(s->handle, ZMQ_LAST_ENDPOINT, s->endpoint, &cap) != 0)
        return zf_internal("bound '%s' but cannot read the endpoint back: %s", endpoint,
                           zmq_strerror(errno));
    s->endpoint[sizeof s->endpoint - 1] = '\0';
    if (bound) *bound = s->endpoint;
    return ZF_STATUS_OK;
}

zf_status_t zf_socket_connect(zf_socket_t *s, const char *endpoint)
{
    if (zmq_connect(s->handle, endpoint) == 0) return ZF_STATUS_OK;
    char what[S_ENDPOINT_MAX + 32];
    snprintf(what, sizeof what, "cannot connect to '%s'", endpoint);
    return zf__zmq_error(errno, what);
}

const char *zf_socket_endpoint(const zf_socket_t *s)
{
    return s->endpoint;
}

static zf_status_t s_setsockopt(zf_socket_t *s, int option, const void *value, size_t len,
                                const char *name)
{
    if (zmq_setsockopt(s->handle, option, value, len) == 0) return ZF_STATUS_OK;
    char what[64];
    snprintf(what, sizeof what, "cannot set %s", name);
    return zf__zmq_error(errno, what);
}

zf_status_t zf_socket_set_max_frame_size(zf_socket_t *s, int64_t bytes)
{
    return s_setsockopt(s, ZMQ_MAXMSGSIZE, &bytes, sizeof bytes, "ZMQ_MAXMSGSIZE");
}

zf_status_t zf_socket_set_hwm(zf_socket_t *s, int send_hwm, int recv_hwm)
{
    ZF_TRY(s_setsockopt(s, ZMQ_SNDHWM, &send_hwm, sizeof send_hwm, "ZMQ_SNDHWM"));
    return s_setsockopt(s, ZMQ_RCVHWM, &recv_hwm, sizeof recv_hwm, "ZMQ_RCVHWM");
}

zf_status_t zf_socket_set_send_timeout(zf_socket_t *s, int ms)
{
    ZF_TRY(s_setsockopt(s, ZMQ_SNDTIMEO, &ms, sizeof ms, "ZMQ_SNDTIMEO"));
    s->send_timeout_ms = ms;
    return ZF_STATUS_OK;
}

zf_status_t zf_socket_set_routing_id(zf_socket_t *s, const void *id, size_t len)
{
    if (len == 0 || len > 255 || ((const uint8_t *)id)[0] == 0)
        return zf_invalid_argument("a routing id must be 1 to 255 bytes and not start with a "
                                   "zero byte (got %zu bytes)",
                                   len);
    return s_setsockopt(s, ZMQ_ROUTING_ID, id, len, "ZMQ_ROUTING_ID");
}

zf_status_t zf_socket_set_router_mandatory(zf_socket_t *s, bool on)
{
    int v = on ? 1 : 0;
    return s_setsockopt(s, ZMQ_ROUTER_MANDATORY, &v, sizeof v, "ZMQ_ROUTER_MANDATORY");
}

zf_status_t zf_socket_secure_server(zf_socket_t *s, unsigned roles)
{
    const zf_keys_t *k = s->ctx->keys;
    if (!k) return ZF_STATUS_OK;
    int one = 1;
    char domain[32];
    snprintf(domain, sizeof domain, S_ZAP_DOMAIN "%u", roles);
    ZF_TRY(s_setsockopt(s, ZMQ_CURVE_SERVER, &one, sizeof one, "ZMQ_CURVE_SERVER"));
    ZF_TRY(s_setsockopt(s, ZMQ_CURVE_SECRETKEY, zf_keys_secret(k), ZF_KEY_Z85_LEN + 1,
                        "ZMQ_CURVE_SECRETKEY"));
    ZF_TRY(s_setsockopt(s, ZMQ_ZAP_DOMAIN, domain, strlen(domain), "ZMQ_ZAP_DOMAIN"));
    s->secure_server = true;
    return ZF_STATUS_OK;
}

zf_status_t zf_socket_secure_client(zf_socket_t *s, zf_role_t server_role)
{
    const zf_keys_t *k = s->ctx->keys;
    if (!k) return ZF_STATUS_OK;
    const char *server = zf_keys_role_public(k, server_role);
    if (!server)
        return zf_status_new(ZF_FAILED_PRECONDITION,
                             "cannot connect securely to a %s: the key directory %s has no "
                             "%s.pub",
                             zf_role_name(server_role), zf_keys_dir(k), zf_role_name(server_role));
    ZF_TRY(s_setsockopt(s, ZMQ_CURVE_SERVERKEY, server, ZF_KEY_Z85_LEN + 1, "ZMQ_CURVE_SERVERKEY"));
    ZF_TRY(s_setsockopt(s, ZMQ_CURVE_PUBLICKEY, zf_keys_public(k), ZF_KEY_Z85_LEN + 1,
                        "ZMQ_CURVE_PUBLICKEY"));
    ZF_TRY(s_setsockopt(s, ZMQ_CURVE_SECRETKEY, zf_keys_secret(k), ZF_KEY_Z85_LEN + 1,
                        "ZMQ_CURVE_SECRETKEY"));
    s->secure_client = true;
    return ZF_STATUS_OK;
}

bool zf_socket_is_secure_server(const zf_socket_t *s)
{
    return s->secure_server;
}

bool zf_socket_encrypts(const zf_socket_t *s)
{
    return s->secure_server || s->secure_client;
}

zf_status_t zf_socket_watch_handshakes(zf_socket_t *s)
{
    if (s->monitor) return ZF_STATUS_OK;
    char addr[64];
    snprintf(addr, sizeof addr, "inproc://zf-handshakes-%p", (void *)s);
    int events = ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL | ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL |
                 ZMQ_EVENT_HANDSHAKE_FAILED_AUTH | ZMQ_EVENT_HANDSHAKE_SUCCEEDED;
    if (zmq_socket_monitor(s->handle, addr, events) != 0)
        return zf__zmq_error(errno, "cannot monitor a socket");
    int err = 0;
    s->monitor = zmq_socket(s->ctx->handle, ZMQ_PAIR);
    if (!s->monitor || zmq_connect(s->monitor, addr) != 0) {
        err = errno;
        if (s->monitor) zmq_close(s->monitor);
        s->monitor = NULL;
        zmq_socket_monitor(s->handle, NULL, 0); /* stop the monitor: a retry starts afresh */
        return zf__zmq_error(err, "cannot watch a socket's handshakes");
    }
    return ZF_STATUS_OK;
}

zf_status_t zf_socket_handshake_failure(zf_socket_t *s)
{
    for (bool more = s->monitor != NULL; more;) {
        zmq_msg_t ev, ep;
        zmq_msg_init(&ev);
        zmq_msg_init(&ep);
        more = zmq_msg_recv(&ev, s->monitor, ZMQ_DONTWAIT) >= 0 &&
               zmq_msg_recv(&ep, s->monitor, ZMQ_DONTWAIT) >= 0;
        if (more && zmq_msg_size(&ev) >= 6) {
            const uint8_t *d = zmq_msg_data(&ev);
            uint16_t event;
            uint32_t value;
            memcpy(&event, d, sizeof event);
            memcpy(&value, d + 2, sizeof value);
            s->handshake_event = event == ZMQ_EVENT_HANDSHAKE_SUCCEEDED ? 0 : event;
            s->handshake_value = (int)value;
            size_t len = zmq_msg_size(&ep);
            if (len >= sizeof s->handshake_endpoint) len = sizeof s->handshake_endpoint - 1;
            memcpy(s->handshake_endpoint, zmq_msg_data(&ep), len);
            s->handshake_endpoint[len] = '\0';
        }
        zmq_msg_close(&ev);
        zmq_msg_close(&ep);
    }
    if (!s->handshake_event) return ZF_STATUS_OK;
    bool keys = s->ctx->keys != NULL;
    const char *hint = keys ? "is this key trusted there, and does it use these keys?"
                            : "a secure service needs keys: --keys DIR or ZFLOW_KEYS=DIR";
    if (s->handshake_event == ZMQ_EVENT_HANDSHAKE_FAILED_AUTH)
        return zf_status_new(ZF_UNAUTHENTICATED,
                             "%s refused this process's CURVE key (ZAP status %d); %s",
                             s->handshake_endpoint, s->handshake_value, hint);
    if (s->handshake_value == ZMQ_PROTOCOL_ERROR_ZMTP_MECHANISM_MISMATCH)
        return zf_status_new(ZF_UNAUTHENTICATED, "the handshake with %s failed: it %s (%s)",
                             s->handshake_endpoint,
                             keys ? "does not use CURVE keys" : "requires CURVE keys",
                             keys ? "it runs without keys, or the keys do not match" : hint);
    return zf_status_new(ZF_UNAUTHENTICATED, "the handshake with %s failed (error 0x%x); %s",
                         s->handshake_endpoint, (unsigned)s->handshake_value, hint);
}

void *zf_socket_handle(const zf_socket_t *s)
{
    return s->handle;
}

static int64_t s_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

zf_status_t zf_socket_wait_readable(zf_socket_t *s, int timeout_ms)
{
    int64_t deadline = timeout_ms < 0 ? -1 : s_now_ms() + timeout_ms;
    for (;;) {
        long left = deadline < 0 ? -1 : (long)(deadline - s_now_ms());
        if (deadline >= 0 && left < 0) left = 0;
        zmq_pollitem_t item = {s->handle, 0, ZMQ_POLLIN, 0};
        int rc = zmq_poll(&item, 1, left);
        if (rc > 0 && (item.revents & ZMQ_POLLIN)) return ZF_STATUS_OK;
        if (rc < 0 && errno != EINTR) return zf__zmq_error(errno, "waiting for a message");
        if (rc == 0 && deadline >= 0 && s_now_ms() >= deadline)
            return zf_status_new(ZF_DEADLINE_EXCEEDED, "no message within %d ms", timeout_ms);
    }
}

int zf_socket_drain(zf_socket_t *s)
{
    int n = 0, more = 0;
    size_t len = sizeof more;
    if (zmq_getsockopt(s->handle, ZMQ_RCVMORE, &more, &len) != 0) return 0;
    zmq_msg_t m;
    zmq_msg_init(&m);
    /* The rest of a multipart message arrives with its first frame, so a
     * non-blocking receive finds it; stopping on any error cannot hang. */
    while (more && zmq_msg_recv(&m, s->handle, ZMQ_DONTWAIT) >= 0) {
        n++;
        more = zmq_msg_more(&m);
    }
    zmq_msg_close(&m);
    return n;
}

/* poll can report a message that a later look finds gone, so EAGAIN goes
 * back to waiting for what is left of the timeout. */
zf_status_t zf__socket_recv_first(zf_socket_t *s, int timeout_ms, zmq_msg_t *msg)
{
    /* A message already queued needs neither a clock nor a poll. */
    if (zmq_msg_recv(msg, s->handle, ZMQ_DONTWAIT) >= 0) return ZF_STATUS_OK;
    if (errno != EAGAIN && errno != EINTR) return zf__zmq_error(errno, "receiving a message");
    int64_t deadline = timeout_ms < 0 ? -1 : s_now_ms() + timeout_ms;
    for (;;) {
        int left = deadline < 0 ? -1 : (int)(deadline - s_now_ms());
        if (deadline >= 0 && left < 0) left = 0;
        zf_status_t st = zf_socket_wait_readable(s, left);
        if (st.code == ZF_DEADLINE_EXCEEDED) {
            zf_status_clear(&st);
            return zf_status_new(ZF_DEADLINE_EXCEEDED, "no message within %d ms", timeout_ms);
        }
        ZF_TRY(st);
        if (zmq_msg_recv(msg, s->handle, ZMQ_DONTWAIT) >= 0) return ZF_STATUS_OK;
        if (errno != EAGAIN && errno != EINTR) return zf__zmq_error(errno, "receiving a message");
    }
}

/* ---- routes ------------------------------------------------------------------ */

void zf_route_clear(zf_route_t *route)
{
    if (!route) return;
    route->n = 0;
    route->request_id = 0;
    route->secure = false;
    route->peer[0] = '\0';
}

zf_status_t zf_route_authorize(const zf_route_t *route, unsigned roles, const char *what)
{
    if (!route->secure) return ZF_STATUS_OK;
    zf_role_t role = zf_role_of_identity(route->peer);
    if (role != ZF_ROLE_NONE && (roles & (unsigned)role)) return ZF_STATUS_OK;
    char allowed[64] = "";
    static const zf_role_t all[] = {ZF_ROLE_BROKER, ZF_ROLE_SCHEDULER, ZF_ROLE_EXECUTOR,
                                    ZF_ROLE_CLIENT};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) {
        if (!(roles & (unsigned)all[i])) continue;
        size_t len = strlen(allowed);
        snprintf(allowed + len, sizeof allowed - len, "%s%s", len ? " or " : "",
                 zf_role_name(all[i]));
    }
    const char *peer = route->peer[0] ? route->peer : "an unidentified peer";
    zf_log_warn("security", "refused %s from %s: only %s keys may send it", what, peer, allowed);
    return zf_status_new(ZF_PERMISSION_DENIED,
                         "%s is not allowed for %s (only %s keys may send it)", what, peer,
                         allowed);
}

zf_status_t zf_route_push(zf_route_t *route, const void *frame, size_t len)
{
    if (route->n >= ZF_ROUTE_MAX_FRAMES)
        return zf_invalid_argument("a route holds at most %d frames", ZF_ROUTE_MAX_FRAMES);
    if (len > ZF_ROUTE_MAX_FRAME_BYTES)
        return zf_invalid_argument("routing frame %d is %zu bytes; at most %d are allowed",
                                   route->n + 1, len, ZF_ROUTE_MAX_FRAME_BYTES);
    if (len) memcpy(route->frame[route->n], frame, len);
    route->len[route->n++] = len;
    return ZF_STATUS_OK;
}

bool zf_route_equal(const zf_route_t *a, const zf_route_t *b)
{
    if (a->n != b->n) return false;
    for (int i = 0; i < a->n; i++)
        if (a->len[i] != b->len[i] || memcmp(a->frame[i], b->frame[i], a->len[i]) != 0)
            return false;
    return true;
}

/* ---- envelopes ------------------------------------------------------------------ */

static zf_status_t s_send_error(const zf_socket_t *s, int err)
{
    if (err == EAGAIN)
        return zf_status_new(ZF_DEADLINE_EXCEEDED, "send timed out after %d ms (peer not reading)",
                             s->send_timeout_ms);
    return zf__zmq_error(err, "sending an envelope");
}

/* Sends route's frames, then msg, which it closes. */
static zf_status_t s_send_routed(zf_socket_t *s, const zf_route_t *route, zmq_msg_t *msg)
{
    for (int i = 0; route && i < route->n; i++) {
        if (zmq_send(s->handle, route->frame[i], route->len[i], ZMQ_SNDMORE) < 0) {
            int err = errno;
            zmq_msg_close(msg);
            return s_send_error(s, err);
        }
    }
    if (zmq_msg_send(msg, s->handle, 0) < 0) {
        int err = errno;
        zmq_msg_close(msg);
        return s_send_error(s, err);
    }
    return ZF_STATUS_OK;
}

zf_status_t zf_envelope_send(zf_socket_t *s, const zf_route_t *route, const Zflow__Envelope *env)
{
    if (env->body_case == ZFLOW__ENVELOPE__BODY__NOT_SET)
        return zf_invalid_argument("envelope (request %" PRIu64 ") has no body", env->request_id);
    Zflow__Envelope copy = *env; /* shallow: only the version may change */
    if (copy.version == ZFLOW__PROTOCOL_VERSION__PROTOCOL_VERSION_UNSPECIFIED)
        copy.version = ZFLOW__PROTOCOL_VERSION__PROTOCOL_VERSION_1;
    size_t len = zflow__envelope__get_packed_size(&copy);
    zmq_msg_t msg;
    if (zmq_msg_init_size(&msg, len) != 0) return zf_out_of_memory("an envelope frame");
    zflow__envelope__pack(&copy, zmq_msg_data(&msg));
    return s_send_routed(s, route, &msg);
}

zf_status_t zf_envelope_send_packed(zf_socket_t *s, const zf_route_t *route,
                                    struct zmq_msg_t *frame)
{
    zmq_msg_t msg;
    zmq_msg_init(&msg);
    if (zmq_msg_copy(&msg, frame) != 0) {
        int err = errno;
        zmq_msg_close(&msg);
        return zf__zmq_error(err, "sharing an envelope frame");
    }
    return s_send_routed(s, route, &msg);
}

size_t zf_envelope_put_head(uint8_t *head, uint64_t request_id, Zflow__Envelope__BodyCase body,
                            size_t len)
{
    size_t n = zf_proto_put_varint(head, 1 << 3);
    n += zf_proto_put_varint(head + n, ZFLOW__PROTOCOL_VERSION__PROTOCOL_VERSION_1);
    n += zf_proto_put_varint(head + n, 2 << 3);
    n += zf_proto_put_varint(head + n, request_id);
    n += zf_proto_put_varint(head + n, (uint64_t)body << 3 | 2);
    n += zf_proto_put_varint(head + n, len);
    return n;
}

static void s_free_frame(void *data, void *hint)
{
    (void)hint;
    free(data);
}

zf_status_t zf_envelope_frame(struct zmq_msg_t *out, uint64_t request_id,
                              Zflow__Envelope__BodyCase body, const void *bytes, size_t len)
{
    zmq_msg_close(out);
    zmq_msg_init(out);
    uint8_t *buf =
        len <= SIZE_MAX - ZF_ENVELOPE_HEAD_MAX ? malloc(ZF_ENVELOPE_HEAD_MAX + len) : NULL;
    if (!buf) return zf_out_of_memory("an envelope frame");
    size_t n = zf_envelope_put_head(buf, request_id, body, len);
    if (len) memcpy(buf + n, bytes, len);
    if (zmq_msg_init_data(out, buf, n + len, s_free_frame, NULL) != 0) {
        free(buf);
        zmq_msg_init(out);
        return zf_out_of_memory("an envelope frame");
    }
    return ZF_STATUS_OK;
}

/* The request id of an envelope that does not unpack, read from its top
 * level when that much is well-formed (0 otherwise), so that its sender
 * still hears about it: a large request passed on undecoded reaches its
 * first decoder here. */
static uint64_t s_salvage_request_id(const void *data, size_t len)
{
    const uint8_t *p = data, *end = p + len;
    uint64_t id = 0;
    zf_proto_field_t f;
    while (p < end && zf_proto_next_field(&p, end, &f))
        if (f.number == 2 && f.wire == 0) id = f.value;
    return id;
}

zf_status_t zf_envelope_decode(const void *data, size_t len, Zflow__Envelope **out,
                               uint64_t *request_id)
{
    *out = NULL;
    if (request_id) *request_id = 0;
    if (len == 0) return zf_invalid_argument("malformed envelope: the frame is empty");
    zf_status_t s = zf_proto_check_wire(&zflow__envelope__descriptor, data, len);
    if (!zf_ok(s)) {
        if (request_id) *request_id = s_salvage_request_id(data, len);
        return zf_status_prefix(s, "malformed envelope");
    }
    Zflow__Envelope *env = zflow__envelope__unpack(NULL, len, data);
    if (!env) {
        if (request_id) *request_id = s_salvage_request_id(data, len);
        return zf_invalid_argument("malformed envelope: protobuf unpack failed (a field has "
                                   "invalid contents)");
    }
    if (request_id) *request_id = env->request_id;
    if (env->version != ZFLOW__PROTOCOL_VERSION__PROTOCOL_VERSION_1) {
        int v = (int)env->version;
        zflow__envelope__free_unpacked(env, NULL);
        return zf_status_new(ZF_FAILED_PRECONDITION,
                             "protocol version %d is not supported (this side speaks %d)", v,
                             ZFLOW__PROTOCOL_VERSION__PROTOCOL_VERSION_1);
    }
    if (env->body_case == ZFLOW__ENVELOPE__BODY__NOT_SET) {
        uint64_t id = env->request_id;
        zflow__envelope__free_unpacked(env, NULL);
        return zf_invalid_argument("envelope (request %" PRIu64 ") has no body, or one this "
                                   "side does not know",
                                   id);
    }
    *out = env;
    return ZF_STATUS_OK;
}

/* Files frame number `index` (1-based) of a message as a routing frame;
 * the first fault is kept in *fault and later frames are only counted. */
static void s_route_frame(zf_route_t *route, zmq_msg_t *frame, int index, zf_status_t *fault)
{
    if (!zf_ok(*fault) || index > ZF_ROUTE_MAX_FRAMES) return;
    size_t len = zmq_msg_size(frame);
    if (len > ZF_ROUTE_MAX_FRAME_BYTES) {
        *fault = zf_invalid_argument("routing frame %d is %zu bytes; at most %d are allowed", index,
                                     len, ZF_ROUTE_MAX_FRAME_BYTES);
        return;
    }
    *fault = zf_route_push(route, zmq_msg_data(frame), len);
}

zf_status_t zf_envelope_recv(zf_socket_t *s, int timeout_ms, zf_route_t *route,
                             Zflow__Envelope **env)
{
    *env = NULL;
    zf_route_clear(route);
    zmq_msg_t frame;
    zmq_msg_init(&frame);
    zf_status_t st = zf__socket_recv_first(s, timeout_ms, &frame);
    if (!zf_ok(st)) {
        zmq_msg_close(&frame);
        return st;
    }
    zf_status_t fault = ZF_STATUS_OK;
    int n = 1;
    while (zmq_msg_more(&frame)) {
        s_route_frame(route, &frame, n, &fault);
        if (zmq_msg_recv(&frame, s->handle, ZMQ_DONTWAIT) < 0) {
            /* Only a terminating context interrupts a multipart message. */
            zf_status_clear(&fault);
            zmq_msg_close(&frame);
            return zf__zmq_error(errno, "receiving an envelope");
        }
        n++;
    }
    route->secure = s->secure_server;
    if (s->secure_server) {
        const char *user = zmq_msg_gets(&frame, "User-Id");
        snprintf(route->peer, sizeof route->peer, "%s", user ? user : "");
    }
    if (zf_ok(fault) && n - 1 > ZF_ROUTE_MAX_FRAMES)
        fault = zf_invalid_argument("message has %d routing frames; at most %d may precede the "
                                    "envelope",
                                    n - 1, ZF_ROUTE_MAX_FRAMES);
    if (zf_ok(fault))
        fault =
            zf_envelope_decode(zmq_msg_data(&frame), zmq_msg_size(&frame), env, &route->request_id);
    zmq_msg_close(&frame);
    return fault;
}

zf_status_t zf_status_to_proto(const zf_status_t *status, Zflow__Status **out)
{
    *out = NULL;
    Zflow__Status *p = malloc(sizeof *p);
    if (!p) return zf_out_of_memory("a Status");
    zflow__status__init(p);
    p->code = (int32_t)status->code;
    const char *msg = zf_status_msg(status);
    if (status->code != ZF_OK && msg[0]) {
        p->message = strdup(msg);
        if (!p->message) {
            free(p);
            return zf_out_of_memory("a Status message");
        }
    }
    *out = p;
    return ZF_STATUS_OK;
}

zf_status_t zf_status_from_proto(const Zflow__Status *proto)
{
    if (!proto || proto->code == ZF_OK) return ZF_STATUS_OK;
    const char *msg = proto->message ? proto->message : "";
    if (proto->code < 0 || proto->code > ZF_CODE_MAX)
        return zf_status_new(ZF_UNKNOWN, "status code %d out of range: %s", (int)proto->code, msg);
    return zf_status_new((zf_code_t)proto->code, "%s", msg);
}

const char *zf_envelope_case_name(Zflow__Envelope__BodyCase body)
{
    const ProtobufCFieldDescriptor *f =
        protobuf_c_message_descriptor_get_field(&zflow__envelope__descriptor, (unsigned)body);
    if (body <= 2 || !f || !f->descriptor) return "a message without a body";
    return ((const ProtobufCMessageDescriptor *)f->descriptor)->short_name;
}

const char *zf_envelope_body_name(const Zflow__Envelope *env)
{
    return zf_envelope_case_name(env->body_case);
}

zf_status_t zf_envelope_status_reply(uint64_t request_id, const zf_status_t *status,
                                     Zflow__Envelope **out)
{
    *out = NULL;
    Zflow__Envelope *env = malloc(sizeof *env);
    Zflow__StatusReply *reply = malloc(sizeof *reply);
    if (!env || !reply) {
        free(env);
        free(reply);
        return zf_out_of_memory("a status reply");
    }
    zflow__envelope__init(env);
    zflow__status_reply__init(reply);
    env->version = ZFLOW__PROTOCOL_VERSION__PROTOCOL_VERSION_1;
    env->request_id = request_id;
    env->body_case = ZFLOW__ENVELOPE__BODY_STATUS_REPLY;
    env->status_reply = reply;
    zf_status_t s = zf_status_to_proto(status, &reply->status);
    if (!zf_ok(s)) {
        zflow__envelope__free_unpacked(env, NULL);
        return s;
    }
    *out = env;
    return ZF_STATUS_OK;
}

zf_status_t zf_envelope_send_status(zf_socket_t *s, const zf_route_t *route, uint64_t request_id,
                                    const zf_status_t *status)
{
    Zflow__Envelope *env = NULL;
    ZF_TRY(zf_envelope_status_reply(request_id, status, &env));
    zf_status_t st = zf_envelope_send(s, route, env);
    zflow__envelope__free_unpacked(env, NULL);
    return st;
}
