#include "sim/validate/scenario_validation.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <memory>

#include "model/check.h"
#include "sim/calibrate/hardware_profile.h"
#include "sim/calibrate/link_model.h"
#include "sim/calibrate/real_tiers.h"
#include "sim/cli/common.h"
#include "sim/cli/run_command.h"
#include "sim/hw/model_geometry.h"
#include "sim/io/input_error.h"
#include "sim/scenario/scenario_loader.h"
#include "sim/validate/report.h"
#include "sim/validate/validate_command.h"
#include "sim/validate/validating_mover.h"

namespace kvtwin::sim::validate {
namespace {

bool is_tier(Location l) {
  return l == Location::kDisk || l == Location::kRemote;
}

// Hands every call to a mover owned elsewhere (the Cluster owns what its factory returns; the
// validating mover must outlive the Cluster for its samples to be read).
class Forward final : public Mover {
 public:
  explicit Forward(Mover& to) : to_(to) {}
  void start(Transfer transfer, Done done) override {
    to_.start(std::move(transfer), std::move(done));
  }
  std::string_view name() const override { return to_.name(); }

 private:
  Mover& to_;
};

int bad_config(const std::string& message) {
  std::fprintf(stderr, "kvtwin validate: %s\n", message.c_str());
  return kExitBadInput;
}

}  // namespace

RealObjects::RealObjects(std::string tag, cuda::tiers::TierMover* tiers, uint64_t chunk_bytes)
    : tag_(std::move(tag)), tiers_(tiers), chunk_bytes_(chunk_bytes) {
  KVTWIN_CHECK(chunk_bytes > 0);
}

Transfer RealObjects::map(const Transfer& t) {
  KVTWIN_CHECK(is_tier(t.src) != is_tier(t.dst));
  Transfer real;
  real.src = t.src;
  real.dst = t.dst;
  real.instance = t.instance;
  real.kind = t.kind;
  if (is_tier(t.dst)) {  // a store: fresh keys
    for (const KvObject& o : t.objects)
      for (uint64_t done = 0; done < o.bytes;) {
        const uint64_t bytes = std::min(chunk_bytes_, o.bytes - done);
        real.objects.push_back({tag_ + "/put/" + std::to_string(puts_++), bytes, -1, {}});
        keys_.push_back(real.objects.back().key);
        done += bytes;
      }
    return real;
  }
  // A fetch: staged once per (tier, size, index).
  Transfer stage;
  stage.src = Location::kCpu;
  stage.dst = t.src;
  stage.instance = t.instance;
  stage.kind = "stage";
  const std::string tier(location_name(t.src));
  const uint64_t total = t.total_bytes();
  for (uint64_t done = 0, j = 0; done < total; ++j) {
    const uint64_t bytes = std::min(chunk_bytes_, total - done);
    KvObject o{tag_ + "/get/" + tier + "/" + std::to_string(bytes) + "/" + std::to_string(j),
               bytes,
               -1,
               {}};
    if (staged_.insert(o.key).second) {
      stage.objects.push_back(o);
      keys_.push_back(o.key);
    }
    real.objects.push_back(std::move(o));
    done += bytes;
  }
  if (!stage.objects.empty()) {
    const TransferResult r = tiers_->execute(stage);
    for (uint8_t ok : r.ok) staging_failures_ += ok ? 0 : 1;
  }
  return real;
}

namespace {

// Stage 1: the scenario with the slice and profile applied (InputError -> exit 2 from main), the
// real tiers' settings (the profile's, when there is one). Returns 0 or an exit code.
struct Setup {
  scenario::Scenario s;
  calibrate::RealTierOptions tiers;
  calibrate::HardwareProfile profile;
  std::string profile_note = "none (the scenario's [links] figures)";
};
int prepare(const ValidateOptions& o, Setup* setup) {
  std::vector<std::string> sets;
  if (!o.profile.empty())
    sets.push_back("hardware.profile=\"" + std::filesystem::absolute(o.profile).string() + "\"");
  if (o.max_requests > 0) sets.push_back("workload.max_requests=" + std::to_string(o.max_requests));
  if (o.max_duration_s > 0)
    sets.push_back("workload.max_duration_s=" + std::to_string(o.max_duration_s));
  sets.insert(sets.end(), o.sets.begin(), o.sets.end());
  setup->s = cli::load_scenario(o.scenario, sets);
  const scenario::Scenario& s = setup->s;
  calibrate::RealTierOptions& t = setup->tiers;
  t.disk_path = o.disk_path;
  t.remote_url = o.remote_url;
  t.timeout_ms = o.timeout_ms;
  if (!s.hardware.profile.empty()) {
    setup->profile_note = scenario::hardware_profile_path(s);
    setup->profile = calibrate::read_hardware_profile(setup->profile_note);
    t.direct_io = setup->profile.tiers.disk_direct_io;
    t.uring = setup->profile.tiers.disk_uring;
    t.disk_queue_depth = setup->profile.tiers.disk_queue_depth;
    t.pipeline_depth = setup->profile.tiers.remote_pipeline_depth;
  }
  const bool wants_disk = s.lmcache.enabled && s.lmcache.max_local_disk_size_gb > 0;
  const bool wants_remote = s.lmcache.enabled && s.lmcache.remote;
  if (!wants_disk && !wants_remote)
    return bad_config(
        "the scenario has no LMCache disk or remote tier (lmcache.max_local_disk_size_gb, "
        "lmcache.remote): nothing to validate");
  if (wants_disk && o.disk_path.empty())
    return bad_config("the scenario uses a disk tier: give --disk-path");
  if (wants_remote && o.remote_url.empty())
    return bad_config("the scenario uses a remote tier: give --remote-url");
  return 0;
}

// The samples again, each predicted by the profile's link model of its class alone on its link
// (as the real tiers ran it); classes the profile lacks are left out.
std::vector<TransferSample> against_link_models(std::vector<TransferSample> samples,
                                                const calibrate::HardwareProfile& profile) {
  std::vector<TransferSample> out;
  for (TransferSample& x : samples) {
    const auto cls = calibrate::link_class(x.src, x.dst);
    if (!cls || !profile.links.count(std::string(*cls))) continue;
    x.predicted_ns = profile.links.at(std::string(*cls)).model.predict(x.num_objects, x.bytes);
    out.push_back(x);
  }
  return out;
}

}  // namespace

int run_scenario_validation(const ValidateOptions& o) {
  Setup setup;
  if (const int code = prepare(o, &setup); code != 0) return code;
  const scenario::Scenario& s = setup.s;
  // Stage 2: the real tiers.
  calibrate::RealTiers tiers;
  std::string error;
  if (!calibrate::open_real_tiers(setup.tiers, &tiers, &error)) return bad_config(error);
  // Stage 3: the run, with the validating mover in place of the modeled one.
  std::unique_ptr<cuda::tiers::TierMover> real;
  std::unique_ptr<RealObjects> objects;
  std::unique_ptr<ValidatingMover> validating;
  const Timing timing = o.timing == "measured" ? Timing::kMeasured : Timing::kPredicted;
  const std::string tag = "kvtwin-validate@" + std::to_string(::getpid());
  const hw::ModelGeometry geometry = hw::derive_geometry(s);
  const uint64_t chunk_bytes = static_cast<uint64_t>(s.lmcache.chunk_size) *
                               static_cast<uint64_t>(geometry.kv_bytes_per_token) *
                               static_cast<uint64_t>(geometry.tp);
  auto factory = [&](Simulator& sim, Mover& modeled) -> std::unique_ptr<Mover> {
    real = std::make_unique<cuda::tiers::TierMover>(
        sim, tiers.disk.get(), tiers.remote.get(),
        cuda::tiers::TierMoverConfig{.charge = cuda::tiers::TierMoverConfig::Charge::kNone});
    objects = std::make_unique<RealObjects>(tag, real.get(), chunk_bytes);
    validating = std::make_unique<ValidatingMover>(sim, modeled, *real, timing);
    validating->set_validated_links(
        [r = real.get()](Location src, Location dst) { return r->handles(src, dst); });
    validating->set_real_transfer([ob = objects.get()](const Transfer& x) { return ob->map(x); });
    return std::make_unique<Forward>(*validating);
  };
  const std::string run_dir = o.out + "/run";
  const report::Summary summary = cli::simulate(s, o.trace, run_dir, true, nullptr, factory);
  KVTWIN_CHECK(validating != nullptr) << "the cluster never asked for its mover";
  calibrate::remove_objects(tiers, objects->keys());
  // Stage 4: the reports.
  const std::vector<TransferSample>& samples = validating->samples();
  const ValidationSummary vs = summarize(samples);
  std::vector<std::string> header = {
      "scenario: " + (o.scenario.empty() ? std::string("(embedded default)") : o.scenario) +
          ", trace: " + cli::scenario_trace_name(s, o.trace),
      "slice: " + std::to_string(summary.requests) + " requests, " +
          std::to_string(summary.duration_s) + " s simulated; run directory " + run_dir,
      "hardware profile: " + setup.profile_note,
      "timing: " + o.timing +
          "; predicted = the simulator's modeled time of each transfer (shared links, queueing "
          "behind concurrent transfers included); measured = the real tier call, transfers "
          "executed one at a time",
      "validated: " + std::to_string(samples.size()) + " disk / remote transfers; not validated: " +
          std::to_string(validating->num_passed_through()) +
          " GPU <-> CPU transfers (modeled only: no GPU on the real path)",
      "wrong bytes: " + std::to_string(real->wrong_bytes()) +
          " object(s); objects not staged: " + std::to_string(objects->staging_failures())};
  if (tiers.disk) header.push_back("disk tier: " + tiers.disk->stats().summary());
  if (tiers.remote) header.push_back("remote tier: " + tiers.remote->stats().summary());
  const std::string note = write_report(o.out, header, samples, vs);
  if (!o.quiet) {
    for (const std::string& h : header) std::printf("%s\n", h.c_str());
    std::printf("\n%s", format_summary(vs).c_str());
  }
  if (!setup.profile.links.empty()) {
    const std::vector<TransferSample> alone = against_link_models(samples, setup.profile);
    header[3] = "timing: " + o.timing +
                "; predicted = the hardware profile's link model of each transfer alone on its "
                "link (the calibration's own check on the run's transfers)";
    const ValidationSummary by_model = summarize(alone);
    write_report(o.out + "/link_models", header, alone, by_model);
    if (!o.quiet)
      std::printf("\nThe same transfers against the profile's link models (%s/link_models):\n\n%s",
                  o.out.c_str(), format_summary(by_model).c_str());
  }
  std::printf("\nreport: %s/report.md%s%s\n", o.out.c_str(), note.empty() ? "" : "; ",
              note.c_str());
  return validation_exit_code(real->wrong_bytes(), vs, o.max_mape_pct);
}

}  // namespace kvtwin::sim::validate
