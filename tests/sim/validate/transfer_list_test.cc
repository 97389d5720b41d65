#include "sim/validate/transfer_list.h"

#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <set>

#include "sim/io/input_error.h"
#include "tests/support/paths.h"

namespace kvtwin::sim::validate {
namespace {

std::string write_file(const std::string& text) {
  const std::string path = kvtwin::testing::scratch_dir() + "/transfers.csv";
  std::ofstream(path) << text;
  return path;
}

TEST(TransferList, ReadsRowsAndNamesObjectsByPrefix) {
  const auto list = read_transfer_list(
      write_file("# a comment\ntime_us,src,dst,objects,object_bytes,key_prefix,kind\n"
                 "0,cpu,disk,2,4096,a,store\n1500,disk,cpu,2,4096,a,retrieve\n"));
  ASSERT_EQ(list.size(), 2u);
  EXPECT_EQ(list[1].at, 1'500'000);
  EXPECT_EQ(list[1].src, Location::kDisk);
  const Transfer t = to_transfer(list[1]);
  ASSERT_EQ(t.objects.size(), 2u);
  EXPECT_EQ(t.objects[1].key, "a@1");
  EXPECT_EQ(t.total_bytes(), 8192u);
  EXPECT_EQ(t.kind, "retrieve");
}

TEST(TransferList, RoundTripsThroughItsCsv) {
  SynthSpec spec;
  spec.tiers = {Location::kDisk};
  const auto list = synth_transfers(spec);
  const auto back = read_transfer_list(write_file(transfer_list_csv(list)));
  ASSERT_EQ(back.size(), list.size());
  for (size_t i = 0; i < list.size(); ++i) {
    EXPECT_EQ(back[i].key_prefix, list[i].key_prefix);
    EXPECT_EQ(back[i].object_bytes, list[i].object_bytes);
    EXPECT_EQ(back[i].at, list[i].at);
  }
}

TEST(TransferList, MalformedRowsNameLineAndField) {
  const std::string header = "time_us,src,dst,objects,object_bytes,key_prefix,kind\n";
  auto error_of = [&](const std::string& row) {
    try {
      read_transfer_list(write_file(header + "0,cpu,disk,1,10,a,store\n" + row));
    } catch (const InputError& e) {
      return std::to_string(e.line()) + ":" + e.field();
    }
    return std::string("no error");
  };
  EXPECT_EQ(error_of("5,cpu,floppy,1,10,a,store\n"), "3:dst");
  EXPECT_EQ(error_of("5,cpu,disk,0,10,a,store\n"), "3:objects");
  EXPECT_EQ(error_of("5,cpu,disk,1,-10,a,store\n"), "3:object_bytes");
  EXPECT_EQ(error_of("5,cpu,disk,1,10,a\n"), "3:row");
  EXPECT_EQ(error_of("x,cpu,disk,1,10,a,store\n"), "3:time_us");
  EXPECT_EQ(error_of("5,disk,disk,1,10,a,store\n"), "3:dst");
  EXPECT_THROW(read_transfer_list(write_file("time,src\n")), InputError);
}

TEST(TransferList, OutOfOrderRowsAreRejected) {
  EXPECT_THROW(
      read_transfer_list(write_file("time_us,src,dst,objects,object_bytes,key_prefix,kind\n"
                                    "10,cpu,disk,1,10,a,store\n5,disk,cpu,1,10,a,retrieve\n")),
      InputError);
}

TEST(SynthTransfers, EveryRetrieveReadsAnEarlierStoreAndNeverRightAfterIt) {
  SynthSpec spec;
  spec.tiers = {Location::kDisk, Location::kRemote};
  const auto list = synth_transfers(spec);
  std::map<std::string, size_t> stored_at;
  size_t retrieves = 0;
  for (size_t i = 0; i < list.size(); ++i) {
    const PlannedTransfer& t = list[i];
    EXPECT_LE(uint64_t{t.num_objects} * t.object_bytes, spec.max_transfer_bytes);
    if (t.kind == "store") {
      EXPECT_EQ(t.src, Location::kCpu);
      EXPECT_TRUE(stored_at.emplace(t.key_prefix, i).second) << "fresh keys per store";
    } else {
      ++retrieves;
      ASSERT_TRUE(stored_at.count(t.key_prefix)) << i;
      const PlannedTransfer& s = list[stored_at[t.key_prefix]];
      EXPECT_EQ(t.src, s.dst);
      EXPECT_EQ(t.num_objects, s.num_objects);
      EXPECT_EQ(t.object_bytes, s.object_bytes);
      EXPECT_GE(i, stored_at[t.key_prefix] + 2);
    }
  }
  EXPECT_EQ(retrieves, stored_at.size());
  // 5 sizes x 3 counts, minus 32 MiB x 16 (over 256 MiB): 14 pairs per tier and repeat.
  EXPECT_EQ(retrieves, 2u * 14u * 2u);
}

TEST(SynthTransfers, SameSeedSameListOtherSeedOtherOrder) {
  SynthSpec spec;
  spec.tiers = {Location::kDisk};
  const std::string a = transfer_list_csv(synth_transfers(spec));
  EXPECT_EQ(a, transfer_list_csv(synth_transfers(spec)));
  spec.seed = 99;
  EXPECT_NE(a, transfer_list_csv(synth_transfers(spec)));
}

}  // namespace
}  // namespace kvtwin::sim::validate
