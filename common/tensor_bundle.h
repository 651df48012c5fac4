/* TensorFlow's V2 checkpoints (tensor bundles): reading, writing and
 * merging them, byte-for-byte as TensorFlow's BundleWriter writes them.
 *
 * A bundle at PREFIX is
 * - PREFIX.index: a table in TensorFlow's LevelDB-derived layout (data
 *   blocks of prefix-compressed entries with restart points, each block
 *   followed by a type byte, 0 = uncompressed, and the masked CRC32C of
 *   block and type; a metaindex block; an index block; a 48-byte footer of
 *   two block handles and the magic number 0xdb4775248b80fb57). Its keys
 *   are sorted bytewise. The empty key holds a BundleHeaderProto
 *   (num_shards, endianness, version); every other key is a tensor name
 *   holding a BundleEntryProto (dtype, shape, shard, offset, size and the
 *   masked CRC32C of the tensor's bytes).
 * - PREFIX.data-SSSSS-of-NNNNN: the tensors' bytes, little-endian and
 *   packed; a STRING tensor as every length (varint64), the masked CRC32C of
 *   the lengths (each as a little-endian uint32, or uint64 above 4 GiB),
 *   then every string's bytes.
 * The writer makes one data shard, entries in the order given, uncompressed
 * blocks of up to 256 KiB with a restart every 16 keys, as TensorFlow does;
 * it writes each file under a temporary name and renames it into place.
 *
 * Any dtype with a fixed element size (zf_dtype_size()) and STRING can be
 * stored; RESOURCE and VARIANT tensors are UNIMPLEMENTED, and so are
 * partitioned (sliced) entries, big-endian bundles and Snappy-compressed
 * blocks (which TensorFlow never writes).
 *
 * Reading checks everything: a truncated, corrupt or hostile file gives
 * DATA_LOSS naming the file and what is wrong (bad magic number, block
 * checksum mismatch, bad block handle, an entry that does not parse, a
 * tensor whose checksum or size does not match), never a crash or a read
 * past the bytes. An index above ZF_BUNDLE_MAX_INDEX_BYTES is refused
 * (RESOURCE_EXHAUSTED), and so is a tensor past the allocation limit of
 * common/tensor.h. All functions are thread-safe; a reader may be used by
 * several threads at once. */
#ifndef ZF_TENSOR_BUNDLE_H
#define ZF_TENSOR_BUNDLE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/status.h"
#include "common/tensor.h"

#define ZF_BUNDLE_MAX_INDEX_BYTES ((size_t)1 << 30)

/* The metadata of one tensor of a bundle. */
typedef struct zf_bundle_entry {
    zf_dtype_t dtype;
    zf_shape_t shape; /* fully defined */
    int32_t shard_id;
    int64_t offset;
    int64_t size;
    uint32_t masked_crc32c; /* as stored */
    bool sliced;            /* a partitioned tensor's entry (not readable here) */
} zf_bundle_entry_t;

typedef struct zf_bundle_reader zf_bundle_reader_t;

/* Opens the bundle at prefix: reads and checks PREFIX.index (the data files
 * are read by zf_bundle_reader_lookup()). Errors: NOT_FOUND (or
 * PERMISSION_DENIED) when the index cannot be read, DATA_LOSS for a
 * corrupt one, INVALID_ARGUMENT for a bundle of a newer format version,
 * UNIMPLEMENTED for a big-endian bundle. */
zf_status_t zf_bundle_reader_open(const char *prefix, zf_bundle_reader_t **out);

/* The same over len bytes of an index held in memory (copied); prefix names
 * the data files, and the index in errors. */
zf_status_t zf_bundle_reader_open_index(const char *prefix, const void *index, size_t len,
                                        zf_bundle_reader_t **out);

void zf_bundle_reader_destroy(zf_bundle_reader_t **r);

/* The header's shard count, and the tensor keys in their (sorted) order:
 * key i has *len bytes (NUL-terminated too); borrowed from r. */
int32_t zf_bundle_reader_num_shards(const zf_bundle_reader_t *r);
size_t zf_bundle_reader_num_keys(const zf_bundle_reader_t *r);
const char *zf_bundle_reader_key(const zf_bundle_reader_t *r, size_t i, size_t *len);

/* The entry of key. NOT_FOUND "Key <key> not found in checkpoint";
 * DATA_LOSS for an entry that does not parse or has an invalid shape,
 * dtype or location. */
zf_status_t zf_bundle_reader_entry(const zf_bundle_reader_t *r, const char *key, size_t key_len,
                                   zf_bundle_entry_t *out);

/* Reads the tensor of key from its data file into a new host tensor; caller
 * owns *out. Errors as zf_bundle_reader_entry, and DATA_LOSS when the data
 * file is short or the bytes do not match their checksum, UNIMPLEMENTED for
 * a sliced entry or an unsupported dtype. */
zf_status_t zf_bundle_reader_lookup(const zf_bundle_reader_t *r, const char *key, size_t key_len,
                                    zf_tensor_t **out);

/* Decodes the len bytes an entry points at into a tensor, checking size and
 * checksum; where names the bytes in errors. */
zf_status_t zf_bundle_decode_tensor(const zf_bundle_entry_t *e, const void *bytes, size_t len,
                                    const char *where, zf_tensor_t **out);

/* Writes n host tensors under keys (each non-empty, no two equal) as a
 * bundle at prefix, replacing any there; the parent directory of prefix is
 * created when missing (one level, as TensorFlow does). Errors:
 * INVALID_ARGUMENT for an empty or duplicate key ("Adding duplicate key:
 * <key>"), UNIMPLEMENTED for a dtype that cannot be stored, and the file
 * system's errors naming the file; nothing is left at prefix then. */
zf_status_t zf_bundle_write(const char *prefix, const zf_tstring_t *keys,
                            const zf_tensor_t *const *tensors, size_t n);

/* MergeV2Checkpoints: merges the bundles at prefixes[0..n) into one at
 * dest: renames their data files to dest's shards, writes dest's index and
 * deletes the old indexes. dest's shards are the data files its entries
 * use (TensorFlow counts every source shard, used or not). With allow_missing, a prefix without an
 * index is skipped (but not all of them). Errors: those of zf_bundle_reader_open, INVALID_ARGUMENT
 * for a key two bundles hold ("Duplicate tensor keyed by <key> encountered, when merging prefix:
 * <prefix>") or differing headers, and the file system's. */
zf_status_t zf_bundle_merge(const char *const *prefixes, size_t n, const char *dest,
                            bool allow_missing);

/* "<prefix>.data-<shard, 5 digits>-of-<num_shards, 5 digits>" into buf of
 * cap bytes; false when it does not fit. */
bool zf_bundle_data_filename(const char *prefix, int32_t shard, int32_t num_shards, char *buf,
                             size_t cap);

#endif
