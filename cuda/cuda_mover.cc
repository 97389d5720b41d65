#include "cuda/cuda_mover.h"

#include <algorithm>
#include <chrono>
#include <set>
#include <utility>

#include "cuda/lmcache_host_allocator.h"
#include "model/check.h"

namespace kvtwin::cuda {

CudaMover::CudaMover(sim::Simulator& sim, const CudaMoverConfig& config,
                     std::unique_ptr<HostSpaceAllocator> allocator)
    : sim_(sim), config_(config) {
  KVTWIN_CHECK(config.num_layers > 0 && config.chunk_tokens > 0) << "bad CudaMoverConfig";
  KVTWIN_CHECK(formats_compatible(config.paged.kind, format_of(-1), config.num_layers));
  device_status_ = bring_up(std::move(allocator));
}

Status CudaMover::bring_up(std::unique_ptr<HostSpaceAllocator> allocator) {
  KVTWIN_RETURN_IF_ERROR(probe_device());
  KVTWIN_RETURN_IF_ERROR(PagedKvCache::create(config_.paged, config_.num_layers, &cache_));
  if (!allocator) allocator = std::make_unique<LmcacheHostAllocator>(config_.pinned_bytes);
  KVTWIN_RETURN_IF_ERROR(PinnedPool::create(config_.pinned_bytes, std::move(allocator), &pool_));
  KvTransferEngine::Options options;
  options.staging_bytes = config_.staging_bytes;
  return KvTransferEngine::create(&cache_, options, &engine_);
}

ChunkFormat CudaMover::format_of(int32_t layer) const {
  if (config_.paged.kind == PagedKind::kMLA) return ChunkFormat::kKV_MLA;
  return layer < 0 ? ChunkFormat::kKV_2LTD : ChunkFormat::kKV_T2D;
}

uint64_t CudaMover::object_bytes(const sim::KvObject& o) const {
  const int layers = o.layer < 0 ? config_.num_layers : 1;
  const auto tokens = static_cast<int64_t>(o.slots.size());
  return static_cast<uint64_t>(
      chunk_layout_for(config_.paged, format_of(o.layer), layers, tokens).total_bytes());
}

void CudaMover::check_object(const sim::KvObject& o) const {
  KVTWIN_CHECK(!o.slots.empty() && static_cast<int64_t>(o.slots.size()) <= config_.chunk_tokens)
      << o.key << ": " << o.slots.size() << " slots for chunks of " << config_.chunk_tokens;
  KVTWIN_CHECK(o.layer >= -1 && o.layer < config_.num_layers) << o.key << ": layer " << o.layer;
  KVTWIN_CHECK_EQ(o.bytes, object_bytes(o)) << o.key << ": size in bytes";
  for (int64_t slot : o.slots) {
    KVTWIN_CHECK_LT(slot, config_.paged.num_slots()) << o.key << ": slot outside the GPU cache";
  }
}

void CudaMover::start(sim::Transfer transfer, Done done) {
  const bool store_dir = transfer.src == sim::Location::kGpu && transfer.dst == sim::Location::kCpu;
  const bool retrieve_dir =
      transfer.src == sim::Location::kCpu && transfer.dst == sim::Location::kGpu;
  KVTWIN_CHECK(store_dir || retrieve_dir)
      << "CudaMover moves GPU<->CPU only, not " << sim::location_name(transfer.src) << "->"
      << sim::location_name(transfer.dst);
  sim::TransferResult result;
  result.start = sim_.now();
  result.ok.assign(transfer.objects.size(), 0);
  result.finish = result.start;
  if (device_status_.ok()) {
    const auto t0 = std::chrono::steady_clock::now();
    const Status s = store_dir ? store(transfer, &result.ok) : retrieve(transfer, &result.ok);
    const auto t1 = std::chrono::steady_clock::now();
    if (!s.ok()) {
      last_error_ = s;
      result.ok.assign(transfer.objects.size(), 0);
    }
    result.measured_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(t1 - t0).count();
    result.finish = result.start + result.measured_ns;
  }
  sim_.schedule_at(result.finish, [done = std::move(done), result]() { done(result); });
}

Status CudaMover::store(const sim::Transfer& t, std::vector<uint8_t>* ok) {
  std::vector<Planned> planned;
  std::set<std::string_view> keys;
  for (size_t i = 0; i < t.objects.size(); ++i) {
    const sim::KvObject& o = t.objects[i];
    check_object(o);
    KVTWIN_CHECK(keys.insert(o.key).second) << o.key << " stored twice in one transfer";
    drop(o.key);  // a re-put replaces the held object
    const std::optional<PinnedBlock> block = pool_.allocate(object_bytes(o));
    if (!block) continue;  // pool full: this object fails
    planned.push_back({i, &o, *block});
  }
  const Status s = run_batches(planned, /*store=*/true);
  for (const Planned& p : planned) {
    if (!s.ok()) {
      pool_.free(p.block);
      continue;
    }
    held_[p.object->key] =
        Held{p.block, p.object->layer, static_cast<int64_t>(p.object->slots.size())};
    (*ok)[p.index] = 1;
  }
  return s;
}

Status CudaMover::retrieve(const sim::Transfer& t, std::vector<uint8_t>* ok) {
  std::vector<Planned> planned;
  for (size_t i = 0; i < t.objects.size(); ++i) {
    const sim::KvObject& o = t.objects[i];
    check_object(o);
    const auto it = held_.find(o.key);
    if (it == held_.end()) continue;  // not held: a miss
    KVTWIN_CHECK(it->second.layer == o.layer &&
                 it->second.num_tokens == static_cast<int64_t>(o.slots.size()))
        << o.key << ": retrieved with another shape than it was stored with";
    planned.push_back({i, &o, it->second.block});
  }
  KVTWIN_RETURN_IF_ERROR(run_batches(planned, /*store=*/false));
  for (const Planned& p : planned) (*ok)[p.index] = 1;
  return Status();
}

// Consecutive objects of one layer value form a batch while every object but the batch's last is
// a full chunk (the batch layout of kv_transfer.h); their slots are uploaded in one copy.
Status CudaMover::run_batches(const std::vector<Planned>& planned, bool store_dir) {
  if (planned.empty()) return Status();
  std::vector<int64_t> slots;
  std::vector<HostChunkBatch> batches;
  std::vector<size_t> first_slot;  // index in `slots` of each batch's first token
  for (size_t i = 0; i < planned.size(); ++i) {
    const sim::KvObject& o = *planned[i].object;
    const sim::KvObject* prev = i > 0 ? planned[i - 1].object : nullptr;
    const bool extend = prev && prev->layer == o.layer &&
                        static_cast<int64_t>(prev->slots.size()) == config_.chunk_tokens;
    if (!extend) {
      HostChunkBatch b;
      b.format = format_of(o.layer);
      b.first_layer = std::max(o.layer, 0);
      b.num_layers = o.layer < 0 ? config_.num_layers : 1;
      b.tokens_per_chunk = config_.chunk_tokens;
      batches.push_back(b);
      first_slot.push_back(slots.size());
    }
    HostChunkBatch& b = batches.back();
    b.num_tokens += static_cast<int64_t>(o.slots.size());
    b.skipped_slots = b.skipped_slots ||
                      std::any_of(o.slots.begin(), o.slots.end(), [](int64_t s) { return s < 0; });
    b.chunks.push_back({planned[i].block.host, planned[i].block.device});
    slots.insert(slots.end(), o.slots.begin(), o.slots.end());
  }
  const size_t slot_bytes = slots.size() * sizeof(int64_t);
  if (device_slots_.size() < slot_bytes) {
    KVTWIN_RETURN_IF_ERROR(DeviceBuffer::allocate(slot_bytes, &device_slots_));
  }
  KVTWIN_CUDA_TRY(
      cudaMemcpy(device_slots_.data(), slots.data(), slot_bytes, cudaMemcpyHostToDevice));
  const auto* device_slots = reinterpret_cast<const int64_t*>(device_slots_.data());
  for (size_t i = 0; i < batches.size(); ++i) {
    batches[i].device_slots = device_slots + first_slot[i];
    KVTWIN_RETURN_IF_ERROR(store_dir ? engine_.store(batches[i], config_.store_path)
                                     : engine_.retrieve(batches[i], config_.retrieve_path));
  }
  return engine_.synchronize();
}

const PinnedBlock* CudaMover::find(std::string_view key) const {
  const auto it = held_.find(key);
  return it == held_.end() ? nullptr : &it->second.block;
}

bool CudaMover::drop(std::string_view key) {
  const auto it = held_.find(key);
  if (it == held_.end()) return false;
  pool_.free(it->second.block);
  held_.erase(it);
  return true;
}

}  // namespace kvtwin::cuda
