// KVTWIN_CHECK: the model's guard against its own bugs.
//
// A broken precondition or invariant inside model/ (or the event loop) is a bug, not an input
// error: the program prints file:line with the failed condition and a message, then aborts, so a
// half-changed model is never observed. Tests switch the handler to throwing CheckFailedError so
// that rapidcheck can shrink a failing case and gtest can assert that a check fires.
//
// The checks stay on in release builds (exactness is the product); keep them O(1) on hot paths.
//
// Threading: the failure mode is one process-wide setting, set before any model code runs (the
// only global in model/; it configures the failure path only).
#pragma once

#include <sstream>
#include <stdexcept>
#include <string>

namespace kvtwin::model {

class CheckFailedError : public std::logic_error {
 public:
  using std::logic_error::logic_error;
};

enum class CheckFailureMode { kAbort, kThrow };

// Selects what a failed check does. Default kAbort.
void set_check_failure_mode(CheckFailureMode mode);
CheckFailureMode check_failure_mode();

// Collects the message of one failed check; its destructor reports it (abort or throw).
class CheckFailure {
 public:
  CheckFailure(const char* file, int line, const char* condition);
  CheckFailure(const CheckFailure&) = delete;
  CheckFailure& operator=(const CheckFailure&) = delete;
  [[noreturn]] ~CheckFailure() noexcept(false);
  std::ostream& stream() { return message_; }

 private:
  std::ostringstream message_;
};

// Lets `KVTWIN_CHECK(x) << a << b` compile as one expression statement.
struct CheckVoidify {
  void operator&(std::ostream&) {}
};

}  // namespace kvtwin::model

#define KVTWIN_CHECK(condition)           \
  (__builtin_expect(!!(condition), 1))    \
      ? (void)0                           \
      : ::kvtwin::model::CheckVoidify() & \
            ::kvtwin::model::CheckFailure(__FILE__, __LINE__, #condition).stream()

#define KVTWIN_CHECK_EQ(a, b) KVTWIN_CHECK((a) == (b)) << (a) << " vs " << (b) << " "
#define KVTWIN_CHECK_LE(a, b) KVTWIN_CHECK((a) <= (b)) << (a) << " vs " << (b) << " "
#define KVTWIN_CHECK_LT(a, b) KVTWIN_CHECK((a) < (b)) << (a) << " vs " << (b) << " "
#define KVTWIN_CHECK_GE(a, b) KVTWIN_CHECK((a) >= (b)) << (a) << " vs " << (b) << " "
