/* Tests for executor/kernels/kernels_state: reference and resource variables that
 * persist across steps (separate kernel runs sharing one resource manager),
 * their updates and their error texts. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "kernel_test_util.h"

typedef struct {
    zf_resource_mgr_t *mgr;
    Tensorflow__NodeDef *var, *assign, *read, *sgd;
} s_fixture_t;

static int s_setup(void **state)
{
    s_fixture_t *f = calloc(1, sizeof *f);
    assert_non_null(f);
    ASSERT_OK(zf_resource_mgr_new(&f->mgr));
    f->var = kt_node_new("w", "VariableV2", 0);
    kt_attr_type(f->var, "dtype", ZF_FLOAT);
    kt_attr_shape(f->var, "shape", &(zf_shape_t){.rank = 1, .dims = {3}});
    f->assign = kt_node_new("w/Assign", "Assign", 2);
    kt_attr_type(f->assign, "T", ZF_FLOAT);
    f->read = kt_node_new("w/read", "Identity", 1);
    kt_attr_type(f->read, "T", ZF_FLOAT);
    f->sgd = kt_node_new("sgd", "ApplyGradientDescent", 3);
    kt_attr_type(f->sgd, "T", ZF_FLOAT);
    *state = f;
    return 0;
}

static int s_teardown(void **state)
{
    s_fixture_t *f = *state;
    kt_node_free(&f->var);
    kt_node_free(&f->assign);
    kt_node_free(&f->read);
    kt_node_free(&f->sgd);
    zf_resource_mgr_destroy(&f->mgr);
    free(f);
    return 0;
}

/* One "step" of VariableV2 -> out: the variable's ref. */
static zf_tensor_t *s_var_ref(s_fixture_t *f, const Tensorflow__NodeDef *var)
{
    zf_tensor_t *ref = NULL;
    ASSERT_OK(kt_run_on(var, NULL, 0, &ref, 1, f->mgr, NULL));
    return ref;
}

/* A step that runs VariableV2 then Identity, as reading "w/read" does. */
static zf_status_t s_read_step(s_fixture_t *f, zf_tensor_t **out)
{
    zf_tensor_t *ref = s_var_ref(f, f->var);
    zf_status_t s = kt_run_on(f->read, &ref, 1, out, 1, f->mgr, NULL);
    zf_tensor_unref(&ref);
    return s;
}

static void s_assign_step(s_fixture_t *f, zf_tensor_t *value)
{
    zf_tensor_t *in[2] = {s_var_ref(f, f->var), value}, *out = NULL;
    ASSERT_OK(kt_run_on(f->assign, in, 2, &out, 1, f->mgr, NULL));
    zf_tensor_unref(&in[0]);
    zf_tensor_unref(&out);
}

/* ---- reference variables ------------------------------------------------------------ */

static void test_reading_an_unassigned_variable_fails_like_tensorflow(void **state)
{
    s_fixture_t *f = *state;
    zf_tensor_t *out = NULL;
    zf_test_expect_error(s_read_step(f, &out), ZF_FAILED_PRECONDITION,
                         "w/read (Identity): Attempting to use uninitialized value w");
    assert_null(out);
}

static void test_assigned_value_persists_into_the_next_step(void **state)
{
    s_fixture_t *f = *state;
    zf_tensor_t *init = KT_F32(ZF_SHAPE(3), 1, 2, 3), *out = NULL;
    s_assign_step(f, init); /* step 1: the initializer */
    zf_tensor_unref(&init);
    ASSERT_OK(s_read_step(f, &out)); /* step 2 */
    KT_EXPECT_NEAR(out, ZF_SHAPE(3), 0, 1, 2, 3);
    zf_tensor_unref(&out);
    zf_tensor_t *next = KT_F32(ZF_SHAPE(3), 4, 5, 6);
    s_assign_step(f, next); /* step 3 */
    zf_tensor_unref(&next);
    ASSERT_OK(s_read_step(f, &out)); /* step 4 */
    KT_EXPECT_NEAR(out, ZF_SHAPE(3), 0, 4, 5, 6);
    zf_tensor_unref(&out);
}

static void test_assign_outputs_the_new_value(void **state)
{
    s_fixture_t *f = *state;
    zf_tensor_t *in[2] = {s_var_ref(f, f->var), KT_F32(ZF_SHAPE(3), 7, 8, 9)}, *out = NULL;
    ASSERT_OK(kt_run_on(f->assign, in, 2, &out, 1, f->mgr, NULL));
    KT_EXPECT_NEAR(out, ZF_SHAPE(3), 0, 7, 8, 9);
    kt_unref_all(in, 2);
    zf_tensor_unref(&out);
}

static void test_apply_gradient_descent_updates_across_steps(void **state)
{
    s_fixture_t *f = *state;
    zf_tensor_t *init = KT_F32(ZF_SHAPE(3), 1, 2, 3), *out = NULL;
    s_assign_step(f, init);
    zf_tensor_unref(&init);
    zf_tensor_t *alpha = KT_F32(zf_shape_scalar(), 0.5f), *delta = KT_F32(ZF_SHAPE(3), 2, -2, 4);
    for (int step = 0; step < 2; step++) {
        zf_tensor_t *in[3] = {s_var_ref(f, f->var), alpha, delta};
        ASSERT_OK(kt_run_on(f->sgd, in, 3, &out, 1, f->mgr, NULL));
        zf_tensor_unref(&in[0]);
        if (step == 0) KT_EXPECT_NEAR(out, ZF_SHAPE(3), 0, 0, 3, 1); /* w - 0.5 * delta */
        zf_tensor_unref(&out);
    }
    ASSERT_OK(s_read_step(f, &out));
    KT_EXPECT_NEAR(out, ZF_SHAPE(3), 0, -1, 4, -1);
    kt_unref_all((zf_tensor_t *[]){out, alpha, delta}, 3);
}

static void test_apply_gradient_descent_reports_bad_inputs(void **state)
{
    s_fixture_t *f = *state;
    zf_tensor_t *alpha = KT_F32(zf_shape_scalar(), 0.5f), *delta = KT_F32(ZF_SHAPE(3), 1, 1, 1);
    zf_tensor_t *in[3] = {s_var_ref(f, f->var), alpha, delta}, *out = NULL;
    zf_test_expect_error(kt_run_on(f->sgd, in, 3, &out, 1, f->mgr, NULL), ZF_FAILED_PRECONDITION,
                         "sgd (ApplyGradientDescent): Attempting to use uninitialized value w");
    zf_tensor_t *init = KT_F32(ZF_SHAPE(3), 1, 2, 3);
    s_assign_step(f, init);
    zf_tensor_unref(&in[0]);
    in[0] = s_var_ref(f, f->var);
    in[2] = KT_F32(ZF_SHAPE(2), 1, 1);
    zf_test_expect_error(kt_run_on(f->sgd, in, 3, &out, 1, f->mgr, NULL), ZF_INVALID_ARGUMENT,
                         "var and delta do not have the same shape[3] [2]");
    zf_tensor_unref(&in[2]);
    in[2] = delta;
    in[1] = KT_F32(ZF_SHAPE(1), 0.5f);
    zf_test_expect_error(kt_run_on(f->sgd, in, 3, &out, 1, f->mgr, NULL), ZF_INVALID_ARGUMENT,
                         "alpha is not a scalar: [1]");
    kt_unref_all((zf_tensor_t *[]){in[0], in[1], alpha, delta, init}, 5);
}

static void test_gradient_descent_refuses_integer_variables(void **state)
{
    s_fixture_t *f = *state;
    Tensorflow__NodeDef *var = kt_node_new("k", "VariableV2", 0);
    kt_attr_type(var, "dtype", ZF_INT32);
    Tensorflow__NodeDef *assign = kt_node_new("k/Assign", "Assign", 2);
    kt_attr_type(assign, "T", ZF_INT32);
    zf_tensor_t *in[3] = {s_var_ref(f, var), KT_I32(ZF_SHAPE(1), INT32_MIN), NULL}, *out = NULL;
    ASSERT_OK(kt_run_on(assign, in, 2, &out, 1, f->mgr, NULL));
    zf_tensor_unref(&out);
    zf_tensor_unref(&in[1]);
    in[1] = KT_I32(zf_shape_scalar(), 2); /* T says float, the tensors are int32 */
    in[2] = KT_I32(ZF_SHAPE(1), INT32_MAX);
    zf_test_expect_error(
        kt_run_on(f->sgd, in, 3, &out, 1, f->mgr, NULL), ZF_INVALID_ARGUMENT,
        "sgd (ApplyGradientDescent): gradient descent needs a floating variable, got "
        "int32");
    kt_unref_all(in, 3);
    kt_node_free(&var);
    kt_node_free(&assign);
}

static void test_assign_checks_shapes_unless_told_not_to(void **state)
{
    s_fixture_t *f = *state;
    zf_tensor_t *init = KT_F32(ZF_SHAPE(3), 1, 2, 3), *other = KT_F32(ZF_SHAPE(2), 5, 6);
    s_assign_step(f, init);
    zf_tensor_t *in[2] = {s_var_ref(f, f->var), other}, *out = NULL;
    zf_test_expect_error(
        kt_run_on(f->assign, in, 2, &out, 1, f->mgr, NULL), ZF_INVALID_ARGUMENT,
        "Assign requires shapes of both tensors to match. lhs shape= [3] rhs shape= "
        "[2]");
    Tensorflow__NodeDef *loose = kt_node_new("w/Assign2", "Assign", 2);
    kt_attr_type(loose, "T", ZF_FLOAT);
    kt_attr_bool(loose, "validate_shape", false);
    ASSERT_OK(kt_run_on(loose, in, 2, &out, 1, f->mgr, NULL));
    KT_EXPECT_NEAR(out, ZF_SHAPE(2), 0, 5, 6);
    kt_unref_all((zf_tensor_t *[]){in[0], out, init, other}, 4);
    kt_node_free(&loose);
}

static void test_assign_refuses_a_tensor_that_is_not_a_variable(void **state)
{
    s_fixture_t *f = *state;
    zf_tensor_t *in[2] = {KT_F32(ZF_SHAPE(3), 1, 2, 3), KT_F32(ZF_SHAPE(3), 1, 2, 3)};
    zf_tensor_t *out = NULL;
    zf_test_expect_error(kt_run_on(f->assign, in, 2, &out, 1, f->mgr, NULL), ZF_INVALID_ARGUMENT,
                         "w/Assign (Assign): input 0 is not a variable reference");
    kt_unref_all(in, 2);
}

static void test_variables_share_storage_by_shared_name_and_container(void **state)
{
    s_fixture_t *f = *state;
    Tensorflow__NodeDef *a = kt_node_new("a", "VariableV2", 0),
                        *b = kt_node_new("b", "VariableV2", 0);
    Tensorflow__NodeDef *c = kt_node_new("c", "VariableV2", 0);
    kt_attr_type(a, "dtype", ZF_FLOAT);
    kt_attr_type(b, "dtype", ZF_FLOAT);
    kt_attr_type(c, "dtype", ZF_FLOAT);
    kt_attr_string(a, "shared_name", "shared");
    kt_attr_string(b, "shared_name", "shared");
    kt_attr_string(c, "shared_name", "shared");
    kt_attr_string(c, "container", "other");
    zf_tensor_t *value = KT_F32(ZF_SHAPE(3), 1, 2, 3);
    zf_tensor_t *in[2] = {s_var_ref(f, a), value}, *out = NULL;
    ASSERT_OK(kt_run_on(f->assign, in, 2, &out, 1, f->mgr, NULL));
    zf_tensor_t *rb = s_var_ref(f, b), *rc = s_var_ref(f, c);
    assert_ptr_equal(rb, out);
    assert_int_equal(zf_tensor_num_elements(rc), 0); /* another container: unassigned */
    zf_test_expect_error(zf_resource_check_ref(f->mgr, rc), ZF_FAILED_PRECONDITION,
                         "uninitialized value other|shared");
    kt_unref_all((zf_tensor_t *[]){in[0], value, out, rb, rc}, 5);
    kt_node_free(&a);
    kt_node_free(&b);
    kt_node_free(&c);
}

static void test_assign_add_and_is_initialized(void **state)
{
    s_fixture_t *f = *state;
    Tensorflow__NodeDef *step = kt_node_new("global_step", "VariableV2", 0);
    kt_attr_type(step, "dtype", ZF_INT64);
    Tensorflow__NodeDef *inited = kt_node_new("init?", "IsVariableInitialized", 1);
    kt_attr_type(inited, "dtype", ZF_INT64);
    Tensorflow__NodeDef *add = kt_node_new("inc", "AssignAdd", 2);
    kt_attr_type(add, "T", ZF_INT64);
    Tensorflow__NodeDef *assign = kt_node_new("set", "Assign", 2);
    kt_attr_type(assign, "T", ZF_INT64);
    zf_tensor_t *ref = s_var_ref(f, step), *out = NULL;
    ASSERT_OK(kt_run_on(inited, &ref, 1, &out, 1, f->mgr, NULL));
    KT_EXPECT_INTS(out, zf_shape_scalar(), 0);
    zf_tensor_unref(&out);
    zf_tensor_t *start = KT_I64(zf_shape_scalar(), INT64_MAX), *one = KT_I64(zf_shape_scalar(), 1);
    zf_tensor_t *in[2] = {ref, start};
    ASSERT_OK(kt_run_on(assign, in, 2, &out, 1, f->mgr, NULL));
    zf_tensor_unref(&out);
    zf_tensor_unref(&ref);
    ref = s_var_ref(f, step);
    in[0] = ref;
    in[1] = one;
    ASSERT_OK(kt_run_on(add, in, 2, &out, 1, f->mgr, NULL));
    KT_EXPECT_INTS(out, zf_shape_scalar(), INT64_MIN); /* wraps */
    zf_tensor_unref(&out);
    ASSERT_OK(kt_run_on(inited, &ref, 1, &out, 1, f->mgr, NULL));
    KT_EXPECT_INTS(out, zf_shape_scalar(), 1);
    kt_unref_all((zf_tensor_t *[]){out, ref, start, one}, 4);
    kt_node_free(&step);
    kt_node_free(&inited);
    kt_node_free(&add);
    kt_node_free(&assign);
}

static void test_variables_need_a_resource_manager(void **state)
{
    s_fixture_t *f = *state;
    zf_tensor_t *out = NULL;
    zf_test_expect_error(kt_run(f->var, NULL, 0, &out, 1), ZF_FAILED_PRECONDITION,
                         "w (VariableV2): variables need a session resource manager");
}

/* ---- resource variables ------------------------------------------------------------------ */

typedef struct {
    Tensorflow__NodeDef *handle, *read, *assign, *sgd, *add;
} s_rvar_t;

static s_rvar_t s_rvar_new(void)
{
    s_rvar_t r = {kt_node_new("v", "VarHandleOp", 0), kt_node_new("v/Read", "ReadVariableOp", 1),
                  kt_node_new("v/Assign", "AssignVariableOp", 2),
                  kt_node_new("v/sgd", "ResourceApplyGradientDescent", 3),
                  kt_node_new("v/add", "AssignAddVariableOp", 2)};
    kt_attr_type(r.handle, "dtype", ZF_FLOAT);
    kt_attr_shape(r.handle, "shape", &(zf_shape_t){.rank = 1, .dims = {2}});
    kt_attr_type(r.read, "dtype", ZF_FLOAT);
    kt_attr_type(r.assign, "dtype", ZF_FLOAT);
    kt_attr_type(r.sgd, "T", ZF_FLOAT);
    kt_attr_type(r.add, "dtype", ZF_FLOAT);
    return r;
}

static void s_rvar_free(s_rvar_t *r)
{
    kt_node_free(&r->handle);
    kt_node_free(&r->read);
    kt_node_free(&r->assign);
    kt_node_free(&r->sgd);
    kt_node_free(&r->add);
}

static zf_tensor_t *s_handle(s_fixture_t *f, const s_rvar_t *r)
{
    zf_tensor_t *h = NULL;
    ASSERT_OK(kt_run_on(r->handle, NULL, 0, &h, 1, f->mgr, NULL));
    return h;
}

static void test_resource_variable_reads_fail_until_assigned(void **state)
{
    s_fixture_t *f = *state;
    s_rvar_t r = s_rvar_new();
    zf_tensor_t *h = s_handle(f, &r), *out = NULL;
    zf_test_expect_error(
        kt_run_on(r.read, &h, 1, &out, 1, f->mgr, NULL), ZF_FAILED_PRECONDITION,
        "v/Read (ReadVariableOp): Could not find variable v. This could mean that the "
        "variable has been deleted. In TF1, it can also mean the variable is "
        "uninitialized. Debug info: container=localhost, status error "
        "message=Resource localhost/v/N10tensorflow3VarE does not exist.");
    zf_tensor_t *alpha = KT_F32(zf_shape_scalar(), 1), *delta = KT_F32(ZF_SHAPE(2), 1, 1);
    zf_tensor_t *in[3] = {h, alpha, delta};
    zf_test_expect_error(kt_run_on(r.sgd, in, 3, NULL, 0, f->mgr, NULL), ZF_FAILED_PRECONDITION,
                         "Could not find variable v.");
    kt_unref_all((zf_tensor_t *[]){h, alpha, delta}, 3);
    s_rvar_free(&r);
}

static void test_resource_variable_persists_and_updates_copy_on_write(void **state)
{
    s_fixture_t *f = *state;
    s_rvar_t r = s_rvar_new();
    zf_tensor_t *h = s_handle(f, &r), *value = KT_F32(ZF_SHAPE(2), 1, 2), *before = NULL;
    zf_tensor_t *in[3] = {h, value, NULL};
    ASSERT_OK(kt_run_on(r.assign, in, 2, NULL, 0, f->mgr, NULL)); /* step 1 */
    zf_tensor_unref(&h);
    h = s_handle(f, &r); /* step 2: a fresh handle names the same variable */
    in[0] = h;
    ASSERT_OK(kt_run_on(r.read, &h, 1, &before, 1, f->mgr, NULL));
    KT_EXPECT_NEAR(before, ZF_SHAPE(2), 0, 1, 2);
    zf_tensor_t *alpha = KT_F32(zf_shape_scalar(), 2), *delta = KT_F32(ZF_SHAPE(2), 0.5f, -1);
    in[1] = alpha;
    in[2] = delta;
    ASSERT_OK(kt_run_on(r.sgd, in, 3, NULL, 0, f->mgr, NULL)); /* step 3 */
    in[1] = KT_F32(ZF_SHAPE(2), 10, 10);
    ASSERT_OK(kt_run_on(r.add, in, 2, NULL, 0, f->mgr, NULL));
    zf_tensor_t *after = NULL;
    ASSERT_OK(kt_run_on(r.read, &h, 1, &after, 1, f->mgr, NULL));
    KT_EXPECT_NEAR(after, ZF_SHAPE(2), 0, 10, 14);
    KT_EXPECT_NEAR(before, ZF_SHAPE(2), 0, 1, 2); /* an earlier read never changes */
    KT_EXPECT_NEAR(value, ZF_SHAPE(2), 0, 1, 2);  /* nor does the assigned tensor */
    kt_unref_all((zf_tensor_t *[]){h, value, before, alpha, delta, in[1], after}, 7);
    s_rvar_free(&r);
}

static void test_resource_variable_checks_dtypes_and_handles(void **state)
{
    s_fixture_t *f = *state;
    s_rvar_t r = s_rvar_new();
    zf_tensor_t *h = s_handle(f, &r), *ints = KT_I32(ZF_SHAPE(2), 1, 2), *out = NULL;
    zf_tensor_t *in[2] = {h, ints};
    zf_test_expect_error(kt_run_on(r.assign, in, 2, NULL, 0, f->mgr, NULL), ZF_INVALID_ARGUMENT,
                         "Trying to assign variable with wrong dtype. Expected float got int32");
    Tensorflow__NodeDef *read_int = kt_node_new("v/ReadInt", "ReadVariableOp", 1);
    kt_attr_type(read_int, "dtype", ZF_INT32);
    zf_tensor_t *floats = KT_F32(ZF_SHAPE(2), 1, 2);
    in[1] = floats;
    ASSERT_OK(kt_run_on(r.assign, in, 2, NULL, 0, f->mgr, NULL));
    zf_test_expect_error(kt_run_on(read_int, &h, 1, &out, 1, f->mgr, NULL), ZF_INVALID_ARGUMENT,
                         "Trying to read variable with wrong dtype. Expected int32 got float");
    zf_test_expect_error(kt_run_on(r.read, &floats, 1, &out, 1, f->mgr, NULL), ZF_INVALID_ARGUMENT,
                         "input 0 is not a resource handle");
    Tensorflow__NodeDef *is_init = kt_node_new("v/IsInit", "VarIsInitializedOp", 1);
    ASSERT_OK(kt_run_on(is_init, &h, 1, &out, 1, f->mgr, NULL));
    KT_EXPECT_INTS(out, zf_shape_scalar(), 1);
    kt_unref_all((zf_tensor_t *[]){h, ints, floats, out}, 4);
    kt_node_free(&read_int);
    kt_node_free(&is_init);
    s_rvar_free(&r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
#define T(fn) cmocka_unit_test_setup_teardown(fn, s_setup, s_teardown)
        T(test_reading_an_unassigned_variable_fails_like_tensorflow),
        T(test_assigned_value_persists_into_the_next_step),
        T(test_assign_outputs_the_new_value),
        T(test_apply_gradient_descent_updates_across_steps),
        T(test_apply_gradient_descent_reports_bad_inputs),
        T(test_gradient_descent_refuses_integer_variables),
        T(test_assign_checks_shapes_unless_told_not_to),
        T(test_assign_refuses_a_tensor_that_is_not_a_variable),
        T(test_variables_share_storage_by_shared_name_and_container),
        T(test_assign_add_and_is_initialized),
        T(test_variables_need_a_resource_manager),
        T(test_resource_variable_reads_fail_until_assigned),
        T(test_resource_variable_persists_and_updates_copy_on_write),
        T(test_resource_variable_checks_dtypes_and_handles),
#undef T
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
