// The op-log formats `kvtwin golden` knows, keyed by the header's "format" value.
#pragma once

#include <string_view>
#include <utility>
#include <vector>

#include "sim/golden/replay.h"

namespace kvtwin::sim::golden {

struct GoldenFormat {
  std::string_view name;  // header "format"
  int version;            // header "format_version"
  ReplayFn replay;
};

const std::vector<GoldenFormat>& golden_formats();

}  // namespace kvtwin::sim::golden
