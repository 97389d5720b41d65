#include "sim/scenario/scenario_fields.h"

#include <charconv>
#include <cstdio>
#include <map>

namespace kvtwin::sim::scenario {
namespace {

// Shortest text that reads back as the same double.
std::string format_double(double v) {
  char buf[64];
  auto res = std::to_chars(buf, buf + sizeof buf, v);
  std::string s(buf, res.ptr);
  if (s.find_first_of(".eEn") == std::string::npos) s += ".0";  // stay a TOML float
  return s;
}

// A TOML basic string: quotes, backslashes and control characters escaped, so that a dumped
// scenario always parses back.
std::string quote(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    const auto u = static_cast<unsigned char>(c);
    if (c == '"' || c == '\\') {
      out.push_back('\\');
      out.push_back(c);
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\t') {
      out += "\\t";
    } else if (u < 0x20 || u == 0x7f) {
      char esc[8];
      std::snprintf(esc, sizeof esc, "\\u%04X", u);
      out += esc;
    } else {
      out.push_back(c);
    }
  }
  return out + "\"";
}

// Member-pointer helpers: field(key, &Scenario::section, &Section::member, ...).
template <class S, class T>
FieldSpec numeric(std::string key, S Scenario::*sec, T S::*mem, double lo, double hi,
                  std::string unit, std::string doc) {
  FieldSpec f;
  f.key = std::move(key);
  f.type = std::is_floating_point_v<T> ? FieldType::kDouble : FieldType::kInt;
  f.min = lo;
  f.max = hi;
  f.unit = std::move(unit);
  f.doc = std::move(doc);
  f.set = [sec, mem](Scenario* s, const FieldValue& v) {
    if constexpr (std::is_floating_point_v<T>) {
      (s->*sec).*mem = std::holds_alternative<double>(v)
                           ? std::get<double>(v)
                           : static_cast<double>(std::get<int64_t>(v));
    } else {
      (s->*sec).*mem = static_cast<T>(std::get<int64_t>(v));
    }
  };
  f.get = [sec, mem](const Scenario& s) {
    if constexpr (std::is_floating_point_v<T>) {
      return format_double((s.*sec).*mem);
    } else {
      return std::to_string((s.*sec).*mem);
    }
  };
  return f;
}

// An integer that may be left unset (upstream's None): the dump writes an unset one as a comment.
template <class S>
FieldSpec optional_integer(std::string key, S Scenario::*sec, std::optional<int64_t> S::*mem,
                           double lo, double hi, std::string unit, std::string doc) {
  FieldSpec f;
  f.key = std::move(key);
  f.type = FieldType::kInt;
  f.min = lo;
  f.max = hi;
  f.unit = std::move(unit);
  f.doc = std::move(doc);
  f.set = [sec, mem](Scenario* s, const FieldValue& v) { (s->*sec).*mem = std::get<int64_t>(v); };
  f.get = [sec, mem](const Scenario& s) {
    const std::optional<int64_t>& v = (s.*sec).*mem;
    return v.has_value() ? std::to_string(*v) : std::string();
  };
  return f;
}

template <class S>
FieldSpec boolean(std::string key, S Scenario::*sec, bool S::*mem, std::string doc) {
  FieldSpec f;
  f.key = std::move(key);
  f.type = FieldType::kBool;
  f.doc = std::move(doc);
  f.set = [sec, mem](Scenario* s, const FieldValue& v) { (s->*sec).*mem = std::get<bool>(v); };
  f.get = [sec, mem](const Scenario& s) { return std::string((s.*sec).*mem ? "true" : "false"); };
  return f;
}

// A boolean that may be left unset (upstream's None), dumped as a comment while unset.
template <class S>
FieldSpec optional_boolean(std::string key, S Scenario::*sec, std::optional<bool> S::*mem,
                           std::string doc) {
  FieldSpec f;
  f.key = std::move(key);
  f.type = FieldType::kBool;
  f.doc = std::move(doc);
  f.set = [sec, mem](Scenario* s, const FieldValue& v) { (s->*sec).*mem = std::get<bool>(v); };
  f.get = [sec, mem](const Scenario& s) {
    const std::optional<bool>& v = (s.*sec).*mem;
    return v.has_value() ? std::string(*v ? "true" : "false") : std::string();
  };
  return f;
}

template <class S>
FieldSpec text(std::string key, S Scenario::*sec, std::string S::*mem,
               std::vector<std::string> choices, std::string doc) {
  FieldSpec f;
  f.key = std::move(key);
  f.type = FieldType::kString;
  f.choices = std::move(choices);
  f.doc = std::move(doc);
  f.set = [sec, mem](Scenario* s, const FieldValue& v) {
    (s->*sec).*mem = std::get<std::string>(v);
  };
  f.get = [sec, mem](const Scenario& s) { return quote((s.*sec).*mem); };
  return f;
}

constexpr double kBig = 1e15;

std::vector<FieldSpec> make_fields() {
  using S = Scenario;
  std::vector<FieldSpec> f;
  // [run]
  f.push_back(text("run.name", &S::run, &RunConfig::name, {}, "label written into outputs"));
  f.push_back(numeric("run.seed", &S::run, &RunConfig::seed, 0, 9.2e18, "",
                      "seed of every random stream (token synthesis, synthetic prefixes, faults)"));
  // [model]
  f.push_back(text("model.name", &S::model, &ModelConfig::name, {}, "model label"));
  f.push_back(numeric("model.num_layers", &S::model, &ModelConfig::num_layers, 1, 1024, "layers",
                      "decoder layers"));
  f.push_back(numeric("model.hidden_size", &S::model, &ModelConfig::hidden_size, 1, 1 << 20,
                      "elements", "residual stream width"));
  f.push_back(numeric("model.num_heads", &S::model, &ModelConfig::num_heads, 1, 4096, "heads",
                      "query heads"));
  f.push_back(numeric("model.num_kv_heads", &S::model, &ModelConfig::num_kv_heads, 1, 4096, "heads",
                      "key/value heads (GQA); ignored for MLA"));
  f.push_back(numeric("model.head_size", &S::model, &ModelConfig::head_size, 1, 4096, "elements",
                      "per-head dimension (for MLA: the no-RoPE query/key part and values)"));
  f.push_back(numeric("model.intermediate_size", &S::model, &ModelConfig::intermediate_size, 0,
                      1 << 22, "elements", "dense MLP width (gated: 3 matrices)"));
  f.push_back(numeric("model.vocab_size", &S::model, &ModelConfig::vocab_size, 2, 1 << 24, "tokens",
                      "vocabulary (LM head size; synthesized token ids stay below it)"));
  f.push_back(text("model.dtype", &S::model, &ModelConfig::dtype,
                   {"bfloat16", "float16", "float32", "fp8", "mxfp4"},
                   "weight type (activations and all-reduce traffic are 16-bit unless float32)"));
  f.push_back(text("model.kv_cache_dtype", &S::model, &ModelConfig::kv_cache_dtype,
                   {"auto", "bfloat16", "fp8", "fp8_e4m3", "fp8_e5m2"},
                   "KV-cache element type, as vLLM's --kv-cache-dtype (auto = model.dtype; "
                   "bfloat16 for fp8 and mxfp4 weights)"));
  f.push_back(boolean("model.tie_word_embeddings", &S::model, &ModelConfig::tie_word_embeddings,
                      "one matrix for the input embedding and the LM head (false: two, each "
                      "vocab_size x hidden_size, split over the ranks)"));
  f.push_back(text("model.attention", &S::model, &ModelConfig::attention, {"full", "mla"},
                   "attention of F layers: full (MHA/GQA) or mla (latent KV)"));
  f.push_back(numeric("model.kv_lora_rank", &S::model, &ModelConfig::kv_lora_rank, 0, 65536,
                      "elements", "MLA latent KV size (DeepSeek-V3: 512)"));
  f.push_back(numeric("model.qk_rope_head_dim", &S::model, &ModelConfig::qk_rope_head_dim, 0, 65536,
                      "elements", "MLA decoupled RoPE key size (DeepSeek-V3: 64)"));
  f.push_back(numeric("model.q_lora_rank", &S::model, &ModelConfig::q_lora_rank, 0, 65536,
                      "elements", "MLA query low-rank size (0 = full-rank query)"));
  f.push_back(text("model.layer_pattern", &S::model, &ModelConfig::layer_pattern, {},
                   "per-layer kinds repeated to num_layers: F full attention, S sliding window, "
                   "M Mamba-2 (e.g. SSSSSF for 5 local : 1 global)"));
  f.push_back(numeric("model.sliding_window", &S::model, &ModelConfig::sliding_window, 0, 1 << 24,
                      "tokens", "window of S layers"));
  f.push_back(numeric("model.num_experts", &S::model, &ModelConfig::num_experts, 0, 65536,
                      "experts", "routed experts per MoE layer (0 = dense)"));
  f.push_back(numeric("model.experts_per_token", &S::model, &ModelConfig::experts_per_token, 0,
                      65536, "experts", "routed experts active per token"));
  f.push_back(numeric("model.moe_intermediate_size", &S::model, &ModelConfig::moe_intermediate_size,
                      0, 1 << 22, "elements", "width of one expert's gated MLP"));
  f.push_back(numeric("model.num_shared_experts", &S::model, &ModelConfig::num_shared_experts, 0,
                      1024, "experts", "always-active shared experts per MoE layer"));
  f.push_back(numeric("model.first_dense_layers", &S::model, &ModelConfig::first_dense_layers, 0,
                      1024, "layers", "leading layers with a dense MLP in an MoE model"));
  f.push_back(numeric("model.mamba_num_heads", &S::model, &ModelConfig::mamba_num_heads, 0, 65536,
                      "heads", "Mamba-2 heads of M layers"));
  f.push_back(numeric("model.mamba_head_dim", &S::model, &ModelConfig::mamba_head_dim, 0, 65536,
                      "elements", "Mamba-2 head dimension"));
  f.push_back(numeric("model.mamba_state_size", &S::model, &ModelConfig::mamba_state_size, 0, 65536,
                      "elements", "Mamba-2 SSM state size (d_state)"));
  f.push_back(numeric("model.mamba_n_groups", &S::model, &ModelConfig::mamba_n_groups, 1, 65536,
                      "groups", "Mamba-2 B/C groups"));
  f.push_back(numeric("model.mamba_conv_kernel", &S::model, &ModelConfig::mamba_conv_kernel, 1, 64,
                      "tokens", "Mamba-2 causal convolution width"));
  f.push_back(numeric("model.mamba_chunk_size", &S::model, &ModelConfig::mamba_chunk_size, 1,
                      1 << 20, "tokens",
                      "the Mamba-2 kernel's chunk (the checkpoint's chunk_size): with "
                      "vllm.mamba_cache_mode = all the block size is a multiple of "
                      "lcm(chunk, the attention kernel's alignment)"));
  f.push_back(numeric("model.encoder_layers", &S::model, &ModelConfig::encoder_layers, 0, 1024,
                      "layers", "encoder layers of an encoder-decoder model (0 = decoder only)"));
  f.push_back(numeric("model.encoder_tokens", &S::model, &ModelConfig::encoder_tokens, 0, 1 << 24,
                      "tokens", "encoder input per request (cross-attention KV length)"));
  // [gpu]
  f.push_back(text("gpu.name", &S::gpu, &GpuConfig::name, {}, "GPU label"));
  f.push_back(numeric("gpu.memory_gb", &S::gpu, &GpuConfig::memory_gb, 0.001, 1e6, "GiB",
                      "device memory per GPU"));
  f.push_back(numeric("gpu.peak_tflops", &S::gpu, &GpuConfig::peak_tflops, 0.001, 1e6, "TFLOP/s",
                      "dense tensor-core peak per GPU for model.dtype"));
  f.push_back(numeric("gpu.peak_tflops_16bit", &S::gpu, &GpuConfig::peak_tflops_16bit, 0, 1e6,
                      "TFLOP/s",
                      "dense 16-bit tensor-core peak per GPU for what runs in 16 bits whatever "
                      "the weights: attention, the LM head, MoE routers, MLA's absorbed decode "
                      "matrices; 0: peak_tflops (set it when peak_tflops is an fp8 peak)"));
  f.push_back(numeric("gpu.hbm_tbps", &S::gpu, &GpuConfig::hbm_tbps, 0.001, 1e3, "TB/s",
                      "peak HBM bandwidth per GPU"));
  f.push_back(numeric("gpu.compute_efficiency", &S::gpu, &GpuConfig::compute_efficiency, 0.001, 1,
                      "fraction", "achieved fraction of peak_tflops"));
  f.push_back(numeric("gpu.memory_efficiency", &S::gpu, &GpuConfig::memory_efficiency, 0.001, 1,
                      "fraction", "achieved fraction of hbm_tbps"));
  f.push_back(
      numeric("gpu.step_overhead_us", &S::gpu, &GpuConfig::step_overhead_us, 0, 1e7, "us",
              "fixed cost per engine step on the GPU's path (launches, sampling; the scheduler's "
              "CPU time too unless vllm.schedule_cpu_us / output_cpu_us take it)"));
  f.push_back(numeric("gpu.tensor_parallel", &S::gpu, &GpuConfig::tensor_parallel, 1, 1024, "GPUs",
                      "tensor-parallel degree of one instance"));
  f.push_back(numeric("gpu.compute_capability", &S::gpu, &GpuConfig::compute_capability, 7.0, 13.0,
                      "",
                      "CUDA compute capability (9.0 Hopper, 10.0 Blackwell, 8.0 Ampere): picks "
                      "vLLM's default MLA backend and the block size it forces"));
  f.push_back(numeric("gpu.allreduce_gbps", &S::gpu, &GpuConfig::allreduce_gbps, 0.001, 1e5, "GB/s",
                      "all-reduce bus bandwidth per GPU (NVLink)"));
  f.push_back(numeric("gpu.allreduce_latency_us", &S::gpu, &GpuConfig::allreduce_latency_us, 0, 1e6,
                      "us", "fixed latency of one all-reduce"));
  // [step]
  f.push_back(text("step.model", &S::step, &StepConfig::model, {"roofline", "profile"},
                   "step-time model: roofline from geometry and GPU, or a measured profile"));
  f.push_back(text("step.profile", &S::step, &StepConfig::profile, {},
                   "profile CSV (relative to the scenario file) when step.model = profile"));
  // [vllm]
  f.push_back(numeric("vllm.block_size", &S::vllm, &VllmConfig::block_size, 1, 256, "tokens",
                      "tokens per KV block: 1, 8, 16, 32, 64, 128 or 256, as vLLM takes"));
  f.push_back(numeric("vllm.num_gpu_blocks", &S::vllm, &VllmConfig::num_gpu_blocks, 0, kBig,
                      "blocks", "KV blocks per instance (0 = derive from gpu_memory_utilization)"));
  f.push_back(numeric("vllm.gpu_memory_utilization", &S::vllm, &VllmConfig::gpu_memory_utilization,
                      0.01, 1, "fraction", "share of device memory vLLM may use"));
  f.push_back(numeric("vllm.activation_reserve_gb", &S::vllm, &VllmConfig::activation_reserve_gb, 0,
                      1e6, "GiB",
                      "memory per GPU kept from the KV pool: what vLLM's profiling run "
                      "measures beside the weights (peak activations, non-torch memory; CUDA "
                      "graphs are captured after the KV cache is sized and take none of it)"));
  f.push_back(numeric("vllm.max_num_batched_tokens", &S::vllm, &VllmConfig::max_num_batched_tokens,
                      0, 1 << 24, "tokens",
                      "token budget per step; 0: vLLM's default (vllm serve without "
                      "--max-num-batched-tokens): 8192 on a GPU of at least 70 GiB whose gpu.name "
                      "does not contain A100, else 2048; without chunked prefill at least "
                      "max_model_len; at most the seats times max_model_len"));
  f.push_back(numeric("vllm.max_num_seqs", &S::vllm, &VllmConfig::max_num_seqs, 0, 1 << 20,
                      "requests",
                      "running requests per step; 0: vLLM's default (vllm serve without "
                      "--max-num-seqs): 1024 on a GPU of at least 70 GiB whose gpu.name does not "
                      "contain A100, else 256, at most vllm.max_num_batched_tokens"));
  f.push_back(numeric("vllm.long_prefill_token_threshold", &S::vllm,
                      &VllmConfig::long_prefill_token_threshold, 0, 1 << 24, "tokens",
                      "cap on one request's prefill tokens per step (0 = off)"));
  f.push_back(optional_boolean("vllm.enable_prefix_caching", &S::vllm,
                               &VllmConfig::enable_prefix_caching,
                               "GPU prefix cache; unset: vLLM's default for the model (on for "
                               "attention-only decoders, off for Mamba hybrids and "
                               "encoder-decoder models)"));
  f.push_back(boolean("vllm.enable_chunked_prefill", &S::vllm, &VllmConfig::enable_chunked_prefill,
                      "split long prefills across steps"));
  f.push_back(numeric("vllm.max_model_len", &S::vllm, &VllmConfig::max_model_len, 1, 1 << 30,
                      "tokens", "longest prompt + output; longer requests are rejected"));
  f.push_back(text("vllm.prefix_caching_hash_algo", &S::vllm, &VllmConfig::prefix_caching_hash_algo,
                   {"sha256", "sha256_cbor", "xxhash", "xxhash_cbor"}, "block hash function"));
  f.push_back(text("vllm.mamba_cache_mode", &S::vllm, &VllmConfig::mamba_cache_mode,
                   {"none", "align", "all"},
                   "prefix caching of Mamba states: none, align (block-aligned chunks), all"));
  f.push_back(text("vllm.kv_load_failure_policy", &S::vllm, &VllmConfig::kv_load_failure_policy,
                   {"fail", "recompute"},
                   "a failed KV connector load: fail (end the request with an error, vLLM's "
                   "default) or recompute the lost tokens"));
  f.push_back(text("vllm.scheduling_policy", &S::vllm, &VllmConfig::scheduling_policy,
                   {"fcfs", "priority"},
                   "fcfs (vLLM's default) or priority: the waiting queue by (trace priority, "
                   "arrival), lower first; preemption takes the lowest-priority running request"));
  f.push_back(boolean("vllm.async_scheduling", &S::vllm, &VllmConfig::async_scheduling,
                      "schedule the next step while one runs (vLLM v0.17's default)"));
  f.push_back(numeric("vllm.schedule_cpu_us", &S::vllm, &VllmConfig::schedule_cpu_us, 0, 1e7, "us",
                      "engine core CPU time of one schedule that builds a batch"));
  f.push_back(numeric("vllm.output_cpu_us", &S::vllm, &VllmConfig::output_cpu_us, 0, 1e7, "us",
                      "engine core CPU time of processing one step's output"));
  // [lmcache]
  f.push_back(
      boolean("lmcache.enabled", &S::lmcache, &LmcacheConfig::enabled, "LMCache connector on"));
  f.push_back(numeric("lmcache.chunk_size", &S::lmcache, &LmcacheConfig::chunk_size, 1, 1 << 20,
                      "tokens", "tokens per chunk / key"));
  f.push_back(boolean("lmcache.local_cpu", &S::lmcache, &LmcacheConfig::local_cpu,
                      "keep chunks in the pinned CPU tier (false: it only stages I/O)"));
  f.push_back(numeric("lmcache.max_local_cpu_size_gb", &S::lmcache,
                      &LmcacheConfig::max_local_cpu_size_gb, 0, 1e6, "GiB",
                      "pinned CPU pool per rank (LMCache configures each worker)"));
  f.push_back(numeric("lmcache.max_local_disk_size_gb", &S::lmcache,
                      &LmcacheConfig::max_local_disk_size_gb, 0, 1e9, "GiB",
                      "local disk tier per rank (0 = off)"));
  f.push_back(boolean("lmcache.remote", &S::lmcache, &LmcacheConfig::remote,
                      "shared remote tier (Redis-like, unbounded) on"));
  f.push_back(
      text("lmcache.cache_policy", &S::lmcache, &LmcacheConfig::cache_policy,
           {"LRU", "LFU", "FIFO", "MRU", "S3FIFO"},
           "eviction policy of CPU and disk. LMCache f4261ef6's LFU over a disk tier raises "
           "KeyError when a disk eviction meets a chunk whose write is still pending: that store "
           "fails, where upstream's engine stops (lmcache.failed_stores, and a failures line on "
           "the screen; upstream_fixes = true applies the fix)"));
  f.push_back(boolean("lmcache.use_layerwise", &S::lmcache, &LmcacheConfig::use_layerwise,
                      "per-layer store/retrieve overlapped with layer compute"));
  f.push_back(boolean("lmcache.save_only_first_rank", &S::lmcache,
                      &LmcacheConfig::save_only_first_rank,
                      "MLA: only rank 0 stores and loads, broadcasting to the others"));
  f.push_back(boolean("lmcache.save_decode_cache", &S::lmcache, &LmcacheConfig::save_decode_cache,
                      "also store KV produced by decode"));
  f.push_back(boolean("lmcache.save_unfull_chunk", &S::lmcache, &LmcacheConfig::save_unfull_chunk,
                      "store a trailing partial chunk"));
  f.push_back(
      boolean("lmcache.enable_async_loading", &S::lmcache, &LmcacheConfig::enable_async_loading,
              "scheduler-side async lookup + prefetch into CPU; the request waits meanwhile"));
  f.push_back(numeric("lmcache.lookup_timeout_ms", &S::lmcache, &LmcacheConfig::lookup_timeout_ms,
                      1, 1e7, "ms", "async lookup answers 0 (recompute) after this long"));
  f.push_back(numeric("lmcache.lookup_backoff_ms", &S::lmcache, &LmcacheConfig::lookup_backoff_ms,
                      0, 1e4, "ms", "scheduler sleep per async lookup sent or still pending"));
  f.push_back(numeric("lmcache.min_retrieve_tokens", &S::lmcache,
                      &LmcacheConfig::min_retrieve_tokens, 0, 1 << 24, "tokens",
                      "skip loads shorter than this"));
  f.push_back(optional_integer("lmcache.priority_limit", &S::lmcache,
                               &LmcacheConfig::priority_limit, -1e15, 1e15, "",
                               "requests whose trace priority is above it are not stored (unset: "
                               "all are)"));
  f.push_back(boolean("lmcache.upstream_fixes", &S::lmcache, &LmcacheConfig::upstream_fixes,
                      "apply the later upstream fix of every reproduced quirk"));
  f.push_back(boolean("lmcache.health_monitor", &S::lmcache, &LmcacheConfig::health_monitor,
                      "LMCache's health monitor over the remote tier (upstream always runs it): "
                      "failed Redis reads can turn the whole engine off for a while"));
  f.push_back(
      text("lmcache.health_fallback_policy", &S::lmcache, &LmcacheConfig::health_fallback_policy,
           {"recompute", "local_cpu"},
           "a failed health check turns LMCache off (recompute) or bypasses Redis and keeps "
           "the CPU tier on (local_cpu; extra_config fallback_policy)"));
  f.push_back(numeric("lmcache.ping_interval_s", &S::lmcache, &LmcacheConfig::ping_interval_s, 1,
                      1e6, "s", "period of the health checks (extra_config ping_interval)"));
  f.push_back(numeric("lmcache.get_blocking_failed_threshold", &S::lmcache,
                      &LmcacheConfig::get_blocking_failed_threshold, 1, kBig, "reads",
                      "failed blocking Redis reads in one period that make LMCache unhealthy"));
  f.push_back(numeric("lmcache.waiting_time_for_recovery_s", &S::lmcache,
                      &LmcacheConfig::waiting_time_for_recovery_s, 0, 1e9, "s",
                      "how long LMCache stays unhealthy before a check may recover it"));
  f.push_back(numeric("lmcache.blocking_timeout_secs", &S::lmcache,
                      &LmcacheConfig::blocking_timeout_secs, 1, 1e6, "s",
                      "a bulk retrieve's wait for each remote GET, after which upstream fails "
                      "it; counted, not modelled (summary.json lmcache.blocking_get_timeouts)"));
  // [links]
  f.push_back(numeric("links.pcie_h2d_gbps", &S::links, &LinksConfig::pcie_h2d_gbps, 0.001, 1e5,
                      "GB/s", "host-to-device bandwidth per instance"));
  f.push_back(numeric("links.pcie_d2h_gbps", &S::links, &LinksConfig::pcie_d2h_gbps, 0.001, 1e5,
                      "GB/s", "device-to-host bandwidth per instance"));
  f.push_back(numeric("links.pcie_latency_us", &S::links, &LinksConfig::pcie_latency_us, 0, 1e7,
                      "us",
                      "fixed cost per PCIe transfer; a bulk store pays it per chunk (LMCache "
                      "synchronises after each)"));
  f.push_back(numeric("links.disk_read_gbps", &S::links, &LinksConfig::disk_read_gbps, 0.001, 1e5,
                      "GB/s", "local disk read bandwidth per instance"));
  f.push_back(numeric("links.disk_write_gbps", &S::links, &LinksConfig::disk_write_gbps, 0.001, 1e5,
                      "GB/s", "local disk write bandwidth per instance"));
  f.push_back(numeric("links.disk_latency_us", &S::links, &LinksConfig::disk_latency_us, 0, 1e7,
                      "us", "fixed cost per disk transfer"));
  f.push_back(numeric("links.page_cache_gb", &S::links, &LinksConfig::page_cache_gb, 0, 1e6, "GiB",
                      "host memory the page cache gives the disk tier's files, per instance "
                      "(0 = none: every disk read goes to the device)"));
  f.push_back(numeric("links.page_cache_gbps", &S::links, &LinksConfig::page_cache_gbps, 0.001, 1e5,
                      "GB/s", "copy bandwidth of disk reads served from the page cache"));
  f.push_back(numeric("links.page_cache_write_gbps", &S::links, &LinksConfig::page_cache_write_gbps,
                      0.001, 1e5, "GB/s", "copy bandwidth of buffered disk writes into it"));
  f.push_back(numeric("links.page_cache_dirty_ratio", &S::links,
                      &LinksConfig::page_cache_dirty_ratio, 0, 1, "fraction",
                      "share of the page cache that buffered disk writes may hold before written "
                      "back (0: every write waits for the device)"));
  f.push_back(numeric("links.network_gbps", &S::links, &LinksConfig::network_gbps, 0.001, 1e5,
                      "GB/s", "each instance's NIC bandwidth per direction"));
  f.push_back(numeric("links.network_latency_us", &S::links, &LinksConfig::network_latency_us, 0,
                      1e7, "us", "fixed cost per remote transfer (round trip)"));
  f.push_back(numeric("links.remote_server_gbps", &S::links, &LinksConfig::remote_server_gbps,
                      0.001, 1e5, "GB/s", "the remote store's NIC per direction, shared"));
  f.push_back(numeric(
      "links.remote_get_failure_rate", &S::links, &LinksConfig::remote_get_failure_rate, 0, 1,
      "fraction", "share of remote reads that fail (a failed load: vllm.kv_load_failure_policy)"));
  // [hardware]
  f.push_back(text("hardware.profile", &S::hardware, &HardwareConfig::profile, {},
                   "hardware profile TOML of kvtwin calibrate (relative to the scenario file); its "
                   "[links] figures replace the scenario's"));
  // [cluster]
  f.push_back(numeric("cluster.instances", &S::cluster, &ClusterConfig::instances, 1, 4096,
                      "instances", "serving instances (each with tensor_parallel GPUs)"));
  f.push_back(text("cluster.router", &S::cluster, &ClusterConfig::router,
                   {"round_robin", "least_loaded", "prefix_aware"}, "request routing"));
  // [workload]
  f.push_back(text("workload.trace", &S::workload, &WorkloadConfig::trace, {},
                   "trace file relative to the scenario file (empty: the embedded default)"));
  f.push_back(text("workload.format", &S::workload, &WorkloadConfig::format,
                   {"auto", "native", "mooncake", "azure"}, "trace format"));
  f.push_back(text("workload.arrivals", &S::workload, &WorkloadConfig::arrivals,
                   {"trace", "spread"},
                   "arrival times: as recorded, or the requests recorded at one instant spread "
                   "evenly over the gap to the next recorded instant"));
  f.push_back(numeric("workload.rate_scale", &S::workload, &WorkloadConfig::rate_scale, 1e-6, 1e6,
                      "factor", "arrival-rate multiplier (arrival times are divided by it)"));
  f.push_back(numeric("workload.max_requests", &S::workload, &WorkloadConfig::max_requests, 0, kBig,
                      "requests", "stop after this many requests (0 = all)"));
  f.push_back(numeric("workload.max_duration_s", &S::workload, &WorkloadConfig::max_duration_s, 0,
                      1e9, "s",
                      "only arrivals before this (scaled) time, counted from start_s (0 = all)"));
  f.push_back(numeric("workload.start_s", &S::workload, &WorkloadConfig::start_s, 0, 1e9, "s",
                      "a window of the trace: arrivals before this (scaled) time are dropped and "
                      "the rest arrive this much earlier (trace indices, synthetic prefixes and "
                      "tokens stay those of the whole trace; caches start empty)"));
  f.push_back(numeric("workload.warmup_s", &S::workload, &WorkloadConfig::warmup_s, 0, 1e9, "s",
                      "a warm-up for the window: arrivals in [start_s - warmup_s, start_s) are "
                      "replayed first and fill the caches, but only what happens from start_s on "
                      "is reported (at most start_s)"));
  f.push_back(numeric("workload.prefix_groups", &S::workload, &WorkloadConfig::prefix_groups, 0,
                      1 << 24, "groups",
                      "synthetic shared-prefix groups for requests without "
                      "block ids (0 = off)"));
  f.push_back(numeric("workload.prefix_tokens", &S::workload, &WorkloadConfig::prefix_tokens, 0,
                      1 << 24, "tokens", "length of each group's shared prefix"));
  f.push_back(numeric("workload.prefix_zipf", &S::workload, &WorkloadConfig::prefix_zipf, 0, 10,
                      "exponent", "group popularity ~ 1/rank^s (0 = uniform)"));
  f.push_back(numeric("workload.prefix_block_size", &S::workload,
                      &WorkloadConfig::prefix_block_size, 1, 1 << 20, "tokens",
                      "tokens per synthetic block id"));
  // [slo]
  f.push_back(numeric("slo.ttft_ms", &S::slo, &SloConfig::ttft_ms, 0, 1e9, "ms",
                      "time-to-first-token target for goodput"));
  f.push_back(numeric("slo.tpot_ms", &S::slo, &SloConfig::tpot_ms, 0, 1e9, "ms",
                      "time-per-output-token target for goodput"));
  // [cost]
  f.push_back(numeric("cost.gpu_per_hour", &S::cost, &CostConfig::gpu_per_hour, 0, 1e9,
                      "per GPU-hour", "price of one GPU for an hour (0 = not priced)"));
  f.push_back(numeric("cost.instance_per_hour", &S::cost, &CostConfig::instance_per_hour, 0, 1e9,
                      "per instance-hour", "the rest of an instance for an hour"));
  f.push_back(numeric("cost.cpu_memory_gib_per_hour", &S::cost,
                      &CostConfig::cpu_memory_gib_per_hour, 0, 1e9, "per GiB-hour",
                      "host memory: LMCache's CPU pools and the page caches, as sized"));
  f.push_back(numeric("cost.disk_gib_per_hour", &S::cost, &CostConfig::disk_gib_per_hour, 0, 1e9,
                      "per GiB-hour", "LMCache's local disk tiers, as sized"));
  f.push_back(numeric("cost.remote_gib_per_hour", &S::cost, &CostConfig::remote_gib_per_hour, 0,
                      1e9, "per GiB-hour", "the remote store, at the most it held"));
  // [output]
  f.push_back(numeric("output.timeseries_interval_s", &S::output,
                      &OutputConfig::timeseries_interval_s, 0.01, 1e6, "s",
                      "sampling period of timeseries.csv"));
  f.push_back(boolean("output.chrome_trace", &S::output, &OutputConfig::chrome_trace,
                      "write trace.json (Chrome / Perfetto) of steps and transfers"));
  f.push_back(numeric("output.chrome_trace_max_events", &S::output,
                      &OutputConfig::chrome_trace_max_events, 0, kBig, "events",
                      "cap on trace.json events (later ones are dropped and counted)"));
  f.push_back(text("output.percentiles", &S::output, &OutputConfig::percentiles,
                   {"nearest_rank", "linear"},
                   "latency percentiles: the nearest rank, or interpolated as numpy and vllm bench "
                   "serve do"));
  f.push_back(boolean("output.plots", &S::output, &OutputConfig::plots,
                      "SVG plots through gnuplot when it is installed"));
  return f;
}

}  // namespace

const std::vector<FieldSpec>& scenario_fields() {
  static const std::vector<FieldSpec> fields = make_fields();
  return fields;
}

const FieldSpec* find_field(std::string_view key) {
  static const std::map<std::string, const FieldSpec*, std::less<>> index = [] {
    std::map<std::string, const FieldSpec*, std::less<>> m;
    for (const FieldSpec& f : scenario_fields()) m.emplace(f.key, &f);
    return m;
  }();
  auto it = index.find(key);
  return it == index.end() ? nullptr : it->second;
}

std::string_view field_type_name(FieldType type) {
  switch (type) {
    case FieldType::kInt:
      return "integer";
    case FieldType::kDouble:
      return "number";
    case FieldType::kBool:
      return "boolean";
    case FieldType::kString:
      return "string";
  }
  return "?";
}

}  // namespace kvtwin::sim::scenario
