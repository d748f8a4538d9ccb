#include "engine/quant/quant_job_identity.h"

#include <algorithm>
#include <filesystem>

#include "engine/core/strings.h"

namespace lathe {
namespace fs = std::filesystem;
using ojson = nlohmann::ordered_json;

namespace {

ojson file_identity(const fs::path& p) {
  std::error_code ec;
  ojson f;
  f["name"] = p.filename().string();
  f["bytes"] = static_cast<int64_t>(fs::file_size(p, ec));
  const auto t = fs::last_write_time(p, ec);
  f["mtime_ns"] = static_cast<int64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count());
  return f;
}

}  // namespace

std::string calibration_token_hash(const CalibrationSet& calibration) {
  uint64_t h = 0xcbf29ce484222325ULL;
  auto add = [&h](uint64_t v) {
    for (int i = 0; i < 8; ++i) {
      h ^= (v >> (8 * i)) & 0xff;
      h *= 0x100000001b3ULL;
    }
  };
  for (const auto& s : calibration.samples) {
    add(s.size());
    for (TokenId t : s) add(static_cast<uint64_t>(static_cast<uint32_t>(t)));
  }
  return strformat("%016llx", static_cast<unsigned long long>(h));
}

ojson quant_job_identity(const QuantSource& source, const QuantScheme& scheme,
                         const CalibrationSet& calibration,
                         const CalibratedQuantizerOptions& options) {
  std::error_code ec;
  ojson src;
  src["path"] = fs::weakly_canonical(fs::absolute(source.path()), ec).string();
  ojson files = ojson::array();
  if (source.is_gguf()) {
    files.push_back(file_identity(source.path()));
  } else {
    std::vector<fs::path> paths;
    for (const auto& e : fs::directory_iterator(source.hf_folder(), ec)) {
      const std::string ext = e.path().extension().string();
      if (e.is_regular_file(ec) && (ext == ".safetensors" || ext == ".json"))
        paths.push_back(e.path());
    }
    std::sort(paths.begin(), paths.end());
    for (const fs::path& p : paths) files.push_back(file_identity(p));
  }
  src["files"] = files;
  if (source.is_dummy()) src["load_format"] = "dummy";  // random weights: the config alone
  // The RoPE convention of the rows the calibration forward reads (a work folder from before Llama
  // GGUF sources were calibrated with rotate-half RoPE lacks it, so it is not resumed).
  src["calibration_rope"] =
      source.config().rope_style == RopeStyle::kNeox ? "rotate-half" : "adjacent-pairs";

  ojson s;
  s["name"] = scheme.name;
  s["method"] = static_cast<int>(scheme.method);
  s["format"] = static_cast<int>(scheme.format);
  s["bits"] = scheme.int_config.bits;
  s["group_size"] = scheme.int_config.group_size;
  s["symmetric"] = scheme.int_config.symmetric;
  s["scale_dtype"] = std::string(dtype_name(scheme.int_config.scale_dtype));
  s["min_zero"] = scheme.int_config.min_zero;
  s["desc_act"] = scheme.desc_act;
  s["damp_percent"] = strformat("%.17g", scheme.damp_percent);

  ojson c;
  c["origin"] = calibration.format == CalibrationFormat::kRandom
                    ? calibration.origin
                    : fs::weakly_canonical(fs::absolute(calibration.origin), ec).string();
  c["samples"] = static_cast<int64_t>(calibration.samples.size());
  c["tokens"] = calibration.num_tokens();
  c["token_hash"] = calibration_token_hash(calibration);

  ojson q;
  q["holdout_samples"] = options.holdout_samples;
  q["awq_loss_rows"] = options.awq_loss_rows;
  q["awq_clip_rows"] = options.awq_clip_rows;

  ojson job;
  job["source"] = src;
  job["scheme"] = s;
  job["calibration"] = c;
  job["quantizer"] = q;
  return job;
}

}  // namespace lathe
