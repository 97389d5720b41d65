// Suggestions for a scenario key that is not in the registry (scenario_fields.h), so that
// "lmcache.max_local_cpu_size: unknown key" can go on "; did you mean
// lmcache.max_local_cpu_size_gb?".
//
// Rules, tried in this order; the first that finds anything decides:
//   1. the same field name in another section ("seed" -> "run.seed", "vllm.chunk_size" ->
//      "lmcache.chunk_size"); where several sections hold it, those whose names are spelt
//      nearest to the typed section ("gpus.name" -> "gpu.name");
//   2. the key with its unit left off ("links.disk_read" -> "links.disk_read_gbps"): fields
//      whose key is the typed key followed by "_" and more;
//   3. a typo: the fields nearest by edit distance (insertions, deletions, substitutions and
//      swaps of adjacent characters), at most max(1, min(3, length / 4)) edits away.
// At most three keys are suggested, in the registry's documentation order, so that a message
// is the same on every run.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace kvtwin::sim::scenario {

// Known keys that `key` was probably meant to be; empty when none is close. With `section`, only
// that section's keys (a hardware profile holds [links] alone).
std::vector<std::string> suggest_keys(std::string_view key, std::string_view section = {});

// Known sections (the part of a key before its last '.') that `section` was probably meant to
// be, by rule 3 alone.
std::vector<std::string> suggest_sections(std::string_view section);

// "; did you mean a, b or c?", or "" when `suggestions` is empty: the end of an error message.
std::string did_you_mean(const std::vector<std::string>& suggestions);

// Optimal string alignment distance between `a` and `b` (Levenshtein plus adjacent swaps).
size_t edit_distance(std::string_view a, std::string_view b);

}  // namespace kvtwin::sim::scenario
