#include "ui/quantize/literature_quality.h"

#include <QObject>

namespace lathe::ui {

namespace {

struct Figure {
  const char* scheme;
  int bits;  // -1: any
  const char* quality;
  const char* citation;
  int rank;  // larger = closer to the original
};

// llama.cpp: tools/quantize/quantize.cpp, QUANT_OPTIONS (perplexity increase on WikiText-2 over
// the F16 model, Llama-3-8B). AWQ: Lin et al., "AWQ", MLSys 2024, Table 4 (Llama-2-7B WikiText-2
// perplexity, FP16 5.47; INT4 g128: RTN 5.73, GPTQ-R 5.63, AWQ 5.60). FP8 and INT8: Kurtic et
// al., "Give Me BF16 or Give Me Death?", arXiv:2411.02355 (accuracy recovery over BF16).
constexpr Figure kFigures[] = {
    {"q8_0", -1, "+0.0026 PPL", "llama.cpp quantize table, Llama-3-8B", 95},
    {"int8-w8a16", -1, "≈ lossless (≥ 99.9% recovery)",
     "Kurtic et al. 2024 (arXiv:2411.02355), 8-bit weights", 93},
    {"rtn", 8, "≈ lossless (≥ 99.9% recovery)",
     "Kurtic et al. 2024 (arXiv:2411.02355), 8-bit weights", 92},
    {"fp8-dynamic", -1, "≈ lossless (~99.9% recovery)",
     "Kurtic et al. 2024 (arXiv:2411.02355), FP8 W8A8", 91},
    {"fp8-block", -1, "≈ lossless (~99.9% recovery)",
     "Kurtic et al. 2024 (arXiv:2411.02355), FP8 W8A8", 90},
    {"q6_k", -1, "+0.0217 PPL", "llama.cpp quantize table, Llama-3-8B", 80},
    {"q5_k_m", -1, "+0.0569 PPL", "llama.cpp quantize table, Llama-3-8B", 70},
    {"awq", 4, "+0.13 PPL", "AWQ paper (MLSys 2024) Table 4, Llama-2-7B", 62},
    {"gptq", 4, "+0.16 PPL", "AWQ paper (MLSys 2024) Table 4, GPTQ-R on Llama-2-7B", 61},
    {"q4_k_m", -1, "+0.1754 PPL", "llama.cpp quantize table, Llama-3-8B", 60},
    {"rtn", 4, "+0.26 PPL", "AWQ paper (MLSys 2024) Table 4, RTN g128 on Llama-2-7B", 45},
    {"q4_0", -1, "+0.4685 PPL", "llama.cpp quantize table, Llama-3-8B", 40},
};

}  // namespace

void applyLiteratureQuality(QuantCandidate& c) {
  for (const Figure& f : kFigures) {
    if (c.scheme != QLatin1String(f.scheme) || (f.bits != -1 && f.bits != c.bits)) continue;
    c.quality = QString::fromUtf8(f.quality);
    c.qualityCitation = QString::fromUtf8(f.citation);
    c.qualitySource = QualitySource::kLiterature;
    c.qualityRank = f.rank;
    return;
  }
}

}  // namespace lathe::ui
