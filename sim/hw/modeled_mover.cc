#include "sim/hw/modeled_mover.h"

#include <algorithm>
#include <memory>
#include <utility>

#include "model/check.h"

namespace kvtwin::sim::hw {
namespace {

SimDuration us(double v) {
  return from_seconds(v * 1e-6);
}

}  // namespace

ModeledMover::ModeledMover(Simulator* sim, const scenario::LinksConfig& links, int num_instances)
    : sim_(sim), config_(links), links_(sim) {
  auto add = [&](const char* kind, int instance, double gbps) {
    FluidLinks::LinkId id = links_.add_link(
        std::string(kind) + (instance >= 0 ? "[" + std::to_string(instance) + "]" : ""),
        gbps * 1e9);
    link_names_.emplace_back(kind, instance);
    return id;
  };
  for (int i = 0; i < num_instances; ++i) {
    InstanceLinks l;
    l.h2d = add("pcie_h2d", i, links.pcie_h2d_gbps);
    l.d2h = add("pcie_d2h", i, links.pcie_d2h_gbps);
    l.disk_read = add("disk_read", i, links.disk_read_gbps);
    l.disk_write = add("disk_write", i, links.disk_write_gbps);
    l.nic_tx = add("nic_tx", i, links.network_gbps);
    l.nic_rx = add("nic_rx", i, links.network_gbps);
    instances_.push_back(l);
  }
  remote_rx_ = add("remote_rx", -1, links.remote_server_gbps);
  remote_tx_ = add("remote_tx", -1, links.remote_server_gbps);
  if (links.page_cache_gb > 0) {
    for (int i = 0; i < num_instances; ++i) {
      InstanceLinks& l = instances_[static_cast<size_t>(i)];
      l.page_cache = add("page_cache", i, links.page_cache_gbps);
      l.page_cache_write = add("page_cache_write", i, links.page_cache_write_gbps);
      page_caches_.push_back(
          std::make_unique<PageCache>(static_cast<uint64_t>(links.page_cache_gb * scenario::kGiB)));
    }
    dirty_bytes_.assign(static_cast<size_t>(num_instances), 0);
    writeback_queued_.assign(static_cast<size_t>(num_instances), 0);
    writeback_in_flight_.assign(static_cast<size_t>(num_instances), 0);
    dirty_limit_ = static_cast<uint64_t>(links.page_cache_dirty_ratio *
                                         static_cast<double>(page_caches_[0]->capacity_bytes()));
  }
}

// The instance's flusher: one writeback at a time, of everything queued when it starts (the
// kernel writes dirty pages back in batches; one flow per write would also make thousands of
// concurrent flows share the link).
void ModeledMover::start_writeback(size_t instance) {
  const uint64_t bytes = std::exchange(writeback_queued_[instance], 0);
  if (bytes == 0) return;
  writeback_in_flight_[instance] = bytes;
  SimDuration latency = 0;
  std::vector<FluidLinks::LinkId> links =
      path(Location::kCpu, Location::kDisk, static_cast<int32_t>(instance), &latency);
  links_.start_flow(std::move(links), static_cast<double>(bytes), latency, [this, instance] {
    dirty_bytes_[instance] -= std::exchange(writeback_in_flight_[instance], 0);
    start_writeback(instance);
  });
}

const PageCache* ModeledMover::page_cache(int instance) const {
  if (page_caches_.empty()) return nullptr;
  return page_caches_.at(static_cast<size_t>(instance)).get();
}

void ModeledMover::discard(Location loc, int32_t instance, std::string_view key) {
  if (loc == Location::kDisk && !page_caches_.empty())
    page_caches_.at(static_cast<size_t>(instance))->erase(key);
}

ModeledMover::CacheSplit ModeledMover::split_page_cache(const Transfer& t,
                                                        const std::vector<uint8_t>& ok,
                                                        uint64_t bytes) {
  CacheSplit s;
  if (page_caches_.empty() || (t.src != Location::kDisk && t.dst != Location::kDisk)) return s;
  PageCache& pc = *page_caches_.at(static_cast<size_t>(t.instance));
  if (t.dst == Location::kDisk) {
    for (size_t i = 0; i < t.objects.size(); ++i)
      if (ok[i]) pc.insert(t.objects[i].key, t.objects[i].bytes);
    uint64_t& dirty = dirty_bytes_.at(static_cast<size_t>(t.instance));
    if (bytes > 0 && dirty + bytes <= dirty_limit_) {
      dirty += bytes;
      page_cache_totals_.buffered_write_bytes += bytes;
      s.buffered_write = true;
    }
    return s;
  }
  for (size_t i = 0; i < t.objects.size(); ++i) {
    const KvObject& o = t.objects[i];
    if (!ok[i]) continue;
    if (pc.touch(o.key)) {
      ++s.hits;
      s.hit_bytes += static_cast<double>(o.bytes);
      page_cache_totals_.hit_bytes += o.bytes;
    } else {
      pc.insert(o.key, o.bytes);  // read from the device
      ++s.misses;
      page_cache_totals_.miss_bytes += o.bytes;
    }
  }
  return s;
}

std::vector<FluidLinks::LinkId> ModeledMover::path(Location src, Location dst, int instance,
                                                   SimDuration* latency) const {
  KVTWIN_CHECK(instance >= 0 && static_cast<size_t>(instance) < instances_.size());
  const InstanceLinks& l = instances_[static_cast<size_t>(instance)];
  std::vector<FluidLinks::LinkId> p;
  *latency = 0;
  auto leg = [&](Location from, Location to) {
    // One hop between the GPU and host memory, or host memory and a storage tier.
    if (from == Location::kCpu && to == Location::kGpu) {
      p.push_back(l.h2d);
      *latency += us(config_.pcie_latency_us);
    } else if (from == Location::kGpu && to == Location::kCpu) {
      p.push_back(l.d2h);
      *latency += us(config_.pcie_latency_us);
    } else if (from == Location::kDisk && to == Location::kCpu) {
      p.push_back(l.disk_read);
      *latency += us(config_.disk_latency_us);
    } else if (from == Location::kCpu && to == Location::kDisk) {
      p.push_back(l.disk_write);
      *latency += us(config_.disk_latency_us);
    } else if (from == Location::kRemote && to == Location::kCpu) {
      p.push_back(remote_tx_);
      p.push_back(l.nic_rx);
      *latency += us(config_.network_latency_us);
    } else if (from == Location::kCpu && to == Location::kRemote) {
      p.push_back(l.nic_tx);
      p.push_back(remote_rx_);
      *latency += us(config_.network_latency_us);
    } else {
      KVTWIN_CHECK(false) << "no link from " << location_name(from) << " to " << location_name(to);
    }
  };
  if (src == dst) return p;
  if (src == Location::kGpu && dst != Location::kCpu) {
    leg(Location::kGpu, Location::kCpu);
    leg(Location::kCpu, dst);
  } else if (dst == Location::kGpu && src != Location::kCpu) {
    leg(src, Location::kCpu);
    leg(Location::kCpu, Location::kGpu);
  } else if (src != Location::kCpu && dst != Location::kCpu) {
    leg(src, Location::kCpu);
    leg(Location::kCpu, dst);
  } else {
    leg(src, dst);
  }
  return p;
}

struct ModeledMover::InFlight {
  Transfer transfer;
  TransferResult result;
  Done done;
  InFlight* prev;
  InFlight* next;
  int flows_left = 1;  // 2 for a disk read split between the page cache and the device
};

ModeledMover::~ModeledMover() {
  while (in_flight_) delete std::exchange(in_flight_, in_flight_->next);
}

void ModeledMover::start(Transfer transfer, Done done) {
  SimDuration latency = 0;
  std::vector<FluidLinks::LinkId> links =
      path(transfer.src, transfer.dst, transfer.instance, &latency);
  latency *= std::max<uint32_t>(transfer.host_waits, 1);
  // The transfer, its result and the caller's callback in one allocation. The completion event
  // captures only `this` and the pointer (trivially copyable, so std::function stores it without
  // allocating); it runs exactly once and frees the allocation.
  InFlight* f = new InFlight{std::move(transfer), {}, std::move(done), nullptr, in_flight_};
  if (in_flight_) in_flight_->prev = f;
  in_flight_ = f;
  TransferResult& result = f->result;
  const Transfer& t = f->transfer;
  result.start = sim_->now();
  result.ok.assign(t.objects.size(), 1);
  double bytes = 0;
  for (const KvObject& o : t.objects) bytes += static_cast<double>(o.bytes);
  const CacheSplit split = split_page_cache(t, result.ok, static_cast<uint64_t>(bytes));
  auto finish = [this, f] {
    if (--f->flows_left > 0) return;
    std::unique_ptr<InFlight> owned(f);
    (f->prev ? f->prev->next : in_flight_) = f->next;
    if (f->next) f->next->prev = f->prev;
    f->result.finish = sim_->now();
    f->result.predicted_ns = f->result.finish - f->result.start;
    if (observer_) observer_(f->transfer, f->result);
    f->done(f->result);
  };
  if (links.empty()) {  // same location: nothing moves, completion still comes as an event
    sim_->schedule_after(0, finish);
    return;
  }
  if (split.buffered_write) {
    // Done once copied into memory (from host memory: over page_cache_write[i] alone); the
    // writeback runs on over the device path without anyone waiting.
    SimDuration copy_latency = 0;
    std::vector<FluidLinks::LinkId> copy_path =
        path(t.src, Location::kCpu, t.instance, &copy_latency);
    copy_latency *= std::max<uint32_t>(t.host_waits, 1);
    copy_path.push_back(instances_[static_cast<size_t>(t.instance)].page_cache_write);
    links_.start_flow(std::move(copy_path), bytes, copy_latency, finish);
    const auto instance = static_cast<size_t>(t.instance);
    writeback_queued_[instance] += static_cast<uint64_t>(bytes);
    if (writeback_in_flight_[instance] == 0) start_writeback(instance);
    return;
  }
  if (split.hits == 0) {
    links_.start_flow(std::move(links), bytes, latency, finish);
    return;
  }
  // Resident objects: a memory copy over page_cache[i], then on from host memory as the rest of
  // the path goes (for a disk → GPU read, the PCIe leg and its latency).
  SimDuration cache_latency = 0;
  std::vector<FluidLinks::LinkId> cache_path =
      path(Location::kCpu, t.dst, t.instance, &cache_latency);
  cache_latency *= std::max<uint32_t>(t.host_waits, 1);
  cache_path.insert(cache_path.begin(), instances_[static_cast<size_t>(t.instance)].page_cache);
  if (split.misses == 0) {
    links_.start_flow(std::move(cache_path), bytes, cache_latency, finish);
    return;
  }
  f->flows_left = 2;
  links_.start_flow(std::move(cache_path), split.hit_bytes, cache_latency, finish);
  links_.start_flow(std::move(links), bytes - split.hit_bytes, latency, finish);
}

std::vector<ModeledMover::LinkReport> ModeledMover::link_reports() {
  const auto& stats = links_.stats();
  std::vector<LinkReport> out;
  for (size_t i = 0; i < stats.size(); ++i)
    out.push_back(LinkReport{link_names_[i].first, link_names_[i].second, stats[i].bytes,
                             stats[i].busy_ns, stats[i].max_flows, stats[i].capacity});
  return out;
}

}  // namespace kvtwin::sim::hw
