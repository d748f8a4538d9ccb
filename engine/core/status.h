// Errors as values. Every fallible engine function returns Status or Result<T>; exceptions never
// cross a thread or an HTTP handler. Messages are written for the user: what was wrong (which file,
// which field), and what to do about it.
#pragma once

#include <cassert>
#include <string>
#include <utility>
#include <variant>

namespace lathe {

enum class ErrorCode {
  kOk = 0,
  kInvalidArgument,  // the caller passed something unusable (bad flag, bad request field)
  kNotFound,         // a file, tensor, key or request does not exist
  kCorruptFile,      // a model file is malformed (bad magic, truncated, inconsistent sizes)
  kUnsupported,      // well-formed but not supported (architecture, tensor type, template feature)
  kOutOfMemory,      // a memory budget cannot hold what was asked
  kResourceExhausted,  // a queue or capacity limit is reached; retry later
  kIo,                 // the operating system refused a read, write or map
  kCancelled,          // the operation was aborted by its owner
  kInternal,           // a bug in Lathe: please report it
};

const char* error_code_name(ErrorCode code);

class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(ErrorCode code, std::string message) : code_(code), message_(std::move(message)) {}

  static Status ok() { return Status(); }
  bool is_ok() const { return code_ == ErrorCode::kOk; }
  explicit operator bool() const { return is_ok(); }
  ErrorCode code() const { return code_; }
  const std::string& message() const { return message_; }

  // Returns a copy whose message is "<context>: <message>" (context names the file or field).
  Status with_context(const std::string& context) const;

 private:
  ErrorCode code_ = ErrorCode::kOk;
  std::string message_;
};

// Convenience constructors: invalid_argument("max_tokens must be > 0, got -3").
inline Status invalid_argument(std::string m) {
  return {ErrorCode::kInvalidArgument, std::move(m)};
}
inline Status not_found(std::string m) {
  return {ErrorCode::kNotFound, std::move(m)};
}
inline Status corrupt_file(std::string m) {
  return {ErrorCode::kCorruptFile, std::move(m)};
}
inline Status unsupported(std::string m) {
  return {ErrorCode::kUnsupported, std::move(m)};
}
inline Status out_of_memory(std::string m) {
  return {ErrorCode::kOutOfMemory, std::move(m)};
}
inline Status resource_exhausted(std::string m) {
  return {ErrorCode::kResourceExhausted, std::move(m)};
}
inline Status io_error(std::string m) {
  return {ErrorCode::kIo, std::move(m)};
}
inline Status cancelled(std::string m) {
  return {ErrorCode::kCancelled, std::move(m)};
}
inline Status internal_error(std::string m) {
  return {ErrorCode::kInternal, std::move(m)};
}

// A value or an error (a small std::expected). Accessing value() of an error is a bug (asserts).
template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::move(value)) {}        // NOLINT: implicit by design
  Result(Status status) : v_(std::move(status)) {  // NOLINT: implicit by design
    assert(!std::get<Status>(v_).is_ok() && "Result constructed from an ok Status");
  }

  bool is_ok() const { return v_.index() == 0; }
  explicit operator bool() const { return is_ok(); }

  T& value() & {
    assert(is_ok());
    return std::get<0>(v_);
  }
  const T& value() const& {
    assert(is_ok());
    return std::get<0>(v_);
  }
  T&& value() && {
    assert(is_ok());
    return std::get<0>(std::move(v_));
  }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }

  // The error; an ok Status when this holds a value.
  Status status() const { return is_ok() ? Status() : std::get<1>(v_); }

 private:
  std::variant<T, Status> v_;
};

}  // namespace lathe

// Early return on error: LATHE_RETURN_IF_ERROR(parse_header(f));
#define LATHE_RETURN_IF_ERROR(expr)                   \
  do {                                                \
    ::lathe::Status lathe_status_ = (expr);           \
    if (!lathe_status_.is_ok()) return lathe_status_; \
  } while (0)

#define LATHE_CONCAT_INNER_(a, b) a##b
#define LATHE_CONCAT_(a, b) LATHE_CONCAT_INNER_(a, b)
// LATHE_ASSIGN_OR_RETURN(auto file, GgufFile::open(path));
#define LATHE_ASSIGN_OR_RETURN(lhs, expr)                   \
  auto LATHE_CONCAT_(lathe_result_, __LINE__) = (expr);     \
  if (!LATHE_CONCAT_(lathe_result_, __LINE__).is_ok())      \
    return LATHE_CONCAT_(lathe_result_, __LINE__).status(); \
  lhs = std::move(LATHE_CONCAT_(lathe_result_, __LINE__)).value()
