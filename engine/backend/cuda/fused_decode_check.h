// The fused batch-1..4 decode path (decode_gemv.h) as CudaModelRunner chooses it at load, and the
// check that keeps a wrong fused kernel out of serving.
//
// Choice (cuda_model_runner_tuning.cpp), per M: first each fused kernel alone on layer 0's weights
// (blocks per multiprocessor; RoPE/KV in the QKV epilogue or not; the final norm in the LM head or
// not); then, because kernels timed alone are not kernels in a graph (run 4: a fused layer 114 us
// alone vs 127 us unfused, yet the fused step 4.88 ms vs 4.29 ms: it lost the overlap that
// programmatic dependent launch gives the unfused kernels), whole decode steps, as CUDA graphs
// from the same kFusedCheckContext-position context, for every valid set of fused projections
// (FusedParts); the fastest set serves, none when the unfused step is fastest.
//
// Check (fused_decode_check.cpp), for every M the timing kept: the fused and the unfused sequence
// run ONE LAYER at a time from identical inputs, on the loaded model's weights and shapes: a
// scratch KV cache holds kFusedCheckContext positions written by an unfused prefill of every layer;
// M one-token sequences follow them. For each layer, both paths start from the same residual rows
// and the same cache contents (restored before each run); compared are the layer's update of the
// residual stream (output - input, after the unfused path's pending down projection is added) and
// the K/V rows the layer writes. The next layer starts from the unfused output. Then the final norm
// and the LM head (when fused) from one hidden state, and, as information only, a whole decode step
// both ways.
//
// Why one layer: both paths round at the same points and differ only in the order of float32 sums,
// but a bf16 rounding that flips by one unit (2^-8) in a normalized input re-rounds thousands of
// outputs downstream, and over 32 layers these flips compound: two correct paths give whole-step
// logits 2-3% apart on the Llama-3.1-8B shape (run 3: 3.1%; a float32/bf16 emulation of the two
// summation orders: 2.8%), the same size as a subtle bug. One layer from identical inputs does not
// compound: the same emulation gives a median of 3.5e-4 and a worst of 4.2e-3 over 224 layer
// samples (Llama-3.1-8B and hidden-1024 shapes), while a RoPE of the other pair style gives
// 0.09-1.2 in every layer and a norm epsilon of 1e-2 gives 0.66 in the first layer (less later, as
// the residual grows). kFusedLayerTolerance sits between: ~5x above the worst rounding seen, 4x
// below the weakest layer of the RoPE fault; the check judges the worst layer.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>

namespace lathe::cuda {

// Relative error a fused layer (its residual update, its K/V rows) and the fused LM head (logits)
// may show against the unfused path from identical inputs.
inline constexpr double kFusedLayerTolerance = 2e-2;
// Context positions before the timed and checked tokens (fewer when max-model-len or the batch
// token budget is smaller): a context where the decode attention splits as it does when it serves
// (docs/gpu-notes.md, run 20: at 32 positions, one split in a cluster of 16, a batch-1 graph step
// took 4217 us against 4108 us at 576 positions on the same machine).
inline constexpr int32_t kFusedCheckContext = 512;

// The outcome of the check at one M.
struct FusedDecodeCheck {
  bool done = false;       // the check ran (the path was a candidate at this M)
  int32_t context = 0;     // positions of context before the checked tokens
  double layer_err = 0;    // worst over layers: ||fused - unfused|| / ||unfused - input||
  int32_t layer = -1;      // ... at this layer
  double kv_err = 0;       // worst over layers: K and V rows the layer wrote, relative
  int32_t kv_layer = -1;   // ... at this layer
  double lm_head_err = 0;  // the fused LM head's logits from one hidden state (0: not fused)
  double step_err = 0;     // a whole decode step's logits (information: compounds over layers)

  bool passed() const {
    return done && layer_err <= kFusedLayerTolerance && kv_err <= kFusedLayerTolerance &&
           lm_head_err <= kFusedLayerTolerance;
  }
};

// Which projections of a layer take the fused kernel; the others run unfused. A fused QKV (norm in
// its prologue) reads the residual stream whole, so it needs the previous layer's down projection
// fused too (its residual-add epilogue); a fused gate/up needs a fused o projection for the same
// reason; the fused LM head (final norm in its prologue) needs a fused down projection.
struct FusedParts {
  bool qkv = false, o = false, gate_up = false, down = false;

  bool any() const { return qkv || o || gate_up || down; }
  bool valid() const { return (!qkv || down) && (!gate_up || o); }
  static FusedParts all() { return {true, true, true, true}; }
  std::string name() const;  // "qkv+o+gate_up+down", "none"
};
// The nine valid sets (FusedParts::valid), none first.
const std::array<FusedParts, 9>& fused_part_sets();

// The fused batch-1..4 path at one M, as measured at load (profile_step): the four projections of
// a layer with their fused neighbours against the unfused sequence (each projection through the
// faster of gemv and cuBLASLt, plus two norms and SwiGLU), then whole steps per FusedParts. Used
// when a set with fused parts gives the fastest step, and checked.
struct FusedDecodeChoice {
  int64_t m = 0;
  bool use = false;  // parts.any(), checked
  FusedParts parts;
  // Whole decode step (graph replay) with `parts` fused and with none, microseconds (0: not timed:
  // LATHE_CUDA_FUSED=1 or a test hook takes every part); `steps`: every set and its time.
  double step_us = 0, step_unfused_us = 0;
  std::string steps;
  double fused_us = 0;    // per layer
  double unfused_us = 0;  // per layer
  // decode_gemv blocks per multiprocessor for qkv, o, gate_up, down, lm_head.
  std::array<int, 5> blocks_per_sm = {1, 1, 1, 1, 1};
  // RoPE and the KV write in the QKV projection's epilogue (no QK norm; LATHE_CUDA_FUSED_ROPE not
  // 0) when faster than the QKV projection followed by qkv_rope_kv (both timed, microseconds).
  bool rope = false;
  double rope_fused_us = 0, rope_unfused_us = 0;
  // The final norm in the LM head's prologue, when faster than the norm kernel + the LM head
  // through the faster of gemv and cuBLASLt (microseconds).
  bool lm_head = false;
  double lm_fused_us = 0, lm_unfused_us = 0;
  FusedDecodeCheck check;
  std::string note;  // why it is not used, when not; the check's figures when used
};

// ||a - b|| / ||b|| over n values; infinity when a value is not finite (or when b is zero and a is
// not).
double fused_relative_error(const float* a, const float* b, size_t n);
// A layer's update compared: ||fused - unfused|| / ||unfused - input|| over n values (same rules).
double fused_update_error(const float* fused, const float* unfused, const float* input, size_t n);

// Test hooks (tests/cuda): read by CudaModelRunner::create, process-wide, default off. A test sets
// them around the creation of a runner so that the check is exercised on purpose.
enum class FusedDecodeFault {
  kNone,
  kRopeStyle,  // fused layers rotate the other pairs (kNeox <-> kInterleaved)
  kNormEps,    // the fused norm prologues (QKV, gate/up) use epsilon 1e-2, not the model's
};
struct FusedDecodeTestHooks {
  // `parts` at every M the kernels fit, untimed (then checked; nothing fused when parts is none).
  bool assume_fused_faster = false;
  FusedParts parts = FusedParts::all();
  FusedDecodeFault fault = FusedDecodeFault::kNone;
};
void set_fused_decode_test_hooks(const FusedDecodeTestHooks& hooks);
FusedDecodeTestHooks fused_decode_test_hooks();

}  // namespace lathe::cuda
