// The scenario field registry: every TOML key a scenario may contain, with its type, unit, range
// and documentation, declared once. The loader, `--set` overrides, `kvtwin sweep --vary`, the
// effective-scenario dump in each run directory and scenarios/README.md all follow this table
// (a test checks that the README documents every key).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "sim/scenario/scenario.h"

namespace kvtwin::sim::scenario {

enum class FieldType { kInt, kDouble, kBool, kString };

using FieldValue = std::variant<int64_t, double, bool, std::string>;

struct FieldSpec {
  std::string key;  // "section.name"
  FieldType type;
  double min = 0;  // inclusive range for kInt / kDouble
  double max = 0;
  std::vector<std::string> choices;  // allowed strings for kString (empty = any)
  std::string unit;
  std::string doc;
  // Stores a value already checked against type, range and choices.
  std::function<void(Scenario*, const FieldValue&)> set;
  // The current value in TOML syntax (strings quoted); "" for an optional field left unset.
  std::function<std::string(const Scenario&)> get;
};

// All fields, in documentation order (section by section).
const std::vector<FieldSpec>& scenario_fields();
// The field named `key`, or nullptr.
const FieldSpec* find_field(std::string_view key);

std::string_view field_type_name(FieldType type);

}  // namespace kvtwin::sim::scenario
