#include "sim/scenario/key_suggestion.h"

#include <algorithm>
#include <set>

#include "sim/scenario/scenario_fields.h"

namespace kvtwin::sim::scenario {
namespace {

constexpr size_t kMaxSuggestions = 3;

std::string_view leaf_of(std::string_view key) {
  size_t dot = key.rfind('.');
  return dot == std::string_view::npos ? key : key.substr(dot + 1);
}

std::string_view section_of(std::string_view key) {
  size_t dot = key.rfind('.');
  return dot == std::string_view::npos ? std::string_view() : key.substr(0, dot);
}

size_t typo_budget(std::string_view typed) {
  return std::max<size_t>(1, std::min<size_t>(3, typed.size() / 4));
}

// The candidates nearest to `typed` within its typo budget, in candidate order.
std::vector<std::string> nearest(std::string_view typed,
                                 const std::vector<std::string>& candidates) {
  const size_t budget = typo_budget(typed);
  size_t best = budget + 1;
  std::vector<std::string> out;
  for (const std::string& c : candidates) {
    size_t d = edit_distance(typed, c);
    if (d > budget || d > best) continue;
    if (d < best) {
      best = d;
      out.clear();
    }
    if (out.size() < kMaxSuggestions) out.push_back(c);
  }
  return out;
}

}  // namespace

size_t edit_distance(std::string_view a, std::string_view b) {
  // Three rows of the dynamic programme: d[i][j] is the distance between a[0, i) and b[0, j).
  const size_t n = b.size();
  std::vector<size_t> two_back(n + 1), prev(n + 1), cur(n + 1);
  for (size_t j = 0; j <= n; ++j) prev[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    cur[0] = i;
    for (size_t j = 1; j <= n; ++j) {
      const size_t substitute = prev[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1);
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, substitute});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1])
        cur[j] = std::min(cur[j], two_back[j - 2] + 1);
    }
    std::swap(two_back, prev);
    std::swap(prev, cur);
  }
  return prev[n];
}

std::vector<std::string> suggest_keys(std::string_view key, std::string_view section) {
  std::vector<std::string> same_leaf, with_unit, all;
  const std::string unit_prefix = std::string(key) + "_";
  for (const FieldSpec& f : scenario_fields()) {
    if (!section.empty() && section_of(f.key) != section) continue;
    all.push_back(f.key);
    if (leaf_of(f.key) == leaf_of(key)) same_leaf.push_back(f.key);
    if (f.key.rfind(unit_prefix, 0) == 0 && with_unit.size() < kMaxSuggestions)
      with_unit.push_back(f.key);
  }
  if (!same_leaf.empty()) {
    // Of the sections holding the name, the ones spelt nearest to the typed section
    // ("gpus.name" -> "gpu.name", not also "run.name").
    std::vector<size_t> d;
    for (const std::string& k : same_leaf)
      d.push_back(edit_distance(section_of(key), section_of(k)));
    const size_t best = *std::min_element(d.begin(), d.end());
    std::vector<std::string> out;
    for (size_t i = 0; i < same_leaf.size() && out.size() < kMaxSuggestions; ++i)
      if (d[i] == best) out.push_back(same_leaf[i]);
    return out;
  }
  if (!with_unit.empty()) return with_unit;
  return nearest(key, all);
}

std::vector<std::string> suggest_sections(std::string_view section) {
  std::vector<std::string> sections;
  std::set<std::string_view> seen;
  for (const FieldSpec& f : scenario_fields())
    if (seen.insert(section_of(f.key)).second) sections.emplace_back(section_of(f.key));
  return nearest(section, sections);
}

std::string did_you_mean(const std::vector<std::string>& suggestions) {
  if (suggestions.empty()) return "";
  std::string out = "; did you mean ";
  for (size_t i = 0; i < suggestions.size(); ++i) {
    if (i > 0) out += i + 1 == suggestions.size() ? " or " : ", ";
    out += suggestions[i];
  }
  return out + "?";
}

}  // namespace kvtwin::sim::scenario
