#include "sim/mover.h"

namespace kvtwin::sim {

std::string_view location_name(Location loc) {
  switch (loc) {
    case Location::kGpu:
      return "gpu";
    case Location::kCpu:
      return "cpu";
    case Location::kDisk:
      return "disk";
    case Location::kRemote:
      return "remote";
  }
  return "?";
}

}  // namespace kvtwin::sim
