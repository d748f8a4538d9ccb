#include "test_support.h"

#include "engine/model/model_loader.h"

namespace lathe::test {

std::string default_model_path() {
  return lathe::default_model_path();
}

}  // namespace lathe::test
