#include "model/lmcache/upstream_error.h"

namespace kvtwin::model::lmcache {

std::string_view py_error_name(PyError e) {
  switch (e) {
    case PyError::kValueError:
      return "ValueError";
    case PyError::kKeyError:
      return "KeyError";
    case PyError::kAssertionError:
      return "AssertionError";
    case PyError::kFileNotFoundError:
      return "FileNotFoundError";
    case PyError::kUnboundLocalError:
      return "UnboundLocalError";
    case PyError::kStopIteration:
      return "StopIteration";
    case PyError::kIndexError:
      return "IndexError";
    case PyError::kWouldBusyWait:
      return "WouldBusyWait";
  }
  return "?";
}

}  // namespace kvtwin::model::lmcache
