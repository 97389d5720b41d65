#include "sim/golden/formats.h"

#include "sim/golden/lmcache_replay.h"
#include "sim/golden/vllm_golden.h"

namespace kvtwin::sim::golden {

const std::vector<GoldenFormat>& golden_formats() {
  static const std::vector<GoldenFormat> formats = {
      {kVllmGoldenFormat, kVllmGoldenVersion, replay_vllm_kv_golden, bench_vllm_kv_golden},
      {"lmcache-golden", 1, &replay_lmcache},
  };
  return formats;
}

}  // namespace kvtwin::sim::golden
