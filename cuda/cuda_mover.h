// CudaMover: the real GPU <-> CPU side of sim::Mover (sim/mover.h). It owns a GPU paged KV cache
// (standing in for vLLM's), a pinned host pool (LMCache's local CPU memory) and a transfer engine,
// and moves each KvObject's bytes with the copy kernels:
//
//   kGpu -> kCpu  store:    gather the object's tokens (KvObject::slots) from the paged cache into
//                           a pinned object allocated for its key (staged or zero-copy);
//   kCpu -> kGpu  retrieve: scatter the pinned object of that key into the paged slots.
//
// Objects: layer == -1 is a whole chunk (KV_2LTD, or KV_MLA for MLA caches); layer >= 0 is one
// layer of a chunk (KV_T2D, or KV_MLA with one layer). bytes must equal that object's size.
// A token whose slot is < 0 is skipped: a store leaves its rows in the pinned object as the pool
// had them, on either path (the staged one then loads the object into staging first).
//
// Faults are data: without a driver or device (or when the pool cannot be pinned) every object
// comes back ok = 0 and nothing crashes; a store finding the pool full, or a retrieve of a key
// that is not held, fails that object only; a CUDA error mid-transfer fails the whole transfer.
// Misuse (a location pair other than GPU<->CPU, a slot outside the cache, a size mismatch) is a
// bug and hits KVTWIN_CHECK.
//
// Timing: the copy runs synchronously inside start(); its wall-clock time is measured_ns and the
// simulation sees it complete that long after sim.now() (done() is always scheduled, never called
// inline). Real timings are not deterministic; use the modeled or validating movers for
// byte-identical runs.
//
// Threading: the simulation thread only.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "cuda/cuda_handles.h"
#include "cuda/host_space_allocator.h"
#include "cuda/kv_layout.h"
#include "cuda/kv_transfer.h"
#include "cuda/paged_kv_cache.h"
#include "cuda/pinned_pool.h"
#include "cuda/status.h"
#include "sim/mover.h"
#include "sim/simulator.h"

namespace kvtwin::cuda {

struct CudaMoverConfig {
  PagedLayout paged;           // one layer of the GPU cache (make_paged_layout)
  int32_t num_layers = 0;      // layers of the model (per rank)
  int64_t chunk_tokens = 256;  // LMCache chunk_size
  uint64_t pinned_bytes = 0;   // LMCache max_local_cpu_size
  uint64_t staging_bytes = uint64_t{128} << 20;
  HostPath store_path = HostPath::kStaged;       // LMCache V2 stores full chunks via staging
  HostPath retrieve_path = HostPath::kZeroCopy;  // and loads straight from pinned memory
};

class CudaMover final : public sim::Mover {
 public:
  // Brings up the device side; on any failure the mover stays usable and faults every object
  // (device_status() says why). `allocator` places objects in the pool; nullptr means
  // LMCache's AddressManager (LmcacheHostAllocator) over the whole pool.
  CudaMover(sim::Simulator& sim, const CudaMoverConfig& config,
            std::unique_ptr<HostSpaceAllocator> allocator = nullptr);

  void start(sim::Transfer transfer, Done done) override;
  std::string_view name() const override { return "cuda"; }

  // Ok once the device, cache, pool and engine are up; the reason otherwise.
  const Status& device_status() const { return device_status_; }
  // The last CUDA failure seen by a transfer (ok when none).
  const Status& last_error() const { return last_error_; }

  // The GPU paged cache (null without a device).
  PagedKvCache* paged_cache() { return device_status_.ok() ? &cache_ : nullptr; }
  // The pinned object held for `key`, or null.
  const PinnedBlock* find(std::string_view key) const;
  // Frees the pinned object of `key` (the cache evicted it). Returns false when none was held.
  bool drop(std::string_view key);
  uint64_t pinned_free_bytes() const { return pool_.free_bytes(); }

 private:
  struct Held {
    PinnedBlock block;
    int32_t layer = -1;
    int64_t num_tokens = 0;
  };
  struct Planned {  // one object of the transfer being performed
    size_t index = 0;
    const sim::KvObject* object = nullptr;
    PinnedBlock block;
  };

  Status bring_up(std::unique_ptr<HostSpaceAllocator> allocator);
  ChunkFormat format_of(int32_t layer) const;
  uint64_t object_bytes(const sim::KvObject& o) const;
  void check_object(const sim::KvObject& o) const;
  Status run_batches(const std::vector<Planned>& planned, bool store);
  Status store(const sim::Transfer& t, std::vector<uint8_t>* ok);
  Status retrieve(const sim::Transfer& t, std::vector<uint8_t>* ok);

  sim::Simulator& sim_;
  CudaMoverConfig config_;
  Status device_status_;
  Status last_error_;
  PagedKvCache cache_;
  PinnedPool pool_;
  KvTransferEngine engine_;
  DeviceBuffer device_slots_;
  std::map<std::string, Held, std::less<>> held_;  // ordered: no hash order reaches anything
};

}  // namespace kvtwin::cuda
