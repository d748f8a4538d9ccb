#include "engine/quant/dummy_gguf_file.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <optional>
#include <vector>

#include "engine/core/half.h"
#include "engine/core/strings.h"
#include "engine/core/thread_pool.h"
#include "engine/model/dummy_gguf.h"
#include "engine/model/tensor_names.h"
#include "engine/quant/atomic_output.h"
#include "engine/quant/config_export.h"
#include "engine/quant/gguf_tensor_plan.h"

namespace lathe {
namespace {

// Bytes filled and written at a time (rounded down to whole blocks).
constexpr int64_t kChunkBytes = int64_t{64} << 20;
// Blocks one thread fills at least, per parallel_for chunk.
constexpr int64_t kMinBlocksPerTask = 4096;
constexpr double kStd = 0.02;  // the 16-bit dummy's, as gguf_dummy_block's scales give

uint64_t splitmix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

// Random bytes [begin, end) of a tensor whose stream is keyed by `key`: byte i is byte i % 8 of
// splitmix64(key + i / 8), so the bytes depend on the offset alone.
void random_bytes(uint64_t key, int64_t begin, int64_t end, uint8_t* dst) {
  int64_t i = begin;
  for (; i < end && i % 8 != 0; ++i)
    *dst++ = static_cast<uint8_t>(splitmix64(key + i / 8) >> (8 * (i % 8)));
  for (; i + 8 <= end; i += 8, dst += 8) {
    const uint64_t r = splitmix64(key + i / 8);
    std::memcpy(dst, &r, 8);
  }
  for (; i < end; ++i) *dst++ = static_cast<uint8_t>(splitmix64(key + i / 8) >> (8 * (i % 8)));
}

// How one tensor's elements are made; blocks of `block_bytes` (an element for f32 / f16).
struct Filler {
  DType dtype = DType::kF32;
  int64_t block_bytes = 4;
  std::optional<GgufDummyBlock> block;         // quantized types: the constant bytes of every block
  float constant = 0.f;                        // f32 tensors other than rope_freqs
  const std::vector<float>* values = nullptr;  // rope_freqs: the values themselves
};

// Fills blocks [first, first + n) of the tensor into dst (n * block_bytes bytes).
void fill_blocks(const Filler& f, uint64_t key, int64_t first, int64_t n, uint8_t* dst) {
  const int64_t bb = f.block_bytes;
  if (f.block.has_value()) {
    random_bytes(key, first * bb, (first + n) * bb, dst);
    const GgufDummyBlock& b = *f.block;
    for (int64_t i = 0; i < n; ++i) {
      std::memcpy(dst + i * bb + b.offset, b.bytes.data(), b.len);
      if (b.more.len > 0)
        std::memcpy(dst + i * bb + b.more.offset, b.more.bytes.data(), b.more.len);
    }
  } else if (f.dtype == DType::kF16) {
    // Uniform on [-a, a] with a = sqrt(3) * std.
    const double a = std::sqrt(3.0) * kStd;
    std::vector<uint8_t> r(static_cast<size_t>(2 * n));
    random_bytes(key, first * 2, (first + n) * 2, r.data());
    for (int64_t i = 0; i < n; ++i) {
      uint16_t u = 0;
      std::memcpy(&u, r.data() + 2 * i, 2);
      const uint16_t h = f32_to_f16(static_cast<float>(a * (2.0 * (u + 0.5) / 65536.0 - 1.0)));
      std::memcpy(dst + 2 * i, &h, 2);
    }
  } else {
    for (int64_t i = 0; i < n; ++i) {
      const float v =
          f.values != nullptr ? (*f.values)[static_cast<size_t>(first + i)] : f.constant;
      std::memcpy(dst + 4 * i, &v, 4);
    }
  }
}

Result<Filler> filler_for(const GgufPlannedTensor& t, const std::vector<float>& rope_freqs) {
  Filler f;
  f.dtype = t.spec.dtype;
  if (is_quantized(f.dtype)) {
    LATHE_ASSIGN_OR_RETURN(GgufDummyBlock b, gguf_dummy_block(f.dtype));
    f.block_bytes = b.block_bytes;
    f.block = b;
  } else if (f.dtype == DType::kF16) {
    f.block_bytes = 2;
  } else if (f.dtype == DType::kF32) {
    f.block_bytes = 4;
    if (t.canonical == kGgufRopeFreqs)
      f.values = &rope_freqs;
    else
      f.constant = ends_with(t.canonical, "norm") ? 1.f : 0.f;  // norms 1, biases 0
  } else {
    return unsupported("dummy GGUF file: no random values for " + t.spec.name + " in " +
                       std::string(dtype_name(f.dtype)));
  }
  return f;
}

Status write_tensors(GgufWriter& w, const std::vector<GgufPlannedTensor>& plan,
                     const std::vector<float>& rope_freqs, const DummyGgufFileOptions& o) {
  ThreadPool pool(o.num_threads);
  std::vector<uint8_t> buf;
  for (size_t ti = 0; ti < plan.size(); ++ti) {
    const GgufPlannedTensor& t = plan[ti];
    LATHE_ASSIGN_OR_RETURN(Filler f, filler_for(t, rope_freqs));
    const int64_t total_blocks = t.spec.nbytes() / f.block_bytes;
    const int64_t chunk_blocks = std::max<int64_t>(1, kChunkBytes / f.block_bytes);
    // Each tensor's stream: 2^40 words apart (8 TB), so no two tensors share words.
    const uint64_t key = splitmix64(o.seed) + (static_cast<uint64_t>(ti) << 40);
    for (int64_t first = 0; first < total_blocks; first += chunk_blocks) {
      const int64_t n = std::min(chunk_blocks, total_blocks - first);
      buf.resize(static_cast<size_t>(n * f.block_bytes));
      pool.parallel_for(
          n,
          [&](int64_t b, int64_t e) {
            fill_blocks(f, key, first + b, e - b, buf.data() + b * f.block_bytes);
          },
          kMinBlocksPerTask);
      LATHE_RETURN_IF_ERROR(w.write_part(t.spec.name, buf.data(), buf.size()));
    }
  }
  return Status();
}

}  // namespace

Result<DummyGgufFileReport> write_dummy_gguf_file(const ModelConfig& c, const std::string& path,
                                                  const DummyGgufFileOptions& o) {
  const std::vector<float> rope_freqs = gguf_rope_freq_factors(c);
  std::map<std::string, std::vector<int64_t>> shapes;
  for (const ExpectedTensor& t : expected_tensors(c)) shapes[t.name] = t.shape;
  const std::vector<GgufPlannedTensor> plan = plan_gguf_tensors(
      c, o.file_type, [&](const std::string& n) { return shapes.at(n); },
      static_cast<int64_t>(rope_freqs.size()));

  GgufMetadata metadata = gguf_model_metadata(c);
  for (const auto& [k, v] : o.tokenizer) gguf_set(metadata, k, v);
  gguf_set_quantization_keys(metadata, o.file_type);

  DummyGgufFileReport report;
  std::vector<GgufTensorSpec> specs;
  for (const GgufPlannedTensor& t : plan) {
    const int64_t nb = t.spec.nbytes();
    if (nb < 0)  // gguf_tensor_type falls back to a type that fits every row length
      return internal_error("dummy GGUF file: " + t.spec.name + " does not fit its type");
    report.tensor_bytes += nb;
    if (t.canonical == "token_embd") report.embedding_bytes = nb;
    ++report.type_counts[std::string(dtype_name(t.spec.dtype))];
    specs.push_back(t.spec);
  }
  report.file_bytes = gguf_file_size(metadata, specs);
  if (report.file_bytes < 0) return internal_error("the planned dummy GGUF file is inconsistent");
  std::error_code ec;
  if (!std::filesystem::exists(path, ec) || std::filesystem::is_regular_file(path, ec))
    LATHE_RETURN_IF_ERROR(check_free_space(path, report.file_bytes));  // not for /dev/null

  LATHE_ASSIGN_OR_RETURN(GgufWriter w, GgufWriter::create(path, metadata, std::move(specs)));
  Status s = write_tensors(w, plan, rope_freqs, o);
  if (s.is_ok()) s = w.finish(o.sync);
  if (!s.is_ok()) {  // no partial file under the name; a device such as /dev/null stays
    if (std::filesystem::is_regular_file(path, ec)) std::filesystem::remove(path, ec);
    return s;
  }
  return report;
}

}  // namespace lathe
