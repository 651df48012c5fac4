/* Tests for executor/kernels/kernels_batch_matmul: BatchMatMul (equal batch
 * dimensions), BatchMatMulV2 and V3 (broadcast batch dimensions) with
 * adj_x/adj_y in float and double against a naive loop written here; empty
 * shapes and errors. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "kernel_test_util.h"

static double s_get(const zf_tensor_t *t, int64_t i)
{
    return zf_tensor_dtype(t) == ZF_FLOAT ? ((const float *)zf_tensor_data(t))[i]
                                          : ((const double *)zf_tensor_data(t))[i];
}

static Tensorflow__NodeDef *s_node(const char *op, zf_dtype_t t, bool adj_x, bool adj_y)
{
    Tensorflow__NodeDef *n = kt_node_new("bmm", op, 2);
    if (strcmp(op, "BatchMatMulV3") == 0) {
        kt_attr_type(n, "Ta", t);
        kt_attr_type(n, "Tb", t);
        kt_attr_type(n, "Tout", t);
    } else {
        kt_attr_type(n, "T", t);
    }
    kt_attr_bool(n, "adj_x", adj_x);
    kt_attr_bool(n, "adj_y", adj_y);
    return n;
}

/* The flat offset of the matrix an operand of shape s gives output batch
 * index b of batch shape ob (dims aligned from the right, size 1 repeats). */
static int64_t s_matrix(const zf_shape_t *s, const zf_shape_t *ob, int64_t b)
{
    int64_t coords[ZF_MAX_RANK];
    for (int i = ob->rank - 1; i >= 0; i--) {
        coords[i] = b % ob->dims[i];
        b /= ob->dims[i];
    }
    int64_t index = 0;
    for (int j = 0; j < s->rank - 2; j++) {
        int i = j + ob->rank - (s->rank - 2);
        index = index * s->dims[j] + (s->dims[j] == 1 ? 0 : coords[i]);
    }
    return index * s->dims[s->rank - 2] * s->dims[s->rank - 1];
}

static void s_check(const char *op, zf_dtype_t t, zf_shape_t xs, zf_shape_t ys, bool adj_x,
                    bool adj_y, zf_shape_t want)
{
    zf_tensor_t *in[2] = {kt_random_float(t, xs, 3), kt_random_float(t, ys, 4)}, *out = NULL;
    Tensorflow__NodeDef *n = s_node(op, t, adj_x, adj_y);
    ASSERT_OK(kt_run(n, in, 2, &out, 1));
    kt_expect_shape(out, want);
    zf_shape_t ob = {.rank = want.rank - 2};
    for (int i = 0; i < ob.rank; i++) ob.dims[i] = want.dims[i];
    int64_t m = want.dims[want.rank - 2], nn = want.dims[want.rank - 1];
    int64_t xr = xs.dims[xs.rank - 2], xc = xs.dims[xs.rank - 1], yc = ys.dims[ys.rank - 1];
    int64_t k = adj_x ? xr : xc, batches = zf_tensor_num_elements(out) / (m * nn);
    for (int64_t b = 0; b < batches; b++) {
        int64_t xo = s_matrix(&xs, &ob, b), yo = s_matrix(&ys, &ob, b);
        for (int64_t i = 0; i < m; i++)
            for (int64_t j = 0; j < nn; j++) {
                double sum = 0;
                for (int64_t p = 0; p < k; p++) {
                    double a = s_get(in[0], xo + (adj_x ? p * xc + i : i * xc + p));
                    double c = s_get(in[1], yo + (adj_y ? j * yc + p : p * yc + j));
                    sum += a * c;
                }
                double got = s_get(out, (b * m + i) * nn + j);
                if (fabs(got - sum) > (t == ZF_FLOAT ? 1e-5 : 1e-12) * (1 + fabs(sum)))
                    fail_msg("%s [%lld,%lld,%lld]: %.9g vs %.9g", op, (long long)b, (long long)i,
                             (long long)j, got, sum);
            }
    }
    kt_unref_all((zf_tensor_t *[]){in[0], in[1], out}, 3);
    kt_node_free(&n);
}

static void test_batch_matmul_matches_a_naive_loop(void **state)
{
    (void)state;
    for (int t = 0; t < 2; t++) {
        zf_dtype_t dt = t ? ZF_DOUBLE : ZF_FLOAT;
        s_check("BatchMatMul", dt, ZF_SHAPE(2, 3, 4), ZF_SHAPE(2, 4, 5), false, false,
                ZF_SHAPE(2, 3, 5));
        s_check("BatchMatMul", dt, ZF_SHAPE(2, 2, 4, 3), ZF_SHAPE(2, 2, 5, 4), true, true,
                ZF_SHAPE(2, 2, 3, 5));
        s_check("BatchMatMulV2", dt, ZF_SHAPE(3, 4), ZF_SHAPE(2, 4, 5), false, false,
                ZF_SHAPE(2, 3, 5));
        s_check("BatchMatMulV2", dt, ZF_SHAPE(3, 1, 2, 4), ZF_SHAPE(5, 4, 3), false, false,
                ZF_SHAPE(3, 5, 2, 3));
        s_check("BatchMatMulV2", dt, ZF_SHAPE(1, 2, 6, 3), ZF_SHAPE(4, 1, 6, 2), true, false,
                ZF_SHAPE(4, 2, 3, 2));
        s_check("BatchMatMulV2", dt, ZF_SHAPE(2, 3, 6), ZF_SHAPE(1, 4, 6), false, true,
                ZF_SHAPE(2, 3, 4));
        s_check("BatchMatMulV3", dt, ZF_SHAPE(2, 1, 5, 3), ZF_SHAPE(3, 5, 4), true, false,
                ZF_SHAPE(2, 3, 3, 4));
        s_check("BatchMatMulV3", dt, ZF_SHAPE(7, 8), ZF_SHAPE(9, 8), false, true, ZF_SHAPE(7, 9));
    }
}

static void test_batch_matmul_of_hand_checked_matrices(void **state)
{
    (void)state;
    Tensorflow__NodeDef *n = s_node("BatchMatMulV2", ZF_FLOAT, false, false);
    /* one left matrix against two right ones: [[1,2],[3,4]] times I and 2I */
    zf_tensor_t *in[2] = {KT_F32(ZF_SHAPE(2, 2), 1, 2, 3, 4),
                          KT_F32(ZF_SHAPE(2, 2, 2), 1, 0, 0, 1, 2, 0, 0, 2)};
    zf_tensor_t *out = NULL;
    ASSERT_OK(kt_run(n, in, 2, &out, 1));
    KT_EXPECT_NEAR(out, ZF_SHAPE(2, 2, 2), 0, 1, 2, 3, 4, 2, 4, 6, 8);
    kt_unref_all((zf_tensor_t *[]){in[0], in[1], out}, 3);
    kt_node_free(&n);
}

static void test_batch_matmul_handles_empty_shapes(void **state)
{
    (void)state;
    Tensorflow__NodeDef *n = s_node("BatchMatMulV2", ZF_FLOAT, false, false);
    zf_tensor_t *in[2] = {kt_zeros(ZF_FLOAT, ZF_SHAPE(2, 2, 0)),
                          kt_zeros(ZF_FLOAT, ZF_SHAPE(0, 3))};
    zf_tensor_t *out = NULL;
    ASSERT_OK(kt_run(n, in, 2, &out, 1)); /* empty sums */
    KT_EXPECT_NEAR(out, ZF_SHAPE(2, 2, 3), 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0);
    zf_tensor_unref(&out);
    kt_unref_all(in, 2);
    in[0] = kt_zeros(ZF_FLOAT, ZF_SHAPE(0, 2, 3));
    in[1] = kt_zeros(ZF_FLOAT, ZF_SHAPE(3, 4));
    ASSERT_OK(kt_run(n, in, 2, &out, 1));
    kt_expect_shape(out, ZF_SHAPE(0, 2, 4));
    kt_unref_all((zf_tensor_t *[]){in[0], in[1], out}, 3);
    kt_node_free(&n);
}

static void test_batch_matmul_reports_bad_inputs(void **state)
{
    (void)state;
    Tensorflow__NodeDef *v1 = s_node("BatchMatMul", ZF_FLOAT, false, false);
    Tensorflow__NodeDef *v2 = s_node("BatchMatMulV2", ZF_FLOAT, false, false);
    zf_tensor_t *a = kt_zeros(ZF_FLOAT, ZF_SHAPE(2, 3, 4)), *b = kt_zeros(ZF_FLOAT, ZF_SHAPE(4, 5));
    zf_tensor_t *in[2] = {a, b}, *out = NULL;
    zf_test_expect_error(kt_run(v1, in, 2, &out, 1), ZF_INVALID_ARGUMENT,
                         "bmm (BatchMatMul): In[0] and In[1] must have the same batch "
                         "dimensions: [2,3,4] vs. [4,5]");
    zf_tensor_t *c = kt_zeros(ZF_FLOAT, ZF_SHAPE(3, 5, 2));
    in[1] = c;
    zf_test_expect_error(kt_run(v2, in, 2, &out, 1), ZF_INVALID_ARGUMENT,
                         "bmm (BatchMatMulV2): In[0] and In[1] must have compatible batch "
                         "dimensions: [2,3,4] vs. [3,5,2]");
    zf_tensor_t *d = kt_zeros(ZF_FLOAT, ZF_SHAPE(2, 5, 2));
    in[1] = d;
    zf_test_expect_error(kt_run(v2, in, 2, &out, 1), ZF_INVALID_ARGUMENT,
                         "Matrix size-incompatible: In[0]: [2,3,4], In[1]: [2,5,2]");
    zf_tensor_t *e = kt_zeros(ZF_FLOAT, ZF_SHAPE(4));
    in[1] = e;
    zf_test_expect_error(kt_run(v2, in, 2, &out, 1), ZF_INVALID_ARGUMENT,
                         "In[0] and In[1] must have rank at least 2: [2,3,4] vs. [4]");
    zf_tensor_t *f = kt_zeros(ZF_DOUBLE, ZF_SHAPE(4, 5));
    in[1] = f;
    zf_test_expect_error(kt_run(v2, in, 2, &out, 1), ZF_INVALID_ARGUMENT,
                         "input 1 must be float, got double");
    assert_null(out);
    Tensorflow__NodeDef *v3 = kt_node_new("bmm", "BatchMatMulV3", 2);
    kt_attr_type(v3, "Ta", ZF_FLOAT);
    kt_attr_type(v3, "Tb", ZF_FLOAT);
    kt_attr_type(v3, "Tout", ZF_DOUBLE);
    in[1] = b;
    zf_test_expect_error(kt_run(v3, in, 2, &out, 1), ZF_UNIMPLEMENTED,
                         "bmm (BatchMatMulV3): Ta, Tb and Tout must be the same type on CPU, got "
                         "float, float and double");
    assert_null(out);
    kt_unref_all((zf_tensor_t *[]){a, b, c, d, e, f}, 6);
    kt_node_free(&v1);
    kt_node_free(&v2);
    kt_node_free(&v3);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_batch_matmul_matches_a_naive_loop),
        cmocka_unit_test(test_batch_matmul_of_hand_checked_matrices),
        cmocka_unit_test(test_batch_matmul_handles_empty_shapes),
        cmocka_unit_test(test_batch_matmul_reports_bad_inputs),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
