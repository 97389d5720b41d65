// LinkModelMover: a modeled sim::Mover that charges each transfer the calibrated LinkModel of its
// class (sim/calibrate/link_model.h). Each (class, instance) link serves one transfer at a time in
// arrival order, as the real tiers do when driven from the simulation thread:
//
//   finish = max(now, link free) + model.predict(num_objects, bytes);  predicted_ns = the latter
//
// It is the model `kvtwin validate` checks against the real tiers. (The simulator's own modeled
// links, sim/hw, share bandwidth among concurrent transfers instead.)
//
// Threading: the simulation thread only.
#pragma once

#include <map>
#include <string>
#include <utility>

#include "sim/calibrate/link_model.h"
#include "sim/mover.h"
#include "sim/simulator.h"

namespace kvtwin::sim::validate {

class LinkModelMover final : public Mover {
 public:
  LinkModelMover(Simulator& sim, std::map<std::string, calibrate::LinkModel> models);

  // REQUIRES: has_model(transfer.src, transfer.dst).
  void start(Transfer transfer, Done done) override;
  std::string_view name() const override { return "link-model"; }
  bool has_model(Location src, Location dst) const;

 private:
  Simulator& sim_;
  std::map<std::string, calibrate::LinkModel> models_;
  std::map<std::pair<std::string, int32_t>, SimTime> free_at_;  // link -> when it is idle
};

}  // namespace kvtwin::sim::validate
