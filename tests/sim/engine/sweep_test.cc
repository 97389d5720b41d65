#include "sim/cli/sweep_command.h"

#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "tests/support/paths.h"

namespace kvtwin::sim::cli {
namespace {

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// The grid's table follows the grid order whatever the number of threads, and each point is the
// same simulation as a plain run of that scenario.
TEST(Sweep, GridIsDeterministicAcrossJobCounts) {
  std::string dir = kvtwin::testing::scratch_dir();
  SweepOptions o;
  o.sets = {"workload.max_requests=60", "output.plots=false"};
  o.vary = {"cluster.instances=1,2", "cluster.router=round_robin,least_loaded"};
  o.quiet = true;
  o.jobs = 1;
  o.out = dir + "/a";
  ASSERT_EQ(run_sweep(o), 0);
  o.jobs = 3;
  o.out = dir + "/b";
  ASSERT_EQ(run_sweep(o), 0);
  std::string a = slurp(dir + "/a/sweep.csv");
  EXPECT_EQ(a, slurp(dir + "/b/sweep.csv"));
  std::istringstream lines(a);
  std::string header, l1, l2, l3, l4;
  std::getline(lines, header);
  std::getline(lines, l1);
  std::getline(lines, l2);
  std::getline(lines, l3);
  std::getline(lines, l4);
  EXPECT_EQ(header.rfind("cluster.instances,cluster.router,requests,", 0), 0u);
  EXPECT_EQ(l1.rfind("1,round_robin,60,", 0), 0u);
  EXPECT_EQ(l2.rfind("1,least_loaded,60,", 0), 0u);
  EXPECT_EQ(l3.rfind("2,round_robin,60,", 0), 0u);
  EXPECT_EQ(l4.rfind("2,least_loaded,60,", 0), 0u);
  // With one instance the router does not matter.
  EXPECT_EQ(l1.substr(l1.find(",60,")), l2.substr(l2.find(",60,")));
  EXPECT_EQ(slurp(dir + "/a/points/0/summary.json"), slurp(dir + "/b/points/0/summary.json"));
}

}  // namespace
}  // namespace kvtwin::sim::cli
