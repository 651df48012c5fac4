/* bench/extend: ExtendSession of 1k nodes onto a session of a 100k-node
 * graph, against creating a session of the whole 101k-node graph again
 * (what a client without ExtendSession does), in the same run. Both are
 * timed as the scheduler serves them from the wire: the request unpacked
 * from its bytes, then zf_master_create_session or zf_master_extend_session
 * (a master without executors: neither places anything). The client's
 * packing and the network would add to the CreateSession side only.
 * Graph: a chain of Identity nodes from one Const. Times are best of reps. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench/bench_util.h"
#include "scheduler/master/master.h"

#define BASE  100000
#define EXTRA 1000

static zf_status_t s_send(void *arg, const char *device, const char *endpoint,
                          const Zflow__Envelope *env)
{
    (void)arg;
    (void)device;
    (void)endpoint;
    (void)env;
    return zf_status_new(ZF_UNAVAILABLE, "no executors in this benchmark");
}

static void s_check(zf_status_t s, const char *what)
{
    zf_bench_check("extend", what, s);
}

/* Nodes [from, to) of the chain: n<from> ... ; n0 is the Const. */
static Tensorflow__GraphDef *s_chain(int from, int to)
{
    Tensorflow__GraphDef *gd = calloc(1, sizeof *gd);
    tensorflow__graph_def__init(gd);
    gd->node = calloc((size_t)(to - from), sizeof *gd->node);
    for (int i = from; i < to; i++) {
        Tensorflow__NodeDef *n = calloc(1, sizeof *n);
        tensorflow__node_def__init(n);
        n->name = malloc(16);
        snprintf(n->name, 16, "n%d", i);
        Tensorflow__NodeDef__AttrEntry *e = calloc(1, sizeof *e);
        Tensorflow__AttrValue *v = calloc(1, sizeof *v);
        tensorflow__node_def__attr_entry__init(e);
        tensorflow__attr_value__init(v);
        v->value_case = TENSORFLOW__ATTR_VALUE__VALUE_TYPE;
        v->type = TENSORFLOW__DATA_TYPE__DT_FLOAT;
        e->key = strdup(i == 0 ? "dtype" : "T");
        e->value = v;
        n->attr = calloc(1, sizeof *n->attr);
        n->attr[0] = e;
        n->n_attr = 1;
        if (i == 0) {
            n->op = strdup("Const");
        } else {
            n->op = strdup("Identity");
            n->input = calloc(1, sizeof *n->input);
            n->input[0] = malloc(16);
            snprintf(n->input[0], 16, "n%d", i - 1);
            n->n_input = 1;
        }
        gd->node[gd->n_node++] = n;
    }
    return gd;
}

/* msg packed into *len bytes. */
static uint8_t *s_pack(const ProtobufCMessage *msg, size_t *len)
{
    *len = protobuf_c_message_get_packed_size(msg);
    uint8_t *buf = malloc(*len + 1);
    if (!buf) exit(1);
    protobuf_c_message_pack(msg, buf);
    return buf;
}

int main(void)
{
    int reps = zf_bench_reps(5);
    zf_master_transport_t t = {s_send, NULL};
    zf_master_t *m = NULL;
    s_check(zf_master_new(&t, NULL, &m), "master");

    Tensorflow__GraphDef *base = s_chain(0, BASE), *whole = s_chain(0, BASE + EXTRA),
                         *extra = s_chain(BASE, BASE + EXTRA);
    Zflow__CreateSession cs = ZFLOW__CREATE_SESSION__INIT;
    cs.graph = whole;
    size_t whole_len = 0;
    uint8_t *whole_bytes = s_pack(&cs.base, &whole_len);

    double create = 1e30, extend = 1e30;
    for (int r = 0; r < reps; r++) {
        /* the whole graph again: unpack, create */
        double t0 = zf_bench_now();
        Zflow__CreateSession *req = zflow__create_session__unpack(NULL, whole_len, whole_bytes);
        char *id = NULL;
        s_check(req ? zf_master_create_session(m, req, &id) : zf_internal("unpack"), "create");
        double t1 = zf_bench_now();
        create = zf_bench_min(create, t1 - t0);
        zflow__create_session__free_unpacked(req, NULL);
        s_check(zf_master_close_session(m, id), "close");
        free(id);

        /* a session of the base graph, then the extension: unpack, extend */
        Zflow__CreateSession bs = ZFLOW__CREATE_SESSION__INIT;
        bs.graph = base;
        s_check(zf_master_create_session(m, &bs, &id), "create base");
        Zflow__ExtendSession es = ZFLOW__EXTEND_SESSION__INIT;
        es.session = id;
        es.graph = extra;
        size_t ext_len = 0;
        uint8_t *ext_bytes = s_pack(&es.base, &ext_len);
        int64_t version = 0;
        t0 = zf_bench_now();
        Zflow__ExtendSession *ereq = zflow__extend_session__unpack(NULL, ext_len, ext_bytes);
        s_check(ereq ? zf_master_extend_session(m, ereq, &version) : zf_internal("unpack"),
                "extend");
        t1 = zf_bench_now();
        extend = zf_bench_min(extend, t1 - t0);
        zflow__extend_session__free_unpacked(ereq, NULL);
        free(ext_bytes);
        s_check(zf_master_close_session(m, id), "close base");
        free(id);
    }
    printf("ExtendSession of %d nodes onto %d: %.2f ms; CreateSession of all %d again: %.2f ms; "
           "ratio %.3fx (best of %d)\n",
           EXTRA, BASE, extend * 1e3, BASE + EXTRA, create * 1e3, extend / create, reps);
    free(whole_bytes);
    tensorflow__graph_def__free_unpacked(base, NULL);
    tensorflow__graph_def__free_unpacked(whole, NULL);
    tensorflow__graph_def__free_unpacked(extra, NULL);
    zf_master_destroy(&m);
    return 0;
}
