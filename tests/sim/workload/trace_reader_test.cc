#include "sim/workload/trace_reader.h"

#include <gtest/gtest.h>

#include <fstream>

#include "sim/io/input_error.h"
#include "tests/support/gzip.h"
#include "tests/support/paths.h"

namespace kvtwin::sim::workload {
namespace {

std::string write_file(const std::string& name, const std::string& bytes) {
  std::string path = kvtwin::testing::scratch_dir() + "/" + name;
  std::ofstream(path, std::ios::binary) << bytes;
  return path;
}

std::vector<TraceRequest> read_all(const std::string& path, TraceFormat f = TraceFormat::kAuto) {
  auto reader = open_trace(path, f);
  std::vector<TraceRequest> out;
  TraceRequest r;
  while (reader->next(&r)) out.push_back(r);
  return out;
}

// Runs `fn`, expecting an InputError; returns its message.
template <class F>
std::string input_error(F fn) {
  try {
    fn();
  } catch (const InputError& e) {
    return e.what();
  }
  ADD_FAILURE() << "no InputError";
  return "";
}

TEST(NativeTrace, ReadsRequiredAndOptionalColumnsInAnyOrder) {
  std::string path = write_file("t.csv",
                                "prompt_tokens,arrival_s,output_tokens,block_size,block_ids,"
                                "session_id\n"
                                "100,0.5,7,64,3 4,9\n"
                                "20,1.25,1,,,\n");
  auto rows = read_all(path);
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[0].index, 0u);
  EXPECT_EQ(rows[0].arrival, 500'000'000);
  EXPECT_EQ(rows[0].prompt_tokens, 100);
  EXPECT_EQ(rows[0].output_tokens, 7);
  EXPECT_EQ(rows[0].block_size, 64);
  EXPECT_EQ(rows[0].block_ids, (std::vector<uint64_t>{3, 4}));
  EXPECT_TRUE(rows[0].has_session);
  EXPECT_EQ(rows[0].session_id, 9u);
  EXPECT_EQ(rows[1].index, 1u);
  EXPECT_EQ(rows[1].arrival, 1'250'000'000);
  EXPECT_TRUE(rows[1].block_ids.empty());
  EXPECT_EQ(rows[1].block_size, 0);
  EXPECT_FALSE(rows[1].has_session);
}

TEST(NativeTrace, KeepsFull64BitIds) {
  std::string path = write_file("t.csv",
                                "arrival_s,prompt_tokens,output_tokens,block_size,block_ids\n"
                                "0,1024,1,512,18446744073709551615 4294967296\n");
  auto rows = read_all(path);
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0].block_ids, (std::vector<uint64_t>{18446744073709551615ULL, 4294967296ULL}));
}

TEST(NativeTrace, QuotedFieldsAndBlankLinesAreAccepted) {
  std::string path = write_file("t.csv",
                                "arrival_s,prompt_tokens,output_tokens,block_size,block_ids\n"
                                "\n"
                                "0,32,2,16,\"1 2\"\n");
  auto rows = read_all(path);
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0].block_ids.size(), 2u);
}

// The optional priority column: a signed integer, empty meaning 0; anything else is an error
// naming the row and the column. Mooncake rows take an optional "priority" key.
TEST(NativeTrace, ReadsPrioritiesAndRefusesMalformedOnes) {
  std::string path = write_file("prio.csv",
                                "arrival_s,prompt_tokens,output_tokens,priority\n"
                                "0,10,1,-5\n"
                                "1,10,1,\n"
                                "2,10,1,12\n");
  auto rows = read_all(path);
  ASSERT_EQ(rows.size(), 3u);
  EXPECT_EQ(rows[0].priority, -5);
  EXPECT_EQ(rows[1].priority, 0);
  EXPECT_EQ(rows[2].priority, 12);
  std::string bad =
      write_file("prio_bad.csv", "arrival_s,prompt_tokens,output_tokens,priority\n0,10,1,high\n");
  EXPECT_EQ(input_error([&] { read_all(bad); }),
            bad + ":2: priority: expected an integer, got 'high'");
  std::string moon = write_file("prio.jsonl",
                                "{\"timestamp\": 0, \"input_length\": 10, \"output_length\": 1, "
                                "\"hash_ids\": [], \"priority\": 3}\n"
                                "{\"timestamp\": 1, \"input_length\": 10, \"output_length\": 1, "
                                "\"hash_ids\": [], \"priority\": \"x\"}\n");
  EXPECT_NE(input_error([&] { read_all(moon); }).find(moon + ":2: priority:"), std::string::npos);
  auto reader = open_trace(moon, TraceFormat::kAuto);
  TraceRequest r;
  ASSERT_TRUE(reader->next(&r));
  EXPECT_EQ(r.priority, 3);
}

TEST(NativeTrace, MalformedRowsNameFileLineAndColumn) {
  const std::string header = "arrival_s,prompt_tokens,output_tokens\n";
  std::string p1 = write_file("a.csv", header + "0,10,1\n1,abc,1\n");
  EXPECT_EQ(input_error([&] { read_all(p1); }),
            p1 + ":3: prompt_tokens: expected an integer, got 'abc'");
  std::string p2 = write_file("b.csv", header + "0,10,1\n1,10\n");
  EXPECT_EQ(input_error([&] { read_all(p2); }), p2 + ":3: too few columns");
  std::string p3 = write_file("c.csv", header + "0,0,1\n");
  EXPECT_EQ(input_error([&] { read_all(p3); }),
            p3 + ":2: prompt_tokens: must be in [1, 2^30], got 0");
  std::string p4 = write_file("d.csv", header + "-1,10,1\n");
  EXPECT_NE(input_error([&] { read_all(p4); }).find(p4 + ":2: arrival_s:"), std::string::npos);
  std::string p5 = write_file("e.csv", "arrival_s,output_tokens\n0,1\n");
  EXPECT_EQ(input_error([&] { read_all(p5); }),
            p5 + ":1: prompt_tokens: required column missing from the header");
  std::string p6 = write_file("f.csv", header + "2,10,1\n1,10,1\n");
  EXPECT_EQ(input_error([&] { read_all(p6); }),
            p6 + ":3: arrival_s: arrival time decreases (trace must be sorted by arrival)");
  std::string p7 = write_file("g.csv",
                              "arrival_s,prompt_tokens,output_tokens,block_size,block_ids\n"
                              "0,16,1,16,1 2\n");
  EXPECT_EQ(input_error([&] { read_all(p7); }),
            p7 + ":2: block_ids: 2 ids for a prompt of only 1 blocks of 16 tokens");
  std::string p8 = write_file("h.csv",
                              "arrival_s,prompt_tokens,output_tokens,block_size,block_ids\n"
                              "0,16,1,16,-3\n");
  EXPECT_EQ(input_error([&] { read_all(p8); }),
            p8 + ":2: block_ids: expected unsigned 64-bit ids, got '-3'");
}

TEST(NativeTrace, MissingFileIsAnInputError) {
  EXPECT_NE(input_error([] { read_all("/nonexistent/trace.csv"); }).find("/nonexistent/trace.csv"),
            std::string::npos);
}

TEST(MooncakeTrace, ReadsTimestampsInMillisecondsAndWholeIds) {
  std::string path = write_file(
      "t.jsonl",
      "{\"timestamp\": 0, \"input_length\": 600, \"output_length\": 5, \"hash_ids\": [0, 1]}\n"
      "{\"timestamp\": 1500, \"input_length\": 10, \"output_length\": 1, \"hash_ids\": "
      "[18446744073709551615], \"session_id\": \"abc\", \"extra\": [1, {\"x\": 2}]}\n"
      "{\"timestamp\": 1500.25, \"input_length\": 10, \"output_length\": 1, \"hash_ids\": []}\n");
  auto rows = read_all(path);
  ASSERT_EQ(rows.size(), 3u);
  EXPECT_EQ(rows[0].arrival, 0);
  EXPECT_EQ(rows[0].block_size, 512);
  EXPECT_EQ(rows[0].block_ids, (std::vector<uint64_t>{0, 1}));
  EXPECT_EQ(rows[1].arrival, 1'500'000'000);
  EXPECT_EQ(rows[1].block_ids, (std::vector<uint64_t>{18446744073709551615ULL}));
  EXPECT_TRUE(rows[1].has_session);
  EXPECT_EQ(rows[2].arrival, 1'500'250'000);
  EXPECT_EQ(rows[2].block_size, 0);
}

TEST(MooncakeTrace, MalformedLinesNameFileLineAndKey) {
  auto line = [](const std::string& body) { return body + "\n"; };
  const std::string ok =
      "{\"timestamp\": 0, \"input_length\": 10, \"output_length\": 1, \"hash_ids\": [1]}";
  std::string p1 =
      write_file("a.jsonl", line(ok) + line("{\"timestamp\": 1, \"input_length\": 10"));
  EXPECT_NE(input_error([&] { read_all(p1); }).find(p1 + ":2: "), std::string::npos);
  std::string p2 = write_file(
      "b.jsonl", line(ok) + line("{\"timestamp\": 1, \"input_length\": 10, \"hash_ids\": [1]}"));
  EXPECT_EQ(input_error([&] { read_all(p2); }), p2 + ":2: output_length: missing");
  std::string p3 =
      write_file("c.jsonl", line("{\"timestamp\": 0, \"input_length\": 10, \"output_length\": 1, "
                                 "\"hash_ids\": [1, -2]}"));
  EXPECT_NE(input_error([&] { read_all(p3); }).find(p3 + ":1: hash_ids: expected unsigned 64-bit"),
            std::string::npos);
  std::string p4 =
      write_file("d.jsonl", line("{\"timestamp\": 0, \"input_length\": 513, \"output_length\": 1, "
                                 "\"hash_ids\": [1, 2, 3]}"));
  EXPECT_EQ(input_error([&] { read_all(p4); }),
            p4 + ":1: hash_ids: 3 ids for a prompt of only 2 blocks of 512 tokens");
  std::string p5 = write_file(
      "e.jsonl", line("{\"timestamp\": \"x\", \"input_length\": 5, \"output_length\": 1, "
                      "\"hash_ids\": []}"));
  EXPECT_NE(input_error([&] { read_all(p5); }).find(p5 + ":1: timestamp:"), std::string::npos);
  std::string p6 = write_file("f.jsonl", line(ok) + line("[1, 2]"));
  EXPECT_NE(input_error([&] { read_all(p6, TraceFormat::kMooncake); }).find(p6 + ":2: json:"),
            std::string::npos);
}

TEST(MooncakeTrace, GzipInputGivesTheSameRequests) {
  std::string text =
      "{\"timestamp\": 3, \"input_length\": 600, \"output_length\": 5, \"hash_ids\": [7, 8]}\n";
  auto plain = read_all(write_file("p.jsonl", text));
  auto packed = read_all(write_file("p.jsonl.gz", kvtwin::testing::gzip_bytes(text)));
  ASSERT_EQ(plain.size(), 1u);
  ASSERT_EQ(packed.size(), 1u);
  EXPECT_EQ(packed[0].block_ids, plain[0].block_ids);
  EXPECT_EQ(packed[0].arrival, plain[0].arrival);
}

TEST(AzureTrace, ArrivalsAreRelativeToTheFirstRow) {
  std::string path = write_file("a.csv",
                                "TIMESTAMP,ContextTokens,GeneratedTokens\n"
                                "2023-11-16 18:17:03.9799600,4808,10\n"
                                "2023-11-16 18:17:04.0319600,3180,8\n"
                                "2023-11-17 00:00:00,5,1");  // no trailing newline, next day
  auto rows = read_all(path);
  ASSERT_EQ(rows.size(), 3u);
  EXPECT_EQ(rows[0].arrival, 0);
  EXPECT_EQ(rows[1].arrival, 52'000'000);
  // 18:17:03.97996 → 24:00:00 is 5h 42m 56.02004s.
  EXPECT_EQ(rows[2].arrival, (5 * 3600 + 42 * 60 + 56) * kNsPerSecond + 20'040'000);
  EXPECT_EQ(rows[0].prompt_tokens, 4808);
  EXPECT_EQ(rows[0].output_tokens, 10);
  EXPECT_TRUE(rows[0].block_ids.empty());
}

TEST(AzureTrace, MalformedTimestampNamesLineAndColumn) {
  std::string path = write_file("a.csv",
                                "TIMESTAMP,ContextTokens,GeneratedTokens\n"
                                "2023-11-16 18:17:03.9799600,4808,10\n"
                                "2023-13-16 18:17:03,1,1\n");
  EXPECT_EQ(input_error([&] { read_all(path); }),
            path +
                ":3: TIMESTAMP: expected YYYY-MM-DD HH:MM:SS[.fffffff] (years 1900 to 2199), got "
                "'2023-13-16 18:17:03'");
}

TEST(TraceFormat, AutoDetectionFollowsTheFirstLine) {
  EXPECT_EQ(open_trace(write_file("x.txt", "{\"timestamp\": 0}\n"), TraceFormat::kAuto)->format(),
            TraceFormat::kMooncake);
  EXPECT_EQ(open_trace(write_file("y.txt", "TIMESTAMP,ContextTokens,GeneratedTokens\n"),
                       TraceFormat::kAuto)
                ->format(),
            TraceFormat::kAzure);
  EXPECT_EQ(
      open_trace(write_file("z.txt", "arrival_s,prompt_tokens,output_tokens\n"), TraceFormat::kAuto)
          ->format(),
      TraceFormat::kNative);
}

TEST(TraceBytes, InMemoryTraceReadsLikeAFile) {
  std::string text =
      "{\"timestamp\": 3, \"input_length\": 600, \"output_length\": 5, \"hash_ids\": [7, 8]}\n"
      "{\"timestamp\": 4, \"input_length\": 60, \"output_length\": 5, \"hash_ids\": [9]}";
  auto reader = open_trace_bytes("<mem>", text, TraceFormat::kAuto);
  TraceRequest r;
  ASSERT_TRUE(reader->next(&r));
  EXPECT_EQ(r.block_ids, (std::vector<uint64_t>{7, 8}));
  ASSERT_TRUE(reader->next(&r));
  EXPECT_EQ(r.arrival, 4'000'000);
  EXPECT_FALSE(reader->next(&r));
}

// The shipped traces read completely, with the row counts their README gives.
TEST(ShippedTraces, EveryRowParses) {
  struct Case {
    const char* path;
    size_t rows;
  } cases[] = {{"traces/mooncake_fast25/conversation_trace.jsonl", 12031},
               {"traces/mooncake_fast25/synthetic_trace.jsonl", 3993},
               {"traces/azure_llm_2023/AzureLLMInferenceTrace_code.csv", 8819},
               {"traces/azure_llm_2023/AzureLLMInferenceTrace_conv.csv", 19366},
               {"traces/examples/mooncake_conversation_10min.jsonl", 1750}};
  for (const Case& c : cases) {
    auto reader = open_trace(kvtwin::testing::source_path(c.path), TraceFormat::kAuto);
    TraceRequest r;
    size_t n = 0;
    while (reader->next(&r)) ++n;
    EXPECT_EQ(n, c.rows) << c.path;
  }
}

}  // namespace
}  // namespace kvtwin::sim::workload
