// Exceptions turned into errors at the boundary where a backend's code is called (a model step, a
// runner's creation), so that an exception thrown there (std::bad_alloc from a host vector, an
// exception from a third-party kernel library) ends one request or one load with a message instead
// of terminating the process (status.h: exceptions never cross a thread).
#pragma once

#include <exception>
#include <new>
#include <string>

#include "engine/core/status.h"

namespace lathe {

// Calls f() (returning Status or Result<T>) and returns its result; an exception becomes
// kOutOfMemory (std::bad_alloc) or kInternal (any other), its message "<what> threw <what()>".
// `what` names the call: "the model step", "creating the CUDA runner".
template <typename F>
auto call_catching(const std::string& what, F&& f) -> decltype(f()) {
  try {
    return f();
  } catch (const std::bad_alloc&) {
    return out_of_memory(what +
                         " ran out of host memory (std::bad_alloc); lower --max-num-seqs, "
                         "--max-num-batched-tokens or --max-model-len, or free memory");
  } catch (const std::exception& e) {
    return internal_error(what + " threw " + e.what());
  } catch (...) {
    return internal_error(what + " threw an exception that is not a std::exception");
  }
}

}  // namespace lathe
