#include "sim/workload/trace_writer.h"

#include <gtest/gtest.h>

#include <fstream>
#include <vector>

#include "sim/io/input_error.h"
#include "tests/support/command.h"
#include "tests/support/paths.h"

namespace kvtwin::sim::workload {
namespace {

using kvtwin::testing::slurp;

// The test's scratch directory (scratch_dir() starts a fresh one at each call).
const std::string& scratch() {
  static const std::string dir = kvtwin::testing::scratch_dir();
  return dir;
}

std::string convert(const std::string& in, TraceFormat to, const std::string& out_name) {
  std::string out = scratch() + "/" + out_name;
  std::FILE* f = std::fopen(out.c_str(), "wb");
  TraceWriter w(f, to);
  auto reader = open_trace(in, TraceFormat::kAuto);
  TraceRequest r;
  while (reader->next(&r)) w.write(r);
  std::fclose(f);
  return out;
}

TEST(TraceWriter, MooncakeToMooncakeReproducesTheFileByteForByte) {
  std::string in =
      kvtwin::testing::source_path("traces/examples/mooncake_conversation_10min.jsonl");
  EXPECT_EQ(slurp(convert(in, TraceFormat::kMooncake, "out.jsonl")), slurp(in));
}

TEST(TraceWriter, NativeRoundTripKeepsEveryField) {
  std::string in =
      kvtwin::testing::source_path("traces/examples/mooncake_conversation_10min.jsonl");
  std::string native = convert(in, TraceFormat::kNative, "out.csv");
  std::string back = convert(native, TraceFormat::kMooncake, "back.jsonl");
  EXPECT_EQ(slurp(back), slurp(in));
}

TEST(TraceWriter, NativeRowPrintsExactArrivalAndIds) {
  TraceRequest r;
  r.arrival = 1'000'000'001;
  r.prompt_tokens = 20;
  r.output_tokens = 3;
  r.has_session = true;
  r.session_id = 5;
  r.block_size = 16;
  r.block_ids = {18446744073709551615ULL, 2};
  EXPECT_EQ(TraceWriter::native_row(r), "1.000000001,20,3,5,16,18446744073709551615 2,");
  r.block_ids.clear();
  r.block_size = 0;
  r.has_session = false;
  r.arrival = 2'500'000'000;
  EXPECT_EQ(TraceWriter::native_row(r), "2.5,20,3,,,,");
  r.priority = -3;
  EXPECT_EQ(TraceWriter::native_row(r), "2.5,20,3,,,,-3");
}

// Priorities survive native -> Mooncake -> native (the Mooncake rows carry kvtwin's "priority"
// key only where it is not 0).
TEST(TraceWriter, PrioritiesSurviveBothFormats) {
  const std::string in = scratch() + "/prio.csv";
  std::ofstream(in) << "arrival_s,prompt_tokens,output_tokens,priority\n"
                       "0,10,2,\n"
                       "1,20,3,7\n"
                       "2,30,4,-2\n";
  const std::string jsonl = convert(in, TraceFormat::kMooncake, "prio.jsonl");
  const std::string text = slurp(jsonl);
  EXPECT_EQ(text.find("\"priority\": 0"), std::string::npos) << text;
  EXPECT_NE(text.find("\"priority\": 7"), std::string::npos) << text;
  const std::string back = convert(jsonl, TraceFormat::kNative, "prio_back.csv");
  auto reader = open_trace(back, TraceFormat::kAuto);
  TraceRequest r;
  std::vector<int64_t> priorities;
  while (reader->next(&r)) priorities.push_back(r.priority);
  EXPECT_EQ(priorities, (std::vector<int64_t>{0, 7, -2}));
}

TEST(TraceWriter, MooncakeRejectsIdsOfAnotherBlockSize) {
  TraceRequest r;
  r.prompt_tokens = 20;
  r.output_tokens = 3;
  r.block_size = 16;
  r.block_ids = {1};
  EXPECT_THROW(TraceWriter::mooncake_row(r), InputError);
}

}  // namespace
}  // namespace kvtwin::sim::workload
