/* Tests for executor/kernels/kernels_einsum: Einsum's one- and two-operand
 * equations (matrix products, attention's batched products, ellipsis
 * broadcasting, transposes, reductions, outer products) in float and
 * double against index loops written here for each equation; batch dims
 * of 1, empty dims, and bad or unsupported equations. */
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

/* The element of t at idx (one index per dim of t). */
static double s_at(const zf_tensor_t *t, const int64_t *idx)
{
    const zf_shape_t *s = zf_tensor_shape(t);
    int64_t off = 0;
    for (int d = 0; d < s->rank; d++) off = off * s->dims[d] + idx[d];
    return s_get(t, off);
}
#define AT(t, ...) s_at((t), (const int64_t[]){__VA_ARGS__})

static Tensorflow__NodeDef *s_node(const char *eq, zf_dtype_t t, int n)
{
    Tensorflow__NodeDef *node = kt_node_new("es", "Einsum", n);
    kt_attr_type(node, "T", t);
    kt_attr_int(node, "N", n);
    kt_attr_string(node, "equation", eq);
    return node;
}

/* Runs eq on inputs and checks the output's shape and values against want. */
static void s_expect(const char *eq, zf_tensor_t *const *in, int n, zf_shape_t shape,
                     const double *want)
{
    zf_dtype_t t = zf_tensor_dtype(in[0]);
    Tensorflow__NodeDef *node = s_node(eq, t, n);
    zf_tensor_t *out = NULL;
    ASSERT_OK(kt_run(node, in, n, &out, 1));
    assert_int_equal(zf_tensor_dtype(out), t);
    kt_expect_shape(out, shape);
    double tol = t == ZF_FLOAT ? 1e-5 : 1e-12;
    for (int64_t i = 0; i < zf_tensor_num_elements(out); i++) {
        double got = s_get(out, i);
        if (fabs(got - want[i]) > tol * (1 + fabs(want[i])))
            fail_msg("%s [%lld]: %.9g vs %.9g", eq, (long long)i, got, want[i]);
    }
    zf_tensor_unref(&out);
    kt_node_free(&node);
}

static void test_einsum_matrix_products(void **state)
{
    (void)state;
    for (int t = 0; t < 2; t++) {
        zf_dtype_t dt = t ? ZF_DOUBLE : ZF_FLOAT;
        double want[256];
        zf_tensor_t *in[2] = {kt_random_float(dt, ZF_SHAPE(3, 4), 1),
                              kt_random_float(dt, ZF_SHAPE(4, 5), 2)};
        for (int i = 0; i < 3; i++)
            for (int k = 0; k < 5; k++) {
                double s = 0;
                for (int j = 0; j < 4; j++) s += AT(in[0], i, j) * AT(in[1], j, k);
                want[i * 5 + k] = s;
            }
        s_expect("ij,jk->ik", in, 2, ZF_SHAPE(3, 5), want);
        for (int k = 0; k < 5; k++) /* the product transposed */
            for (int i = 0; i < 3; i++) {
                double s = 0;
                for (int j = 0; j < 4; j++) s += AT(in[0], i, j) * AT(in[1], j, k);
                want[k * 3 + i] = s;
            }
        s_expect("ij,jk->ki", in, 2, ZF_SHAPE(5, 3), want);
        for (int k = 0; k < 5; k++) { /* i summed within the first operand */
            double s = 0;
            for (int i = 0; i < 3; i++)
                for (int j = 0; j < 4; j++) s += AT(in[0], i, j) * AT(in[1], j, k);
            want[k] = s;
        }
        s_expect("ij,jk->k", in, 2, ZF_SHAPE(5), want);
        for (int i = 0; i < 3; i++) { /* k summed within the second operand */
            double s = 0;
            for (int j = 0; j < 4; j++)
                for (int k = 0; k < 5; k++) s += AT(in[0], i, j) * AT(in[1], j, k);
            want[i] = s;
        }
        s_expect("ij,jk->i", in, 2, ZF_SHAPE(3), want);
        kt_unref_all(in, 2);

        in[0] = kt_random_float(dt, ZF_SHAPE(3, 4), 3); /* ij,kj: the second one transposed */
        in[1] = kt_random_float(dt, ZF_SHAPE(6, 4), 4);
        for (int i = 0; i < 3; i++)
            for (int k = 0; k < 6; k++) {
                double s = 0;
                for (int j = 0; j < 4; j++) s += AT(in[0], i, j) * AT(in[1], k, j);
                want[i * 6 + k] = s;
            }
        s_expect("ij,kj->ik", in, 2, ZF_SHAPE(3, 6), want);
        kt_unref_all(in, 2);

        in[0] = kt_random_float(dt, ZF_SHAPE(3), 5); /* outer product */
        in[1] = kt_random_float(dt, ZF_SHAPE(4), 6);
        for (int i = 0; i < 3; i++)
            for (int j = 0; j < 4; j++) want[i * 4 + j] = AT(in[0], i) * AT(in[1], j);
        s_expect("i,j->ij", in, 2, ZF_SHAPE(3, 4), want);
        kt_unref_all(in, 2);

        in[0] = kt_random_float(dt, ZF_SHAPE(2, 3, 4), 7); /* one batch dim, against a matrix */
        in[1] = kt_random_float(dt, ZF_SHAPE(4, 5), 8);
        for (int b = 0; b < 2; b++)
            for (int i = 0; i < 3; i++)
                for (int k = 0; k < 5; k++) {
                    double s = 0;
                    for (int j = 0; j < 4; j++) s += AT(in[0], b, i, j) * AT(in[1], j, k);
                    want[(b * 3 + i) * 5 + k] = s;
                }
        s_expect("bij,jk->bik", in, 2, ZF_SHAPE(2, 3, 5), want);
        kt_unref_all(in, 2);
    }
}

static void s_batched(zf_dtype_t dt, int64_t batch)
{
    double want[512];
    zf_tensor_t *in[2] = {kt_random_float(dt, ZF_SHAPE(batch, 3, 4), 9),
                          kt_random_float(dt, ZF_SHAPE(batch, 4, 5), 10)};
    for (int b = 0; b < batch; b++)
        for (int i = 0; i < 3; i++)
            for (int k = 0; k < 5; k++) {
                double s = 0;
                for (int j = 0; j < 4; j++) s += AT(in[0], b, i, j) * AT(in[1], b, j, k);
                want[(b * 3 + i) * 5 + k] = s;
            }
    s_expect("bij,bjk->bik", in, 2, ZF_SHAPE(batch, 3, 5), want);
    for (int b = 0; b < batch; b++) { /* per-batch dot products of rows */
        double s = 0;
        for (int i = 0; i < 3; i++)
            for (int j = 0; j < 4; j++) s += AT(in[0], b, i, j) * AT(in[0], b, i, j);
        want[b] = s;
    }
    zf_tensor_t *same[2] = {in[0], in[0]};
    s_expect("bij,bij->b", same, 2, ZF_SHAPE(batch), want);
    kt_unref_all(in, 2);
}

static void test_einsum_batched_and_attention_products(void **state)
{
    (void)state;
    for (int t = 0; t < 2; t++) {
        zf_dtype_t dt = t ? ZF_DOUBLE : ZF_FLOAT;
        s_batched(dt, 2);
        s_batched(dt, 1);
        double want[2 * 3 * 4 * 6];
        /* scores: queries against keys */
        zf_tensor_t *in[2] = {kt_random_float(dt, ZF_SHAPE(2, 3, 4, 5), 11),
                              kt_random_float(dt, ZF_SHAPE(2, 3, 6, 5), 12)};
        for (int b = 0; b < 2; b++)
            for (int h = 0; h < 3; h++)
                for (int q = 0; q < 4; q++)
                    for (int k = 0; k < 6; k++) {
                        double s = 0;
                        for (int d = 0; d < 5; d++)
                            s += AT(in[0], b, h, q, d) * AT(in[1], b, h, k, d);
                        want[((b * 3 + h) * 4 + q) * 6 + k] = s;
                    }
        s_expect("bhqd,bhkd->bhqk", in, 2, ZF_SHAPE(2, 3, 4, 6), want);
        kt_unref_all(in, 2);
        /* weights against values */
        in[0] = kt_random_float(dt, ZF_SHAPE(2, 3, 4, 6), 13);
        in[1] = kt_random_float(dt, ZF_SHAPE(2, 3, 6, 5), 14);
        for (int b = 0; b < 2; b++)
            for (int h = 0; h < 3; h++)
                for (int q = 0; q < 4; q++)
                    for (int d = 0; d < 5; d++) {
                        double s = 0;
                        for (int k = 0; k < 6; k++)
                            s += AT(in[0], b, h, q, k) * AT(in[1], b, h, k, d);
                        want[((b * 3 + h) * 4 + q) * 5 + d] = s;
                    }
        s_expect("bhqk,bhkd->bhqd", in, 2, ZF_SHAPE(2, 3, 4, 5), want);
        /* the same with heads moved behind the queries in the output */
        for (int b = 0; b < 2; b++)
            for (int q = 0; q < 4; q++)
                for (int h = 0; h < 3; h++)
                    for (int d = 0; d < 5; d++) {
                        double s = 0;
                        for (int k = 0; k < 6; k++)
                            s += AT(in[0], b, h, q, k) * AT(in[1], b, h, k, d);
                        want[((b * 4 + q) * 3 + h) * 5 + d] = s;
                    }
        s_expect("bhqk,bhkd->bqhd", in, 2, ZF_SHAPE(2, 4, 3, 5), want);
        kt_unref_all(in, 2);
    }
}

static void test_einsum_broadcasts_ellipsis_dims(void **state)
{
    (void)state;
    for (int t = 0; t < 2; t++) {
        zf_dtype_t dt = t ? ZF_DOUBLE : ZF_FLOAT;
        double want[3 * 7 * 2 * 4];
        zf_tensor_t *in[2] = {kt_random_float(dt, ZF_SHAPE(3, 1, 2, 3), 15),
                              kt_random_float(dt, ZF_SHAPE(1, 7, 3, 4), 16)};
        for (int a = 0; a < 3; a++)
            for (int b = 0; b < 7; b++)
                for (int i = 0; i < 2; i++)
                    for (int k = 0; k < 4; k++) {
                        double s = 0;
                        for (int j = 0; j < 3; j++)
                            s += AT(in[0], a, 0, i, j) * AT(in[1], 0, b, j, k);
                        want[((a * 7 + b) * 2 + i) * 4 + k] = s;
                    }
        s_expect("...ij,...jk->...ik", in, 2, ZF_SHAPE(3, 7, 2, 4), want);
        kt_unref_all(in, 2);
        /* an operand with fewer ellipsis dims (none) */
        in[0] = kt_random_float(dt, ZF_SHAPE(2, 3), 17);
        in[1] = kt_random_float(dt, ZF_SHAPE(5, 3, 4), 18);
        for (int b = 0; b < 5; b++)
            for (int i = 0; i < 2; i++)
                for (int k = 0; k < 4; k++) {
                    double s = 0;
                    for (int j = 0; j < 3; j++) s += AT(in[0], i, j) * AT(in[1], b, j, k);
                    want[(b * 2 + i) * 4 + k] = s;
                }
        s_expect("...ij,...jk->...ik", in, 2, ZF_SHAPE(5, 2, 4), want);
        kt_unref_all(in, 2);
        /* one operand: the ellipsis kept, a named dim summed */
        in[0] = kt_random_float(dt, ZF_SHAPE(2, 3, 4), 19);
        for (int a = 0; a < 2; a++)
            for (int j = 0; j < 4; j++) {
                double s = 0;
                for (int i = 0; i < 3; i++) s += AT(in[0], a, i, j);
                want[a * 4 + j] = s;
            }
        s_expect("...ij->...j", in, 1, ZF_SHAPE(2, 4), want);
        zf_tensor_unref(&in[0]);
    }
}

static void test_einsum_transposes_and_reductions(void **state)
{
    (void)state;
    for (int t = 0; t < 2; t++) {
        zf_dtype_t dt = t ? ZF_DOUBLE : ZF_FLOAT;
        double want[64];
        zf_tensor_t *in[1] = {kt_random_float(dt, ZF_SHAPE(3, 4), 20)};
        for (int j = 0; j < 4; j++)
            for (int i = 0; i < 3; i++) want[j * 3 + i] = AT(in[0], i, j);
        s_expect("ij->ji", in, 1, ZF_SHAPE(4, 3), want);
        for (int i = 0; i < 3; i++) {
            want[i] = 0;
            for (int j = 0; j < 4; j++) want[i] += AT(in[0], i, j);
        }
        s_expect("ij->i", in, 1, ZF_SHAPE(3), want);
        want[0] = 0;
        for (int i = 0; i < 3; i++)
            for (int j = 0; j < 4; j++) want[0] += AT(in[0], i, j);
        s_expect("ij->", in, 1, ZF_SHAPE(), want);
        for (int i = 0; i < 3; i++)
            for (int j = 0; j < 4; j++) want[i * 4 + j] = AT(in[0], i, j);
        s_expect("ij->ij", in, 1, ZF_SHAPE(3, 4), want);
        zf_tensor_unref(&in[0]);
        in[0] = kt_random_float(dt, ZF_SHAPE(2, 3, 4), 21);
        for (int k = 0; k < 4; k++)
            for (int a = 0; a < 2; a++) {
                want[k * 2 + a] = 0;
                for (int j = 0; j < 3; j++) want[k * 2 + a] += AT(in[0], a, j, k);
            }
        s_expect("ajk->ka", in, 1, ZF_SHAPE(4, 2), want);
        zf_tensor_unref(&in[0]);
    }
}

static void test_einsum_handles_empty_dims(void **state)
{
    (void)state;
    const double zeros[8] = {0};
    zf_tensor_t *in[2] = {kt_zeros(ZF_FLOAT, ZF_SHAPE(0, 3)), kt_zeros(ZF_FLOAT, ZF_SHAPE(3, 4))};
    s_expect("ij,jk->ik", in, 2, ZF_SHAPE(0, 4), zeros);
    kt_unref_all(in, 2);
    in[0] = kt_zeros(ZF_FLOAT, ZF_SHAPE(2, 0)); /* an empty contraction: zeros */
    in[1] = kt_zeros(ZF_FLOAT, ZF_SHAPE(0, 3));
    s_expect("ij,jk->ik", in, 2, ZF_SHAPE(2, 3), zeros);
    s_expect("ij->i", in, 1, ZF_SHAPE(2), zeros); /* empty sums */
    s_expect("ij->ji", in, 1, ZF_SHAPE(0, 2), zeros);
    kt_unref_all(in, 2);
    in[0] = kt_zeros(ZF_DOUBLE, ZF_SHAPE(0, 2, 3)); /* empty batch */
    in[1] = kt_zeros(ZF_DOUBLE, ZF_SHAPE(0, 3, 4));
    s_expect("bij,bjk->bik", in, 2, ZF_SHAPE(0, 2, 4), zeros);
    kt_unref_all(in, 2);
}

static void s_error(const char *eq, zf_tensor_t *const *in, int n, zf_code_t code, const char *msg)
{
    Tensorflow__NodeDef *node = s_node(eq, zf_tensor_dtype(in[0]), n);
    zf_tensor_t *out = NULL;
    zf_test_expect_error(kt_run(node, in, n, &out, 1), code, msg);
    assert_null(out);
    kt_node_free(&node);
}

static void test_einsum_reports_bad_equations_and_shapes(void **state)
{
    (void)state;
    zf_tensor_t *a = kt_zeros(ZF_FLOAT, ZF_SHAPE(2, 3)), *b = kt_zeros(ZF_FLOAT, ZF_SHAPE(4, 5));
    zf_tensor_t *c = kt_zeros(ZF_FLOAT, ZF_SHAPE(2, 3, 4)),
                *d = kt_zeros(ZF_DOUBLE, ZF_SHAPE(3, 5));
    zf_tensor_t *e = kt_zeros(ZF_FLOAT, ZF_SHAPE(3, 4, 5)),
                *sq = kt_zeros(ZF_FLOAT, ZF_SHAPE(3, 3));
    s_error("ij,jk->ik", (zf_tensor_t *[]){a, b}, 2, ZF_INVALID_ARGUMENT,
            "es (Einsum): label 'j' of equation 'ij,jk->ik' has sizes 3 and 4: input shapes "
            "[2,3] and [4,5]");
    s_error("ij,jk->ik", (zf_tensor_t *[]){c, b}, 2, ZF_INVALID_ARGUMENT,
            "es (Einsum): equation 'ij,jk->ik' names 2 dims of input 0, which has rank 3 (input "
            "shapes [2,3,4] and [4,5])");
    s_error("...ij,...jk->...ik", (zf_tensor_t *[]){c, e}, 2, ZF_INVALID_ARGUMENT,
            "the ellipsis dims of equation '...ij,...jk->...ik' do not broadcast: input shapes "
            "[2,3,4] and [3,4,5]");
    s_error("...ijk->k", (zf_tensor_t *[]){a}, 1, ZF_INVALID_ARGUMENT,
            "equation '...ijk->k' names 3 dims of input 0, which has rank 2 (input shapes [2,3])");
    s_error("ij,jk->iz", (zf_tensor_t *[]){a, d}, 2, ZF_INVALID_ARGUMENT,
            "es (Einsum): output label 'z' of equation 'ij,jk->iz' appears in no input");
    s_error("ij,jk->ii", (zf_tensor_t *[]){a, d}, 2, ZF_INVALID_ARGUMENT,
            "output label 'i' appears twice in equation 'ij,jk->ii'");
    s_error("ij,jk", (zf_tensor_t *[]){a, d}, 2, ZF_INVALID_ARGUMENT,
            "expecting exactly one '->' in equation 'ij,jk'");
    s_error("i1,jk->ik", (zf_tensor_t *[]){a, d}, 2, ZF_INVALID_ARGUMENT,
            "equation 'i1,jk->ik' has an invalid character '1'");
    s_error("..ij->ij", (zf_tensor_t *[]){a}, 1, ZF_INVALID_ARGUMENT,
            "equation '..ij->ij' has a malformed or repeated ellipsis");
    s_error("ij,jk->ik", (zf_tensor_t *[]){a, d}, 2, ZF_INVALID_ARGUMENT,
            "input 1 must be float, got double");
    s_error("ij,jk->ik", (zf_tensor_t *[]){a}, 1, ZF_INVALID_ARGUMENT,
            "equation 'ij,jk->ik' has 2 operands but the node has 1 inputs");
    s_error("ii->i", (zf_tensor_t *[]){sq}, 1, ZF_UNIMPLEMENTED,
            "es (Einsum): equation 'ii->i' repeats label 'i' within one operand (diagonals and "
            "traces are not supported)");
    s_error("ii->", (zf_tensor_t *[]){sq}, 1, ZF_UNIMPLEMENTED, "repeats label 'i'");
    s_error("ij,jk,kl->il", (zf_tensor_t *[]){a, a, a}, 3, ZF_UNIMPLEMENTED,
            "equation 'ij,jk,kl->il' has 3 operands; at most 2 are supported");
    kt_unref_all((zf_tensor_t *[]){a, b, c, d, e, sq}, 6);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_einsum_matrix_products),
        cmocka_unit_test(test_einsum_batched_and_attention_products),
        cmocka_unit_test(test_einsum_broadcasts_ellipsis_dims),
        cmocka_unit_test(test_einsum_transposes_and_reductions),
        cmocka_unit_test(test_einsum_handles_empty_dims),
        cmocka_unit_test(test_einsum_reports_bad_equations_and_shapes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
