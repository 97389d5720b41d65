#include "cuda/tiers/disk_tier.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "cuda/tiers/chunk_file.h"
#include "cuda/tiers/host_buffer.h"
#include "tests/support/paths.h"

namespace kvtwin::cuda::tiers {
namespace {

namespace fs = std::filesystem;

struct Mode {
  bool direct_io;
  bool use_uring;
};
std::string mode_name(const ::testing::TestParamInfo<Mode>& info) {
  return std::string(info.param.direct_io ? "Direct" : "Buffered") +
         (info.param.use_uring ? "Uring" : "Posix");
}

// Every regular file in `dir` (names only, sorted).
std::vector<std::string> files_in(const std::string& dir) {
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(dir)) names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

HostBuffer content_of(const std::string& key, size_t n) {
  HostBuffer b(n);
  fill_content(key, b.span());
  return b;
}

class DiskTierTest : public ::testing::TestWithParam<Mode> {
 protected:
  void SetUp() override { tier_ = open_tier({}); }
  std::unique_ptr<DiskTier> open_tier(std::function<int(DiskFaultPoint, std::string_view)> fault) {
    if (dir_.empty()) dir_ = kvtwin::testing::scratch_dir();
    DiskTierConfig c;
    c.path = dir_;
    c.direct_io = GetParam().direct_io;
    c.use_uring = GetParam().use_uring;
    c.queue_depth = 4;
    c.inject_fault = std::move(fault);
    std::string error;
    auto tier = DiskTier::open(c, &error);
    EXPECT_TRUE(tier) << error;
    return tier;
  }
  std::string dir_;
  std::unique_ptr<DiskTier> tier_;
};

TEST_P(DiskTierTest, ObjectsOfEveryAlignmentComeBackByteForByte) {
  for (size_t n :
       {size_t{0}, size_t{1}, size_t{4095}, size_t{4096}, size_t{4097}, size_t{(1 << 20) + 3}}) {
    const std::string key = "m@1@0@" + std::to_string(n) + "@half";
    HostBuffer in = content_of(key, n);
    ASSERT_EQ(tier_->put(key, in.span()), TierStatus::kOk) << n;
    HostBuffer out(n);
    ASSERT_EQ(tier_->get(key, out.span()), TierStatus::kOk) << n;
    EXPECT_EQ(first_content_mismatch(key, out.span()), n) << n;
    struct stat st;
    ASSERT_EQ(::stat(tier_->file_path(key).c_str(), &st), 0);
    EXPECT_EQ(static_cast<uint64_t>(st.st_size), chunk_file_bytes(n));
  }
  EXPECT_EQ(tier_->stats().puts_ok, 6u);
  EXPECT_EQ(tier_->stats().gets_ok, 6u);
}

TEST_P(DiskTierTest, UnalignedCallerBuffersAreBounced) {
  std::vector<uint8_t> in(3 * 4096 + 7 + 1);
  std::span<uint8_t> unaligned(in.data() + 1, in.size() - 1);
  fill_content("k", unaligned);
  ASSERT_EQ(tier_->put("k", unaligned), TierStatus::kOk);
  std::vector<uint8_t> out(in.size());
  std::span<uint8_t> out_unaligned(out.data() + 1, out.size() - 1);
  ASSERT_EQ(tier_->get("k", out_unaligned), TierStatus::kOk);
  EXPECT_EQ(first_content_mismatch("k", out_unaligned), out_unaligned.size());
}

TEST_P(DiskTierTest, AbsentKeyIsAMissAndAFileNameCollisionIsNotData) {
  HostBuffer out(4096);
  EXPECT_EQ(tier_->get("never-stored", out.span()), TierStatus::kMiss);
  // "a/b" and "a-b" share a file name (LMCache's "/" -> "-"); the header tells them apart.
  HostBuffer in = content_of("a/b", 4096);
  ASSERT_EQ(tier_->put("a/b", in.span()), TierStatus::kOk);
  EXPECT_EQ(tier_->get("a-b", out.span()), TierStatus::kMiss);
  EXPECT_EQ(tier_->get("a/b", out.span()), TierStatus::kOk);
  EXPECT_EQ(tier_->stats().gets_miss, 2u);
}

TEST_P(DiskTierTest, ABatchLargerThanTheQueueDepthMovesEveryObject) {
  std::vector<std::string> keys;
  std::vector<HostBuffer> ins, outs;
  for (int i = 0; i < 13; ++i) {
    keys.push_back("batch@" + std::to_string(i));
    ins.push_back(content_of(keys.back(), 4096 * (i + 1) + i));
    outs.emplace_back(ins.back().size());
  }
  std::vector<DiskPut> puts;
  std::vector<DiskGet> gets;
  for (int i = 0; i < 13; ++i) {
    puts.push_back({keys[i], ins[i].span()});
    gets.push_back({keys[i], outs[i].span()});
  }
  gets.push_back({"batch@absent", outs[0].span()});
  std::vector<TierStatus> put_status(puts.size()), get_status(gets.size());
  tier_->batched_put(puts, put_status);
  tier_->batched_get(gets, get_status);
  for (int i = 0; i < 13; ++i) {
    EXPECT_EQ(put_status[i], TierStatus::kOk) << i;
    EXPECT_EQ(get_status[i], TierStatus::kOk) << i;
    EXPECT_EQ(first_content_mismatch(keys[i], outs[i].span()), outs[i].size()) << i;
  }
  EXPECT_EQ(get_status[13], TierStatus::kMiss);
  EXPECT_EQ(files_in(dir_).size(), 13u);  // no temporary file left behind
}

TEST_P(DiskTierTest, ARePutReplacesTheObject) {
  HostBuffer a = content_of("k", 5000);
  ASSERT_EQ(tier_->put("k", a.span()), TierStatus::kOk);
  HostBuffer b = content_of("k", 9000);
  ASSERT_EQ(tier_->put("k", b.span()), TierStatus::kOk);
  HostBuffer out(9000);
  ASSERT_EQ(tier_->get("k", out.span()), TierStatus::kOk);
  HostBuffer old_size(5000);
  EXPECT_EQ(tier_->get("k", old_size.span()), TierStatus::kCorrupt);  // length differs
  EXPECT_TRUE(tier_->remove("k"));
  EXPECT_FALSE(tier_->contains("k"));
  EXPECT_EQ(tier_->get("k", out.span()), TierStatus::kMiss);
}

TEST_P(DiskTierTest, TruncatedFileIsCorruptNeverData) {
  HostBuffer in = content_of("k", 64 * 1024);
  ASSERT_EQ(tier_->put("k", in.span()), TierStatus::kOk);
  // Shrinking step by step, to unaligned sizes too (O_DIRECT reads end early there).
  for (uint64_t size : {chunk_file_bytes(in.size()) - 100, chunk_file_bytes(in.size()) - 4096,
                        uint64_t{4096 + 100}, uint64_t{4096}, uint64_t{100}, uint64_t{0}}) {
    fs::resize_file(tier_->file_path("k"), size);
    HostBuffer out(in.size());
    EXPECT_EQ(tier_->get("k", out.span()), TierStatus::kCorrupt) << size;
  }
  EXPECT_EQ(tier_->stats().gets_corrupt, 6u);
  EXPECT_EQ(tier_->stats().gets_ok, 0u);
}

TEST_P(DiskTierTest, FlippedBytesAnywhereAreCorruptNeverData) {
  const size_t n = 3 * 4096 + 100;
  HostBuffer in = content_of("k", n);
  // Offsets in the header, the payload body and the payload tail.
  for (uint64_t at :
       {uint64_t{3}, uint64_t{20}, uint64_t{4096}, uint64_t{4096 + 5000}, uint64_t{4096 + n - 1}}) {
    ASSERT_EQ(tier_->put("k", in.span()), TierStatus::kOk);
    {
      std::fstream f(tier_->file_path("k"), std::ios::in | std::ios::out | std::ios::binary);
      f.seekg(static_cast<std::streamoff>(at));
      char c;
      f.get(c);
      f.seekp(static_cast<std::streamoff>(at));
      f.put(static_cast<char>(c ^ 0x10));
    }
    HostBuffer out(n);
    EXPECT_EQ(tier_->get("k", out.span()), TierStatus::kCorrupt) << at;
  }
  EXPECT_EQ(tier_->stats().gets_corrupt, 5u);
}

// Disk full, injected at each step of a put: the put is dropped and counted, and neither the
// final name nor a temporary file is left behind; the next put succeeds.
TEST_P(DiskTierTest, FullDiskDropsThePutAndPublishesNothing) {
  for (DiskFaultPoint point : {DiskFaultPoint::kCreate, DiskFaultPoint::kWrite}) {
    int remaining = 1;
    auto tier = open_tier([&](DiskFaultPoint p, std::string_view) {
      return p == point && remaining-- > 0 ? ENOSPC : 0;
    });
    HostBuffer in = content_of("full", 1 << 20);
    EXPECT_EQ(tier->put("full", in.span()), TierStatus::kNoSpace);
    EXPECT_FALSE(tier->contains("full"));
    EXPECT_TRUE(files_in(dir_).empty());
    EXPECT_EQ(tier->stats().puts_no_space, 1u);
    HostBuffer out(1 << 20);
    EXPECT_EQ(tier->get("full", out.span()), TierStatus::kMiss);
    EXPECT_EQ(tier->put("full", in.span()), TierStatus::kOk);  // space again
    ASSERT_TRUE(tier->remove("full"));
  }
}

TEST_P(DiskTierTest, FailedRenameLeavesNoFile) {
  auto tier = open_tier(
      [](DiskFaultPoint p, std::string_view) { return p == DiskFaultPoint::kRename ? EIO : 0; });
  HostBuffer in = content_of("k", 8192);
  EXPECT_EQ(tier->put("k", in.span()), TierStatus::kIoError);
  EXPECT_TRUE(files_in(dir_).empty());
  EXPECT_EQ(tier->stats().puts_failed, 1u);
}

TEST_P(DiskTierTest, ReadErrorIsAFailedGet) {
  ASSERT_EQ(tier_->put("k", content_of("k", 8192).span()), TierStatus::kOk);
  auto tier = open_tier(
      [](DiskFaultPoint p, std::string_view) { return p == DiskFaultPoint::kRead ? EIO : 0; });
  HostBuffer out(8192);
  EXPECT_EQ(tier->get("k", out.span()), TierStatus::kIoError);
  EXPECT_EQ(tier->stats().gets_failed, 1u);
}

INSTANTIATE_TEST_SUITE_P(AllEngines, DiskTierTest,
                         ::testing::Values(Mode{true, true}, Mode{true, false}, Mode{false, true},
                                           Mode{false, false}),
                         mode_name);

TEST(DiskTierOpen, UncreatableDirectoryIsOneClearError) {
  const std::string dir = kvtwin::testing::scratch_dir();
  std::ofstream(dir + "/plain-file") << "x";
  DiskTierConfig c;
  c.path = dir + "/plain-file/tier";
  std::string error;
  EXPECT_EQ(DiskTier::open(c, &error), nullptr);
  EXPECT_NE(error.find("cannot create disk tier directory"), std::string::npos) << error;
  EXPECT_EQ(error.find('\n'), std::string::npos);
}

TEST(DiskTierOpen, FileSchemeIsAccepted) {
  DiskTierConfig c;
  c.path = "file://" + kvtwin::testing::scratch_dir();
  std::string error;
  auto tier = DiskTier::open(c, &error);
  ASSERT_TRUE(tier) << error;
  EXPECT_FALSE(tier->config().path.starts_with("file://"));
}

}  // namespace
}  // namespace kvtwin::cuda::tiers
