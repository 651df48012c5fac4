/* Batch messages (common/tensor_frame.h, "Batches") written byte by byte
 * from the layout, independently of the codec: for the tests that need a
 * batch the codec would never write (hostile or malformed ones), and to
 * check what it reads against bytes it did not write. */
#ifndef ZF_TESTS_BATCH_TEST_UTIL_H
#define ZF_TESTS_BATCH_TEST_UTIL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The entry flags, as the layout numbers them. */
#define ZF_TEST_BATCH_DEAD       0x01
#define ZF_TEST_BATCH_NEW_PREFIX 0x02

/* A batch being written: its entries, whose end the prefix follows as
 * they grow, then (zf_test_batch_payloads()) its payloads. */
typedef struct {
    uint8_t *bytes;
    size_t len, cap;
    bool sealed; /* the payloads are on: the prefix no longer follows */
} zf_test_batch_t;

/* One entry, every field as it goes on the wire. key_len 0: strlen(key). */
typedef struct {
    uint8_t flags;
    int dtype;
    int rank;
    const int64_t *dims;
    uint8_t prefix;
    const char *key;
    size_t key_len;
    uint16_t plen;
    int64_t step;
    uint64_t len;
} zf_test_batch_entry_t;

/* Starts a batch declaring count entries. */
void zf_test_batch_begin(zf_test_batch_t *b, uint32_t count);

/* Ends the entries: zero bytes to the payloads' alignment, then len bytes
 * of payloads; bytes is then the batch's one frame. len 0: nothing. */
void zf_test_batch_payloads(zf_test_batch_t *b, const void *payloads, size_t len);

/* Appends one entry. */
void zf_test_batch_add(zf_test_batch_t *b, const zf_test_batch_entry_t *e);

/* Appends a live entry of dtype and shape [n] under the whole key (no
 * prefix), declaring len payload bytes. */
void zf_test_batch_vec(zf_test_batch_t *b, const char *key, int64_t step, int dtype, int64_t n,
                       uint64_t len);

/* Appends raw bytes (a truncated or trailing tail). */
void zf_test_batch_raw(zf_test_batch_t *b, const void *bytes, size_t len);

void zf_test_batch_free(zf_test_batch_t *b);

#endif
