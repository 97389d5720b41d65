// Simulated time: integer nanoseconds since the start of a run.
//
// 2^63 ns is about 292 years: no trace comes near it, but absurd step or link parameters can (a
// step of 10^8 s). from_seconds saturates instead of overflowing, and the Simulator refuses an
// event beyond kSimTimeMax (SimTimeOverflow). Seconds become SimTime in exactly one place
// (from_seconds) so that rounding is the same everywhere.
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>

namespace kvtwin::sim {

using SimTime = int64_t;      // an instant, ns since run start
using SimDuration = int64_t;  // a span, ns

inline constexpr SimTime kNsPerSecond = 1'000'000'000;
inline constexpr SimTime kSimTimeMax = std::numeric_limits<SimTime>::max();

// Rounds to the nearest nanosecond (ties away from zero); saturates at ±kSimTimeMax beyond
// ±9.2e9 s (and for NaN: +kSimTimeMax).
inline SimTime from_seconds(double s) {
  const double ns = s * 1e9;
  if (ns < 9.2e18 && ns > -9.2e18) return static_cast<SimTime>(std::llround(ns));
  return ns <= -9.2e18 ? -kSimTimeMax : kSimTimeMax;
}
inline double to_seconds(SimDuration ns) {
  return static_cast<double>(ns) * 1e-9;
}

}  // namespace kvtwin::sim
