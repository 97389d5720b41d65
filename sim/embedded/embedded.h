// Files compiled into the kvtwin binary, so `kvtwin run` with no arguments works from any
// directory: the default scenario (scenarios/default.toml) and the default trace
// (traces/examples/mooncake_conversation_10min.jsonl, the first 10 minutes of the Mooncake
// conversation trace, byte for byte).
#pragma once

#include <string_view>

namespace kvtwin::sim::embedded {

std::string_view default_scenario();
std::string_view default_trace();
inline constexpr std::string_view kDefaultTraceName =
    "<embedded traces/examples/mooncake_conversation_10min.jsonl>";

}  // namespace kvtwin::sim::embedded
