// The writer side of `lathe quantize`: an output format that is planned from the source and the
// scheme (every tensor's name, type and shape, hence the output's size, known before any work),
// then fed the source's tensors one at a time, in its order, as float32 (quant_source.h's
// convention), and finished. Implementations: a Hugging Face folder (hf_quant_writer.h: GPTQ, AWQ,
// compressed-tensors) and a GGUF file (gguf_quant_writer.h).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "engine/core/status.h"
#include "engine/quant/int_quant.h"

namespace lathe {

class QuantOutputWriter {
 public:
  virtual ~QuantOutputWriter() = default;

  virtual bool output_is_folder() const = 0;
  // Bytes the output will take on disk (weights and side files).
  virtual int64_t expected_bytes() const = 0;
  // Canonical tensor names in the order write_tensor() takes them. A name the source does not
  // have (GGUF's "rope_freqs") is written from the config; its data argument is empty.
  virtual const std::vector<std::string>& order() const = 0;
  // True when `name` is stored quantized (not in a float type).
  virtual bool is_quantized(const std::string& name) const = 0;

  // Starts writing into `temp_path` (the folder or file of an AtomicOutput).
  virtual Status begin(const std::string& temp_path) = 0;
  // The next tensor of order(); `data` is consumed.
  virtual Status write_tensor(const std::string& name, std::vector<float> data) = 0;
  // The next tensor of order(), a linear whose codes the caller chose (GPTQ, AWQ) on the scheme's
  // grid, instead of write_tensor()'s round-to-nearest. Writers of integer schemes take it.
  virtual Status write_quantized(const std::string& name, const IntQuantizedMatrix& q) {
    (void)q;
    return internal_error("this output format takes no pre-quantized tensor (" + name + ")");
  }
  // Writes what follows the tensors (index, configs, tokenizer files) and syncs nothing (the
  // AtomicOutput does). Returns lines worth telling the user (e.g. the tensor type counts).
  virtual Result<std::vector<std::string>> finish() = 0;
};

}  // namespace lathe
