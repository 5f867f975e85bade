// Errors as values: brigade's own failure codes and a small expected-like result<T>.
#pragma once

#include <cassert>
#include <string>
#include <utility>
#include <variant>

namespace brigade {

/// What kind of failure an error is; the message says exactly what was wrong.
enum class errc {
  invalid_argument,    ///< A caller passed something malformed or out of range.
  not_found,           ///< A file, tensor, model or actor does not exist.
  io_error,            ///< The operating system refused a read, write or map.
  bad_format,          ///< A file or message does not follow its format.
  unsupported,         ///< Valid, but brigade does not implement it.
  resource_exhausted,  ///< A bounded queue, pool or budget is full.
  cancelled,           ///< The work was cancelled by its owner.
  unavailable,         ///< A peer or component is gone; retrying elsewhere may work.
  internal,            ///< A broken invariant inside brigade.
};

const char* to_string(errc code);

/// A failure: its kind and a message naming what was wrong and, where possible, what to do.
struct error {
  errc code = errc::internal;
  std::string message;

  error() = default;
  error(errc c, std::string msg) : code(c), message(std::move(msg)) {}

  /// "bad_format: model.safetensors: tensor 'x': ..." for logs and command-line output.
  std::string describe() const { return std::string(to_string(code)) + ": " + message; }
};

/// Either a value or an error. Access the value only after checking ok().
template <class T>
class result {
 public:
  result(T value) : state_(std::move(value)) {}  // NOLINT: implicit by design
  result(error err) : state_(std::move(err)) {}  // NOLINT: implicit by design

  bool ok() const { return state_.index() == 0; }
  explicit operator bool() const { return ok(); }

  T& value() & {
    assert(ok());
    return std::get<0>(state_);
  }
  const T& value() const& {
    assert(ok());
    return std::get<0>(state_);
  }
  T&& value() && {
    assert(ok());
    return std::get<0>(std::move(state_));
  }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }

  const error& err() const {
    assert(!ok());
    return std::get<1>(state_);
  }

 private:
  std::variant<T, error> state_;
};

/// A result without a value: success, or an error.
class status {
 public:
  status() = default;
  status(error err) : err_(std::move(err)), failed_(true) {}  // NOLINT: implicit by design

  bool ok() const { return !failed_; }
  explicit operator bool() const { return ok(); }
  const error& err() const {
    assert(failed_);
    return err_;
  }

 private:
  error err_;
  bool failed_ = false;
};

inline status ok_status() {
  return status{};
}

}  // namespace brigade
