#include "sim/validate/link_model_mover.h"

#include <algorithm>

#include "model/check.h"

namespace kvtwin::sim::validate {

LinkModelMover::LinkModelMover(Simulator& sim, std::map<std::string, calibrate::LinkModel> models)
    : sim_(sim), models_(std::move(models)) {}

bool LinkModelMover::has_model(Location src, Location dst) const {
  auto cls = calibrate::link_class(src, dst);
  return cls && models_.count(std::string(*cls)) > 0;
}

void LinkModelMover::start(Transfer transfer, Done done) {
  KVTWIN_CHECK(has_model(transfer.src, transfer.dst))
      << "no link model for " << location_name(transfer.src) << " -> "
      << location_name(transfer.dst);
  const std::string cls(*calibrate::link_class(transfer.src, transfer.dst));
  const calibrate::LinkModel& model = models_.at(cls);
  TransferResult r;
  r.start = sim_.now();
  r.predicted_ns = model.predict(transfer.objects.size(), transfer.total_bytes());
  SimTime& free_at = free_at_[{cls, transfer.instance}];
  r.finish = std::max(free_at, r.start) + r.predicted_ns;
  free_at = r.finish;
  r.ok.assign(transfer.objects.size(), 1);
  sim_.schedule_at(r.finish, [done = std::move(done), r = std::move(r)] { done(r); });
}

}  // namespace kvtwin::sim::validate
