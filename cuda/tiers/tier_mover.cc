#include "cuda/tiers/tier_mover.h"

#include <chrono>
#include <utility>
#include <vector>

#include "cuda/tiers/host_buffer.h"
#include "model/check.h"

namespace kvtwin::cuda::tiers {

using sim::Location;

TierMover::TierMover(sim::Simulator& sim, DiskTier* disk, RedisTier* remote, TierMoverConfig config)
    : sim_(sim), disk_(disk), remote_(remote), config_(config) {}

bool TierMover::handles(Location src, Location dst) const {
  if (src == Location::kCpu) std::swap(src, dst);
  if (dst != Location::kCpu) return false;
  return (src == Location::kDisk && disk_ != nullptr) ||
         (src == Location::kRemote && remote_ != nullptr);
}

sim::SimDuration TierMover::move_slice(const sim::Transfer& t, size_t begin, size_t end,
                                       uint8_t* ok) {
  const size_t n = end - begin;
  const bool is_put = t.src == Location::kCpu;
  const bool to_disk = t.src == Location::kDisk || t.dst == Location::kDisk;
  // Stage 1 (untimed): host buffers, with content for puts.
  std::vector<HostBuffer> buffers;
  buffers.reserve(n);
  for (size_t i = begin; i < end; ++i) {
    buffers.emplace_back(t.objects[i].bytes);
    if (is_put) fill_content(t.objects[i].key, buffers.back().span());
  }
  std::vector<TierStatus> status(n, TierStatus::kIoError);
  // Stage 2 (timed): the tier call.
  const auto t0 = std::chrono::steady_clock::now();
  if (to_disk && is_put) {
    std::vector<DiskPut> puts;
    for (size_t i = 0; i < n; ++i) puts.push_back({t.objects[begin + i].key, buffers[i].span()});
    disk_->batched_put(puts, status);
  } else if (to_disk) {
    std::vector<DiskGet> gets;
    for (size_t i = 0; i < n; ++i) gets.push_back({t.objects[begin + i].key, buffers[i].span()});
    disk_->batched_get(gets, status);
  } else if (is_put) {
    std::vector<RemotePut> puts;
    for (size_t i = 0; i < n; ++i)
      puts.push_back(
          {t.objects[begin + i].key, buffers[i].span(), opaque_metadata(buffers[i].size())});
    remote_->batched_put(puts, status);
  } else {
    std::vector<RemoteGet> gets;
    for (size_t i = 0; i < n; ++i) gets.push_back({t.objects[begin + i].key, buffers[i].span()});
    remote_->batched_get(gets, status);
  }
  const auto t1 = std::chrono::steady_clock::now();
  // Stage 3 (untimed): a read counts only when every byte is the byte that was written.
  for (size_t i = 0; i < n; ++i) {
    bool good = status[i] == TierStatus::kOk;
    if (good && !is_put) {
      const std::string& key = t.objects[begin + i].key;
      if (first_content_mismatch(key, buffers[i].span()) != buffers[i].size()) {
        ++wrong_bytes_;
        good = false;
      }
    }
    ok[begin + i] = good ? 1 : 0;
  }
  return std::chrono::duration_cast<std::chrono::nanoseconds>(t1 - t0).count();
}

sim::TransferResult TierMover::execute(const sim::Transfer& t) {
  KVTWIN_CHECK(handles(t.src, t.dst))
      << "TierMover cannot move " << location_name(t.src) << " -> " << location_name(t.dst);
  sim::TransferResult result;
  result.start = result.finish = sim_.now();
  result.ok.assign(t.objects.size(), 0);
  result.measured_ns = 0;
  size_t begin = 0;
  while (begin < t.objects.size()) {
    // Whole objects up to max_buffer_bytes (at least one).
    size_t end = begin + 1;
    uint64_t bytes = t.objects[begin].bytes;
    while (end < t.objects.size() && bytes + t.objects[end].bytes <= config_.max_buffer_bytes)
      bytes += t.objects[end++].bytes;
    result.measured_ns += move_slice(t, begin, end, result.ok.data());
    begin = end;
  }
  return result;
}

void TierMover::start(sim::Transfer transfer, Done done) {
  sim::TransferResult result = execute(transfer);
  const sim::SimDuration charge =
      config_.charge == TierMoverConfig::Charge::kMeasured ? result.measured_ns : 0;
  result.finish = result.start + charge;
  sim_.schedule_at(result.finish,
                   [done = std::move(done), result = std::move(result)] { done(result); });
}

}  // namespace kvtwin::cuda::tiers
