/* Fake executors for the master's tests (scheduler/master/master.h): in-process
 * executors behind the master's transport interface that run each
 * registered partition with the real engine on a CPU device. Each fake has
 * its own rendezvous table, and a tensor sent to another fake's device is
 * delivered into that fake's table, as the network would: so an abort
 * reaches another partition only through AbortStep. Include after cmocka.h
 * and test_util.h. */
#ifndef ZF_MASTER_TEST_UTIL_H
#define ZF_MASTER_TEST_UTIL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/graphdef_io.h"
#include "common/tensor_proto.h"
#include "common/transport.h"
#include "executor/devices/device.h"
#include "executor/engine/engine.h"
#include "executor/kernels/kernel.h"
#include "executor/rendezvous/rendezvous.h"
#include "executor/kernels/resource.h"
#include "scheduler/master/master.h"
#include "test_util.h"

/* x on CPU:0 goes to CPU:1 for y = x * x, back to CPU:0 for z = -y: z is
 * -x^2, which differs from x unless x is 0 or -1, so a step that handed
 * back its feed (or skipped a partition) shows. */
extern const char *const mt_hop_graph;

#define MAX_FAKES  3
#define MAX_GRAPHS 16

/* ---- fake executors ------------------------------------------------------------ */

typedef struct cluster cluster_t;

typedef struct {
    zf_engine_t *ex;
    char handle[32];
    bool deregistered;
} fake_graph_t;

typedef struct {
    cluster_t *c;
    zf_device_t *device;
    char endpoint[32];
    zf_rendezvous_mgr_t *rmgr;
    fake_graph_t graphs[MAX_GRAPHS];
    int n_graphs;
    /* what it was sent, under c->mu */
    int n_register, n_run, n_abort, n_cleanup, n_deregister;
    atomic_bool hang; /* RunGraph is swallowed: never run, never answered */
    atomic_bool dead;
} fake_t;

typedef struct job {
    fake_t *f;
    Zflow__Envelope *env;
    struct job *next;
} job_t;

struct cluster {
    zf_master_t *m;
    fake_t fakes[MAX_FAKES];
    int n;
    zf_resource_mgr_t *resources;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    job_t *head, *tail;
    bool stop;
    int busy; /* jobs being handled + steps running */
    pthread_t worker;
};

Zflow__Envelope *mt_reply(uint64_t id, Zflow__Envelope__BodyCase body);

Zflow__Status *mt_status(const zf_status_t *st);

/* A step in flight on a fake. */
typedef struct {
    fake_t *f;
    uint64_t request_id;
    zf_rendezvous_t *r;
    char **fetch_keys;
    size_t n_fetch_keys;
} run_t;

Zflow__ExecutorInfo *mt_info(const fake_t *f, Tensorflow__DeviceAttributes *attrs);

cluster_t *mt_cluster(int n, int64_t abort_grace_ms);

/* Waits until no message is queued and no step runs on any fake. */
void mt_quiesce(cluster_t *c);

int mt_count(cluster_t *c, const int *field);

void mt_cluster_destroy(cluster_t *c);

/* ---- one-shot jobs of the counter graph ------------------------------------ */

#define ZF_TEST_COUNTER_GRAPH ZF_TEST_DATA_DIR "/counter.pbtxt"

/* A counter job: init (unless NULL) once, then `count` fetched steps times. */
typedef struct {
    Tensorflow__GraphDef *gd;
    Zflow__CreateSession cs;
    Zflow__RunStep step;
    Zflow__SubmitJob job;
    char *fetches[1], *inits[1];
} zf_test_counter_job_t;

void zf_test_counter_job(zf_test_counter_job_t *cj, int64_t steps, const char *init);

/* What a job's wait callback got: how often, and the last reply (owned). */
typedef struct {
    int calls;
    Zflow__RunStepReply *reply;
} zf_test_job_result_t;

void zf_test_on_job_result(void *arg, Zflow__RunStepReply *reply);

#endif
