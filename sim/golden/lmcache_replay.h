// The replayer of LMCache golden op-logs (format "lmcache-golden" v1,
// ../shared/golden/lmcache/README.md): drives model/lmcache engines (kind "engine") or the vLLM
// connector adapters over them (kind "connector") and compares every output with "expect".
#pragma once

#include <string_view>

#include "sim/golden/replay.h"

namespace kvtwin::sim::golden {

CaseOutcome replay_lmcache(io::LineReader& reader, std::string_view header_line,
                           const ReplayOptions& options);

}  // namespace kvtwin::sim::golden
