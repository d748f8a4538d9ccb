// A kernel that writes through an address no allocation holds, for the sticky-fault test
// (cuda_sticky_fault_test.cpp): the illegal access poisons the process's CUDA context, as a kernel
// bug or a hardware fault in the field would.
#include <cuda_runtime.h>

#include <cstdint>

namespace {

__global__ void write_through(float* p) {
  *p = 1.0f;
}

}  // namespace

namespace lathe::test {

// Launches the faulting kernel on the default stream and waits for it: returns what the wait
// returns (cudaErrorIllegalAddress on every GPU Lathe supports).
cudaError_t cause_illegal_address() {
  // Far above any allocation and not null (a null write may be reported differently).
  float* bogus = reinterpret_cast<float*>(uintptr_t{0x7f0000000000});
  write_through<<<1, 1>>>(bogus);
  return cudaDeviceSynchronize();
}

}  // namespace lathe::test
