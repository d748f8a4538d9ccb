// compressed-tensors checkpoints (llm-compressor's output, as vLLM loads it; QUANT.md).
//
// Config: quant_method "compressed-tensors", format (per checkpoint, or per config group in newer
// files; "mixed-precision" at the top then), config_groups {name: {targets, weights,
// input_activations, format}}, ignore (module names or "re:<regex>"), kv_cache_scheme,
// sparsity_config. A module takes the first group whose target names it ("re:" regexes and exact
// names first, then a class name such as "Linear"), as vLLM's find_matched_target; ignored and
// unmatched modules stay dense.
//
// Formats read, per module:
//   pack-quantized                int weights (4 or 8 bits, symmetric or not, group or channel
//                                 strategy, optional act-order weight_g_idx): weight_packed,
//                                 weight_scale, weight_zero_point, weight_g_idx, weight_shape
//                                 (IntLayout::kCompressedTensors)
//   naive-quantized, int-quantized  int8 weight + weight_scale (tensor, channel or group;
//                                 symmetric) (IntLayout::kInt8Rows)
//   float-quantized, naive-quantized  FP8 E4M3 weight + weight_scale (tensor, channel, or block
//                                 with block_structure), input_scale when activations are static
//   dense                         the plain weight
// Activation quantization (input_activations) is a kernel choice of the GPU; the CPU reference
// computes with float activations (weight_dequant.h).
#include <cstdlib>
#include <cstring>

#include <nlohmann/json.hpp>

#include "engine/core/log.h"
#include "engine/core/strings.h"
#include "engine/model/weight_scheme.h"

namespace lathe {
namespace {

using json = nlohmann::ordered_json;
using namespace scheme_detail;

struct WeightArgs {
  int bits = 8;
  std::string type = "int";  // int | float
  bool symmetric = true;
  std::string strategy = "tensor";  // tensor | channel | group | block
  int64_t group_size = 0;
  int64_t block_rows = 0, block_cols = 0;
};

struct Group {
  std::string name;
  std::string format;  // resolved: the group's own, else the checkpoint's
  WeightArgs weights;
  bool quantized = true;  // false: the group has no weight quantization
};

Status parse_block_structure(const json& b, const std::string& where, WeightArgs* a) {
  if (b.is_array() && b.size() == 2 && b[0].is_number_integer() && b[1].is_number_integer()) {
    a->block_rows = b[0].get<int64_t>();
    a->block_cols = b[1].get<int64_t>();
  } else if (b.is_string()) {  // older files: "128x128"
    const std::vector<std::string> p = split(b.get<std::string>(), 'x');
    if (p.size() == 2) {
      a->block_rows = std::atoll(p[0].c_str());
      a->block_cols = std::atoll(p[1].c_str());
    }
  }
  if (a->block_rows <= 0 || a->block_cols <= 0)
    return corrupt_file(where + ": block_structure must be [rows, cols], got " + b.dump());
  return Status();
}

Status parse_weight_args(const json& w, const std::string& where, WeightArgs* a) {
  if (!w.is_object()) return corrupt_file(where + ": weights must be an object");
  if (const auto it = w.find("num_bits"); it != w.end() && it->is_number_integer())
    a->bits = it->get<int>();
  if (const auto it = w.find("type"); it != w.end() && it->is_string()) a->type = *it;
  if (const auto it = w.find("symmetric"); it != w.end() && it->is_boolean()) a->symmetric = *it;
  if (const auto it = w.find("strategy"); it != w.end() && it->is_string()) a->strategy = *it;
  if (const auto it = w.find("group_size"); it != w.end() && it->is_number_integer())
    a->group_size = it->get<int64_t>();
  if (const auto it = w.find("block_structure"); it != w.end() && !it->is_null())
    LATHE_RETURN_IF_ERROR(parse_block_structure(*it, where, a));
  if (a->type != "int" && a->type != "float")
    return unsupported(where + ": weights of type '" + a->type +
                       "' are not supported (int, float)");
  if (a->strategy == "group" && a->group_size <= 0)
    return corrupt_file(where + ": strategy \"group\" needs a positive group_size");
  if (a->strategy == "block" && a->block_rows <= 0)
    return corrupt_file(where + ": strategy \"block\" needs a block_structure");
  return Status();
}

class CompressedTensorsScheme final : public WeightScheme {
 public:
  const char* name() const override { return "compressed-tensors"; }
  std::string description() const override {
    std::string s = "compressed-tensors";
    for (const Group& g : groups_) {
      if (!g.quantized) continue;
      s += strformat(" [%s: %s%d %s, %s]", g.name.c_str(), g.weights.type.c_str(), g.weights.bits,
                     g.weights.strategy.c_str(), g.format.c_str());
    }
    if (!ignore_.empty()) s += strformat(", %zu ignored", ignore_.size());
    return s;
  }

  Status init(const CheckpointQuant& q) {
    source_ = q.source;
    const json j = json::parse(q.config_json);
    std::string top_format = "dense";
    if (const auto f = j.find("format"); f != j.end() && f->is_string()) top_format = *f;
    if (const auto s = j.find("sparsity_config"); s != j.end() && s->is_object() && !s->empty()) {
      const auto f = s->find("format");
      if (f != s->end() && f->is_string() && *f != "dense")
        return unsupported(source_ + ": sparse compressed-tensors checkpoints (sparsity_config " +
                           "format " + f->dump() + ") are not supported");
    }
    if (const auto kv = j.find("kv_cache_scheme"); kv != j.end() && !kv->is_null())
      log_warning(source_ +
                  ": kv_cache_scheme is not applied; Lathe keeps the KV cache in its own type");
    const auto groups = j.find("config_groups");
    if (groups == j.end() || !groups->is_object() || groups->empty())
      return corrupt_file(source_ + ": a compressed-tensors config needs config_groups");
    for (const auto& [gname, g] : groups->items()) {
      const std::string where = source_ + " config_groups." + gname;
      if (!g.is_object()) return corrupt_file(where + " must be an object");
      Group group;
      group.name = gname;
      group.format = top_format;
      if (const auto f = g.find("format"); f != g.end() && f->is_string()) group.format = *f;
      const auto w = g.find("weights");
      if (w == g.end() || w->is_null()) {
        group.quantized = false;
      } else {
        LATHE_RETURN_IF_ERROR(parse_weight_args(*w, where + ".weights", &group.weights));
        LATHE_RETURN_IF_ERROR(check_format(group, where));
      }
      const auto t = g.find("targets");
      if (t == g.end() || !t->is_array() || t->empty())
        return corrupt_file(where + ": targets must be a list of module names or classes");
      for (const json& target : *t) {
        if (!target.is_string()) return corrupt_file(where + ": targets must be strings");
        targets_.emplace_back(target.get<std::string>(), groups_.size());
      }
      groups_.push_back(std::move(group));
    }
    if (const auto ig = j.find("ignore"); ig != j.end() && !ig->is_null()) {
      if (!ig->is_array()) return corrupt_file(source_ + ": ignore must be a list");
      for (const json& s : *ig) {
        if (!s.is_string()) return corrupt_file(source_ + ": ignore must list module names");
        ignore_.push_back(s.get<std::string>());
      }
    }
    return Status();
  }

  Result<WeightMatrix> matrix(const WeightStore& store, const std::string& name, int64_t n,
                              int64_t k) const override {
    const std::string module = hf_module_name(name);
    LATHE_ASSIGN_OR_RETURN(const Group* g, group_of(module));
    if (g == nullptr || !g->quantized || g->format == "dense")
      return dense_matrix(store, name, n, k, "compressed-tensors");
    const WeightArgs& a = g->weights;
    WeightMatrix m = quantized_matrix(name, WeightFormat::kInt, DType::kI32, n, k, TensorView{});
    WeightQuant& q = m.quant;
    q.bits = a.bits;
    q.symmetric = a.symmetric;
    q.scales = part(store, name, "weight_scale");
    if (a.strategy == "group") {
      q.granularity = ScaleGranularity::kGroup;
      q.group_size = static_cast<int32_t>(a.group_size);
    } else if (a.strategy == "channel") {
      q.granularity = ScaleGranularity::kChannel;
    } else if (a.strategy == "tensor") {
      q.granularity = ScaleGranularity::kTensor;
    } else {
      q.granularity = ScaleGranularity::kBlock;
      q.block_rows = static_cast<int32_t>(a.block_rows);
      q.block_cols = static_cast<int32_t>(a.block_cols);
    }
    if (g->format == "pack-quantized") {
      m.data = part(store, name, "weight_packed");
      q.layout = IntLayout::kCompressedTensors;
      q.zeros = part(store, name, "weight_zero_point");
      q.g_idx = part(store, name, "weight_g_idx");
      LATHE_RETURN_IF_ERROR(check_weight_shape(store, name, module, n, k));
    } else if (a.type == "int") {  // naive-quantized / int-quantized int8
      m.format = WeightFormat::kInt;
      m.dtype = DType::kI8;
      m.data = store.find(name) != nullptr ? *store.find(name) : TensorView{};
      q.layout = IntLayout::kInt8Rows;
      q.zeros = part(store, name, "weight_zero_point");
    } else {  // float-quantized FP8
      m.format = WeightFormat::kFp8;
      m.dtype = DType::kF8E4M3;
      m.data = store.find(name) != nullptr ? *store.find(name) : TensorView{};
      q.input_scale = part(store, name, "input_scale");
    }
    if (q.scales.data == nullptr && q.scales.ndim == 0)
      return missing_part(name, "compressed-tensors (" + g->name + ")", source_, "weight_scale");
    return checked(std::move(m), "compressed-tensors");
  }

 private:
  Status check_format(const Group& g, const std::string& where) const {
    const WeightArgs& a = g.weights;
    const std::string& f = g.format;
    const std::string what =
        strformat("%s: %s%d weights (strategy %s) in format '%s'", where.c_str(), a.type.c_str(),
                  a.bits, a.strategy.c_str(), f.c_str());
    if (f == "dense") return Status();
    if (f == "pack-quantized") {
      if (a.type != "int" || (a.bits != 4 && a.bits != 8) ||
          (a.strategy != "group" && a.strategy != "channel"))
        return unsupported(what +
                           " are not supported; pack-quantized holds 4- or 8-bit int "
                           "weights with group or channel scales");
      return Status();
    }
    if ((f == "naive-quantized" || f == "int-quantized") && a.type == "int") {
      if (a.bits != 8 || !a.symmetric || a.strategy == "block")
        return unsupported(what +
                           " are not supported; int8 weights are read symmetric, with "
                           "tensor, channel or group scales");
      return Status();
    }
    if ((f == "float-quantized" || f == "naive-quantized") && a.type == "float") {
      if (a.bits != 8 || a.strategy == "group")
        return unsupported(what +
                           " are not supported; FP8 weights are read with tensor, "
                           "channel or block scales");
      return Status();
    }
    return unsupported(what +
                       " are not supported; Lathe reads pack-quantized, naive-quantized, "
                       "int-quantized and float-quantized compressed-tensors checkpoints");
  }

  // The pack-quantized weight_shape {n, k} must name the matrix the model config implies.
  Status check_weight_shape(const WeightStore& store, const std::string& name,
                            const std::string& module, int64_t n, int64_t k) const {
    const TensorView s = part(store, name, "weight_shape");
    if (s.data == nullptr && s.ndim == 0)
      return corrupt_file(name + " (" + module + "): weight_shape is missing");
    if (s.numel() != 2 || (s.dtype != DType::kI32 && s.dtype != DType::kI64))
      return corrupt_file(name + " (" + module + "): weight_shape must hold two integers, it is " +
                          std::string(dtype_name(s.dtype)) + " " + s.shape_string());
    int64_t v[2];
    for (int i = 0; i < 2; ++i) {
      if (s.dtype == DType::kI32) {
        int32_t x;
        std::memcpy(&x, s.bytes() + 4 * i, 4);
        v[i] = x;
      } else {
        std::memcpy(&v[i], s.bytes() + 8 * i, 8);
      }
    }
    if (v[0] != n || v[1] != k)
      return corrupt_file(strformat(
          "%s (%s): weight_shape says [%lld, %lld], but the model config "
          "implies [%lld, %lld]",
          name.c_str(), module.c_str(), static_cast<long long>(v[0]), static_cast<long long>(v[1]),
          static_cast<long long>(n), static_cast<long long>(k)));
    return Status();
  }

  // The group a module belongs to, or null when ignored or matched by no target.
  Result<const Group*> group_of(const std::string& module) const {
    for (const std::string& ig : ignore_) {
      if (starts_with(ig, "re:")) {
        LATHE_ASSIGN_OR_RETURN(bool m,
                               regex_match_prefix(ig.substr(3), module, source_ + " ignore"));
        if (m) return static_cast<const Group*>(nullptr);
      } else if (ig == module) {
        return static_cast<const Group*>(nullptr);
      }
    }
    for (const auto& [target, gi] : targets_) {  // module names and regexes first
      if (starts_with(target, "re:")) {
        LATHE_ASSIGN_OR_RETURN(bool m,
                               regex_match_prefix(target.substr(3), module, source_ + " targets"));
        if (m) return &groups_[gi];
      } else if (target == module) {
        return &groups_[gi];
      }
    }
    for (const auto& [target, gi] : targets_)  // then classes: every projection is a Linear
      if (!starts_with(target, "re:") && iequals(target, "Linear")) return &groups_[gi];
    return static_cast<const Group*>(nullptr);
  }

  std::string source_;
  std::vector<Group> groups_;
  std::vector<std::pair<std::string, size_t>> targets_;  // in file order, with their group
  std::vector<std::string> ignore_;
};

}  // namespace

Result<std::unique_ptr<WeightScheme>> make_compressed_tensors_scheme(const CheckpointQuant& quant) {
  auto s = std::make_unique<CompressedTensorsScheme>();
  LATHE_RETURN_IF_ERROR(s->init(quant));
  return std::unique_ptr<WeightScheme>(std::move(s));
}

}  // namespace lathe
