#pragma once
// Result<T>: a value or an error (message and code), returned across module boundaries instead of
// throwing.

#include <cassert>
#include <string>
#include <utility>
#include <variant>

namespace gpuheal {

// What kind of failure, where callers act on it (the command line's exit code: kUsage is 2).
enum class ErrorCode {
  kFailure,  // the operation failed (I/O, the API server, a child process, ...)
  kUsage,    // bad input from the user: flags, config values; fix the input and run again
};

struct Error {
  std::string message;
  ErrorCode code = ErrorCode::kFailure;
};

template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::move(value)) {}      // NOLINT: implicit by design
  Result(Error error) : v_(std::move(error)) {}  // NOLINT

  bool ok() const { return v_.index() == 0; }
  explicit operator bool() const { return ok(); }

  T& value() & {
    assert(ok());
    return std::get<0>(v_);
  }
  const T& value() const& {
    assert(ok());
    return std::get<0>(v_);
  }
  T&& value() && {
    assert(ok());
    return std::get<0>(std::move(v_));
  }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }

  const Error& error() const {
    assert(!ok());
    return std::get<1>(v_);
  }

 private:
  std::variant<T, Error> v_;
};

// Status: success or an error, for operations that return nothing.
class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(Error error) : error_(std::move(error)), ok_(false) {}  // NOLINT
  static Status Ok() { return Status(); }
  bool ok() const { return ok_; }
  explicit operator bool() const { return ok_; }
  const Error& error() const { return error_; }

 private:
  Error error_;
  bool ok_ = true;
};

}  // namespace gpuheal

// Returns the error of a Status (or Result) expression from the enclosing function.
#define GPUHEAL_CHECK(expr)                                               \
  do {                                                                    \
    if (auto gpuheal_s_ = (expr); !gpuheal_s_) return gpuheal_s_.error(); \
  } while (0)

// Declares `var` from a Result-returning expression, or returns its error from the enclosing
// function (which must return a Result or a Status).
#define GPUHEAL_TRY(var, expr)          \
  auto var##_r = (expr);                \
  if (!var##_r) return var##_r.error(); \
  auto var = std::move(*var##_r)
