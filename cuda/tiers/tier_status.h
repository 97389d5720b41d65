// TierStatus and TierStats: what a real storage tier reports for one object, and its counters.
//
// Tier faults are data (STYLE.md): a real tier never throws on a fault of the environment (a
// server gone, a full disk, a corrupt file); it returns a status, counts it, and the caller turns
// anything but kOk into a miss and a recompute, as LMCache does. Bugs (a broken precondition) hit
// KVTWIN_CHECK; bad configuration is reported once, at open time, as an error string.
//
// The one promise every status carries: a get that does not return kOk has not delivered bytes
// the caller may use; a get that returns kOk delivered exactly the bytes that were put.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace kvtwin::cuda::tiers {

enum class TierStatus : uint8_t {
  kOk,
  kMiss,         // get: no such object (never stored, evicted, or removed)
  kCorrupt,      // get: stored bytes failed the integrity check (torn, truncated, flipped)
  kNoSpace,      // put: the file system is full (ENOSPC, EDQUOT, EFBIG); nothing was published
  kTimeout,      // the server did not answer within the configured timeout
  kUnavailable,  // the server is down or the tier is backing off before the next reconnect
  kIoError,      // any other error of the operating system or the server
};
std::string_view tier_status_name(TierStatus status);

// Counters of one tier. Every operation increments exactly one counter of its kind.
struct TierStats {
  uint64_t puts_ok = 0;
  uint64_t puts_no_space = 0;
  uint64_t puts_failed = 0;  // timeout, unavailable or I/O error
  uint64_t gets_ok = 0;
  uint64_t gets_miss = 0;
  uint64_t gets_corrupt = 0;
  uint64_t gets_failed = 0;  // timeout, unavailable or I/O error
  uint64_t timeouts = 0;     // of the above, how many were timeouts
  uint64_t reconnects = 0;   // successful reconnects after a failure (remote tiers)
  uint64_t bytes_put = 0;    // payload bytes of successful puts
  uint64_t bytes_got = 0;    // payload bytes of successful gets

  void count_put(TierStatus status, uint64_t bytes);
  void count_get(TierStatus status, uint64_t bytes);
  uint64_t puts() const { return puts_ok + puts_no_space + puts_failed; }
  uint64_t gets() const { return gets_ok + gets_miss + gets_corrupt + gets_failed; }
  // "puts 10 ok 9 nospace 1 failed 0 | gets ..." for logs and reports.
  std::string summary() const;
};

}  // namespace kvtwin::cuda::tiers
