// Test helpers that write small GGUF and safetensors files byte by byte, so tests can build
// well-formed files and break them in exactly one way.
#pragma once

#include <QtTest>

#include <cstdint>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

namespace lathe::test {

inline void append_bytes(std::vector<uint8_t>* out, const void* p, size_t n) {
  const size_t old = out->size();
  out->resize(old + n);
  if (n > 0) std::memcpy(out->data() + old, p, n);
}
template <typename T>
inline void append(std::vector<uint8_t>* out, T v) {
  append_bytes(out, &v, sizeof(T));
}
inline void append_string(std::vector<uint8_t>* out, const std::string& s) {
  append<uint64_t>(out, s.size());
  append_bytes(out, s.data(), s.size());
}

inline std::string write_file(const QString& dir, const std::string& name,
                              const std::vector<uint8_t>& bytes) {
  const std::string path = dir.toStdString() + "/" + name;
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(bytes.data()),
            static_cast<std::streamsize>(bytes.size()));
  return path;
}

inline std::vector<uint8_t> read_file_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::vector<uint8_t>((std::istreambuf_iterator<char>(in)),
                              std::istreambuf_iterator<char>());
}

// Builds a GGUF file: header, metadata entries (raw encoded values), tensor infos, data.
struct GgufBuilder {
  struct Tensor {
    std::string name;
    std::vector<uint64_t> ne;  // ggml order
    uint32_t type = 0;         // ggml type id
    std::vector<uint8_t> data;
    bool override_offset = false;
    uint64_t offset = 0;
  };

  char magic[4] = {'G', 'G', 'U', 'F'};
  uint32_t version = 3;
  uint64_t alignment = 32;
  bool override_counts = false;
  uint64_t tensor_count = 0, kv_count = 0;
  std::vector<std::vector<uint8_t>> kvs;  // encoded key + type + value
  std::vector<Tensor> tensors;

  // An entry with an already encoded value of GGUF type `type`.
  void kv_raw(const std::string& key, uint32_t type, const std::vector<uint8_t>& value) {
    std::vector<uint8_t> e;
    append_string(&e, key);
    append<uint32_t>(&e, type);
    e.insert(e.end(), value.begin(), value.end());
    kvs.push_back(std::move(e));
  }
  void kv_u32(const std::string& key, uint32_t v) {
    std::vector<uint8_t> b;
    append(&b, v);
    kv_raw(key, 4, b);
  }
  void kv_f32(const std::string& key, float v) {
    std::vector<uint8_t> b;
    append(&b, v);
    kv_raw(key, 6, b);
  }
  void kv_string(const std::string& key, const std::string& v) {
    std::vector<uint8_t> b;
    append_string(&b, v);
    kv_raw(key, 8, b);
  }
  void kv_string_array(const std::string& key, const std::vector<std::string>& v) {
    std::vector<uint8_t> b;
    append<uint32_t>(&b, 8);
    append<uint64_t>(&b, v.size());
    for (const auto& s : v) append_string(&b, s);
    kv_raw(key, 9, b);
  }

  void tensor(const std::string& name, std::vector<uint64_t> ne, uint32_t type,
              std::vector<uint8_t> data) {
    tensors.push_back(Tensor{name, std::move(ne), type, std::move(data)});
  }
  // An f32 tensor of ggml dims `ne` filled with 0, 1, 2, ...
  void f32_tensor(const std::string& name, std::vector<uint64_t> ne) {
    uint64_t n = 1;
    for (uint64_t d : ne) n *= d;
    std::vector<uint8_t> data;
    for (uint64_t i = 0; i < n; ++i) append<float>(&data, static_cast<float>(i));
    tensor(name, std::move(ne), 0, std::move(data));
  }

  // Minimal llama metadata for a model of the given shape (ggml dims follow from it).
  void llama_metadata(uint32_t layers, uint32_t hidden, uint32_t ff, uint32_t heads,
                      uint32_t kv_heads) {
    kv_string("general.architecture", "llama");
    kv_u32("llama.block_count", layers);
    kv_u32("llama.context_length", 128);
    kv_u32("llama.embedding_length", hidden);
    kv_u32("llama.feed_forward_length", ff);
    kv_u32("llama.attention.head_count", heads);
    kv_u32("llama.attention.head_count_kv", kv_heads);
    kv_f32("llama.attention.layer_norm_rms_epsilon", 1e-5f);
  }

  static uint64_t align_up(uint64_t v, uint64_t a) { return (v + a - 1) / a * a; }

  std::vector<uint8_t> build() const {
    std::vector<uint8_t> out;
    append_bytes(&out, magic, 4);
    append(&out, version);
    append<uint64_t>(&out, override_counts ? tensor_count : tensors.size());
    append<uint64_t>(&out, override_counts ? kv_count : kvs.size());
    for (const auto& e : kvs) out.insert(out.end(), e.begin(), e.end());
    uint64_t offset = 0;
    std::vector<uint64_t> offsets;
    for (const Tensor& t : tensors) {
      append_string(&out, t.name);
      append<uint32_t>(&out, static_cast<uint32_t>(t.ne.size()));
      for (uint64_t d : t.ne) append(&out, d);
      append(&out, t.type);
      const uint64_t off = t.override_offset ? t.offset : offset;
      append(&out, off);
      offsets.push_back(offset);
      offset = align_up(offset + t.data.size(), alignment);
    }
    out.resize(align_up(out.size(), alignment), 0);
    const size_t data_start = out.size();
    for (size_t i = 0; i < tensors.size(); ++i) {
      out.resize(data_start + offsets[i], 0);
      out.insert(out.end(), tensors[i].data.begin(), tensors[i].data.end());
    }
    return out;
  }
};

// A safetensors file from a header JSON text and a data section.
inline std::vector<uint8_t> safetensors_bytes(const std::string& header,
                                              const std::vector<uint8_t>& data) {
  std::vector<uint8_t> out;
  append<uint64_t>(&out, header.size());
  append_bytes(&out, header.data(), header.size());
  out.insert(out.end(), data.begin(), data.end());
  return out;
}

}  // namespace lathe::test
