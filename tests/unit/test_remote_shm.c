/* Tests for the shared-memory path of executor/rendezvous/remote (remote.h,
 * "Same-host host memory"): transports on 127.0.0.1 ephemeral ports, in
 * this process or in a forked one. A large host tensor goes through the
 * sender's arena and arrives intact over the mapping; small tensors, peers
 * on other hosts and a full arena take the byte path; the receiver's
 * release, the hold limit (once no other process maps the arena) and the
 * sweep of dead processes' segments free everything; hostile offers are
 * refused with a reason. Small tensors sent in a send batch travel
 * together beside big ones in the arena; a malformed batch entry aborts
 * its step naming its key, a batch that does not add up is dropped whole. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <cmocka.h>
#include <zmq.h>

#include "common/log.h"
#include "common/tensor_frame.h"
#include "common/transport.h"
#include "executor/rendezvous/remote.h"
#include "batch_test_util.h"
#include "test_util.h"

#define WAIT_MS 5000
#define BIG     (256 * 1024) /* floats: 1 MiB */

#define DEV_A  "/job:localhost/replica:0/task:0/device:CPU:0"
#define DEV_B  "/job:localhost/replica:0/task:0/device:CPU:1"
#define DEV_C  "/job:localhost/replica:0/task:0/device:CPU:2"
#define KEY_AB DEV_A ";0000000000000001;" DEV_B ";x:0;0:0"

typedef struct {
    zf_zctx_t *ctx;
    zf_rendezvous_mgr_t *mgr_a, *mgr_b, *mgr_c;
    zf_remote_t *a, *b, *c; /* c: made by the tests that need a third */
} s_pair_t;

static int s_setup(void **state)
{
    s_pair_t *p = calloc(1, sizeof *p);
    ASSERT_OK(zf_zctx_new(&p->ctx));
    ASSERT_OK(zf_rendezvous_mgr_new(&p->mgr_a));
    ASSERT_OK(zf_rendezvous_mgr_new(&p->mgr_b));
    ASSERT_OK(zf_remote_new(p->ctx, p->mgr_a, NULL, &p->a));
    ASSERT_OK(zf_remote_new(p->ctx, p->mgr_b, NULL, &p->b));
    ASSERT_OK(zf_remote_attach(p->a, DEV_A));
    ASSERT_OK(zf_remote_attach(p->b, DEV_B));
    ASSERT_OK(zf_remote_set_peer(p->a, DEV_B, zf_remote_endpoint(p->b)));
    ASSERT_OK(zf_remote_set_peer(p->b, DEV_A, zf_remote_endpoint(p->a)));
    *state = p;
    return 0;
}

static int s_teardown(void **state)
{
    s_pair_t *p = *state;
    zf_remote_destroy(&p->a);
    zf_remote_destroy(&p->b);
    zf_remote_destroy(&p->c);
    zf_rendezvous_mgr_destroy(&p->mgr_a);
    zf_rendezvous_mgr_destroy(&p->mgr_b);
    zf_rendezvous_mgr_destroy(&p->mgr_c);
    zf_zctx_destroy(&p->ctx);
    free(p);
    return 0;
}

/* A float [n] tensor whose element i is i * scale. */
static zf_tensor_t *s_ramp(int64_t n, float scale)
{
    zf_tensor_t *t = NULL;
    zf_shape_t shape = ZF_SHAPE(n);
    ASSERT_OK(zf_tensor_new(ZF_FLOAT, &shape, &t));
    float *v = zf_tensor_data(t);
    for (int64_t i = 0; i < n; i++) v[i] = (float)i * scale;
    return t;
}

static void s_sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* Waits until the counter at offset field of zf_remote_shm_stats() equals
 * want; fails after WAIT_MS. */
static void s_wait_shm(zf_remote_t *r, size_t field, uint64_t want)
{
    uint64_t got = 0;
    for (int waited = 0; waited < WAIT_MS; waited += 5) {
        zf_remote_shm_stats_t st = zf_remote_shm_stats(r);
        got = *(uint64_t *)((char *)&st + field);
        if (got == want) return;
        s_sleep_ms(5);
    }
    fail_msg("shm counter at offset %zu is %llu, never %llu", field, (unsigned long long)got,
             (unsigned long long)want);
}

#define WAIT_SHM(r, field, want) s_wait_shm((r), offsetof(zf_remote_shm_stats_t, field), (want))

/* Sends t from A under KEY_AB in step_id; the hook pushes it to B. */
static void s_send(zf_rendezvous_mgr_t *mgr, int64_t step_id, zf_tensor_t *t)
{
    zf_rendezvous_t *r = NULL;
    ASSERT_OK(zf_rendezvous_mgr_find(mgr, step_id, &r));
    ASSERT_OK(zf_rendezvous_send(r, KEY_AB, t, false));
    zf_rendezvous_unref(&r);
}

/* B's value of KEY_AB in step_id (a new reference). */
static zf_tensor_t *s_recv(zf_rendezvous_mgr_t *mgr, int64_t step_id)
{
    zf_rendezvous_t *r = NULL;
    ASSERT_OK(zf_rendezvous_mgr_find(mgr, step_id, &r));
    zf_tensor_t *got = NULL;
    bool dead = true;
    ASSERT_OK(zf_rendezvous_recv(r, KEY_AB, WAIT_MS, &got, &dead));
    assert_false(dead);
    zf_rendezvous_unref(&r);
    return got;
}

/* Whether /dev/shm holds the segment name ("/zflow-..."). */
static bool s_segment_exists(const char *name)
{
    char path[160];
    snprintf(path, sizeof path, "/dev/shm%s", name);
    return access(path, F_OK) == 0;
}

static void test_shm_carries_a_big_tensor_intact_and_its_release_frees_the_arena(void **state)
{
    s_pair_t *p = *state;
    zf_tensor_t *t = s_ramp(BIG, 0.5f);
    s_send(p->mgr_a, 1, t);
    zf_tensor_t *got = s_recv(p->mgr_b, 1);
    assert_true(zf_tensor_equal(got, t));
    zf_remote_shm_stats_t sa = zf_remote_shm_stats(p->a);
    assert_int_equal(sa.shm_offered, 1);
    assert_int_equal(sa.bytes_sent, 0);
    assert_int_equal(sa.shm_fallbacks, 0);
    assert_int_equal(sa.shm_segments, 1);
    assert_true(sa.shm_bytes_in_use >= (uint64_t)BIG * sizeof(float));
    assert_int_equal(zf_remote_shm_stats(p->b).shm_received, 1);
    char name[128];
    snprintf(name, sizeof name, "%s", zf_remote_shm_name(p->a));
    assert_int_equal(strncmp(name, ZF_REMOTE_SHM_PREFIX, strlen(ZF_REMOTE_SHM_PREFIX)), 0);
    assert_true(s_segment_exists(name));
    /* the sender's copy may change now: the receiver's bytes are the arena's */
    ((float *)zf_tensor_data(t))[7] = -1.0f;
    assert_true(((const float *)zf_tensor_data(got))[7] == 3.5f);
    zf_tensor_unref(&got); /* the release answers A, which frees the block */
    WAIT_SHM(p->a, shm_released, 1);
    WAIT_SHM(p->a, shm_bytes_in_use, 0);
    zf_remote_destroy(&p->a);
    assert_false(s_segment_exists(name));
    assert_int_equal(zf_test_shm_segments_of((long)getpid()), 0);
    zf_tensor_unref(&t);
}

static void test_shm_small_tensors_and_peers_on_other_hosts_take_the_byte_path(void **state)
{
    s_pair_t *p = *state;
    zf_tensor_t *small = s_ramp(16, 1.0f);
    s_send(p->mgr_a, 2, small);
    zf_tensor_t *got = s_recv(p->mgr_b, 2);
    assert_true(zf_tensor_equal(got, small));
    zf_tensor_unref(&got);
    zf_remote_set_peer_host(p->a, DEV_B, "another-host:boot");
    zf_tensor_t *big = s_ramp(BIG, 2.0f);
    s_send(p->mgr_a, 3, big);
    got = s_recv(p->mgr_b, 3);
    assert_true(zf_tensor_equal(got, big));
    zf_tensor_unref(&got);
    zf_remote_shm_stats_t sa = zf_remote_shm_stats(p->a);
    assert_int_equal(sa.bytes_sent, 2);
    assert_int_equal(sa.shm_offered, 0);
    assert_int_equal(sa.shm_segments, 0); /* never made */
    /* the same host again: the arena */
    zf_remote_set_peer_host(p->a, DEV_B, zf_remote_host_id(p->b));
    s_send(p->mgr_a, 4, big);
    got = s_recv(p->mgr_b, 4);
    assert_true(zf_tensor_equal(got, big));
    assert_int_equal(zf_remote_shm_stats(p->a).shm_offered, 1);
    zf_tensor_unref(&got);
    zf_tensor_unref(&big);
    zf_tensor_unref(&small);
}

static void test_shm_receiver_on_another_host_refuses_and_gets_the_bytes(void **state)
{
    s_pair_t *p = *state;
    zf_remote_set_host_id(p->b, "another-host:boot");
    zf_tensor_t *big = s_ramp(BIG, 3.0f);
    s_send(p->mgr_a, 5, big);
    zf_tensor_t *got = s_recv(p->mgr_b, 5);
    assert_true(zf_tensor_equal(got, big));
    zf_tensor_unref(&got);
    WAIT_SHM(p->a, shm_refused, 1);
    WAIT_SHM(p->a, bytes_sent, 1);
    assert_int_equal(zf_remote_shm_stats(p->b).shm_rejected, 1);
    s_send(p->mgr_a, 6, big); /* bytes from the start now */
    got = s_recv(p->mgr_b, 6);
    assert_true(zf_tensor_equal(got, big));
    zf_tensor_unref(&got);
    WAIT_SHM(p->a, bytes_sent, 2);
    assert_int_equal(zf_remote_shm_stats(p->a).shm_offered, 1);
    WAIT_SHM(p->a, shm_bytes_in_use, 0);
    zf_tensor_unref(&big);
}

static void test_shm_full_arena_falls_back_to_bytes_and_the_next_transfer_works(void **state)
{
    s_pair_t *p = *state;
    zf_remote_set_shm(p->a, 1 << 20, 0);
    zf_tensor_t *t1 = s_ramp(192 * 1024, 1.0f), *t2 = s_ramp(192 * 1024, 2.0f); /* 768 KiB */
    s_send(p->mgr_a, 7, t1);
    zf_tensor_t *got1 = s_recv(p->mgr_b, 7); /* held: the arena stays full */
    s_send(p->mgr_a, 8, t2);
    zf_tensor_t *got2 = s_recv(p->mgr_b, 8);
    assert_true(zf_tensor_equal(got1, t1));
    assert_true(zf_tensor_equal(got2, t2));
    zf_remote_shm_stats_t sa = zf_remote_shm_stats(p->a);
    assert_int_equal(sa.shm_offered, 1);
    assert_int_equal(sa.shm_fallbacks, 1);
    assert_int_equal(sa.bytes_sent, 1);
    zf_tensor_unref(&got1);
    zf_tensor_unref(&got2);
    WAIT_SHM(p->a, shm_bytes_in_use, 0);
    s_send(p->mgr_a, 9, t2);
    got2 = s_recv(p->mgr_b, 9);
    assert_true(zf_tensor_equal(got2, t2));
    assert_int_equal(zf_remote_shm_stats(p->a).shm_offered, 2);
    zf_tensor_unref(&got2);
    WAIT_SHM(p->a, shm_bytes_in_use, 0);
    /* a tensor larger than the whole arena goes as bytes too */
    zf_tensor_t *huge = s_ramp(512 * 1024, 1.0f);
    s_send(p->mgr_a, 10, huge);
    got2 = s_recv(p->mgr_b, 10);
    assert_true(zf_tensor_equal(got2, huge));
    assert_int_equal(zf_remote_shm_stats(p->a).shm_fallbacks, 2);
    zf_tensor_unref(&got2);
    zf_tensor_unref(&huge);
    zf_tensor_unref(&t1);
    zf_tensor_unref(&t2);
}

static void test_shm_offer_never_answered_is_freed_at_the_hold_limit(void **state)
{
    s_pair_t *p = *state;
    /* B's device is served by a socket that takes offers and never maps them */
    zf_socket_t *mute = NULL;
    const char *ep = NULL;
    ASSERT_OK(zf_socket_new(p->ctx, ZF_SOCKET_PULL, &mute));
    ASSERT_OK(zf_socket_bind(mute, "tcp://127.0.0.1:*", &ep));
    ASSERT_OK(zf_remote_set_peer(p->a, DEV_B, ep));
    zf_remote_set_ipc_hold_ms(p->a, 1000);
    zf_tensor_t *t = s_ramp(BIG, 1.0f);
    s_send(p->mgr_a, 11, t);
    zf_tensor_frame_t f;
    ASSERT_OK(zf_tensor_frame_recv(mute, WAIT_MS, &f));
    assert_non_null(f.offer);
    assert_true(f.offer->is_shm);
    zf_tensor_frame_clear(&f);
    assert_true(zf_remote_shm_stats(p->a).shm_bytes_in_use > 0);
    assert_int_equal(zf_remote_expire(p->a, zf_remote_now_ms() + 1000), 1);
    zf_remote_shm_stats_t sa = zf_remote_shm_stats(p->a);
    assert_int_equal(sa.shm_expired, 1);
    assert_int_equal(sa.shm_bytes_in_use, 0);
    zf_socket_destroy(&mute);
    zf_tensor_unref(&t);
}

static void test_shm_unanswered_block_a_receiver_maps_outlives_the_hold_limit(void **state)
{
    s_pair_t *p = *state;
    zf_remote_set_ipc_hold_ms(p->a, 1000);
    zf_tensor_t *t = s_ramp(BIG, 1.0f);
    s_send(p->mgr_a, 13, t);
    zf_tensor_t *got = s_recv(p->mgr_b, 13); /* B reads it in place, for as long as it likes */
    int64_t later = zf_remote_now_ms() + 1000;
    assert_int_equal(zf_remote_expire(p->a, later), 0);
    assert_true(zf_remote_shm_stats(p->a).shm_bytes_in_use > 0);
    assert_int_equal(zf_remote_shm_stats(p->a).shm_expired, 0);
    assert_true(zf_tensor_equal(got, t));
    zf_tensor_unref(&got); /* the answer frees it */
    WAIT_SHM(p->a, shm_released, 1);
    WAIT_SHM(p->a, shm_bytes_in_use, 0);
    zf_tensor_unref(&t);
}

static void test_shm_step_cleanup_keeps_blocks_until_the_receiver_lets_go(void **state)
{
    s_pair_t *p = *state;
    zf_tensor_t *t = s_ramp(BIG, 1.0f);
    s_send(p->mgr_a, 12, t);
    zf_tensor_t *got = s_recv(p->mgr_b, 12);
    zf_remote_cleanup_step(p->a, 12, NULL);
    zf_remote_cleanup_step(p->b, 12, NULL);
    assert_true(zf_remote_shm_stats(p->a).shm_bytes_in_use > 0); /* got still reads it */
    assert_true(zf_tensor_equal(got, t));
    zf_tensor_unref(&got);
    WAIT_SHM(p->a, shm_released, 1);
    WAIT_SHM(p->a, shm_bytes_in_use, 0);
    zf_tensor_unref(&t);
}

/* ---- hostile offers ------------------------------------------------------- */

/* The test pushes offers to B as A would and reads B's replies on its own
 * PULL socket, which B knows as A's endpoint. */
typedef struct {
    zf_zctx_t *ctx;
    zf_rendezvous_mgr_t *mgr;
    zf_remote_t *b;
    zf_socket_t *push, *pull;
} s_rig_t;

static int s_rig_setup(void **state)
{
    s_rig_t *g = calloc(1, sizeof *g);
    ASSERT_OK(zf_zctx_new(&g->ctx));
    ASSERT_OK(zf_rendezvous_mgr_new(&g->mgr));
    ASSERT_OK(zf_remote_new(g->ctx, g->mgr, NULL, &g->b));
    ASSERT_OK(zf_remote_attach(g->b, DEV_B));
    ASSERT_OK(zf_socket_new(g->ctx, ZF_SOCKET_PULL, &g->pull));
    const char *ep = NULL;
    ASSERT_OK(zf_socket_bind(g->pull, "tcp://127.0.0.1:*", &ep));
    ASSERT_OK(zf_remote_set_peer(g->b, DEV_A, ep));
    ASSERT_OK(zf_socket_new(g->ctx, ZF_SOCKET_PUSH, &g->push));
    ASSERT_OK(zf_socket_connect(g->push, zf_remote_endpoint(g->b)));
    *state = g;
    return 0;
}

static int s_rig_teardown(void **state)
{
    s_rig_t *g = *state;
    zf_socket_destroy(&g->push);
    zf_socket_destroy(&g->pull);
    zf_remote_destroy(&g->b);
    zf_rendezvous_mgr_destroy(&g->mgr);
    zf_zctx_destroy(&g->ctx);
    free(g);
    return 0;
}

/* Offers a float [2] at offset in segment name from host as offer id, and
 * expects B to refuse it with a reason containing why. */
static void s_expect_refused(s_rig_t *g, const char *name, uint64_t offset, const char *host,
                             uint64_t id, const char *why)
{
    zf_tensor_frame_shm_t shm = {.offset = offset, .nbytes = 8, .id = id};
    snprintf(shm.name, sizeof shm.name, "%s", name);
    snprintf(shm.host, sizeof shm.host, "%s", host);
    static zf_tensor_frame_header_t h;
    zf_shape_t shape = ZF_SHAPE(2);
    ASSERT_OK(zf_tensor_frame_header_for_shm(KEY_AB, 30, ZF_FLOAT, &shape, &shm, &h));
    ASSERT_OK(zf_tensor_frame_send_shm(g->push, &h));
    zf_tensor_frame_t f;
    ASSERT_OK(zf_tensor_frame_recv(g->pull, WAIT_MS, &f));
    assert_non_null(f.reply);
    assert_int_equal(f.reply->id, id);
    assert_false(f.reply->accepted);
    if (!strstr(f.reply->why, why)) fail_msg("reply reason '%s' lacks '%s'", f.reply->why, why);
    zf_tensor_frame_clear(&f);
}

static void test_shm_refuses_hostile_offers_with_a_reason_and_keeps_working(void **state)
{
    s_rig_t *g = *state;
    const char *host = zf_remote_host_id(g->b);
    char mine[64];
    snprintf(mine, sizeof mine, ZF_REMOTE_SHM_PREFIX "%ld-00000000000000ab", (long)getpid());
    int fd = shm_open(mine, O_RDWR | O_CREAT | O_EXCL, 0600);
    assert_true(fd >= 0);
    assert_int_equal(ftruncate(fd, 4096), 0);
    close(fd);
    s_expect_refused(g, mine, 0, "another-host:boot", 1, "is not this host");
    s_expect_refused(g, "/etc-passwd", 0, host, 2, "is not a zflow segment");
    s_expect_refused(g, "/zflow-../../x", 0, host, 3, "is not a zflow segment");
    s_expect_refused(g, "/zflow-1-ff/x", 0, host, 4, "is not a zflow segment");
    s_expect_refused(g, "/zflow-999999999-ff", 0, host, 5, "cannot open");
    s_expect_refused(g, mine, 4096, host, 6, "outside");
    s_expect_refused(g, mine, 4092, host, 7, "outside");
    s_expect_refused(g, mine, (uint64_t)INT64_MAX - 11, host, 8, "outside");
    s_expect_refused(g, mine, 2, host, 9, "not aligned");
    assert_int_equal(zf_remote_shm_stats(g->b).shm_rejected, 9);
    assert_int_equal(zf_remote_shm_stats(g->b).shm_received, 0);
    /* a good offer in the same segment is taken and answered on release */
    int fd2 = shm_open(mine, O_RDWR, 0);
    float *v = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd2, 0);
    close(fd2);
    v[4] = 1.25f;
    v[5] = -8.0f;
    zf_tensor_frame_shm_t shm = {.offset = 16, .nbytes = 8, .id = 10};
    snprintf(shm.name, sizeof shm.name, "%s", mine);
    snprintf(shm.host, sizeof shm.host, "%s", host);
    static zf_tensor_frame_header_t h;
    zf_shape_t shape = ZF_SHAPE(2);
    ASSERT_OK(zf_tensor_frame_header_for_shm(KEY_AB, 31, ZF_FLOAT, &shape, &shm, &h));
    ASSERT_OK(zf_tensor_frame_send_shm(g->push, &h));
    zf_tensor_t *got = s_recv(g->mgr, 31);
    assert_true(((const float *)zf_tensor_data(got))[0] == 1.25f);
    assert_true(((const float *)zf_tensor_data(got))[1] == -8.0f);
    zf_tensor_unref(&got);
    zf_tensor_frame_t f;
    ASSERT_OK(zf_tensor_frame_recv(g->pull, WAIT_MS, &f));
    assert_non_null(f.reply);
    assert_int_equal(f.reply->id, 10);
    assert_true(f.reply->accepted);
    zf_tensor_frame_clear(&f);
    munmap(v, 4096);
    shm_unlink(mine);
}

/* Offers a float [2] at offset 16 of segment name with release word rel
 * as offer id. */
static void s_offer_with_rel(s_rig_t *g, const char *name, uint64_t rel, uint64_t id, int64_t step)
{
    zf_tensor_frame_shm_t shm = {.offset = 16, .nbytes = 8, .id = id, .rel = rel};
    snprintf(shm.name, sizeof shm.name, "%s", name);
    snprintf(shm.host, sizeof shm.host, "%s", zf_remote_host_id(g->b));
    static zf_tensor_frame_header_t h;
    zf_shape_t shape = ZF_SHAPE(2);
    ASSERT_OK(zf_tensor_frame_header_for_shm(KEY_AB, step, ZF_FLOAT, &shape, &shm, &h));
    ASSERT_OK(zf_tensor_frame_send_shm(g->push, &h));
}

static void test_shm_release_word_is_checked_and_answers_without_a_message(void **state)
{
    s_rig_t *g = *state;
    char mine[64];
    snprintf(mine, sizeof mine, ZF_REMOTE_SHM_PREFIX "%ld-00000000000000cd", (long)getpid());
    int fd = shm_open(mine, O_RDWR | O_CREAT | O_EXCL, 0600);
    assert_true(fd >= 0);
    assert_int_equal(ftruncate(fd, 4096), 0);
    uint64_t *w = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    /* a word among the tensor's bytes (16..24), past the segment, or any
     * other than the one after the bytes (16 + 64, where a sender puts
     * it): refused */
    static const uint64_t bad[4] = {16, 4096, UINT64_C(1) << 40, 64};
    for (int i = 0; i < 4; i++) {
        s_offer_with_rel(g, mine, bad[i], 20 + (uint64_t)i, 32);
        zf_tensor_frame_t f;
        ASSERT_OK(zf_tensor_frame_recv(g->pull, WAIT_MS, &f));
        assert_non_null(f.reply);
        assert_false(f.reply->accepted);
        if (!strstr(f.reply->why, "release word"))
            fail_msg("reply reason '%s' lacks 'release word'", f.reply->why);
        zf_tensor_frame_clear(&f);
    }
    /* an unaligned one never leaves: the codec refuses it */
    zf_tensor_frame_shm_t shm = {.offset = 16, .nbytes = 8, .id = 1, .rel = 68};
    snprintf(shm.name, sizeof shm.name, "%s", mine);
    snprintf(shm.host, sizeof shm.host, "h");
    static zf_tensor_frame_header_t h;
    zf_shape_t shape = ZF_SHAPE(2);
    zf_test_expect_error(zf_tensor_frame_header_for_shm(KEY_AB, 1, ZF_FLOAT, &shape, &shm, &h),
                         ZF_INVALID_ARGUMENT, "rel 68 is not an 8-byte aligned offset");
    /* a good one: its release stores the id in the word, and says nothing */
    w[10] = 0;
    s_offer_with_rel(g, mine, 80, 23, 33);
    zf_tensor_t *got = s_recv(g->mgr, 33);
    assert_int_equal(__atomic_load_n(&w[10], __ATOMIC_ACQUIRE), 0);
    zf_remote_destroy(&g->b); /* the mapping outlives the transport: the word still works */
    zf_tensor_unref(&got);
    assert_int_equal(__atomic_load_n(&w[10], __ATOMIC_ACQUIRE), 23);
    zf_tensor_frame_t f;
    zf_test_expect_error(zf_tensor_frame_recv(g->pull, 200, &f), ZF_DEADLINE_EXCEEDED, NULL);
    munmap(w, 4096);
    shm_unlink(mine);
}

/* ---- batches --------------------------------------------------------------- */

/* Waits until the counter at offset field of zf_remote_stats() equals
 * want; fails after WAIT_MS. */
static void s_wait_stat(zf_remote_t *r, size_t field, uint64_t want)
{
    uint64_t got = 0;
    for (int waited = 0; waited < WAIT_MS; waited += 5) {
        zf_remote_stats_t st = zf_remote_stats(r);
        got = *(uint64_t *)((char *)&st + field);
        if (got == want) return;
        s_sleep_ms(5);
    }
    fail_msg("counter at offset %zu is %llu, never %llu", field, (unsigned long long)got,
             (unsigned long long)want);
}

#define WAIT_STAT(r, field, want) s_wait_stat((r), offsetof(zf_remote_stats_t, field), (want))

/* within a first piece of a batch (32 tensors): one message */
#define N_SMALL 28
#define N_BIG   3

static void s_key(char *out, size_t cap, const char *name, int i)
{
    snprintf(out, cap, DEV_A ";0000000000000001;" DEV_B ";%s%d:0;0:0", name, i);
}

static void test_batch_carries_small_tensors_beside_big_shm_ones_and_counts_them(void **state)
{
    s_pair_t *p = *state;
    enum { N = N_SMALL + N_BIG + 2 };
    static char keys[N][160];
    zf_tensor_t *vals[N] = {NULL};
    bool dead[N] = {false};
    for (int i = 0; i < N; i++) {
        if (i % 10 == 5 && i / 10 < N_BIG) { /* a big one now and then: through the arena */
            s_key(keys[i], sizeof keys[i], "big", i);
            vals[i] = s_ramp(BIG, (float)i);
        } else if (i == N - 2) { /* dead, without a tensor */
            s_key(keys[i], sizeof keys[i], "dead", i);
            dead[i] = true;
        } else if (i == N - 1) {
            s_key(keys[i], sizeof keys[i], "str", i);
            ASSERT_OK(zf_tensor_new_scalar_string("sixty-four", 10, &vals[i]));
        } else { /* 1 to 40 floats */
            s_key(keys[i], sizeof keys[i], "small", i);
            vals[i] = s_ramp(1 + i % 40, (float)i);
        }
    }
    zf_rendezvous_t *r = NULL;
    ASSERT_OK(zf_rendezvous_mgr_find(p->mgr_a, 50, &r));
    assert_true(zf_rendezvous_batch_begin());
    assert_false(zf_rendezvous_batch_begin()); /* no nesting */
    for (int i = 0; i < N; i++) ASSERT_OK(zf_rendezvous_send(r, keys[i], vals[i], dead[i]));
    /* the big ones left at once; the small ones wait for the batch's end */
    assert_int_equal(zf_remote_shm_stats(p->a).shm_offered, N_BIG);
    assert_int_equal(zf_remote_stats(p->a).batches_sent, 0);
    zf_rendezvous_batch_end();
    assert_false(zf_rendezvous_batch_is_open());
    zf_remote_stats_t sa = zf_remote_stats(p->a);
    assert_int_equal(sa.batches_sent, 1);
    assert_int_equal(sa.batch_tensors_sent, N - N_BIG);
    assert_int_equal(zf_remote_shm_stats(p->a).bytes_sent, N - N_BIG);
    zf_rendezvous_t *rb = NULL;
    ASSERT_OK(zf_rendezvous_mgr_find(p->mgr_b, 50, &rb));
    for (int i = 0; i < N; i++) {
        zf_tensor_t *got = NULL;
        bool is_dead = false;
        ASSERT_OK(zf_rendezvous_recv(rb, keys[i], WAIT_MS, &got, &is_dead));
        assert_int_equal(is_dead, dead[i]);
        if (dead[i]) {
            assert_null(got);
            continue;
        }
        if (!zf_tensor_equal(got, vals[i])) fail_msg("'%s' arrived changed", keys[i]);
        zf_tensor_unref(&got);
    }
    zf_rendezvous_unref(&rb);
    zf_remote_stats_t sb = zf_remote_stats(p->b);
    assert_int_equal(sb.batches_received, 1);
    assert_int_equal(sb.batch_tensors_received, N - N_BIG);
    assert_int_equal(sb.batch_refused, 0);
    WAIT_STAT(p->b, delivered, N);
    assert_int_equal(zf_remote_shm_stats(p->b).shm_received, N_BIG);
    /* a lone send, no batch open: one message of its own, at once */
    ASSERT_OK(zf_rendezvous_send(r, keys[0], vals[0], false));
    assert_int_equal(zf_remote_stats(p->a).batches_sent, 1);
    WAIT_STAT(p->b, delivered, N + 1);
    /* a batch of one peer's tensors with batches turned off: one message each */
    zf_remote_set_batch(p->a, 0);
    assert_true(zf_rendezvous_batch_begin());
    ASSERT_OK(zf_rendezvous_send(r, keys[1], vals[1], false));
    ASSERT_OK(zf_rendezvous_send(r, keys[2], vals[2], false));
    zf_rendezvous_batch_end();
    assert_int_equal(zf_remote_stats(p->a).batches_sent, 1);
    WAIT_STAT(p->b, delivered, N + 3);
    zf_rendezvous_unref(&r);
    for (int i = 0; i < N; i++) zf_tensor_unref(&vals[i]);
    WAIT_SHM(p->a, shm_bytes_in_use, 0);
}

/* A long send batch leaves in pieces of 32, 64 and 128 tensors, then 256
 * each (executor/rendezvous/remote.c). */
#define S_BATCH_FIRST_PIECES (32 + 64 + 128)
#define S_BATCH_TENSORS      256

/* Tensors of two steps in one send batch, longer than a batch message
 * holds: the claimed step's arrive straight into its rendezvous, counted
 * nowhere; the unclaimed one's are counted against the byte cap. */
static void test_batch_delivers_runs_to_claimed_and_unclaimed_steps(void **state)
{
    s_pair_t *p = *state;
    enum { N = S_BATCH_FIRST_PIECES + 2 * S_BATCH_TENSORS + 88 };
    static char keys[N][160];
    zf_tensor_t *vals[N] = {NULL};
    zf_rendezvous_t *claimed = NULL, *ra = NULL, *ra2 = NULL;
    ASSERT_OK(zf_remote_claim_step(p->b, 70, &claimed));
    ASSERT_OK(zf_rendezvous_mgr_find(p->mgr_a, 70, &ra));
    ASSERT_OK(zf_rendezvous_mgr_find(p->mgr_a, 71, &ra2));
    size_t unclaimed_bytes = 0;
    assert_true(zf_rendezvous_batch_begin());
    for (int i = 0; i < N; i++) { /* every seventh for step 71, unclaimed on B */
        s_key(keys[i], sizeof keys[i], "run", i);
        vals[i] = s_ramp(1 + i % 5, (float)i);
        if (i % 7 == 3) unclaimed_bytes += zf_tensor_nbytes(vals[i]);
        ASSERT_OK(zf_rendezvous_send(i % 7 == 3 ? ra2 : ra, keys[i], vals[i], false));
    }
    zf_rendezvous_batch_end();
    zf_remote_stats_t sa = zf_remote_stats(p->a);
    assert_int_equal(sa.batches_sent, 3 + 3); /* the three first pieces, 256, 256, 88 */
    assert_int_equal(sa.batch_tensors_sent, N);
    WAIT_STAT(p->b, delivered, N);
    /* only step 71's tensors count: copied out of their frames */
    assert_int_equal(zf_rendezvous_mgr_stats(p->mgr_b).unclaimed_bytes, unclaimed_bytes);
    zf_rendezvous_t *rb2 = NULL;
    ASSERT_OK(zf_rendezvous_mgr_claim(p->mgr_b, 71, &rb2));
    assert_int_equal(zf_rendezvous_mgr_stats(p->mgr_b).unclaimed_bytes, 0);
    for (int i = 0; i < N; i++) {
        zf_tensor_t *got = NULL;
        ASSERT_OK(zf_rendezvous_recv(i % 7 == 3 ? rb2 : claimed, keys[i], WAIT_MS, &got, NULL));
        if (!zf_tensor_equal(got, vals[i])) fail_msg("'%s' arrived changed", keys[i]);
        zf_tensor_unref(&got);
        zf_tensor_unref(&vals[i]);
    }
    assert_int_equal(zf_remote_stats(p->b).batch_refused, 0);
    zf_rendezvous_unref(&rb2);
    zf_rendezvous_unref(&claimed);
    zf_rendezvous_unref(&ra);
    zf_rendezvous_unref(&ra2);
}

/* B's device moves to another process (a restarted executor) while a send
 * batch is open: every send after the move goes to the new one. (What was
 * held before leaves for the old one with the batch, whose socket closes
 * with its last reference: an executor that has moved is gone, and its
 * step with it.) */
static void test_batch_sends_after_a_peer_moves_go_to_the_new_peer(void **state)
{
    s_pair_t *p = *state;
    /* the teardown destroys c, so a failure below cannot hang the context */
    ASSERT_OK(zf_rendezvous_mgr_new(&p->mgr_c));
    ASSERT_OK(zf_remote_new(p->ctx, p->mgr_c, NULL, &p->c));
    zf_remote_t *c = p->c;
    ASSERT_OK(zf_remote_attach(c, DEV_B));
    char k[4][160];
    zf_tensor_t *vals[4];
    zf_rendezvous_t *ra = NULL;
    ASSERT_OK(zf_rendezvous_mgr_find(p->mgr_a, 80, &ra));
    assert_true(zf_rendezvous_batch_begin());
    for (int i = 0; i < 4; i++) {
        s_key(k[i], sizeof k[i], "moving", i);
        vals[i] = s_ramp(2, (float)(i + 1));
        if (i == 2) { /* the third send finds the device moved */
            bool changed = false;
            ASSERT_OK(zf_remote_update_peer(p->a, DEV_B, zf_remote_endpoint(c), 2, &changed));
            assert_true(changed);
        }
        ASSERT_OK(zf_rendezvous_send(ra, k[i], vals[i], false));
    }
    zf_rendezvous_batch_end();
    assert_int_equal(zf_remote_stats(p->a).batches_sent, 2);
    zf_rendezvous_t *rc = NULL;
    ASSERT_OK(zf_rendezvous_mgr_claim(p->mgr_c, 80, &rc));
    for (int i = 2; i < 4; i++) {
        zf_tensor_t *got = NULL;
        ASSERT_OK(zf_rendezvous_recv(rc, k[i], WAIT_MS, &got, NULL));
        if (!zf_tensor_equal(got, vals[i])) fail_msg("'%s' arrived changed", k[i]);
        zf_tensor_unref(&got);
    }
    WAIT_STAT(c, batch_tensors_received, 2);
    assert_int_equal(zf_remote_stats(c).batches_received, 1);
    for (int i = 0; i < 4; i++) zf_tensor_unref(&vals[i]);
    zf_rendezvous_unref(&rc);
    zf_rendezvous_unref(&ra);
}

static void test_batch_that_cannot_be_pushed_aborts_its_step_with_the_reason(void **state)
{
    s_pair_t *p = *state;
    /* a peer whose socket cannot even connect */
    ASSERT_OK(zf_remote_set_peer(p->a, DEV_C, "nonsense://nowhere"));
    char k1[160], k2[160];
    snprintf(k1, sizeof k1, DEV_A ";0000000000000001;" DEV_C ";lost:0;0:0");
    snprintf(k2, sizeof k2, DEV_A ";0000000000000001;" DEV_C ";lost:1;0:0");
    zf_tensor_t *t = s_ramp(4, 1.0f);
    zf_rendezvous_t *r = NULL;
    ASSERT_OK(zf_rendezvous_mgr_find(p->mgr_a, 70, &r));
    assert_true(zf_rendezvous_batch_begin());
    ASSERT_OK(zf_rendezvous_send(r, k1, t, false)); /* held: nothing can fail yet */
    ASSERT_OK(zf_rendezvous_send(r, k2, t, false));
    zf_rendezvous_batch_end();
    zf_status_t s = zf_rendezvous_status(r);
    assert_false(zf_ok(s));
    const char *msg = zf_status_msg(&s);
    if (!strstr(msg, "sending 2 tensors to " DEV_C " in one batch") || !strstr(msg, k1))
        fail_msg("unexpected abort: %s", msg);
    zf_status_clear(&s);
    /* a later send of the step fails with it, as the engine's last _Send would */
    zf_test_expect_error(zf_rendezvous_send(r, k1, t, false), ZF_INVALID_ARGUMENT, "in one batch");
    assert_int_equal(zf_remote_stats(p->a).batches_sent, 0);
    zf_rendezvous_unref(&r);
    zf_tensor_unref(&t);
}

/* Pushes the batch [k1: float [3] of step 60, bad: float [3] declaring 16
 * bytes, of step 61, k2: float [2] of step 60] to B, its payloads extra
 * bytes longer than they should be. */
static void s_push_batch(s_rig_t *g, const char *k1, const char *bad, const char *k2, size_t extra)
{
    zf_test_batch_t hb;
    zf_test_batch_begin(&hb, 3);
    zf_test_batch_vec(&hb, k1, 60, ZF_FLOAT, 3, 12);
    zf_test_batch_vec(&hb, bad, 61, ZF_FLOAT, 3, 16);
    zf_test_batch_vec(&hb, k2, 60, ZF_FLOAT, 2, 8);
    /* k1 at 0, bad at 16, k2 at 32 */
    float payload[11] = {1, 2, 3, 0, 9, 9, 9, 9, 4, 5, 0};
    zf_test_batch_payloads(&hb, payload, 40 + extra);
    void *sock = zf_socket_handle(g->push);
    assert_int_equal(zmq_send(sock, hb.bytes, hb.len, 0), (int)hb.len);
    zf_test_batch_free(&hb);
}

static void test_batch_entry_that_is_malformed_aborts_its_step_naming_the_key(void **state)
{
    s_rig_t *g = *state;
    char k1[160], bad[160], k2[160];
    s_key(k1, sizeof k1, "one", 1);
    s_key(bad, sizeof bad, "garbled", 2);
    s_key(k2, sizeof k2, "two", 3);
    s_push_batch(g, k1, bad, k2, 0);
    /* the others arrive */
    zf_rendezvous_t *r = NULL;
    ASSERT_OK(zf_rendezvous_mgr_find(g->mgr, 60, &r));
    zf_tensor_t *got = NULL;
    ASSERT_OK(zf_rendezvous_recv(r, k1, WAIT_MS, &got, NULL));
    assert_true(((const float *)zf_tensor_data(got))[2] == 3.0f);
    zf_tensor_unref(&got);
    ASSERT_OK(zf_rendezvous_recv(r, k2, WAIT_MS, &got, NULL));
    assert_int_equal(zf_tensor_num_elements(got), 2);
    assert_true(((const float *)zf_tensor_data(got))[1] == 5.0f);
    zf_tensor_unref(&got);
    zf_rendezvous_unref(&r);
    /* the garbled one's step fails, naming it and why */
    ASSERT_OK(zf_rendezvous_mgr_find(g->mgr, 61, &r));
    zf_status_t s = zf_rendezvous_recv(r, bad, WAIT_MS, &got, NULL);
    assert_int_equal(s.code, ZF_INVALID_ARGUMENT);
    const char *msg = zf_status_msg(&s);
    if (!strstr(msg, "step 61: tensor '") || !strstr(msg, bad) ||
        !strstr(msg, "arrived malformed in a batch") ||
        !strstr(msg, "entry 1 of 3: field 'len': 16 bytes declared but float32 [3] needs 12"))
        fail_msg("unexpected abort: %s", msg);
    zf_status_clear(&s);
    zf_rendezvous_unref(&r);
    zf_remote_stats_t st = zf_remote_stats(g->b);
    assert_int_equal(st.batches_received, 1);
    assert_int_equal(st.batch_tensors_received, 3);
    assert_int_equal(st.batch_refused, 1);
    assert_int_equal(st.malformed, 1);
    WAIT_STAT(g->b, delivered, 2);
    /* a batch whose payloads do not add up is refused whole: nothing of it
     * arrives, and what comes next does */
    char k3[160], k4[160];
    s_key(k3, sizeof k3, "three", 4);
    s_key(k4, sizeof k4, "four", 5);
    s_push_batch(g, k3, bad, k4, 4);
    zf_tensor_t *t = s_ramp(4, 1.0f);
    ASSERT_OK(zf_tensor_frame_send(g->push, KEY_AB, 62, t, false));
    got = s_recv(g->mgr, 62);
    assert_true(zf_tensor_equal(got, t));
    zf_tensor_unref(&got);
    zf_tensor_unref(&t);
    st = zf_remote_stats(g->b);
    assert_int_equal(st.malformed, 2);
    assert_int_equal(st.batches_received, 1);
    WAIT_STAT(g->b, delivered, 3); /* counted just after the hand-over */
    ASSERT_OK(zf_rendezvous_mgr_find(g->mgr, 60, &r));
    zf_test_expect_error(zf_rendezvous_recv(r, k3, 50, &got, NULL), ZF_DEADLINE_EXCEEDED, k3);
    zf_rendezvous_unref(&r);
}

/* ---- processes that die ----------------------------------------------------- */

static void s_write_all(int fd, const void *buf, size_t n)
{
    const char *p = buf;
    while (n > 0) {
        ssize_t w = write(fd, p, n);
        if (w <= 0) _exit(3);
        p += w;
        n -= (size_t)w;
    }
}

/* Reads one NUL-terminated line of at most cap - 1 bytes; false at EOF. */
static bool s_read_line(int fd, char *out, size_t cap)
{
    size_t n = 0;
    while (n + 1 < cap) {
        char c;
        if (read(fd, &c, 1) != 1) return false;
        if (c == '\0') break;
        out[n++] = c;
    }
    out[n] = '\0';
    return true;
}

/* The child of the receiver test: B, which takes one tensor, reports it
 * and waits to be killed with the mapping held. */
static void s_receiver_child(int to_parent)
{
    zf_zctx_t *ctx = NULL;
    zf_rendezvous_mgr_t *mgr = NULL;
    zf_remote_t *b = NULL;
    if (!zf_ok(zf_zctx_new(&ctx)) || !zf_ok(zf_rendezvous_mgr_new(&mgr)) ||
        !zf_ok(zf_remote_new(ctx, mgr, NULL, &b)) || !zf_ok(zf_remote_attach(b, DEV_B)))
        _exit(2);
    s_write_all(to_parent, zf_remote_endpoint(b), strlen(zf_remote_endpoint(b)) + 1);
    zf_rendezvous_t *r = NULL;
    zf_tensor_t *got = NULL;
    bool dead = true;
    if (!zf_ok(zf_rendezvous_mgr_find(mgr, 40, &r)) ||
        !zf_ok(zf_rendezvous_recv(r, KEY_AB, WAIT_MS, &got, &dead)))
        _exit(2);
    const char *ok =
        ((const float *)zf_tensor_data(got))[BIG - 1] == (float)(BIG - 1) ? "ok" : "bad";
    s_write_all(to_parent, ok, strlen(ok) + 1);
    for (;;) pause();
}

static void test_shm_receiver_killed_holding_a_mapping_leaves_nothing_behind(void **state)
{
    (void)state;
    int fds[2];
    assert_int_equal(pipe(fds), 0);
    pid_t child = fork();
    assert_true(child >= 0);
    if (child == 0) {
        close(fds[0]);
        s_receiver_child(fds[1]);
    }
    close(fds[1]);
    char ep[256], word[8];
    assert_true(s_read_line(fds[0], ep, sizeof ep));
    zf_zctx_t *ctx = NULL;
    zf_rendezvous_mgr_t *mgr = NULL;
    zf_remote_t *a = NULL;
    ASSERT_OK(zf_zctx_new(&ctx));
    ASSERT_OK(zf_rendezvous_mgr_new(&mgr));
    ASSERT_OK(zf_remote_new(ctx, mgr, NULL, &a));
    ASSERT_OK(zf_remote_attach(a, DEV_A));
    ASSERT_OK(zf_remote_set_peer(a, DEV_B, ep));
    zf_tensor_t *t = s_ramp(BIG, 1.0f);
    s_send(mgr, 40, t);
    assert_true(s_read_line(fds[0], word, sizeof word));
    assert_string_equal(word, "ok");
    /* past the hold limit, but the child still maps the arena: kept */
    int64_t later = zf_remote_now_ms() + ZF_REMOTE_IPC_HOLD_MS;
    assert_int_equal(zf_remote_expire(a, later), 0);
    assert_true(zf_remote_shm_stats(a).shm_bytes_in_use > 0);
    kill(child, SIGKILL);
    int status = 0;
    assert_int_equal(waitpid(child, &status, 0), child);
    close(fds[0]);
    zf_remote_shm_stats_t sa = zf_remote_shm_stats(a);
    assert_int_equal(sa.shm_offered, 1);
    assert_true(sa.shm_bytes_in_use > 0); /* nobody will answer */
    assert_int_equal(zf_remote_expire(a, later + ZF_REMOTE_IPC_HOLD_MS), 1);
    assert_int_equal(zf_remote_shm_stats(a).shm_bytes_in_use, 0);
    assert_int_equal(zf_test_shm_segments_of((long)child), 0);
    zf_remote_destroy(&a);
    assert_int_equal(zf_test_shm_segments_of((long)getpid()), 0);
    zf_rendezvous_mgr_destroy(&mgr);
    zf_zctx_destroy(&ctx);
    zf_tensor_unref(&t);
}

/* The child of the sender test: A, which sends one tensor to the parent's
 * B, reports its arena's name and waits to be killed mid-step. */
static void s_sender_child(int from_parent, int to_parent)
{
    char ep[256];
    if (!s_read_line(from_parent, ep, sizeof ep)) _exit(2);
    zf_zctx_t *ctx = NULL;
    zf_rendezvous_mgr_t *mgr = NULL;
    zf_remote_t *a = NULL;
    if (!zf_ok(zf_zctx_new(&ctx)) || !zf_ok(zf_rendezvous_mgr_new(&mgr)) ||
        !zf_ok(zf_remote_new(ctx, mgr, NULL, &a)) || !zf_ok(zf_remote_attach(a, DEV_A)) ||
        !zf_ok(zf_remote_set_peer(a, DEV_B, ep)))
        _exit(2);
    zf_tensor_t *t = s_ramp(BIG, 1.0f);
    zf_rendezvous_t *r = NULL;
    if (!zf_ok(zf_rendezvous_mgr_find(mgr, 41, &r)) ||
        !zf_ok(zf_rendezvous_send(r, KEY_AB, t, false)))
        _exit(2);
    const char *name = zf_remote_shm_name(a);
    s_write_all(to_parent, name, strlen(name) + 1);
    for (;;) pause();
}

static void test_shm_sender_killed_mid_step_leaves_no_segment_after_the_sweep(void **state)
{
    (void)state;
    int down[2], up[2];
    assert_int_equal(pipe(down), 0);
    assert_int_equal(pipe(up), 0);
    pid_t child = fork();
    assert_true(child >= 0);
    if (child == 0) {
        close(down[1]);
        close(up[0]);
        s_sender_child(down[0], up[1]);
    }
    close(down[0]);
    close(up[1]);
    zf_zctx_t *ctx = NULL;
    zf_rendezvous_mgr_t *mgr = NULL;
    zf_remote_t *b = NULL;
    ASSERT_OK(zf_zctx_new(&ctx));
    ASSERT_OK(zf_rendezvous_mgr_new(&mgr));
    ASSERT_OK(zf_remote_new(ctx, mgr, NULL, &b));
    ASSERT_OK(zf_remote_attach(b, DEV_B));
    s_write_all(down[1], zf_remote_endpoint(b), strlen(zf_remote_endpoint(b)) + 1);
    zf_tensor_t *got = s_recv(mgr, 41); /* mapped here */
    char name[128];
    assert_true(s_read_line(up[0], name, sizeof name));
    assert_true(s_segment_exists(name));
    assert_int_equal(zf_test_shm_segments_of((long)child), 1);
    kill(child, SIGKILL);
    int status = 0;
    assert_int_equal(waitpid(child, &status, 0), child);
    close(down[1]);
    close(up[0]);
    assert_true(zf_remote_shm_sweep() >= 1); /* what a starting executor does */
    assert_false(s_segment_exists(name));
    assert_int_equal(zf_test_shm_segments_of((long)child), 0);
    /* the mapping outlives the name and its owner */
    zf_tensor_t *want = s_ramp(BIG, 1.0f);
    assert_true(zf_tensor_equal(got, want));
    zf_tensor_unref(&want);
    zf_tensor_unref(&got); /* its answer goes nowhere */
    zf_remote_destroy(&b);
    zf_rendezvous_mgr_destroy(&mgr);
    zf_zctx_destroy(&ctx);
}

int main(void)
{
    zf_log_set_level(ZF_LOG_ERROR);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(
            test_shm_carries_a_big_tensor_intact_and_its_release_frees_the_arena, s_setup,
            s_teardown),
        cmocka_unit_test_setup_teardown(
            test_shm_small_tensors_and_peers_on_other_hosts_take_the_byte_path, s_setup,
            s_teardown),
        cmocka_unit_test_setup_teardown(
            test_shm_receiver_on_another_host_refuses_and_gets_the_bytes, s_setup, s_teardown),
        cmocka_unit_test_setup_teardown(
            test_shm_full_arena_falls_back_to_bytes_and_the_next_transfer_works, s_setup,
            s_teardown),
        cmocka_unit_test_setup_teardown(test_shm_offer_never_answered_is_freed_at_the_hold_limit,
                                        s_setup, s_teardown),
        cmocka_unit_test_setup_teardown(
            test_shm_unanswered_block_a_receiver_maps_outlives_the_hold_limit, s_setup, s_teardown),
        cmocka_unit_test_setup_teardown(
            test_shm_step_cleanup_keeps_blocks_until_the_receiver_lets_go, s_setup, s_teardown),
        cmocka_unit_test_setup_teardown(
            test_shm_refuses_hostile_offers_with_a_reason_and_keeps_working, s_rig_setup,
            s_rig_teardown),
        cmocka_unit_test_setup_teardown(
            test_shm_release_word_is_checked_and_answers_without_a_message, s_rig_setup,
            s_rig_teardown),
        cmocka_unit_test_setup_teardown(
            test_batch_carries_small_tensors_beside_big_shm_ones_and_counts_them, s_setup,
            s_teardown),
        cmocka_unit_test_setup_teardown(test_batch_delivers_runs_to_claimed_and_unclaimed_steps,
                                        s_setup, s_teardown),
        cmocka_unit_test_setup_teardown(test_batch_sends_after_a_peer_moves_go_to_the_new_peer,
                                        s_setup, s_teardown),
        cmocka_unit_test_setup_teardown(
            test_batch_that_cannot_be_pushed_aborts_its_step_with_the_reason, s_setup, s_teardown),
        cmocka_unit_test_setup_teardown(
            test_batch_entry_that_is_malformed_aborts_its_step_naming_the_key, s_rig_setup,
            s_rig_teardown),
        cmocka_unit_test(test_shm_receiver_killed_holding_a_mapping_leaves_nothing_behind),
        cmocka_unit_test(test_shm_sender_killed_mid_step_leaves_no_segment_after_the_sweep),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
