/* What the partial-run tests of the service and of the in-process session
 * share: the same scenarios on tests/data/partial_run.pbtxt (r1 = a + b,
 * r2 = r1 * c), run through either API. */
#ifndef ZF_TESTS_PARTIAL_RUN_TEST_UTIL_H
#define ZF_TESTS_PARTIAL_RUN_TEST_UTIL_H

#include "common/status.h"
#include "common/tensor.h"

typedef struct {
    /* A handle for feeds and fetches (names), no targets; fails the test
     * on error. */
    char *(*setup)(const char *const *feeds, int n_feeds, const char *const *fetches,
                   int n_fetches);
    /* The same setup, its error returned (*handle NULL then). */
    zf_status_t (*try_setup)(const char *const *feeds, int n_feeds, const char *const *fetches,
                             int n_fetches, char **handle);
    /* One call: feeds (names and values, unreferenced by the call), fetches
     * into out (NULL: dropped). */
    zf_status_t (*call)(const char *handle, const char *const *feeds, zf_tensor_t **values,
                        int n_feeds, const char *const *fetches, int n_fetches, zf_tensor_t **out);
} zf_test_prun_api_t;

zf_tensor_t *zf_test_prun_scalar(float v);

/* The float in *t, which is dropped. */
float zf_test_prun_take(zf_tensor_t **t);

/* Four handles of one signature open at once, called in turns. */
void zf_test_prun_interleaved(const zf_test_prun_api_t *api);

/* TensorFlow's checks of a call against its setup, in its words; none of
 * them ends the partial run, which completes afterwards. */
void zf_test_prun_checks(const zf_test_prun_api_t *api);

/* A fetch that needs a tensor fed already does not need what computes it:
 * r1 fed, r2 = r1 * c is computable though a and b (which make r1) are
 * still to come; they come with the last call, which nothing then needs. */
void zf_test_prun_fed_cuts(const zf_test_prun_api_t *api);

/* max partial runs open at once (the session's limit), one more refused
 * with RESOURCE_EXHAUSTED and exactly full; the first to complete makes
 * room for another; each completes in one call. */
void zf_test_prun_limit(const zf_test_prun_api_t *api, int max, const char *full);

#endif
