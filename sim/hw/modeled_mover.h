// ModeledMover: the "modeled" implementation of sim::Mover — transfers cost time from the links
// of the hardware model and never touch bytes.
//
// Links (FluidLinks, max-min fair sharing among transfers in flight):
//   per instance i:  pcie_h2d[i], pcie_d2h[i], disk_read[i], disk_write[i], nic_tx[i], nic_rx[i]
//   shared:          remote_rx (the remote store's ingress), remote_tx (its egress)
//
//   src → dst        links crossed                        latency
//   cpu → gpu        pcie_h2d[i]                          pcie_latency
//   gpu → cpu        pcie_d2h[i]                          pcie_latency
//   disk → cpu       disk_read[i]                         disk_latency
//   cpu → disk       disk_write[i]                        disk_latency
//   remote → cpu     remote_tx, nic_rx[i]                 network_latency
//   cpu → remote     nic_tx[i], remote_rx                 network_latency
//   gpu ↔ disk/remote: the PCIe link plus the disk/network links, latencies added
//
// With links.page_cache_gb > 0 each instance also has page_cache[i] (reads it serves,
// links.page_cache_gbps), page_cache_write[i] (buffered writes into it, page_cache_write_gbps) and
// a PageCache of the disk tier's files, keyed by KvObject::key: a write to disk and a read from the
// device bring an object's file in (when the transfer starts, as the kernel fills pages while
// the I/O runs); a read of a resident object crosses page_cache[i] instead of disk_read[i], with
// no disk latency. A disk read that mixes resident and other objects is two flows; the transfer
// completes when both have. discard() drops a deleted file. Callers that use it give each disk
// object its own key; without it, disk transfers are unchanged.
//
// Writes (buffered, as LMCache's are): a write whose bytes fit the instance's dirty budget
// (links.page_cache_dirty_ratio of the page cache, Linux's vm.dirty_ratio) completes once copied
// over page_cache_write[i], and its bytes join the instance's writeback: one flow at a time on
// disk_write[i] (with the disk latency) of everything queued when it starts, that nobody waits
// for; the budget is freed as each ends. A write that does not fit waits for the device, as a
// writer the kernel throttles does. Ratio 0: every write waits for the device.
//
// A transfer is one flow of its total bytes, and every object arrives (ok = 1). Remote read
// faults (links.remote_get_failure_rate) are not drawn here: the LMCache connector puts them into
// the model's logic, where upstream meets them (a missing Redis value), and asks the links to
// move only what that logic read.
//
// Threading: the simulation thread only.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "sim/hw/fluid_links.h"
#include "sim/hw/page_cache.h"
#include "sim/mover.h"
#include "sim/scenario/scenario.h"

namespace kvtwin::sim::hw {

class ModeledMover final : public Mover {
 public:
  ModeledMover(Simulator* sim, const scenario::LinksConfig& links, int num_instances);
  // Frees the transfers still in flight (a run that ended early: an error, a stop).
  ~ModeledMover() override;
  ModeledMover(const ModeledMover&) = delete;
  ModeledMover& operator=(const ModeledMover&) = delete;

  void start(Transfer transfer, Done done) override;
  void discard(Location loc, int32_t instance, std::string_view key) override;
  std::string_view name() const override { return "modeled"; }

  // Instance i's page cache, or nullptr when links.page_cache_gb is 0.
  const PageCache* page_cache(int instance) const;
  // Every page cache's peak starts again from its present use.
  void reset_page_cache_peaks() {
    for (auto& p : page_caches_) p->reset_peak();
  }
  // Bytes of disk reads the page caches served, and that went to the devices (all instances).
  struct PageCacheTotals {
    uint64_t hit_bytes = 0, miss_bytes = 0;
    uint64_t buffered_write_bytes = 0;  // writes that returned once in memory (written back later)
  };
  const PageCacheTotals& page_cache_totals() const { return page_cache_totals_; }

  // Called once per finished transfer (reports, traces).
  using Observer = std::function<void(const Transfer&, const TransferResult&)>;
  void set_observer(Observer observer) { observer_ = std::move(observer); }

  struct LinkReport {
    std::string kind;   // "pcie_h2d", ..., "remote_tx"
    int instance = -1;  // -1 for shared links
    double bytes = 0;
    SimDuration busy_ns = 0;
    int max_flows = 0;
    double capacity = 0;  // bytes/s
  };
  std::vector<LinkReport> link_reports();
  // Bytes moved so far per link (active flows' fractions included), in link_reports()'s order,
  // without touching the links' state (FluidLinks::moved_bytes): what a sampler may read at any
  // instant.
  void link_bytes(std::vector<double>* out) const { links_.moved_bytes(out); }
  // LinkReport::kind of each link, in that order.
  std::vector<std::string> link_kinds() const {
    std::vector<std::string> kinds;
    for (const auto& [kind, instance] : link_names_) kinds.push_back(kind);
    return kinds;
  }

  // The links and latency of a transfer (exposed for tests).
  std::vector<FluidLinks::LinkId> path(Location src, Location dst, int instance,
                                       SimDuration* latency) const;

 private:
  struct InstanceLinks {
    FluidLinks::LinkId h2d, d2h, disk_read, disk_write, nic_tx, nic_rx;
    FluidLinks::LinkId page_cache = 0, page_cache_write = 0;  // with page_caches_ only
  };
  // A disk transfer's objects split into page-cache hits and device I/O (the cache updated);
  // `bytes`: those of its objects that move (ok).
  struct CacheSplit {
    double hit_bytes = 0;
    int hits = 0, misses = 0;
    bool buffered_write = false;  // a write that fits the instance's dirty budget
  };
  CacheSplit split_page_cache(const Transfer& t, const std::vector<uint8_t>& ok, uint64_t bytes);

  Simulator* sim_;
  scenario::LinksConfig config_;
  FluidLinks links_;
  std::vector<InstanceLinks> instances_;
  FluidLinks::LinkId remote_rx_ = 0, remote_tx_ = 0;
  std::vector<std::pair<std::string, int>> link_names_;  // kind, instance per LinkId
  Observer observer_;
  std::vector<std::unique_ptr<PageCache>> page_caches_;  // per instance; empty: not modelled
  // Bytes written into each instance's page cache and not yet written back (dirty), and the most
  // it holds: links.page_cache_dirty_ratio of the page cache.
  std::vector<uint64_t> dirty_bytes_;
  uint64_t dirty_limit_ = 0;
  // Dirty bytes waiting for the instance's flusher, and those it is writing back (0: idle).
  std::vector<uint64_t> writeback_queued_, writeback_in_flight_;
  void start_writeback(size_t instance);
  PageCacheTotals page_cache_totals_;
  // Transfers in flight: a doubly linked list, so that completion unlinks in O(1) and the
  // destructor frees what never completed.
  struct InFlight;
  InFlight* in_flight_ = nullptr;
};

}  // namespace kvtwin::sim::hw
