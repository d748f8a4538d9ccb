// The interpreter's internal error. Lexer, parser and evaluator throw jinja::Error; Template::parse
// and Template::render catch it and return a Status, so no exception leaves the jinja module.
#pragma once

#include <cstddef>
#include <exception>
#include <string>
#include <utility>

namespace lathe::jinja {

enum class ErrorKind {
  kSyntax,       // the template text is malformed (reported by parse)
  kRuntime,      // evaluation failed: undefined value misused, type error, bad argument, ...
  kRaised,       // the template called raise_exception(message): message is the template's text
  kUnsupported,  // a valid Jinja feature Lathe does not implement
  kLimit,        // a render limit (output size, loop iterations, recursion depth) was exceeded
};

inline constexpr size_t kNoPos = static_cast<size_t>(-1);

class Error : public std::exception {
 public:
  Error(ErrorKind kind, std::string message, size_t pos = kNoPos)
      : kind_(kind), message_(std::move(message)), pos_(pos) {}

  ErrorKind kind() const { return kind_; }
  const std::string& message() const { return message_; }
  // Byte offset in the (newline-normalised) template source, or kNoPos while unknown. The
  // evaluator fills it in with the innermost expression or statement that failed.
  size_t pos() const { return pos_; }
  void set_pos(size_t pos) { pos_ = pos; }
  const char* what() const noexcept override { return message_.c_str(); }

 private:
  ErrorKind kind_;
  std::string message_;
  size_t pos_;
};

// Throws a runtime error; the evaluator attaches the source position.
[[noreturn]] inline void fail(std::string message) {
  throw Error(ErrorKind::kRuntime, std::move(message));
}

}  // namespace lathe::jinja
