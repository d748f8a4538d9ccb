// random_calibration() (calibration.h): the calibration set of a source without a tokenizer.
#include "engine/core/philox.h"
#include "engine/quant/calibration.h"

namespace lathe {

CalibrationSet random_calibration(const CalibrationConfig& config, int64_t vocab_size) {
  constexpr uint32_t kKey0 = 0x6c617468u, kKey1 = 0x63616c69u;  // "lath", "cali"
  CalibrationSet set;
  set.origin = "random token ids";
  set.format = CalibrationFormat::kRandom;
  const uint64_t vocab = static_cast<uint64_t>(vocab_size);
  for (int32_t s = 0; s < config.num_samples; ++s) {
    std::vector<TokenId> ids(static_cast<size_t>(config.seq_len));
    for (int32_t t = 0; t < config.seq_len; ++t) {
      // 64 random bits per token: the modulo's bias is below 2^-40 for any vocabulary.
      const Philox4 r =
          philox4x32_10(static_cast<uint32_t>(t), static_cast<uint32_t>(s), 0u, 0u, kKey0, kKey1);
      const uint64_t bits = (static_cast<uint64_t>(r.v[0]) << 32) | r.v[1];
      ids[static_cast<size_t>(t)] = static_cast<TokenId>(bits % vocab);
    }
    set.samples.push_back(std::move(ids));
  }
  return set;
}

}  // namespace lathe
