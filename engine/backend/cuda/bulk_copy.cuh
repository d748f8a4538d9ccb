// Hopper's bulk-copy engine (cp.async.bulk, sm_90) with transaction barriers (mbarrier), for
// kernels that stream data into shared memory without holding it in registers while it is in
// flight. Device code only; every function is a no-op below sm_90 (the host never launches such a
// kernel there: current_device_limits().major >= 9 is checked first).
//
// Protocol: a barrier is initialized with an arrival count (mbar_init, then mbar_init_fence and a
// block or warp barrier before any use). A producer thread announces the bytes it is about to
// copy (mbar_arrive_expect_tx, which is also its arrival; mbar_arrive when none) and issues
// the copies (bulk_copy_to_smem), each of which completes its bytes on the barrier. Consumers wait
// for the phase (mbar_wait with the phase's parity: 0 for the first use of a barrier, then
// alternating). A buffer that threads read with ordinary loads is copied into again only after
// those threads have used the values (so their loads have returned) and a warp or block barrier: a
// proxy fence (fence.proxy.async) compiles to MEMBAR.ALL.CTA, which also waits for the issuing
// thread's copies in flight, one memory latency per use (docs/gpu-notes.md, run 71).
#pragma once

#include <cstdint>

#include "engine/backend/cuda/kernel_utils.cuh"

namespace lathe::cuda {

#if defined(__CUDA_ARCH__) && (__CUDA_ARCH__ >= 900)
#define LATHE_BULK_COPY_ARCH 1
#endif

__device__ __forceinline__ void mbar_init(uint64_t* bar, uint32_t count) {
#ifdef LATHE_BULK_COPY_ARCH
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(smem_addr(bar)), "r"(count)
               : "memory");
#endif
}

// Makes the initializations visible to the bulk-copy engine (then a block barrier).
__device__ __forceinline__ void mbar_init_fence() {
#ifdef LATHE_BULK_COPY_ARCH
  asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
#endif
}

// This thread's arrival, with `bytes` more to be completed by copies before the phase ends.
__device__ __forceinline__ void mbar_arrive_expect_tx(uint64_t* bar, uint32_t bytes) {
#ifdef LATHE_BULK_COPY_ARCH
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(smem_addr(bar)),
               "r"(bytes)
               : "memory");
#endif
}

// This thread's arrival with no bytes to wait for.
__device__ __forceinline__ void mbar_arrive(uint64_t* bar) {
#ifdef LATHE_BULK_COPY_ARCH
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(smem_addr(bar)) : "memory");
#endif
}

// Waits until the phase of the given parity has completed (its copies' bytes are visible).
__device__ __forceinline__ void mbar_wait(uint64_t* bar, uint32_t parity) {
#ifdef LATHE_BULK_COPY_ARCH
  const uint32_t addr = smem_addr(bar);
  uint32_t done = 0;
  do {
    asm volatile(
        "{\n"
        ".reg .pred p;\n"
        "mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n"
        "selp.u32 %0, 1, 0, p;\n"
        "}\n"
        : "=r"(done)
        : "r"(addr), "r"(parity)
        : "memory");
  } while (done == 0);
#endif
}

// `bytes` (a multiple of 16; both addresses 16-byte aligned) global -> shared, completed on bar.
__device__ __forceinline__ void bulk_copy_to_smem(void* dst, const void* src, uint32_t bytes,
                                                  uint64_t* bar) {
#ifdef LATHE_BULK_COPY_ARCH
  asm volatile(
      "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];\n" ::
          "r"(smem_addr(dst)),
      "l"(src), "r"(bytes), "r"(smem_addr(bar))
      : "memory");
#endif
}

}  // namespace lathe::cuda
