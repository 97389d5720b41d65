// Simulated time: integer nanoseconds since the start of a run.
//
// 2^63 ns is about 292 years, so overflow is not a concern for any trace. Seconds become SimTime
// in exactly one place (from_seconds) so that rounding is the same everywhere.
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>

namespace kvtwin::sim {

using SimTime = int64_t;      // an instant, ns since run start
using SimDuration = int64_t;  // a span, ns

inline constexpr SimTime kNsPerSecond = 1'000'000'000;
inline constexpr SimTime kSimTimeMax = std::numeric_limits<SimTime>::max();

// Rounds to the nearest nanosecond (ties away from zero). REQUIRES: finite, |s| < 9.2e9.
inline SimTime from_seconds(double s) {
  return static_cast<SimTime>(std::llround(s * 1e9));
}
inline double to_seconds(SimDuration ns) {
  return static_cast<double>(ns) * 1e-9;
}

}  // namespace kvtwin::sim
