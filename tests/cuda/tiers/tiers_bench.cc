// tiers_bench: throughput of the real tiers against the raw machine, measured in the same run on
// the same file system / server, interleaved round by round so that drift hits both alike.
//
//   disk    N objects of M MiB per round. raw = the same bytes with O_DIRECT to plain files, one
//           per object, no header, checksum, fallocate or rename: one at a time (what dd does)
//           and through io_uring at the tier's depth. tier = DiskTier (O_DIRECT; io_uring at that
//           depth, and posix). Fresh files every round for all of them. dd itself runs once as a
//           cross-check when it is installed. tier buffered = DiskTier without O_DIRECT (posix),
//           as LMCache writes by default: its writes land in the page cache (within the
//           kernel's dirty limits) and its reads of the files just written come back from it —
//           the figures for the simulator's links.page_cache_write_gbps and page_cache_gbps.
//   redis   the Redis tier's put / get of the same objects (pipeline depth 1 and 8) against
//           redis-benchmark -d <object bytes> -c 1 -P <depth> on the same server (a private
//           redis-server on loopback unless --remote-url is given).
//
// Figures: median GB/s (1e9 B/s) over the rounds, and the tier's share of the best raw figure.
// On a shared machine the figures are noisy; rerun on a quiet one for the record.
//
// usage: tiers_bench [--disk-path DIR] [--objects N] [--object-mib M] [--rounds R]
//                    [--depth D] [--remote-url URL | --no-redis]
#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "cuda/tiers/disk_io.h"
#include "cuda/tiers/disk_tier.h"
#include "cuda/tiers/host_buffer.h"
#include "cuda/tiers/redis_tier.h"
#include "tests/cuda/tiers/redis_server.h"

namespace kvtwin::cuda::tiers {
namespace {

using Clock = std::chrono::steady_clock;

struct Options {
  std::string disk_path = std::string(KVTWIN_SOURCE_DIR) + "/build/bench_scratch";
  int objects = 16;
  uint64_t object_bytes = uint64_t{32} << 20;
  int rounds = 5;
  int depth = 8;
  std::string remote_url;
  bool redis = true;
};

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

double seconds_of(const std::function<void()>& f) {
  const auto t0 = Clock::now();
  f();
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

std::string key_of(int i) {
  return "bench@1@0@" + std::to_string(i) + "@bfloat16";
}

// Raw O_DIRECT files: "<dir>/raw.<i>", payload only.
class RawFiles {
 public:
  RawFiles(std::string dir, int depth) : dir_(std::move(dir)) {
    std::string error;
    uring_ = make_uring_engine(depth, &error);
    if (!uring_) throw std::runtime_error(error);
    posix_ = make_posix_engine();
  }
  void write(std::vector<HostBuffer>& bufs, bool uring) { run(bufs, uring, true); }
  void read(std::vector<HostBuffer>& bufs, bool uring) { run(bufs, uring, false); }
  void remove(size_t n) {
    for (size_t i = 0; i < n; ++i) ::unlink(path(i).c_str());
  }

 private:
  std::string path(size_t i) const { return dir_ + "/raw." + std::to_string(i); }
  void run(std::vector<HostBuffer>& bufs, bool uring, bool write) {
    std::vector<int> fds(bufs.size(), -1);
    auto start = [&](size_t i, IoRequest* r) {
      fds[i] = write ? ::open(path(i).c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_DIRECT, 0644)
                     : ::open(path(i).c_str(), O_RDONLY | O_DIRECT);
      if (fds[i] < 0) throw std::runtime_error("raw open: " + std::string(std::strerror(errno)));
      r->fd = fds[i];
      r->write = write;
      r->iov[0] = {bufs[i].data(), bufs[i].capacity()};
      r->iovcnt = 1;
      return true;
    };
    auto finish = [&](size_t i, int64_t result) {
      if (result != static_cast<int64_t>(bufs[i].capacity()))
        throw std::runtime_error("raw I/O: short or failed");
      ::close(fds[i]);
    };
    (uring ? *uring_ : *posix_).run(bufs.size(), start, nullptr, finish);
  }
  std::string dir_;
  std::unique_ptr<IoEngine> uring_, posix_;
};

void bench_disk(const Options& o) {
  std::filesystem::create_directories(o.disk_path);
  const double total = static_cast<double>(o.objects) * static_cast<double>(o.object_bytes);
  std::vector<HostBuffer> bufs;
  for (int i = 0; i < o.objects; ++i) {
    bufs.emplace_back(o.object_bytes);
    fill_content(key_of(i), bufs.back().span());
  }
  std::vector<HostBuffer> outs;
  for (int i = 0; i < o.objects; ++i) outs.emplace_back(o.object_bytes);
  RawFiles raw(o.disk_path, o.depth);
  std::string error;
  DiskTierConfig uc;
  uc.path = o.disk_path;
  uc.queue_depth = o.depth;
  DiskTierConfig pc = uc;
  pc.use_uring = false;
  DiskTierConfig bc = pc;
  bc.direct_io = false;
  auto tier_uring = DiskTier::open(uc, &error);
  auto tier_posix = DiskTier::open(pc, &error);
  auto tier_buffered = DiskTier::open(bc, &error);
  if (!tier_uring || !tier_posix || !tier_buffered) throw std::runtime_error(error);
  std::vector<DiskPut> puts;
  std::vector<DiskGet> gets;
  std::vector<std::string> keys;
  for (int i = 0; i < o.objects; ++i) keys.push_back(key_of(i));
  for (int i = 0; i < o.objects; ++i) {
    puts.push_back({keys[i], bufs[i].span()});
    gets.push_back({keys[i], outs[i].span()});
  }
  std::vector<TierStatus> status(o.objects);
  auto check = [&](const char* what) {
    for (int i = 0; i < o.objects; ++i)
      if (status[i] != TierStatus::kOk) throw std::runtime_error(std::string(what) + " failed");
  };
  auto verify = [&] {
    for (int i = 0; i < o.objects; ++i)
      if (first_content_mismatch(keys[i], outs[i].span()) != outs[i].size())
        throw std::runtime_error("wrong bytes read back");
  };
  std::map<std::string, std::vector<double>> gbps;
  auto record = [&](const std::string& name, double s) { gbps[name].push_back(total / s / 1e9); };
  for (int r = 0; r < o.rounds + 1; ++r) {  // round 0 warms up
    auto rec = [&](const std::string& name, double s) {
      if (r > 0) record(name, s);
    };
    raw.remove(o.objects);
    rec("raw depth 1 write", seconds_of([&] { raw.write(bufs, false); }));
    rec("raw depth 1 read", seconds_of([&] { raw.read(outs, false); }));
    raw.remove(o.objects);
    rec("raw io_uring write", seconds_of([&] { raw.write(bufs, true); }));
    rec("raw io_uring read", seconds_of([&] { raw.read(outs, true); }));
    raw.remove(o.objects);
    for (const auto& k : keys) tier_uring->remove(k);
    rec("tier io_uring write", seconds_of([&] { tier_uring->batched_put(puts, status); }));
    check("tier io_uring put");
    rec("tier io_uring read", seconds_of([&] { tier_uring->batched_get(gets, status); }));
    check("tier io_uring get");
    verify();
    for (const auto& k : keys) tier_posix->remove(k);
    rec("tier posix write", seconds_of([&] { tier_posix->batched_put(puts, status); }));
    check("tier posix put");
    rec("tier posix read", seconds_of([&] { tier_posix->batched_get(gets, status); }));
    check("tier posix get");
    verify();
    for (const auto& k : keys) tier_posix->remove(k);
    rec("tier buffered write", seconds_of([&] { tier_buffered->batched_put(puts, status); }));
    check("tier buffered put");
    rec("tier buffered read", seconds_of([&] { tier_buffered->batched_get(gets, status); }));
    check("tier buffered get");
    verify();
    for (const auto& k : keys) tier_buffered->remove(k);
  }
  std::printf("disk: %s, %d x %llu MiB objects per round, median of %d rounds (GB/s)\n",
              o.disk_path.c_str(), o.objects, static_cast<unsigned long long>(o.object_bytes >> 20),
              o.rounds);
  std::printf("  %-22s %8s %8s\n", "", "write", "read");
  for (const char* v :
       {"raw depth 1", "raw io_uring", "tier posix", "tier io_uring", "tier buffered"})
    std::printf("  %-22s %8.3f %8.3f\n", v, median(gbps[std::string(v) + " write"]),
                median(gbps[std::string(v) + " read"]));
  const double raw_w =
      std::max(median(gbps["raw depth 1 write"]), median(gbps["raw io_uring write"]));
  const double raw_r =
      std::max(median(gbps["raw depth 1 read"]), median(gbps["raw io_uring read"]));
  std::printf("  tier io_uring / best raw: write %.0f%%, read %.0f%% (target >= 90%%)\n",
              100 * median(gbps["tier io_uring write"]) / raw_w,
              100 * median(gbps["tier io_uring read"]) / raw_r);
  std::printf(
      "  (tier buffered: into and back from the page cache, links.page_cache_write_gbps and "
      "page_cache_gbps)\n");
  // dd as a cross-check of the raw figures.
  const std::string f = o.disk_path + "/dd.bin";
  const std::string count = std::to_string(o.objects * (o.object_bytes >> 20) / 32);
  const std::string cmd = "dd if=/dev/zero of=" + f + " bs=32M count=" + count +
                          " oflag=direct 2>&1 | tail -1; dd if=" + f +
                          " of=/dev/null bs=32M iflag=direct 2>&1 | tail -1; rm -f " + f;
  std::printf("  dd (bs=32M, O_DIRECT, write then read):\n");
  std::fflush(stdout);
  if (std::system(cmd.c_str()) != 0) std::printf("  (dd not available)\n");
}

// redis-benchmark's requests per second for `test` (SET or GET), or -1.
double redis_benchmark_rps(const RedisUrl& url, const char* test, uint64_t bytes, int n,
                           int depth) {
  const std::string cmd = "redis-benchmark -h " + url.host + " -p " + std::to_string(url.port) +
                          " -t " + test + " -d " + std::to_string(bytes) + " -n " +
                          std::to_string(n) + " -c 1 -P " + std::to_string(depth) +
                          " --csv 2>/dev/null";
  FILE* p = ::popen(cmd.c_str(), "r");
  if (p == nullptr) return -1;
  char line[512];
  double rps = -1;
  while (std::fgets(line, sizeof(line), p) != nullptr)
    if (std::strncmp(line, "\"SET\"", 5) == 0 || std::strncmp(line, "\"GET\"", 5) == 0)
      rps = std::atof(line + 7);
  ::pclose(p);
  return rps;
}

void bench_redis(const Options& o) {
  std::unique_ptr<kvtwin::testing::RedisServer> server;
  std::string url = o.remote_url;
  if (url.empty()) {
    server = std::make_unique<kvtwin::testing::RedisServer>();
    url = server->url();
  }
  std::string error;
  const RedisUrl parsed = *parse_redis_url(url, &error);
  std::vector<HostBuffer> bufs, outs;
  std::vector<std::string> keys;
  for (int i = 0; i < o.objects; ++i) {
    keys.push_back(key_of(i));
    bufs.emplace_back(o.object_bytes);
    fill_content(keys.back(), bufs.back().span());
    outs.emplace_back(o.object_bytes);
  }
  std::vector<RemotePut> puts;
  std::vector<RemoteGet> gets;
  for (int i = 0; i < o.objects; ++i) {
    puts.push_back({keys[i], bufs[i].span(), opaque_metadata(o.object_bytes)});
    gets.push_back({keys[i], outs[i].span()});
  }
  const double total = static_cast<double>(o.objects) * static_cast<double>(o.object_bytes);
  std::printf("\nredis: %s, %d x %llu MiB values, median of %d rounds (GB/s)\n", url.c_str(),
              o.objects, static_cast<unsigned long long>(o.object_bytes >> 20), o.rounds);
  std::printf("  %-28s %8s %8s\n", "", "put/SET", "get/GET");
  for (int depth : {1, o.depth}) {
    RedisTierConfig c;
    c.client.url = url;
    c.client.command_timeout_ms = 30000;
    c.pipeline_depth = depth;
    auto tier = RedisTier::open(c, &error);
    if (!tier) throw std::runtime_error(error);
    std::vector<TierStatus> status(o.objects);
    std::vector<double> put_gbps, get_gbps, set_gbps, getb_gbps;
    for (int r = 0; r < o.rounds + 1; ++r) {
      const double tp = seconds_of([&] { tier->batched_put(puts, status); });
      const double tg = seconds_of([&] { tier->batched_get(gets, status); });
      for (int i = 0; i < o.objects; ++i)
        if (status[i] != TierStatus::kOk ||
            first_content_mismatch(keys[i], outs[i].span()) != outs[i].size())
          throw std::runtime_error("redis tier round trip failed");
      tier->remove(keys);
      const double set_rps = redis_benchmark_rps(parsed, "set", o.object_bytes, o.objects, depth);
      const double get_rps = redis_benchmark_rps(parsed, "get", o.object_bytes, o.objects, depth);
      if (r == 0) continue;
      put_gbps.push_back(total / tp / 1e9);
      get_gbps.push_back(total / tg / 1e9);
      set_gbps.push_back(set_rps * static_cast<double>(o.object_bytes) / 1e9);
      getb_gbps.push_back(get_rps * static_cast<double>(o.object_bytes) / 1e9);
    }
    const std::string d = std::to_string(depth);
    std::printf("  %-28s %8.3f %8.3f\n", ("tier, pipeline " + d).c_str(), median(put_gbps),
                median(get_gbps));
    std::printf("  %-28s %8.3f %8.3f\n", ("redis-benchmark -c 1 -P " + d).c_str(), median(set_gbps),
                median(getb_gbps));
  }
  std::printf("  (tier put = SET kv_bytes + SET metadata; get = GET metadata + GET kv_bytes)\n");
}

}  // namespace
}  // namespace kvtwin::cuda::tiers

int main(int argc, char** argv) {
  kvtwin::cuda::tiers::Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "tiers_bench: %s needs a value\n", a.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "--disk-path")
      o.disk_path = next();
    else if (a == "--objects")
      o.objects = std::stoi(next());
    else if (a == "--object-mib")
      o.object_bytes = std::stoull(next()) << 20;
    else if (a == "--rounds")
      o.rounds = std::stoi(next());
    else if (a == "--depth")
      o.depth = std::stoi(next());
    else if (a == "--remote-url")
      o.remote_url = next();
    else if (a == "--no-redis")
      o.redis = false;
    else {
      std::fprintf(stderr,
                   "usage: tiers_bench [--disk-path DIR] [--objects N] [--object-mib M] "
                   "[--rounds R] [--depth D] [--remote-url URL | --no-redis]\n");
      return 2;
    }
  }
  try {
    kvtwin::cuda::tiers::bench_disk(o);
    if (o.redis) kvtwin::cuda::tiers::bench_redis(o);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "tiers_bench: %s\n", e.what());
    return 1;
  }
  return 0;
}
