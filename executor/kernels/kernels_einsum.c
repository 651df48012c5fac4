/* CPU Einsum of any number of operands: FLOAT and DOUBLE through OpenBLAS,
 * INT32 and INT64 through a GEMM loop of its own, HALF and BFLOAT16 widened
 * to FLOAT (and the result rounded once).
 *
 * The equation ("bhqd,bhkd->bhqk", "ij,jk,kl->il", "bii->bi") is parsed once
 * when the kernel is created. When it runs, every label gets a size and each
 * operand a stride for each of its labels. A label repeated within one
 * subscript is one label whose stride is the sum of its dims' strides (once
 * those dims are checked equal): reading along it walks the diagonal, and
 * summing it gives the trace.
 *
 * One operand is one gather: a transpose, a diagonal, a reduction or all of
 * them. Two or more are multiplied a pair at a time; of the pairs left, the
 * one whose product needs the fewest multiply-adds goes first (the leftmost
 * on a tie, so a chain of equal sizes runs left to right), and its product
 * keeps the labels that a later operand or the output still needs. Within a
 * pair each label is a batch label (in both operands, still needed), a
 * contracted label (in both, no longer needed), a free label of one operand
 * (still needed) or a label summed within one. The operands are gathered
 * into [batch, free, contracted] and [batch, contracted, free] matrices
 * (summing the labels only one operand has; an operand already laid out
 * that way is used in place) and multiplied with one GEMM per batch entry. A product still to be
 * multiplied stays in that [batch, free, free] order; the last one is gathered into the output's
 * order unless it already has it.
 *
 * An ellipsis stands for the dims its subscript does not name; those of the
 * operands broadcast as NumPy's do (aligned from the right, size 1 repeats),
 * and an output without an ellipsis sums them. Sums within one operand are
 * accumulated in double (integers: unsigned, so overflow wraps); products
 * of a pair in the dtype, by the GEMM. */
#include <cblas.h>
#include <complex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/graph.h"
#include "executor/kernels/kernels_util.h"

#define S_LETTERS    52                        /* a-z, A-Z */
#define S_MAX_LABELS (S_LETTERS + ZF_MAX_RANK) /* then the ellipsis dims */
#define S_ELLIPSIS   (-1)
#define S_EQ_MAX     256
#define S_TYPES                                                                                    \
    (ZF_TYPES_FLOAT | ZF_TYPES_INDEX | ZF_TYPE_BIT(ZF_HALF) | ZF_TYPE_BIT(ZF_BFLOAT16) |             \
     ZF_TYPE_BIT(ZF_COMPLEX64) | ZF_TYPE_BIT(ZF_COMPLEX128))
/* Each operand but the last ends at a comma, so an equation that fits in
 * S_EQ_MAX bytes has fewer operands. */
#define S_MAX_OPERANDS S_EQ_MAX

/* One subscript: label ids (0..51) in order, S_ELLIPSIS where "..." is. */
typedef struct {
    int n;
    int8_t ids[ZF_MAX_RANK + 1];
    bool ellipsis;
} s_subscript_t;

typedef struct {
    char equation[S_EQ_MAX];
    int num_inputs;
    s_subscript_t out;
    s_subscript_t in[S_MAX_OPERANDS];
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
    st->num_inputs = 0;
    for (const char *p = eq;;) {
        const char *end = memchr(p, ',', (size_t)(arrow - p));
        if (!end) end = arrow;
        ZF_TRY(s_parse_subscript(node, eq, p, (size_t)(end - p), &st->in[st->num_inputs++]));
        if (end == arrow) break;
        p = end + 1;
    }
    ZF_TRY(s_parse_subscript(node, eq, arrow + 2, strlen(arrow + 2), &st->out));
    const s_subscript_t *out = &st->out;
    for (int i = 0; i < out->n; i++) {
        int id = out->ids[i];
        if (id < 0) continue;
        for (int j = i + 1; j < out->n; j++)
            if (out->ids[j] == id)
                return zf_invalid_argument("%s (%s): output label '%c' appears twice in "
                                           "equation '%s'",
                                           node->name, node->op, s_label_char(id), eq);
        bool found = false;
        for (int k = 0; k < st->num_inputs && !found; k++) found = s_has_label(&st->in[k], id);
        if (!found)
            return zf_invalid_argument("%s (%s): output label '%c' of equation '%s' appears "
                                       "in no input",
                                       node->name, node->op, s_label_char(id), eq);
    }
    /* The op's N attr counts the inputs; a graph may leave it out. */
    int64_t n_attr = 0;
    ZF_TRY(zf_node_attr_int_or(node, "N", st->num_inputs, &n_attr));
    if (n_attr != st->num_inputs)
        return zf_invalid_argument("%s (%s): equation '%s' has %d operands but attr N is %lld",
                                   node->name, node->op, eq, st->num_inputs, (long long)n_attr);
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
#define S_GATHER(name_, T, ACC)                                                                    \
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
                ACC acc = 0;                                                                       \
                int64_t si[S_MAX_LABELS] = {0}, soff = 0;                                          \
                for (int64_t p = 0; p < per; p++) {                                                \
                    acc += (ACC)src[off + soff];                                                   \
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
/* Integers are summed unsigned: overflow wraps, as in TensorFlow. */
S_GATHER(s_gather_f32, float, double)
S_GATHER(s_gather_f64, double, double)
S_GATHER(s_gather_i32, int32_t, uint32_t)
S_GATHER(s_gather_i64, int64_t, uint64_t)
S_GATHER(s_gather_c64, float complex, double complex)
S_GATHER(s_gather_c128, double complex, double complex)

typedef void (*s_gather_fn)(const void *src, const s_axis_t *keep, int nk, const s_axis_t *sum,
                            int ns, void *dst);

/* c[m,n] = a[m,k] b[k,n], all row-major and packed. */
typedef void (*s_gemm_fn)(int64_t m, int64_t n, int64_t k, const void *a, const void *b, void *c);

static void s_gemm_f32(int64_t m, int64_t n, int64_t k, const void *a, const void *b, void *c)
{
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (blasint)m, (blasint)n, (blasint)k, 1.0f,
                a, (blasint)k, b, (blasint)n, 0.0f, c, (blasint)n);
}

static void s_gemm_f64(int64_t m, int64_t n, int64_t k, const void *a, const void *b, void *c)
{
    cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (blasint)m, (blasint)n, (blasint)k, 1.0,
                a, (blasint)k, b, (blasint)n, 0.0, c, (blasint)n);
}

static void s_gemm_c64(int64_t m, int64_t n, int64_t k, const void *a, const void *b, void *c)
{
    const float complex one = 1.0f, zero = 0.0f;
    cblas_cgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (blasint)m, (blasint)n, (blasint)k, &one,
                a, (blasint)k, b, (blasint)n, &zero, c, (blasint)n);
}

static void s_gemm_c128(int64_t m, int64_t n, int64_t k, const void *a, const void *b, void *c)
{
    const double complex one = 1.0, zero = 0.0;
    cblas_zgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (blasint)m, (blasint)n, (blasint)k, &one,
                a, (blasint)k, b, (blasint)n, &zero, c, (blasint)n);
}

/* OpenBLAS has no integer GEMM: rows of c accumulate a's entries times
 * b's rows, in the unsigned type U so that overflow wraps. */
#define S_GEMM_INT(name_, T, U)                                                                    \
    static void name_(int64_t m, int64_t n, int64_t k, const void *av, const void *bv, void *cv)   \
    {                                                                                              \
        const T *a = av, *b = bv;                                                                  \
        for (int64_t i = 0; i < m; i++) {                                                          \
            U *row = (U *)cv + i * n;                                                              \
            memset(row, 0, (size_t)n * sizeof *row);                                               \
            for (int64_t p = 0; p < k; p++) {                                                      \
                U x = (U)a[i * k + p];                                                             \
                const T *brow = b + p * n;                                                         \
                for (int64_t j = 0; j < n; j++) row[j] += x * (U)brow[j];                          \
            }                                                                                      \
        }                                                                                          \
    }
S_GEMM_INT(s_gemm_i32, int32_t, uint32_t)
S_GEMM_INT(s_gemm_i64, int64_t, uint64_t)

/* The loops for the dtype the kernel computes in (FLOAT for HALF and
 * BFLOAT16, which are widened first). */
typedef struct {
    s_gather_fn gather;
    s_gemm_fn gemm;
} s_ops_t;

static s_ops_t s_ops(zf_dtype_t work)
{
    switch (work) {
    case ZF_DOUBLE: return (s_ops_t){s_gather_f64, s_gemm_f64};
    case ZF_INT32: return (s_ops_t){s_gather_i32, s_gemm_i32};
    case ZF_INT64: return (s_ops_t){s_gather_i64, s_gemm_i64};
    case ZF_COMPLEX64: return (s_ops_t){s_gather_c64, s_gemm_c64};
    case ZF_COMPLEX128: return (s_ops_t){s_gather_c128, s_gemm_c128};
    default: return (s_ops_t){s_gather_f32, s_gemm_f32};
    }
}

/* ---- compute -------------------------------------------------------------- */

/* An operand, or the product of two: its data and, for each label it has,
 * the label's dim in it and its stride (0 where a size-1 dim repeats). */
typedef struct {
    const void *data;
    void *owned; /* a product's buffer (freed once multiplied), else NULL */
    bool has[S_MAX_LABELS];
    int64_t dim[S_MAX_LABELS];
    int64_t stride[S_MAX_LABELS];
} s_term_t;

typedef struct {
    int64_t size[S_MAX_LABELS];
    int out[S_MAX_LABELS]; /* the output's labels, ellipsis expanded */
    int out_rank;
    s_term_t term[]; /* one per input */
} s_labels_t;

/* "[2,3], [3,4] and [4,5]": the input shapes, for errors (cut short past
 * S_SHAPES_MAX bytes). */
#define S_SHAPES_MAX 1024
static const char *s_shapes_str(const zf_kernel_ctx_t *ctx, int n, char *text)
{
    char buf[ZF_SHAPE_STRING_MAX];
    size_t used = 0;
    text[0] = '\0';
    for (int i = 0; i < n && used < S_SHAPES_MAX; i++) {
        const char *sep = i == 0 ? "" : i == n - 1 ? " and " : ", ";
        int w = snprintf(text + used, S_SHAPES_MAX - used, "%s%s", sep,
                         zf_kernels_shape_str(ctx->inputs[i], buf));
        if (w < 0) break;
        used += (size_t)w;
    }
    return text;
}

static zf_status_t s_bind_shapes(zf_kernel_ctx_t *ctx, const s_einsum_t *st, s_labels_t *lb)
{
    const char *eq = st->equation;
    char shapes[S_SHAPES_MAX];
    int n = st->num_inputs, ell_dims[S_MAX_OPERANDS], ell_max = 0;
    for (int i = 0; i < n; i++) {
        const s_subscript_t *sub = &st->in[i];
        int rank = zf_tensor_shape(ctx->inputs[i])->rank, named = sub->n - sub->ellipsis;
        if (sub->ellipsis ? rank < named : rank != named)
            return zf_kernel_error(ctx, ZF_INVALID_ARGUMENT,
                                   "equation '%s' names %d dims of input %d, which has rank %d "
                                   "(input shapes %s)",
                                   eq, named, i, rank, s_shapes_str(ctx, n, shapes));
        ell_dims[i] = rank - named;
        if (ell_dims[i] > ell_max) ell_max = ell_dims[i];
    }
    for (int l = 0; l < S_MAX_LABELS; l++) lb->size[l] = -1;
    for (int i = 0; i < n; i++) {
        const s_subscript_t *sub = &st->in[i];
        const zf_shape_t *s = zf_tensor_shape(ctx->inputs[i]);
        s_term_t *t = &lb->term[i];
        t->data = zf_tensor_data(ctx->inputs[i]);
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
        for (int d = 0; d < s->rank; d++) /* a repeated label's dims must agree */
            for (int e = d + 1; e < s->rank; e++)
                if (labels[e] == labels[d] && s->dims[e] != s->dims[d])
                    return zf_kernel_error(ctx, ZF_INVALID_ARGUMENT,
                                           "label '%c' of equation '%s' is repeated in input %d "
                                           "over dims of sizes %lld and %lld: input shapes %s",
                                           s_label_char(labels[d]), eq, i, (long long)s->dims[d],
                                           (long long)s->dims[e], s_shapes_str(ctx, n, shapes));
        for (int d = s->rank - 1; d >= 0; d--) {
            int l = labels[d];
            int64_t dim = s->dims[d];
            if (t->has[l]) { /* repeated within this subscript: its diagonal */
                t->stride[l] += stride;
                stride *= dim;
                continue;
            }
            t->has[l] = true;
            t->dim[l] = dim;
            t->stride[l] = stride;
            stride *= dim;
            if (lb->size[l] < 0 || lb->size[l] == dim) {
                lb->size[l] = dim;
            } else if (l >= S_LETTERS && (lb->size[l] == 1 || dim == 1)) {
                if (lb->size[l] == 1) lb->size[l] = dim;
            } else if (l >= S_LETTERS) {
                return zf_kernel_error(ctx, ZF_INVALID_ARGUMENT,
                                       "the ellipsis dims of equation '%s' do not broadcast: "
                                       "input shapes %s",
                                       eq, s_shapes_str(ctx, n, shapes));
            } else {
                return zf_kernel_error(ctx, ZF_INVALID_ARGUMENT,
                                       "label '%c' of equation '%s' has sizes %lld and %lld: "
                                       "input shapes %s",
                                       s_label_char(l), eq, (long long)lb->size[l], (long long)dim,
                                       s_shapes_str(ctx, n, shapes));
            }
        }
    }
    /* An input's size-1 dim under a larger label repeats. */
    for (int i = 0; i < n; i++)
        for (int l = 0; l < S_MAX_LABELS; l++) {
            s_term_t *t = &lb->term[i];
            if (t->has[l] && t->dim[l] == 1 && lb->size[l] != 1) t->stride[l] = 0;
        }
    lb->out_rank = 0;
    const s_subscript_t *out = &st->out;
    for (int k = 0; k < out->n; k++) {
        int count = out->ids[k] == S_ELLIPSIS ? ell_max : 1;
        if (lb->out_rank + count > ZF_MAX_RANK)
            return zf_kernel_error(ctx, ZF_INVALID_ARGUMENT,
                                   "the output of equation '%s' has more than %d dims: input "
                                   "shapes %s",
                                   eq, ZF_MAX_RANK, s_shapes_str(ctx, n, shapes));
        for (int e = 0; e < count; e++)
            lb->out[lb->out_rank++] = out->ids[k] == S_ELLIPSIS ? S_LETTERS + e : out->ids[k];
    }
    return ZF_STATUS_OK;
}

/* Appends label l (its size, and its stride in t) to axes. */
static void s_push(s_axis_t *axes, int *n, const s_labels_t *lb, int l, const int64_t *stride)
{
    axes[*n].size = lb->size[l];
    axes[*n].stride = stride[l];
    (*n)++;
}

/* The product of the sizes of labels[0..n); false when it overflows. */
static bool s_product(const s_labels_t *lb, const int *labels, int n, int64_t *p)
{
    *p = 1;
    for (int i = 0; i < n; i++)
        if (__builtin_mul_overflow(*p, lb->size[labels[i]], p)) return false;
    return true;
}

/* x * y elements of elem bytes; false when that overflows or passes the
 * largest buffer this process allocates (zf_buffer_alloc_limit): the
 * order of a chain minimises work, not memory, so a product in its middle
 * can be far larger than any input or the output. */
static bool s_bytes(int64_t x, int64_t y, size_t elem, size_t *bytes)
{
    int64_t e;
    return !__builtin_mul_overflow(x, y, &e) && !__builtin_mul_overflow((size_t)e, elem, bytes) &&
           *bytes <= zf_buffer_alloc_limit();
}

/* Whether axes[0..n) walk memory contiguously in row-major order. */
static bool s_is_packed(const s_axis_t *axes, int n)
{
    int64_t want = 1;
    for (int d = n - 1; d >= 0; d--) {
        if (axes[d].size == 1) continue;
        if (axes[d].stride != want) return false;
        want *= axes[d].size;
    }
    return true;
}

/* How operand t becomes the rows or columns of a pair's GEMMs: its labels
 * in lists[0..3) (counts[g] each) kept in that order, those in sum summed. */
typedef struct {
    s_axis_t keep[S_MAX_LABELS], sum[S_MAX_LABELS];
    int nkeep, nsum;
    bool copy; /* false: t's own data already has that layout */
} s_pack_t;

static void s_pack_plan(const s_labels_t *lb, const s_term_t *t, const int *const lists[3],
                        const int counts[3], const int *sum, int nsum, s_pack_t *p)
{
    p->nkeep = p->nsum = 0;
    for (int g = 0; g < 3; g++)
        for (int i = 0; i < counts[g]; i++) s_push(p->keep, &p->nkeep, lb, lists[g][i], t->stride);
    for (int i = 0; i < nsum; i++) s_push(p->sum, &p->nsum, lb, sum[i], t->stride);
    p->copy = p->nsum > 0 || !s_is_packed(p->keep, p->nkeep);
}

/* dst (row-major over order[0..no), labels of a or b) = the product of a
 * and b, summed over their labels that order lacks: one GEMM per batch
 * entry, and (unless the product already has order's order) a gather. */
static zf_status_t s_contract(zf_kernel_ctx_t *ctx, const s_einsum_t *st, const s_labels_t *lb,
                              zf_dtype_t dtype, const s_term_t *a, const s_term_t *b,
                              const int *order, int no, void *dst)
{
    int batch[S_MAX_LABELS], afree[S_MAX_LABELS], bfree[S_MAX_LABELS], contr[S_MAX_LABELS];
    int suma[S_MAX_LABELS], sumb[S_MAX_LABELS];
    int nb = 0, na = 0, nn = 0, nk = 0, nsa = 0, nsb = 0;
    bool kept[S_MAX_LABELS] = {false};
    for (int i = 0; i < no; i++) {
        int l = order[i];
        kept[l] = true;
        if (a->has[l] && b->has[l])
            batch[nb++] = l;
        else if (a->has[l])
            afree[na++] = l;
        else
            bfree[nn++] = l;
    }
    for (int l = 0; l < S_MAX_LABELS; l++) {
        if (kept[l]) continue;
        if (a->has[l] && b->has[l])
            contr[nk++] = l;
        else if (a->has[l])
            suma[nsa++] = l;
        else if (b->has[l])
            sumb[nsb++] = l;
    }
    int64_t batches, m, n, k, bm, bk;
    size_t elem = zf_dtype_size(dtype), a_bytes, b_bytes, c_bytes;
    if (!s_product(lb, batch, nb, &batches) || !s_product(lb, afree, na, &m) ||
        !s_product(lb, bfree, nn, &n) || !s_product(lb, contr, nk, &k) ||
        __builtin_mul_overflow(batches, m, &bm) || __builtin_mul_overflow(batches, k, &bk) ||
        !s_bytes(bm, k, elem, &a_bytes) || !s_bytes(bk, n, elem, &b_bytes) ||
        !s_bytes(bm, n, elem, &c_bytes))
        return zf_kernel_error(ctx, ZF_RESOURCE_EXHAUSTED,
                               "equation '%s' gives matrices too large to allocate", st->equation);
    if (c_bytes == 0) return ZF_STATUS_OK;
    if (k == 0) {
        memset(dst, 0, c_bytes);
        return ZF_STATUS_OK;
    }
    if (m > INT32_MAX || n > INT32_MAX || k > INT32_MAX)
        return zf_kernel_error(ctx, ZF_UNIMPLEMENTED,
                               "equation '%s' gives matrices too large for one BLAS call",
                               st->equation);
    s_ops_t ops = s_ops(dtype);
    /* Is the product [batch, afree, bfree] already order's order? */
    bool direct = true;
    for (int i = 0; i < no; i++) {
        int want = i < nb ? batch[i] : i < nb + na ? afree[i - nb] : bfree[i - nb - na];
        if (order[i] != want) direct = false;
    }
    s_pack_t pack[2];
    const int *a_keep[3] = {batch, afree, contr}, *b_keep[3] = {batch, contr, bfree};
    const int a_counts[3] = {nb, na, nk}, b_counts[3] = {nb, nk, nn};
    s_pack_plan(lb, a, a_keep, a_counts, suma, nsa, &pack[0]);
    s_pack_plan(lb, b, b_keep, b_counts, sumb, nsb, &pack[1]);
    if (!pack[0].copy) a_bytes = 0;
    if (!pack[1].copy) b_bytes = 0;
    if (direct) c_bytes = 0;
    char *buf = NULL;
    if (a_bytes + b_bytes + c_bytes > 0 && !(buf = malloc(a_bytes + b_bytes + c_bytes)))
        return zf_out_of_memory("Einsum operands");
    const void *pa = a->data, *pb = b->data;
    if (pack[0].copy) {
        ops.gather(a->data, pack[0].keep, pack[0].nkeep, pack[0].sum, pack[0].nsum, buf);
        pa = buf;
    }
    if (pack[1].copy) {
        ops.gather(b->data, pack[1].keep, pack[1].nkeep, pack[1].sum, pack[1].nsum, buf + a_bytes);
        pb = buf + a_bytes;
    }
    char *pc = direct ? dst : buf + a_bytes + b_bytes;
    for (int64_t e = 0; e < batches; e++) {
        const void *ma = (const char *)pa + (size_t)(e * m * k) * elem;
        const void *mb = (const char *)pb + (size_t)(e * k * n) * elem;
        ops.gemm(m, n, k, ma, mb, pc + (size_t)(e * m * n) * elem);
    }
    if (!direct) {
        /* The product's strides, row-major over [batch, afree, bfree]. */
        int64_t cstride[S_MAX_LABELS] = {0}, s = 1;
        int prod[S_MAX_LABELS], np = 0;
        for (int i = 0; i < nb; i++) prod[np++] = batch[i];
        for (int i = 0; i < na; i++) prod[np++] = afree[i];
        for (int i = 0; i < nn; i++) prod[np++] = bfree[i];
        for (int i = np - 1; i >= 0; i--) {
            cstride[prod[i]] = s;
            s *= lb->size[prod[i]];
        }
        s_axis_t keep[S_MAX_LABELS];
        int nkeep = 0;
        for (int i = 0; i < no; i++) s_push(keep, &nkeep, lb, order[i], cstride);
        ops.gather(pc, keep, nkeep, NULL, 0, dst);
    }
    free(buf);
    return ZF_STATUS_OK;
}

/* The output's labels and those of every live term but skip_a and skip_b:
 * the labels a product of those two must keep. */
static void s_needed(const s_labels_t *lb, s_term_t *const *live, int nlive, int skip_a, int skip_b,
                     bool *need)
{
    memset(need, 0, S_MAX_LABELS * sizeof *need);
    for (int k = 0; k < lb->out_rank; k++) need[lb->out[k]] = true;
    for (int t = 0; t < nlive; t++)
        if (t != skip_a && t != skip_b)
            for (int l = 0; l < S_MAX_LABELS; l++) need[l] |= live[t]->has[l];
}

/* Two or more operands: while more than two are left, the cheapest pair
 * (fewest multiply-adds, the leftmost on a tie) is replaced by its product;
 * the last two are multiplied into dst, in the output's order. */
static zf_status_t s_contract_all(zf_kernel_ctx_t *ctx, const s_einsum_t *st, s_labels_t *lb,
                                  zf_dtype_t dtype, void *dst)
{
    s_term_t *live[S_MAX_OPERANDS];
    int nlive = st->num_inputs;
    for (int i = 0; i < nlive; i++) live[i] = &lb->term[i];
    size_t elem = zf_dtype_size(dtype);
    zf_status_t s = ZF_STATUS_OK;
    while (zf_ok(s) && nlive > 2) {
        int bi = 0, bj = 1;
        double best = 0;
        for (int i = 0; i < nlive; i++)
            for (int j = i + 1; j < nlive; j++) {
                double cost = 1;
                for (int l = 0; l < S_MAX_LABELS; l++)
                    if (live[i]->has[l] || live[j]->has[l]) cost *= (double)lb->size[l];
                if ((i == 0 && j == 1) || cost < best) {
                    best = cost;
                    bi = i;
                    bj = j;
                }
            }
        s_term_t *a = live[bi], *b = live[bj];
        bool need[S_MAX_LABELS];
        s_needed(lb, live, nlive, bi, bj, need);
        /* Kept labels in the order the GEMMs write them: no final gather. */
        int order[S_MAX_LABELS], no = 0;
        for (int pass = 0; pass < 3; pass++)
            for (int l = 0; l < S_MAX_LABELS; l++)
                if (need[l] && (pass == 0   ? a->has[l] && b->has[l]
                                : pass == 1 ? a->has[l] && !b->has[l]
                                            : !a->has[l] && b->has[l]))
                    order[no++] = l;
        s_term_t *res = calloc(1, sizeof *res);
        int64_t total;
        size_t bytes = 0;
        if (!res) {
            s = zf_out_of_memory("Einsum product");
        } else if (!s_product(lb, order, no, &total) || !s_bytes(total, 1, elem, &bytes)) {
            s = zf_kernel_error(ctx, ZF_RESOURCE_EXHAUSTED,
                                "equation '%s' gives a product too large to allocate",
                                st->equation);
        } else if (bytes > 0 && !(res->owned = malloc(bytes))) {
            s = zf_out_of_memory("Einsum product");
        } else {
            res->data = res->owned;
            int64_t stride = 1;
            for (int i = no - 1; i >= 0; i--) {
                int l = order[i];
                res->has[l] = true;
                res->dim[l] = lb->size[l];
                res->stride[l] = stride;
                stride *= lb->size[l];
            }
            s = s_contract(ctx, st, lb, dtype, a, b, order, no, res->owned);
        }
        free(a->owned);
        free(b->owned);
        b->owned = NULL;
        if (res) {
            *a = *res; /* a's slot now holds the product (and owns its buffer) */
            free(res);
        } else {
            a->owned = NULL;
        }
        memmove(&live[bj], &live[bj + 1], (size_t)(nlive - bj - 1) * sizeof live[0]);
        nlive--;
    }
    if (zf_ok(s)) s = s_contract(ctx, st, lb, dtype, live[0], live[1], lb->out, lb->out_rank, dst);
    return s;
}

/* HALF and BFLOAT16 are computed in FLOAT: n values widened into dst, ... */
static void s_widen(zf_dtype_t dtype, const uint16_t *src, int64_t n, float *dst)
{
    for (int64_t i = 0; i < n; i++)
        dst[i] = dtype == ZF_HALF ? zf_half_to_float(src[i]) : zf_bfloat16_to_float(src[i]);
}

/* ... and the result rounded (to nearest even) once, at the end. */
static void s_narrow(zf_dtype_t dtype, const float *src, int64_t n, uint16_t *dst)
{
    for (int64_t i = 0; i < n; i++)
        dst[i] = dtype == ZF_HALF ? zf_float_to_half(src[i]) : zf_float_to_bfloat16(src[i]);
}

/* Widens the inputs of a HALF or BFLOAT16 Einsum (each term then owns its
 * FLOAT copy) and gives a FLOAT buffer for the output in *wide_out. */
static zf_status_t s_widen_all(zf_kernel_ctx_t *ctx, const s_einsum_t *st, s_labels_t *lb,
                               zf_dtype_t dtype, const zf_tensor_t *out, float **wide_out)
{
    for (int i = 0; i < st->num_inputs; i++) {
        int64_t n = zf_tensor_num_elements(ctx->inputs[i]);
        if (n == 0) continue;
        float *w = malloc((size_t)n * sizeof *w);
        if (!w) return zf_out_of_memory("Einsum widened input");
        s_widen(dtype, zf_tensor_data(ctx->inputs[i]), n, w);
        lb->term[i].data = lb->term[i].owned = w;
    }
    *wide_out = malloc((size_t)zf_tensor_num_elements(out) * sizeof **wide_out);
    return *wide_out ? ZF_STATUS_OK : zf_out_of_memory("Einsum widened output");
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
    if (!(S_TYPES & ZF_TYPE_BIT(dtype)))
        return zf_kernel_error(ctx, ZF_INVALID_ARGUMENT, "no CPU kernel for %s inputs",
                               zf_kernels_dtype_name((int)dtype));
    for (int i = 1; i < st->num_inputs; i++) ZF_TRY(zf_kernels_check_dtype(ctx, i, dtype));
    zf_dtype_t work = dtype == ZF_HALF || dtype == ZF_BFLOAT16 ? ZF_FLOAT : dtype;
    s_labels_t *lb = calloc(1, sizeof *lb + (size_t)st->num_inputs * sizeof lb->term[0]);
    if (!lb) return zf_out_of_memory("Einsum labels");
    zf_status_t s = s_bind_shapes(ctx, st, lb);
    zf_shape_t os = {.rank = lb->out_rank};
    for (int i = 0; i < lb->out_rank; i++) os.dims[i] = lb->size[lb->out[i]];
    zf_tensor_t *out = NULL;
    float *wide_out = NULL;
    if (zf_ok(s)) s = zf_kernel_alloc_output(ctx, 0, dtype, &os, &out);
    bool empty = zf_ok(s) && zf_tensor_num_elements(out) == 0;
    if (zf_ok(s) && !empty && work != dtype) s = s_widen_all(ctx, st, lb, dtype, out, &wide_out);
    void *dst = wide_out ? (void *)wide_out : out ? zf_tensor_data(out) : NULL;
    if (!zf_ok(s) || empty) {
        /* nothing to compute */
    } else if (st->num_inputs >= 2) {
        s = s_contract_all(ctx, st, lb, work, dst);
    } else {
        /* One operand: a transpose, a diagonal and/or a sum. */
        const s_term_t *t = &lb->term[0];
        s_axis_t keep[S_MAX_LABELS], sum[S_MAX_LABELS];
        int nkeep = 0, nsum = 0;
        bool in_out[S_MAX_LABELS] = {false};
        for (int i = 0; i < lb->out_rank; i++) {
            in_out[lb->out[i]] = true;
            s_push(keep, &nkeep, lb, lb->out[i], t->stride);
        }
        for (int l = 0; l < S_MAX_LABELS; l++)
            if (t->has[l] && !in_out[l]) s_push(sum, &nsum, lb, l, t->stride);
        s_ops(work).gather(t->data, keep, nkeep, sum, nsum, dst);
    }
    if (zf_ok(s) && wide_out)
        s_narrow(dtype, wide_out, zf_tensor_num_elements(out), zf_tensor_data(out));
    for (int i = 0; i < st->num_inputs; i++) free(lb->term[i].owned);
    free(wide_out);
    free(lb);
    return s;
}

static const zf_kernel_t s_defs[] = {
    {.op = "Einsum",
     .device_type = "CPU",
     .allowed_types = S_TYPES,
     .flags = ZF_KERNEL_EXPENSIVE,
     .create = s_einsum_create,
     .destroy = free,
     .compute = s_einsum_compute},
};

zf_status_t zf__kernels_register_einsum(void)
{
    return zf__kernels_register_defs(s_defs, (int)(sizeof s_defs / sizeof s_defs[0]));
}
