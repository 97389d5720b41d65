// The page cache over the disk tier's files: its LRU bookkeeping, and how the modeled mover
// charges disk reads it serves (times computed by hand).
#include "sim/hw/page_cache.h"

#include <gtest/gtest.h>

#include <map>

#include "sim/hw/modeled_mover.h"

namespace kvtwin::sim::hw {
namespace {

TEST(PageCache, KeepsTheMostRecentlyUsedFilesThatFit) {
  PageCache pc(1000);
  pc.insert("a", 400);
  pc.insert("b", 400);
  EXPECT_EQ(pc.used_bytes(), 800u);
  EXPECT_TRUE(pc.touch("a"));  // b is now the least recently used
  pc.insert("c", 400);
  EXPECT_FALSE(pc.touch("b"));
  EXPECT_TRUE(pc.touch("a"));
  EXPECT_TRUE(pc.touch("c"));
  EXPECT_EQ(pc.used_bytes(), 800u);
  EXPECT_EQ(pc.peak_bytes(), 800u);
  // A rewrite replaces the file's pages (its size too) and makes it the most recent.
  pc.insert("a", 100);
  EXPECT_EQ(pc.used_bytes(), 500u);
  pc.insert("d", 500);  // fits beside a and c exactly
  EXPECT_EQ(pc.used_bytes(), 1000u);
  EXPECT_EQ(pc.num_files(), 3u);
  pc.insert("e", 200);  // c goes (least recent), then there is room
  EXPECT_FALSE(pc.touch("c"));
  EXPECT_EQ(pc.used_bytes(), 800u);
}

TEST(PageCache, DeletedAndOversizedFilesHoldNothing) {
  PageCache pc(1000);
  pc.insert("a", 600);
  pc.erase("a");
  pc.erase("never there");
  EXPECT_FALSE(pc.touch("a"));
  EXPECT_EQ(pc.used_bytes(), 0u);
  pc.insert("b", 300);
  pc.insert("b", 1001);  // larger than the cache: not kept, and the old copy is gone
  EXPECT_FALSE(pc.touch("b"));
  EXPECT_EQ(pc.num_files(), 0u);
  EXPECT_EQ(pc.peak_bytes(), 600u);
}

// Disk at 1 GB/s (1 byte per ns) each way with 80 µs per transfer, PCIe 35 GB/s with 10 µs, a
// 1-MiB page cache copying at 10 GB/s: 400,000-byte objects, two fit.
scenario::LinksConfig disk_links(double page_cache_gb) {
  scenario::LinksConfig cfg;
  cfg.disk_read_gbps = 1;
  cfg.disk_write_gbps = 1;
  cfg.disk_latency_us = 80;
  cfg.pcie_h2d_gbps = 35;
  cfg.pcie_latency_us = 10;
  cfg.page_cache_gb = page_cache_gb;
  cfg.page_cache_gbps = 10;
  cfg.page_cache_write_gbps = 10;
  return cfg;
}
constexpr double kOneMiB = 1.0 / 1024;
constexpr uint64_t kObject = 400'000;

// A transfer of `keys`, each kObject bytes.
Transfer transfer_of(Location src, Location dst, std::vector<std::string> keys) {
  Transfer t;
  t.src = src;
  t.dst = dst;
  for (std::string& k : keys) t.objects.push_back(KvObject{std::move(k), kObject, -1, {}});
  return t;
}

// Runs one transfer of `keys` alone; returns its duration.
SimDuration move(Simulator* sim, ModeledMover* mover, Location src, Location dst,
                 std::vector<std::string> keys) {
  Transfer t = transfer_of(src, dst, std::move(keys));
  SimDuration took = -1;
  mover->start(std::move(t), [&](const TransferResult& r) { took = r.finish - r.start; });
  sim->run();
  return took;
}

std::map<std::string, double> bytes_by_kind(ModeledMover* mover) {
  std::map<std::string, double> out;
  for (const auto& l : mover->link_reports()) out[l.kind] += l.bytes;
  return out;
}

TEST(ModeledMoverPageCache, AReadOfAWrittenFileIsAMemoryCopy) {
  Simulator sim;
  ModeledMover mover(&sim, disk_links(kOneMiB), 1);
  // The write still goes to the device.
  EXPECT_EQ(move(&sim, &mover, Location::kCpu, Location::kDisk, {"a"}), 400'000 + 80'000);
  // 400,000 bytes at 10 bytes per ns, no disk latency.
  EXPECT_EQ(move(&sim, &mover, Location::kDisk, Location::kCpu, {"a"}), 40'000);
  // Never written: from the device, which brings it in; the second read is a copy.
  EXPECT_EQ(move(&sim, &mover, Location::kDisk, Location::kCpu, {"x"}), 400'000 + 80'000);
  EXPECT_EQ(move(&sim, &mover, Location::kDisk, Location::kCpu, {"x"}), 40'000);
  // Disk → GPU from memory: the copy and the PCIe leg (the slower, 10 B/ns, sets the rate) and
  // PCIe's latency only.
  EXPECT_EQ(move(&sim, &mover, Location::kDisk, Location::kGpu, {"a"}), 40'000 + 10'000);
  auto bytes = bytes_by_kind(&mover);
  EXPECT_DOUBLE_EQ(bytes["disk_read"], kObject);
  EXPECT_DOUBLE_EQ(bytes["page_cache"], 3.0 * kObject);
  EXPECT_EQ(mover.page_cache_totals().hit_bytes, 3 * kObject);
  EXPECT_EQ(mover.page_cache_totals().miss_bytes, kObject);
  EXPECT_EQ(mover.page_cache(0)->peak_bytes(), 2 * kObject);
}

TEST(ModeledMoverPageCache, AMixedReadEndsWithItsDeviceHalf) {
  Simulator sim;
  ModeledMover mover(&sim, disk_links(kOneMiB), 1);
  move(&sim, &mover, Location::kCpu, Location::kDisk, {"a"});
  // a from memory (40 µs) and y from the device (400 µs + 80 µs) run side by side.
  EXPECT_EQ(move(&sim, &mover, Location::kDisk, Location::kCpu, {"a", "y"}), 480'000);
  auto bytes = bytes_by_kind(&mover);
  EXPECT_DOUBLE_EQ(bytes["page_cache"], kObject);
  EXPECT_DOUBLE_EQ(bytes["disk_read"], kObject);
  // Both are resident now (two fit); a third file pushes out the least recently used, a.
  EXPECT_EQ(move(&sim, &mover, Location::kCpu, Location::kDisk, {"z"}), 480'000);
  EXPECT_EQ(move(&sim, &mover, Location::kDisk, Location::kCpu, {"a"}), 480'000);
}

TEST(ModeledMoverPageCache, ADeletedFileIsReadFromTheDevice) {
  Simulator sim;
  ModeledMover mover(&sim, disk_links(kOneMiB), 2);
  move(&sim, &mover, Location::kCpu, Location::kDisk, {"a"});
  mover.discard(Location::kDisk, 1, "a");  // another instance's file of the same name
  mover.discard(Location::kCpu, 0, "a");   // not a disk file
  EXPECT_EQ(move(&sim, &mover, Location::kDisk, Location::kCpu, {"a"}), 40'000);
  mover.discard(Location::kDisk, 0, "a");
  EXPECT_EQ(mover.page_cache(0)->used_bytes(), 0u);
  EXPECT_EQ(move(&sim, &mover, Location::kDisk, Location::kCpu, {"a"}), 480'000);
}

// A dirty budget of half the 1-MiB cache (524,288 bytes) holds one 400,000-byte write at a time.
TEST(ModeledMoverPageCache, AWriteThatFitsTheDirtyBudgetReturnsOnceInMemory) {
  scenario::LinksConfig cfg = disk_links(kOneMiB);
  cfg.page_cache_dirty_ratio = 0.5;
  Simulator sim;
  ModeledMover mover(&sim, cfg, 1);
  // A copy at 10 bytes per ns; its writeback runs on after it (the run drains it).
  EXPECT_EQ(move(&sim, &mover, Location::kCpu, Location::kDisk, {"a"}), 40'000);
  auto bytes = bytes_by_kind(&mover);
  EXPECT_DOUBLE_EQ(bytes["disk_write"], kObject);
  EXPECT_DOUBLE_EQ(bytes["page_cache_write"], kObject);
  EXPECT_DOUBLE_EQ(bytes["page_cache"], 0);
  // b fits the budget, c (started with it) does not: c waits for the device, where it shares
  // disk_write with b's writeback (80 µs, then 800,000 bytes at 1 byte per ns between them).
  SimDuration b_took = -1, c_took = -1;
  for (const char* key : {"b", "c"}) {
    SimDuration* took = *key == 'b' ? &b_took : &c_took;
    mover.start(transfer_of(Location::kCpu, Location::kDisk, {key}),
                [took](const TransferResult& r) { *took = r.finish - r.start; });
  }
  sim.run();
  EXPECT_EQ(b_took, 40'000);
  EXPECT_EQ(c_took, 80'000 + 800'000);
  EXPECT_EQ(mover.page_cache_totals().buffered_write_bytes, 2 * kObject);
  // Written back: the budget is free again.
  EXPECT_EQ(move(&sim, &mover, Location::kCpu, Location::kDisk, {"d"}), 40'000);
  // Writes into the cache have their own copy rate: at 5 bytes per ns, 80 µs.
  cfg.page_cache_write_gbps = 5;
  ModeledMover slower(&sim, cfg, 1);
  EXPECT_EQ(move(&sim, &slower, Location::kCpu, Location::kDisk, {"a"}), 80'000);
  cfg.page_cache_write_gbps = 10;
  // A write larger than the whole budget always waits for the device.
  cfg.page_cache_dirty_ratio = 0.3;
  ModeledMover strict(&sim, cfg, 1);
  EXPECT_EQ(move(&sim, &strict, Location::kCpu, Location::kDisk, {"a"}), 480'000);
}

// Writeback is one flow at a time per instance, of everything queued when it starts: a and b,
// written together into the cache (2 × 400,000 bytes sharing 10 bytes per ns: 80 µs), go back
// one after the other, a alone (80 µs + 400 µs), then b (80 µs + 400 µs).
TEST(ModeledMoverPageCache, TheFlusherWritesBackOneBatchAtATime) {
  scenario::LinksConfig cfg = disk_links(kOneMiB);
  cfg.page_cache_dirty_ratio = 1;
  Simulator sim;
  ModeledMover mover(&sim, cfg, 1);
  std::vector<SimTime> done;
  for (const char* key : {"a", "b"}) {
    mover.start(transfer_of(Location::kCpu, Location::kDisk, {key}),
                [&](const TransferResult& r) { done.push_back(r.finish); });
  }
  sim.run();
  EXPECT_EQ(done, (std::vector<SimTime>{80'000, 80'000}));
  EXPECT_EQ(sim.now(), 2 * (80'000 + 400'000));
  EXPECT_DOUBLE_EQ(bytes_by_kind(&mover)["disk_write"], 2.0 * kObject);
}

TEST(ModeledMoverPageCache, WithoutOneEveryReadGoesToTheDevice) {
  Simulator sim;
  ModeledMover mover(&sim, disk_links(0), 1);
  EXPECT_EQ(mover.page_cache(0), nullptr);
  move(&sim, &mover, Location::kCpu, Location::kDisk, {"a"});
  EXPECT_EQ(move(&sim, &mover, Location::kDisk, Location::kCpu, {"a"}), 480'000);
  EXPECT_EQ(bytes_by_kind(&mover).count("page_cache"), 0u);
}

}  // namespace
}  // namespace kvtwin::sim::hw
