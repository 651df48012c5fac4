/* Partial-run scenarios shared by the service's and the in-process
 * session's tests. */
#include "partial_run_test_util.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <cmocka.h>

#include "test_util.h"

static const char *const s_abc[3] = {"a", "b", "c"};
static const char *const s_r12[2] = {"r1", "r2"};

zf_tensor_t *zf_test_prun_scalar(float v)
{
    zf_tensor_t *t = NULL;
    ASSERT_OK(zf_tensor_new_scalar_float(v, &t));
    return t;
}

float zf_test_prun_take(zf_tensor_t **t)
{
    assert_non_null(*t);
    assert_int_equal(zf_tensor_dtype(*t), ZF_FLOAT);
    float v = *(const float *)zf_tensor_data(*t);
    zf_tensor_unref(t);
    return v;
}

void zf_test_prun_interleaved(const zf_test_prun_api_t *api)
{
    enum { N = 4 };
    char *h[N];
    for (int i = 0; i < N; i++) h[i] = api->setup(s_abc, 3, s_r12, 2);
    const char *ab[2] = {"a", "b"}, *c[1] = {"c"};
    for (int i = 0; i < N; i++) { /* a = i, b = 10 */
        zf_tensor_t *v[2] = {zf_test_prun_scalar((float)i), zf_test_prun_scalar(10.0f)};
        ASSERT_OK(api->call(h[i], ab, v, 2, NULL, 0, NULL));
    }
    for (int i = N - 1; i >= 0; i--) { /* c = i + 1; r1 fetched with r2, r2 twice */
        const char *x[3] = {"r1", "r2", "r2:0"};
        zf_tensor_t *v[1] = {zf_test_prun_scalar((float)i + 1.0f)}, *out[3] = {NULL, NULL, NULL};
        ASSERT_OK(api->call(h[i], c, v, 1, x, 3, out));
        float r1 = (float)i + 10.0f, r2 = r1 * ((float)i + 1.0f);
        assert_true(zf_test_prun_take(&out[0]) == r1);
        assert_true(zf_test_prun_take(&out[1]) == r2);
        assert_true(zf_test_prun_take(&out[2]) == r2);
        free(h[i]);
    }
}

/* h's last call: feed (value) and fetch, which gives want; a call after it
 * is refused as the partial run has completed. Frees h. */
static void s_finish(const zf_test_prun_api_t *api, char *h, const char *const *feed, float value,
                     const char *const *fetch, float want)
{
    zf_tensor_t *v[1] = {zf_test_prun_scalar(value)}, *out[1] = {NULL};
    ASSERT_OK(api->call(h, feed, v, 1, fetch, 1, out));
    assert_true(zf_test_prun_take(&out[0]) == want);
    v[0] = zf_test_prun_scalar(value);
    zf_test_expect_error(api->call(h, feed, v, 1, NULL, 0, NULL), ZF_FAILED_PRECONDITION,
                         "has completed");
    free(h);
}

void zf_test_prun_checks(const zf_test_prun_api_t *api)
{
    const char *ab[2] = {"a", "b"};
    char *h = api->setup(ab, 2, &s_r12[0], 1);
    const char *fc[1] = {"c"}, *fa[1] = {"a"}, *fb[1] = {"b"};
    zf_tensor_t *v[1] = {zf_test_prun_scalar(1.0f)};
    zf_test_expect_error(api->call(h, fc, v, 1, NULL, 0, NULL), ZF_INVALID_ARGUMENT,
                         "The feed c:0 was not specified in partial_run_setup.");
    v[0] = zf_test_prun_scalar(1.0f);
    zf_test_expect_error(api->call(h, fa, v, 1, &s_r12[1], 1, NULL), ZF_INVALID_ARGUMENT,
                         "The fetch r2:0 was not specified in partial_run_setup.");
    /* r1 needs b, still to come */
    v[0] = zf_test_prun_scalar(1.0f);
    zf_test_expect_error(api->call(h, fa, v, 1, &s_r12[0], 1, NULL), ZF_INVALID_ARGUMENT,
                         "Fetch r1:0 can't be computed from the feeds that have been fed so far: "
                         "it needs feed b:0");
    v[0] = zf_test_prun_scalar(4.0f);
    ASSERT_OK(api->call(h, fa, v, 1, NULL, 0, NULL));
    v[0] = zf_test_prun_scalar(5.0f);
    zf_test_expect_error(api->call(h, fa, v, 1, NULL, 0, NULL), ZF_INVALID_ARGUMENT,
                         "The feed a:0 has already been fed.");
    /* a feed of the wrong dtype is refused as a step's is */
    ASSERT_OK(zf_tensor_new_scalar_int32(1, &v[0]));
    zf_test_expect_error(api->call(h, fb, v, 1, NULL, 0, NULL), ZF_INVALID_ARGUMENT,
                         "Cannot feed value of dtype int32 for Tensor 'b");
    s_finish(api, h, fb, 6.0f, &s_r12[0], 10.0f);
    /* a fetch given once is not given again; the others still are */
    h = api->setup(s_abc, 3, s_r12, 2);
    zf_tensor_t *w[2] = {zf_test_prun_scalar(1.0f), zf_test_prun_scalar(2.0f)}, *out[1] = {NULL};
    ASSERT_OK(api->call(h, ab, w, 2, &s_r12[0], 1, out));
    assert_true(zf_test_prun_take(&out[0]) == 3.0f);
    v[0] = zf_test_prun_scalar(4.0f);
    zf_test_expect_error(api->call(h, fc, v, 1, s_r12, 2, NULL), ZF_INVALID_ARGUMENT,
                         "The fetch r1:0 has already been fetched.");
    s_finish(api, h, fc, 4.0f, &s_r12[1], 12.0f);
}

void zf_test_prun_fed_cuts(const zf_test_prun_api_t *api)
{
    const char *feeds[4] = {"a", "b", "r1", "c"}, *f2[2] = {"r1", "c"}, *fab[2] = {"a", "b"};
    char *h = api->setup(feeds, 4, &s_r12[1], 1);
    zf_tensor_t *v[2] = {zf_test_prun_scalar(5.0f), zf_test_prun_scalar(7.0f)}, *out[1] = {NULL};
    ASSERT_OK(api->call(h, f2, v, 2, &s_r12[1], 1, out));
    assert_true(zf_test_prun_take(&out[0]) == 35.0f);
    zf_tensor_t *w[2] = {zf_test_prun_scalar(1.0f), zf_test_prun_scalar(2.0f)};
    ASSERT_OK(api->call(h, fab, w, 2, NULL, 0, NULL));
    zf_tensor_t *u[1] = {zf_test_prun_scalar(1.0f)};
    zf_test_expect_error(api->call(h, fab, u, 1, NULL, 0, NULL), ZF_FAILED_PRECONDITION,
                         "has completed");
    free(h);
}

void zf_test_prun_limit(const zf_test_prun_api_t *api, int max, const char *full)
{
    char **h = calloc((size_t)max + 1, sizeof *h);
    assert_non_null(h);
    for (int i = 0; i < max; i++) h[i] = api->setup(s_abc, 3, s_r12, 2);
    char *extra = NULL;
    zf_status_t st = api->try_setup(s_abc, 3, s_r12, 2, &extra);
    assert_int_equal(st.code, ZF_RESOURCE_EXHAUSTED);
    assert_string_equal(zf_status_msg(&st), full);
    zf_status_clear(&st);
    assert_null(extra);
    for (int i = 0; i <= max; i++) { /* a = i, b = 1, c = 2 */
        zf_tensor_t *v[3] = {zf_test_prun_scalar((float)i), zf_test_prun_scalar(1.0f),
                             zf_test_prun_scalar(2.0f)},
                    *out[2] = {NULL, NULL};
        ASSERT_OK(api->call(h[i], s_abc, v, 3, s_r12, 2, out));
        assert_true(zf_test_prun_take(&out[0]) == (float)i + 1.0f);
        assert_true(zf_test_prun_take(&out[1]) == ((float)i + 1.0f) * 2.0f);
        free(h[i]);
        if (i == 0) h[max] = api->setup(s_abc, 3, s_r12, 2);
    }
    free(h);
}
