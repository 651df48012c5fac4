/* The shared-memory data plane end to end: a real zflow-broker,
 * zflow-scheduler and two zflow-executor processes on this host. A 1 MiB
 * tensor goes CPU:0 -> CPU:1 and back through each sender's arena
 * (/dev/shm/zflow-<pid>-*), step after step, and arrives intact; an
 * executor that stops leaves no segment behind. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "client/zflow_client.h"
#include "service_test_util.h"
#include "test_util.h"

#define CPU0    ZF_TEST_CPU(0)
#define CPU1    ZF_TEST_CPU(1)
#define WAIT_MS 10000
#define N       (256 * 1024) /* floats: 1 MiB */

/* Whether process reader maps a segment of process owner: it took an
 * offer from it rather than refusing it. */
static bool s_maps_segment_of(long reader, long owner)
{
    char path[64], want[64], line[1024];
    snprintf(path, sizeof path, "/proc/%ld/maps", reader);
    snprintf(want, sizeof want, "/dev/shm/zflow-%ld-", owner);
    FILE *f = fopen(path, "r");
    if (!f) return false;
    bool found = false;
    while (!found && fgets(line, sizeof line, f)) found = strstr(line, want) != NULL;
    fclose(f);
    return found;
}

static void test_shm_service_carries_big_tensors_between_executors_and_cleans_up(void **state)
{
    (void)state;
    zf_test_service_t svc;
    zf_client_t *client = NULL;
    assert_int_equal(zf_test_service_setup(&svc, 2, &client, WAIT_MS), 0);
    long pids[2] = {(long)svc.executors[0].pid, (long)svc.executors[1].pid};
    /* x on CPU:0, y = x * x on CPU:1, z = -y on CPU:0: 1 MiB each way */
    const char *const devices[3] = {CPU0, CPU1, CPU0};
    Tensorflow__GraphDef *gd = zf_test_neg_chain(devices, 3);
    zf_client_session_options_t o = ZF_CLIENT_SESSION_OPTIONS_DEFAULT;
    char *session = NULL;
    ASSERT_OK(zf_client_session_create(client, gd, &o, &session));
    static const char *const feed[1] = {"x"}, *const fetch[1] = {"z"};
    zf_shape_t shape = ZF_SHAPE(N);
    for (int step = 0; step < 5; step++) {
        zf_tensor_t *x = NULL, *z = NULL;
        ASSERT_OK(zf_tensor_new(ZF_FLOAT, &shape, &x));
        float *v = zf_tensor_data(x);
        for (int i = 0; i < N; i++) v[i] = (float)((i + step) % 1000) * 0.25f;
        zf_client_step_t st = {feed, &x, 1, fetch, 1, NULL, 0};
        ASSERT_OK(zf_client_session_run(client, session, &st, WAIT_MS, &z));
        assert_int_equal(zf_tensor_nbytes(z), (size_t)N * sizeof(float));
        const float *got = zf_tensor_data(z);
        for (int i = 0; i < N; i++)
            if (got[i] != -(v[i] * v[i])) fail_msg("step %d: z[%d] is %g", step, i, got[i]);
        zf_tensor_unref(&z);
        zf_tensor_unref(&x);
    }
    /* each executor sent 1 MiB to the other: both made their arena */
    assert_int_equal(zf_test_shm_segments_of(pids[0]), 1);
    assert_int_equal(zf_test_shm_segments_of(pids[1]), 1);
    /* and each mapped the other's: the offers were taken, not refused */
    assert_true(s_maps_segment_of(pids[1], pids[0]));
    assert_true(s_maps_segment_of(pids[0], pids[1]));
    ASSERT_OK(zf_client_session_close(client, session));
    free(session);
    zf_graphdef_free(&gd);
    assert_int_equal(zf_test_service_teardown(&svc, &client, WAIT_MS), 0);
    assert_int_equal(zf_test_shm_segments_of(pids[0]), 0);
    assert_int_equal(zf_test_shm_segments_of(pids[1]), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_shm_service_carries_big_tensors_between_executors_and_cleans_up),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
