// Scenario: one deployment to simulate — model geometry, GPU, links, the vLLM and LMCache
// configuration, the cluster, the workload, SLOs and outputs.
//
// Read from TOML (scenario_loader.h); every field, its unit and its range is declared once in
// scenario_fields.cc, which is also what scenarios/README.md documents. Defaults below describe
// Llama-3.1-8B on one H100 SXM with vLLM v0.17.0 defaults and LMCache disabled.
//
// Units are in the field names: _gb (GiB, 2^30 bytes, as LMCache and vLLM size memory), _gbps
// (GB/s = 1e9 bytes/s), _tflops (1e12 FLOP/s), _tbps (TB/s = 1e12 bytes/s), _us, _ms, _s.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace kvtwin::sim::scenario {

// Bytes in one GiB, the unit of every _gb field.
inline constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

struct RunConfig {
  std::string name = "default";
  uint64_t seed = 0;
};

struct ModelConfig {
  std::string name = "meta-llama/Llama-3.1-8B";
  int num_layers = 32;
  int hidden_size = 4096;
  int num_heads = 32;
  int num_kv_heads = 8;
  int head_size = 128;
  int intermediate_size = 14336;
  int vocab_size = 128256;
  std::string dtype = "bfloat16";       // weights and activations
  std::string kv_cache_dtype = "auto";  // "auto" = dtype, bfloat16 or an fp8 type
  // Untied input embedding and LM head (two vocab x hidden matrices), as most checkpoints;
  // true: one shared matrix (Gemma, Whisper).
  bool tie_word_embeddings = false;
  // Attention: "full" (MHA/GQA) or "mla" (DeepSeek-style latent attention).
  std::string attention = "full";
  int kv_lora_rank = 0;      // MLA latent size
  int qk_rope_head_dim = 0;  // MLA decoupled RoPE key size
  int q_lora_rank = 0;       // MLA query low-rank size (0 = full-rank query projection)
  // Layer pattern, repeated to num_layers: F = full attention, S = sliding window, M = Mamba.
  std::string layer_pattern = "F";
  int sliding_window = 0;  // tokens, for S layers
  // MoE (num_experts == 0: dense MLP).
  int num_experts = 0;
  int experts_per_token = 0;
  int moe_intermediate_size = 0;
  int num_shared_experts = 0;
  int first_dense_layers = 0;  // leading layers with a dense MLP
  // Mamba-2 geometry for M layers.
  int mamba_num_heads = 0;
  int mamba_head_dim = 0;
  int mamba_state_size = 0;  // d_state
  int mamba_n_groups = 1;
  int mamba_conv_kernel = 4;
  // The Mamba-2 kernel's chunk (the checkpoint's chunk_size): aligns the block size of
  // mamba_cache_mode "all".
  int mamba_chunk_size = 256;
  // Encoder-decoder (cross attention): encoder layers and the fixed encoder input per request.
  int encoder_layers = 0;
  int encoder_tokens = 0;
};

struct GpuConfig {
  std::string name = "H100-SXM5-80GB";
  double memory_gb = 80.0;
  double peak_tflops = 989.0;  // dense tensor-core peak for model.dtype
  // Dense 16-bit peak for what runs in 16 bits whatever the weights (attention, LM head,
  // routers, MLA's absorbed matrices); 0: peak_tflops.
  double peak_tflops_16bit = 0;
  double hbm_tbps = 3.35;
  double compute_efficiency = 0.6;  // achieved / peak on GEMMs
  double memory_efficiency = 0.8;   // achieved / peak on streaming reads
  double step_overhead_us = 3000;   // fixed cost per step (launches, sampling; the scheduler's
                                    // CPU time too unless vllm.*_cpu_us take it)
  int tensor_parallel = 1;
  // CUDA compute capability (9.0 Hopper, 10.0 Blackwell, 8.0 Ampere): picks vLLM's default MLA
  // backend, whose block size vLLM forces.
  double compute_capability = 9.0;
  // The capability's family (9 for 9.0, 10 for 10.3), as vLLM's is_device_capability_family.
  int capability_major() const { return static_cast<int>(compute_capability); }
  double allreduce_gbps = 300;  // per-GPU NVLink bus bandwidth seen by all-reduce
  double allreduce_latency_us = 8;
};

struct StepConfig {
  std::string model = "roofline";  // roofline | profile
  std::string profile = "";        // CSV of measured steps when model = profile
};

struct VllmConfig {
  int block_size = 16;
  int64_t num_gpu_blocks = 0;  // 0 = derive from gpu_memory_utilization
  double gpu_memory_utilization = 0.9;
  double activation_reserve_gb = 4.0;  // per GPU, kept from the KV pool when deriving
  int max_num_batched_tokens = 0;      // 0 = vLLM's default (effective_max_num_batched_tokens)
  int max_num_seqs = 0;  // 0 = vLLM's default (scenario_loader.h: effective_max_num_seqs)
  int long_prefill_token_threshold = 0;  // 0 = off
  // Unset: vLLM's default for the model (ModelConfig.is_prefix_caching_supported): on for
  // decoder-only attention models, off for Mamba hybrids and encoder-decoder models
  // (scenario_loader.h: effective_enable_prefix_caching).
  std::optional<bool> enable_prefix_caching;
  bool enable_chunked_prefill = true;
  int64_t max_model_len = 131072;
  std::string prefix_caching_hash_algo = "sha256";
  std::string mamba_cache_mode = "none";  // none | align | all (Mamba state prefix caching)
  // KV connector loads that fail (kv_transfer_config.kv_load_failure_policy): "fail" (vLLM
  // v0.17's default) ends the request with an error; "recompute" recomputes the lost tokens.
  std::string kv_load_failure_policy = "fail";
  // scheduler_config.policy: "fcfs" (vLLM's default) or "priority" (the trace's priorities, lower
  // first; preemption takes the lowest-priority running request).
  std::string scheduling_policy = "fcfs";
  // Asynchronous scheduling (scheduler_config.async_scheduling; on by default in vLLM v0.17 with
  // its uni / mp executors): the engine schedules step N+1 while step N runs and processes step
  // N's output after that; false: the synchronous loop (schedule, run, update).
  bool async_scheduling = true;
  // The engine core's own CPU time per step (0: none, as before they were modelled; the fixed
  // per-step cost then lives in gpu.step_overhead_us). schedule_cpu_us: one schedule() that
  // builds a batch, with its connector metadata; the batch starts after it. output_cpu_us:
  // update_from_output of one step; its tokens are out after it. In the synchronous loop both
  // are on every step's critical path; under async scheduling the next schedule runs while a
  // step runs, so they cost only what the GPU step does not cover.
  double schedule_cpu_us = 0;
  double output_cpu_us = 0;
};

struct LmcacheConfig {
  bool enabled = false;
  int chunk_size = 256;
  bool local_cpu = true;
  double max_local_cpu_size_gb = 5.0;
  double max_local_disk_size_gb = 0.0;
  bool remote = false;
  std::string cache_policy = "LRU";
  bool use_layerwise = false;
  // MLA only (LMCache's default for MLA): rank 0 alone stores and loads, and broadcasts its loads
  // to the other ranks; false: every rank keeps its own copy of the replicated latent KV.
  bool save_only_first_rank = true;
  bool save_decode_cache = false;
  bool save_unfull_chunk = false;
  bool enable_async_loading = false;
  int lookup_timeout_ms = 3000;     // async lookups answer 0 after this long
  double lookup_backoff_ms = 10.0;  // scheduler sleep per async lookup sent / pending check
  int min_retrieve_tokens = 0;
  // LMCache's priority_limit: a request whose priority is above it is never stored (its tracker's
  // skip_save); unset (upstream's None) stores every request.
  std::optional<int64_t> priority_limit;
  bool upstream_fixes = false;  // apply every later upstream fix of a reproduced quirk
  // LMCache's HealthMonitor with its RemoteBackendHealthCheck (remote tier only; upstream starts
  // it always): every ping_interval_s, a count of failed blocking Redis reads at the threshold
  // makes the engine unhealthy (no lookup, load or store: recompute) until
  // waiting_time_for_recovery_s has passed and a test put and get succeed.
  bool health_monitor = true;
  // What a failed check does: "recompute" (upstream's default: the engine is unhealthy) or
  // "local_cpu" (the remote tier is bypassed and the CPU hot cache forced on until it recovers).
  std::string health_fallback_policy = "recompute";
  double ping_interval_s = 30.0;
  int64_t get_blocking_failed_threshold = 10;
  double waiting_time_for_recovery_s = 300.0;
  // LMCache's blocking_timeout_secs: how long a bulk retrieve waits for each remote GET. Not
  // modelled (sim/engine/blocking_get.h): the GETs that upstream would give up on are counted.
  int64_t blocking_timeout_secs = 10;
};

struct LinksConfig {
  double pcie_h2d_gbps = 35.0;
  double pcie_d2h_gbps = 50.0;
  double pcie_latency_us = 10.0;
  double disk_read_gbps = 7.0;
  double disk_write_gbps = 5.0;
  double disk_latency_us = 80.0;
  // The page cache over the disk tier's files (LMCache writes and reads them buffered): GiB of
  // host memory per instance (0 = none, as with use_odirect), and the copy bandwidth of a read
  // it serves. See sim/hw/page_cache.h.
  double page_cache_gb = 0.0;
  double page_cache_gbps = 10.0;        // reads it serves
  double page_cache_write_gbps = 8.0;   // buffered writes into it
  double page_cache_dirty_ratio = 0.2;  // share of it that may hold unwritten data (vm.dirty_ratio)
  double network_gbps = 12.5;           // each instance's NIC, per direction
  double network_latency_us = 50.0;
  double remote_server_gbps = 25.0;      // the shared remote store's NIC, per direction
  double remote_get_failure_rate = 0.0;  // fraction of remote reads that fail (a miss)
};

// A hardware profile written by `kvtwin calibrate` (sim/calibrate/hardware_profile.h): its
// [links] figures, fitted on a real machine, replace the scenario's.
struct HardwareConfig {
  std::string profile = "";  // TOML path, relative to the scenario file; "" = none
};

struct ClusterConfig {
  int instances = 1;
  std::string router = "round_robin";  // round_robin | least_loaded | prefix_aware
};

struct WorkloadConfig {
  std::string trace = "";  // empty: the embedded default trace
  std::string format = "auto";
  std::string arrivals = "trace";  // trace | spread (equal recorded times over the gap after)
  double rate_scale = 1.0;         // arrival rate multiplier (times are divided by it)
  int64_t max_requests = 0;        // 0 = all
  double max_duration_s = 0;       // 0 = whole trace; else only arrivals before start_s + this
  double start_s = 0;              // only arrivals from this (scaled) time, shifted to start at 0
  double warmup_s = 0;             // arrivals this long before start_s warm the caches, unmeasured
  // Synthetic shared prefixes for requests without block ids (e.g. the Azure traces).
  int prefix_groups = 0;  // 0 = off
  int prefix_tokens = 0;
  double prefix_zipf = 1.0;  // group popularity ~ 1/rank^s
  int prefix_block_size = 16;
};

struct SloConfig {
  double ttft_ms = 2000;
  double tpot_ms = 100;
};

// What the deployment's hardware costs, in any one currency per hour (a monthly price is
// about 730 hours). All 0: not priced, and the outputs carry no cost (sim/report/cost.h).
struct CostConfig {
  double gpu_per_hour = 0;             // per GPU (an instance has gpu.tensor_parallel)
  double instance_per_hour = 0;        // the rest of an instance: host, CPU, NIC, power
  double cpu_memory_gib_per_hour = 0;  // host DRAM: LMCache's CPU pools and the page caches
  double disk_gib_per_hour = 0;        // LMCache's local disk tiers, as sized
  double remote_gib_per_hour = 0;      // the remote store, at the most it held
};

struct OutputConfig {
  double timeseries_interval_s = 1.0;
  // Latency percentiles of exact samples (TTFT, TPOT, E2E, queue): "nearest_rank", or "linear"
  // (numpy.percentile's default, as vllm bench serve reports them).
  std::string percentiles = "nearest_rank";
  bool chrome_trace = true;
  int64_t chrome_trace_max_events = 200000;
  bool plots = true;
};

// Where a field's value came from, so cross-field errors can name a file and line.
struct FieldOrigin {
  std::string file;
  uint64_t line = 0;  // 0: a default or a command-line override
};

struct Scenario {
  std::string source;    // file the scenario came from ("" for the embedded default)
  std::string base_dir;  // directory that relative paths in the scenario resolve against
  std::map<std::string, FieldOrigin> origins;  // key -> where its value was set
  RunConfig run;
  ModelConfig model;
  GpuConfig gpu;
  StepConfig step;
  VllmConfig vllm;
  LmcacheConfig lmcache;
  LinksConfig links;
  HardwareConfig hardware;
  ClusterConfig cluster;
  WorkloadConfig workload;
  SloConfig slo;
  CostConfig cost;
  OutputConfig output;
};

}  // namespace kvtwin::sim::scenario
