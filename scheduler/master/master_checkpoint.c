/* Jobs' checkpoints (SubmitJob.checkpoint_every, checkpoint_dir): the
 * job's variables saved every N steps in TensorFlow's checkpoint format,
 * and restored when a job starts where a checkpoint is.
 *
 * Design note. The scheduler extends the job's session (ExtendSession, as
 * a client would) with a save and a restore sub-graph over every variable
 * of the graph (VariableV2 and Variable through their refs, VarHandleOp
 * through ReadVariableOp and AssignVariableOp), plus the job's step count
 * as one more tensor of the checkpoint ("_zflow_job_step"), so a
 * checkpoint says which step it holds and the scheduler needs no record
 * of its own: another scheduler, after this one is lost, finds the step
 * in the files. Saves alternate between two prefixes, DIR/ckpt-a and
 * DIR/ckpt-b: a save cut short (its process killed between writing the
 * data and the index) leaves the other one whole, and a restore takes the
 * highest step that reads back with its checksums right. A probe (a
 * RestoreV2 of the step alone) reads each one's step; the whole restore
 * then runs on the highest, and on the other when that one's variables do
 * not read back, so the variables are read once when all is well. SaveV2 and
 * RestoreV2 run on a CPU executor the placer picks, so DIR is the
 * executors' (one host, or a shared file system, as TensorFlow's
 * checkpoint directories are). */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/dtype.h"
#include "common/graphdef_io.h"
#include "common/log.h"
#include "common/tensor.h"
#include "common/tensor_proto.h"
#include "scheduler/master/master_internal.h"

#define S_LOG      "master"
#define S_P        "_zflow_ckpt/"
#define S_STEP_KEY "_zflow_job_step"
#define S_MAX_VARS 4096

/* One variable of the job's graph. */
typedef struct {
    const char *name;
    const char *dtype; /* DT_... */
    bool resource;
} s_var_t;

/* Whether name can be written into the extension's text as it is. */
static bool s_plain_name(const char *name)
{
    if (!name || !name[0]) return false;
    for (const char *c = name; *c; c++)
        if (!((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9') ||
              strchr("_./->", *c)))
            return false;
    return true;
}

/* The variables of g into vars (at most S_MAX_VARS). */
static zf_status_t s_variables(const zf_graph_t *g, s_var_t *vars, int *n)
{
    *n = 0;
    for (int i = 0; i < zf_graph_num_nodes(g); i++) {
        const char *op = zf_graph_node_op(g, i);
        bool resource = strcmp(op, "VarHandleOp") == 0;
        if (!resource && strcmp(op, "VariableV2") != 0 && strcmp(op, "Variable") != 0) continue;
        const char *name = zf_graph_node_name(g, i);
        if (!s_plain_name(name))
            return zf_invalid_argument("checkpoint: variable name '%s' has characters a "
                                       "checkpoint key here may not",
                                       name);
        zf_dtype_t dt = ZF_INVALID;
        ZF_TRY(zf_node_attr_type(zf_graph_node_def(g, i), "dtype", &dt));
        if (*n == S_MAX_VARS)
            return zf_invalid_argument("checkpoint: the graph has more than %d variables",
                                       S_MAX_VARS);
        vars[(*n)++] = (s_var_t){name, zf_dtype_enum_name(dt), resource};
    }
    if (*n == 0)
        return zf_invalid_argument("checkpoint_every needs variables to save; the graph has none "
                                   "(VariableV2, Variable or VarHandleOp)");
    return ZF_STATUS_OK;
}

/* "type: A type: B ..." of the variables' dtypes, then the step's. */
static void s_dtype_list(FILE *f, const s_var_t *vars, int n)
{
    for (int i = 0; i < n; i++) fprintf(f, " type: %s", vars[i].dtype);
    fprintf(f, " type: DT_INT64");
}

/* The save and restore sub-graph over vars, as pbtxt. */
static void s_write_extension(FILE *f, const s_var_t *vars, int n)
{
    fprintf(f, "node { name: '" S_P "prefix' op: 'Placeholder'"
               " attr { key: 'dtype' value { type: DT_STRING } } }\n"
               "node { name: '" S_P "step' op: 'Placeholder'"
               " attr { key: 'dtype' value { type: DT_INT64 } } }\n");
    for (int pass = 0; pass < 2; pass++) { /* the keys, then their slices ("": whole) */
        fprintf(f,
                "node { name: '" S_P "%s' op: 'Const' attr { key: 'dtype' value { type: DT_STRING "
                "} } attr { key: 'value' value { tensor { dtype: DT_STRING tensor_shape { dim { "
                "size: %d } }",
                pass ? "slices" : "keys", n + 1);
        for (int i = 0; i < n; i++) fprintf(f, " string_val: '%s'", pass ? "" : vars[i].name);
        fprintf(f, " string_val: '%s' } } } }\n", pass ? "" : S_STEP_KEY);
    }
    for (int i = 0; i < n; i++)
        if (vars[i].resource)
            fprintf(f,
                    "node { name: '" S_P "read/%d' op: 'ReadVariableOp' input: '%s'"
                    " attr { key: 'dtype' value { type: %s } } }\n",
                    i, vars[i].name, vars[i].dtype);
    fprintf(f, "node { name: '" S_P "save' op: 'SaveV2' input: '" S_P "prefix' input: '" S_P
               "keys' input: '" S_P "slices'");
    for (int i = 0; i < n; i++)
        if (vars[i].resource)
            fprintf(f, " input: '" S_P "read/%d'", i);
        else
            fprintf(f, " input: '%s'", vars[i].name);
    fprintf(f, " input: '" S_P "step' attr { key: 'dtypes' value { list {");
    s_dtype_list(f, vars, n);
    fprintf(f, " } } } }\n");
    fprintf(f, "node { name: '" S_P "step_key' op: 'Const' attr { key: 'dtype' value { type: "
               "DT_STRING } } attr { key: 'value' value { tensor { dtype: DT_STRING tensor_shape { "
               "dim { size: 1 } } string_val: '" S_STEP_KEY "' } } } }\n"
               "node { name: '" S_P "step_slice' op: 'Const' attr { key: 'dtype' value { type: "
               "DT_STRING } } attr { key: 'value' value { tensor { dtype: DT_STRING tensor_shape { "
               "dim { size: 1 } } string_val: '' } } } }\n"
               "node { name: '" S_P "probe' op: 'RestoreV2' input: '" S_P "prefix' input: '" S_P
               "step_key' input: '" S_P "step_slice' attr { key: 'dtypes' value { list { type: "
               "DT_INT64 } } } }\n");
    fprintf(f, "node { name: '" S_P "restore' op: 'RestoreV2' input: '" S_P "prefix' input: '" S_P
               "keys' input: '" S_P "slices' attr { key: 'dtypes' value { list {");
    s_dtype_list(f, vars, n);
    fprintf(f, " } } } }\n");
    for (int i = 0; i < n; i++)
        if (vars[i].resource)
            fprintf(f,
                    "node { name: '" S_P
                    "assign/%d' op: 'AssignVariableOp' input: '%s' input: '" S_P
                    "restore:%d' attr { key: 'dtype' value { type: %s } } }\n",
                    i, vars[i].name, i, vars[i].dtype);
        else
            fprintf(f,
                    "node { name: '" S_P "assign/%d' op: 'Assign' input: '%s' input: '" S_P
                    "restore:%d' attr { key: 'T' value { type: %s } } }\n",
                    i, vars[i].name, i, vars[i].dtype);
    fprintf(f, "node { name: '" S_P "restored' op: 'NoOp'");
    for (int i = 0; i < n; i++) fprintf(f, " input: '^" S_P "assign/%d'", i);
    fprintf(f, " }\n");
}

zf_status_t zf__master_ckpt_prepare(zf_master_t *m, const char *session, zf__master_ckpt_t *ck)
{
    zf_status_t st = ZF_STATUS_OK;
    pthread_mutex_lock(&m->mu);
    zf__master_session_t *s = zf__master_session_find(m, session, &st);
    pthread_mutex_unlock(&m->mu);
    if (!s) return st;
    s_var_t *vars = calloc(S_MAX_VARS, sizeof *vars);
    char *text = NULL;
    size_t len = 0;
    int64_t version = 0;
    pthread_mutex_lock(&s->build); /* the graph stays while it is read */
    st = vars ? s_variables(s->graph, vars, &ck->n_vars) : zf_out_of_memory("checkpoint");
    FILE *f = zf_ok(st) ? open_memstream(&text, &len) : NULL;
    if (zf_ok(st) && !f) st = zf_out_of_memory("checkpoint");
    if (f) {
        s_write_extension(f, vars, ck->n_vars);
        if (fclose(f) != 0) st = zf_out_of_memory("checkpoint");
    }
    version = s->graph_version;
    pthread_mutex_unlock(&s->build);
    free(vars);
    pthread_mutex_lock(&m->mu);
    zf__master_session_unref(m, &s);
    pthread_mutex_unlock(&m->mu);
    Tensorflow__GraphDef *ext = NULL;
    if (zf_ok(st)) st = zf_graphdef_read_mem(text, len, ZF_FORMAT_PBTXT, &ext);
    free(text);
    Zflow__ExtendSession es = ZFLOW__EXTEND_SESSION__INIT;
    es.session = (char *)session;
    es.graph = ext;
    es.current_graph_version = version;
    if (zf_ok(st)) st = zf__master_extend_own(m, &es, &version);
    zf_graphdef_free(&ext);
    return zf_status_prefix(st, "checkpoint");
}

/* A NamedTensor feed of t (taken). */
static zf_status_t s_feed(const char *name, zf_tensor_t *t, Zflow__NamedTensor *nt)
{
    zflow__named_tensor__init(nt);
    nt->name = (char *)name;
    zf_status_t st = zf_tensor_to_proto(t, &nt->tensor, true);
    zf_tensor_unref(&t);
    return st;
}

/* Runs one step of the checkpoint sub-graph on session: prefix fed, and
 * the step when step >= 0; fetch (NULL: none) into *out, or target. */
static zf_status_t s_run(zf_master_t *m, const char *session, const char *prefix, int64_t step,
                         const char *fetch, const char *target, int64_t *out)
{
    Zflow__NamedTensor feeds[2];
    Zflow__NamedTensor *fp[2] = {&feeds[0], &feeds[1]};
    zf_tensor_t *t = NULL;
    zf_status_t st = zf_tensor_new_scalar_string(prefix, strlen(prefix), &t);
    if (zf_ok(st))
        st = s_feed(S_P "prefix", t, &feeds[0]);
    else
        zflow__named_tensor__init(&feeds[0]);
    zflow__named_tensor__init(&feeds[1]);
    zf_shape_t scalar = zf_shape_scalar();
    if (zf_ok(st) && step >= 0) st = zf_tensor_new(ZF_INT64, &scalar, &t);
    if (zf_ok(st) && step >= 0) {
        *(int64_t *)zf_tensor_data(t) = step;
        st = s_feed(S_P "step", t, &feeds[1]);
    }
    Zflow__RunStep rs = ZFLOW__RUN_STEP__INIT;
    rs.session = (char *)session;
    rs.n_feeds = step >= 0 ? 2 : 1;
    rs.feeds = fp;
    rs.n_fetches = fetch ? 1 : 0;
    rs.fetches = (char **)&fetch;
    rs.n_targets = target ? 1 : 0;
    rs.targets = (char **)&target;
    Zflow__RunStepReply *r = NULL;
    if (zf_ok(st)) st = zf_master_run_step(m, &rs, &r);
    if (zf_ok(st) && fetch) {
        zf_tensor_t *v = NULL;
        st = r->n_fetches == 1 && r->fetches[0]->tensor
                 ? zf_tensor_from_proto(r->fetches[0]->tensor, &v)
                 : zf_internal("checkpoint: no step came back");
        if (zf_ok(st) && zf_tensor_dtype(v) == ZF_INT64 && zf_tensor_num_elements(v) == 1)
            *out = *(const int64_t *)zf_tensor_data(v);
        else if (zf_ok(st))
            st =
                zf_invalid_argument("checkpoint '%s': its %s is not one int64", prefix, S_STEP_KEY);
        zf_tensor_unref(&v);
    }
    if (r) zflow__run_step_reply__free_unpacked(r, NULL);
    for (int i = 0; i < 2; i++)
        if (feeds[i].tensor) tensorflow__tensor_proto__free_unpacked(feeds[i].tensor, NULL);
    return st;
}

/* DIR/ckpt-a or DIR/ckpt-b into buf. */
static const char *s_prefix(const zf__master_ckpt_t *ck, int which, char *buf, size_t size)
{
    snprintf(buf, size, "%s/ckpt-%c", ck->dir, which ? 'b' : 'a');
    return buf;
}

/* Whether the probe's error says the checkpoint's files are missing or
 * unreadable (so another, or none, is used), rather than that the step
 * could not run (an executor lost, the job cancelled): then the job fails
 * and keeps its checkpoints, instead of starting over and saving over
 * them. The probe only reads, so nothing was assigned either way. */
static bool s_unusable(zf_code_t code)
{
    return code == ZF_NOT_FOUND || code == ZF_DATA_LOSS || code == ZF_INVALID_ARGUMENT ||
           code == ZF_OUT_OF_RANGE || code == ZF_UNIMPLEMENTED;
}

zf_status_t zf__master_ckpt_restore(zf_master_t *m, const char *session, zf__master_ckpt_t *ck,
                                    int64_t *step)
{
    *step = 0;
    char path[4200];
    int64_t steps[2] = {-1, -1};
    for (int which = 0; which < 2; which++) {
        zf_status_t st = s_run(m, session, s_prefix(ck, which, path, sizeof path), -1,
                               S_P "probe:0", NULL, &steps[which]);
        if (!zf_ok(st) && !s_unusable(st.code))
            return zf_status_prefix(st, "reading the step of checkpoint %s", path);
        if (!zf_ok(st) && st.code != ZF_NOT_FOUND)
            zf_log_warn(S_LOG, "checkpoint %s is not used: %s", path, zf_status_msg(&st));
        if (!zf_ok(st)) steps[which] = -1;
        zf_status_clear(&st);
    }
    /* the highest step first; one whose variables do not read back gives
     * way to the other, and with neither the job starts afresh */
    int first = steps[1] > steps[0] ? 1 : 0;
    for (int i = 0; i < 2; i++) {
        int which = i ? 1 - first : first;
        if (steps[which] <= 0) continue;
        zf_status_t st = s_run(m, session, s_prefix(ck, which, path, sizeof path), -1, NULL,
                               S_P "restored", NULL);
        if (zf_ok(st)) {
            *step = steps[which];
            zf_log_info(S_LOG, "restored %s (step %" PRId64 ")", path, *step);
            return ZF_STATUS_OK;
        }
        /* Only bad checksums give way: RestoreV2 fails whole before any
         * variable is assigned. Anything else (a variable the checkpoint
         * no longer matches, an executor lost) may have assigned some
         * variables already, and fails the attempt, checkpoints kept. */
        if (st.code != ZF_DATA_LOSS) return zf_status_prefix(st, "restoring checkpoint %s", path);
        zf_log_warn(S_LOG, "checkpoint %s (step %" PRId64 ") is not used: %s", path, steps[which],
                    zf_status_msg(&st));
        zf_status_clear(&st);
    }
    return ZF_STATUS_OK;
}

zf_status_t zf__master_ckpt_save(zf_master_t *m, const char *session, zf__master_ckpt_t *ck,
                                 int64_t step)
{
    char path[4200];
    s_prefix(ck, (int)((step / ck->every) % 2), path, sizeof path);
    return zf_status_prefix(s_run(m, session, path, step, NULL, S_P "save", NULL),
                            "saving checkpoint %s at step %" PRId64, path, step);
}
