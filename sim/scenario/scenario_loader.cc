#include "sim/scenario/scenario_loader.h"

#include <toml++/toml.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <limits>
#include <sstream>

#include "sim/embedded/embedded.h"
#include "sim/io/input_error.h"
#include "sim/io/parse.h"
#include "sim/scenario/key_suggestion.h"
#include "sim/scenario/scenario_fields.h"

namespace kvtwin::sim::scenario {
namespace {

std::string describe_range(const FieldSpec& f) {
  std::ostringstream os;
  if (f.type == FieldType::kInt)
    os << "[" << static_cast<int64_t>(f.min) << ", " << static_cast<int64_t>(f.max) << "]";
  else
    os << "[" << f.min << ", " << f.max << "]";
  return os.str();
}

std::string join_choices(const FieldSpec& f) {
  std::string s;
  for (const std::string& c : f.choices) s += (s.empty() ? "" : ", ") + c;
  return s;
}

// Converts a TOML node to the field's type and checks its range / choices.
FieldValue convert(const FieldSpec& f, const toml::node& node, const std::string& file,
                   uint64_t line) {
  auto fail = [&](const std::string& msg) -> FieldValue {
    throw InputError(file, line, f.key, msg);
  };
  switch (f.type) {
    case FieldType::kInt: {
      if (!node.is_integer()) return fail("expected an integer");
      int64_t v = node.as_integer()->get();
      // Compared as integers: doubles near 2^63 cannot tell neighbouring values apart.
      auto bound = [](double b) {
        return b >= 0x1p63 ? INT64_MAX : b <= -0x1p63 ? INT64_MIN : static_cast<int64_t>(b);
      };
      if (v < bound(f.min) || v > bound(f.max))
        return fail("value " + std::to_string(v) + " out of range " + describe_range(f));
      return v;
    }
    case FieldType::kDouble: {
      double v;
      if (node.is_integer())
        v = static_cast<double>(node.as_integer()->get());
      else if (node.is_floating_point())
        v = node.as_floating_point()->get();
      else
        return fail("expected a number");
      if (!std::isfinite(v) || v < f.min || v > f.max) {
        std::ostringstream os;
        os << "value " << v << " out of range " << describe_range(f);
        return fail(os.str());
      }
      return v;
    }
    case FieldType::kBool:
      if (!node.is_boolean()) return fail("expected true or false");
      return node.as_boolean()->get();
    case FieldType::kString: {
      if (!node.is_string()) return fail("expected a string");
      std::string v = node.as_string()->get();
      if (!f.choices.empty() && std::find(f.choices.begin(), f.choices.end(), v) == f.choices.end())
        return fail("'" + v + "' is not one of: " + join_choices(f));
      return v;
    }
  }
  return fail("unsupported type");
}

// Whether `name` is a section (a table) of the scenario: some field's key starts with "name.".
bool is_section(const std::string& name) {
  for (const FieldSpec& f : scenario_fields())
    if (f.key.size() > name.size() && f.key.compare(0, name.size(), name) == 0 &&
        f.key[name.size()] == '.')
      return true;
  return false;
}

// Walks a table; `prefix` is the dotted path of the table ("" at the root).
void apply_table(Scenario* s, const toml::table& table, const std::string& prefix,
                 const std::string& file) {
  for (const auto& [k, node] : table) {
    std::string key = prefix.empty() ? std::string(k.str()) : prefix + "." + std::string(k.str());
    uint64_t line = k.source().begin.line;
    if (node.is_table()) {
      if (find_field(key)) throw InputError(file, line, key, "expected a value, got a table");
      if (!is_section(key))
        throw InputError(file, line, key,
                         prefix.empty() ? "unknown section" + did_you_mean(suggest_sections(key))
                                        : "unknown key" + did_you_mean(suggest_keys(key)));
      apply_table(s, *node.as_table(), key, file);
      continue;
    }
    const FieldSpec* f = find_field(key);
    if (!f) {
      std::string hint = did_you_mean(suggest_keys(key));
      if (hint.empty() && prefix.empty())
        hint = " (fields belong to sections such as [model], [vllm])";
      throw InputError(file, line, key, "unknown key" + hint);
    }
    f->set(s, convert(*f, node, file, node.source().begin.line));
    s->origins[key] = FieldOrigin{file, node.source().begin.line};
  }
}

const FieldOrigin& origin_of(const Scenario& s, const std::string& key) {
  static const FieldOrigin kDefault{"", 0};
  auto it = s.origins.find(key);
  return it == s.origins.end() ? kDefault : it->second;
}

[[noreturn]] void invalid(const Scenario& s, const std::string& key, const std::string& msg) {
  scenario_error(s, key, msg);
}

// A conflict between keys, blamed on the one the user most likely just changed: a --set
// override, else one written in a file, else the first. `msg` states the rule with the keys'
// names; their values follow it.
[[noreturn]] void conflict(const Scenario& s, std::initializer_list<const char*> keys,
                           const std::string& msg) {
  auto rank = [&](const std::string& key) {
    auto it = s.origins.find(key);
    if (it == s.origins.end()) return 0;
    return it->second.line == 0 ? 2 : 1;  // line 0 with an origin: --set / --vary
  };
  std::string blamed = *keys.begin();
  std::string values;
  for (const char* key : keys) {
    if (rank(key) > rank(blamed)) blamed = key;
    const FieldSpec* f = find_field(key);
    std::string value = f ? f->get(s) : "?";
    // A budget or seat count left at 0 is vLLM's default: say which.
    if (value == "0" && std::string_view(key) == "vllm.max_num_batched_tokens")
      value += " (vLLM's default: " + std::to_string(effective_max_num_batched_tokens(s)) + ")";
    if (value == "0" && std::string_view(key) == "vllm.max_num_seqs")
      value += " (vLLM's default: " + std::to_string(effective_max_num_seqs(s)) + ")";
    values += (values.empty() ? " (" : ", ") + std::string(key) + " = " + value;
  }
  invalid(s, blamed, msg + values + ")");
}

// get_batch_defaults' device test: at least 70 GiB and not an A100 (by name).
bool large_device(const Scenario& s) {
  std::string name = s.gpu.name;
  for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s.gpu.memory_gb >= 70 && name.find("a100") == std::string::npos;
}

// Whether a layer of kind `c` is among the model's layers (the pattern repeated to num_layers).
bool has_layer(const ModelConfig& m, char c) {
  const size_t n = std::min(m.layer_pattern.size(), static_cast<size_t>(std::max(0, m.num_layers)));
  return m.layer_pattern.substr(0, n).find(c) != std::string::npos;
}

void validate_model(const Scenario& s) {
  const ModelConfig& m = s.model;
  for (char c : m.layer_pattern)
    if (c != 'F' && c != 'S' && c != 'M')
      invalid(s, "model.layer_pattern", "only F, S and M may appear");
  if (m.layer_pattern.empty()) invalid(s, "model.layer_pattern", "must not be empty");
  bool has_s = has_layer(m, 'S');
  bool has_m = has_layer(m, 'M');
  if (!has_layer(m, 'F') && !has_s)
    invalid(s, "model.layer_pattern", "needs at least one attention layer (F or S)");
  if (has_s && m.sliding_window <= 0)
    invalid(s, "model.sliding_window", "S layers need a window > 0");
  if (has_m && (m.mamba_num_heads <= 0 || m.mamba_head_dim <= 0 || m.mamba_state_size <= 0))
    invalid(s,
            m.mamba_num_heads <= 0  ? "model.mamba_num_heads"
            : m.mamba_head_dim <= 0 ? "model.mamba_head_dim"
                                    : "model.mamba_state_size",
            "M layers need mamba_num_heads, mamba_head_dim and mamba_state_size > 0");
  if (m.attention == "mla" && (m.kv_lora_rank <= 0 || m.qk_rope_head_dim <= 0))
    invalid(s, "model.kv_lora_rank", "MLA needs kv_lora_rank and qk_rope_head_dim > 0");
  if (m.attention == "mla" && has_layer(m, 'S'))
    conflict(s, {"model.layer_pattern", "model.attention"},
             "vLLM's MLA attention has no sliding window: S layers cannot be MLA");
  if (m.attention == "full" && m.num_heads % m.num_kv_heads != 0)
    conflict(s, {"model.num_kv_heads", "model.num_heads"},
             "model.num_kv_heads must divide model.num_heads");
  if (m.num_experts > 0 && (m.experts_per_token <= 0 || m.experts_per_token > m.num_experts))
    conflict(s, {"model.experts_per_token", "model.num_experts"},
             "MoE needs 0 < model.experts_per_token <= model.num_experts");
  if (m.num_experts > 0 && m.moe_intermediate_size <= 0)
    conflict(s, {"model.moe_intermediate_size", "model.num_experts"},
             "MoE needs model.moe_intermediate_size > 0");
  if ((m.encoder_layers > 0) != (m.encoder_tokens > 0))
    conflict(s, {"model.encoder_tokens", "model.encoder_layers"},
             "model.encoder_layers and model.encoder_tokens go together (both 0 or both > 0)");
  int tp = s.gpu.tensor_parallel;
  if (m.num_heads % tp != 0)
    conflict(s, {"gpu.tensor_parallel", "model.num_heads"},
             "gpu.tensor_parallel must divide model.num_heads");
  if (m.attention == "full" && m.num_kv_heads % tp != 0 && tp % m.num_kv_heads != 0)
    conflict(s, {"gpu.tensor_parallel", "model.num_kv_heads"},
             "gpu.tensor_parallel must divide or be a multiple of model.num_kv_heads");
}

void validate_rest(const Scenario& s) {
  if (s.step.model == "profile" && s.step.profile.empty())
    invalid(s, "step.profile", "step.model = \"profile\" needs a profile file");
  const bool encoder_decoder = s.model.encoder_layers > 0;
  // vLLM's BlockSize choices (a Mamba hybrid's attention block then grows from it).
  const int bs = s.vllm.block_size;
  if (bs != 1 && bs != 8 && bs != 16 && bs != 32 && bs != 64 && bs != 128 && bs != 256)
    invalid(s, "vllm.block_size", "vLLM takes 1, 8, 16, 32, 64, 128 or 256");
  const int64_t budget = effective_max_num_batched_tokens(s);
  if (s.vllm.max_num_seqs > 0 && budget < s.vllm.max_num_seqs)
    conflict(s, {"vllm.max_num_batched_tokens", "vllm.max_num_seqs"},
             "vllm.max_num_batched_tokens must be >= vllm.max_num_seqs, as vLLM requires");
  // vLLM forces chunked prefill off for encoder-decoder models, and their cross-attention
  // manager raises NotImplementedError on the first prefix-cache lookup.
  if (encoder_decoder && effective_enable_prefix_caching(s))
    conflict(s, {"vllm.enable_prefix_caching", "model.encoder_layers"},
             "encoder-decoder models cannot use vllm.enable_prefix_caching (vLLM's "
             "CrossAttentionManager does not support caching)");
  if (encoder_decoder && budget < s.vllm.max_model_len)
    conflict(s, {"vllm.max_num_batched_tokens", "vllm.max_model_len", "model.encoder_layers"},
             "vLLM runs encoder-decoder models without chunked prefill, so "
             "vllm.max_num_batched_tokens must be >= vllm.max_model_len");
  if (!s.vllm.enable_chunked_prefill && budget < s.vllm.max_model_len)
    conflict(s,
             {"vllm.max_num_batched_tokens", "vllm.max_model_len", "vllm.enable_chunked_prefill"},
             "without chunked prefill, vllm.max_num_batched_tokens must be >= vllm.max_model_len "
             "(as vLLM requires)");
  // Encoder-decoder models set disable_chunked_mm_input: vLLM refuses to start when one encoder
  // input is larger than a step's token budget (compute_mm_encoder_budget).
  if (encoder_decoder && s.model.encoder_tokens > budget)
    conflict(s, {"vllm.max_num_batched_tokens", "model.encoder_tokens"},
             "an encoder input must fit one step: vLLM refuses to start when model.encoder_tokens "
             "> vllm.max_num_batched_tokens for encoder-decoder models");
  if (s.lmcache.enabled) {
    const LmcacheConfig& l = s.lmcache;
    // The pool is whole bytes (LMCache takes int(size * 1024**3)): a positive size below one byte
    // is no pool.
    if (l.max_local_cpu_size_gb * kGiB < 1)
      invalid(s, "lmcache.max_local_cpu_size_gb",
              "LMCache needs a CPU pool of at least one byte (it stages I/O)");
    if (s.model.encoder_layers > 0)
      invalid(s, "lmcache.enabled", "LMCache does not serve encoder-decoder models");
    if (has_layer(s.model, 'M'))
      invalid(s, "lmcache.enabled", "LMCache does not serve Mamba layers");
    // With full-attention layers beside them, vLLM makes sliding-window layers full attention
    // under a connector (kv_cache_layout.h); alone, they stay a sliding-window group.
    if (!has_layer(s.model, 'F'))
      invalid(s, "lmcache.enabled",
              "kvtwin does not model LMCache on a model whose attention layers are all "
              "sliding-window (vLLM keeps them one sliding-window group); a pattern with F layers "
              "runs");
    if (l.enable_async_loading && l.use_layerwise)
      invalid(s, "lmcache.enable_async_loading",
              "LMCache's async loading has no layerwise path (use_layerwise = false)");
  }
  if (s.workload.warmup_s > s.workload.start_s)
    conflict(s, {"workload.warmup_s", "workload.start_s"},
             "the warm-up replays the trace before workload.start_s, so workload.warmup_s must be "
             "<= workload.start_s");
  if (s.workload.prefix_groups > 0 && s.workload.prefix_tokens <= 0)
    invalid(s, "workload.prefix_tokens", "synthetic prefixes need prefix_tokens > 0");
}

}  // namespace

Scenario load_scenario_text(std::string_view text, const std::string& name,
                            const std::string& base_dir) {
  Scenario s;
  s.source = name;
  s.base_dir = base_dir;
  toml::table root;
  try {
    root = toml::parse(text, name);
  } catch (const toml::parse_error& e) {
    throw InputError(name, e.source().begin.line, "", std::string(e.description()));
  }
  apply_table(&s, root, "", name);
  if (!s.hardware.profile.empty()) apply_hardware_profile(&s);
  validate(s);
  return s;
}

Scenario load_scenario_file(const std::string& path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec))
    throw InputError(path, 0, "", "is a directory, not a scenario file");
  std::ifstream in(path, std::ios::binary);
  if (!in) throw InputError(path, 0, "", "cannot open scenario file");
  std::ostringstream text;
  char buf[1 << 14];
  while (in.read(buf, sizeof buf) || in.gcount() > 0) text.write(buf, in.gcount());
  if (in.bad()) throw InputError(path, 0, "", "read error");
  std::string dir = std::filesystem::path(path).parent_path().string();
  return load_scenario_text(text.str(), path, dir.empty() ? "." : dir);
}

Scenario load_default_scenario() {
  return load_scenario_text(embedded::default_scenario(), std::string(kEmbeddedScenarioName), ".");
}

void apply_override(Scenario* s, std::string_view assignment, const std::string& origin) {
  size_t eq = assignment.find('=');
  if (eq == std::string_view::npos || eq == 0)
    throw InputError(origin, 0, std::string(assignment), "expected key=value");
  // Spaces around the key and the value are dropped ("key = value", as a TOML file writes it).
  std::string key(io::trim(assignment.substr(0, eq)));
  if (key.empty()) throw InputError(origin, 0, std::string(assignment), "expected key=value");
  std::string value(io::trim(assignment.substr(eq + 1)));
  const FieldSpec* f = find_field(key);
  if (!f) throw InputError(origin, 0, key, "unknown key" + did_you_mean(suggest_keys(key)));
  toml::table parsed;
  bool ok = true;
  try {
    parsed = toml::parse("v = " + value);
  } catch (const toml::parse_error&) {
    ok = false;
  }
  // A bare word (e.g. router=least_loaded) is a string.
  if (!ok || (f->type == FieldType::kString && !parsed["v"].is_string())) {
    parsed = toml::table{};
    parsed.insert("v", value);
  }
  f->set(s, convert(*f, *parsed.get("v"), origin, 0));
  s->origins[key] = FieldOrigin{origin, 0};
  if (key == "hardware.profile" && !s->hardware.profile.empty()) apply_hardware_profile(s);
}

void scenario_error(const Scenario& s, const std::string& key, const std::string& msg) {
  const FieldOrigin& o = origin_of(s, key);
  std::string file =
      o.file.empty() ? (s.source.empty() ? std::string(kEmbeddedScenarioName) : s.source) : o.file;
  throw InputError(file, o.line, key, msg);
}

std::string scenario_relative_path(const Scenario& s, const std::string& path) {
  const std::filesystem::path p(path);
  return p.is_absolute() ? p.string() : (std::filesystem::path(s.base_dir) / p).string();
}

std::string hardware_profile_path(const Scenario& s) {
  return scenario_relative_path(s, s.hardware.profile);
}

void apply_hardware_profile(Scenario* s) {
  const std::string path = hardware_profile_path(*s);
  if (!std::filesystem::is_regular_file(path))
    invalid(*s, "hardware.profile", "cannot read hardware profile " + path);
  toml::table root;
  try {
    root = toml::parse_file(path);
  } catch (const toml::parse_error& e) {
    throw InputError(path, e.source().begin.line, "", std::string(e.description()));
  }
  const toml::table* links = root["links"].as_table();
  if (links == nullptr)
    throw InputError(path, 0, "links",
                     "a hardware profile needs a [links] table (kvtwin calibrate writes one)");
  for (const auto& [k, node] : *links) {
    const std::string key = "links." + std::string(k.str());
    const FieldSpec* f = find_field(key);
    if (f == nullptr)
      throw InputError(path, k.source().begin.line, key,
                       "unknown key" + did_you_mean(suggest_keys(key, "links")));
    f->set(s, convert(*f, node, path, node.source().begin.line));
    s->origins[key] = FieldOrigin{path, node.source().begin.line};
  }
}

int effective_max_num_batched_tokens(const Scenario& s) {
  if (s.vllm.max_num_batched_tokens > 0) return s.vllm.max_num_batched_tokens;
  const bool large = large_device(s);
  int64_t budget = large ? 8192 : 2048;
  // Without chunked prefill (an encoder-decoder model's default: vLLM turns it off for them
  // before it picks the budget) at least one whole prompt.
  if (!s.vllm.enable_chunked_prefill || s.model.encoder_layers > 0)
    budget = std::max<int64_t>(budget, s.vllm.max_model_len);
  const int64_t seats = s.vllm.max_num_seqs > 0 ? s.vllm.max_num_seqs : large ? 1024 : 256;
  budget = std::min(budget, seats * s.vllm.max_model_len);
  return static_cast<int>(std::min<int64_t>(budget, std::numeric_limits<int>::max()));
}

bool effective_enable_prefix_caching(const Scenario& s) {
  if (s.vllm.enable_prefix_caching.has_value()) return *s.vllm.enable_prefix_caching;
  return !has_layer(s.model, 'M') && s.model.encoder_layers == 0;
}

int effective_max_num_seqs(const Scenario& s) {
  if (s.vllm.max_num_seqs > 0) return s.vllm.max_num_seqs;
  return std::min(large_device(s) ? 1024 : 256, effective_max_num_batched_tokens(s));
}

void validate(const Scenario& s) {
  validate_model(s);
  validate_rest(s);
}

std::string dump_scenario(const Scenario& s) {
  std::string out = "# Effective kvtwin scenario (every field, defaults included).\n";
  std::string section;
  for (const FieldSpec& f : scenario_fields()) {
    size_t dot = f.key.find('.');
    std::string sec = f.key.substr(0, dot);
    if (sec != section) {
      out += (section.empty() ? "\n[" : "\n[") + sec + "]\n";
      section = sec;
    }
    if (f.key == "hardware.profile" && !s.hardware.profile.empty()) {
      // Applied already: its figures are the [links] values above. The path would not resolve
      // from the run directory, so the dump reloads without it.
      out += "# profile = " + f.get(s) + " (applied: its figures are in [links])\nprofile = \"\"\n";
      continue;
    }
    const std::string value = f.get(s);
    if (value.empty()) {
      out += "# " + f.key.substr(dot + 1) + " unset\n";
      continue;
    }
    out += f.key.substr(dot + 1) + " = " + value + "\n";
  }
  return out;
}

}  // namespace kvtwin::sim::scenario
