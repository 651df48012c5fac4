/* The master's step names (scheduler/master/master_internal.h): feeds, fetches and
 * targets made canonical, sorted and checked, and a step's plan signature. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/dtype.h"
#include "common/tensor.h"
#include "scheduler/master/master_internal.h"

void zf__master_free_strv(char **v, int n)
{
    for (int i = 0; v && i < n; i++) free(v[i]);
    free(v);
}

int zf__master_cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* "x" -> "x:0". INVALID_ARGUMENT naming what for a malformed name. */
static zf_status_t s_canonical(const char *what, const char *name, char **out)
{
    *out = NULL;
    const char *node = NULL;
    size_t len = 0;
    int port = 0;
    zf_status_t st = zf_tensor_name_parse(name ? name : "", &node, &len, &port);
    if (!zf_ok(st)) return zf_status_prefix(st, "%s '%s'", what, name ? name : "");
    if (port < 0) return zf_invalid_argument("%s '%s' names a control input", what, name);
    size_t cap = len + 16;
    if (!(*out = malloc(cap))) return zf_out_of_memory("master");
    snprintf(*out, cap, "%.*s:%d", (int)len, node, port);
    return ZF_STATUS_OK;
}

void zf__master_names_free(zf__master_names_t *nm)
{
    zf__master_free_strv(nm->feeds, nm->n_feeds);
    zf__master_free_strv(nm->fetches, nm->n_fetches);
    zf__master_free_strv(nm->s_feeds, nm->ns_feeds);
    zf__master_free_strv(nm->s_fetches, nm->ns_fetches);
    zf__master_free_strv(nm->s_targets, nm->ns_targets);
    free(nm->sig);
}

/* Sorted copy of v[0..n) without repeats; a repeat is an error when
 * unique (feeds). */
zf_status_t zf__master_sorted(const char *what, char **v, int n, bool unique, char ***out,
                              int *n_out)
{
    *out = calloc((size_t)n + 1, sizeof **out);
    *n_out = 0;
    if (!*out) return zf_out_of_memory("master");
    for (int i = 0; i < n; i++)
        if (!((*out)[i] = strdup(v[i]))) return zf_out_of_memory("master");
    *n_out = n;
    qsort(*out, (size_t)n, sizeof **out, zf__master_cmp_str);
    int k = 0;
    for (int i = 0; i < n; i++) {
        if (k > 0 && strcmp((*out)[k - 1], (*out)[i]) == 0) {
            zf_status_t st =
                unique ? zf_invalid_argument("%s '%s' is given more than once", what, (*out)[i])
                       : ZF_STATUS_OK;
            free((*out)[i]);
            (*out)[i] = NULL;
            if (!zf_ok(st)) {
                for (int j = i + 1; j < n; j++) free((*out)[j]);
                *n_out = k;
                return st;
            }
            continue;
        }
        (*out)[k++] = (*out)[i];
    }
    *n_out = k;
    return ZF_STATUS_OK;
}

/* "feeds\x1f" "fetches\x1f" "targets\x1f", each name followed by '\x1e'. */
static char *s_signature(const zf__master_names_t *nm)
{
    char **lists[3] = {nm->s_feeds, nm->s_fetches, nm->s_targets};
    int counts[3] = {nm->ns_feeds, nm->ns_fetches, nm->ns_targets};
    size_t len = 4;
    for (int l = 0; l < 3; l++)
        for (int i = 0; i < counts[l]; i++) len += strlen(lists[l][i]) + 1;
    char *sig = malloc(len), *p = sig;
    if (!sig) return NULL;
    for (int l = 0; l < 3; l++) {
        for (int i = 0; i < counts[l]; i++) p += sprintf(p, "%s\x1e", lists[l][i]);
        *p++ = '\x1f';
    }
    *p = '\0';
    return sig;
}

zf_status_t zf__master_names(const Zflow__RunStep *req, zf__master_names_t *nm)
{
    int nf = (int)req->n_feeds, nt = (int)req->n_fetches;
    nm->feeds = calloc((size_t)nf + 1, sizeof *nm->feeds);
    nm->fetches = calloc((size_t)nt + 1, sizeof *nm->fetches);
    if (!nm->feeds || !nm->fetches) return zf_out_of_memory("master");
    nm->n_feeds = nf;
    nm->n_fetches = nt;
    for (int i = 0; i < nf; i++) {
        if (!req->feeds[i]) return zf_invalid_argument("feed %d is empty", i);
        ZF_TRY(s_canonical("feed", req->feeds[i]->name, &nm->feeds[i]));
        if (!req->feeds[i]->tensor && !req->partial_run_setup)
            return zf_invalid_argument("feed '%s' has no tensor", req->feeds[i]->name);
    }
    for (int i = 0; i < nt; i++) ZF_TRY(s_canonical("fetch", req->fetches[i], &nm->fetches[i]));
    ZF_TRY(zf__master_sorted("feed", nm->feeds, nf, true, &nm->s_feeds, &nm->ns_feeds));
    ZF_TRY(zf__master_sorted("fetch", nm->fetches, nt, false, &nm->s_fetches, &nm->ns_fetches));
    for (size_t i = 0; i < req->n_targets; i++)
        if (!req->targets[i] || !req->targets[i][0])
            return zf_invalid_argument("target %zu is empty", i);
    ZF_TRY(zf__master_sorted("target", req->targets, (int)req->n_targets, false, &nm->s_targets,
                             &nm->ns_targets));
    if (nf + nt + (int)req->n_targets == 0)
        return zf_invalid_argument("RunStep names no fetch and no target");
    nm->sig = s_signature(nm);
    return nm->sig ? ZF_STATUS_OK : zf_out_of_memory("master");
}

/* TensorFlow's feed checks, as the in-process session makes them: the
 * graph's dtype and a Placeholder's shape, read off the proto undecoded. */
zf_status_t zf__master_check_feed(const zf_graph_t *g, const char *name,
                                  const Tensorflow__TensorProto *t)
{
    zf_shape_t shape;
    ZF_TRY(zf_shape_from_proto(t->tensor_shape, &shape));
    return zf_graph_check_feed(g, name, (zf_dtype_t)t->dtype, &shape);
}
