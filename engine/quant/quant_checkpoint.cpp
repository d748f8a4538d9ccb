#include "engine/quant/quant_checkpoint.h"

#include <cstring>
#include <filesystem>
#include <fstream>

#include "engine/core/read_file.h"
#include "engine/core/strings.h"
#include "engine/quant/atomic_output.h"

namespace lathe {
namespace fs = std::filesystem;
using ojson = nlohmann::ordered_json;

namespace {

constexpr const char* kFormat = "lathe-quantize-checkpoint";
constexpr int kVersion = 1;
constexpr char kBlockMagic[4] = {'L', 'Q', 'C', 'B'};
constexpr char kStateMagic[4] = {'L', 'Q', 'C', 'S'};
constexpr const char* kRestartHint = "; pass --restart to discard it and start from block 0";

// 64-bit FNV-1a over the bytes fed, in any pieces.
class Fnv64 {
 public:
  void add(const void* data, size_t n) {
    const auto* p = static_cast<const unsigned char*>(data);
    for (size_t i = 0; i < n; ++i) {
      h_ ^= p[i];
      h_ *= 0x100000001b3ULL;
    }
  }
  uint64_t value() const { return h_; }

 private:
  uint64_t h_ = 0xcbf29ce484222325ULL;
};

class ByteWriter {
 public:
  template <typename T>
  void put(T v) {
    out.append(reinterpret_cast<const char*>(&v), sizeof(T));
  }
  void put_str(const std::string& s) {
    put<uint64_t>(s.size());
    out += s;
  }
  template <typename T>
  void put_vec(const std::vector<T>& v) {
    put<uint64_t>(v.size());
    out.append(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(T));
  }
  std::string out;
};

class ByteReader {
 public:
  ByteReader(const std::string& s, std::string what) : s_(s), what_(std::move(what)) {}
  template <typename T>
  Status get(T* v) {
    if (pos_ + sizeof(T) > s_.size()) return short_read();
    std::memcpy(v, s_.data() + pos_, sizeof(T));
    pos_ += sizeof(T);
    return Status();
  }
  Status get_str(std::string* v) {
    uint64_t n = 0;
    LATHE_RETURN_IF_ERROR(get(&n));
    if (n > s_.size() - pos_) return short_read();
    v->assign(s_.data() + pos_, n);
    pos_ += n;
    return Status();
  }
  template <typename T>
  Status get_vec(std::vector<T>* v) {
    uint64_t n = 0;
    LATHE_RETURN_IF_ERROR(get(&n));
    if (n > (s_.size() - pos_) / sizeof(T)) return short_read();
    v->resize(n);
    std::memcpy(v->data(), s_.data() + pos_, n * sizeof(T));
    pos_ += n * sizeof(T);
    return Status();
  }
  bool at_end() const { return pos_ == s_.size(); }

 private:
  Status short_read() const { return corrupt_file(what_ + ": ends inside a record"); }
  const std::string& s_;
  std::string what_;
  size_t pos_ = 0;
};

// 4-bit codes two to a byte (low nibble first); 8-bit codes as they are.
std::vector<uint8_t> pack_codes(const std::vector<uint8_t>& codes, int bits) {
  if (bits != 4) return codes;
  std::vector<uint8_t> out((codes.size() + 1) / 2, 0);
  for (size_t i = 0; i < codes.size(); ++i)
    out[i / 2] |= static_cast<uint8_t>((codes[i] & 0xf) << (i % 2 == 0 ? 0 : 4));
  return out;
}

std::vector<uint8_t> unpack_codes(const std::vector<uint8_t>& packed, int bits, size_t n) {
  if (bits != 4) return packed;
  std::vector<uint8_t> out(n);
  for (size_t i = 0; i < n; ++i) out[i] = (packed[i / 2] >> (i % 2 == 0 ? 0 : 4)) & 0xf;
  return out;
}

// Writes `path` through a temporary name: pieces in order, fsynced, renamed.
Status write_atomically(const std::string& path,
                        const std::vector<std::pair<const void*, size_t>>& pieces) {
  const std::string tmp = path + ".tmp";
  {
    LATHE_ASSIGN_OR_RETURN(FileWriter w, FileWriter::create(tmp));
    for (const auto& [data, n] : pieces) LATHE_RETURN_IF_ERROR(w.write(data, n));
    LATHE_RETURN_IF_ERROR(w.close());
  }
  std::error_code ec;
  fs::rename(tmp, path, ec);
  if (ec) return io_error("cannot rename " + tmp + " to " + path + ": " + ec.message());
  return Status();
}

// magic, version, body, checksum of all three.
Status write_framed(const std::string& path, const char magic[4], const std::string& body) {
  const uint32_t version = kVersion;
  Fnv64 h;
  h.add(magic, 4);
  h.add(&version, 4);
  h.add(body.data(), body.size());
  const uint64_t sum = h.value();
  return write_atomically(path, {{magic, 4}, {&version, 4}, {body.data(), body.size()}, {&sum, 8}});
}

Result<std::string> read_framed(const std::string& path, const char magic[4]) {
  LATHE_ASSIGN_OR_RETURN(std::string bytes, read_file(path));
  if (bytes.size() < 16 || std::memcmp(bytes.data(), magic, 4) != 0)
    return corrupt_file(path + " is not a lathe quantize checkpoint file" + kRestartHint);
  uint32_t version = 0;
  std::memcpy(&version, bytes.data() + 4, 4);
  if (version != kVersion)
    return corrupt_file(
        strformat("%s has version %u, this lathe reads %d", path.c_str(), version, kVersion) +
        kRestartHint);
  uint64_t sum = 0;
  std::memcpy(&sum, bytes.data() + bytes.size() - 8, 8);
  Fnv64 h;
  h.add(bytes.data(), bytes.size() - 8);
  if (h.value() != sum)
    return corrupt_file(path + " is damaged (its checksum does not match its contents)" +
                        kRestartHint);
  return bytes.substr(8, bytes.size() - 16);
}

std::string block_file(const std::string& folder, int64_t layer) {
  return folder + "/blk." + std::to_string(layer) + ".bin";
}
std::string state_name(int64_t layer) {
  return "state." + std::to_string(layer) + ".bin";
}

// The top-level fields of two job objects that differ, "a, b".
std::string differing_fields(const ojson& a, const ojson& b) {
  std::string out;
  auto add = [&](const std::string& k) {
    if (out.find(k) == std::string::npos) out += (out.empty() ? "" : ", ") + k;
  };
  for (auto it = a.begin(); it != a.end(); ++it)
    if (!b.contains(it.key()) || b[it.key()] != it.value()) add(it.key());
  for (auto it = b.begin(); it != b.end(); ++it)
    if (!a.contains(it.key())) add(it.key());
  return out;
}

}  // namespace

std::string encode_calibrated_block(const CalibratedBlock& b) {
  ByteWriter w;
  w.put<uint64_t>(b.linears.size());
  for (const auto& [name, q] : b.linears) {
    w.put_str(name);
    w.put<int64_t>(q.rows);
    w.put<int64_t>(q.cols);
    w.put<int32_t>(q.bits);
    w.put<int64_t>(q.group_size);
    w.put<uint8_t>(q.symmetric ? 1 : 0);
    w.put<uint64_t>(q.codes.size());
    w.put_vec(pack_codes(q.codes, q.bits));
    w.put_vec(q.scales);
    w.put_vec(q.zeros);
    w.put_vec(q.g_idx);
  }
  w.put<uint64_t>(b.replaced.size());
  for (const auto& [name, v] : b.replaced) {
    w.put_str(name);
    w.put_vec(v);
  }
  w.put<uint64_t>(b.notes.size());
  for (const std::string& n : b.notes) w.put_str(n);
  w.put<double>(b.output_error);
  w.put<uint8_t>(b.has_holdout ? 1 : 0);
  w.put<double>(b.holdout.method_error);
  w.put<double>(b.holdout.rtn_error);
  return std::move(w.out);
}

Result<CalibratedBlock> decode_calibrated_block(const std::string& bytes, const std::string& what) {
  ByteReader r(bytes, what);
  CalibratedBlock b;
  uint64_t n = 0;
  LATHE_RETURN_IF_ERROR(r.get(&n));
  for (uint64_t i = 0; i < n; ++i) {
    std::string name;
    IntQuantizedMatrix q;
    int32_t bits = 0;
    uint8_t sym = 0;
    uint64_t num_codes = 0;
    std::vector<uint8_t> packed;
    LATHE_RETURN_IF_ERROR(r.get_str(&name));
    LATHE_RETURN_IF_ERROR(r.get(&q.rows));
    LATHE_RETURN_IF_ERROR(r.get(&q.cols));
    LATHE_RETURN_IF_ERROR(r.get(&bits));
    LATHE_RETURN_IF_ERROR(r.get(&q.group_size));
    LATHE_RETURN_IF_ERROR(r.get(&sym));
    LATHE_RETURN_IF_ERROR(r.get(&num_codes));
    LATHE_RETURN_IF_ERROR(r.get_vec(&packed));
    LATHE_RETURN_IF_ERROR(r.get_vec(&q.scales));
    LATHE_RETURN_IF_ERROR(r.get_vec(&q.zeros));
    LATHE_RETURN_IF_ERROR(r.get_vec(&q.g_idx));
    q.bits = bits;
    q.symmetric = sym != 0;
    const bool shapes_fit =
        (bits == 4 || bits == 8) && q.rows > 0 && q.cols > 0 && q.group_size > 0 &&
        num_codes == static_cast<uint64_t>(q.rows * q.cols) &&
        packed.size() == (bits == 4 ? (num_codes + 1) / 2 : num_codes) &&
        q.scales.size() == static_cast<size_t>(q.rows * q.num_groups()) &&
        q.zeros.size() == q.scales.size() && q.g_idx.size() == static_cast<size_t>(q.cols);
    if (!shapes_fit)
      return corrupt_file(what + ": " + name + "'s sizes do not fit its shape" + kRestartHint);
    q.codes = unpack_codes(packed, bits, num_codes);
    b.linears.emplace(name, std::move(q));
  }
  LATHE_RETURN_IF_ERROR(r.get(&n));
  for (uint64_t i = 0; i < n; ++i) {
    std::string name;
    std::vector<float> v;
    LATHE_RETURN_IF_ERROR(r.get_str(&name));
    LATHE_RETURN_IF_ERROR(r.get_vec(&v));
    b.replaced.emplace(name, std::move(v));
  }
  LATHE_RETURN_IF_ERROR(r.get(&n));
  for (uint64_t i = 0; i < n; ++i) {
    std::string note;
    LATHE_RETURN_IF_ERROR(r.get_str(&note));
    b.notes.push_back(std::move(note));
  }
  uint8_t has = 0;
  LATHE_RETURN_IF_ERROR(r.get(&b.output_error));
  LATHE_RETURN_IF_ERROR(r.get(&has));
  LATHE_RETURN_IF_ERROR(r.get(&b.holdout.method_error));
  LATHE_RETURN_IF_ERROR(r.get(&b.holdout.rtn_error));
  b.has_holdout = has != 0;
  if (!r.at_end()) return corrupt_file(what + ": bytes after the last record" + kRestartHint);
  return b;
}

std::string QuantCheckpoint::folder_for(const std::string& output) {
  return output + ".partial";
}

Result<QuantCheckpoint> QuantCheckpoint::open(const std::string& output, const ojson& job,
                                              bool restart) {
  QuantCheckpoint c;
  c.folder_ = folder_for(output);
  c.job_ = job;
  std::error_code ec;
  if (restart && fs::exists(c.folder_, ec)) {
    fs::remove_all(c.folder_, ec);
    if (ec) return io_error("--restart: cannot remove " + c.folder_ + ": " + ec.message());
  }
  if (!fs::exists(c.folder_, ec)) return c;
  if (!fs::is_directory(c.folder_, ec))
    return invalid_argument(c.folder_ + " exists and is not a checkpoint folder; move it away");
  const std::string path = c.folder_ + "/manifest.json";
  if (!fs::exists(path, ec)) {
    // A folder made but no block finished yet (the manifest comes with the first block): fresh.
    return c;
  }
  LATHE_ASSIGN_OR_RETURN(std::string text, read_file(path));
  const ojson m = ojson::parse(text, nullptr, false);
  const bool ok = !m.is_discarded() && m.is_object() && m.value("format", "") == kFormat &&
                  m.contains("version") && m["version"].is_number_integer() && m.contains("job") &&
                  m["job"].is_object() && m.contains("finished_layers") &&
                  m["finished_layers"].is_number_integer() && m.contains("state") &&
                  m["state"].is_string();
  if (!ok)
    return corrupt_file(path +
                        " is not a valid checkpoint manifest (a previous `lathe quantize` "
                        "run's, damaged or written by something else)" +
                        kRestartHint);
  if (m["version"].get<int>() != kVersion)
    return corrupt_file(strformat("%s has version %d, this lathe reads %d", path.c_str(),
                                  m["version"].get<int>(), kVersion) +
                        kRestartHint);
  if (m["job"] != job)
    return invalid_argument(c.folder_ + " holds a run of another job (" +
                            differing_fields(m["job"], job) +
                            " differ); run the same command as before to resume it" + kRestartHint);
  c.finished_ = m["finished_layers"].get<int64_t>();
  if (c.finished_ < 0 || m["state"].get<std::string>() != state_name(c.finished_))
    return corrupt_file(path + ": finished_layers and state disagree" + kRestartHint);
  return c;
}

Result<CalibratedBlock> QuantCheckpoint::read_block(int64_t layer) const {
  if (layer < 0 || layer >= finished_)
    return internal_error(
        strformat("checkpoint: block %lld is not saved", static_cast<long long>(layer)));
  const std::string path = block_file(folder_, layer);
  LATHE_ASSIGN_OR_RETURN(std::string body, read_framed(path, kBlockMagic));
  return decode_calibrated_block(body, path);
}

Result<std::vector<float>> QuantCheckpoint::read_state() const {
  const std::string path = folder_ + "/" + state_name(finished_);
  std::ifstream in(path, std::ios::binary);
  if (!in) return not_found(path + " is missing" + kRestartHint);
  char head[24];
  Fnv64 h;
  if (!in.read(head, sizeof(head)) || std::memcmp(head, kStateMagic, 4) != 0)
    return corrupt_file(path + " is not a checkpoint state file" + kRestartHint);
  h.add(head, sizeof(head));
  uint32_t version = 0;
  int64_t layer = 0, count = 0;
  std::memcpy(&version, head + 4, 4);
  std::memcpy(&layer, head + 8, 8);
  std::memcpy(&count, head + 16, 8);
  std::error_code ec;
  const auto size = static_cast<int64_t>(fs::file_size(path, ec));
  if (version != kVersion || layer != finished_ || count < 0 || size != 24 + count * 4 + 8)
    return corrupt_file(path + ": its header does not fit the file or the manifest" + kRestartHint);
  std::vector<float> x(static_cast<size_t>(count));
  uint64_t sum = 0;
  if (!in.read(reinterpret_cast<char*>(x.data()), count * 4) ||
      !in.read(reinterpret_cast<char*>(&sum), 8))
    return io_error("cannot read " + path);
  h.add(x.data(), x.size() * 4);
  if (h.value() != sum)
    return corrupt_file(path + " is damaged (its checksum does not match its contents)" +
                        kRestartHint);
  return x;
}

Status QuantCheckpoint::write_manifest() const {
  ojson m;
  m["format"] = kFormat;
  m["version"] = kVersion;
  m["job"] = job_;
  m["finished_layers"] = finished_;
  m["state"] = state_name(finished_);
  const std::string text = m.dump(2) + "\n";
  return write_atomically(folder_ + "/manifest.json", {{text.data(), text.size()}});
}

Status QuantCheckpoint::save(int64_t layer, const CalibratedBlock& block,
                             const std::vector<float>& state) {
  if (layer != finished_)
    return internal_error(strformat("checkpoint: block %lld saved after %lld finished",
                                    static_cast<long long>(layer),
                                    static_cast<long long>(finished_)));
  std::error_code ec;
  fs::create_directories(folder_, ec);
  if (ec) return io_error("cannot create " + folder_ + ": " + ec.message());
  LATHE_RETURN_IF_ERROR(
      write_framed(block_file(folder_, layer), kBlockMagic, encode_calibrated_block(block)));
  // The state entering layer + 1: header (magic, version, layer, count), floats, checksum.
  char head[24];
  const uint32_t version = kVersion;
  const int64_t next = layer + 1, count = static_cast<int64_t>(state.size());
  std::memcpy(head, kStateMagic, 4);
  std::memcpy(head + 4, &version, 4);
  std::memcpy(head + 8, &next, 8);
  std::memcpy(head + 16, &count, 8);
  Fnv64 h;
  h.add(head, sizeof(head));
  h.add(state.data(), state.size() * 4);
  const uint64_t sum = h.value();
  LATHE_RETURN_IF_ERROR(
      write_atomically(folder_ + "/" + state_name(next),
                       {{head, sizeof(head)}, {state.data(), state.size() * 4}, {&sum, 8}}));
  const int64_t previous = finished_;
  finished_ = next;
  LATHE_RETURN_IF_ERROR(write_manifest());
  fs::remove(folder_ + "/" + state_name(previous), ec);  // may not exist (block 0)
  return Status();
}

Status QuantCheckpoint::remove() {
  std::error_code ec;
  fs::remove_all(folder_, ec);
  if (ec) return io_error("cannot remove " + folder_ + ": " + ec.message());
  return Status();
}

}  // namespace lathe
