#include "engine/runtime/draft_proposer.h"

#include "engine/runtime/ngram_proposer.h"

namespace lathe {

std::unique_ptr<DraftProposer> create_draft_proposer(const SpeculativeConfig& config) {
  if (config.method == SpeculativeMethod::kNgram)
    return std::make_unique<NgramProposer>(config.prompt_lookup_min, config.prompt_lookup_max);
  return nullptr;
}

}  // namespace lathe
