#include "sim/golden/formats.h"

namespace kvtwin::sim::golden {

const std::vector<GoldenFormat>& golden_formats() {
  static const std::vector<GoldenFormat> formats = {};
  return formats;
}

}  // namespace kvtwin::sim::golden
