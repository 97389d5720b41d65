// LocalDiskBackend: reservation at submit, visibility at completion, and every disk quirk with
// its fix (Quirks): double accounting on re-put, remove keeping the reservation, rejected puts
// stuck in flight, missing files.
#include "model/lmcache/local_disk_backend.h"

#include <gtest/gtest.h>

#include <functional>
#include <vector>

#include "tests/model/lmcache/lmcache_test_util.h"

namespace kvtwin::model::lmcache {
namespace {

using namespace testing;

LMCacheEngine make(uint64_t cpu, uint64_t disk, Quirks q = Quirks::upstream()) {
  LMCacheEngineConfig cfg = toy_config(cpu, disk);
  cfg.quirks = q;
  return LMCacheEngine(cfg, toy_metadata());
}

TEST(LocalDiskBackend, KeysBecomeVisibleOnlyWhenTheirWriteCompletes) {
  LMCacheEngine e(toy_config(8, 8), toy_metadata());
  std::vector<TokenId> a = seq(64, 1);
  store(e, a);
  LocalDiskBackend& disk = *e.storage_manager().local_disk();
  EXPECT_EQ(disk.current_cache_size(), int64_t(4 * kChunkBytes));  // reserved at submit
  EXPECT_EQ(disk.size(), 0u);
  EXPECT_EQ(disk.in_flight().size(), 4u);
  // Each in-flight write holds a reference: the CPU copies are not evictable.
  for (const auto& [k, id] : e.storage_manager().local_cpu().entries())
    EXPECT_EQ(e.storage_manager().allocator().obj(id).ref_count, 2);
  std::vector<PendingWrite> w = e.storage_manager().pending_writes();
  ASSERT_EQ(w.size(), 4u);
  EXPECT_TRUE(e.storage_manager().complete_write(w[2].id));  // any order is legal
  EXPECT_EQ(disk.size(), 1u);
  EXPECT_EQ(disk.entries()[0].first, w[2].keys[0]);
  e.storage_manager().complete_all_writes();
  EXPECT_EQ(disk.usage(), int64_t(4 * kChunkBytes));
  EXPECT_EQ(disk.directory().size(), 4u);
}

TEST(LocalDiskBackend, PendingWritesFromAnIdListOnlyTheWritesSubmittedSince) {
  LMCacheEngine e(toy_config(8, 8), toy_metadata());
  store(e, seq(64, 1));
  std::vector<PendingWrite> first = e.storage_manager().pending_writes();
  ASSERT_EQ(first.size(), 4u);
  const uint64_t next = first.back().id + 1;
  EXPECT_TRUE(e.storage_manager().pending_writes(next).empty());
  store(e, seq(32, 1000));
  std::vector<PendingWrite> all = e.storage_manager().pending_writes();
  std::vector<PendingWrite> fresh = e.storage_manager().pending_writes(next);
  ASSERT_EQ(all.size(), 6u);
  ASSERT_EQ(fresh.size(), 2u);
  EXPECT_EQ(fresh[0].id, all[4].id);
  EXPECT_EQ(fresh[1].id, all[5].id);
  EXPECT_GE(fresh[0].id, next);
  EXPECT_TRUE(e.storage_manager().complete_write(first[1].id));
  EXPECT_EQ(e.storage_manager().pending_writes(first[2].id).size(), 4u);
}

TEST(LocalDiskBackend, PendingWritesWithoutKeysListTheSameWritesAndSizes) {
  LMCacheEngine e(toy_config(8, 8), toy_metadata());
  store(e, seq(64, 1));
  std::vector<PendingWrite> with = e.storage_manager().pending_writes();
  std::vector<PendingWrite> without = e.storage_manager().pending_writes(0, /*with_keys=*/false);
  ASSERT_EQ(with.size(), 4u);
  ASSERT_EQ(without.size(), with.size());
  for (size_t i = 0; i < with.size(); ++i) {
    EXPECT_EQ(without[i].id, with[i].id);
    EXPECT_EQ(without[i].tier, with[i].tier);
    EXPECT_EQ(without[i].bytes, with[i].bytes);
    EXPECT_EQ(without[i].phy_bytes, with[i].phy_bytes);
    EXPECT_EQ(with[i].keys.size(), 1u);
    EXPECT_TRUE(without[i].keys.empty());
  }
  EXPECT_EQ(e.storage_manager().pending_writes(with[2].id, false).size(), 2u);
}

TEST(LocalDiskBackend, RePutOfAResidentKeyDoublesTheReservationWithTheQuirk) {
  for (bool quirk : {true, false}) {
    Quirks q = quirk ? Quirks::upstream() : Quirks::all_fixed();
    LMCacheEngine e = make(8, 12, q);
    std::vector<TokenId> a = seq(64, 1);
    store(e, a);
    e.storage_manager().complete_all_writes();
    e.clear(std::nullopt, nullptr, nullptr);  // empty the CPU tier: A is only on disk
    store(e, a);
    e.storage_manager().complete_all_writes();
    LocalDiskBackend& disk = *e.storage_manager().local_disk();
    EXPECT_EQ(disk.size(), 4u);
    EXPECT_EQ(disk.resident_bytes(), 4 * kChunkBytes);
    EXPECT_EQ(disk.current_cache_size(), int64_t((quirk ? 8 : 4) * kChunkBytes)) << quirk;
    EXPECT_EQ(disk.usage(), int64_t((quirk ? 8 : 4) * kChunkBytes)) << quirk;
  }
}

TEST(LocalDiskBackend, ExternalRemoveKeepsTheReservationWithTheQuirk) {
  for (bool quirk : {true, false}) {
    LMCacheEngine e = make(8, 8, quirk ? Quirks::upstream() : Quirks::all_fixed());
    std::vector<TokenId> a = seq(64, 1);
    store(e, a);
    e.storage_manager().complete_all_writes();
    std::vector<std::string> disk_only{"LocalDiskBackend"};
    EXPECT_EQ(e.clear(std::span<const TokenId>(a), &disk_only, nullptr).count, 4);
    LocalDiskBackend& disk = *e.storage_manager().local_disk();
    EXPECT_EQ(disk.usage(), 0);
    EXPECT_EQ(disk.current_cache_size(), quirk ? int64_t(4 * kChunkBytes) : 0);
    EXPECT_EQ(disk.resident_bytes() + disk.in_flight_bytes(), 0u);  // the reservation holds nothing
  }
}

// With every disk quirk fixed, the reservation is the index entries' sizes plus the in-flight
// writes (what the simulator's leaked-reservation figure compares it with).
TEST(LocalDiskBackend, TheFixedReservationIsTheEntriesAndTheWritesInFlight) {
  LMCacheEngine e = make(8, 8, Quirks::all_fixed());
  LocalDiskBackend& disk = *e.storage_manager().local_disk();
  auto held = [&] { return disk.resident_bytes() + disk.in_flight_bytes(); };
  store(e, seq(64, 1));
  EXPECT_EQ(disk.resident_bytes(), 0u);
  EXPECT_EQ(static_cast<int64_t>(held()), disk.current_cache_size());
  EXPECT_EQ(held(), 4 * kChunkBytes);
  const std::vector<PendingWrite> w = e.storage_manager().pending_writes();
  EXPECT_TRUE(e.storage_manager().complete_write(w[1].id));  // one entry, three writes
  EXPECT_EQ(disk.resident_bytes(), kChunkBytes);
  EXPECT_EQ(held(), 4 * kChunkBytes);
  e.storage_manager().complete_all_writes();
  EXPECT_EQ(disk.in_flight_bytes(), 0u);
  EXPECT_EQ(static_cast<int64_t>(held()), disk.current_cache_size());
}

TEST(LocalDiskBackend, RejectedPutStaysInFlightForeverWithTheQuirk) {
  for (bool quirk : {true, false}) {
    Quirks q = quirk ? Quirks::upstream() : Quirks::all_fixed();
    q.disk_remove_keeps_reservation = false;  // isolate this quirk
    LMCacheEngine e = make(8, 3, q);
    std::vector<TokenId> a = seq(64, 1);
    store(e, a);  // 3 reserved, the 4th rejected (nothing on disk to evict yet)
    LocalDiskBackend& disk = *e.storage_manager().local_disk();
    EXPECT_EQ(e.storage_manager().pending_writes().size(), 3u);
    e.storage_manager().complete_all_writes();
    EXPECT_EQ(disk.in_flight().size(), quirk ? 1u : 0u);
    // Make room, then save the 4th chunk again: the stuck key is skipped as "in progress".
    std::vector<std::string> disk_only{"LocalDiskBackend"};
    EXPECT_EQ(e.clear(std::span<const TokenId>(a), &disk_only, nullptr).count, 3);
    EXPECT_EQ(disk.current_cache_size(), 0);
    store(e, a, 48);
    EXPECT_EQ(e.storage_manager().pending_writes().size(), quirk ? 0u : 1u);
  }
}

TEST(LocalDiskBackend, MissingFileRaisesKeyErrorOrIsAMissWhenFixed) {
  for (bool quirk : {true, false}) {
    LMCacheEngine e = make(8, 8, quirk ? Quirks::upstream() : Quirks::all_fixed());
    std::vector<TokenId> a = seq(32, 1);
    store(e, a);
    e.storage_manager().complete_all_writes();
    e.clear(std::nullopt, nullptr, nullptr);
    auto infos = e.chunk_infos(a, nullptr);
    e.storage_manager().shared().disk->remove(infos[1].key.disk_file_name());
    RetrieveResult r = retrieve(e, a);
    LocalDiskBackend& disk = *e.storage_manager().local_disk();
    if (quirk) {
      ASSERT_TRUE(r.error);
      EXPECT_EQ(*r.error, PyError::kKeyError);
      EXPECT_EQ(disk.current_cache_size(), int64_t(2 * kChunkBytes));  // never released
    } else {
      ASSERT_FALSE(r.error);
      EXPECT_EQ(r.ret_tokens, 16);
      EXPECT_EQ(disk.current_cache_size(), int64_t(kChunkBytes));
    }
    EXPECT_EQ(disk.size(), 1u);  // the entry was dropped
    // No buffer outlives the operation.
    EXPECT_EQ(e.storage_manager().allocator().total_allocated_size(),
              e.storage_manager().local_cpu().resident_bytes());
  }
}

// S3-FIFO (an extension) over the disk tier: a key whose write is pending is in the policy but
// not yet in the tier. A scan that meets it skips it and keeps it, so that once written it can
// be evicted. Before, the scan forgot it: the disk kept A's chunks for good and refused C.
TEST(LocalDiskBackend, S3FifoKeepsKeysWhoseWritesArePending) {
  LMCacheEngineConfig cfg = toy_config(16, 4);
  cfg.quirks = Quirks::all_fixed();
  cfg.cache_policy = CachePolicyKind::kS3Fifo;
  LMCacheEngine e(cfg, toy_metadata());
  LocalDiskBackend& disk = *e.storage_manager().local_disk();
  store(e, seq(64, 1));     // A: four chunks, the disk's capacity, their writes pending
  store(e, seq(16, 5000));  // B: the scan meets only pending keys; no victim, B is refused
  EXPECT_EQ(e.storage_manager().pending_writes().size(), 4u);
  e.storage_manager().complete_all_writes();
  EXPECT_EQ(disk.size(), 4u);
  store(e, seq(16, 6000));  // C: one of A's chunks is evicted for it
  EXPECT_EQ(e.storage_manager().pending_writes().size(), 1u);
  e.storage_manager().complete_all_writes();
  EXPECT_EQ(disk.size(), 4u);
  EXPECT_TRUE(disk.contains(e.chunk_infos(seq(16, 6000), nullptr)[0].key, false));
  EXPECT_FALSE(disk.contains(e.chunk_infos(seq(16, 5000), nullptr)[0].key, false));
}

TEST(LocalDiskBackend, LookupsServedFromCpuDoNotTouchDiskRecency) {
  // Disk of 6 chunks: A (4) then B (2); CPU-served lookups of A leave A oldest on disk.
  LMCacheEngine e(toy_config(8, 6), toy_metadata());
  std::vector<TokenId> a = seq(64, 1);
  store(e, a);
  e.storage_manager().complete_all_writes();
  store(e, seq(32, 400));
  e.storage_manager().complete_all_writes();
  lookup(e, a, "a", true);
  e.lookup_unpin("a");
  e.storage_manager().events().clear();
  store(e, seq(32, 800));  // needs 2 disk slots: evicts A0, A1 (orphaning A2, A3)
  auto infos = e.chunk_infos(a, nullptr);
  auto& removed = e.storage_manager().events().removed;
  std::vector<std::string> disk_removed;
  for (const auto& r : removed) {
    if (r.tier == Tier::kDisk) disk_removed.push_back(r.key.kid());
  }
  EXPECT_EQ(disk_removed, (std::vector<std::string>{infos[0].key.kid(), infos[1].key.kid()}));
}

// A BusyLoopSleeper whose sleep() runs `on_sleep` (what finishes while the engine thread
// sleeps) and answers its result.
struct ScriptedSleeper final : BusyLoopSleeper {
  std::function<bool()> on_sleep;
  std::vector<double> slept;
  bool sleep(double seconds) override {
    slept.push_back(seconds);
    return on_sleep();
  }
};

// e: a CPU tier of 4 chunks and a disk tier of 8. Afterwards the CPU tier is full of b's chunks,
// each held by its pending disk write, and a (4 chunks) is on disk only.
void put_a_on_disk_and_b_pending(LMCacheEngine& e) {
  EXPECT_FALSE(store(e, seq(64, 1)).error);
  e.storage_manager().complete_all_writes();
  EXPECT_FALSE(store(e, seq(64, 5000)).error);  // evicts a's CPU copies
  EXPECT_EQ(e.storage_manager().pending_writes().size(), 4u);
}

// Upstream's get_blocking allocates with busy_loop: while nothing is evictable it sleeps 0.1 s
// and tries again. Each sleep here finishes one of b's writes, which makes b's CPU copy
// evictable: each of a's 4 chunks waits for one sleep, then evicts it.
TEST(LocalDiskBackend, ABlockingGetSleepsUntilAWriteFreesMemory) {
  LMCacheEngine e(toy_config(4, 8), toy_metadata());
  put_a_on_disk_and_b_pending(e);
  ScriptedSleeper sleeper;
  sleeper.on_sleep = [&] {
    std::vector<PendingWrite> w = e.storage_manager().pending_writes();
    if (w.empty()) return false;
    e.storage_manager().complete_write(w.front().id);
    return true;
  };
  e.storage_manager().local_disk()->set_busy_loop_sleeper(&sleeper);
  RetrieveResult r = retrieve(e, seq(64, 1));
  ASSERT_FALSE(r.error);
  EXPECT_EQ(r.ret_tokens, 64);
  ASSERT_EQ(r.loaded.size(), 4u);
  for (const LoadedChunk& c : r.loaded) EXPECT_EQ(c.location, "LocalDiskBackend");
  EXPECT_EQ(sleeper.slept, std::vector<double>(4, kBusyLoopSleepSecs));
  EXPECT_TRUE(e.storage_manager().pending_writes().empty());
}

// A sleeper that answers false (nothing could free memory) ends the wait with kWouldBusyWait,
// as does no sleeper at all (the model's default: it has no clock).
TEST(LocalDiskBackend, ABlockingGetThatCannotWaitRaisesWouldBusyWait) {
  for (bool with_sleeper : {true, false}) {
    LMCacheEngine e(toy_config(4, 8), toy_metadata());
    put_a_on_disk_and_b_pending(e);
    ScriptedSleeper sleeper;
    sleeper.on_sleep = [] { return false; };
    if (with_sleeper) e.storage_manager().local_disk()->set_busy_loop_sleeper(&sleeper);
    RetrieveResult r = retrieve(e, seq(64, 1));
    ASSERT_TRUE(r.error) << with_sleeper;
    EXPECT_EQ(*r.error, PyError::kWouldBusyWait);
    EXPECT_EQ(sleeper.slept.size(), with_sleeper ? 1u : 0u);
  }
}

// Stores allocate without busy_loop (force_store_wait off): they store what fits and never
// sleep. (The sleeper answers false: a store that did sleep would raise, not spin.)
TEST(LocalDiskBackend, StoresNeverSleep) {
  LMCacheEngine e(toy_config(4, 8), toy_metadata());
  put_a_on_disk_and_b_pending(e);
  ScriptedSleeper sleeper;
  sleeper.on_sleep = [] { return false; };
  e.storage_manager().local_disk()->set_busy_loop_sleeper(&sleeper);
  StoreResult r = store(e, seq(64, 9000));
  EXPECT_FALSE(r.error);
  EXPECT_TRUE(r.stored.empty());
  EXPECT_TRUE(sleeper.slept.empty());
}

}  // namespace
}  // namespace kvtwin::model::lmcache
