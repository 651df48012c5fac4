/* Tests for executor/kernels/kernels_einsum: Einsum's equations (matrix
 * products, attention's batched products, ellipsis broadcasting, transposes,
 * reductions, outer products, diagonals and traces, chains of three and four
 * operands, random equations) in float and double, and some in int32,
 * int64, half, bfloat16, complex64 and complex128, against index loops written here for each
 * equation or against Einsum's definition evaluated directly (every value
 * of every label in turn); integer wrap-around, batch dims of 1, empty
 * dims, and bad equations and shapes. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <complex.h>
#include <cmocka.h>

#include "kernel_test_util.h"

static double s_get(const zf_tensor_t *t, int64_t i)
{
    const void *p = zf_tensor_data(t);
    switch (zf_tensor_dtype(t)) {
    case ZF_FLOAT: return ((const float *)p)[i];
    case ZF_INT32: return ((const int32_t *)p)[i];
    case ZF_INT64: return (double)((const int64_t *)p)[i];
    case ZF_HALF: return zf_half_to_float(((const uint16_t *)p)[i]);
    case ZF_BFLOAT16: return zf_bfloat16_to_float(((const uint16_t *)p)[i]);
    default: return ((const double *)p)[i];
    }
}

/* The element of t at i, complex or real. */
static double complex s_getc(const zf_tensor_t *t, int64_t i)
{
    const void *p = zf_tensor_data(t);
    switch (zf_tensor_dtype(t)) {
    case ZF_COMPLEX64: return ((const float complex *)p)[i];
    case ZF_COMPLEX128: return ((const double complex *)p)[i];
    default: return s_get(t, i);
    }
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

/* Einsum's definition evaluated directly, for equations of letters only:
 * for every value of every label, the product of the operands' elements
 * at those values is added to the output's element at them (a label
 * repeated within a subscript takes one value, so reads the diagonal).
 * Returns the output, row-major, of *count elements (free() it), in
 * complex arithmetic (real operands have no imaginary part). */
static double complex *s_reference_c(const char *eq, zf_tensor_t *const *in, int n,
                                     int64_t *count)
{
    int64_t size[128] = {0}, idx[128] = {0};
    bool used[128] = {false};
    const char *sub[8], *arrow = strstr(eq, "->"), *out = arrow + 2;
    int len[8];
    assert_true(n <= 8);
    for (int k = 0, start = 0; k < n; k++) {
        sub[k] = eq + start;
        len[k] = (int)strcspn(sub[k], ",-");
        start += len[k] + 1;
        const zf_shape_t *s = zf_tensor_shape(in[k]);
        assert_int_equal(s->rank, len[k]);
        for (int d = 0; d < len[k]; d++) {
            unsigned char c = (unsigned char)sub[k][d];
            size[c] = s->dims[d];
            used[c] = true;
        }
    }
    int labels[128], nl = 0, olen = (int)strlen(out);
    for (int c = 0; c < 128; c++)
        if (used[c]) labels[nl++] = c;
    *count = 1;
    for (int d = 0; d < olen; d++) *count *= size[(unsigned char)out[d]];
    double complex *want = calloc((size_t)*count + 1, sizeof *want);
    assert_non_null(want);
    for (int c = 0; c < nl; c++)
        if (size[labels[c]] == 0) return want;
    for (;;) {
        double complex prod = 1;
        for (int k = 0; k < n; k++) {
            const zf_shape_t *s = zf_tensor_shape(in[k]);
            int64_t off = 0;
            for (int d = 0; d < len[k]; d++) off = off * s->dims[d] + idx[(unsigned char)sub[k][d]];
            prod *= s_getc(in[k], off);
        }
        int64_t o = 0;
        for (int d = 0; d < olen; d++)
            o = o * size[(unsigned char)out[d]] + idx[(unsigned char)out[d]];
        want[o] += prod;
        int c = nl - 1;
        for (; c >= 0; c--) {
            if (++idx[labels[c]] < size[labels[c]]) break;
            idx[labels[c]] = 0;
        }
        if (c < 0) return want;
    }
}

/* s_reference_c's real parts (free() it). */
static double *s_reference(const char *eq, zf_tensor_t *const *in, int n, int64_t *count)
{
    double complex *c = s_reference_c(eq, in, n, count);
    double *want = calloc((size_t)*count + 1, sizeof *want);
    assert_non_null(want);
    for (int64_t i = 0; i < *count; i++) want[i] = creal(c[i]);
    free(c);
    return want;
}

static Tensorflow__NodeDef *s_node(const char *eq, zf_dtype_t t, int n)
{
    Tensorflow__NodeDef *node = kt_node_new("es", "Einsum", n);
    kt_attr_type(node, "T", t);
    kt_attr_int(node, "N", n);
    kt_attr_string(node, "equation", eq);
    return node;
}

/* Runs eq on inputs: its output, checked for the inputs' dtype and shape. */
static zf_tensor_t *s_run_eq(const char *eq, zf_tensor_t *const *in, int n, zf_shape_t shape)
{
    zf_dtype_t t = zf_tensor_dtype(in[0]);
    Tensorflow__NodeDef *node = s_node(eq, t, n);
    zf_tensor_t *out = NULL;
    ASSERT_OK(kt_run(node, in, n, &out, 1));
    assert_int_equal(zf_tensor_dtype(out), t);
    kt_expect_shape(out, shape);
    kt_node_free(&node);
    return out;
}

/* Runs eq on inputs and checks the output's shape and values against want. */
static void s_expect(const char *eq, zf_tensor_t *const *in, int n, zf_shape_t shape,
                     const double *want)
{
    zf_dtype_t t = zf_tensor_dtype(in[0]);
    zf_tensor_t *out = s_run_eq(eq, in, n, shape);
    /* HALF and BFLOAT16 are rounded once, from float; integers are exact. */
    double tol = t == ZF_FLOAT      ? 1e-5
                 : t == ZF_DOUBLE   ? 1e-12
                 : t == ZF_HALF     ? 1e-3
                 : t == ZF_BFLOAT16 ? 4e-3
                                    : 0;
    for (int64_t i = 0; i < zf_tensor_num_elements(out); i++) {
        double got = s_get(out, i);
        if (fabs(got - want[i]) > tol * (1 + fabs(want[i])))
            fail_msg("%s [%lld]: %.9g vs %.9g", eq, (long long)i, got, want[i]);
    }
    zf_tensor_unref(&out);
}

/* Runs eq on inputs and checks it against Einsum's definition. */
static void s_check(const char *eq, zf_tensor_t *const *in, int n, zf_shape_t shape)
{
    int64_t count = 0;
    double *want = s_reference(eq, in, n, &count);
    s_expect(eq, in, n, shape, want);
    free(want);
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

static void test_einsum_takes_diagonals_and_traces(void **state)
{
    (void)state;
    for (int t = 0; t < 2; t++) {
        zf_dtype_t dt = t ? ZF_DOUBLE : ZF_FLOAT;
        double want[64];
        zf_tensor_t *sq = kt_random_float(dt, ZF_SHAPE(4, 4), 30);
        for (int i = 0; i < 4; i++) want[i] = AT(sq, i, i);
        s_expect("ii->i", &sq, 1, ZF_SHAPE(4), want);
        want[0] = 0;
        for (int i = 0; i < 4; i++) want[0] += AT(sq, i, i);
        s_expect("ii->", &sq, 1, ZF_SHAPE(), want);
        s_check("ii->i", &sq, 1, ZF_SHAPE(4));

        zf_tensor_t *cube = kt_random_float(dt, ZF_SHAPE(3, 3, 3), 31);
        for (int i = 0; i < 3; i++) want[i] = AT(cube, i, i, i);
        s_expect("iii->i", &cube, 1, ZF_SHAPE(3), want);
        s_check("iji->j", &cube, 1, ZF_SHAPE(3)); /* not adjacent */
        s_check("iij->ji", &cube, 1, ZF_SHAPE(3, 3));
        zf_tensor_unref(&cube);

        zf_tensor_t *iij = kt_random_float(dt, ZF_SHAPE(3, 3, 5), 32);
        for (int i = 0; i < 3; i++)
            for (int j = 0; j < 5; j++) want[i * 5 + j] = AT(iij, i, i, j);
        s_expect("iij->ij", &iij, 1, ZF_SHAPE(3, 5), want);
        s_check("iij->j", &iij, 1, ZF_SHAPE(5));
        zf_tensor_unref(&iij);

        zf_tensor_t *bii = kt_random_float(dt, ZF_SHAPE(2, 4, 4), 33); /* batched */
        for (int b = 0; b < 2; b++)
            for (int i = 0; i < 4; i++) want[b * 4 + i] = AT(bii, b, i, i);
        s_expect("bii->bi", &bii, 1, ZF_SHAPE(2, 4), want);
        for (int b = 0; b < 2; b++) {
            want[b] = 0;
            for (int i = 0; i < 4; i++) want[b] += AT(bii, b, i, i);
        }
        s_expect("bii->b", &bii, 1, ZF_SHAPE(2), want);
        for (int i = 0; i < 4; i++)
            for (int b = 0; b < 2; b++) want[i * 2 + b] = AT(bii, b, i, i);
        s_expect("...ii->i...", &bii, 1, ZF_SHAPE(4, 2), want);

        /* repeated labels meeting a contraction */
        zf_tensor_t *m = kt_random_float(dt, ZF_SHAPE(3, 4), 34);
        zf_tensor_t *in[2] = {m, sq};
        for (int i = 0; i < 3; i++) {
            want[i] = 0;
            for (int j = 0; j < 4; j++) want[i] += AT(m, i, j) * AT(sq, j, j);
        }
        s_expect("ij,jj->i", in, 2, ZF_SHAPE(3), want);
        s_check("ij,jj->ij", in, 2, ZF_SHAPE(3, 4));
        in[0] = sq;
        in[1] = sq;
        s_check("ii,ii->i", in, 2, ZF_SHAPE(4));
        s_check("ii,jj->", in, 2, ZF_SHAPE()); /* the product of two traces */
        s_check("ij,jj->ij", in, 2, ZF_SHAPE(4, 4));
        in[0] = bii;
        in[1] = sq;
        s_check("bii,ik->bk", in, 2, ZF_SHAPE(2, 4));
        zf_tensor_unref(&m);
        zf_tensor_unref(&sq);
        zf_tensor_unref(&bii);
    }
}

static void test_einsum_contracts_three_and_four_operands(void **state)
{
    (void)state;
    for (int t = 0; t < 2; t++) {
        zf_dtype_t dt = t ? ZF_DOUBLE : ZF_FLOAT;
        double want[256];
        zf_tensor_t *in[4] = {
            kt_random_float(dt, ZF_SHAPE(2, 3), 40), kt_random_float(dt, ZF_SHAPE(3, 4), 41),
            kt_random_float(dt, ZF_SHAPE(4, 5), 42), kt_random_float(dt, ZF_SHAPE(5, 3), 43)};
        for (int i = 0; i < 2; i++) /* written out once */
            for (int l = 0; l < 5; l++) {
                double s = 0;
                for (int j = 0; j < 3; j++)
                    for (int k = 0; k < 4; k++)
                        s += AT(in[0], i, j) * AT(in[1], j, k) * AT(in[2], k, l);
                want[i * 5 + l] = s;
            }
        s_expect("ij,jk,kl->il", in, 3, ZF_SHAPE(2, 5), want);
        s_check("ij,jk,kl->li", in, 3, ZF_SHAPE(5, 2));
        s_check("ij,jk,kl->", in, 3, ZF_SHAPE());
        s_check("ij,jk,kl->jl", in, 3, ZF_SHAPE(3, 5));
        s_check("ij,jk,kl,lm->im", in, 4, ZF_SHAPE(2, 3));
        s_check("ij,jk,kl,lm->mi", in, 4, ZF_SHAPE(3, 2));
        s_check("ij,jk,kl,lj->ik", in, 4, ZF_SHAPE(2, 4)); /* j in three operands */
        kt_unref_all(in, 4);

        /* a chain cheaper from the right: the middle pair goes first */
        in[0] = kt_random_float(dt, ZF_SHAPE(9, 2), 44);
        in[1] = kt_random_float(dt, ZF_SHAPE(2, 9), 45);
        in[2] = kt_random_float(dt, ZF_SHAPE(9, 2), 46);
        s_check("ij,jk,kl->il", in, 3, ZF_SHAPE(9, 2));
        s_check("ij,jk,kl->li", in, 3, ZF_SHAPE(2, 9));
        kt_unref_all(in, 3);

        in[0] = kt_random_float(dt, ZF_SHAPE(5), 47); /* vectors */
        in[1] = kt_random_float(dt, ZF_SHAPE(5), 48);
        in[2] = kt_random_float(dt, ZF_SHAPE(5), 49);
        want[0] = 0;
        for (int i = 0; i < 5; i++) want[0] += AT(in[0], i) * AT(in[1], i) * AT(in[2], i);
        s_expect("i,i,i->", in, 3, ZF_SHAPE(), want);
        s_check("i,i,i->i", in, 3, ZF_SHAPE(5));
        zf_tensor_t *same[3] = {in[0], in[0], in[0]}; /* one tensor three times */
        s_check("i,i,i->i", same, 3, ZF_SHAPE(5));
        kt_unref_all(in, 3);

        in[0] = kt_random_float(dt, ZF_SHAPE(2), 50); /* outer products */
        in[1] = kt_random_float(dt, ZF_SHAPE(3), 51);
        in[2] = kt_random_float(dt, ZF_SHAPE(4), 52);
        for (int i = 0; i < 2; i++)
            for (int j = 0; j < 3; j++)
                for (int k = 0; k < 4; k++)
                    want[(i * 3 + j) * 4 + k] = AT(in[0], i) * AT(in[1], j) * AT(in[2], k);
        s_expect("i,j,k->ijk", in, 3, ZF_SHAPE(2, 3, 4), want);
        s_check("i,j,k->kji", in, 3, ZF_SHAPE(4, 3, 2));
        s_check("i,j,k->ik", in, 3, ZF_SHAPE(2, 4));
        s_check("i,j,k->", in, 3, ZF_SHAPE());
        kt_unref_all(in, 3);

        in[0] = kt_random_float(dt, ZF_SHAPE(2, 3, 4), 53); /* batched */
        in[1] = kt_random_float(dt, ZF_SHAPE(2, 4, 5), 54);
        in[2] = kt_random_float(dt, ZF_SHAPE(2, 5, 3), 55);
        for (int b = 0; b < 2; b++)
            for (int i = 0; i < 3; i++)
                for (int l = 0; l < 3; l++) {
                    double s = 0;
                    for (int j = 0; j < 4; j++)
                        for (int k = 0; k < 5; k++)
                            s += AT(in[0], b, i, j) * AT(in[1], b, j, k) * AT(in[2], b, k, l);
                    want[(b * 3 + i) * 3 + l] = s;
                }
        s_expect("bij,bjk,bkl->bil", in, 3, ZF_SHAPE(2, 3, 3), want);
        s_check("bij,bjk,bkl->lbi", in, 3, ZF_SHAPE(3, 2, 3));
        s_check("bij,bjk,bki->b", in, 3, ZF_SHAPE(2));      /* batched traces of the product */
        in[3] = kt_random_float(dt, ZF_SHAPE(2, 3, 3), 59); /* with a diagonal */
        s_check("bii,bij,bjk->bk", (zf_tensor_t *[]){in[3], in[0], in[1]}, 3, ZF_SHAPE(2, 5));
        s_check("bii,bij,bjk,bkl->bl", (zf_tensor_t *[]){in[3], in[0], in[1], in[2]}, 4,
                ZF_SHAPE(2, 3));
        kt_unref_all(in, 4);

        /* ellipsis dims broadcast over three operands: [2,1], [3] and [1,1] */
        in[0] = kt_random_float(dt, ZF_SHAPE(2, 1, 2, 3), 56);
        in[1] = kt_random_float(dt, ZF_SHAPE(3, 3, 4), 57);
        in[2] = kt_random_float(dt, ZF_SHAPE(1, 1, 4, 2), 58);
        for (int a = 0; a < 2; a++)
            for (int b = 0; b < 3; b++)
                for (int i = 0; i < 2; i++)
                    for (int l = 0; l < 2; l++) {
                        double s = 0;
                        for (int j = 0; j < 3; j++)
                            for (int k = 0; k < 4; k++)
                                s += AT(in[0], a, 0, i, j) * AT(in[1], b, j, k) *
                                     AT(in[2], 0, 0, k, l);
                        want[((a * 3 + b) * 2 + i) * 2 + l] = s;
                    }
        s_expect("...ij,...jk,...kl->...il", in, 3, ZF_SHAPE(2, 3, 2, 2), want);
        for (int i = 0; i < 2; i++) /* the ellipsis dims summed */
            for (int l = 0; l < 2; l++) {
                double s = 0;
                for (int a = 0; a < 2; a++)
                    for (int b = 0; b < 3; b++) s += want[((a * 3 + b) * 2 + i) * 2 + l];
                want[100 + i * 2 + l] = s;
            }
        s_expect("...ij,...jk,...kl->il", in, 3, ZF_SHAPE(2, 2), want + 100);
        kt_unref_all(in, 3);
    }
}

/* kt_random_f32's values rounded to HALF or BFLOAT16, or as integers in
 * [-4, 4] for INT32 and INT64. */
static zf_tensor_t *s_random(zf_dtype_t dt, zf_shape_t shape, uint32_t seed)
{
    zf_tensor_t *f = kt_random_f32(shape, seed), *t = NULL;
    ASSERT_OK(zf_tensor_new(dt, &shape, &t));
    const float *src = zf_tensor_data(f);
    void *dst = zf_tensor_data(t);
    for (int64_t i = 0; i < zf_tensor_num_elements(f); i++) {
        if (dt == ZF_HALF)
            ((uint16_t *)dst)[i] = zf_float_to_half(src[i]);
        else if (dt == ZF_BFLOAT16)
            ((uint16_t *)dst)[i] = zf_float_to_bfloat16(src[i]);
        else if (dt == ZF_INT32)
            ((int32_t *)dst)[i] = (int32_t)lrintf(src[i] * 4);
        else
            ((int64_t *)dst)[i] = lrintf(src[i] * 4);
    }
    zf_tensor_unref(&f);
    return t;
}

static void test_einsum_integer_and_16_bit_types(void **state)
{
    (void)state;
    const zf_dtype_t types[] = {ZF_INT32, ZF_INT64, ZF_HALF, ZF_BFLOAT16};
    for (int t = 0; t < 4; t++) {
        zf_dtype_t dt = types[t];
        zf_tensor_t *in[4] = {s_random(dt, ZF_SHAPE(2, 3), 60), s_random(dt, ZF_SHAPE(3, 4), 61),
                              s_random(dt, ZF_SHAPE(4, 5), 62), s_random(dt, ZF_SHAPE(5, 5), 63)};
        s_check("ij,jk,kl->il", in, 3, ZF_SHAPE(2, 5));
        s_check("ij,jk->ki", in, 2, ZF_SHAPE(4, 2));
        s_check("ij,jk,kl,ll->i", in, 4, ZF_SHAPE(2));
        s_check("ij->j", in, 1, ZF_SHAPE(3));
        s_check("ll->", &in[3], 1, ZF_SHAPE());
        s_check("ll->l", &in[3], 1, ZF_SHAPE(5));
        s_check("kl,ll->k", &in[2], 2, ZF_SHAPE(4));
        kt_unref_all(in, 4);
        in[0] = s_random(dt, ZF_SHAPE(3), 64); /* an outer product of three */
        in[1] = s_random(dt, ZF_SHAPE(2), 65);
        in[2] = s_random(dt, ZF_SHAPE(4), 66);
        s_check("i,j,k->kij", in, 3, ZF_SHAPE(4, 3, 2));
        kt_unref_all(in, 3);
    }
    /* integers wrap as TensorFlow's do, and int64 stays exact past 2^53 */
    zf_tensor_t *i32 = KT_I32(ZF_SHAPE(2), INT32_MAX, 1), *out = NULL;
    Tensorflow__NodeDef *node = s_node("i->", ZF_INT32, 1);
    ASSERT_OK(kt_run(node, &i32, 1, &out, 1));
    assert_int_equal(((const int32_t *)zf_tensor_data(out))[0], INT32_MIN);
    zf_tensor_unref(&out);
    kt_node_free(&node);
    zf_tensor_t *i64[2] = {KT_I64(ZF_SHAPE(1), ((int64_t)1 << 40) + 1),
                           KT_I64(ZF_SHAPE(1), ((int64_t)1 << 20) + 1)};
    node = s_node("i,i->", ZF_INT64, 2);
    ASSERT_OK(kt_run(node, i64, 2, &out, 1));
    assert_true(((const int64_t *)zf_tensor_data(out))[0] ==
                ((int64_t)1 << 60) + ((int64_t)1 << 40) + ((int64_t)1 << 20) + 1);
    zf_tensor_unref(&out);
    kt_node_free(&node);
    zf_tensor_unref(&i32);
    kt_unref_all(i64, 2);
}

/* COMPLEX64 and COMPLEX128 (complex GEMMs, complex sums), against the
 * definition in complex arithmetic. */
static zf_tensor_t *s_random_c(zf_dtype_t dt, zf_shape_t shape, uint32_t seed)
{
    zf_tensor_t *re = kt_random_f32(shape, seed), *im = kt_random_f32(shape, seed + 1000), *t = NULL;
    ASSERT_OK(zf_tensor_new(dt, &shape, &t));
    const float *r = zf_tensor_data(re), *m = zf_tensor_data(im);
    for (int64_t i = 0; i < zf_tensor_num_elements(t); i++) {
        if (dt == ZF_COMPLEX64)
            ((float complex *)zf_tensor_data(t))[i] = r[i] + m[i] * I;
        else
            ((double complex *)zf_tensor_data(t))[i] = (double)r[i] + (double)m[i] * I;
    }
    zf_tensor_unref(&re);
    zf_tensor_unref(&im);
    return t;
}

static void s_check_c(const char *eq, zf_tensor_t *const *in, int n, zf_shape_t shape)
{
    int64_t count = 0;
    double complex *want = s_reference_c(eq, in, n, &count);
    zf_dtype_t t = zf_tensor_dtype(in[0]);
    zf_tensor_t *out = s_run_eq(eq, in, n, shape);
    assert_int_equal(zf_tensor_num_elements(out), count);
    double tol = t == ZF_COMPLEX64 ? 1e-5 : 1e-12;
    for (int64_t i = 0; i < count; i++) {
        double complex got = s_getc(out, i);
        if (cabs(got - want[i]) > tol * (1 + cabs(want[i])))
            fail_msg("%s [%lld]: %.9g%+.9gi vs %.9g%+.9gi", eq, (long long)i, creal(got),
                     cimag(got), creal(want[i]), cimag(want[i]));
    }
    zf_tensor_unref(&out);
    free(want);
}

static void test_einsum_complex_types(void **state)
{
    (void)state;
    const zf_dtype_t types[] = {ZF_COMPLEX64, ZF_COMPLEX128};
    for (int t = 0; t < 2; t++) {
        zf_dtype_t dt = types[t];
        zf_tensor_t *in[4] = {s_random_c(dt, ZF_SHAPE(2, 3), 70), s_random_c(dt, ZF_SHAPE(3, 4), 71),
                              s_random_c(dt, ZF_SHAPE(4, 5), 72), s_random_c(dt, ZF_SHAPE(5, 5), 73)};
        s_check_c("ij,jk->ik", in, 2, ZF_SHAPE(2, 4));
        s_check_c("ij,jk->ki", in, 2, ZF_SHAPE(4, 2));
        s_check_c("ij,jk,kl->il", in, 3, ZF_SHAPE(2, 5));
        s_check_c("ij,jk,kl,ll->i", in, 4, ZF_SHAPE(2));
        s_check_c("ij->j", in, 1, ZF_SHAPE(3));
        s_check_c("ij->ji", in, 1, ZF_SHAPE(3, 2));
        s_check_c("ll->", &in[3], 1, ZF_SHAPE());
        s_check_c("kl,ll->k", &in[2], 2, ZF_SHAPE(4));
        kt_unref_all(in, 4);
        in[0] = s_random_c(dt, ZF_SHAPE(2, 3, 4), 74); /* batched, as attention */
        in[1] = s_random_c(dt, ZF_SHAPE(2, 5, 4), 75);
        s_check_c("bqd,bkd->bqk", in, 2, ZF_SHAPE(2, 3, 5));
        s_check_c("bqd,bkd->b", in, 2, ZF_SHAPE(2));
        kt_unref_all(in, 2);
    }
}

/* A chain's middle product may be far larger than its operands and its
 * output: it is bounded by the process's buffer limit, and a product past
 * it is RESOURCE_EXHAUSTED rather than an allocation the limit forbids.
 * ij,jk,kl->il with j = 1: the leftmost (cheapest, tied) pair gives a
 * [2, 4096] product; the output is [2, 2]. */
static void test_einsum_bounds_its_intermediate_products(void **state)
{
    (void)state;
    zf_tensor_t *in[3] = {kt_random_f32(ZF_SHAPE(2, 1), 80), kt_random_f32(ZF_SHAPE(1, 4096), 81),
                          kt_random_f32(ZF_SHAPE(4096, 2), 82)};
    s_check("ij,jk,kl->il", in, 3, ZF_SHAPE(2, 2));
    size_t saved = zf_buffer_alloc_limit();
    zf_buffer_set_alloc_limit(24 * 1024); /* above every operand, below the product's 32 KiB */
    Tensorflow__NodeDef *node = s_node("ij,jk,kl->il", ZF_FLOAT, 3);
    zf_tensor_t *out = NULL;
    zf_status_t s = kt_run(node, in, 3, &out, 1);
    zf_buffer_set_alloc_limit(saved);
    zf_test_expect_error(s, ZF_RESOURCE_EXHAUSTED, "too large to allocate");
    assert_null(out);
    kt_node_free(&node);
    kt_unref_all(in, 3);
}

/* Equations drawn at random (fixed seeds): two to four operands of up to
 * three labels from a-e, repeats within a subscript allowed, and an output
 * of some of the labels in any order; each against Einsum's definition. */
static void test_einsum_random_equations(void **state)
{
    (void)state;
    uint32_t r = 12345;
#define S_RAND(n) ((r = r * 1664525u + 1013904223u), (int)((r >> 16) % (uint32_t)(n)))
    for (int trial = 0; trial < 300; trial++) {
        int64_t size[5];
        for (int c = 0; c < 5; c++) size[c] = 1 + S_RAND(3);
        int n = 2 + S_RAND(3);
        char eq[64];
        size_t len = 0;
        bool used[5] = {false};
        zf_tensor_t *in[4];
        for (int k = 0; k < n; k++) {
            zf_shape_t shape = {.rank = S_RAND(4)};
            for (int d = 0; d < shape.rank; d++) {
                int c = S_RAND(5);
                used[c] = true;
                eq[len++] = (char)('a' + c);
                shape.dims[d] = size[c];
            }
            eq[len++] = k + 1 < n ? ',' : '-';
            in[k] = kt_random_float(ZF_DOUBLE, shape, (uint32_t)(100 + trial * 4 + k));
        }
        eq[len++] = '>';
        zf_shape_t oshape = {.rank = 0};
        for (int c = S_RAND(5), i = 0; i < 5; i++, c = (c + 2) % 5) /* a shuffled order */
            if (used[c] && S_RAND(2)) {
                eq[len++] = (char)('a' + c);
                oshape.dims[oshape.rank++] = size[c];
            }
        eq[len] = '\0';
        s_check(eq, in, n, oshape);
        kt_unref_all(in, n);
    }
#undef S_RAND
}

static void test_einsum_chains_with_empty_dims(void **state)
{
    (void)state;
    const double zeros[8] = {0};
    zf_tensor_t *in[3] = {kt_zeros(ZF_FLOAT, ZF_SHAPE(2, 0)), kt_zeros(ZF_FLOAT, ZF_SHAPE(0, 3)),
                          kt_zeros(ZF_FLOAT, ZF_SHAPE(3, 2))};
    s_expect("ij,jk,kl->il", in, 3, ZF_SHAPE(2, 2), zeros); /* an empty contraction */
    s_expect("ij,jk,kl->jl", in, 3, ZF_SHAPE(0, 2), zeros); /* an empty output */
    s_expect("ij,jk,kl->ik", in, 3, ZF_SHAPE(2, 3), zeros);
    kt_unref_all(in, 3);
    in[0] = kt_zeros(ZF_DOUBLE, ZF_SHAPE(0, 0)); /* the trace of an empty matrix */
    s_expect("ii->", in, 1, ZF_SHAPE(), zeros);
    s_expect("ii->i", in, 1, ZF_SHAPE(0), zeros);
    zf_tensor_unref(&in[0]);
}

/* Runs eq on n inputs in a node whose N attr is attr_n; expects code and
 * msg. */
static void s_error_n(const char *eq, zf_tensor_t *const *in, int n, int attr_n, zf_code_t code,
                      const char *msg)
{
    Tensorflow__NodeDef *node = s_node(eq, zf_tensor_dtype(in[0]), attr_n);
    zf_tensor_t *out = NULL;
    zf_test_expect_error(kt_run(node, in, n, &out, 1), code, msg);
    assert_null(out);
    kt_node_free(&node);
}

static void s_error(const char *eq, zf_tensor_t *const *in, int n, zf_code_t code, const char *msg)
{
    s_error_n(eq, in, n, n, code, msg);
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
    /* operands against inputs, and against the N attr (which counts inputs) */
    s_error_n("ij,jk->ik", (zf_tensor_t *[]){a}, 1, 2, ZF_INVALID_ARGUMENT,
              "es (Einsum): equation 'ij,jk->ik' has 2 operands but the node has 1 inputs");
    s_error_n("ij,jk,kl->il", (zf_tensor_t *[]){a, a}, 2, 3, ZF_INVALID_ARGUMENT,
              "equation 'ij,jk,kl->il' has 3 operands but the node has 2 inputs");
    s_error_n("ij->i", (zf_tensor_t *[]){a, a}, 2, 1, ZF_INVALID_ARGUMENT,
              "equation 'ij->i' has 1 operands but the node has 2 inputs");
    s_error("ij,jk->ik", (zf_tensor_t *[]){a}, 1, ZF_INVALID_ARGUMENT,
            "es (Einsum): equation 'ij,jk->ik' has 2 operands but attr N is 1");
    s_error("ij,jk,kl->il", (zf_tensor_t *[]){a, a}, 2, ZF_INVALID_ARGUMENT,
            "es (Einsum): equation 'ij,jk,kl->il' has 3 operands but attr N is 2");
    /* repeated labels: their dims must be equal */
    s_error("ii->i", (zf_tensor_t *[]){a}, 1, ZF_INVALID_ARGUMENT,
            "es (Einsum): label 'i' of equation 'ii->i' is repeated in input 0 over dims of "
            "sizes 2 and 3: input shapes [2,3]");
    s_error("ij,jj->i", (zf_tensor_t *[]){a, b}, 2, ZF_INVALID_ARGUMENT,
            "label 'j' of equation 'ij,jj->i' is repeated in input 1 over dims of sizes 4 and 5: "
            "input shapes [2,3] and [4,5]");
    s_error("ij,jj->i", (zf_tensor_t *[]){a, a}, 2, ZF_INVALID_ARGUMENT,
            "label 'j' of equation 'ij,jj->i' is repeated in input 1 over dims of sizes 2 and 3");
    s_error("ij,jj->i", (zf_tensor_t *[]){c, sq}, 2, ZF_INVALID_ARGUMENT,
            "equation 'ij,jj->i' names 2 dims of input 0, which has rank 3");
    zf_tensor_t *sq4 = kt_zeros(ZF_FLOAT, ZF_SHAPE(4, 4));
    s_error("ij,jj->i", (zf_tensor_t *[]){a, sq4}, 2, ZF_INVALID_ARGUMENT,
            "label 'j' of equation 'ij,jj->i' has sizes 3 and 4: input shapes [2,3] and [4,4]");
    zf_tensor_unref(&sq4);
    s_error("ii->ii", (zf_tensor_t *[]){sq}, 1, ZF_INVALID_ARGUMENT,
            "output label 'i' appears twice in equation 'ii->ii'");
    /* three operands */
    zf_tensor_t *f = kt_zeros(ZF_FLOAT, ZF_SHAPE(3, 4)), *g = kt_zeros(ZF_FLOAT, ZF_SHAPE(5, 6));
    s_error("ij,jk,kl->il", (zf_tensor_t *[]){a, f, g}, 3, ZF_INVALID_ARGUMENT,
            "es (Einsum): label 'k' of equation 'ij,jk,kl->il' has sizes 4 and 5: input shapes "
            "[2,3], [3,4] and [5,6]");
    s_error("ij,jk,kl->il", (zf_tensor_t *[]){a, f, c}, 3, ZF_INVALID_ARGUMENT,
            "equation 'ij,jk,kl->il' names 2 dims of input 2, which has rank 3 (input shapes "
            "[2,3], [3,4] and [2,3,4])");
    s_error("ij,jk,kl->iz", (zf_tensor_t *[]){a, f, g}, 3, ZF_INVALID_ARGUMENT,
            "es (Einsum): output label 'z' of equation 'ij,jk,kl->iz' appears in no input");
    s_error("ij,jk,kl->ili", (zf_tensor_t *[]){a, f, g}, 3, ZF_INVALID_ARGUMENT,
            "output label 'i' appears twice in equation 'ij,jk,kl->ili'");
    s_error("ij,jk,kl->il", (zf_tensor_t *[]){a, f, d}, 3, ZF_INVALID_ARGUMENT,
            "input 2 must be float, got double");
    s_error("...ij,...jk,...kl->...il", (zf_tensor_t *[]){c, e, g}, 3, ZF_INVALID_ARGUMENT,
            "the ellipsis dims of equation '...ij,...jk,...kl->...il' do not broadcast: input "
            "shapes [2,3,4], [3,4,5] and [5,6]");
    kt_unref_all((zf_tensor_t *[]){f, g}, 2);
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
        cmocka_unit_test(test_einsum_takes_diagonals_and_traces),
        cmocka_unit_test(test_einsum_contracts_three_and_four_operands),
        cmocka_unit_test(test_einsum_chains_with_empty_dims),
        cmocka_unit_test(test_einsum_random_equations),
        cmocka_unit_test(test_einsum_integer_and_16_bit_types),
        cmocka_unit_test(test_einsum_complex_types),
        cmocka_unit_test(test_einsum_bounds_its_intermediate_products),
        cmocka_unit_test(test_einsum_reports_bad_equations_and_shapes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
