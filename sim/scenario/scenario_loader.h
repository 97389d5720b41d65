// Loading scenarios: TOML text → Scenario, `--set key=value` overrides, cross-field validation,
// and the effective scenario written back as TOML.
//
// Every failure throws InputError naming the file, the line (from toml++'s source regions) and
// the dotted key: unknown sections and keys, wrong types, values out of range, strings outside a
// field's choices, inconsistent combinations (e.g. heads not divisible by tensor_parallel).
#pragma once

#include <string>
#include <string_view>

#include "sim/scenario/scenario.h"

namespace kvtwin::sim::scenario {

inline constexpr std::string_view kEmbeddedScenarioName = "<embedded scenarios/default.toml>";

// The scenario compiled into the binary (scenarios/default.toml), used when none is given.
Scenario load_default_scenario();

// Reads a scenario file (fields absent from the file keep their defaults) and validates it.
Scenario load_scenario_file(const std::string& path);
// Same, from text; `name` stands for the file in messages; relative paths resolve against
// `base_dir`.
Scenario load_scenario_text(std::string_view text, const std::string& name,
                            const std::string& base_dir);

// Applies "key=value" (value in TOML syntax; a bare word is taken as a string). Does not
// re-validate: call validate() after the last override. `origin` names the source in errors.
void apply_override(Scenario* s, std::string_view assignment, const std::string& origin = "--set");

// Cross-field checks; throws InputError citing the field's origin.
void validate(const Scenario& s);

// vllm.max_num_batched_tokens, or for 0 the value vLLM v0.17's `vllm serve` picks when
// --max-num-batched-tokens is not given (EngineArgs.get_batch_defaults and
// _set_default_max_num_seqs_and_batched_tokens_args): 8192 on a device of at least 70 GiB whose
// name does not contain "a100" (gpu.memory_gb, gpu.name), else 2048; without chunked prefill
// (vllm.enable_chunked_prefill false, or an encoder-decoder model, which vLLM runs without) at
// least max_model_len; then at most the seats (max_num_seqs, or its device default) times
// max_model_len.
int effective_max_num_batched_tokens(const Scenario& s);

// vllm.max_num_seqs, or for 0 the value `vllm serve` picks when --max-num-seqs is not given:
// 1024 on such a device, else 256; then lowered to effective_max_num_batched_tokens.
int effective_max_num_seqs(const Scenario& s);

// vllm.enable_prefix_caching, or when unset vLLM v0.17's default for the model
// (EngineArgs._set_default_chunked_prefill_and_prefix_caching_args reads
// ModelConfig.is_prefix_caching_supported): true for a decoder of attention layers only, false
// for a hybrid with Mamba layers (M in model.layer_pattern) and for an encoder-decoder model.
bool effective_enable_prefix_caching(const Scenario& s);

// Throws the InputError of a scenario value that cannot be used: named by where `key` was set
// (file and line, or --set), else by the scenario's file.
[[noreturn]] void scenario_error(const Scenario& s, const std::string& key, const std::string& msg);

// A file named by the scenario: as written when absolute, else relative to its directory.
std::string scenario_relative_path(const Scenario& s, const std::string& path);

// hardware.profile resolved by scenario_relative_path. REQUIRES: s.hardware.profile non-empty.
std::string hardware_profile_path(const Scenario& s);

// Reads the [links] table of hardware.profile into s->links (each key a links.* field, checked
// as in a scenario; other tables of the profile are not the simulator's). The loader calls it
// after the file's own keys, so the profile's figures replace the scenario's; apply_override calls
// it when --set names hardware.profile. Throws InputError naming the scenario file, line and
// hardware.profile when the profile cannot be read, and the profile's file, line and key for a bad
// entry in it.
void apply_hardware_profile(Scenario* s);

// The effective scenario as TOML, every field, in registry order (a run directory keeps it so the
// run can be repeated exactly).
std::string dump_scenario(const Scenario& s);

}  // namespace kvtwin::sim::scenario
