/* Rendezvous keys: the string a _Send and its _Recv (and a client's feed or
 * fetch) meet by in a step's rendezvous — TensorFlow's
 * Rendezvous::CreateKey and ParseKey. Five fields separated by ';':
 *
 *   src_device;src_incarnation;dst_device;tensor_name;frame_id:iter_id
 *
 * the devices as full names, the incarnation as 16 lower-case hex digits,
 * and the frame and iteration as decimal numbers ("0:0" at the top level,
 * outside every loop). The partitioner makes keys, the executor's _Send,
 * _Recv and data plane read them. */
#ifndef ZF_RENDEZVOUS_KEY_H
#define ZF_RENDEZVOUS_KEY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/status.h"

/* The key of tensor_name from src_device (of src_incarnation) to
 * dst_device at the top level ("0:0"), or in frame frame_id at iteration
 * iter_id. Caller frees; NULL when out of memory. */
char *zf_rendezvous_key(const char *src_device, uint64_t src_incarnation, const char *dst_device,
                        const char *tensor_name);
char *zf_rendezvous_key_in_frame(const char *src_device, uint64_t src_incarnation,
                                 const char *dst_device, const char *tensor_name, uint64_t frame_id,
                                 int64_t iter_id);

/* The frame_id of a while-loop frame instance: the frame named name
 * (len bytes), started in iteration parent_iter of the frame instance
 * parent_id (0 for the root frame, whose id is 0). Every executor that
 * runs a piece of the same loop computes the same id for the same
 * instance, and the ids of the instances of one step differ (a 64-bit
 * hash; never 0). */
uint64_t zf_rendezvous_frame_id(uint64_t parent_id, int64_t parent_iter, const uint8_t *name,
                                size_t len);

/* A parsed key: pointers into the key string with their lengths. */
typedef struct zf_rendezvous_parsed_key {
    const char *src_device;
    size_t src_len;
    uint64_t src_incarnation;
    const char *dst_device;
    size_t dst_len;
    const char *tensor_name;
    size_t name_len;
    uint64_t frame_id;
    int64_t iter_id;
} zf_rendezvous_parsed_key_t;

/* Parses key. INVALID_ARGUMENT "Invalid rendezvous key: <key>" unless it has
 * exactly five fields, non-empty devices and tensor name, an incarnation
 * of 1 to 16 hex digits and a frame:iteration of two decimal numbers. */
zf_status_t zf_rendezvous_key_parse(const char *key, zf_rendezvous_parsed_key_t *out);

/* The source (first field) or destination (third field) device of key, as
 * a pointer into key and its length, without checking the other fields:
 * what the data plane reads on every tensor. False when key has no such
 * field or it is empty. */
bool zf_rendezvous_key_src_device(const char *key, const char **src, size_t *len);
bool zf_rendezvous_key_dst_device(const char *key, const char **dst, size_t *len);

#endif
