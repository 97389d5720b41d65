#include "sim/validate/validate_command.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <functional>
#include <map>

#include "cuda/tiers/tier_mover.h"
#include "sim/calibrate/hardware_profile.h"
#include "sim/io/input_error.h"
#include "sim/validate/link_model_mover.h"
#include "sim/validate/report.h"
#include "sim/validate/scenario_validation.h"
#include "sim/validate/transfer_list.h"
#include "sim/validate/validating_mover.h"

namespace kvtwin::sim::validate {
namespace {

int bad_config(const std::string& message) {
  std::fprintf(stderr, "kvtwin validate: %s\n", message.c_str());
  return kExitBadInput;
}

}  // namespace

int run_validate(const ValidateOptions& o) {
  if (o.timing != "predicted" && o.timing != "measured")
    return bad_config("--timing must be predicted or measured, not " + o.timing);
  if (!o.scenario.empty()) {
    if (!o.transfers.empty()) return bad_config("give --scenario or --transfers, not both");
    return run_scenario_validation(o);
  }
  // Stage 1: inputs. The profile and transfer list throw InputError (exit 2 from main).
  if (o.profile.empty())
    return bad_config("--profile is required (write one with kvtwin calibrate)");
  if (o.timing != "predicted" && o.timing != "measured")
    return bad_config("--timing must be predicted or measured, not " + o.timing);
  const calibrate::HardwareProfile profile = calibrate::read_hardware_profile(o.profile);
  calibrate::RealTierOptions t;
  t.disk_path = o.disk_path;
  t.remote_url = o.remote_url;
  t.timeout_ms = o.timeout_ms;
  t.direct_io = profile.tiers.disk_direct_io;
  t.uring = profile.tiers.disk_uring;
  t.disk_queue_depth = profile.tiers.disk_queue_depth;
  t.pipeline_depth = profile.tiers.remote_pipeline_depth;
  std::vector<PlannedTransfer> plan;
  if (!o.transfers.empty()) {
    plan = read_transfer_list(o.transfers);
  } else {
    SynthSpec spec;
    if (!o.disk_path.empty()) spec.tiers.push_back(Location::kDisk);
    if (!o.remote_url.empty()) spec.tiers.push_back(Location::kRemote);
    if (spec.tiers.empty()) return bad_config("give --disk-path and/or --remote-url");
    spec.repeats = o.repeats;
    spec.seed = o.seed;
    spec.run_tag = "kvtwin-validate@" + std::to_string(::getpid());
    plan = synth_transfers(spec);
  }
  // Stage 2: the real tiers, then a check that every transfer has a tier and a model.
  calibrate::RealTiers tiers;
  std::string error;
  if (!calibrate::open_real_tiers(t, &tiers, &error)) return bad_config(error);
  Simulator sim;
  std::map<std::string, calibrate::LinkModel> models;
  for (const auto& [cls, link] : profile.links) models[cls] = link.model;
  LinkModelMover modeled(sim, models);
  cuda::tiers::TierMover real(sim, tiers.disk.get(), tiers.remote.get(),
                              {.charge = cuda::tiers::TierMoverConfig::Charge::kNone});
  for (const PlannedTransfer& p : plan) {
    if (!real.handles(p.src, p.dst))
      return bad_config(std::string("no real tier for ") + std::string(location_name(p.src)) +
                        " -> " + std::string(location_name(p.dst)) +
                        " (give --disk-path / --remote-url)");
    if (!modeled.has_model(p.src, p.dst))
      return bad_config("profile " + o.profile + " has no link model for " +
                        std::string(location_name(p.src)) + " -> " +
                        std::string(location_name(p.dst)));
  }
  // Stage 3: the run.
  ValidatingMover mover(sim, modeled, real,
                        o.timing == "measured" ? Timing::kMeasured : Timing::kPredicted);
  // Objects are removed (untimed) once the last transfer naming their prefix completes, so the
  // tiers hold what a store-retrieve cycle leaves, as during calibration.
  std::map<std::string, size_t> last_use;
  for (size_t i = 0; i < plan.size(); ++i) last_use[plan[i].key_prefix] = i;
  std::map<std::string, uint32_t> max_objects;
  for (const PlannedTransfer& p : plan)
    max_objects[p.key_prefix] = std::max(max_objects[p.key_prefix], p.num_objects);
  auto remove_prefix = [&](const std::string& prefix) {
    std::vector<std::string> keys;
    for (uint32_t j = 0; j < max_objects[prefix]; ++j)
      keys.push_back(prefix + "@" + std::to_string(j));
    calibrate::remove_objects(tiers, keys);
  };
  // A transfer list runs open loop (each row at its time); the synthetic mix runs closed loop
  // (each transfer starts when the previous one completes), so the links are never queued.
  const bool closed_loop = o.transfers.empty();
  size_t completed = 0;
  std::function<void(size_t)> launch = [&](size_t i) {
    const bool last = last_use[plan[i].key_prefix] == i;
    mover.start(to_transfer(plan[i]), [&, i, last](const TransferResult&) {
      ++completed;
      if (last) remove_prefix(plan[i].key_prefix);
      if (closed_loop && i + 1 < plan.size()) launch(i + 1);
    });
  };
  if (closed_loop) {
    if (!plan.empty()) sim.schedule_at(0, [&] { launch(0); });
  } else {
    for (size_t i = 0; i < plan.size(); ++i) sim.schedule_at(plan[i].at, [&, i] { launch(i); });
  }
  sim.run();
  // Stage 4: report.
  const ValidationSummary summary = summarize(mover.samples());
  std::vector<std::string> header = {
      "profile: " + o.profile,
      "transfers: " +
          (o.transfers.empty() ? "synthetic mix, seed " + std::to_string(o.seed) : o.transfers) +
          " (" + std::to_string(plan.size()) + " transfers, " + std::to_string(completed) +
          " completed)",
      "timing: " + o.timing + "; simulated end time " + std::to_string(sim.now() / 1000) + " us",
      "wrong bytes: " + std::to_string(real.wrong_bytes()) + " object(s)"};
  if (tiers.disk) header.push_back("disk tier: " + tiers.disk->stats().summary());
  if (tiers.remote) header.push_back("remote tier: " + tiers.remote->stats().summary());
  const std::string note = write_report(o.out, header, mover.samples(), summary);
  if (!o.quiet) {
    for (const std::string& h : header) std::printf("%s\n", h.c_str());
    std::printf("\n%s", format_summary(summary).c_str());
  }
  std::printf("\nreport: %s/report.md%s%s\n", o.out.c_str(), note.empty() ? "" : "; ",
              note.c_str());
  return validation_exit_code(real.wrong_bytes(), summary, o.max_mape_pct);
}

}  // namespace kvtwin::sim::validate
