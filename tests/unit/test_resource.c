/* Tests for executor/resource: per-session variables — values, in-place and
 * copy-on-write updates, reference markers and thread safety. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <pthread.h>
#include <cmocka.h>

#include "kernel_test_util.h"

static zf_status_t s_add_one(zf_tensor_t *var, void *arg)
{
    (void)arg;
    float *p = zf_tensor_data(var);
    for (int64_t i = 0; i < zf_tensor_num_elements(var); i++) p[i] += 1.0f;
    return ZF_STATUS_OK;
}

static zf_status_t s_fail(zf_tensor_t *var, void *arg)
{
    (void)var;
    (void)arg;
    return zf_invalid_argument("update refused");
}

static void test_unknown_variable_reads_as_uninitialized(void **state)
{
    (void)state;
    zf_resource_mgr_t *mgr = NULL;
    ASSERT_OK(zf_resource_mgr_new(&mgr));
    zf_tensor_t *t = NULL;
    zf_test_expect_error(zf_resource_get_var(mgr, "w", &t), ZF_FAILED_PRECONDITION,
                         "Attempting to use uninitialized value w");
    assert_null(t);
    zf_test_expect_error(zf_resource_update_var(mgr, "w", s_add_one, NULL), ZF_FAILED_PRECONDITION,
                         "Attempting to use uninitialized value w");
    assert_false(zf_resource_var_is_initialized(mgr, "w"));
    zf_resource_mgr_destroy(&mgr);
    assert_null(mgr);
    zf_resource_mgr_destroy(&mgr); /* NULL-safe */
    zf_resource_mgr_destroy(NULL);
}

static void test_set_then_get_shares_the_value(void **state)
{
    (void)state;
    zf_resource_mgr_t *mgr = NULL;
    ASSERT_OK(zf_resource_mgr_new(&mgr));
    zf_tensor_t *v = KT_F32(ZF_SHAPE(2), 1, 2), *got = NULL;
    ASSERT_OK(zf_resource_set_var(mgr, "w", v));
    ASSERT_OK(zf_resource_get_var(mgr, "w", &got));
    assert_ptr_equal(got, v);
    assert_true(zf_resource_var_is_initialized(mgr, "w"));
    zf_tensor_unref(&got);
    zf_test_expect_error(zf_resource_set_var(mgr, "w", NULL), ZF_INVALID_ARGUMENT, "no value");
    zf_tensor_unref(&v);
    zf_resource_mgr_destroy(&mgr); /* drops the last reference: no leak */
}

static void test_update_runs_in_place_and_passes_errors_through(void **state)
{
    (void)state;
    zf_resource_mgr_t *mgr = NULL;
    ASSERT_OK(zf_resource_mgr_new(&mgr));
    zf_tensor_t *v = KT_F32(ZF_SHAPE(2), 1, 2), *got = NULL;
    ASSERT_OK(zf_resource_set_var(mgr, "w", v));
    assert_int_equal(zf_buffer_version(zf_tensor_buffer(v)), 0);
    ASSERT_OK(zf_resource_update_var(mgr, "w", s_add_one, NULL));
    KT_EXPECT_NEAR(v, ZF_SHAPE(2), 0, 2, 3);                     /* the very same tensor changed */
    assert_int_equal(zf_buffer_version(zf_tensor_buffer(v)), 1); /* and says so */
    zf_test_expect_error(zf_resource_update_var(mgr, "w", s_fail, NULL), ZF_INVALID_ARGUMENT,
                         "update refused");
    ASSERT_OK(zf_resource_get_var(mgr, "w", &got));
    assert_ptr_equal(got, v);
    zf_tensor_unref(&got);
    zf_tensor_unref(&v);
    zf_resource_mgr_destroy(&mgr);
}

static void test_copy_on_write_update_leaves_earlier_readers_alone(void **state)
{
    (void)state;
    zf_resource_mgr_t *mgr = NULL;
    ASSERT_OK(zf_resource_mgr_new(&mgr));
    zf_tensor_t *v = KT_F32(ZF_SHAPE(2), 1, 2), *reader = NULL, *after = NULL;
    ASSERT_OK(zf_resource_set_var(mgr, "w", v));
    zf_tensor_unref(&v);
    ASSERT_OK(zf_resource_get_var(mgr, "w", &reader));
    ASSERT_OK(zf_resource_update_var_cow(mgr, "w", s_add_one, NULL));
    KT_EXPECT_NEAR(reader, ZF_SHAPE(2), 0, 1, 2);
    ASSERT_OK(zf_resource_get_var(mgr, "w", &after));
    assert_ptr_not_equal(after, reader);
    KT_EXPECT_NEAR(after, ZF_SHAPE(2), 0, 2, 3);
    zf_tensor_unref(&reader);
    zf_tensor_t *before = after; /* now only the variable and we hold it */
    zf_tensor_unref(&after);
    uint64_t version = zf_buffer_version(zf_tensor_buffer(before));
    ASSERT_OK(zf_resource_update_var_cow(mgr, "w", s_add_one, NULL)); /* exclusive: in place */
    ASSERT_OK(zf_resource_get_var(mgr, "w", &after));
    assert_ptr_equal(after, before);
    assert_int_equal(zf_buffer_version(zf_tensor_buffer(after)), version + 1);
    KT_EXPECT_NEAR(after, ZF_SHAPE(2), 0, 3, 4);
    zf_tensor_unref(&after);
    zf_test_expect_error(zf_resource_update_var_cow(mgr, "nope", s_add_one, NULL),
                         ZF_FAILED_PRECONDITION, "uninitialized value nope");
    zf_resource_mgr_destroy(&mgr);
}

static void test_reference_starts_as_a_marker_that_refuses_reads(void **state)
{
    (void)state;
    zf_resource_mgr_t *mgr = NULL;
    ASSERT_OK(zf_resource_mgr_new(&mgr));
    zf_tensor_t *ref = NULL, *again = NULL;
    ASSERT_OK(zf_resource_var_ref(mgr, "v", ZF_FLOAT, &ref));
    assert_int_equal(zf_tensor_dtype(ref), ZF_FLOAT);
    assert_int_equal(zf_tensor_num_elements(ref), 0);
    bool init = true;
    assert_string_equal(zf_resource_ref_lookup(mgr, ref, &init), "v");
    assert_false(init);
    zf_test_expect_error(zf_resource_check_ref(mgr, ref), ZF_FAILED_PRECONDITION,
                         "Attempting to use uninitialized value v");
    ASSERT_OK(zf_resource_var_ref(mgr, "v", ZF_FLOAT, &again));
    assert_ptr_equal(again, ref); /* one marker per variable */
    zf_tensor_unref(&again);
    /* Ordinary empty tensors pass the check. */
    zf_tensor_t *empty = kt_zeros(ZF_FLOAT, ZF_SHAPE(0));
    ASSERT_OK(zf_resource_check_ref(mgr, empty));
    assert_null(zf_resource_ref_lookup(mgr, empty, NULL));
    ASSERT_OK(zf_resource_check_ref(NULL, ref));
    zf_tensor_unref(&empty);
    zf_tensor_unref(&ref);
    zf_resource_mgr_destroy(&mgr);
}

static void test_assign_copies_then_updates_in_place(void **state)
{
    (void)state;
    zf_resource_mgr_t *mgr = NULL;
    ASSERT_OK(zf_resource_mgr_new(&mgr));
    zf_tensor_t *init = KT_F32(ZF_SHAPE(3), 1, 2, 3), *first = NULL, *second = NULL, *ref = NULL;
    ASSERT_OK(zf_resource_assign_var(mgr, "v", init, true, &first));
    assert_ptr_not_equal(first, init); /* a private copy */
    KT_EXPECT_NEAR(first, ZF_SHAPE(3), 0, 1, 2, 3);
    zf_tensor_t *next = KT_F32(ZF_SHAPE(3), 7, 8, 9);
    uint64_t version = zf_buffer_version(zf_tensor_buffer(first));
    ASSERT_OK(zf_resource_assign_var(mgr, "v", next, true, &second));
    assert_ptr_equal(second, first); /* same storage, new contents, new version */
    assert_int_equal(zf_buffer_version(zf_tensor_buffer(first)), version + 1);
    KT_EXPECT_NEAR(first, ZF_SHAPE(3), 0, 7, 8, 9);
    KT_EXPECT_NEAR(init, ZF_SHAPE(3), 0, 1, 2, 3);
    ASSERT_OK(zf_resource_var_ref(mgr, "v", ZF_FLOAT, &ref));
    assert_ptr_equal(ref, first);
    bool initialized = false;
    assert_string_equal(zf_resource_ref_lookup(mgr, ref, &initialized), "v");
    assert_true(initialized);
    zf_tensor_t *bad = KT_F32(ZF_SHAPE(2), 1, 2), *out = NULL;
    zf_test_expect_error(
        zf_resource_assign_var(mgr, "v", bad, true, &out), ZF_INVALID_ARGUMENT,
        "Assign requires shapes of both tensors to match. lhs shape= [3] rhs shape= "
        "[2]");
    assert_null(out);
    ASSERT_OK(zf_resource_assign_var(mgr, "v", bad, false, &out)); /* reshapes */
    KT_EXPECT_NEAR(out, ZF_SHAPE(2), 0, 1, 2);
    assert_null(zf_resource_ref_lookup(mgr, first, NULL)); /* the old storage is no ref now */
    assert_non_null(zf_resource_ref_lookup(mgr, out, NULL));
    kt_unref_all((zf_tensor_t *[]){init, first, second, next, ref, bad, out}, 7);
    zf_resource_mgr_destroy(&mgr);
}

static void test_a_shared_value_becomes_private_when_used_as_a_reference(void **state)
{
    (void)state;
    zf_resource_mgr_t *mgr = NULL;
    ASSERT_OK(zf_resource_mgr_new(&mgr));
    zf_tensor_t *v = KT_F32(ZF_SHAPE(2), 1, 2), *ref = NULL;
    ASSERT_OK(zf_resource_set_var(mgr, "v", v));
    ASSERT_OK(zf_resource_var_ref(mgr, "v", ZF_FLOAT, &ref));
    assert_ptr_not_equal(ref, v);
    ASSERT_OK(zf_resource_update_var(mgr, "v", s_add_one, NULL));
    KT_EXPECT_NEAR(ref, ZF_SHAPE(2), 0, 2, 3);
    KT_EXPECT_NEAR(v, ZF_SHAPE(2), 0, 1, 2); /* the caller's tensor is untouched */
    zf_tensor_unref(&ref);
    zf_tensor_unref(&v);
    zf_resource_mgr_destroy(&mgr);
}

typedef struct {
    zf_resource_mgr_t *mgr;
    int iterations;
} s_thread_arg_t;

static void *s_hammer(void *p)
{
    const s_thread_arg_t *a = p;
    for (int i = 0; i < a->iterations; i++) {
        zf_status_t s = zf_resource_update_var(a->mgr, "counter", s_add_one, NULL);
        if (!zf_ok(s)) return (void *)1;
        zf_tensor_t *t = NULL;
        s = zf_resource_get_var(a->mgr, "counter", &t);
        zf_tensor_unref(&t);
        if (!zf_ok(s)) return (void *)1;
    }
    return NULL;
}

static void test_concurrent_updates_are_serialised(void **state)
{
    (void)state;
    zf_resource_mgr_t *mgr = NULL;
    ASSERT_OK(zf_resource_mgr_new(&mgr));
    zf_tensor_t *v = KT_F32(zf_shape_scalar(), 0);
    ASSERT_OK(zf_resource_set_var(mgr, "counter", v));
    s_thread_arg_t arg = {mgr, 2000};
    pthread_t th[4];
    for (int i = 0; i < 4; i++) assert_int_equal(pthread_create(&th[i], NULL, s_hammer, &arg), 0);
    for (int i = 0; i < 4; i++) {
        void *rc = NULL;
        pthread_join(th[i], &rc);
        assert_null(rc);
    }
    KT_EXPECT_NEAR(v, zf_shape_scalar(), 0, 8000);
    zf_tensor_unref(&v);
    zf_resource_mgr_destroy(&mgr);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_unknown_variable_reads_as_uninitialized),
        cmocka_unit_test(test_set_then_get_shares_the_value),
        cmocka_unit_test(test_update_runs_in_place_and_passes_errors_through),
        cmocka_unit_test(test_copy_on_write_update_leaves_earlier_readers_alone),
        cmocka_unit_test(test_reference_starts_as_a_marker_that_refuses_reads),
        cmocka_unit_test(test_assign_copies_then_updates_in_place),
        cmocka_unit_test(test_a_shared_value_becomes_private_when_used_as_a_reference),
        cmocka_unit_test(test_concurrent_updates_are_serialised),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
