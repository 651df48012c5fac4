/* The Send/Recv kernel family: _Send, _Recv, _HostSend and _HostRecv, which
 * move a tensor across a cut edge (or to and from the client) through the
 * step's rendezvous.
 *
 * Each node's key, zf_rendezvous_key(send_device, send_device_incarnation,
 * recv_device, tensor_name), is built once when its partition is
 * registered. _Send hands its input (and its deadness) to the rendezvous
 * and never blocks; _Recv is asynchronous: it completes when the value
 * arrives, or with the rendezvous' abort status. */
#ifndef ZF_KERNELS_SENDRECV_H
#define ZF_KERNELS_SENDRECV_H

/* Registers the CPU kernels of the family. Idempotent and thread-safe;
 * zf_kernels_register_builtin() calls it. Registration failures are logged
 * (the placer then reports the ops as having no kernel). */
void zf_kernels_register_sendrecv(void);

#endif
