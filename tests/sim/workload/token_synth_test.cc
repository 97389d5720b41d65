#include "sim/workload/token_synth.h"

#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include "sim/io/input_error.h"
#include "sim/workload/workload.h"

namespace kvtwin::sim::workload {
namespace {

TraceRequest request(uint64_t index, int64_t prompt, int32_t bs, std::vector<uint64_t> ids) {
  TraceRequest r;
  r.index = index;
  r.prompt_tokens = prompt;
  r.output_tokens = 1;
  r.block_size = ids.empty() ? 0 : bs;
  r.block_ids = std::move(ids);
  return r;
}

std::vector<int64_t> tokens(const TokenSynthesizer& s, const TraceRequest& r) {
  std::vector<int64_t> t;
  s.prompt_tokens(r, &t);
  return t;
}

TEST(TokenSynthesizer, SharedIdsGiveSharedTokensAndTheRestDiffers) {
  TokenSynthesizer s(7, 128256);
  auto a = tokens(s, request(0, 1200, 512, {1, 2, 3}));
  auto b = tokens(s, request(1, 1100, 512, {1, 2, 9}));
  ASSERT_EQ(a.size(), 1200u);
  ASSERT_EQ(b.size(), 1100u);
  EXPECT_TRUE(std::equal(a.begin(), a.begin() + 1024, b.begin()));
  EXPECT_FALSE(std::equal(a.begin() + 1024, a.begin() + 1100, b.begin() + 1024));
}

TEST(TokenSynthesizer, TokensBeyondTheIdsAreUniquePerRequest) {
  TokenSynthesizer s(7, 1000);
  auto a = tokens(s, request(0, 100, 0, {}));
  auto b = tokens(s, request(1, 100, 0, {}));
  EXPECT_NE(a, b);
  EXPECT_EQ(a, tokens(s, request(0, 100, 0, {})));  // deterministic
}

TEST(TokenSynthesizer, SeedChangesTokensNotStructure) {
  TokenSynthesizer s1(1, 128256), s2(2, 128256);
  EXPECT_NE(tokens(s1, request(0, 64, 32, {5, 6})), tokens(s2, request(0, 64, 32, {5, 6})));
}

// Equal ids ⇒ equal tokens over the shared blocks; and every engine block (of a size dividing the
// trace's) inside the shared region is equal, while the first block after it differs.
RC_GTEST_PROP(TokenSynthesizer, EqualIdPrefixesGiveEqualEngineBlocks, ()) {
  const int32_t trace_bs = *rc::gen::element(16, 64, 512);
  const int32_t engine_bs = trace_bs / *rc::gen::element(1, 2, 4, 8, 16);
  const int shared = *rc::gen::inRange(0, 4);
  const int extra_a = *rc::gen::inRange(1, 3);
  const int extra_b = *rc::gen::inRange(1, 3);
  std::vector<uint64_t> ids_a, ids_b;
  for (int i = 0; i < shared; ++i) {
    uint64_t id = *rc::gen::arbitrary<uint64_t>();
    ids_a.push_back(id);
    ids_b.push_back(id);
  }
  for (int i = 0; i < extra_a; ++i) ids_a.push_back((uint64_t{1} << 62) + i);
  for (int i = 0; i < extra_b; ++i) ids_b.push_back((uint64_t{1} << 61) + i);
  TokenSynthesizer s(*rc::gen::arbitrary<uint64_t>(), 50000);
  auto a = tokens(s, request(0, int64_t{trace_bs} * (shared + extra_a), trace_bs, ids_a));
  auto b = tokens(s, request(1, int64_t{trace_bs} * (shared + extra_b), trace_bs, ids_b));
  const size_t shared_tokens = static_cast<size_t>(shared) * trace_bs;
  for (size_t blk = 0; blk * engine_bs < shared_tokens; ++blk)
    RC_ASSERT(std::equal(a.begin() + blk * engine_bs, a.begin() + (blk + 1) * engine_bs,
                         b.begin() + blk * engine_bs));
  // The first trace block after the shared prefix differs between the two.
  RC_ASSERT(!std::equal(a.begin() + shared_tokens, a.begin() + shared_tokens + trace_bs,
                        b.begin() + shared_tokens));
  for (int64_t t : a) RC_ASSERT(t >= 0 && t < 50000);
}

TEST(Workload, RateScaleDividesArrivalsAndLimitsStopTheStream) {
  std::string text;
  for (int i = 0; i < 10; ++i)
    text += "{\"timestamp\": " + std::to_string(i * 1000) +
            ", \"input_length\": 10, \"output_length\": 1, \"hash_ids\": [1]}\n";
  WorkloadOptions o;
  o.rate_scale = 2;
  o.max_duration_s = 3;  // scaled arrivals 0, 0.5, ..., 2.5 s pass; 3.0 s stops
  Workload w(open_trace_bytes("<mem>", text, TraceFormat::kAuto), o);
  std::vector<SimTime> arrivals;
  TraceRequest r;
  while (w.next(&r)) arrivals.push_back(r.arrival);
  EXPECT_EQ(arrivals, (std::vector<SimTime>{0, 500'000'000, 1'000'000'000, 1'500'000'000,
                                            2'000'000'000, 2'500'000'000}));
  WorkloadOptions o2;
  o2.max_requests = 3;
  Workload w2(open_trace_bytes("<mem>", text, TraceFormat::kAuto), o2);
  int n = 0;
  while (w2.next(&r)) ++n;
  EXPECT_EQ(n, 3);
}

TEST(Workload, SyntheticPrefixesFollowTheGroupsAndLeaveTraceIdsAlone) {
  std::string text = "arrival_s,prompt_tokens,output_tokens,block_size,block_ids\n";
  for (int i = 0; i < 400; ++i) text += std::to_string(i) + ",100,1,,\n";
  text += "400,100,1,16,42\n";
  WorkloadOptions o;
  o.prefix_groups = 4;
  o.prefix_tokens = 40;  // two 16-token blocks
  o.prefix_zipf = 1.0;
  o.prefix_block_size = 16;
  o.seed = 3;
  Workload w(open_trace_bytes("<mem>", text, TraceFormat::kAuto), o);
  TraceRequest r;
  std::map<uint64_t, int> first_ids;
  int n = 0;
  while (w.next(&r)) {
    if (r.index == 400) {
      EXPECT_EQ(r.block_ids, (std::vector<uint64_t>{42}));
      continue;
    }
    ASSERT_EQ(r.block_ids.size(), 2u);
    EXPECT_EQ(r.block_size, 16);
    uint64_t g = 0;
    for (; g < 4; ++g)
      if (r.block_ids[0] == Workload::synthetic_id(3, g, 0)) break;
    ASSERT_LT(g, 4u);
    EXPECT_EQ(r.block_ids[1], Workload::synthetic_id(3, g, 1));
    ++first_ids[g];
    ++n;
  }
  EXPECT_EQ(n, 400);
  // Zipf(1) over 4 groups: shares 0.48, 0.24, 0.16, 0.12; group 0 is the most popular.
  EXPECT_GT(first_ids[0], first_ids[1]);
  EXPECT_GT(first_ids[1], first_ids[3]);
}

// Ten 64-token requests, one a second from 0 s (a native CSV).
std::string one_a_second() {
  std::string text = "arrival_s,prompt_tokens,output_tokens\n";
  for (int i = 0; i < 10; ++i) text += std::to_string(i) + ",64,1\n";
  return text;
}

// workload.start_s: a window [start_s, start_s + max_duration_s) of the scaled arrivals, shifted to
// start at 0. Arrivals 0, 1, ..., 9 s at rate_scale 2 are 0, 0.5, ..., 4.5 s; the window [1.2 s,
// 3.2 s) holds 1.5, 2.0, 2.5 and 3.0 s (trace indices 3 to 6), which arrive at 0.3, 0.8, 1.3 and
// 1.8 s. Each keeps the synthetic prefix a whole replay gives the same request (the groups are
// drawn for the dropped requests too), and max_requests counts the window's requests only.
TEST(Workload, StartSReplaysAWindowOfTheTraceWithItsOwnPrefixes) {
  const std::string text = one_a_second();
  WorkloadOptions o;
  o.rate_scale = 2;
  o.prefix_groups = 5;
  o.prefix_tokens = 32;
  o.seed = 11;
  std::map<uint64_t, std::vector<uint64_t>> whole;
  Workload all(open_trace_bytes("<mem>", text, TraceFormat::kAuto), o);
  TraceRequest r;
  while (all.next(&r)) whole[r.index] = r.block_ids;
  ASSERT_EQ(whole.size(), 10u);

  o.start_s = 1.2;
  o.max_duration_s = 2;
  Workload window(open_trace_bytes("<mem>", text, TraceFormat::kAuto), o);
  std::vector<uint64_t> indices;
  std::vector<SimTime> arrivals;
  while (window.next(&r)) {
    indices.push_back(r.index);
    arrivals.push_back(r.arrival);
    EXPECT_EQ(r.block_ids, whole[r.index]) << r.index;
  }
  EXPECT_EQ(indices, (std::vector<uint64_t>{3, 4, 5, 6}));
  EXPECT_EQ(arrivals,
            (std::vector<SimTime>{300'000'000, 800'000'000, 1'300'000'000, 1'800'000'000}));

  o.max_requests = 2;
  Workload capped(open_trace_bytes("<mem>", text, TraceFormat::kAuto), o);
  indices.clear();
  while (capped.next(&r)) indices.push_back(r.index);
  EXPECT_EQ(indices, (std::vector<uint64_t>{3, 4}));
}

// workload.warmup_s: the window [1.2 s, 3.2 s) of the scaled arrivals 0, 0.5, ..., 4.5 s with a
// 0.9-s warm-up starts the replay at 0.3 s. Arrivals 0.5 and 1.0 s (indices 1, 2) are the
// warm-up, flagged, at 0.2 and 0.7 s; the window's 1.5 ... 3.0 s arrive at 1.2 ... 2.7 s, from
// measure_from() = 0.9 s on. max_requests counts the window's requests only. With spacing_s the
// window starts with its first request (kSimTimeMax), and without a warm-up at 0.
TEST(Workload, AWarmupReplaysTheTimeBeforeTheWindowFlagged) {
  const std::string text = one_a_second();
  WorkloadOptions o;
  o.rate_scale = 2;
  o.start_s = 1.2;
  o.max_duration_s = 2;
  o.warmup_s = 0.9;
  o.max_requests = 3;
  Workload w(open_trace_bytes("<mem>", text, TraceFormat::kAuto), o);
  EXPECT_EQ(w.measure_from(), 900'000'000);
  std::vector<uint64_t> indices;
  std::vector<SimTime> arrivals;
  std::vector<bool> warmup;
  TraceRequest r;
  while (w.next(&r)) {
    indices.push_back(r.index);
    arrivals.push_back(r.arrival);
    warmup.push_back(r.warmup);
  }
  EXPECT_EQ(indices, (std::vector<uint64_t>{1, 2, 3, 4, 5}));
  EXPECT_EQ(arrivals, (std::vector<SimTime>{200'000'000, 700'000'000, 1'200'000'000, 1'700'000'000,
                                            2'200'000'000}));
  EXPECT_EQ(warmup, (std::vector<bool>{true, true, false, false, false}));

  o.spacing_s = 10;
  Workload spaced(open_trace_bytes("<mem>", text, TraceFormat::kAuto), o);
  EXPECT_EQ(spaced.measure_from(), kSimTimeMax);
  arrivals.clear();
  while (spaced.next(&r)) arrivals.push_back(r.arrival);
  EXPECT_EQ(arrivals, (std::vector<SimTime>{0, 10'000'000'000, 20'000'000'000, 30'000'000'000,
                                            40'000'000'000}));
  o.warmup_s = 0;
  EXPECT_EQ(Workload(open_trace_bytes("<mem>", text, TraceFormat::kAuto), o).measure_from(), 0);
}

// A window that holds no request is an input error, not an empty run: past the last arrival (4.5 s
// scaled), or between two arrivals.
TEST(Workload, AWindowWithoutRequestsIsAnInputError) {
  const std::string text = one_a_second();
  for (auto [start, duration] : {std::pair{5.0, 0.0}, std::pair{1.1, 0.3}}) {
    WorkloadOptions o;
    o.rate_scale = 2;
    o.start_s = start;
    o.max_duration_s = duration;
    Workload w(open_trace_bytes("<mem>", text, TraceFormat::kAuto), o);
    TraceRequest r;
    try {
      w.next(&r);
      ADD_FAILURE() << "no InputError for start " << start;
    } catch (const InputError& e) {
      EXPECT_NE(std::string(e.what()).find("no request arrives"), std::string::npos) << e.what();
    }
  }
}

// Position by position, whatever the buffering: a token inside block k of the ids is the token at
// the same offset of a request holding only that id, a token past the ids is the token at the same
// position of the request with no ids, and the tokens are appended after what *out holds.
RC_GTEST_PROP(TokenSynthesizer, EveryTokenDependsOnlyOnItsIdAndOffsetOrItsPosition, ()) {
  TokenSynthesizer s(*rc::gen::arbitrary<uint64_t>(), 128256);
  const uint64_t index = *rc::gen::inRange<uint64_t>(0, 1000);
  const int32_t bs = *rc::gen::inRange(1, 600);
  const int num_ids = *rc::gen::inRange(0, 6);
  std::vector<uint64_t> ids;
  for (int i = 0; i < num_ids; ++i) ids.push_back(*rc::gen::inRange<uint64_t>(0, 50));
  const int64_t n = *rc::gen::inRange<int64_t>(0, int64_t{bs} * (num_ids + 1) + 300);
  TraceRequest r = request(index, n, bs, ids);
  std::vector<int64_t> got = {-1, -2, -3};
  s.prompt_tokens(r, &got);
  RC_ASSERT(got.size() == static_cast<size_t>(n) + 3);
  RC_ASSERT(got[0] == -1 && got[1] == -2 && got[2] == -3);
  const std::vector<int64_t> plain = tokens(s, request(index, n, 0, {}));
  for (int64_t p = 0; p < n; ++p) {
    const int64_t k = p / bs;
    int64_t want;
    if (k < num_ids) {
      want = tokens(s, request(index + 1, bs, bs, {ids[static_cast<size_t>(k)]}))[p % bs];
    } else {
      want = plain[static_cast<size_t>(p)];
    }
    RC_ASSERT(got[static_cast<size_t>(p) + 3] == want);
  }
}

TEST(Workload, RateScaleRoundsScaledArrivalsToTheNearestNanosecond) {
  // Mooncake timestamps are milliseconds: 2 ms = 2,000,000 ns; divided by rate_scale 3 that is
  // 666,666.67 ns, which rounds to 666,667 (llround), not down to 666,666; 1 ms / 3 =
  // 333,333.33 → 333,333.
  std::string text =
      "{\"timestamp\": 1, \"input_length\": 10, \"output_length\": 1, \"hash_ids\": [1]}\n"
      "{\"timestamp\": 2, \"input_length\": 10, \"output_length\": 1, \"hash_ids\": [1]}\n";
  WorkloadOptions o;
  o.rate_scale = 3;
  Workload w(open_trace_bytes("<mem>", text, TraceFormat::kAuto), o);
  std::vector<SimTime> arrivals;
  TraceRequest r;
  while (w.next(&r)) arrivals.push_back(r.arrival);
  EXPECT_EQ(arrivals, (std::vector<SimTime>{333'333, 666'667}));
}

TEST(Workload, SyntheticPrefixIsCappedByThePromptLength) {
  // prefix_tokens 40 with 16-token blocks gives two shared blocks, but a 20-token prompt holds
  // only min(40, 20) / 16 = 1 whole block: ids never describe tokens past the prompt; a 10-token
  // prompt gets none (and no block size).
  std::string text =
      "arrival_s,prompt_tokens,output_tokens,block_size,block_ids\n0,20,1,,\n1,10,1,,\n";
  WorkloadOptions o;
  o.prefix_groups = 1;
  o.prefix_tokens = 40;
  o.prefix_block_size = 16;
  o.seed = 3;
  Workload w(open_trace_bytes("<mem>", text, TraceFormat::kAuto), o);
  TraceRequest r;
  ASSERT_TRUE(w.next(&r));
  EXPECT_EQ(r.block_ids, (std::vector<uint64_t>{Workload::synthetic_id(3, 0, 0)}));
  EXPECT_EQ(r.block_size, 16);
  ASSERT_TRUE(w.next(&r));
  EXPECT_TRUE(r.block_ids.empty());
  EXPECT_EQ(r.block_size, 0);
}

TEST(TokenSynthesizer, OutputTokensAreNotACopyOfThePrompt) {
  // Output token i and the i-th unique prompt token of the same request come from different
  // streams (the output stream is offset by 2^40): otherwise every request would "generate" its
  // own prompt again, and a session's next turn (prompt + output) would repeat the prompt's
  // token sequence. With a 128k vocabulary, 16 equal draws by chance are out of the question.
  TokenSynthesizer s(7, 128256);
  auto prompt = tokens(s, request(5, 16, 0, {}));
  std::vector<int64_t> out;
  for (int64_t i = 0; i < 16; ++i) out.push_back(s.output_token(5, i));
  EXPECT_NE(out, prompt);
}

}  // namespace
}  // namespace kvtwin::sim::workload
