#include "sim/validate/validating_mover.h"

#include <memory>

#include "model/check.h"

namespace kvtwin::sim::validate {

struct ValidatingMover::Pending {
  TransferSample sample;
  Done done;
  bool have_real = false;
  bool have_model = false;
  bool delivered = false;  // done() scheduled or called
  TransferResult real;
  TransferResult model;
  size_t num_objects = 0;  // of the simulator's transfer
};

ValidatingMover::ValidatingMover(Simulator& sim, Mover& modeled, Mover& real, Timing timing)
    : sim_(sim), modeled_(modeled), real_(real), timing_(timing) {}

void ValidatingMover::start(Transfer transfer, Done done) {
  if (validated_ && !validated_(transfer.src, transfer.dst)) {
    ++passed_through_;
    modeled_.start(std::move(transfer), std::move(done));
    return;
  }
  auto p = std::make_shared<Pending>();
  p->sample.src = transfer.src;
  p->sample.dst = transfer.dst;
  p->sample.kind = std::string(transfer.kind);
  p->sample.num_objects = transfer.objects.size();
  p->sample.bytes = transfer.total_bytes();
  p->sample.start = sim_.now();
  p->done = std::move(done);
  p->num_objects = transfer.objects.size();
  ++in_flight_;
  Transfer copy = to_real_ ? to_real_(transfer) : transfer;
  p->sample.num_objects = copy.objects.size();
  real_.start(std::move(copy), [this, p](const TransferResult& r) {
    KVTWIN_CHECK_GE(r.measured_ns, 0);
    p->real = r;
    p->have_real = true;
    p->sample.measured_ns = r.measured_ns;
    for (uint8_t ok : r.ok) p->sample.num_failed += ok ? 0 : 1;
    maybe_finish(p);
  });
  modeled_.start(std::move(transfer), [this, p](const TransferResult& r) {
    p->have_model = true;
    p->model = r;
    p->sample.predicted_ns = r.predicted_ns >= 0 ? r.predicted_ns : r.finish - r.start;
    maybe_finish(p);
  });
}

void ValidatingMover::maybe_finish(const std::shared_ptr<Pending>& p) {
  auto deliver = [this, p](SimTime finish) {
    TransferResult out = timing_ == Timing::kMeasured ? p->real : p->model;
    if (out.ok.size() != p->num_objects)  // the real transfer was mapped: one flag for all
      out.ok.assign(p->num_objects, p->sample.num_failed == 0 ? 1 : 0);
    out.start = p->sample.start;
    out.finish = finish;
    out.predicted_ns = p->sample.predicted_ns;
    out.measured_ns = p->sample.measured_ns;
    p->done(out);
  };
  if (timing_ == Timing::kMeasured && p->have_real && !p->delivered) {
    p->delivered = true;
    const SimTime finish = p->sample.start + p->sample.measured_ns;
    sim_.schedule_at(finish, [deliver, finish] { deliver(finish); });
  }
  if (!(p->have_real && p->have_model)) return;
  samples_.push_back(p->sample);
  --in_flight_;
  if (timing_ == Timing::kPredicted) {
    p->delivered = true;
    deliver(
        sim_.now());  // the later of the two halves: the modeled time when real reports at start
  }
}

}  // namespace kvtwin::sim::validate
