// UpstreamError: a Python exception that LMCache raises in the middle of an operation.
//
// The golden data records LMCache's exceptions as outcomes ({"error": "KeyError"}) whose side
// effects up to the raise stand: pins already taken stay taken, objects already allocated stay
// allocated until the end-of-op reclamation, writes already submitted stay pending. To reproduce
// that exactly, the model unwinds the same way: deep code throws UpstreamError at the point where
// upstream raises, and the public entry points (LMCacheEngine, the connector) catch it and return
// it as a value (`std::optional<PyError> error` in their results). Nothing outside model/lmcache
// ever sees the exception.
//
// With every quirk switched to its fix (quirks.h), the only errors left are input contract
// violations that upstream also reports (a mask whose False count is not a chunk multiple, a pinned
// lookup without a lookup id) and kWouldBusyWait.
//
// kWouldBusyWait is not a Python exception: it stands for "upstream would spin here" (an
// allocation with busy_loop=True while nothing is evictable; golden README §4.5), where the
// caller gave the model no BusyLoopSleeper or the sleeper said no wait could end. The model
// stops the operation instead of hanging; the simulator treats it as a stall of that request.
#pragma once

#include <exception>
#include <string>
#include <string_view>

namespace kvtwin::model::lmcache {

enum class PyError {
  kValueError,
  kKeyError,
  kAssertionError,
  kFileNotFoundError,
  kUnboundLocalError,
  kStopIteration,
  kIndexError,
  kWouldBusyWait,
};

// The Python class name ("KeyError"); kWouldBusyWait prints as "WouldBusyWait".
std::string_view py_error_name(PyError e);

class UpstreamError : public std::exception {
 public:
  UpstreamError(PyError kind, std::string detail) : kind_(kind), detail_(std::move(detail)) {
    what_ = std::string(py_error_name(kind_)) + ": " + detail_;
  }
  PyError kind() const { return kind_; }
  const char* what() const noexcept override { return what_.c_str(); }

 private:
  PyError kind_;
  std::string detail_;
  std::string what_;
};

[[noreturn]] inline void raise(PyError kind, std::string detail) {
  throw UpstreamError(kind, std::move(detail));
}

}  // namespace kvtwin::model::lmcache
