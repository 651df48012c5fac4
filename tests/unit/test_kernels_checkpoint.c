/* Tests for executor/kernels/kernels_checkpoint: SaveV2, RestoreV2 and
 * MergeV2Checkpoints run through the kernel registry on temporary
 * directories, with TensorFlow's error codes and texts. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <dirent.h>
#include <unistd.h>

#include "common/graphdef_io.h"
#include "kernel_test_util.h"

typedef struct {
    char *dir;
    char prefix[128];
} s_fixture_t;

static int s_setup(void **state)
{
    s_fixture_t *f = calloc(1, sizeof *f);
    assert_non_null(f);
    f->dir = zf_test_tmpdir("zflow-ckpt");
    snprintf(f->prefix, sizeof f->prefix, "%s/model.ckpt", f->dir);
    *state = f;
    return 0;
}

static int s_teardown(void **state)
{
    s_fixture_t *f = *state;
    zf_test_rm_rf(f->dir);
    free(f->dir);
    free(f);
    return 0;
}

static zf_tensor_t *s_str(const char *v)
{
    return kt_strings(zf_shape_scalar(), &v);
}

static void s_attr_types(Tensorflow__NodeDef *n, const char *key, const zf_dtype_t *types,
                         size_t count)
{
    Tensorflow__AttrValue *v = kt_attr_add(n, key);
    v->value_case = TENSORFLOW__ATTR_VALUE__VALUE_LIST;
    v->list = calloc(1, sizeof *v->list);
    assert_non_null(v->list);
    tensorflow__attr_value__list_value__init(v->list);
    v->list->type = calloc(count ? count : 1, sizeof *v->list->type);
    assert_non_null(v->list->type);
    for (size_t i = 0; i < count; i++) v->list->type[i] = (Tensorflow__DataType)types[i];
    v->list->n_type = count;
}

/* SaveV2 of names[i] = tensors[i] at prefix. */
static zf_status_t s_save(const char *prefix, const char *const *names, zf_tensor_t **tensors,
                          int n)
{
    Tensorflow__NodeDef *node = kt_node_new("save/SaveV2", "SaveV2", 3 + n);
    zf_dtype_t types[8];
    const char *empty[8] = {"", "", "", "", "", "", "", ""};
    assert_true(n <= 8);
    for (int i = 0; i < n; i++) types[i] = zf_tensor_dtype(tensors[i]);
    s_attr_types(node, "dtypes", types, (size_t)n);
    zf_tensor_t *in[11] = {s_str(prefix), kt_strings(ZF_SHAPE(n), names),
                           kt_strings(ZF_SHAPE(n), empty)};
    for (int i = 0; i < n; i++) in[3 + i] = tensors[i];
    zf_status_t s = kt_run(node, in, 3 + n, NULL, 0);
    kt_unref_all(in, 3);
    kt_node_free(&node);
    return s;
}

/* RestoreV2 of names[i] as types[i] (slices[i] when given) into out[i]. */
static zf_status_t s_restore(const char *prefix, const char *const *names,
                             const char *const *slices, const zf_dtype_t *types, int n,
                             zf_tensor_t **out)
{
    Tensorflow__NodeDef *node = kt_node_new("save/RestoreV2", "RestoreV2", 3);
    s_attr_types(node, "dtypes", types, (size_t)n);
    const char *empty[8] = {"", "", "", "", "", "", "", ""};
    zf_tensor_t *in[3] = {s_str(prefix), kt_strings(ZF_SHAPE(n), names),
                          kt_strings(ZF_SHAPE(n), slices ? slices : empty)};
    zf_status_t s = kt_run(node, in, 3, out, n);
    kt_unref_all(in, 3);
    kt_node_free(&node);
    return s;
}

static void test_save_then_restore_gives_every_tensor_back(void **state)
{
    s_fixture_t *f = *state;
    const char *words[] = {"checkpoint", ""};
    zf_tensor_t *ts[] = {KT_F32(ZF_SHAPE(2, 2), 1, 2, 3, 4), KT_F64(zf_shape_scalar(), -0.5),
                         KT_I32(ZF_SHAPE(3), 7, 8, 9),       KT_I64(zf_shape_scalar(), 42),
                         KT_BOOL(ZF_SHAPE(2), true, false),  kt_strings(ZF_SHAPE(2), words),
                         kt_zeros(ZF_FLOAT, ZF_SHAPE(0, 3))};
    const char *names[] = {"dense/kernel", "lr", "ids", "global_step", "mask", "vocab", "none"};
    enum { N = 7 };
    ASSERT_OK(s_save(f->prefix, names, ts, N));
    zf_dtype_t types[N];
    for (int i = 0; i < N; i++) types[i] = zf_tensor_dtype(ts[i]);
    zf_tensor_t *out[N] = {0};
    ASSERT_OK(s_restore(f->prefix, names, NULL, types, N, out));
    for (int i = 0; i < N; i++)
        if (!zf_tensor_equal(out[i], ts[i])) fail_msg("%s changed", names[i]);
    kt_unref_all(out, N);
    /* a subset, in another order */
    const char *some[] = {"vocab", "lr"};
    zf_dtype_t some_types[] = {ZF_STRING, ZF_DOUBLE};
    ASSERT_OK(s_restore(f->prefix, some, NULL, some_types, 2, out));
    assert_true(zf_tensor_equal(out[0], ts[5]));
    assert_true(zf_tensor_equal(out[1], ts[1]));
    kt_unref_all(out, 2);
    kt_unref_all(ts, N);
}

static void test_save_writes_only_the_two_files_under_their_final_names(void **state)
{
    s_fixture_t *f = *state;
    zf_tensor_t *t = KT_F32(ZF_SHAPE(1), 1);
    const char *name = "v";
    ASSERT_OK(s_save(f->prefix, &name, &t, 1));
    ASSERT_OK(s_save(f->prefix, &name, &t, 1)); /* overwrites */
    DIR *d = opendir(f->dir);
    assert_non_null(d);
    int files = 0;
    for (struct dirent *e; (e = readdir(d)) != NULL;) {
        if (e->d_name[0] == '.') continue;
        files++;
        if (strcmp(e->d_name, "model.ckpt.index") != 0 &&
            strcmp(e->d_name, "model.ckpt.data-00000-of-00001") != 0)
            fail_msg("unexpected file %s", e->d_name);
    }
    closedir(d);
    assert_int_equal(files, 2);
    zf_tensor_unref(&t);
}

static void test_restore_errors_are_tensorflows(void **state)
{
    s_fixture_t *f = *state;
    zf_tensor_t *t = KT_F32(ZF_SHAPE(2), 1, 2);
    const char *name = "w";
    ASSERT_OK(s_save(f->prefix, &name, &t, 1));
    zf_tensor_t *out[1] = {0};
    const char *missing = "x";
    zf_dtype_t f32 = ZF_FLOAT, i32 = ZF_INT32;
    zf_test_expect_error(s_restore(f->prefix, &missing, NULL, &f32, 1, out), ZF_NOT_FOUND,
                         "save/RestoreV2 (RestoreV2): Key x not found in checkpoint");
    zf_test_expect_error(s_restore(f->prefix, &name, NULL, &i32, 1, out), ZF_INVALID_ARGUMENT,
                         "tensor_name = w; expected dtype int32 does not equal restored dtype "
                         "float");
    const char *slice = "4 0,2";
    zf_test_expect_error(s_restore(f->prefix, &name, &slice, &f32, 1, out), ZF_UNIMPLEMENTED,
                         "'4 0,2'");
    char other[160];
    snprintf(other, sizeof other, "%s/nothing", f->dir);
    zf_test_expect_error(s_restore(other, &name, NULL, &f32, 1, out), ZF_NOT_FOUND,
                         "nothing.index");
    assert_null(out[0]);
    /* a corrupt index: DATA_LOSS naming it */
    char path[200];
    snprintf(path, sizeof path, "%s.index", f->prefix);
    FILE *fp = fopen(path, "r+b");
    assert_non_null(fp);
    fseek(fp, 3, SEEK_SET);
    fputc(0x5a, fp);
    fclose(fp);
    zf_test_expect_error(s_restore(f->prefix, &name, NULL, &f32, 1, out), ZF_DATA_LOSS, path);
    zf_tensor_unref(&t);
}

static void test_save_and_restore_check_their_inputs(void **state)
{
    s_fixture_t *f = *state;
    zf_tensor_t *t = KT_F32(ZF_SHAPE(1), 1);
    const char *names[] = {"a", "b"};
    /* two names, one tensor */
    Tensorflow__NodeDef *node = kt_node_new("s", "SaveV2", 4);
    zf_dtype_t f32 = ZF_FLOAT;
    s_attr_types(node, "dtypes", &f32, 1);
    const char *empty[] = {"", ""};
    zf_tensor_t *in[4] = {s_str(f->prefix), kt_strings(ZF_SHAPE(2), names),
                          kt_strings(ZF_SHAPE(2), empty), t};
    zf_test_expect_error(kt_run(node, in, 4, NULL, 0), ZF_INVALID_ARGUMENT,
                         "Got 2 tensor names but 1 tensors.");
    const char *slices[] = {"", "2 0,1"};
    zf_tensor_unref(&in[2]);
    in[2] = kt_strings(ZF_SHAPE(2), slices);
    zf_tensor_t *in5[5] = {in[0], in[1], in[2], t, t};
    zf_test_expect_error(kt_run(node, in5, 5, NULL, 0), ZF_UNIMPLEMENTED, "'2 0,1'");
    zf_tensor_unref(&in[0]);
    in[0] = kt_strings(ZF_SHAPE(2), names);
    zf_test_expect_error(kt_run(node, in, 4, NULL, 0), ZF_INVALID_ARGUMENT,
                         "Input prefix should have a single element, got 2 instead.");
    kt_unref_all(in, 3);
    kt_node_free(&node);
    /* RestoreV2: dtypes and names disagree */
    zf_tensor_t *out[2] = {0};
    zf_dtype_t two[] = {ZF_FLOAT, ZF_FLOAT};
    node = kt_node_new("r", "RestoreV2", 3);
    s_attr_types(node, "dtypes", two, 2);
    zf_tensor_t *rin[3] = {s_str(f->prefix), kt_strings(ZF_SHAPE(1), names),
                           kt_strings(ZF_SHAPE(1), empty)};
    zf_test_expect_error(kt_run(node, rin, 3, out, 2), ZF_INVALID_ARGUMENT,
                         "Got 1 tensor names, but 2 expected dtypes.");
    kt_unref_all(rin, 3);
    kt_node_free(&node);
    zf_tensor_unref(&t);
}

static zf_status_t s_merge(const char *const *srcs, int n, const char *dest, bool delete_dirs)
{
    Tensorflow__NodeDef *node = kt_node_new("save/MergeV2Checkpoints", "MergeV2Checkpoints", 2);
    kt_attr_bool(node, "delete_old_dirs", delete_dirs);
    zf_tensor_t *in[2] = {kt_strings(ZF_SHAPE(n), srcs), s_str(dest)};
    zf_status_t s = kt_run(node, in, 2, NULL, 0);
    kt_unref_all(in, 2);
    kt_node_free(&node);
    return s;
}

/* A sharded save as TensorFlow's Saver makes it: each device saves into a
 * temporary directory, then MergeV2Checkpoints joins the pieces. */
static void test_merge_joins_sharded_saves_and_removes_their_directories(void **state)
{
    s_fixture_t *f = *state;
    char tmp[128], p0[160], p1[160], path[200];
    snprintf(tmp, sizeof tmp, "%s/model.ckpt_temp", f->dir);
    snprintf(p0, sizeof p0, "%s/part-00000-of-00002", tmp);
    snprintf(p1, sizeof p1, "%s/part-00001-of-00002", tmp);
    zf_tensor_t *ts[] = {KT_F32(ZF_SHAPE(2), 1, 2), KT_I64(zf_shape_scalar(), 5)};
    const char *n0 = "dense/kernel", *n1 = "global_step";
    ASSERT_OK(s_save(p0, &n0, &ts[0], 1));
    ASSERT_OK(s_save(p1, &n1, &ts[1], 1));
    const char *srcs[] = {p0, p1};
    ASSERT_OK(s_merge(srcs, 2, f->prefix, true));
    const char *names[] = {"global_step", "dense/kernel"};
    zf_dtype_t types[] = {ZF_INT64, ZF_FLOAT};
    zf_tensor_t *out[2] = {0};
    ASSERT_OK(s_restore(f->prefix, names, NULL, types, 2, out));
    assert_true(zf_tensor_equal(out[0], ts[1]));
    assert_true(zf_tensor_equal(out[1], ts[0]));
    kt_unref_all(out, 2);
    snprintf(path, sizeof path, "%s.data-00000-of-00002", f->prefix);
    assert_int_equal(access(path, F_OK), 0);
    assert_int_not_equal(access(tmp, F_OK), 0); /* emptied and removed */
    /* merging again: the sources are gone */
    zf_test_expect_error(s_merge(srcs, 2, f->prefix, true), ZF_NOT_FOUND,
                         "part-00000-of-00002.index");
    kt_unref_all(ts, 2);
}

/* A graph that saves, as tf.train.Saver builds one, then a run of its
 * restore op: the op table's signatures and the kernels through a session. */
static void test_a_session_saves_and_restores_through_the_graph(void **state)
{
    s_fixture_t *f = *state;
    Tensorflow__GraphDef *gd = zf_test_graphdef(
        "node { name: 'prefix' op: 'Placeholder' attr { key: 'dtype' value { type: DT_STRING } } }"
        "node { name: 'names' op: 'Const' attr { key: 'dtype' value { type: DT_STRING } }"
        "  attr { key: 'value' value { tensor { dtype: DT_STRING tensor_shape { dim { size: 2 } }"
        "    string_val: 'w' string_val: 'step' } } } }"
        "node { name: 'slices' op: 'Const' attr { key: 'dtype' value { type: DT_STRING } }"
        "  attr { key: 'value' value { tensor { dtype: DT_STRING tensor_shape { dim { size: 2 } }"
        "    string_val: '' string_val: '' } } } }"
        "node { name: 'w' op: 'Const' attr { key: 'dtype' value { type: DT_FLOAT } }"
        "  attr { key: 'value' value { tensor { dtype: DT_FLOAT tensor_shape { dim { size: 2 } }"
        "    float_val: 0.5 float_val: -2 } } } }"
        "node { name: 'step' op: 'Const' attr { key: 'dtype' value { type: DT_INT64 } }"
        "  attr { key: 'value' value { tensor { dtype: DT_INT64 tensor_shape { } int64_val: 9 } } "
        "} }"
        "node { name: 'save' op: 'SaveV2' input: 'prefix' input: 'names' input: 'slices'"
        "  input: 'w' input: 'step'"
        "  attr { key: 'dtypes' value { list { type: DT_FLOAT type: DT_INT64 } } } }"
        "node { name: 'restore' op: 'RestoreV2' input: 'prefix' input: 'names' input: 'slices'"
        "  attr { key: 'dtypes' value { list { type: DT_FLOAT type: DT_INT64 } } } }");
    zf_local_session_t *s = zf_test_local_session(gd, "cpu:1");
    zf_tensor_t *prefix = s_str(f->prefix), *out[2] = {0};
    const char *feed = "prefix", *target = "save", *fetches[] = {"restore:0", "restore:1"};
    ASSERT_OK(zf_local_session_run(s, &feed, &prefix, 1, NULL, 0, &target, 1, NULL));
    ASSERT_OK(zf_local_session_run(s, &feed, &prefix, 1, fetches, 2, NULL, 0, out));
    KT_EXPECT_NEAR(out[0], ZF_SHAPE(2), 0, 0.5, -2);
    KT_EXPECT_INTS(out[1], zf_shape_scalar(), 9);
    kt_unref_all(out, 2);
    zf_tensor_unref(&prefix);
    zf_local_session_destroy(&s);
    zf_graphdef_free(&gd);
}

int main(void)
{
    zf_kernels_register_builtin(false);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_save_then_restore_gives_every_tensor_back, s_setup,
                                        s_teardown),
        cmocka_unit_test_setup_teardown(test_save_writes_only_the_two_files_under_their_final_names,
                                        s_setup, s_teardown),
        cmocka_unit_test_setup_teardown(test_restore_errors_are_tensorflows, s_setup, s_teardown),
        cmocka_unit_test_setup_teardown(test_save_and_restore_check_their_inputs, s_setup,
                                        s_teardown),
        cmocka_unit_test_setup_teardown(
            test_merge_joins_sharded_saves_and_removes_their_directories, s_setup, s_teardown),
        cmocka_unit_test_setup_teardown(test_a_session_saves_and_restores_through_the_graph,
                                        s_setup, s_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
