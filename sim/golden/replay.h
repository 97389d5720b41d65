// Golden op-log replay: the shared shape of a replayer and its verdict.
//
// An op-log (../shared/golden/README.md §4, ../shared/golden/lmcache/README.md §5) is a header
// line, one line per op with its recorded upstream result under "expect", and a footer. A
// replayer executes every op on a fresh model and compares each output with "expect" by JSON
// equality; the first difference is the verdict. Each format has one replayer; `kvtwin golden`
// picks it from the header's "format" field.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "sim/io/line_reader.h"

namespace kvtwin::sim::golden {

struct ReplayOptions {
  bool compare = true;  // false: execute only (speed measurement of the model alone)
};

struct CaseOutcome {
  std::string case_name;
  bool passed = false;
  uint64_t num_ops = 0;
  // First difference, when !passed: op index and name, the field, expected and actual values
  // (JSON text).
  int64_t op_index = -1;
  std::string op_name;
  std::string field;
  std::string expected;
  std::string actual;
  double seconds = 0;  // wall time of the replay, parse included
};

// A replayer consumes the rest of `reader` after the header line it was given. Malformed input
// throws InputError (file, line, field); a mismatch is a CaseOutcome with passed = false.
using ReplayFn = CaseOutcome (*)(io::LineReader& reader, std::string_view header_line,
                                 const ReplayOptions& options);

}  // namespace kvtwin::sim::golden
