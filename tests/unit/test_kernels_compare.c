/* Tests for executor/kernels/kernels_compare: comparisons and logic with
 * broadcasting, Select and SelectV2, Range, integer division, the scalar
 * arithmetic loop counters use, dtype refusals and error texts. Expected
 * values are written out by hand or recomputed here with plain C. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <unistd.h>
#include <cmocka.h>

#include "kernel_test_util.h"
#include "process_test_util.h"

static zf_tensor_t *s_run_n(const char *op, const char *type_attr, zf_dtype_t t, zf_tensor_t **in,
                            int n)
{
    Tensorflow__NodeDef *node = kt_node_new("op", op, n);
    if (type_attr) kt_attr_type(node, type_attr, t);
    zf_tensor_t *out = NULL;
    ASSERT_OK(kt_run(node, in, n, &out, 1));
    kt_node_free(&node);
    kt_unref_all(in, n);
    return out;
}

/* Runs a binary op with attr T = a's dtype; takes a and b. */
static zf_tensor_t *s_binary(const char *op, zf_tensor_t *a, zf_tensor_t *b)
{
    zf_tensor_t *in[2] = {a, b};
    return s_run_n(op, "T", zf_tensor_dtype(a), in, 2);
}

/* The status of running op (attr type_attr = t) on in; takes in. */
static zf_status_t s_try(const char *name, const char *op, const char *type_attr, zf_dtype_t t,
                         zf_tensor_t **in, int n)
{
    Tensorflow__NodeDef *node = kt_node_new(name, op, n);
    if (type_attr) kt_attr_type(node, type_attr, t);
    zf_tensor_t *out = NULL;
    zf_status_t s = kt_run(node, in, n, &out, 1);
    assert_null(out);
    kt_node_free(&node);
    kt_unref_all(in, n);
    return s;
}

static zf_tensor_t *s_str(zf_shape_t shape, const char *const *vals)
{
    zf_tensor_t *t = kt_zeros(ZF_STRING, shape);
    for (int64_t i = 0; i < zf_tensor_num_elements(t); i++)
        ASSERT_OK(zf_tensor_set_string(t, i, vals[i], strlen(vals[i])));
    return t;
}

/* ---- comparisons ------------------------------------------------------------- */

static void test_comparisons_compute_hand_checked_values(void **state)
{
    (void)state;
    static const char *const ops[6] = {"Less",         "LessEqual", "Greater",
                                       "GreaterEqual", "Equal",     "NotEqual"};
    /* x = {1, 2, 3, -4}, y = {2, 2, 1, -5} */
    static const int64_t want[6][4] = {
        {1, 0, 0, 0}, {1, 1, 0, 0}, {0, 0, 1, 1}, {0, 1, 1, 1}, {0, 1, 0, 0}, {1, 0, 1, 1},
    };
    for (int k = 0; k < 6; k++) {
        zf_tensor_t *z[4] = {
            s_binary(ops[k], KT_F32(ZF_SHAPE(4), 1, 2, 3, -4), KT_F32(ZF_SHAPE(4), 2, 2, 1, -5)),
            s_binary(ops[k], KT_F64(ZF_SHAPE(4), 1, 2, 3, -4), KT_F64(ZF_SHAPE(4), 2, 2, 1, -5)),
            s_binary(ops[k], KT_I32(ZF_SHAPE(4), 1, 2, 3, -4), KT_I32(ZF_SHAPE(4), 2, 2, 1, -5)),
            s_binary(ops[k], KT_I64(ZF_SHAPE(4), 1, 2, 3, -4), KT_I64(ZF_SHAPE(4), 2, 2, 1, -5)),
        };
        for (int i = 0; i < 4; i++) {
            assert_int_equal(zf_tensor_dtype(z[i]), ZF_BOOL);
            kt_expect_ints(z[i], ZF_SHAPE(4), want[k]);
        }
        kt_unref_all(z, 4);
    }
}

static void test_comparisons_follow_each_types_own_order(void **state)
{
    (void)state;
    /* unsigned: 200 > 100 (a signed byte would say otherwise) */
    zf_tensor_t *z = s_binary("Greater", kt_tensor(ZF_UINT8, ZF_SHAPE(2), (uint8_t[]){200, 1}, 2),
                              kt_tensor(ZF_UINT8, ZF_SHAPE(2), (uint8_t[]){100, 2}, 2));
    KT_EXPECT_INTS(z, ZF_SHAPE(2), 1, 0);
    zf_tensor_unref(&z);
    z = s_binary("Less", kt_tensor(ZF_INT8, ZF_SHAPE(2), (int8_t[]){-128, 5}, 2),
                 kt_tensor(ZF_INT8, ZF_SHAPE(2), (int8_t[]){127, 5}, 2));
    KT_EXPECT_INTS(z, ZF_SHAPE(2), 1, 0);
    zf_tensor_unref(&z);
    z = s_binary("LessEqual", kt_tensor(ZF_UINT64, ZF_SHAPE(2), (uint64_t[]){UINT64_MAX, 0}, 2),
                 kt_tensor(ZF_UINT64, ZF_SHAPE(2), (uint64_t[]){1, 0}, 2));
    KT_EXPECT_INTS(z, ZF_SHAPE(2), 0, 1);
    zf_tensor_unref(&z);
    /* NaN is unordered and unequal to itself; -0 equals 0 */
    z = s_binary("Equal", KT_F32(ZF_SHAPE(3), NAN, -0.0f, 1), KT_F32(ZF_SHAPE(3), NAN, 0, 1));
    KT_EXPECT_INTS(z, ZF_SHAPE(3), 0, 1, 1);
    zf_tensor_unref(&z);
    z = s_binary("NotEqual", KT_F64(ZF_SHAPE(2), NAN, 2), KT_F64(ZF_SHAPE(2), NAN, 2));
    KT_EXPECT_INTS(z, ZF_SHAPE(2), 1, 0);
    zf_tensor_unref(&z);
    z = s_binary("GreaterEqual", KT_F64(ZF_SHAPE(2), NAN, INFINITY), KT_F64(ZF_SHAPE(2), 0, 1e308));
    KT_EXPECT_INTS(z, ZF_SHAPE(2), 0, 1);
    zf_tensor_unref(&z);
    /* half and bfloat16 compare their values, not their bits */
    uint16_t h[2] = {zf_float_to_half(-1.5f), zf_float_to_half(2)};
    uint16_t g[2] = {zf_float_to_half(0.5f), zf_float_to_half(2)};
    z = s_binary("Less", kt_tensor(ZF_HALF, ZF_SHAPE(2), h, 2),
                 kt_tensor(ZF_HALF, ZF_SHAPE(2), g, 2));
    KT_EXPECT_INTS(z, ZF_SHAPE(2), 1, 0);
    zf_tensor_unref(&z);
    uint16_t b[2] = {zf_float_to_bfloat16(-3), zf_float_to_bfloat16(4)};
    uint16_t c[2] = {zf_float_to_bfloat16(-2), zf_float_to_bfloat16(4)};
    z = s_binary("GreaterEqual", kt_tensor(ZF_BFLOAT16, ZF_SHAPE(2), b, 2),
                 kt_tensor(ZF_BFLOAT16, ZF_SHAPE(2), c, 2));
    KT_EXPECT_INTS(z, ZF_SHAPE(2), 0, 1);
    zf_tensor_unref(&z);
}

static void test_equality_covers_bools_and_strings(void **state)
{
    (void)state;
    zf_tensor_t *z = s_binary("Equal", KT_BOOL(ZF_SHAPE(4), true, true, false, false),
                              KT_BOOL(ZF_SHAPE(4), true, false, true, false));
    KT_EXPECT_INTS(z, ZF_SHAPE(4), 1, 0, 0, 1);
    zf_tensor_unref(&z);
    z = s_binary("NotEqual", KT_BOOL(ZF_SHAPE(2), true, false), KT_BOOL(zf_shape_scalar(), true));
    KT_EXPECT_INTS(z, ZF_SHAPE(2), 0, 1);
    zf_tensor_unref(&z);
    static const char *const a[4] = {"abc", "", "ab", "abd"};
    static const char *const b[1] = {"abc"};
    z = s_binary("Equal", s_str(ZF_SHAPE(2, 2), a), s_str(zf_shape_scalar(), b));
    KT_EXPECT_INTS(z, ZF_SHAPE(2, 2), 1, 0, 0, 0);
    zf_tensor_unref(&z);
    static const char *const c[4] = {"abc", "", "ab", "ab"};
    z = s_binary("NotEqual", s_str(ZF_SHAPE(4), a), s_str(ZF_SHAPE(4), c));
    KT_EXPECT_INTS(z, ZF_SHAPE(4), 0, 0, 0, 1);
    zf_tensor_unref(&z);
}

/* Less over every broadcast of shapes a and b, against index arithmetic. */
static void s_check_broadcast(zf_shape_t sa, zf_shape_t sb, zf_shape_t so)
{
    zf_tensor_t *a = kt_zeros(ZF_INT32, sa), *b = kt_zeros(ZF_INT32, sb);
    int32_t *pa = zf_tensor_data(a), *pb = zf_tensor_data(b);
    for (int64_t i = 0; i < zf_tensor_num_elements(a); i++) pa[i] = (int32_t)((i * 7) % 11);
    for (int64_t i = 0; i < zf_tensor_num_elements(b); i++) pb[i] = (int32_t)((i * 5) % 9);
    zf_tensor_t *z = s_binary("Less", zf_tensor_ref(a), zf_tensor_ref(b));
    kt_expect_shape(z, so);
    const bool *pz = zf_tensor_data(z);
    int r = so.rank;
    for (int64_t i = 0; i < zf_tensor_num_elements(z); i++) {
        int64_t rem = i, ia = 0, ib = 0, ma = 1, mb = 1;
        for (int k = r - 1; k >= 0; k--) {
            int64_t idx = rem % so.dims[k];
            rem /= so.dims[k];
            int ka = sa.rank - r + k, kb = sb.rank - r + k;
            if (ka >= 0) {
                ia += (sa.dims[ka] == 1 ? 0 : idx) * ma;
                ma *= sa.dims[ka];
            }
            if (kb >= 0) {
                ib += (sb.dims[kb] == 1 ? 0 : idx) * mb;
                mb *= sb.dims[kb];
            }
        }
        if (pz[i] != (pa[ia] < pb[ib]))
            fail_msg("element %lld: got %d for %d < %d", (long long)i, pz[i], pa[ia], pb[ib]);
    }
    zf_tensor_unref(&z);
    zf_tensor_unref(&a);
    zf_tensor_unref(&b);
}

static void test_comparisons_broadcast_like_numpy(void **state)
{
    (void)state;
    s_check_broadcast(ZF_SHAPE(2, 3), ZF_SHAPE(3), ZF_SHAPE(2, 3));
    s_check_broadcast(ZF_SHAPE(2, 1), ZF_SHAPE(1, 3), ZF_SHAPE(2, 3));
    s_check_broadcast(zf_shape_scalar(), ZF_SHAPE(2, 2), ZF_SHAPE(2, 2));
    s_check_broadcast(ZF_SHAPE(3, 1, 4, 1), ZF_SHAPE(2, 1, 5), ZF_SHAPE(3, 2, 4, 5));
    s_check_broadcast(ZF_SHAPE(4, 1, 3), ZF_SHAPE(4, 2, 3), ZF_SHAPE(4, 2, 3));
    s_check_broadcast(ZF_SHAPE(2, 0), ZF_SHAPE(1), ZF_SHAPE(2, 0));
    s_check_broadcast(ZF_SHAPE(300, 257), ZF_SHAPE(257), ZF_SHAPE(300, 257));
    /* a hand-written case too: [[1],[5]] < [2, 4, 6] */
    zf_tensor_t *z = s_binary("Less", KT_I64(ZF_SHAPE(2, 1), 1, 5), KT_I64(ZF_SHAPE(3), 2, 4, 6));
    KT_EXPECT_INTS(z, ZF_SHAPE(2, 3), 1, 1, 1, 0, 0, 1);
    zf_tensor_unref(&z);
}

static void test_incompatible_shapes_error_unless_equality_allows_them(void **state)
{
    (void)state;
    zf_tensor_t *in[2] = {kt_zeros(ZF_FLOAT, ZF_SHAPE(2, 3)), kt_zeros(ZF_FLOAT, ZF_SHAPE(4))};
    zf_test_expect_error(s_try("lt", "Less", "T", ZF_FLOAT, in, 2), ZF_INVALID_ARGUMENT,
                         "lt (Less): Incompatible shapes: [2,3] vs. [4]");
    in[0] = kt_zeros(ZF_INT32, ZF_SHAPE(2));
    in[1] = kt_zeros(ZF_INT32, ZF_SHAPE(3));
    zf_test_expect_error(s_try("eq", "Equal", "T", ZF_INT32, in, 2), ZF_INVALID_ARGUMENT,
                         "eq (Equal): Incompatible shapes: [2] vs. [3]");
    for (int k = 0; k < 2; k++) {
        Tensorflow__NodeDef *n = kt_node_new("eq", k ? "NotEqual" : "Equal", 2);
        kt_attr_type(n, "T", ZF_INT32);
        kt_attr_bool(n, "incompatible_shape_error", false);
        zf_tensor_t *x[2] = {KT_I32(ZF_SHAPE(2), 1, 2), KT_I32(ZF_SHAPE(3), 1, 2, 3)}, *z = NULL;
        ASSERT_OK(kt_run(n, x, 2, &z, 1));
        KT_EXPECT_INTS(z, zf_shape_scalar(), k);
        zf_tensor_unref(&z);
        /* compatible shapes still compare element-wise */
        zf_tensor_t *y[2] = {KT_I32(ZF_SHAPE(2), 1, 2), KT_I32(ZF_SHAPE(1), 2)};
        ASSERT_OK(kt_run(n, y, 2, &z, 1));
        if (k)
            KT_EXPECT_INTS(z, ZF_SHAPE(2), 1, 0);
        else
            KT_EXPECT_INTS(z, ZF_SHAPE(2), 0, 1);
        zf_tensor_unref(&z);
        kt_unref_all(x, 2);
        kt_unref_all(y, 2);
        kt_node_free(&n);
    }
    in[0] = kt_zeros(ZF_FLOAT, ZF_SHAPE(2));
    in[1] = kt_zeros(ZF_DOUBLE, ZF_SHAPE(2));
    zf_test_expect_error(
        s_try("gt", "Greater", "T", ZF_FLOAT, in, 2), ZF_INVALID_ARGUMENT,
        "gt (Greater): both inputs must have the same dtype, got float and double");
}

static void s_expect_no_kernel(const char *op, const char *attr, zf_dtype_t t, const char *text)
{
    zf_kernels_register_builtin(false);
    Tensorflow__NodeDef *n = kt_node_new("n", op, 2);
    kt_attr_type(n, attr, t);
    const zf_kernel_t *k = NULL;
    zf_test_expect_error(zf_kernel_find("CPU", n, &k), ZF_NOT_FOUND, text);
    char want[128];
    snprintf(want, sizeof want, "No OpKernel was registered to support Op '%s' used by node n", op);
    zf_test_expect_error(zf_kernel_find("CPU", n, &k), ZF_NOT_FOUND, want);
    assert_null(k);
    kt_node_free(&n);
}

static void test_kernel_lookup_refuses_types_tensorflow_does_not_register(void **state)
{
    (void)state;
    s_expect_no_kernel("Less", "T", ZF_STRING, "T=DT_STRING");
    s_expect_no_kernel("GreaterEqual", "T", ZF_BOOL, "T=DT_BOOL");
    s_expect_no_kernel("Equal", "T", ZF_RESOURCE, "T=DT_RESOURCE");
    s_expect_no_kernel("Range", "Tidx", ZF_INT8, "Tidx=DT_INT8");
    s_expect_no_kernel("TruncateDiv", "T", ZF_FLOAT, "T=DT_FLOAT");
    s_expect_no_kernel("FloorMod", "T", ZF_BOOL, "T=DT_BOOL");
    s_expect_no_kernel("Select", "T", ZF_RESOURCE, "T=DT_RESOURCE");
    /* and finds the ones it does */
    static const struct {
        const char *op, *attr;
        zf_dtype_t t;
    } ok[] = {{"Less", "T", ZF_UINT16},    {"Equal", "T", ZF_STRING},  {"NotEqual", "T", ZF_BOOL},
              {"Range", "Tidx", ZF_INT64}, {"FloorDiv", "T", ZF_INT8}, {"Div", "T", ZF_INT32},
              {"Select", "T", ZF_STRING},  {"SelectV2", "T", ZF_HALF}};
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
        Tensorflow__NodeDef *n = kt_node_new("n", ok[i].op, 2);
        kt_attr_type(n, ok[i].attr, ok[i].t);
        const zf_kernel_t *k = NULL;
        ASSERT_OK(zf_kernel_find("CPU", n, &k));
        assert_string_equal(k->op, ok[i].op);
        kt_node_free(&n);
    }
}

/* ---- logic ---------------------------------------------------------------------- */

static void test_logical_ops_follow_their_truth_tables_and_broadcast(void **state)
{
    (void)state;
    zf_tensor_t *in[2] = {KT_BOOL(ZF_SHAPE(2, 1), true, false), KT_BOOL(ZF_SHAPE(2), true, false)};
    zf_tensor_t *z = s_run_n("LogicalAnd", NULL, ZF_BOOL, in, 2);
    KT_EXPECT_INTS(z, ZF_SHAPE(2, 2), 1, 0, 0, 0);
    zf_tensor_unref(&z);
    in[0] = KT_BOOL(ZF_SHAPE(2, 1), true, false);
    in[1] = KT_BOOL(ZF_SHAPE(2), true, false);
    z = s_run_n("LogicalOr", NULL, ZF_BOOL, in, 2);
    KT_EXPECT_INTS(z, ZF_SHAPE(2, 2), 1, 1, 1, 0);
    zf_tensor_unref(&z);
    in[0] = KT_BOOL(ZF_SHAPE(3), true, false, true);
    z = s_run_n("LogicalNot", NULL, ZF_BOOL, in, 1);
    KT_EXPECT_INTS(z, ZF_SHAPE(3), 0, 1, 0);
    zf_tensor_unref(&z);
    in[0] = KT_BOOL(zf_shape_scalar(), true);
    in[1] = kt_zeros(ZF_BOOL, ZF_SHAPE(0));
    z = s_run_n("LogicalAnd", NULL, ZF_BOOL, in, 2);
    kt_expect_shape(z, ZF_SHAPE(0));
    zf_tensor_unref(&z);
    in[0] = KT_F32(ZF_SHAPE(1), 1);
    zf_test_expect_error(s_try("not", "LogicalNot", NULL, ZF_BOOL, in, 1), ZF_INVALID_ARGUMENT,
                         "not (LogicalNot): input 0 must be bool, got float");
    in[0] = KT_BOOL(ZF_SHAPE(2), true, false);
    in[1] = KT_BOOL(ZF_SHAPE(3), true, false, true);
    zf_test_expect_error(s_try("or", "LogicalOr", NULL, ZF_BOOL, in, 2), ZF_INVALID_ARGUMENT,
                         "or (LogicalOr): Incompatible shapes: [2] vs. [3]");
}

/* ---- Select and SelectV2 --------------------------------------------------------- */

static zf_tensor_t *s_select(const char *op, zf_tensor_t *c, zf_tensor_t *t, zf_tensor_t *e)
{
    zf_tensor_t *in[3] = {c, t, e};
    return s_run_n(op, "T", zf_tensor_dtype(t), in, 3);
}

static void test_select_takes_scalar_same_shape_and_row_conditions(void **state)
{
    (void)state;
    zf_tensor_t *z = s_select("Select", KT_BOOL(ZF_SHAPE(4), true, false, false, true),
                              KT_I32(ZF_SHAPE(4), 1, 2, 3, 4), KT_I32(ZF_SHAPE(4), -1, -2, -3, -4));
    KT_EXPECT_INTS(z, ZF_SHAPE(4), 1, -2, -3, 4);
    zf_tensor_unref(&z);
    z = s_select("Select", KT_BOOL(zf_shape_scalar(), false), KT_F32(ZF_SHAPE(2), 1, 2),
                 KT_F32(ZF_SHAPE(2), 7, 8));
    KT_EXPECT_NEAR(z, ZF_SHAPE(2), 0, 7, 8);
    zf_tensor_unref(&z);
    /* a vector condition picks whole rows */
    z = s_select("Select", KT_BOOL(ZF_SHAPE(3), true, false, true),
                 KT_I64(ZF_SHAPE(3, 2), 1, 2, 3, 4, 5, 6),
                 KT_I64(ZF_SHAPE(3, 2), 10, 20, 30, 40, 50, 60));
    KT_EXPECT_INTS(z, ZF_SHAPE(3, 2), 1, 2, 30, 40, 5, 6);
    zf_tensor_unref(&z);
    z = s_select("Select", KT_BOOL(ZF_SHAPE(2), false, true), KT_F64(ZF_SHAPE(2, 1, 2), 1, 2, 3, 4),
                 KT_F64(ZF_SHAPE(2, 1, 2), 5, 6, 7, 8));
    KT_EXPECT_NEAR(z, ZF_SHAPE(2, 1, 2), 0, 5, 6, 3, 4);
    zf_tensor_unref(&z);
    static const char *const t[2] = {"yes", "oui"}, *const e[2] = {"no", "non"};
    z = s_select("Select", KT_BOOL(ZF_SHAPE(2), true, false), s_str(ZF_SHAPE(2), t),
                 s_str(ZF_SHAPE(2), e));
    kt_expect_shape(z, ZF_SHAPE(2));
    assert_int_equal(zf_tensor_string(z, 0)->len, 3);
    assert_memory_equal(zf_tensor_string(z, 0)->data, "yes", 3);
    assert_int_equal(zf_tensor_string(z, 1)->len, 3);
    assert_memory_equal(zf_tensor_string(z, 1)->data, "non", 3);
    zf_tensor_unref(&z);
}

static void test_select_refuses_shapes_tensorflow_refuses(void **state)
{
    (void)state;
    zf_tensor_t *in[3] = {KT_BOOL(ZF_SHAPE(2), true, false), kt_zeros(ZF_FLOAT, ZF_SHAPE(3, 2)),
                          kt_zeros(ZF_FLOAT, ZF_SHAPE(3, 2))};
    zf_test_expect_error(
        s_try("sel", "Select", "T", ZF_FLOAT, in, 3), ZF_INVALID_ARGUMENT,
        "sel (Select): Number of batches of 'then' must match size of 'cond', but saw: 3 vs. 2");
    in[0] = KT_BOOL(ZF_SHAPE(2), true, false);
    in[1] = kt_zeros(ZF_FLOAT, ZF_SHAPE(2, 2));
    in[2] = kt_zeros(ZF_FLOAT, ZF_SHAPE(2, 3));
    zf_test_expect_error(s_try("sel", "Select", "T", ZF_FLOAT, in, 3), ZF_INVALID_ARGUMENT,
                         "sel (Select): 'then' and 'else' must have the same size.  but "
                         "received: [2,2] vs. [2,3]");
    in[0] = KT_BOOL(ZF_SHAPE(1), true);
    in[1] = kt_zeros(ZF_FLOAT, zf_shape_scalar());
    in[2] = kt_zeros(ZF_FLOAT, zf_shape_scalar());
    zf_test_expect_error(s_try("sel", "Select", "T", ZF_FLOAT, in, 3), ZF_INVALID_ARGUMENT,
                         "sel (Select): 'then' must be at least a vector, but saw shape: []");
    in[0] = KT_BOOL(zf_shape_scalar(), true);
    in[1] = kt_zeros(ZF_INT32, ZF_SHAPE(2));
    in[2] = kt_zeros(ZF_INT32, ZF_SHAPE(3));
    zf_test_expect_error(s_try("sel", "Select", "T", ZF_INT32, in, 3), ZF_INVALID_ARGUMENT,
                         "sel (Select): 'then' and 'else' must have the same size.  but "
                         "received: [2] vs. [3]");
    /* no broadcasting beyond TensorFlow's three cases */
    in[0] = KT_BOOL(ZF_SHAPE(2, 1), true, false);
    in[1] = kt_zeros(ZF_INT32, ZF_SHAPE(2, 3));
    in[2] = kt_zeros(ZF_INT32, ZF_SHAPE(2, 3));
    zf_test_expect_error(s_try("sel", "Select", "T", ZF_INT32, in, 3), ZF_INVALID_ARGUMENT,
                         "sel (Select): Inputs to operation sel of type Select must have the same "
                         "size and shape.  Input 0: [2,1] != input 1: [2,3]");
    in[0] = KT_BOOL(ZF_SHAPE(2), true, false);
    in[1] = kt_zeros(ZF_INT32, ZF_SHAPE(2));
    in[2] = kt_zeros(ZF_INT64, ZF_SHAPE(2));
    zf_test_expect_error(s_try("sel", "Select", "T", ZF_INT32, in, 3), ZF_INVALID_ARGUMENT,
                         "sel (Select): 'then' and 'else' must have the same dtype, got int32 and "
                         "int64");
    in[0] = KT_I32(ZF_SHAPE(2), 1, 0);
    in[1] = kt_zeros(ZF_INT32, ZF_SHAPE(2));
    in[2] = kt_zeros(ZF_INT32, ZF_SHAPE(2));
    zf_test_expect_error(s_try("sel", "Select", "T", ZF_INT32, in, 3), ZF_INVALID_ARGUMENT,
                         "sel (Select): input 0 must be bool, got int32");
}

static void test_select_v2_broadcasts_all_three_inputs(void **state)
{
    (void)state;
    /* cond [2,1], then [1,3], else scalar */
    zf_tensor_t *z = s_select("SelectV2", KT_BOOL(ZF_SHAPE(2, 1), true, false),
                              KT_I32(ZF_SHAPE(1, 3), 1, 2, 3), KT_I32(zf_shape_scalar(), -9));
    KT_EXPECT_INTS(z, ZF_SHAPE(2, 3), 1, 2, 3, -9, -9, -9);
    zf_tensor_unref(&z);
    /* cond [3], then [2,1], else [2,3] */
    z = s_select("SelectV2", KT_BOOL(ZF_SHAPE(3), true, false, true), KT_F32(ZF_SHAPE(2, 1), 1, 2),
                 KT_F32(ZF_SHAPE(2, 3), 10, 20, 30, 40, 50, 60));
    KT_EXPECT_NEAR(z, ZF_SHAPE(2, 3), 0, 1, 20, 1, 2, 50, 2);
    zf_tensor_unref(&z);
    /* a scalar condition over equal shapes */
    z = s_select("SelectV2", KT_BOOL(zf_shape_scalar(), true), KT_I64(ZF_SHAPE(2), 1, 2),
                 KT_I64(ZF_SHAPE(2), 3, 4));
    KT_EXPECT_INTS(z, ZF_SHAPE(2), 1, 2);
    zf_tensor_unref(&z);
    static const char *const t[1] = {"t"}, *const e[2] = {"e0", "e1"};
    z = s_select("SelectV2", KT_BOOL(ZF_SHAPE(2, 1), false, true), s_str(zf_shape_scalar(), t),
                 s_str(ZF_SHAPE(2), e));
    kt_expect_shape(z, ZF_SHAPE(2, 2));
    static const char *const want[4] = {"e0", "e1", "t", "t"};
    for (int i = 0; i < 4; i++) {
        const zf_tstring_t *s = zf_tensor_string(z, i);
        assert_int_equal(s->len, strlen(want[i]));
        assert_memory_equal(s->data, want[i], s->len);
    }
    zf_tensor_unref(&z);
    zf_tensor_t *in[3] = {KT_BOOL(ZF_SHAPE(2), true, false), kt_zeros(ZF_FLOAT, ZF_SHAPE(3)),
                          kt_zeros(ZF_FLOAT, ZF_SHAPE(3))};
    zf_test_expect_error(s_try("sel", "SelectV2", "T", ZF_FLOAT, in, 3), ZF_INVALID_ARGUMENT,
                         "sel (SelectV2): condition [2], then [3], and else [3] must be "
                         "broadcastable");
    in[0] = KT_BOOL(ZF_SHAPE(1), true);
    in[1] = kt_zeros(ZF_FLOAT, ZF_SHAPE(2));
    in[2] = kt_zeros(ZF_FLOAT, ZF_SHAPE(3));
    zf_test_expect_error(s_try("sel", "SelectV2", "T", ZF_FLOAT, in, 3), ZF_INVALID_ARGUMENT,
                         "sel (SelectV2): condition [1], then [2], and else [3] must be "
                         "broadcastable");
}

/* ---- Range ------------------------------------------------------------------------ */

static zf_tensor_t *s_range(zf_tensor_t *start, zf_tensor_t *limit, zf_tensor_t *delta)
{
    zf_tensor_t *in[3] = {start, limit, delta};
    return s_run_n("Range", "Tidx", zf_tensor_dtype(start), in, 3);
}

static void test_range_counts_up_and_down_in_each_type(void **state)
{
    (void)state;
    zf_tensor_t *z = s_range(KT_I32(zf_shape_scalar(), 0), KT_I32(zf_shape_scalar(), 10),
                             KT_I32(zf_shape_scalar(), 3));
    KT_EXPECT_INTS(z, ZF_SHAPE(4), 0, 3, 6, 9);
    zf_tensor_unref(&z);
    z = s_range(KT_I64(zf_shape_scalar(), 5), KT_I64(zf_shape_scalar(), 1),
                KT_I64(zf_shape_scalar(), -2));
    KT_EXPECT_INTS(z, ZF_SHAPE(2), 5, 3);
    zf_tensor_unref(&z);
    z = s_range(KT_I64(zf_shape_scalar(), 3), KT_I64(zf_shape_scalar(), 3),
                KT_I64(zf_shape_scalar(), 1));
    kt_expect_shape(z, ZF_SHAPE(0));
    zf_tensor_unref(&z);
    z = s_range(KT_F32(zf_shape_scalar(), 0), KT_F32(zf_shape_scalar(), 1),
                KT_F32(zf_shape_scalar(), 0.25f));
    KT_EXPECT_NEAR(z, ZF_SHAPE(4), 0, 0, 0.25, 0.5, 0.75);
    zf_tensor_unref(&z);
    z = s_range(KT_F64(zf_shape_scalar(), 1), KT_F64(zf_shape_scalar(), -1),
                KT_F64(zf_shape_scalar(), -0.75));
    KT_EXPECT_NEAR(z, ZF_SHAPE(3), 0, 1, 0.25, -0.5);
    zf_tensor_unref(&z);
    /* one-element vectors stand for scalars, as TensorFlow allows */
    z = s_range(KT_I32(ZF_SHAPE(1), 2), KT_I32(zf_shape_scalar(), 5), KT_I32(ZF_SHAPE(1), 1));
    KT_EXPECT_INTS(z, ZF_SHAPE(3), 2, 3, 4);
    zf_tensor_unref(&z);
    /* the span of a whole int32 does not overflow */
    z = s_range(KT_I32(zf_shape_scalar(), INT32_MIN), KT_I32(zf_shape_scalar(), INT32_MAX),
                KT_I32(zf_shape_scalar(), INT32_MAX));
    KT_EXPECT_INTS(z, ZF_SHAPE(3), INT32_MIN, -1, INT32_MAX - 1);
    zf_tensor_unref(&z);
}

static void s_range_error(zf_dtype_t t, zf_tensor_t *a, zf_tensor_t *b, zf_tensor_t *c,
                          const char *text)
{
    zf_tensor_t *in[3] = {a, b, c};
    zf_test_expect_error(s_try("r", "Range", "Tidx", t, in, 3), ZF_INVALID_ARGUMENT, text);
}

static void test_range_errors_use_tensorflows_words(void **state)
{
    (void)state;
    zf_shape_t s = zf_shape_scalar();
    s_range_error(ZF_INT32, KT_I32(s, 0), KT_I32(s, 5), KT_I32(s, 0),
                  "r (Range): Requires delta != 0: 0");
    s_range_error(ZF_INT32, KT_I32(s, 5), KT_I32(s, 1), KT_I32(s, 1),
                  "r (Range): Requires start <= limit when delta > 0: 5/1");
    s_range_error(ZF_INT64, KT_I64(s, 1), KT_I64(s, 5), KT_I64(s, -1),
                  "r (Range): Requires start >= limit when delta < 0: 1/5");
    s_range_error(ZF_FLOAT, KT_F32(s, 1.5f), KT_F32(s, 0.5f), KT_F32(s, 0.1f),
                  "r (Range): Requires start <= limit when delta > 0: 1.5/0.5");
    s_range_error(ZF_DOUBLE, KT_F64(s, 0), KT_F64(s, 1), KT_F64(s, 0),
                  "r (Range): Requires delta != 0: 0");
    s_range_error(ZF_FLOAT, KT_F32(s, 0.1f), KT_F32(s, 1), KT_F32(s, 0),
                  "r (Range): Requires delta != 0: 0");
    s_range_error(ZF_INT32, KT_I32(ZF_SHAPE(2), 0, 1), KT_I32(s, 5), KT_I32(s, 1),
                  "r (Range): start must be a scalar, not shape [2]");
    s_range_error(ZF_INT32, KT_I32(s, 0), KT_I32(ZF_SHAPE(1, 1), 5), KT_I32(s, 1),
                  "r (Range): limit must be a scalar, not shape [1,1]");
    s_range_error(ZF_INT32, KT_I32(s, 0), KT_I32(s, 5), kt_zeros(ZF_INT32, ZF_SHAPE(0)),
                  "r (Range): delta must be a scalar, not shape [0]");
    s_range_error(ZF_INT32, KT_I32(s, 0), KT_I64(s, 5), KT_I32(s, 1),
                  "r (Range): input 1 must be int32, got int64");
}

/* ---- division ------------------------------------------------------------------------ */

static void test_integer_division_rounds_like_tensorflow(void **state)
{
    (void)state;
    /* every x in [-7, 7] against every nonzero y in [-3, 3] */
    int32_t xs[15 * 6], ys[15 * 6];
    int n = 0;
    for (int x = -7; x <= 7; x++)
        for (int y = -3; y <= 3; y++)
            if (y) {
                xs[n] = x;
                ys[n] = y;
                n++;
            }
    zf_tensor_t *fd = s_binary("FloorDiv", kt_tensor(ZF_INT32, ZF_SHAPE(n), xs, (size_t)n),
                               kt_tensor(ZF_INT32, ZF_SHAPE(n), ys, (size_t)n));
    zf_tensor_t *fm = s_binary("FloorMod", kt_tensor(ZF_INT32, ZF_SHAPE(n), xs, (size_t)n),
                               kt_tensor(ZF_INT32, ZF_SHAPE(n), ys, (size_t)n));
    zf_tensor_t *td = s_binary("TruncateDiv", kt_tensor(ZF_INT32, ZF_SHAPE(n), xs, (size_t)n),
                               kt_tensor(ZF_INT32, ZF_SHAPE(n), ys, (size_t)n));
    zf_tensor_t *dv = s_binary("Div", kt_tensor(ZF_INT32, ZF_SHAPE(n), xs, (size_t)n),
                               kt_tensor(ZF_INT32, ZF_SHAPE(n), ys, (size_t)n));
    const int32_t *pfd = zf_tensor_data(fd), *pfm = zf_tensor_data(fm), *ptd = zf_tensor_data(td),
                  *pdv = zf_tensor_data(dv);
    for (int i = 0; i < n; i++) {
        double q = (double)xs[i] / ys[i];
        int32_t want_fd = (int32_t)floor(q), want_td = (int32_t)trunc(q);
        int32_t want_fm = xs[i] - want_fd * ys[i];
        if (pfd[i] != want_fd || pfm[i] != want_fm || ptd[i] != want_td || pdv[i] != want_td)
            fail_msg("%d, %d: FloorDiv %d FloorMod %d TruncateDiv %d Div %d; want %d %d %d", xs[i],
                     ys[i], pfd[i], pfm[i], ptd[i], pdv[i], want_fd, want_fm, want_td);
        /* the floor remainder takes the divisor's sign */
        assert_true(pfm[i] == 0 || (pfm[i] < 0) == (ys[i] < 0));
    }
    zf_tensor_unref(&fd);
    zf_tensor_unref(&fm);
    zf_tensor_unref(&td);
    zf_tensor_unref(&dv);
    /* int64 with broadcasting, and the most negative value over -1 wraps */
    zf_tensor_t *z =
        s_binary("FloorDiv", KT_I64(ZF_SHAPE(3), INT64_MIN, -9, 9), KT_I64(zf_shape_scalar(), -1));
    KT_EXPECT_INTS(z, ZF_SHAPE(3), INT64_MIN, 9, -9);
    zf_tensor_unref(&z);
    z = s_binary("FloorMod", KT_I32(ZF_SHAPE(2), INT32_MIN, -9), KT_I32(ZF_SHAPE(2), -1, 4));
    KT_EXPECT_INTS(z, ZF_SHAPE(2), 0, 3);
    zf_tensor_unref(&z);
    uint8_t a[3] = {250, 7, 0}, b[3] = {7, 250, 3};
    z = s_binary("FloorDiv", kt_tensor(ZF_UINT8, ZF_SHAPE(3), a, 3),
                 kt_tensor(ZF_UINT8, ZF_SHAPE(3), b, 3));
    const uint8_t *pz = zf_tensor_data(z);
    assert_int_equal(pz[0], 35);
    assert_int_equal(pz[1], 0);
    assert_int_equal(pz[2], 0);
    zf_tensor_unref(&z);
    int8_t c[2] = {-7, 7}, d[2] = {2, -2};
    z = s_binary("FloorMod", kt_tensor(ZF_INT8, ZF_SHAPE(2), c, 2),
                 kt_tensor(ZF_INT8, ZF_SHAPE(2), d, 2));
    const int8_t *pm = zf_tensor_data(z);
    assert_int_equal(pm[0], 1);
    assert_int_equal(pm[1], -1);
    zf_tensor_unref(&z);
}

static void test_float_floor_division_and_modulo(void **state)
{
    (void)state;
    zf_tensor_t *z = s_binary("FloorDiv", KT_F32(ZF_SHAPE(4), 7.5f, -7.5f, 7.5f, 1),
                              KT_F32(ZF_SHAPE(4), 2, 2, -2, 0));
    KT_EXPECT_NEAR(z, ZF_SHAPE(4), 0, 3, -4, -4, INFINITY);
    zf_tensor_unref(&z);
    z = s_binary("FloorMod", KT_F64(ZF_SHAPE(4), 7.5, -7.5, 7.5, -6),
                 KT_F64(ZF_SHAPE(4), 2, 2, -2, 3));
    KT_EXPECT_NEAR(z, ZF_SHAPE(4), 0, 1.5, 0.5, -0.5, 0);
    zf_tensor_unref(&z);
}

static void test_integer_division_by_zero_is_an_error(void **state)
{
    (void)state;
    static const char *const ops[4] = {"FloorDiv", "FloorMod", "TruncateDiv", "Div"};
    for (int k = 0; k < 4; k++) {
        zf_tensor_t *in[2] = {KT_I32(ZF_SHAPE(3), 1, 2, 3), KT_I32(ZF_SHAPE(3), 1, 0, 1)};
        zf_test_expect_error(s_try("d", ops[k], "T", ZF_INT32, in, 2), ZF_INVALID_ARGUMENT,
                             "Integer division by zero");
    }
    zf_tensor_t *in[2] = {KT_I64(ZF_SHAPE(2), 1, 2), KT_I64(zf_shape_scalar(), 0)};
    zf_test_expect_error(s_try("d", "FloorDiv", "T", ZF_INT64, in, 2), ZF_INVALID_ARGUMENT,
                         "d (FloorDiv): Integer division by zero");
}

/* ---- loop counters ------------------------------------------------------------------ */

static void test_scalar_counter_arithmetic_in_int32_and_int64(void **state)
{
    (void)state;
    static const char *const ops[8] = {"Add",      "AddV2",    "Sub",     "Mul",
                                       "FloorDiv", "FloorMod", "Maximum", "Minimum"};
    static const int64_t want[8] = {10, 10, 4, 21, 2, 1, 7, 3};
    for (int k = 0; k < 8; k++) {
        zf_tensor_t *z =
            s_binary(ops[k], KT_I32(zf_shape_scalar(), 7), KT_I32(zf_shape_scalar(), 3));
        assert_int_equal(zf_tensor_dtype(z), ZF_INT32);
        KT_EXPECT_INTS(z, zf_shape_scalar(), want[k]);
        zf_tensor_unref(&z);
        z = s_binary(ops[k], KT_I64(zf_shape_scalar(), 7), KT_I64(zf_shape_scalar(), 3));
        assert_int_equal(zf_tensor_dtype(z), ZF_INT64);
        KT_EXPECT_INTS(z, zf_shape_scalar(), want[k]);
        zf_tensor_unref(&z);
    }
    /* a counter's test: i < n */
    zf_tensor_t *z = s_binary("Less", KT_I32(zf_shape_scalar(), 2), KT_I32(zf_shape_scalar(), 3));
    assert_int_equal(zf_tensor_dtype(z), ZF_BOOL);
    KT_EXPECT_INTS(z, zf_shape_scalar(), 1);
    zf_tensor_unref(&z);
}

/* The GPU definitions hold in every build (the placer reads them): INT32
 * and Range in host memory, the rest in GPU memory. */
static void test_gpu_definitions_keep_int32_and_range_in_host_memory(void **state)
{
    (void)state;
    zf_kernels_register_builtin(false);
    static const struct {
        const char *op, *attr;
        zf_dtype_t t;
        bool host;
    } cases[] = {
        {"Less", "T", ZF_INT32, true},           {"Less", "T", ZF_FLOAT, false},
        {"GreaterEqual", "T", ZF_INT64, false},  {"Equal", "T", ZF_BOOL, false},
        {"NotEqual", "T", ZF_INT32, true},       {"FloorMod", "T", ZF_INT32, true},
        {"FloorDiv", "T", ZF_INT32, true},       {"Select", "T", ZF_HALF, false},
        {"SelectV2", "T", ZF_INT32, true},       {"Range", "Tidx", ZF_FLOAT, true},
        {"Range", "Tidx", ZF_INT64, true},       {"LogicalAnd", NULL, ZF_INVALID, false},
        {"LogicalNot", NULL, ZF_INVALID, false},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        Tensorflow__NodeDef *n = kt_node_new("n", cases[i].op, 2);
        if (cases[i].attr) kt_attr_type(n, cases[i].attr, cases[i].t);
        const zf_kernel_def_t *def = NULL;
        ASSERT_OK(zf_kernel_def_find("GPU", n, &def, NULL));
        uint32_t want = cases[i].host ? ZF_KERNEL_ALL_HOST : 0;
        if (def->host_memory_inputs != want || def->host_memory_outputs != want)
            fail_msg("%s: host-memory masks %#x/%#x, want %#x", cases[i].op,
                     def->host_memory_inputs, def->host_memory_outputs, want);
        kt_node_free(&n);
    }
    /* and no GPU kernel for a type TensorFlow has none for there */
    Tensorflow__NodeDef *n = kt_node_new("n", "Less", 2);
    kt_attr_type(n, "T", ZF_UINT64);
    const zf_kernel_def_t *def = NULL;
    zf_test_expect_error(zf_kernel_def_find("GPU", n, &def, NULL), ZF_NOT_FOUND, "T=DT_UINT64");
    kt_node_free(&n);
}

/* ---- end to end --------------------------------------------------------------------- */

/* A loop body's worth of these ops: r = range(n); keep the even r < 3 and
 * negate the rest. */
static const char s_graph[] =
    "node { name: 'n' op: 'Placeholder' attr { key: 'dtype' value { type: DT_INT32 } } }\n"
    "node { name: 'zero' op: 'Const' attr { key: 'dtype' value { type: DT_INT32 } }"
    " attr { key: 'value' value { tensor { dtype: DT_INT32 int_val: 0 } } } }\n"
    "node { name: 'one' op: 'Const' attr { key: 'dtype' value { type: DT_INT32 } }"
    " attr { key: 'value' value { tensor { dtype: DT_INT32 int_val: 1 } } } }\n"
    "node { name: 'two' op: 'Const' attr { key: 'dtype' value { type: DT_INT32 } }"
    " attr { key: 'value' value { tensor { dtype: DT_INT32 int_val: 2 } } } }\n"
    "node { name: 'three' op: 'Const' attr { key: 'dtype' value { type: DT_INT32 } }"
    " attr { key: 'value' value { tensor { dtype: DT_INT32 int_val: 3 } } } }\n"
    "node { name: 'r' op: 'Range' input: 'zero' input: 'n' input: 'one'"
    " attr { key: 'Tidx' value { type: DT_INT32 } } }\n"
    "node { name: 'small' op: 'Less' input: 'r' input: 'three'"
    " attr { key: 'T' value { type: DT_INT32 } } }\n"
    "node { name: 'm' op: 'FloorMod' input: 'r' input: 'two'"
    " attr { key: 'T' value { type: DT_INT32 } } }\n"
    "node { name: 'even' op: 'Equal' input: 'm' input: 'zero'"
    " attr { key: 'T' value { type: DT_INT32 } } }\n"
    "node { name: 'both' op: 'LogicalAnd' input: 'small' input: 'even' }\n"
    "node { name: 'neither' op: 'LogicalNot' input: 'both' }\n"
    "node { name: 'neg' op: 'Neg' input: 'r' attr { key: 'T' value { type: DT_INT32 } } }\n"
    "node { name: 'pick' op: 'SelectV2' input: 'both' input: 'r' input: 'neg'"
    " attr { key: 'T' value { type: DT_INT32 } } }\n";

/* Runs "zflow run <graph> --inprocess <args>". */
static int s_zflow_run(const char *graph, const char *args, char *out, size_t cap)
{
    char program[512], all[512];
    snprintf(program, sizeof program, "%s/zflow", ZF_BIN_DIR);
    snprintf(all, sizeof all, "run %s --inprocess %s", graph, args);
    return zf_test_run_program(program, all, out, cap);
}

static void test_zflow_run_evaluates_a_graph_of_these_ops(void **state)
{
    (void)state;
    char path[] = "/tmp/zf_compare_XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, s_graph, sizeof s_graph - 1), (ssize_t)(sizeof s_graph - 1));
    close(fd);
    char out[4096];
    int rc = s_zflow_run(path, "--feed n=6 --fetch both pick neither", out, sizeof out);
    /* r = [0..5]: r < 3 = [T T T F F F], r % 2 == 0 = [T F T F T F] */
    if (rc != 0) fail_msg("exit code %d: %s", rc, out);
    assert_string_equal(out, "both =\n[ True False  True False False False]\n"
                             "pick =\n[ 0 -1  2 -3 -4 -5]\n"
                             "neither =\n[False  True False  True  True  True]\n");
    rc = s_zflow_run(path, "--feed n=-1 --fetch pick", out, sizeof out);
    assert_int_equal(rc, 1);
    if (!strstr(out, "r (Range): Requires start <= limit when delta > 0: 0/-1"))
        fail_msg("output: %s", out);
    assert_int_equal(unlink(path), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_comparisons_compute_hand_checked_values),
        cmocka_unit_test(test_comparisons_follow_each_types_own_order),
        cmocka_unit_test(test_equality_covers_bools_and_strings),
        cmocka_unit_test(test_comparisons_broadcast_like_numpy),
        cmocka_unit_test(test_incompatible_shapes_error_unless_equality_allows_them),
        cmocka_unit_test(test_kernel_lookup_refuses_types_tensorflow_does_not_register),
        cmocka_unit_test(test_logical_ops_follow_their_truth_tables_and_broadcast),
        cmocka_unit_test(test_select_takes_scalar_same_shape_and_row_conditions),
        cmocka_unit_test(test_select_refuses_shapes_tensorflow_refuses),
        cmocka_unit_test(test_select_v2_broadcasts_all_three_inputs),
        cmocka_unit_test(test_range_counts_up_and_down_in_each_type),
        cmocka_unit_test(test_range_errors_use_tensorflows_words),
        cmocka_unit_test(test_integer_division_rounds_like_tensorflow),
        cmocka_unit_test(test_float_floor_division_and_modulo),
        cmocka_unit_test(test_integer_division_by_zero_is_an_error),
        cmocka_unit_test(test_scalar_counter_arithmetic_in_int32_and_int64),
        cmocka_unit_test(test_gpu_definitions_keep_int32_and_range_in_host_memory),
        cmocka_unit_test(test_zflow_run_evaluates_a_graph_of_these_ops),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
