/* CPU Einsum (FLOAT and DOUBLE) with one or two operands, through OpenBLAS.
 *
 * The equation ("bhqd,bhkd->bhqk", "...ij,...jk->...ik", "ij->ji") is parsed
 * once when the kernel is created. Each label of a two-operand equation is
 * then a batch label (in both operands and the output), a contracted label
 * (in both operands, not the output), a free label of one operand (and the
 * output) or a label summed away within one operand. The operands are
 * gathered into [batch, free, contracted] and [batch, contracted, free]
 * matrices (summing the labels only one operand has), multiplied with one
 * GEMM per batch entry and, unless the output already has that order,
 * gathered into the output's order. A one-operand equation is one gather:
 * a transpose, a reduction or both.
 *
 * An ellipsis stands for the dims its subscript does not name; those of the
 * two operands broadcast as NumPy's do (aligned from the right, size 1
 * repeats), and an output without an ellipsis sums them. A label repeated
 * within one subscript (a diagonal or a trace) is UNIMPLEMENTED; so is an
 * equation of more than two operands. Sums are accumulated in double. */
#include <cblas.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/graph.h"
#include "executor/kernels/kernels_util.h"

#define S_LETTERS    52                        /* a-z, A-Z */
#define S_MAX_LABELS (S_LETTERS + ZF_MAX_RANK) /* then the ellipsis dims */
#define S_ELLIPSIS   (-1)
#define S_EQ_MAX     256

/* One subscript: label ids (0..51) in order, S_ELLIPSIS where "..." is. */
typedef struct {
    int n;
    int8_t ids[ZF_MAX_RANK + 1];
    bool ellipsis;
} s_subscript_t;

typedef struct {
    char equation[S_EQ_MAX];
    int num_inputs;       /* 1 or 2 */
    s_subscript_t sub[3]; /* inputs 0 and 1, then the output (sub[2]) */
} s_einsum_t;

static int s_label_id(char c)
{
    if (c >= 'a' && c <= 'z') return c - 'a';
    if (c >= 'A' && c <= 'Z') return 26 + c - 'A';
    return -1;
}

static char s_label_char(int id)
{
    return (char)(id < 26 ? 'a' + id : 'A' + id - 26);
}

/* Parses text[0..len) into sub; INVALID_ARGUMENT on a bad character, a
 * second or malformed ellipsis, or more labels than a tensor has dims. */
static zf_status_t s_parse_subscript(const Tensorflow__NodeDef *node, const char *eq,
                                     const char *text, size_t len, s_subscript_t *sub)
{
    memset(sub, 0, sizeof *sub);
    for (size_t i = 0; i < len; i++) {
        char c = text[i];
        if (c == ' ') continue;
        int id = s_label_id(c);
        if (c == '.') {
            if (sub->ellipsis || i + 2 >= len || text[i + 1] != '.' || text[i + 2] != '.')
                return zf_invalid_argument("%s (%s): equation '%s' has a malformed or repeated "
                                           "ellipsis",
                                           node->name, node->op, eq);
            sub->ellipsis = true;
            i += 2;
            id = S_ELLIPSIS;
        } else if (id < 0) {
            return zf_invalid_argument("%s (%s): equation '%s' has an invalid character '%c'",
                                       node->name, node->op, eq, c);
        }
        if (sub->n == ZF_MAX_RANK + 1 || (id >= 0 && sub->n - sub->ellipsis == ZF_MAX_RANK))
            return zf_invalid_argument("%s (%s): equation '%s' has a subscript of more than %d "
                                       "labels",
                                       node->name, node->op, eq, ZF_MAX_RANK);
        sub->ids[sub->n++] = (int8_t)id;
    }
    return ZF_STATUS_OK;
}

static bool s_has_label(const s_subscript_t *sub, int id)
{
    for (int i = 0; i < sub->n; i++)
        if (sub->ids[i] == id) return true;
    return false;
}

static zf_status_t s_einsum_parse(const Tensorflow__NodeDef *node, s_einsum_t *st)
{
    const char *eq = st->equation;
    const char *arrow = strstr(eq, "->");
    if (!arrow || strstr(arrow + 2, "->"))
        return zf_invalid_argument("%s (%s): expecting exactly one '->' in equation '%s'",
                                   node->name, node->op, eq);
    const char *comma = memchr(eq, ',', (size_t)(arrow - eq));
    int n = 1;
    for (const char *p = eq; p < arrow; p++) n += *p == ',';
    if (n > 2)
        return zf_unimplemented("%s (%s): equation '%s' has %d operands; at most 2 are supported",
                                node->name, node->op, eq, n);
    st->num_inputs = n;
    const char *end0 = comma ? comma : arrow;
    ZF_TRY(s_parse_subscript(node, eq, eq, (size_t)(end0 - eq), &st->sub[0]));
    if (comma)
        ZF_TRY(s_parse_subscript(node, eq, comma + 1, (size_t)(arrow - comma - 1), &st->sub[1]));
    ZF_TRY(s_parse_subscript(node, eq, arrow + 2, strlen(arrow + 2), &st->sub[2]));
    for (int s = 0; s < 3; s++) {
        const s_subscript_t *sub = &st->sub[s];
        if (s == 1 && n == 1) continue;
        for (int i = 0; i < sub->n; i++) {
            int id = sub->ids[i];
            if (id < 0) continue;
            for (int j = i + 1; j < sub->n; j++) {
                if (sub->ids[j] != id) continue;
                if (s == 2)
                    return zf_invalid_argument("%s (%s): output label '%c' appears twice in "
                                               "equation '%s'",
                                               node->name, node->op, s_label_char(id), eq);
                return zf_unimplemented("%s (%s): equation '%s' repeats label '%c' within one "
                                        "operand (diagonals and traces are not supported)",
                                        node->name, node->op, eq, s_label_char(id));
            }
            if (s == 2 && !s_has_label(&st->sub[0], id) &&
                !(n == 2 && s_has_label(&st->sub[1], id)))
                return zf_invalid_argument("%s (%s): output label '%c' of equation '%s' appears "
                                           "in no input",
                                           node->name, node->op, s_label_char(id), eq);
        }
    }
    return ZF_STATUS_OK;
}

static zf_status_t s_einsum_create(const Tensorflow__NodeDef *node, void **state)
{
    const uint8_t *data = NULL;
    size_t len = 0;
    ZF_TRY(zf_node_attr_string(node, "equation", &data, &len));
    if (len >= S_EQ_MAX)
        return zf_invalid_argument("%s (%s): equation of %zu characters; at most %d allowed",
                                   node->name, node->op, len, S_EQ_MAX - 1);
    s_einsum_t *st = calloc(1, sizeof *st);
    if (!st) return zf_out_of_memory("Einsum kernel");
    memcpy(st->equation, data, len);
    st->equation[len] = '\0';
    if (strlen(st->equation) != len) {
        free(st);
        return zf_invalid_argument("%s (%s): equation holds a NUL character", node->name, node->op);
    }
    zf_status_t s = s_einsum_parse(node, st);
    if (!zf_ok(s)) {
        free(st);
        return s;
    }
    *state = st;
    return ZF_STATUS_OK;
}

/* ---- gathering ------------------------------------------------------------ */

typedef struct {
    int64_t size, stride;
} s_axis_t;

/* dst (row-major over keep) = src summed over the sum axes. */
#define S_GATHER(name_, T)                                                                         \
    static void name_(const void *srcv, const s_axis_t *keep, int nk, const s_axis_t *sum, int ns, \
                      void *dstv)                                                                  \
    {                                                                                              \
        const T *src = srcv;                                                                       \
        T *dst = dstv;                                                                             \
        int64_t total = 1, per = 1, ki[S_MAX_LABELS] = {0}, off = 0;                               \
        for (int d = 0; d < nk; d++) total *= keep[d].size;                                        \
        for (int d = 0; d < ns; d++) per *= sum[d].size;                                           \
        for (int64_t e = 0; e < total; e++) {                                                      \
            if (ns == 0) {                                                                         \
                dst[e] = src[off];                                                                 \
            } else {                                                                               \
                double acc = 0;                                                                    \
                int64_t si[S_MAX_LABELS] = {0}, soff = 0;                                          \
                for (int64_t p = 0; p < per; p++) {                                                \
                    acc += (double)src[off + soff];                                                \
                    for (int d = ns - 1; d >= 0; d--) {                                            \
                        soff += sum[d].stride;                                                     \
                        if (++si[d] < sum[d].size) break;                                          \
                        soff -= sum[d].stride * sum[d].size;                                       \
                        si[d] = 0;                                                                 \
                    }                                                                              \
                }                                                                                  \
                dst[e] = (T)acc;                                                                   \
            }                                                                                      \
            for (int d = nk - 1; d >= 0; d--) {                                                    \
                off += keep[d].stride;                                                             \
                if (++ki[d] < keep[d].size) break;                                                 \
                off -= keep[d].stride * keep[d].size;                                              \
                ki[d] = 0;                                                                         \
            }                                                                                      \
        }                                                                                          \
    }
S_GATHER(s_gather_f32, float)
S_GATHER(s_gather_f64, double)

typedef void (*s_gather_fn)(const void *src, const s_axis_t *keep, int nk, const s_axis_t *sum,
                            int ns, void *dst);

/* ---- compute -------------------------------------------------------------- */

/* What the shapes tell about the labels: every label's size, and each
 * input's stride for it (0 where the input lacks it or broadcasts it). */
typedef struct {
    int64_t size[S_MAX_LABELS];
    bool in[2][S_MAX_LABELS];
    int64_t dim[2][S_MAX_LABELS];
    int64_t stride[2][S_MAX_LABELS];
    int out[S_MAX_LABELS]; /* the output's labels, ellipsis expanded */
    int out_rank;
} s_labels_t;

static zf_status_t s_bind_shapes(zf_kernel_ctx_t *ctx, const s_einsum_t *st, s_labels_t *lb)
{
    char shapes[2 * ZF_SHAPE_STRING_MAX + 8], buf[ZF_SHAPE_STRING_MAX];
    snprintf(shapes, sizeof shapes, "%s", zf_kernels_shape_str(ctx->inputs[0], buf));
    if (st->num_inputs == 2) {
        size_t used = strlen(shapes);
        snprintf(shapes + used, sizeof shapes - used, " and %s",
                 zf_kernels_shape_str(ctx->inputs[1], buf));
    }
    const char *eq = st->equation;
    int ell_dims[2] = {0, 0}, ell_max = 0;
    for (int i = 0; i < st->num_inputs; i++) {
        const s_subscript_t *sub = &st->sub[i];
        int rank = zf_tensor_shape(ctx->inputs[i])->rank, named = sub->n - sub->ellipsis;
        if (sub->ellipsis ? rank < named : rank != named)
            return zf_kernel_error(ctx, ZF_INVALID_ARGUMENT,
                                   "equation '%s' names %d dims of input %d, which has rank %d "
                                   "(input shapes %s)",
                                   eq, named, i, rank, shapes);
        ell_dims[i] = rank - named;
        if (ell_dims[i] > ell_max) ell_max = ell_dims[i];
    }
    for (int l = 0; l < S_MAX_LABELS; l++) lb->size[l] = -1;
    for (int i = 0; i < st->num_inputs; i++) {
        const s_subscript_t *sub = &st->sub[i];
        const zf_shape_t *s = zf_tensor_shape(ctx->inputs[i]);
        int64_t stride = 1;
        int labels[ZF_MAX_RANK];
        for (int k = 0, d = 0; k < sub->n; k++) {
            if (sub->ids[k] != S_ELLIPSIS) {
                labels[d++] = sub->ids[k];
                continue;
            }
            for (int e = 0; e < ell_dims[i]; e++)
                labels[d++] = S_LETTERS + ell_max - ell_dims[i] + e;
        }
        for (int d = s->rank - 1; d >= 0; d--) {
            int l = labels[d];
            int64_t dim = s->dims[d];
            lb->in[i][l] = true;
            lb->dim[i][l] = dim;
            lb->stride[i][l] = stride;
            stride *= dim;
            if (lb->size[l] < 0 || lb->size[l] == dim) {
                lb->size[l] = dim;
            } else if (l >= S_LETTERS && (lb->size[l] == 1 || dim == 1)) {
                if (lb->size[l] == 1) lb->size[l] = dim;
            } else if (l >= S_LETTERS) {
                return zf_kernel_error(ctx, ZF_INVALID_ARGUMENT,
                                       "the ellipsis dims of equation '%s' do not broadcast: "
                                       "input shapes %s",
                                       eq, shapes);
            } else {
                return zf_kernel_error(ctx, ZF_INVALID_ARGUMENT,
                                       "label '%c' of equation '%s' has sizes %lld and %lld: "
                                       "input shapes %s",
                                       s_label_char(l), eq, (long long)lb->size[l], (long long)dim,
                                       shapes);
            }
        }
    }
    /* An input's size-1 dim under a larger label repeats. */
    for (int i = 0; i < st->num_inputs; i++)
        for (int l = 0; l < S_MAX_LABELS; l++)
            if (lb->in[i][l] && lb->dim[i][l] == 1 && lb->size[l] != 1) lb->stride[i][l] = 0;
    lb->out_rank = 0;
    const s_subscript_t *out = &st->sub[2];
    for (int k = 0; k < out->n; k++) {
        int count = out->ids[k] == S_ELLIPSIS ? ell_max : 1;
        if (lb->out_rank + count > ZF_MAX_RANK)
            return zf_kernel_error(ctx, ZF_INVALID_ARGUMENT,
                                   "the output of equation '%s' has more than %d dims: input "
                                   "shapes %s",
                                   eq, ZF_MAX_RANK, shapes);
        for (int e = 0; e < count; e++)
            lb->out[lb->out_rank++] = out->ids[k] == S_ELLIPSIS ? S_LETTERS + e : out->ids[k];
    }
    return ZF_STATUS_OK;
}

/* Appends label l (its size, and its stride in src) to axes. */
static void s_push(s_axis_t *axes, int *n, const s_labels_t *lb, int l, const int64_t *stride)
{
    axes[*n].size = lb->size[l];
    axes[*n].stride = stride[l];
    (*n)++;
}

static int64_t s_product(const s_labels_t *lb, const int *labels, int n)
{
    int64_t p = 1;
    for (int i = 0; i < n; i++) p *= lb->size[labels[i]];
    return p;
}

/* Two operands: pack, one GEMM per batch entry, and (unless the product is
 * already in the output's order) a final gather into out. */
static zf_status_t s_contract(zf_kernel_ctx_t *ctx, const s_einsum_t *st, const s_labels_t *lb,
                              zf_tensor_t *out)
{
    int batch[S_MAX_LABELS], afree[S_MAX_LABELS], bfree[S_MAX_LABELS], contr[S_MAX_LABELS];
    int suma[S_MAX_LABELS], sumb[S_MAX_LABELS];
    int nb = 0, na = 0, nn = 0, nk = 0, nsa = 0, nsb = 0;
    bool in_out[S_MAX_LABELS] = {false};
    for (int k = 0; k < lb->out_rank; k++) {
        int l = lb->out[k];
        in_out[l] = true;
        if (lb->in[0][l] && lb->in[1][l])
            batch[nb++] = l;
        else if (lb->in[0][l])
            afree[na++] = l;
        else
            bfree[nn++] = l;
    }
    for (int l = 0; l < S_MAX_LABELS; l++) {
        if (in_out[l]) continue;
        if (lb->in[0][l] && lb->in[1][l])
            contr[nk++] = l;
        else if (lb->in[0][l])
            suma[nsa++] = l;
        else if (lb->in[1][l])
            sumb[nsb++] = l;
    }
    int64_t batches = s_product(lb, batch, nb), m = s_product(lb, afree, na);
    int64_t n = s_product(lb, bfree, nn), k = s_product(lb, contr, nk);
    if (zf_tensor_num_elements(out) == 0) return ZF_STATUS_OK;
    if (k == 0) {
        memset(zf_tensor_data(out), 0, zf_tensor_nbytes(out));
        return ZF_STATUS_OK;
    }
    if (m > INT32_MAX || n > INT32_MAX || k > INT32_MAX)
        return zf_kernel_error(ctx, ZF_UNIMPLEMENTED,
                               "equation '%s' gives matrices too large for one BLAS call",
                               st->equation);
    zf_dtype_t dtype = zf_tensor_dtype(out);
    size_t elem = zf_dtype_size(dtype);
    s_gather_fn gather = dtype == ZF_FLOAT ? s_gather_f32 : s_gather_f64;
    /* Is the product [batch, afree, bfree] already the output's order? */
    bool direct = true;
    for (int i = 0; i < lb->out_rank; i++) {
        int want = i < nb ? batch[i] : i < nb + na ? afree[i - nb] : bfree[i - nb - na];
        if (lb->out[i] != want) direct = false;
    }
    size_t a_bytes = (size_t)(batches * m * k) * elem, b_bytes = (size_t)(batches * k * n) * elem;
    size_t c_bytes = direct ? 0 : (size_t)(batches * m * n) * elem;
    char *buf = malloc(a_bytes + b_bytes + c_bytes);
    if (!buf) return zf_out_of_memory("Einsum operands");
    char *pa = buf, *pb = buf + a_bytes, *pc = direct ? zf_tensor_data(out) : pb + b_bytes;
    s_axis_t keep[S_MAX_LABELS], sum[S_MAX_LABELS];
    int nkeep = 0, nsum = 0;
    for (int i = 0; i < nb; i++) s_push(keep, &nkeep, lb, batch[i], lb->stride[0]);
    for (int i = 0; i < na; i++) s_push(keep, &nkeep, lb, afree[i], lb->stride[0]);
    for (int i = 0; i < nk; i++) s_push(keep, &nkeep, lb, contr[i], lb->stride[0]);
    for (int i = 0; i < nsa; i++) s_push(sum, &nsum, lb, suma[i], lb->stride[0]);
    gather(zf_tensor_data(ctx->inputs[0]), keep, nkeep, sum, nsum, pa);
    nkeep = nsum = 0;
    for (int i = 0; i < nb; i++) s_push(keep, &nkeep, lb, batch[i], lb->stride[1]);
    for (int i = 0; i < nk; i++) s_push(keep, &nkeep, lb, contr[i], lb->stride[1]);
    for (int i = 0; i < nn; i++) s_push(keep, &nkeep, lb, bfree[i], lb->stride[1]);
    for (int i = 0; i < nsb; i++) s_push(sum, &nsum, lb, sumb[i], lb->stride[1]);
    gather(zf_tensor_data(ctx->inputs[1]), keep, nkeep, sum, nsum, pb);
    for (int64_t b = 0; b < batches; b++) {
        const void *a = pa + (size_t)(b * m * k) * elem, *bm = pb + (size_t)(b * k * n) * elem;
        void *c = pc + (size_t)(b * m * n) * elem;
        if (dtype == ZF_FLOAT)
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (blasint)m, (blasint)n,
                        (blasint)k, 1.0f, a, (blasint)k, bm, (blasint)n, 0.0f, c, (blasint)n);
        else
            cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (blasint)m, (blasint)n,
                        (blasint)k, 1.0, a, (blasint)k, bm, (blasint)n, 0.0, c, (blasint)n);
    }
    if (!direct) {
        /* The product's strides, row-major over [batch, afree, bfree]. */
        int64_t cstride[S_MAX_LABELS] = {0}, s = 1;
        int order[S_MAX_LABELS], no = 0;
        for (int i = 0; i < nb; i++) order[no++] = batch[i];
        for (int i = 0; i < na; i++) order[no++] = afree[i];
        for (int i = 0; i < nn; i++) order[no++] = bfree[i];
        for (int i = no - 1; i >= 0; i--) {
            cstride[order[i]] = s;
            s *= lb->size[order[i]];
        }
        nkeep = 0;
        for (int i = 0; i < lb->out_rank; i++) s_push(keep, &nkeep, lb, lb->out[i], cstride);
        gather(pc, keep, nkeep, NULL, 0, zf_tensor_data(out));
    }
    free(buf);
    return ZF_STATUS_OK;
}

static zf_status_t s_einsum_compute(zf_kernel_ctx_t *ctx)
{
    const s_einsum_t *st = ctx->state;
    if (ctx->num_inputs != st->num_inputs)
        return zf_kernel_error(ctx, ZF_INVALID_ARGUMENT,
                               "equation '%s' has %d operands but the node has %d inputs",
                               st->equation, st->num_inputs, ctx->num_inputs);
    ZF_TRY(zf_kernels_check_inputs(ctx, st->num_inputs));
    zf_dtype_t dtype = zf_tensor_dtype(ctx->inputs[0]);
    if (dtype != ZF_FLOAT && dtype != ZF_DOUBLE)
        return zf_kernel_error(ctx, ZF_INVALID_ARGUMENT, "no CPU kernel for %s inputs",
                               zf_kernels_dtype_name((int)dtype));
    if (st->num_inputs == 2) ZF_TRY(zf_kernels_check_dtype(ctx, 1, dtype));
    s_labels_t *lb = calloc(1, sizeof *lb);
    if (!lb) return zf_out_of_memory("Einsum labels");
    zf_status_t s = s_bind_shapes(ctx, st, lb);
    zf_shape_t os = {.rank = lb->out_rank};
    for (int i = 0; i < lb->out_rank; i++) os.dims[i] = lb->size[lb->out[i]];
    zf_tensor_t *out = NULL;
    if (zf_ok(s)) s = zf_kernel_alloc_output(ctx, 0, dtype, &os, &out);
    if (zf_ok(s) && st->num_inputs == 2) {
        s = s_contract(ctx, st, lb, out);
    } else if (zf_ok(s) && zf_tensor_num_elements(out) > 0) {
        /* One operand: a transpose and/or a sum. */
        s_axis_t keep[S_MAX_LABELS], sum[S_MAX_LABELS];
        int nkeep = 0, nsum = 0;
        bool in_out[S_MAX_LABELS] = {false};
        for (int i = 0; i < lb->out_rank; i++) {
            in_out[lb->out[i]] = true;
            s_push(keep, &nkeep, lb, lb->out[i], lb->stride[0]);
        }
        for (int l = 0; l < S_MAX_LABELS; l++)
            if (lb->in[0][l] && !in_out[l]) s_push(sum, &nsum, lb, l, lb->stride[0]);
        (dtype == ZF_FLOAT ? s_gather_f32 : s_gather_f64)(zf_tensor_data(ctx->inputs[0]), keep,
                                                          nkeep, sum, nsum, zf_tensor_data(out));
    }
    free(lb);
    return s;
}

static const zf_kernel_t s_defs[] = {
    {.op = "Einsum",
     .device_type = "CPU",
     .allowed_types = ZF_TYPES_FLOAT,
     .flags = ZF_KERNEL_EXPENSIVE,
     .create = s_einsum_create,
     .destroy = free,
     .compute = s_einsum_compute},
};

zf_status_t zf__kernels_register_einsum(void)
{
    return zf__kernels_register_defs(s_defs, (int)(sizeof s_defs / sizeof s_defs[0]));
}
