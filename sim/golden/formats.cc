#include "sim/golden/formats.h"

#include "sim/golden/vllm_golden.h"

namespace kvtwin::sim::golden {

const std::vector<GoldenFormat>& golden_formats() {
  static const std::vector<GoldenFormat> formats = {
      {kVllmGoldenFormat, kVllmGoldenVersion, replay_vllm_kv_golden, bench_vllm_kv_golden},
  };
  return formats;
}

}  // namespace kvtwin::sim::golden
