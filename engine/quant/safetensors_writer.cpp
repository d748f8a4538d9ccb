#include "engine/quant/safetensors_writer.h"

#include <algorithm>
#include <cstring>
#include <set>

#include <nlohmann/json.hpp>

#include "engine/core/strings.h"
#include "engine/model/safetensors_file.h"

namespace lathe {
using ojson = nlohmann::ordered_json;

namespace {

Status validate_specs(const std::vector<SafetensorsTensorSpec>& tensors) {
  std::set<std::string> names;
  for (const SafetensorsTensorSpec& t : tensors) {
    if (t.name.empty() || t.name == "__metadata__")
      return invalid_argument("safetensors: invalid tensor name '" + t.name + "'");
    if (!names.insert(t.name).second)
      return invalid_argument("safetensors: tensor '" + t.name + "' is declared twice");
    if (!t.nbytes())
      return invalid_argument("safetensors: tensor '" + t.name + "' has unknown dtype '" + t.dtype +
                              "'");
    for (int64_t d : t.shape)
      if (d < 0)
        return invalid_argument("safetensors: tensor '" + t.name + "' has a negative dimension");
  }
  return Status();
}

std::string shard_name(size_t i, size_t n) {
  return strformat("model-%05zu-of-%05zu.safetensors", i + 1, n);
}

std::vector<std::vector<SafetensorsTensorSpec>> plan_shards(
    const std::vector<SafetensorsTensorSpec>& tensors, int64_t max_shard_bytes) {
  std::vector<std::vector<SafetensorsTensorSpec>> shards(1);
  int64_t current = 0;
  for (const SafetensorsTensorSpec& t : tensors) {
    const int64_t n = t.nbytes().value_or(0);
    if (!shards.back().empty() && current + n > max_shard_bytes) {
      shards.emplace_back();
      current = 0;
    }
    shards.back().push_back(t);
    current += n;
  }
  return shards;
}

std::string index_json(const std::vector<std::vector<SafetensorsTensorSpec>>& shards,
                       int64_t total) {
  ojson j;
  j["metadata"] = {{"total_size", total}};
  ojson map = ojson::object();
  for (size_t i = 0; i < shards.size(); ++i)
    for (const SafetensorsTensorSpec& t : shards[i]) map[t.name] = shard_name(i, shards.size());
  j["weight_map"] = map;
  return j.dump(2) + "\n";
}

}  // namespace

std::optional<int64_t> SafetensorsTensorSpec::nbytes() const {
  const std::optional<int64_t> size = safetensors_dtype_size(dtype);
  if (!size) return std::nullopt;
  int64_t n = *size;
  for (int64_t d : shape) n *= d;
  return n;
}

std::string safetensors_header_json(const std::vector<SafetensorsTensorSpec>& tensors,
                                    const std::map<std::string, std::string>& metadata) {
  ojson j = ojson::object();
  if (!metadata.empty()) {
    ojson m = ojson::object();
    for (const auto& [k, v] : metadata) m[k] = v;
    j["__metadata__"] = m;
  }
  int64_t offset = 0;
  for (const SafetensorsTensorSpec& t : tensors) {
    const int64_t n = t.nbytes().value_or(0);
    j[t.name] = {{"dtype", t.dtype}, {"shape", t.shape}, {"data_offsets", {offset, offset + n}}};
    offset += n;
  }
  return j.dump();
}

int64_t safetensors_file_size(const std::vector<SafetensorsTensorSpec>& tensors,
                              const std::map<std::string, std::string>& metadata) {
  const int64_t header = static_cast<int64_t>(safetensors_header_json(tensors, metadata).size());
  int64_t total = 8 + (header + 7) / 8 * 8;
  for (const SafetensorsTensorSpec& t : tensors) total += t.nbytes().value_or(0);
  return total;
}

Result<SafetensorsWriter> SafetensorsWriter::create(
    const std::string& path, std::vector<SafetensorsTensorSpec> tensors,
    const std::map<std::string, std::string>& metadata) {
  LATHE_RETURN_IF_ERROR(validate_specs(tensors).with_context(path));
  std::string header = safetensors_header_json(tensors, metadata);
  header.append((8 - header.size() % 8) % 8, ' ');
  SafetensorsWriter w;
  LATHE_ASSIGN_OR_RETURN(FileWriter f, FileWriter::create(path));
  w.file_ = std::make_unique<FileWriter>(std::move(f));
  const uint64_t len = header.size();
  LATHE_RETURN_IF_ERROR(w.file_->write(&len, 8));
  LATHE_RETURN_IF_ERROR(w.file_->write(header.data(), header.size()));
  w.tensors_ = std::move(tensors);
  return w;
}

Status SafetensorsWriter::write(const std::string& name, const void* data, size_t n) {
  if (next_ >= tensors_.size())
    return internal_error(file_->path() + ": tensor '" + name + "' was not declared");
  const SafetensorsTensorSpec& t = tensors_[next_];
  if (t.name != name)
    return internal_error(file_->path() + ": tensor '" + name +
                          "' written out of order (expected '" + t.name + "')");
  if (static_cast<int64_t>(n) != t.nbytes().value_or(-1))
    return internal_error(strformat("%s: tensor '%s' has %zu bytes, declared %lld",
                                    file_->path().c_str(), name.c_str(), n,
                                    static_cast<long long>(t.nbytes().value_or(-1))));
  LATHE_RETURN_IF_ERROR(file_->write(data, n));
  ++next_;
  return Status();
}

Status SafetensorsWriter::finish() {
  if (next_ != tensors_.size())
    return internal_error(strformat("%s: %zu of %zu tensors were written", file_->path().c_str(),
                                    next_, tensors_.size()));
  return file_->close();
}

int64_t SafetensorsFolderWriter::expected_bytes(const std::vector<SafetensorsTensorSpec>& tensors,
                                                int64_t max_shard_bytes) {
  const auto shards = plan_shards(tensors, max_shard_bytes);
  int64_t total = 0, data = 0;
  for (const auto& s : shards) {
    total += safetensors_file_size(s, {});
    for (const auto& t : s) data += t.nbytes().value_or(0);
  }
  if (shards.size() > 1) total += static_cast<int64_t>(index_json(shards, data).size());
  return total;
}

Result<SafetensorsFolderWriter> SafetensorsFolderWriter::create(
    const std::string& folder, std::vector<SafetensorsTensorSpec> tensors, int64_t max_shard_bytes,
    const std::map<std::string, std::string>& metadata) {
  LATHE_RETURN_IF_ERROR(validate_specs(tensors).with_context(folder));
  if (max_shard_bytes <= 0) return invalid_argument("the shard size must be positive");
  SafetensorsFolderWriter w;
  w.folder_ = folder;
  w.metadata_ = metadata;
  w.shards_ = plan_shards(tensors, max_shard_bytes);
  for (size_t i = 0; i < w.shards_.size(); ++i)
    w.shard_names_.push_back(w.shards_.size() == 1 ? "model.safetensors"
                                                   : shard_name(i, w.shards_.size()));
  for (const auto& t : tensors) w.total_bytes_ += t.nbytes().value_or(0);
  LATHE_RETURN_IF_ERROR(w.open_shard(0));
  return w;
}

Status SafetensorsFolderWriter::open_shard(size_t i) {
  current_ = i;
  LATHE_ASSIGN_OR_RETURN(
      SafetensorsWriter sw,
      SafetensorsWriter::create(folder_ + "/" + shard_names_[i], shards_[i], metadata_));
  writer_.emplace(std::move(sw));
  return Status();
}

Status SafetensorsFolderWriter::write(const std::string& name, const void* data, size_t n) {
  if (!writer_) return internal_error(folder_ + ": write after finish");
  const auto& specs = shards_[current_];
  const bool in_current = std::any_of(
      specs.begin(), specs.end(), [&](const SafetensorsTensorSpec& t) { return t.name == name; });
  if (!in_current && current_ + 1 < shards_.size()) {
    LATHE_RETURN_IF_ERROR(writer_->finish());
    LATHE_RETURN_IF_ERROR(open_shard(current_ + 1));
  }
  return writer_->write(name, data, n);
}

Status SafetensorsFolderWriter::finish() {
  if (!writer_) return internal_error(folder_ + ": safetensors writer finished twice");
  if (current_ + 1 != shards_.size())
    return internal_error(folder_ + ": not every safetensors shard was written");
  LATHE_RETURN_IF_ERROR(writer_->finish());
  writer_.reset();
  if (shards_.size() > 1)
    return write_small_file(folder_ + "/model.safetensors.index.json",
                            index_json(shards_, total_bytes_));
  return Status();
}

}  // namespace lathe
