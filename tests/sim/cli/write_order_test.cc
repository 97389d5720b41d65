// The order of LMCache's transfers as the run's Chrome trace records them: a store's disk writes
// start only once its GPU -> CPU copy has put their bytes in CPU memory (upstream's store copies,
// then batched_put queues the writes), even when an earlier write ends during that copy and frees
// a disk writer.
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <regex>
#include <string>
#include <vector>

#include "tests/support/command.h"
#include "tests/support/paths.h"

namespace {

using kvtwin::testing::run_kvtwin;
using kvtwin::testing::slurp;

struct Span {
  double start_us = 0, end_us = 0;
};

// The "store" (GPU -> CPU) and "write" (CPU -> disk) events of trace.json, by start time.
void read_events(const std::string& trace, std::vector<Span>* stores, std::vector<Span>* writes) {
  static const std::regex event(
      R"re("name": "(store|write)", "ts": ([0-9.]+), "dur": ([0-9.]+))re");
  for (auto it = std::sregex_iterator(trace.begin(), trace.end(), event);
       it != std::sregex_iterator(); ++it) {
    const double ts = std::stod((*it)[2]), dur = std::stod((*it)[3]);
    ((*it)[1] == "store" ? stores : writes)->push_back({ts, ts + dur});
  }
  auto by_start = [](const Span& a, const Span& b) { return a.start_us < b.start_us; };
  std::sort(stores->begin(), stores->end(), by_start);
  std::sort(writes->begin(), writes->end(), by_start);
}

// Llama-3.1-8B with a disk tier, slow PCIe D2H (1 GB/s: a 4-chunk store copies for ~134 ms) and a
// 2-GB/s disk. W stores 4 chunks; its 4 disk writes (~67 ms) end while A's copy runs (A arrived
// during W's step and runs next). A's writes must wait for A's copy all the same.
TEST(WriteOrder, AStoresDiskWritesStartAfterItsCopyEvenWhenAWriterFreesDuringIt) {
  const std::string dir = kvtwin::testing::scratch_dir();
  std::ofstream(dir + "/t.csv") << "arrival_s,prompt_tokens,output_tokens,block_size,block_ids\n"
                                   "0,1024,1,512,1 2\n"
                                   "0.001,1024,1,512,3 4\n";
  auto r = run_kvtwin(
      "run -q --scenario " + kvtwin::testing::source_path("scenarios/llama31_8b_h100_cpu.toml") +
      " --trace " + dir + "/t.csv --set cluster.instances=1" +
      " --set lmcache.max_local_disk_size_gb=10 --set links.pcie_d2h_gbps=1" +
      " --set links.disk_write_gbps=2 --set output.plots=false --out " + dir + "/run");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::vector<Span> stores, writes;
  read_events(slurp(dir + "/run/trace.json"), &stores, &writes);
  ASSERT_EQ(stores.size(), 2u);
  ASSERT_EQ(writes.size(), 8u);
  for (int i = 0; i < 4; ++i) {
    EXPECT_GE(writes[i].start_us, stores[0].end_us) << i;
    // The premise: W's writes end inside A's copy.
    EXPECT_GT(writes[i].end_us, stores[1].start_us) << i;
    EXPECT_LT(writes[i].end_us, stores[1].end_us) << i;
  }
  for (int i = 4; i < 8; ++i) EXPECT_GE(writes[i].start_us, stores[1].end_us) << i;
}

}  // namespace
