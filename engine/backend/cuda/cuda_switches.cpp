#include "engine/backend/cuda/cuda_switches.h"

#include <cstdlib>
#include <string_view>

#include "engine/core/strings.h"

namespace lathe {
namespace {

// An integer in [lo, hi] written as plain digits, else nullopt-like -1 with a warning.
bool parse_int(const char* name, const char* text, int lo, int hi, const char* range, int* out,
               std::vector<std::string>* warnings) {
  const std::string_view s(text);
  if (!s.empty() && s.find_first_not_of("0123456789") == std::string_view::npos && s.size() <= 6) {
    const int v = std::atoi(text);
    if (v >= lo && v <= hi) {
      *out = v;
      return true;
    }
  }
  if (warnings != nullptr) warnings->push_back(strformat("%s=%s ignored (%s)", name, text, range));
  return false;
}

}  // namespace

std::string CudaSwitches::describe() const {
  const CudaSwitches d;
  std::string s;
  auto add = [&](bool differs, const std::string& what) {
    if (!differs) return;
    if (!s.empty()) s += ' ';
    s += what;
  };
  add(own_prefill_attention != d.own_prefill_attention, "attention=own");
  add(decode_attention != d.decode_attention, "decode_attention=split");
  add(decode_split_tokens != d.decode_split_tokens,
      strformat("decode_split_tokens=%d", decode_split_tokens));
  add(decode_split_blocks_per_sm != d.decode_split_blocks_per_sm,
      strformat("decode_split_blocks_per_sm=%d", decode_split_blocks_per_sm));
  add(decode_cluster != d.decode_cluster, strformat("decode_cluster=%d", decode_cluster));
  add(lookahead_max_seqs != d.lookahead_max_seqs, strformat("lookahead=%d", lookahead_max_seqs));
  add(fused != d.fused, fused == FusedDecodeMode::kOff ? "fused=0" : "fused=1");
  add(fused_rope != d.fused_rope, "fused_rope=0");
  add(gemv_epilogues != d.gemv_epilogues, "gemv_epilogues=0");
  add(pdl != d.pdl, "pdl=0");
  add(native_formats != d.native_formats, "native_formats=0");
  add(quant_rows != d.quant_rows, "quant_rows=0");
  add(int4_tiles != d.int4_tiles, "int4_tiles=0");
  add(gguf_repack != d.gguf_repack, "gguf_repack=0");
  add(int4_tiles_max_m != d.int4_tiles_max_m,
      "int4_tiles_max_m=" + std::to_string(int4_tiles_max_m));
  add(int4_gemm_max_m != d.int4_gemm_max_m, "int4_gemm_max_m=" + std::to_string(int4_gemm_max_m));
  add(int4_tile_pairs != d.int4_tile_pairs, "int4_tile_pairs=0");
  add(int4_norm_max_m != d.int4_norm_max_m, "int4_norm_max_m=" + std::to_string(int4_norm_max_m));
  add(int4_stream_max_m != d.int4_stream_max_m,
      "int4_stream_max_m=" + std::to_string(int4_stream_max_m));
  add(int4_stream_stages != d.int4_stream_stages,
      "int4_stream_stages=" + std::to_string(int4_stream_stages));
  add(int4_stream_blocks != d.int4_stream_blocks,
      "int4_stream_blocks=" + std::to_string(int4_stream_blocks));
  add(w8_decode_max_m != d.w8_decode_max_m, "w8_decode_max_m=" + std::to_string(w8_decode_max_m));
  add(w8_decode_blocks != d.w8_decode_blocks,
      "w8_decode_blocks=" + std::to_string(w8_decode_blocks));
  add(int4_stream_fit != d.int4_stream_fit, "int4_stream_fit=0");
  add(kquant_norm != d.kquant_norm, "kquant_norm=1");
  add(fp8_gemm != d.fp8_gemm, "fp8_gemm=0");
  add(fp8_gemm_min_m != d.fp8_gemm_min_m, "fp8_gemm_min_m=" + std::to_string(fp8_gemm_min_m));
  add(fp8_decode_max_k != d.fp8_decode_max_k,
      "fp8_decode_max_k=" + std::to_string(fp8_decode_max_k));
  add(int4_tile_warps != d.int4_tile_warps, "int4_tile_warps=" + std::to_string(int4_tile_warps));
  add(mask_lookup_late != d.mask_lookup_late, "mask_lookup_late=0");
  add(mask_cache != d.mask_cache, "mask_cache=0");
  add(sampler_masks != d.sampler_masks, "sampler_masks=0");
  return s.empty() ? std::string("defaults") : s;
}

CudaSwitches cuda_switches_from_environment(std::vector<std::string>* warnings) {
  CudaSwitches s;
  auto env = [](const char* name) -> const char* {
    const char* v = std::getenv(name);
    return v != nullptr && *v != '\0' ? v : nullptr;
  };
  auto is = [](const char* v, const char* what) { return std::string_view(v) == what; };
  // An integer switch in [lo, hi]; out of range: ignored with a warning.
  auto int_switch = [&](const char* name, int lo, int hi, const char* range, int32_t* out) {
    if (const char* v = env(name)) parse_int(name, v, lo, hi, range, out, warnings);
  };
  if (const char* v = env("LATHE_CUDA_ATTENTION")) s.own_prefill_attention = is(v, "own");
  if (const char* v = env("LATHE_CUDA_DECODE_ATTENTION")) s.decode_attention = !is(v, "split");
  if (const char* v = env("LATHE_CUDA_DECODE_SPLIT_TOKENS")) {
    int t = 0;
    if (parse_int("LATHE_CUDA_DECODE_SPLIT_TOKENS", v, 16, 1 << 20, "a multiple of 16", &t,
                  warnings)) {
      if (t % 16 == 0) {
        s.decode_split_tokens = t;
      } else if (warnings != nullptr) {
        warnings->push_back(
            strformat("LATHE_CUDA_DECODE_SPLIT_TOKENS=%s ignored (a multiple of 16)", v));
      }
    }
  }
  if (const char* v = env("LATHE_CUDA_DECODE_SPLIT_BLOCKS_PER_SM"))
    parse_int("LATHE_CUDA_DECODE_SPLIT_BLOCKS_PER_SM", v, 1, 64, "1 to 64 blocks",
              &s.decode_split_blocks_per_sm, warnings);
  if (const char* v = env("LATHE_CUDA_DECODE_CLUSTER")) {
    int c = -1;
    if (parse_int("LATHE_CUDA_DECODE_CLUSTER", v, 0, 16, "0, or 2 to 16 blocks", &c, warnings)) {
      if (c == 1) {
        if (warnings != nullptr)
          warnings->push_back("LATHE_CUDA_DECODE_CLUSTER=1 ignored (0, or 2 to 16 blocks)");
      } else {
        s.decode_cluster = c;
      }
    }
  }
  if (const char* v = env("LATHE_CUDA_LOOKAHEAD"))
    parse_int("LATHE_CUDA_LOOKAHEAD", v, 0, 256, "0 to 256 sequences", &s.lookahead_max_seqs,
              warnings);
  if (const char* v = env("LATHE_CUDA_FUSED")) {
    if (is(v, "0")) s.fused = FusedDecodeMode::kOff;
    if (is(v, "1")) s.fused = FusedDecodeMode::kForce;
  }
  if (const char* v = env("LATHE_CUDA_FUSED_ROPE")) s.fused_rope = !is(v, "0");
  if (const char* v = env("LATHE_CUDA_GEMV_EPILOGUES")) s.gemv_epilogues = !is(v, "0");
  if (const char* v = env("LATHE_CUDA_PDL")) s.pdl = !is(v, "0");
  if (const char* v = env("LATHE_CUDA_NATIVE_FORMATS")) s.native_formats = !is(v, "0");
  if (const char* v = env("LATHE_CUDA_QUANT_ROWS")) s.quant_rows = !is(v, "0");
  if (const char* v = env("LATHE_CUDA_INT4_TILES")) s.int4_tiles = !is(v, "0");
  if (const char* v = env("LATHE_CUDA_GGUF_REPACK")) s.gguf_repack = !is(v, "0");
  if (const char* v = env("LATHE_CUDA_INT4_TILE_PAIRS")) s.int4_tile_pairs = !is(v, "0");
  int_switch("LATHE_CUDA_INT4_NORM_MAX_M", 0, 8, "0 to 8 rows", &s.int4_norm_max_m);
  int_switch("LATHE_CUDA_INT4_STREAM_MAX_M", 0, 8, "0 to 8 rows", &s.int4_stream_max_m);
  int_switch("LATHE_CUDA_INT4_STREAM_STAGES", 1, 8, "1 to 8 stages", &s.int4_stream_stages);
  int_switch("LATHE_CUDA_INT4_STREAM_BLOCKS", 1, 4, "1 to 4 blocks per multiprocessor",
             &s.int4_stream_blocks);
  int_switch("LATHE_CUDA_W8_DECODE_MAX_M", 0, 4, "0 to 4 rows", &s.w8_decode_max_m);
  int_switch("LATHE_CUDA_W8_DECODE_BLOCKS", 1, 2, "1 or 2 blocks per multiprocessor",
             &s.w8_decode_blocks);
  if (const char* v = env("LATHE_CUDA_INT4_STREAM_FIT")) s.int4_stream_fit = !is(v, "0");
  if (const char* v = env("LATHE_CUDA_KQUANT_NORM")) s.kquant_norm = is(v, "1");
  if (const char* v = env("LATHE_CUDA_FP8_GEMM")) s.fp8_gemm = !is(v, "0");
  int_switch("LATHE_CUDA_FP8_GEMM_MIN_M", 1, 4096, "1 to 4096 rows", &s.fp8_gemm_min_m);
  int_switch("LATHE_CUDA_FP8_DECODE_MAX_K", 0, 1 << 30, "0 to 1073741824 inputs",
             &s.fp8_decode_max_k);
  int_switch("LATHE_CUDA_INT4_TILES_MAX_M", 8, 4096, "8 to 4096 rows", &s.int4_tiles_max_m);
  int_switch("LATHE_CUDA_INT4_GEMM_MAX_M", 8, 65536, "8 to 65536 rows", &s.int4_gemm_max_m);
  if (const char* v = env("LATHE_CUDA_MASK_LOOKUP_LATE")) s.mask_lookup_late = !is(v, "0");
  if (const char* v = env("LATHE_CUDA_MASK_CACHE")) s.mask_cache = !is(v, "0");
  if (const char* v = env("LATHE_CUDA_SAMPLER_MASKS")) s.sampler_masks = !is(v, "0");
  if (const char* v = env("LATHE_CUDA_INT4_TILE_WARPS")) {
    if (is(v, "4") || is(v, "8"))
      s.int4_tile_warps = std::atoi(v);
    else if (warnings != nullptr)
      warnings->push_back(std::string("LATHE_CUDA_INT4_TILE_WARPS=") + v +
                          " ignored (4 or 8 warps)");
  }
  return s;
}

}  // namespace lathe
