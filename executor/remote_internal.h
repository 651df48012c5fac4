/* Test hooks of executor/remote.c: not a public interface. They reach the
 * bookkeeping of held CUDA IPC offers in builds and on machines where no
 * tensor can be exported. */
#ifndef ZF_REMOTE_INTERNAL_H
#define ZF_REMOTE_INTERNAL_H

#include <stdint.h>

#include "common/status.h"
#include "common/tensor.h"
#include "executor/remote.h"

/* Holds tensor (a new reference) as if it had just been offered over IPC
 * to device under key for step_id at held_at_ms (zf_remote_now_ms()'s
 * clock), without sending anything; *id gets the offer's id, which a
 * reply frame may name. It is then released like a real offer: by a reply,
 * zf_remote_cleanup_step() or zf_remote_expire(). Errors: CANCELLED when
 * step_id has ended here (nothing is held), RESOURCE_EXHAUSTED. */
zf_status_t zf__remote_hold_offer(zf_remote_t *r, const char *device, const char *key,
                                  int64_t step_id, zf_tensor_t *tensor, int64_t held_at_ms,
                                  uint64_t *id);

#endif
