#include "sim/validate/validating_mover.h"

#include <gtest/gtest.h>

#include "model/check.h"
#include "sim/validate/link_model_mover.h"

namespace kvtwin::sim::validate {
namespace {

// A stand-in for a real mover: reports at start with a fixed measured time per byte and fails
// the objects whose key starts with "bad".
class FakeRealMover final : public Mover {
 public:
  explicit FakeRealMover(Simulator& sim) : sim_(sim) {}
  void start(Transfer t, Done done) override {
    TransferResult r;
    r.start = r.finish = sim_.now();
    r.measured_ns = static_cast<SimDuration>(t.total_bytes());  // 1 ns per byte
    for (const KvObject& o : t.objects) r.ok.push_back(o.key.starts_with("bad") ? 0 : 1);
    sim_.schedule_at(r.finish, [done = std::move(done), r] { done(r); });
  }
  std::string_view name() const override { return "fake-real"; }

 private:
  Simulator& sim_;
};

Transfer make(Location src, Location dst, std::vector<std::string> keys, uint64_t bytes) {
  Transfer t;
  t.src = src;
  t.dst = dst;
  t.kind = "store";
  for (auto& k : keys) {
    KvObject o;
    o.key = k;
    o.bytes = bytes;
    t.objects.push_back(o);
  }
  return t;
}

std::map<std::string, calibrate::LinkModel> models() {
  calibrate::LinkModel m;
  m.latency_us = 10;  // 10 us + 2 bytes per ns
  m.gbps = 2;
  return {{"disk_write", m}, {"disk_read", m}};
}

TEST(ValidatingMover, PredictedTimingCompletesAtTheModeledTimeWithModeledOutcomes) {
  Simulator sim;
  LinkModelMover modeled(sim, models());
  FakeRealMover real(sim);
  ValidatingMover v(sim, modeled, real, Timing::kPredicted);
  TransferResult got;
  v.start(make(Location::kCpu, Location::kDisk, {"a", "bad"}, 100'000),
          [&](const TransferResult& r) { got = r; });
  EXPECT_EQ(v.num_in_flight(), 1u);
  sim.run();
  EXPECT_EQ(got.start, 0);
  EXPECT_EQ(got.finish, 10'000 + 100'000);  // 200 kB at 2 B/ns
  EXPECT_EQ(got.predicted_ns, 110'000);
  EXPECT_EQ(got.measured_ns, 200'000);
  EXPECT_EQ(got.ok, (std::vector<uint8_t>{1, 1}));  // the real fault is recorded, not fed back
  ASSERT_EQ(v.samples().size(), 1u);
  const TransferSample& s = v.samples()[0];
  EXPECT_EQ(s.num_objects, 2u);
  EXPECT_EQ(s.bytes, 200'000u);
  EXPECT_EQ(s.num_failed, 1u);
  EXPECT_EQ(s.kind, "store");
  EXPECT_EQ(v.num_in_flight(), 0u);
}

TEST(ValidatingMover, MeasuredTimingCompletesAfterTheMeasuredTime) {
  Simulator sim;
  LinkModelMover modeled(sim, models());
  FakeRealMover real(sim);
  ValidatingMover v(sim, modeled, real, Timing::kMeasured);
  std::vector<SimTime> finishes;
  sim.schedule_at(5, [&] {
    v.start(make(Location::kDisk, Location::kCpu, {"a"}, 50'000), [&](const TransferResult& r) {
      finishes.push_back(sim.now());
      EXPECT_EQ(r.finish, sim.now());
    });
  });
  sim.run();
  ASSERT_EQ(finishes.size(), 1u);
  EXPECT_EQ(finishes[0], 5 + 50'000);  // measured: 1 ns per byte, not the model's 35'000
  ASSERT_EQ(v.samples().size(), 1u);
  EXPECT_EQ(v.samples()[0].predicted_ns, 10'000 + 25'000);
}

// A real mover that charges its measured time (as CudaMover does) reports late; the predicted
// run then completes at the later of the modeled time and the real report.
class LateRealMover final : public Mover {
 public:
  explicit LateRealMover(Simulator& sim) : sim_(sim) {}
  void start(Transfer t, Done done) override {
    TransferResult r;
    r.start = sim_.now();
    r.measured_ns = static_cast<SimDuration>(t.total_bytes());
    r.finish = r.start + r.measured_ns;
    r.ok.assign(t.objects.size(), 1);
    sim_.schedule_at(r.finish, [done = std::move(done), r] { done(r); });
  }
  std::string_view name() const override { return "late-real"; }

 private:
  Simulator& sim_;
};

TEST(ValidatingMover, ALateRealReportDelaysOnlyTransfersSlowerThanPredicted) {
  Simulator sim;
  LinkModelMover modeled(sim, models());
  LateRealMover real(sim);
  ValidatingMover v(sim, modeled, real, Timing::kPredicted);
  std::vector<SimTime> finish;
  auto rec = [&](const TransferResult& r) { finish.push_back(r.finish); };
  v.start(make(Location::kCpu, Location::kDisk, {"a"}, 10'000), rec);   // real 10 us < 15 us
  v.start(make(Location::kDisk, Location::kCpu, {"b"}, 100'000), rec);  // real 100 us > 60 us
  sim.run();
  EXPECT_EQ(finish, (std::vector<SimTime>{15'000, 100'000}));
  ASSERT_EQ(v.samples().size(), 2u);
  EXPECT_EQ(v.samples()[1].predicted_ns, 60'000);
  EXPECT_EQ(v.samples()[1].measured_ns, 100'000);
}

TEST(ValidatingMover, LinksTheRealMoverCannotExecuteGoToTheModelAlone) {
  Simulator sim;
  auto m = models();
  m["pcie_h2d"] = m["disk_read"];
  LinkModelMover modeled(sim, m);
  FakeRealMover real(sim);
  ValidatingMover v(sim, modeled, real, Timing::kPredicted);
  v.set_validated_links(
      [](Location src, Location dst) { return src != Location::kGpu && dst != Location::kGpu; });
  TransferResult got;
  v.start(make(Location::kCpu, Location::kGpu, {"bad-but-unexecuted"}, 2000),
          [&](const TransferResult& r) { got = r; });
  sim.run();
  EXPECT_EQ(got.ok, std::vector<uint8_t>{1});  // the model's outcome: the real one never ran
  EXPECT_EQ(got.finish, 10'000 + 1'000);
  EXPECT_EQ(got.measured_ns, -1);
  EXPECT_TRUE(v.samples().empty());
  EXPECT_EQ(v.num_passed_through(), 1u);
}

TEST(ValidatingMover, AMappedTransferRunsForRealWhileTheModelSeesTheOriginal) {
  Simulator sim;
  LinkModelMover modeled(sim, models());
  FakeRealMover real(sim);
  ValidatingMover v(sim, modeled, real, Timing::kMeasured);
  // One 3000-byte placeholder object becomes three real objects of 1000 bytes, one failing.
  v.set_real_transfer([](const Transfer& t) {
    Transfer r = make(t.src, t.dst, {"x0", "bad1", "x2"}, t.total_bytes() / 3);
    return r;
  });
  TransferResult got;
  v.start(make(Location::kDisk, Location::kCpu, {"placeholder"}, 3000),
          [&](const TransferResult& r) { got = r; });
  sim.run();
  ASSERT_EQ(v.samples().size(), 1u);
  EXPECT_EQ(v.samples()[0].num_objects, 3u);  // the real transfer's objects
  EXPECT_EQ(v.samples()[0].bytes, 3000u);
  EXPECT_EQ(v.samples()[0].num_failed, 1u);
  EXPECT_EQ(v.samples()[0].predicted_ns, 10'000 + 1'500);  // the model saw 3000 bytes
  EXPECT_EQ(got.ok, std::vector<uint8_t>{0});  // one flag for the simulator's one object
  EXPECT_EQ(got.finish, 3'000);                // measured: 1 ns per byte
}

TEST(ValidatingMover, TwoRunsGiveTheSameSamplesInTheSameOrder) {
  auto run = [] {
    Simulator sim;
    LinkModelMover modeled(sim, models());
    FakeRealMover real(sim);
    ValidatingMover v(sim, modeled, real, Timing::kPredicted);
    for (int i = 0; i < 5; ++i)
      sim.schedule_at(i, [&, i] {
        v.start(make(Location::kCpu, Location::kDisk, {"k" + std::to_string(i)}, 1000 * (5 - i)),
                [](const TransferResult&) {});
      });
    sim.run();
    std::vector<std::pair<SimTime, SimDuration>> out;
    for (const auto& s : v.samples()) out.emplace_back(s.start, s.predicted_ns);
    return out;
  };
  EXPECT_EQ(run(), run());
}

TEST(LinkModelMover, TransfersOnOneLinkQueueAndOtherLinksDoNot) {
  Simulator sim;
  LinkModelMover m(sim, models());
  std::vector<std::pair<std::string, TransferResult>> done;
  auto rec = [&](std::string name) {
    return [&done, name](const TransferResult& r) { done.emplace_back(name, r); };
  };
  m.start(make(Location::kCpu, Location::kDisk, {"a"}, 20'000), rec("w1"));  // 10 + 10 us
  m.start(make(Location::kCpu, Location::kDisk, {"b"}, 20'000), rec("w2"));  // queued behind w1
  m.start(make(Location::kDisk, Location::kCpu, {"c"}, 20'000), rec("r1"));  // its own link
  sim.run();
  ASSERT_EQ(done.size(), 3u);
  EXPECT_EQ(done[0].first, "w1");
  EXPECT_EQ(done[0].second.finish, 20'000);
  EXPECT_EQ(done[1].first, "r1");
  EXPECT_EQ(done[1].second.finish, 20'000);
  EXPECT_EQ(done[2].first, "w2");
  EXPECT_EQ(done[2].second.finish, 40'000);
  EXPECT_EQ(done[2].second.predicted_ns, 20'000);  // service time, queueing excluded
  EXPECT_FALSE(m.has_model(Location::kCpu, Location::kRemote));
  EXPECT_THROW(m.start(make(Location::kCpu, Location::kRemote, {"x"}, 1), rec("x")),
               model::CheckFailedError);
}

}  // namespace
}  // namespace kvtwin::sim::validate
