/* Fuzz target for common/tensor_bundle: the input is a checkpoint in one
 * piece, a 4-byte little-endian length n, then n bytes of .index and the
 * rest as the data file (an input too short for the length is all index,
 * with no data). Any input must open or fail cleanly; every entry of an
 * index that opens must decode or fail cleanly from the data, and a tensor
 * that decodes must write back into a bundle that reads as an equal
 * tensor. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/tensor_bundle.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void s_check(bool cond, const char *what)
{
    if (!cond) {
        fprintf(stderr, "fuzz_tensor_bundle: %s\n", what);
        abort();
    }
}

/* Writes t under key to a temporary bundle and reads it back. */
static void s_round_trip(const char *key, size_t key_len, const zf_tensor_t *t)
{
    char dir[] = "/tmp/zflow-fuzz-bundle-XXXXXX";
    if (!mkdtemp(dir)) return;
    char prefix[64], index[80], shard[96];
    snprintf(prefix, sizeof prefix, "%s/b", dir);
    snprintf(index, sizeof index, "%s.index", prefix);
    zf_bundle_data_filename(prefix, 0, 1, shard, sizeof shard);
    zf_tstring_t k = {key_len, (char *)key};
    zf_status_t s = zf_bundle_write(prefix, &k, &t, 1);
    s_check(zf_ok(s), "a decoded tensor failed to write");
    zf_bundle_reader_t *r = NULL;
    s = zf_bundle_reader_open(prefix, &r);
    s_check(zf_ok(s), "a written bundle failed to open");
    zf_tensor_t *back = NULL;
    s = zf_bundle_reader_lookup(r, key, key_len, &back);
    s_check(zf_ok(s), "a written tensor failed to read back");
    s_check(zf_tensor_equal(t, back), "round trip changed the tensor");
    zf_tensor_unref(&back);
    zf_bundle_reader_destroy(&r);
    unlink(index);
    unlink(shard);
    rmdir(dir);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    zf_buffer_set_alloc_limit((size_t)64 << 20);
    size_t index_len = size, data_off = size;
    if (size >= 4) {
        size_t n =
            (size_t)data[0] | (size_t)data[1] << 8 | (size_t)data[2] << 16 | (size_t)data[3] << 24;
        if (n <= size - 4) {
            index_len = n;
            data_off = 4 + n;
        }
    }
    const uint8_t *index = data_off == size && index_len == size ? data : data + 4;
    const uint8_t *bytes = data + data_off;
    size_t bytes_len = size - data_off;
    zf_bundle_reader_t *r = NULL;
    zf_status_t s = zf_bundle_reader_open_index("/nonexistent/fuzz", index, index_len, &r);
    if (!zf_ok(s)) {
        zf_status_clear(&s);
        return 0;
    }
    int round_trips = 0;
    for (size_t i = 0; i < zf_bundle_reader_num_keys(r); i++) {
        size_t key_len = 0;
        const char *key = zf_bundle_reader_key(r, i, &key_len);
        zf_bundle_entry_t e;
        s = zf_bundle_reader_entry(r, key, key_len, &e);
        if (!zf_ok(s) || e.shard_id != 0 || (uint64_t)e.offset > bytes_len ||
            (uint64_t)e.size > bytes_len - (uint64_t)e.offset) {
            zf_status_clear(&s);
            continue;
        }
        zf_tensor_t *t = NULL;
        s = zf_bundle_decode_tensor(&e, bytes + e.offset, (size_t)e.size, key, &t);
        if (!zf_ok(s)) {
            zf_status_clear(&s);
            continue;
        }
        if (round_trips++ < 2) s_round_trip(key, key_len, t);
        zf_tensor_unref(&t);
    }
    zf_bundle_reader_destroy(&r);
    return 0;
}
