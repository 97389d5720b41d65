#include "sim/calibrate/hardware_profile.h"

#include <toml++/toml.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <sstream>

#include "sim/io/input_error.h"

namespace kvtwin::sim::calibrate {
namespace {

std::string num(double v) {
  if (std::isinf(v)) return "inf";
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.6g", v);
  std::string s = buf;
  // TOML floats need a dot or an exponent.
  if (s.find_first_of(".en") == std::string::npos) s += ".0";
  return s;
}

// Bandwidth of a full queue of 32 MiB objects (an LMCache chunk of Llama-3.1-8B: 256 tokens of
// 128 KiB), latency excluded: what a "latency + bytes / bandwidth" link should charge for them.
double full_queue_gbps(const LinkModel& m) {
  constexpr uint64_t kChunk = uint64_t{32} << 20;
  const uint64_t n = static_cast<uint64_t>(m.queue_depth);
  const double ns = static_cast<double>(m.predict(n, n * kChunk)) - 1e3 * m.latency_us;
  return ns > 0 ? static_cast<double>(n * kChunk) / ns : kNoLimit;
}
double one_object_latency_us(const LinkModel& m) {
  return m.latency_us + m.object_us + m.object_serial_us;
}

}  // namespace

std::string to_toml(const HardwareProfile& p) {
  std::ostringstream out;
  for (const std::string& c : p.comments) out << "# " << c << "\n";
  out << "\n# The simulator's scenario keys: one latency and one bandwidth per link (bandwidth "
         "with\n"
         "# the link's queue full, latency of a one-object transfer), derived from the models "
         "below.\n"
         "[links]\n";
  auto find = [&](const char* name) -> const ProfileLink* {
    auto it = p.links.find(name);
    return it == p.links.end() ? nullptr : &it->second;
  };
  if (const auto* r = find("disk_read"))
    out << "disk_read_gbps = " << num(full_queue_gbps(r->model)) << "\n";
  if (const auto* w = find("disk_write"))
    out << "disk_write_gbps = " << num(full_queue_gbps(w->model)) << "\n";
  if (const auto* r = find("disk_read"); r && find("disk_write"))
    out << "disk_latency_us = "
        << num((one_object_latency_us(r->model) +
                one_object_latency_us(find("disk_write")->model)) /
               2)
        << "\n";
  if (const auto* g = find("remote_get"); g && find("remote_put")) {
    const auto* s = find("remote_put");
    out << "network_gbps = " << num(std::min(full_queue_gbps(g->model), full_queue_gbps(s->model)))
        << "\n";
    out << "network_latency_us = "
        << num((one_object_latency_us(g->model) + one_object_latency_us(s->model)) / 2) << "\n";
  }
  if (const auto* h = find("pcie_h2d")) {
    out << "pcie_h2d_gbps = " << num(full_queue_gbps(h->model)) << "\n";
    out << "pcie_latency_us = " << num(one_object_latency_us(h->model)) << "\n";
  }
  if (const auto* d = find("pcie_d2h"))
    out << "pcie_d2h_gbps = " << num(full_queue_gbps(d->model)) << "\n";
  out << "\n# Fitted models: t = latency + n*(object + object_serial/q) + B*(1/gbps + "
         "1/(q*stream_gbps))\n"
         "#   + spill/spill_gbps, q = min(n, queue_depth), spill = n*max(0, B/n - "
         "spill_object_bytes)\n"
         "#   or (n/q)*max(0, q*B/n - spill_window_bytes), whichever key the model has;\n"
         "# microseconds, GB/s (sim/calibrate/link_model.h).\n";
  for (const auto& [name, link] : p.links) {
    const LinkModel& m = link.model;
    out << "[link_models." << name << "]\n"
        << "latency_us = " << num(m.latency_us) << "\n"
        << "object_us = " << num(m.object_us) << "\n"
        << "object_serial_us = " << num(m.object_serial_us) << "\n"
        << "gbps = " << num(m.gbps) << "\n"
        << "stream_gbps = " << num(m.stream_gbps) << "\n"
        << (m.spill_scope == LinkModel::SpillScope::kWindow ? "spill_window_bytes = "
                                                            : "spill_object_bytes = ")
        << m.spill_bytes << "\n"
        << "spill_gbps = " << num(m.spill_gbps) << "\n"
        << "queue_depth = " << m.queue_depth << "\n"
        << "samples = " << link.samples << "\n"
        << "fit_mape_pct = " << num(link.fit_mape_pct) << "\n\n";
  }
  // PCIe alone (kvtwin_pcie_calibrate's samples): no tier was measured, no tier settings.
  const bool tiers = std::any_of(p.links.begin(), p.links.end(), [](const auto& l) {
    return l.first.starts_with("disk") || l.first.starts_with("remote");
  });
  if (!tiers) return out.str();
  out << "# The real tiers' settings during the measurements.\n[tiers]\n"
      << "disk_direct_io = " << (p.tiers.disk_direct_io ? "true" : "false") << "\n"
      << "disk_engine = \"" << (p.tiers.disk_uring ? "uring" : "posix") << "\"\n"
      << "disk_queue_depth = " << p.tiers.disk_queue_depth << "\n"
      << "remote_pipeline_depth = " << p.tiers.remote_pipeline_depth << "\n";
  return out.str();
}

namespace {

[[noreturn]] void fail(const std::string& file, const toml::node& at, const std::string& key,
                       const std::string& message) {
  throw InputError(file, at.source().begin.line, key, message);
}

double read_number(const std::string& file, const toml::table& t, const std::string& prefix,
                   const std::string& key, bool allow_inf) {
  const toml::node* n = t.get(key);
  if (n == nullptr) throw InputError(file, t.source().begin.line, prefix + key, "missing");
  std::optional<double> v = n->value<double>();
  if (!v) fail(file, *n, prefix + key, "expected a number");
  if (*v < 0 || std::isnan(*v) || (!allow_inf && std::isinf(*v)))
    fail(file, *n, prefix + key, "expected a non-negative finite number");
  return *v;
}

}  // namespace

HardwareProfile read_hardware_profile(const std::string& path) {
  toml::table root;
  try {
    root = toml::parse_file(path);
  } catch (const toml::parse_error& e) {
    throw InputError(path, e.source().begin.line, "", std::string(e.description()));
  }
  HardwareProfile p;
  for (const auto& [key, node] : root) {
    const std::string k(key.str());
    if (k != "links" && k != "link_models" && k != "tiers")
      fail(path, node, k, "unknown table (expected links, link_models, tiers)");
  }
  if (const toml::table* models = root["link_models"].as_table()) {
    for (const auto& [key, node] : *models) {
      const std::string name(key.str());
      const std::string prefix = "link_models." + name + ".";
      if (std::find(std::begin(kLinkClasses), std::end(kLinkClasses), name) ==
          std::end(kLinkClasses))
        fail(path, node, "link_models." + name, "unknown transfer class");
      const toml::table* t = node.as_table();
      if (t == nullptr) fail(path, node, "link_models." + name, "expected a table");
      for (const auto& [field, value] : *t) {
        static const char* const kKeys[] = {"latency_us",         "object_us",
                                            "object_serial_us",   "gbps",
                                            "stream_gbps",        "spill_object_bytes",
                                            "spill_window_bytes", "spill_gbps",
                                            "queue_depth",        "samples",
                                            "fit_mape_pct"};
        if (std::find(std::begin(kKeys), std::end(kKeys), field.str()) == std::end(kKeys))
          fail(path, value, prefix + std::string(field.str()), "unknown key");
      }
      ProfileLink link;
      link.model.latency_us = read_number(path, *t, prefix, "latency_us", false);
      link.model.object_us = read_number(path, *t, prefix, "object_us", false);
      link.model.object_serial_us = read_number(path, *t, prefix, "object_serial_us", false);
      link.model.gbps = read_number(path, *t, prefix, "gbps", true);
      link.model.stream_gbps = read_number(path, *t, prefix, "stream_gbps", true);
      if (t->contains("spill_object_bytes") && t->contains("spill_window_bytes"))
        fail(path, *t->get("spill_window_bytes"), prefix + "spill_window_bytes",
             "give spill_object_bytes or spill_window_bytes, not both");
      if (t->contains("spill_gbps")) {
        const bool window = t->contains("spill_window_bytes");
        link.model.spill_gbps = read_number(path, *t, prefix, "spill_gbps", true);
        link.model.spill_scope =
            window ? LinkModel::SpillScope::kWindow : LinkModel::SpillScope::kObject;
        link.model.spill_bytes = static_cast<uint64_t>(read_number(
            path, *t, prefix, window ? "spill_window_bytes" : "spill_object_bytes", false));
      }
      const double depth = read_number(path, *t, prefix, "queue_depth", false);
      if (depth < 1 || depth != std::floor(depth) || depth > 1 << 16)
        fail(path, *t->get("queue_depth"), prefix + "queue_depth", "expected an integer >= 1");
      link.model.queue_depth = static_cast<int32_t>(depth);
      if (t->contains("samples"))
        link.samples = static_cast<uint64_t>(read_number(path, *t, prefix, "samples", false));
      if (t->contains("fit_mape_pct"))
        link.fit_mape_pct = read_number(path, *t, prefix, "fit_mape_pct", false);
      p.links[name] = link;
    }
  }
  if (const toml::table* t = root["tiers"].as_table()) {
    if (auto v = (*t)["disk_direct_io"].value<bool>()) p.tiers.disk_direct_io = *v;
    if (auto v = (*t)["disk_engine"].value<std::string>()) {
      if (*v != "uring" && *v != "posix")
        fail(path, *t->get("disk_engine"), "tiers.disk_engine", "expected \"uring\" or \"posix\"");
      p.tiers.disk_uring = *v == "uring";
    }
    if (auto v = (*t)["disk_queue_depth"].value<int64_t>())
      p.tiers.disk_queue_depth = static_cast<int32_t>(*v);
    if (auto v = (*t)["remote_pipeline_depth"].value<int64_t>())
      p.tiers.remote_pipeline_depth = static_cast<int32_t>(*v);
  }
  return p;
}

}  // namespace kvtwin::sim::calibrate
