#include "engine/model/dummy_gguf.h"

#include <cmath>
#include <cstring>

#include "engine/core/half.h"
#include "engine/core/strings.h"

namespace lathe {
namespace {

struct Named {
  const char* name;
  GgufFileType file_type;
  bool uniform;
  DType base;
};
// The uniform ones take the LM head from Q4_K_M's rules (q6_k).
constexpr Named kNames[] = {
    {"q4_k_m", GgufFileType::kQ4_K_M, false, DType::kQ4_K},
    {"q4_k", GgufFileType::kQ4_K_M, true, DType::kQ4_K},
    {"q4_0", GgufFileType::kQ4_0, false, DType::kQ4_0},
    {"q8_0", GgufFileType::kQ8_0, false, DType::kQ8_0},
    {"q5_k_m", GgufFileType::kQ5_K_M, false, DType::kQ5_K},
    {"q6_k", GgufFileType::kQ6_K, false, DType::kQ6_K},
    {"q4_1", GgufFileType::kQ4_K_M, true, DType::kQ4_1},
    {"q5_0", GgufFileType::kQ4_K_M, true, DType::kQ5_0},
    {"q5_1", GgufFileType::kQ4_K_M, true, DType::kQ5_1},
    {"q2_k", GgufFileType::kQ4_K_M, true, DType::kQ2_K},
    {"q3_k", GgufFileType::kQ4_K_M, true, DType::kQ3_K},
};

// The 16-bit dummy's standard deviation (cpu::make_random_matrix), which the blocks reproduce.
constexpr double kStd = 0.02;

// Root mean square of (q - center) for q uniform over [0, levels).
double rms_of_codes(int levels, double center) {
  const double mean = (levels - 1) / 2.0;
  const double var = (static_cast<double>(levels) * levels - 1) / 12.0;
  return std::sqrt(var + (mean - center) * (mean - center));
}

// Standard deviation of q for q uniform over [0, levels).
double std_of_codes(int levels) {
  return rms_of_codes(levels, (levels - 1) / 2.0);
}

void put_f16(GgufDummyBlock* b, int at, double v) {
  const uint16_t h = f32_to_f16(static_cast<float>(v));
  std::memcpy(b->bytes.data() + at, &h, 2);
}

}  // namespace

std::string dummy_gguf_names() {
  std::string s;
  for (const Named& n : kNames) s += (s.empty() ? "" : ", ") + std::string(n.name);
  return s;
}

std::optional<DummyGguf> parse_dummy_gguf(std::string_view s) {
  for (const Named& n : kNames)
    if (s == n.name) return DummyGguf{n.name, n.file_type, n.uniform, n.base};
  return std::nullopt;
}

Status parse_quantization_option(std::string_view value, bool dummy, OnlineQuant* online,
                                 DummyGguf* gguf) {
  const std::string v(value);
  if (v != online_quant_name(OnlineQuant::kNone) && parse_online_quant(value, online)) return {};
  if (std::optional<DummyGguf> g = parse_dummy_gguf(value)) {
    if (!dummy && g->uniform && g->base != gguf_file_type_base(g->file_type))
      return invalid_argument("--quantization " + v +
                              " gives random weights in GGUF block types and needs --load-format "
                              "dummy; to run a model in " +
                              v + ", load a GGUF file of that type");
    if (!dummy)
      return invalid_argument(
          "--quantization " + v +
          " gives random weights in GGUF block types and needs --load-format dummy; to run a GGUF "
          "model, load its file (`lathe quantize MODEL --scheme " +
          gguf_file_type_name(g->file_type) +
          " --output model.gguf` writes one); a 16-bit checkpoint quantizes at load to fp8, int8 "
          "or int4");
    *gguf = *std::move(g);
    return {};
  }
  return invalid_argument(
      "--quantization must be fp8, int8 or int4 (or, with --load-format dummy, "
      "a GGUF type: " +
      dummy_gguf_names() + "), got '" + v + "'");
}

Result<DType> dummy_gguf_type(const DummyGguf& g, const ModelConfig& c, std::string_view tensor,
                              int64_t layer, int64_t row_length) {
  const bool output = tensor == "output";
  const std::string name = output ? std::string("output.weight")
                                  : strformat("blk.%lld.%.*s.weight", static_cast<long long>(layer),
                                              static_cast<int>(tensor.size()), tensor.data());
  std::optional<DType> t;
  if (g.uniform && !output) {
    t = g.base;
    if (row_length % dtype_info(*t).block_size != 0) t = DType::kF16;
  } else {
    GgufTensorQuery q;
    q.name = name;
    q.row_length = row_length;
    q.layer = layer;
    q.num_layers = c.num_layers;
    q.is_70b = c.num_layers == 80 && c.num_kv_heads < c.num_heads;
    t = gguf_tensor_type(g.file_type, q);
  }
  if (!t.has_value() || !is_quantized(*t))
    return unsupported(strformat(
        "--quantization %s with dummy weights: %s has %lld inputs, which no GGUF block type of %s "
        "divides (k must be a multiple of 32)",
        g.name.c_str(), name.c_str(), static_cast<long long>(row_length), g.name.c_str()));
  return *t;
}

Result<GgufDummyBlock> gguf_dummy_block(DType t) {
  GgufDummyBlock b;
  b.block_bytes = static_cast<int32_t>(dtype_info(t).block_bytes);
  switch (t) {
    case DType::kQ8_0:  // f16 d; i8 qs[32]: x = d * q, q uniform in [-128, 128)
      b.len = 2;
      put_f16(&b, 0, kStd / rms_of_codes(256, 128.0));
      break;
    case DType::kQ4_0:  // f16 d; nibbles: x = d * (q - 8)
      b.len = 2;
      put_f16(&b, 0, kStd / rms_of_codes(16, 8.0));
      break;
    case DType::kQ4_1: {  // f16 d, m; nibbles: x = d * q + m
      const double d = kStd / std_of_codes(16);
      b.len = 4;
      put_f16(&b, 0, d);
      put_f16(&b, 2, -7.5 * d);
      break;
    }
    case DType::kQ2_K: {
      // u8 scales[16] (scale | min << 4, all 1); qs; f16 d, dmin at 80: x = d * q - dmin.
      const double d = kStd / std_of_codes(4);
      b.len = 16;
      for (int i = 0; i < 16; ++i) b.bytes[static_cast<size_t>(i)] = 0x11;
      b.more.offset = 80;
      b.more.len = 4;
      const uint16_t dh = f32_to_f16(static_cast<float>(d)),
                     mh = f32_to_f16(static_cast<float>(1.5 * d));
      std::memcpy(b.more.bytes.data(), &dh, 2);
      std::memcpy(b.more.bytes.data() + 2, &mh, 2);
      break;
    }
    case DType::kQ3_K:
      // hmask; qs; 12 bytes of 6-bit scales at 96, f16 d at 108: every scale 33 (low nibbles 1:
      // bytes 0..7 = 0x11; high bits 2: bytes 8..11 = 0xAA), so x = d * (q3 - 4), q3 in [0, 8).
      b.offset = 96;
      b.len = 14;
      for (int i = 0; i < 8; ++i) b.bytes[static_cast<size_t>(i)] = 0x11;
      for (int i = 8; i < 12; ++i) b.bytes[static_cast<size_t>(i)] = 0xAA;
      put_f16(&b, 12, kStd / rms_of_codes(8, 4.0));
      break;
    case DType::kQ5_0:  // f16 d; qh; qs: x = d * (q5 - 16)
      b.len = 2;
      put_f16(&b, 0, kStd / rms_of_codes(32, 16.0));
      break;
    case DType::kQ5_1: {  // f16 d, m; qh; qs: x = d * q5 + m
      const double d = kStd / std_of_codes(32);
      b.len = 4;
      put_f16(&b, 0, d);
      put_f16(&b, 2, -15.5 * d);
      break;
    }
    case DType::kQ4_K:
    case DType::kQ5_K: {
      // f16 d, dmin; 12 bytes of 6-bit sub-block scales and mins (ggml's get_scale_min_k4): bytes
      // 0..7 = 1 and 8..11 = 0x11 make every scale and min 1, so x = d * q - dmin.
      const int levels = t == DType::kQ4_K ? 16 : 32;
      const double d = kStd / std_of_codes(levels);
      b.len = 16;
      put_f16(&b, 0, d);
      put_f16(&b, 2, d * (levels - 1) / 2.0);
      for (int i = 4; i < 12; ++i) b.bytes[static_cast<size_t>(i)] = 0x01;
      for (int i = 12; i < 16; ++i) b.bytes[static_cast<size_t>(i)] = 0x11;
      break;
    }
    case DType::kQ6_K:  // ql[128]; qh[64]; i8 scales[16]; f16 d: x = d * sc * (q6 - 32), sc = 1
      b.offset = 192;
      b.len = 18;
      for (int i = 0; i < 16; ++i) b.bytes[static_cast<size_t>(i)] = 0x01;
      put_f16(&b, 16, kStd / rms_of_codes(64, 32.0));
      break;
    default:
      return unsupported("GGUF dummy weights: no block template for " + std::string(dtype_name(t)));
  }
  return b;
}

}  // namespace lathe
