// The disk tier on a file system that really fills up: a size-limited tmpfs (when this process
// may mount one) and a file-size limit (RLIMIT_FSIZE, available to every user). Puts that do not
// fit are dropped and counted; no partial file is ever visible under a final name; every object
// that was published reads back byte for byte.
#include <gtest/gtest.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <unistd.h>

#include <csignal>
#include <cstring>
#include <filesystem>
#include <string>

#include "cuda/tiers/chunk_file.h"
#include "cuda/tiers/disk_tier.h"
#include "cuda/tiers/host_buffer.h"
#include "tests/support/paths.h"

namespace kvtwin::cuda::tiers {
namespace {

namespace fs = std::filesystem;

// Fills `tier` with 16 KiB objects until puts fail; returns the keys that were published.
std::vector<std::string> fill_until_full(DiskTier& tier, int max_objects) {
  std::vector<std::string> published;
  for (int i = 0; i < max_objects; ++i) {
    const std::string key = "fill@" + std::to_string(i);
    HostBuffer in(16 * 1024);
    fill_content(key, in.span());
    const TierStatus s = tier.put(key, in.span());
    if (s == TierStatus::kOk) {
      published.push_back(key);
    } else {
      EXPECT_EQ(s, TierStatus::kNoSpace) << key;
      EXPECT_FALSE(tier.contains(key)) << key;
    }
  }
  return published;
}

void expect_only_published_files(DiskTier& tier, const std::string& dir,
                                 const std::vector<std::string>& published) {
  size_t files = 0;
  for (const auto& e : fs::directory_iterator(dir)) {
    ++files;
    EXPECT_EQ(e.path().filename().string().find(".tmp."), std::string::npos) << e.path();
  }
  EXPECT_EQ(files, published.size());
  for (const std::string& key : published) {
    HostBuffer out(16 * 1024);
    ASSERT_EQ(tier.get(key, out.span()), TierStatus::kOk) << key;
    EXPECT_EQ(first_content_mismatch(key, out.span()), out.size()) << key;
  }
}

TEST(DiskFull, SizeLimitedTmpfsDropsPutsThatDoNotFit) {
  const std::string dir = kvtwin::testing::scratch_dir() + "/mnt";
  fs::create_directories(dir);
  if (::mount("tmpfs", dir.c_str(), "tmpfs", 0, "size=128k") != 0)
    GTEST_SKIP() << "cannot mount a tmpfs here (" << std::strerror(errno)
                 << "); RLIMIT_FSIZE test covers the same path";
  {
    DiskTierConfig c;
    c.path = dir;
    c.direct_io = false;  // O_DIRECT on tmpfs needs Linux 6.6+; the full-disk path is the same
    std::string error;
    auto tier = DiskTier::open(c, &error);
    ASSERT_TRUE(tier) << error;
    const auto published = fill_until_full(*tier, 20);
    EXPECT_GT(published.size(), 0u);
    EXPECT_LT(published.size(), 20u);
    EXPECT_EQ(tier->stats().puts_no_space, 20 - published.size());
    expect_only_published_files(*tier, dir, published);
  }
  ::umount(dir.c_str());
}

TEST(DiskFull, FileSizeLimitDropsLargePutsOnly) {
  const std::string dir = kvtwin::testing::scratch_dir();
  DiskTierConfig c;
  c.path = dir;
  std::string error;
  auto tier = DiskTier::open(c, &error);
  ASSERT_TRUE(tier) << error;
  auto old_handler = std::signal(SIGXFSZ, SIG_IGN);
  rlimit old_limit;
  ::getrlimit(RLIMIT_FSIZE, &old_limit);
  rlimit limit = old_limit;
  limit.rlim_cur = 64 * 1024;  // a 16 KiB object fits, a 1 MiB one does not
  ASSERT_EQ(::setrlimit(RLIMIT_FSIZE, &limit), 0);
  HostBuffer big(1 << 20);
  fill_content("big", big.span());
  const TierStatus big_status = tier->put("big", big.span());
  const auto published = fill_until_full(*tier, 3);
  ::setrlimit(RLIMIT_FSIZE, &old_limit);
  std::signal(SIGXFSZ, old_handler);
  EXPECT_EQ(big_status, TierStatus::kNoSpace);
  EXPECT_FALSE(tier->contains("big"));
  EXPECT_EQ(published.size(), 3u);
  expect_only_published_files(*tier, dir, published);
}

}  // namespace
}  // namespace kvtwin::cuda::tiers
