// DiskDirectory: an open-addressing table of file names behaves as a plain map of names to files.
#include "model/lmcache/disk_directory.h"

#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include <string>
#include <unordered_map>

namespace kvtwin::model::lmcache {
namespace {

std::string name_of(int i) {
  return "toy-model@1@0@" + std::to_string(i * 7919) + "@half.pt";
}

TEST(DiskDirectory, WrittenFilesAreFoundOverwrittenAndRemovedOnce) {
  DiskDirectory d;
  EXPECT_EQ(d.find("a.pt"), nullptr);
  EXPECT_FALSE(d.remove("a.pt"));
  d.write("a.pt", 10, 1);
  d.write("b.pt", 20, 2);
  d.write("a.pt", 11, 3);
  ASSERT_NE(d.find("a.pt"), nullptr);
  EXPECT_EQ(d.find("a.pt")->length, 11u);
  EXPECT_EQ(d.find("a.pt")->content, 3u);
  EXPECT_EQ(d.size(), 2u);
  EXPECT_TRUE(d.remove("a.pt"));
  EXPECT_FALSE(d.remove("a.pt"));
  EXPECT_EQ(d.find("a.pt"), nullptr);
  EXPECT_EQ(d.find("b.pt")->length, 20u);
  EXPECT_EQ(d.size(), 1u);
}

TEST(DiskDirectory, ManyNamesSurviveGrowthAndRemovalOfHalf) {
  DiskDirectory d;
  for (int i = 0; i < 5000; ++i) d.write(name_of(i), static_cast<uint64_t>(i), 0);
  for (int i = 0; i < 5000; i += 2) EXPECT_TRUE(d.remove(name_of(i)));
  EXPECT_EQ(d.size(), 2500u);
  for (int i = 0; i < 5000; ++i) {
    const DiskDirectory::File* f = d.find(name_of(i));
    if (i % 2 == 0) {
      EXPECT_EQ(f, nullptr) << i;
    } else {
      ASSERT_NE(f, nullptr) << i;
      EXPECT_EQ(f->length, static_cast<uint64_t>(i));
    }
  }
  EXPECT_EQ(d.count_with_prefix("toy-model@1@0@"), 2500u);
  EXPECT_EQ(d.count_with_prefix("other@"), 0u);
}

RC_GTEST_PROP(DiskDirectoryProperties, BehavesAsAMapOfNamesToFiles, ()) {
  const int universe = *rc::gen::inRange(1, 3000);
  const int n = *rc::gen::inRange(1, 4000);
  DiskDirectory d;
  std::unordered_map<std::string, DiskDirectory::File> ref;
  for (int step = 0; step < n; ++step) {
    const int op = *rc::gen::inRange(0, 100);
    const std::string name = name_of(*rc::gen::inRange(0, universe));
    if (op < 55) {
      d.write(name, static_cast<uint64_t>(step), static_cast<uint64_t>(op));
      ref[name] = {static_cast<uint64_t>(step), static_cast<uint64_t>(op)};
    } else if (op < 85) {
      RC_ASSERT(d.remove(name) == (ref.erase(name) == 1));
    } else {
      const DiskDirectory::File* f = d.find(name);
      auto it = ref.find(name);
      RC_ASSERT((f != nullptr) == (it != ref.end()));
      if (f) RC_ASSERT(f->length == it->second.length && f->content == it->second.content);
    }
    RC_ASSERT(d.size() == ref.size());
  }
  for (const auto& [name, file] : ref) {
    const DiskDirectory::File* f = d.find(name);
    RC_ASSERT(f != nullptr);
    RC_ASSERT(f->length == file.length && f->content == file.content);
  }
  RC_ASSERT(d.count_with_prefix("toy-model@") == ref.size());
}

}  // namespace
}  // namespace kvtwin::model::lmcache
