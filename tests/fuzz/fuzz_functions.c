/* Fuzz target for scheduler/graph/functions.h: reads the input as a GraphDef
 * (binary or text, as sniffed), inlines its functions and lowers its
 * functional control flow, and builds a graph of the result. A refusal must
 * carry a message and leave no result; a result must carry no function its
 * nodes call; the reachable part of the input's library must be a subset of
 * it. Any crash, leak, hang or broken invariant is a finding. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/graph.h"
#include "common/graphdef_io.h"
#include "scheduler/graph/functions.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void s_check(bool cond)
{
    if (!cond) abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    Tensorflow__GraphDef *gd = NULL, *out = NULL;
    zf_status_t s = zf_graphdef_read_mem(data, size, ZF_FORMAT_AUTO, &gd);
    if (!zf_ok(s)) {
        zf_status_clear(&s);
        return 0;
    }
    Tensorflow__FunctionDefLibrary *reach = NULL;
    s = zf_functions_reachable(gd->library, gd->node, gd->n_node, &reach);
    s_check(zf_ok(s));
    s_check(!reach || (gd->library && reach->n_function <= gd->library->n_function));
    if (reach) protobuf_c_message_free_unpacked(&reach->base, NULL);
    s = zf_functions_lower(gd, &out);
    if (!zf_ok(s)) {
        s_check(out == NULL && zf_status_msg(&s)[0] != '\0');
        zf_status_clear(&s);
    } else if (out) {
        s_check(!zf_functions_needed(out) || out->library || out->n_node > 0);
        for (size_t i = 0; i < out->n_node; i++) {
            const char *op = out->node[i]->op;
            s_check(strcmp(op, "_Arg") != 0 && strcmp(op, "_Retval") != 0);
            s_check(strcmp(op, "PartitionedCall") != 0 && strcmp(op, "If") != 0 &&
                    strcmp(op, "While") != 0 && strcmp(op, "Case") != 0);
        }
        zf_graph_t *g = NULL;
        s = zf_graph_new_from_graphdef(out, &g);
        if (zf_ok(s))
            zf_graph_adopt_graphdef(g, &out);
        else
            s_check(g == NULL && zf_status_msg(&s)[0] != '\0');
        zf_status_clear(&s);
        zf_graph_destroy(&g);
        if (out) protobuf_c_message_free_unpacked(&out->base, NULL);
    } else {
        s_check(!zf_functions_needed(gd));
    }
    tensorflow__graph_def__free_unpacked(gd, NULL);
    return 0;
}
