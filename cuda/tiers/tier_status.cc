#include "cuda/tiers/tier_status.h"

#include <sstream>

namespace kvtwin::cuda::tiers {

std::string_view tier_status_name(TierStatus status) {
  switch (status) {
    case TierStatus::kOk:
      return "ok";
    case TierStatus::kMiss:
      return "miss";
    case TierStatus::kCorrupt:
      return "corrupt";
    case TierStatus::kNoSpace:
      return "no_space";
    case TierStatus::kTimeout:
      return "timeout";
    case TierStatus::kUnavailable:
      return "unavailable";
    case TierStatus::kIoError:
      return "io_error";
  }
  return "?";
}

void TierStats::count_put(TierStatus status, uint64_t bytes) {
  switch (status) {
    case TierStatus::kOk:
      ++puts_ok;
      bytes_put += bytes;
      return;
    case TierStatus::kNoSpace:
      ++puts_no_space;
      return;
    case TierStatus::kTimeout:
      ++timeouts;
      [[fallthrough]];
    default:
      ++puts_failed;
  }
}

void TierStats::count_get(TierStatus status, uint64_t bytes) {
  switch (status) {
    case TierStatus::kOk:
      ++gets_ok;
      bytes_got += bytes;
      return;
    case TierStatus::kMiss:
      ++gets_miss;
      return;
    case TierStatus::kCorrupt:
      ++gets_corrupt;
      return;
    case TierStatus::kTimeout:
      ++timeouts;
      [[fallthrough]];
    default:
      ++gets_failed;
  }
}

std::string TierStats::summary() const {
  std::ostringstream out;
  out << "puts " << puts() << " (ok " << puts_ok << ", no_space " << puts_no_space << ", failed "
      << puts_failed << ") gets " << gets() << " (ok " << gets_ok << ", miss " << gets_miss
      << ", corrupt " << gets_corrupt << ", failed " << gets_failed << ") timeouts " << timeouts
      << " reconnects " << reconnects;
  return out.str();
}

}  // namespace kvtwin::cuda::tiers
