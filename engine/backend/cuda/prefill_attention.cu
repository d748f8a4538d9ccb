#include <flashinfer/attention/scheduler.cuh>

#include <exception>
#include <string>

#include "engine/backend/cuda/cuda_common.h"
#include "engine/backend/cuda/flashinfer_dispatch.cuh"
#include "engine/backend/cuda/prefill_attention.h"

namespace lathe::cuda {

namespace {
// FlashInfer's recommended float workspace (split-KV partial outputs) and an int workspace far
// larger than any plan of max_num_batched_tokens tokens needs (work lists of a few thousand tiles).
constexpr int64_t kFloatWorkspaceBytes = int64_t{128} << 20;
constexpr int64_t kIntWorkspaceBytes = int64_t{8} << 20;
}  // namespace

struct PrefillAttention::Impl {
  DType dtype = DType::kBF16;
  int32_t num_heads = 0, num_kv_heads = 0, head_dim = 0, block_size = 0;
  DeviceBuffer float_ws, int_ws;
  PinnedBuffer pinned_int_ws;
  flashinfer::PrefillPlanInfo plan;
  int32_t planned_seqs = 0;
};

bool PrefillAttention::supports(DType dtype, int64_t head_dim, int32_t sliding_window) {
  return is_act_dtype(dtype) && (head_dim == 64 || head_dim == 128) && sliding_window <= 0;
}

Result<std::unique_ptr<PrefillAttention>> PrefillAttention::create(
    DType dtype, int32_t num_heads, int32_t num_kv_heads, int32_t head_dim, int32_t block_size,
    int64_t max_tokens, int32_t max_seqs) {
  if (!supports(dtype, head_dim, 0))
    return unsupported(
        "FlashInfer prefill is instantiated for bf16/f16 with head_dim 64 or 128, not " +
        std::to_string(head_dim));
  (void)max_tokens;
  (void)max_seqs;
  std::unique_ptr<PrefillAttention> p(new PrefillAttention());
  p->impl_ = std::make_unique<Impl>();
  Impl& m = *p->impl_;
  m.dtype = dtype;
  m.num_heads = num_heads;
  m.num_kv_heads = num_kv_heads;
  m.head_dim = head_dim;
  m.block_size = block_size;
  LATHE_RETURN_IF_ERROR(m.float_ws.allocate(kFloatWorkspaceBytes, "FlashInfer float workspace"));
  LATHE_RETURN_IF_ERROR(m.int_ws.allocate(kIntWorkspaceBytes, "FlashInfer int workspace"));
  LATHE_RETURN_IF_ERROR(
      m.pinned_int_ws.allocate(kIntWorkspaceBytes, "FlashInfer page-locked workspace"));
  return std::move(p);
}

PrefillAttention::~PrefillAttention() = default;

int64_t PrefillAttention::device_bytes() const {
  return impl_->float_ws.bytes() + impl_->int_ws.bytes();
}

Status PrefillAttention::plan(const int32_t* qo_indptr_host, const int32_t* kv_indptr_host,
                              int32_t num_seqs, cudaStream_t stream) {
  Impl& m = *impl_;
  const uint32_t total_rows = static_cast<uint32_t>(qo_indptr_host[num_seqs]);
  try {
    const cudaError_t err = flashinfer::PrefillPlan<int32_t>(
        m.float_ws.get(), static_cast<size_t>(m.float_ws.bytes()), m.int_ws.get(),
        m.pinned_int_ws.get(), static_cast<size_t>(m.int_ws.bytes()), m.plan,
        const_cast<int32_t*>(qo_indptr_host), const_cast<int32_t*>(kv_indptr_host), total_rows,
        static_cast<uint32_t>(num_seqs), static_cast<uint32_t>(m.num_heads),
        static_cast<uint32_t>(m.num_kv_heads), static_cast<uint32_t>(m.head_dim),
        static_cast<uint32_t>(m.head_dim), static_cast<uint32_t>(m.block_size),
        /*enable_cuda_graph=*/false,
        /*sizeof_dtype_o=*/2, /*window_left=*/-1, /*fixed_split_size=*/-1,
        /*disable_split_kv=*/false,
        /*num_colocated_ctas=*/0, /*uniform_q_len=*/0, /*fixed_uniform_q_len=*/false, stream,
        /*kv_dtype_bytes=*/2);
    if (err != cudaSuccess) return cuda_error(err, "FlashInfer PrefillPlan");
  } catch (const std::exception& e) {
    return internal_error(std::string("FlashInfer PrefillPlan: ") + e.what());
  }
  m.planned_seqs = num_seqs;
  return Status();
}

namespace {

template <typename T>
cudaError_t run_impl(const flashinfer::PrefillPlanInfo& plan, int32_t num_seqs, int32_t num_heads,
                     int32_t num_kv_heads, int32_t head_dim, int32_t block_size, void* float_ws,
                     void* int_ws, const PrefillRunArgs& a, cudaStream_t stream,
                     cudaError_t (*fn)(fi::Params<T>&, T*, float*, uint32_t, cudaStream_t)) {
  using flashinfer::GetPtrFromBaseOffset;
  flashinfer::paged_kv_t<T, int32_t> paged_kv(
      static_cast<uint32_t>(num_kv_heads), static_cast<uint32_t>(block_size),
      static_cast<uint32_t>(head_dim), static_cast<uint32_t>(num_seqs), flashinfer::QKVLayout::kNHD,
      static_cast<T*>(a.k_cache), static_cast<T*>(a.v_cache), a.kv_indices, a.kv_indptr,
      a.kv_last_page_len);
  fi::Params<T> p(
      static_cast<T*>(const_cast<void*>(a.q)), paged_kv, /*maybe_custom_mask=*/nullptr, a.qo_indptr,
      /*maybe_mask_indptr=*/nullptr, /*maybe_q_rope_offset=*/nullptr, static_cast<T*>(a.out),
      /*lse=*/nullptr, /*maybe_alibi_slopes=*/nullptr, static_cast<uint32_t>(num_heads),
      static_cast<int32_t>(a.q_stride), static_cast<int32_t>(head_dim), /*window_left=*/-1,
      /*logits_soft_cap=*/0.f, a.scale, /*rope_scale=*/1.f, /*rope_theta=*/1e4f);
  p.request_indices = GetPtrFromBaseOffset<int32_t>(int_ws, plan.request_indices_offset);
  p.qo_tile_indices = GetPtrFromBaseOffset<int32_t>(int_ws, plan.qo_tile_indices_offset);
  p.kv_tile_indices = GetPtrFromBaseOffset<int32_t>(int_ws, plan.kv_tile_indices_offset);
  p.o_indptr = GetPtrFromBaseOffset<int32_t>(int_ws, plan.o_indptr_offset);
  p.kv_chunk_size_ptr = GetPtrFromBaseOffset<int32_t>(int_ws, plan.kv_chunk_size_ptr_offset);
  T* tmp_v = nullptr;
  float* tmp_s = nullptr;
  if (plan.split_kv) {
    p.merge_indptr = GetPtrFromBaseOffset<int32_t>(int_ws, plan.merge_indptr_offset);
    tmp_v = GetPtrFromBaseOffset<T>(float_ws, plan.v_offset);
    tmp_s = GetPtrFromBaseOffset<float>(float_ws, plan.s_offset);
  }
  p.padded_batch_size = static_cast<uint32_t>(plan.padded_batch_size);
  p.max_total_num_rows = static_cast<uint32_t>(plan.total_num_rows);
  return fn(p, tmp_v, tmp_s, static_cast<uint32_t>(plan.cta_tile_q), stream);
}

}  // namespace

Status PrefillAttention::run(const PrefillRunArgs& a, cudaStream_t stream) {
  Impl& m = *impl_;
  cudaError_t err = cudaSuccess;
  try {
    if (m.dtype == DType::kBF16) {
      auto fn = m.head_dim == 64 ? &fi::prefill_bf16_64 : &fi::prefill_bf16_128;
      err = run_impl<__nv_bfloat16>(m.plan, m.planned_seqs, m.num_heads, m.num_kv_heads, m.head_dim,
                                    m.block_size, m.float_ws.get(), m.int_ws.get(), a, stream, fn);
    } else {
      auto fn = m.head_dim == 64 ? &fi::prefill_f16_64 : &fi::prefill_f16_128;
      err = run_impl<__half>(m.plan, m.planned_seqs, m.num_heads, m.num_kv_heads, m.head_dim,
                             m.block_size, m.float_ws.get(), m.int_ws.get(), a, stream, fn);
    }
  } catch (const std::exception& e) {
    return internal_error(std::string("FlashInfer prefill attention: ") + e.what());
  }
  if (err != cudaSuccess) return cuda_error(err, "FlashInfer BatchPrefillWithPagedKVCache");
  return check_launch("FlashInfer prefill kernel");
}

}  // namespace lathe::cuda
