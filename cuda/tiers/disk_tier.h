// DiskTier: the real local disk tier. Moves chunk objects between host buffers and files; it does
// no capacity accounting and no eviction (model/lmcache decides what lives on disk, as LMCache's
// LocalDiskBackend does above its file I/O).
//
// Files: one per object, format and naming in chunk_file.h. Each put writes
//   <name>.tmp.<pid>.<seq>  (created exclusively, space reserved with fallocate, the payload
//                            written while its checksum is computed, the header written last)
// and renames it onto <name> only after every byte is written, so a reader never sees a partial
// file under the final name; a failed put unlinks its temporary file. A get reads header and
// payload in one vectored read, then checks header, length and XXH3-64 checksum: a file that is
// torn, truncated or altered is reported kCorrupt, counted, and its bytes are not delivered.
// (No fsync: a cache may lose objects at a crash; the header turns what a crash leaves behind
// into a miss.)
//
// I/O: O_DIRECT (config.direct_io) with 4 KiB-aligned buffers, offsets and lengths, or buffered;
// one object at a time (posix engine) or up to queue_depth objects in flight (io_uring). A caller
// buffer that is not 4 KiB aligned is bounced through an aligned copy.
//
// Threading: one thread at a time per DiskTier (the real mover calls it from the simulation
// thread). Several DiskTier objects (processes, ranks) may share one directory.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "cuda/tiers/disk_io.h"
#include "cuda/tiers/tier_status.h"

namespace kvtwin::cuda::tiers {

// Points where a test may inject an errno (the hook returns 0 for "no fault").
enum class DiskFaultPoint : uint8_t { kCreate, kWrite, kRename, kRead };

struct DiskTierConfig {
  std::string path;  // directory (created if absent); "file://" prefix accepted, as in LMCache
  bool direct_io = true;
  bool use_uring = true;
  int queue_depth = 8;  // objects in flight with io_uring
  std::function<int(DiskFaultPoint, std::string_view key)> inject_fault;  // tests only
};

struct DiskPut {
  std::string_view key;
  std::span<const uint8_t> payload;
};
struct DiskGet {
  std::string_view key;
  std::span<uint8_t> out;  // receives exactly out.size() payload bytes on kOk
};

class DiskTier {
 public:
  // Opens (creating if needed) the tier directory and checks that a file can be created, written
  // with the configured I/O mode, read and removed there. Returns nullptr with a one-line reason
  // in *error otherwise (unwritable directory, O_DIRECT unsupported, io_uring unavailable).
  static std::unique_ptr<DiskTier> open(DiskTierConfig config, std::string* error);
  ~DiskTier();

  // Writes every object; out[i] is kOk, kNoSpace or kIoError. REQUIRES: out.size() == puts.size().
  void batched_put(std::span<const DiskPut> puts, std::span<TierStatus> out);
  // Reads every object; out[i] is kOk, kMiss, kCorrupt or kIoError.
  void batched_get(std::span<const DiskGet> gets, std::span<TierStatus> out);
  TierStatus put(std::string_view key, std::span<const uint8_t> payload);
  TierStatus get(std::string_view key, std::span<uint8_t> out);

  bool contains(std::string_view key) const;  // the file exists (its content is not checked)
  bool remove(std::string_view key);          // true when a file was removed
  std::string file_path(std::string_view key) const;

  const DiskTierConfig& config() const { return config_; }
  const TierStats& stats() const { return stats_; }
  std::string_view engine_name() const { return engine_->name(); }

 private:
  DiskTier(DiskTierConfig config, std::unique_ptr<IoEngine> engine);
  int inject(DiskFaultPoint point, std::string_view key) const;

  DiskTierConfig config_;
  std::unique_ptr<IoEngine> engine_;
  TierStats stats_;
  uint64_t next_tmp_seq_ = 0;
};

}  // namespace kvtwin::cuda::tiers
