// Fuzz target: safetensors. The first byte picks what the rest is:
//   even  a whole .safetensors file (u64 header length, JSON header, data), opened, every tensor
//         viewed and its first bytes read;
//   odd   a model.safetensors.index.json, in a folder next to one valid shard "a.safetensors"
//         (tensor "x"), opened as a checkpoint.
#include <cstring>

#include "engine/model/safetensors_file.h"
#include "tests/fuzz/fuzz_support.h"

using namespace lathe;

namespace {

// "a.safetensors": one F32 tensor "x" of shape [2].
std::string valid_shard() {
  const std::string header = R"({"x":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})";
  std::string out(8, '\0');
  const uint64_t n = header.size();
  std::memcpy(out.data(), &n, 8);
  return out + header + std::string(8, '\0');
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const bool index = (data[0] & 1) != 0;
  ++data;
  --size;
  if (!index) {
    fuzz::MemoryFile file(data, size);
    Result<std::shared_ptr<const SafetensorsFile>> f = SafetensorsFile::open(file.path());
    if (!f.is_ok()) {
      LATHE_FUZZ_CHECK(!f.status().message().empty());
      return 0;
    }
    const uint8_t* begin = (*f)->mapped_file()->data();
    const uint8_t* end = begin + (*f)->file_size();
    for (const SafetensorsTensor& t : (*f)->tensors()) {
      LATHE_FUZZ_CHECK(t.begin <= t.end);
      LATHE_FUZZ_CHECK(t.nbytes() == 0 || (t.data >= begin && t.data + t.nbytes() <= end));
      uint8_t sum = 0;
      for (int64_t i = 0; i < std::min<int64_t>(t.nbytes(), 64); ++i) sum ^= t.data[i];
      (void)sum;
      (void)t.view("fuzz");
      LATHE_FUZZ_CHECK((*f)->find(t.name) == &t);
    }
    return 0;
  }
  fuzz::clear_scratch_folder();
  fuzz::write_scratch_file("a.safetensors", valid_shard());
  fuzz::write_scratch_file("model.safetensors.index.json",
                           std::string_view(reinterpret_cast<const char*>(data), size));
  Result<SafetensorsCheckpoint> ckpt = SafetensorsCheckpoint::open_folder(fuzz::scratch_folder());
  if (ckpt.is_ok()) {
    for (const auto& [name, entry] : ckpt->tensors()) LATHE_FUZZ_CHECK(entry.tensor && entry.file);
  }
  return 0;
}
