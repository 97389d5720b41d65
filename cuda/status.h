// Status: the outcome of an operation on the device side of cuda/ (a CUDA call, an allocation, a
// launch). Device failures are values, never exceptions or aborts: a missing driver, an
// out-of-memory or a failed launch travels up to the Mover, which reports the affected objects
// as faults (ok = 0), as the simulator's contract for tiers asks. Bugs in our own use of the API
// (bad layouts, misuse of a class) still hit KVTWIN_CHECK.
//
// KVTWIN_CUDA_TRY(expr) checks a cudaError_t and returns a Status naming the call, file and
// line; KVTWIN_CUDA_TRY_LAUNCH() checks cudaGetLastError() after a kernel launch.
#pragma once

#include <string>
#include <utility>

namespace kvtwin::cuda {

class [[nodiscard]] Status {
 public:
  Status() = default;  // ok
  static Status error(std::string message, int cuda_error = -1) {
    Status s;
    s.ok_ = false;
    s.cuda_error_ = cuda_error;
    s.message_ = std::move(message);
    return s;
  }

  bool ok() const { return ok_; }
  // The cudaError_t value when a CUDA call failed, -1 for failures of our own, 0 when ok.
  int cuda_error() const { return cuda_error_; }
  const std::string& message() const { return message_; }

 private:
  bool ok_ = true;
  int cuda_error_ = 0;
  std::string message_;
};

// "expr failed: cudaErrorX (description) at file:line".
Status cuda_call_status(int error, const char* expr, const char* file, int line);

}  // namespace kvtwin::cuda

#define KVTWIN_CUDA_TRY(expr)                                                            \
  do {                                                                                   \
    const int kvtwin_error_ = static_cast<int>(expr);                                    \
    if (kvtwin_error_ != 0)                                                              \
      return ::kvtwin::cuda::cuda_call_status(kvtwin_error_, #expr, __FILE__, __LINE__); \
  } while (0)

#define KVTWIN_CUDA_TRY_LAUNCH() KVTWIN_CUDA_TRY(cudaGetLastError())

#define KVTWIN_RETURN_IF_ERROR(expr)                 \
  do {                                               \
    ::kvtwin::cuda::Status kvtwin_status_ = (expr);  \
    if (!kvtwin_status_.ok()) return kvtwin_status_; \
  } while (0)
