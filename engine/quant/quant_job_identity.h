// The identity of a calibrated `lathe quantize` run, as the resumable work folder records it
// (quant_checkpoint.h): two runs with equal identities compute the same blocks, so a run may
// continue from the other's finished blocks. A JSON object of:
//   "source"       the model's absolute path and, per weight or config file (the GGUF file, or the
//                  folder's *.safetensors / *.json), its size and modification time in ns, and
//                  the RoPE convention the calibration forward uses for the rows read;
//   "scheme"       every field of the resolved scheme that changes the codes (method, bits,
//                  group size, symmetry, scale type, smallest zero point, act-order, damping,
//                  output format);
//   "calibration"  the file read, the number of samples and tokens and a 64-bit FNV-1a hash of
//                  the token ids (so a changed file, tokenizer, --num-samples or --seq-len
//                  shows);
//   "quantizer"    the held-out samples and AWQ's loss / clip rows.
#pragma once

#include <nlohmann/json.hpp>

#include "engine/quant/calibrated_quantizer.h"
#include "engine/quant/calibration.h"
#include "engine/quant/quant_scheme.h"
#include "engine/quant/quant_source.h"

namespace lathe {

nlohmann::ordered_json quant_job_identity(const QuantSource& source, const QuantScheme& scheme,
                                          const CalibrationSet& calibration,
                                          const CalibratedQuantizerOptions& options);

// The FNV-1a hash of the samples' lengths and token ids, as 16 hex digits.
std::string calibration_token_hash(const CalibrationSet& calibration);

}  // namespace lathe
