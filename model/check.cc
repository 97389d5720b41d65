#include "model/check.h"

#include <atomic>
#include <cstdio>
#include <cstdlib>

namespace kvtwin::model {
namespace {
std::atomic<CheckFailureMode> g_mode{CheckFailureMode::kAbort};
}

void set_check_failure_mode(CheckFailureMode mode) {
  g_mode.store(mode);
}
CheckFailureMode check_failure_mode() {
  return g_mode.load();
}

CheckFailure::CheckFailure(const char* file, int line, const char* condition) {
  message_ << file << ":" << line << ": check failed: " << condition << " ";
}

CheckFailure::~CheckFailure() noexcept(false) {
  std::string text = message_.str();
  if (g_mode.load() == CheckFailureMode::kThrow) throw CheckFailedError(text);
  std::fprintf(stderr, "kvtwin: %s\n", text.c_str());
  std::fflush(stderr);
  std::abort();
}

}  // namespace kvtwin::model
