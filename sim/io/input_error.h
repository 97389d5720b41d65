// InputError: the one exception type of kvtwin's input edge.
//
// Readers of traces, scenarios, op-logs and CLI values throw it on malformed input; `main`
// catches it, prints what() as one line and exits with code 2. The model and the event loop never
// throw it: they receive validated values.
//
//   what() == "<file>:<line>: <field>: <message>"   (line 0 = the file as a whole)
//
// what() is always one line: control characters other than tab anywhere in it (from a quoted
// value) are written as escapes (\n, \r, \xNN).
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>

namespace kvtwin::sim {

class InputError : public std::runtime_error {
 public:
  InputError(std::string file, uint64_t line, std::string field, const std::string& message);

  const std::string& file() const { return file_; }
  uint64_t line() const { return line_; }
  const std::string& field() const { return field_; }

 private:
  std::string file_;
  uint64_t line_;
  std::string field_;
};

// The process exit code for bad input.
inline constexpr int kExitBadInput = 2;

}  // namespace kvtwin::sim
