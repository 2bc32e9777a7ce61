// The training loop (engine/training_loop.h): the events after a step, the loss history's rules
// (a point every 10th step and at validations; the whole run kept, thinned), divergence, and the
// blocking fit against a plain loop of train_step.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "engine/training_loop.h"
#include "test_util.h"

namespace ptl {
namespace {

TrainConfig small_run(int64_t steps, int64_t eval_every) {
  TrainConfig tc;
  tc.batch = 2;
  tc.steps = steps;
  tc.eval_every = eval_every;
  tc.eval_batches = 2;
  tc.sample_every = 0;
  tc.seed = 5;
  return tc;
}

std::vector<int64_t> steps_of(const std::vector<LossPoint>& h) {
  std::vector<int64_t> s;
  for (const auto& p : h) s.push_back(p.step);
  return s;
}

TEST(TrainingLoop, EventsAfterAStep) {
  Trainer tr(find_preset("tiny").model, small_run(25, 10));
  LoopOptions o{.last = 25, .eval_every = 10, .has_val = true, .sample_every = 20};
  TrainingLoop loop(tr, o);
  auto ev = loop.events_after(10);
  EXPECT_TRUE(ev.evaluate && ev.save && !ev.sample && !ev.last);
  ev = loop.events_after(20);
  EXPECT_TRUE(ev.evaluate && ev.save && ev.sample);
  ev = loop.events_after(25);
  EXPECT_TRUE(ev.evaluate && ev.save && !ev.sample && ev.last);
  ev = loop.events_after(7);
  EXPECT_FALSE(ev.evaluate || ev.save || ev.sample || ev.last);
  // Without validation data: no validation, but still a save at the end.
  o.has_val = false;
  o.sample_at_end = true;
  o.save_every = 4;
  loop.set_options(o);
  ev = loop.events_after(25);
  EXPECT_TRUE(!ev.evaluate && ev.save && ev.sample && ev.last);
  EXPECT_TRUE(loop.events_after(8).save);
  EXPECT_FALSE(loop.events_after(10).save);
}

TEST(TrainingLoop, HistoryPointUpdatesAndRewinds) {
  std::vector<LossPoint> h;
  add_history_point(h, {10, 3.0, std::nullopt});
  add_history_point(h, {20, 2.5, std::nullopt});
  add_history_point(h, {20, 2.5, 2.7});  // the validation of step 20
  ASSERT_EQ(h.size(), 2u);
  ASSERT_TRUE(h[1].val_loss);
  EXPECT_EQ(*h[1].val_loss, 2.7);
  add_history_point(h, {30, 2.2, std::nullopt});
  // Back to step 15 (a run reopened from an earlier checkpoint): the later points go.
  add_history_point(h, {15, 2.9, std::nullopt});
  EXPECT_EQ(steps_of(h), (std::vector<int64_t>{10, 15}));
}

TEST(TrainingLoop, HistoryKeepsTheWholeRunThinned) {
  std::vector<LossPoint> h;
  const size_t max = 50;
  for (int64_t s = 10; s <= 10000; s += 10) {
    std::optional<double> val;
    if (s % 500 == 0) val = 1.0;
    add_history_point(h, {s, 2.0, val}, max);
    ASSERT_LE(h.size(), max);
  }
  EXPECT_EQ(h.front().step, 10) << "the curve keeps its start";
  EXPECT_EQ(h.back().step, 10000);
  int vals = 0;
  for (size_t i = 0; i < h.size(); ++i) {
    if (h[i].val_loss) ++vals;
    if (i > 0) {
      EXPECT_LT(h[i - 1].step, h[i].step);
    }
  }
  EXPECT_EQ(vals, 20) << "every validation point stays";
  // The recent steps are denser than the old ones.
  EXPECT_LT(h.back().step - h[h.size() - 2].step, h[2].step - h[1].step);

  // Only validation points left to drop: they all stay, past the limit.
  std::vector<LossPoint> v;
  for (int64_t s = 1; s <= 30; ++s) add_history_point(v, {s, 2.0, 1.0}, 10);
  EXPECT_EQ(v.size(), 30u);
}

TEST(TrainingLoop, NonFiniteStepStopsTheLoop) {
  Trainer tr(find_preset("tiny").model, small_run(10, 5));
  TrainingLoop loop(tr, {.last = 10, .eval_every = 5});
  StepResult r;
  r.step = 4;
  r.loss = NAN;
  EXPECT_FALSE(loop.record(r).has_value());
  ASSERT_TRUE(loop.divergence());
  EXPECT_EQ(loop.divergence()->message(), "training diverged at step 4: loss is NaN");
  r.loss = 2;
  r.grad_norm = -INFINITY;
  EXPECT_FALSE(loop.record(r).has_value());
  EXPECT_EQ(loop.divergence()->message(), "training diverged at step 4: gradient norm is -infinity");
  EXPECT_TRUE(tr.history().empty());
}

TEST(TrainingLoop, FitTrainsAsAPlainLoopAndRecordsTheRun) {
  const std::string text = test::synthetic_text(6000);
  Trainer a(find_preset("tiny").model, small_run(23, 10)), b(find_preset("tiny").model, small_run(23, 10));
  a.set_corpus(text, "text");
  b.set_corpus(text, "text");
  for (int i = 0; i < 23; ++i) b.train_step();

  TrainingLoop loop(a, TrainingLoop::options_from(a));
  std::vector<int64_t> stepped, evaluated, saved, ended;
  FitCallbacks cb;
  cb.on_step = [&](const StepReport& r) {
    stepped.push_back(r.result.step);
    if (r.validation) evaluated.push_back(r.result.step);
  };
  cb.on_save = [&](int64_t s) { saved.push_back(s); };
  cb.on_step_end = [&](const StepReport& r) { ended.push_back(r.result.step); };
  const FitResult res = loop.fit(cb);
  EXPECT_EQ(res.stop, FitResult::done);
  EXPECT_EQ(res.step, 23);
  EXPECT_EQ(stepped.size(), 23u);
  EXPECT_EQ(ended.size(), 23u);
  EXPECT_EQ(evaluated, (std::vector<int64_t>{10, 20, 23}));
  EXPECT_EQ(saved, (std::vector<int64_t>{10, 20, 23}));
  EXPECT_EQ(steps_of(a.history()), (std::vector<int64_t>{10, 20, 23}));
  for (const auto& p : a.history()) EXPECT_TRUE(p.val_loss);
  // Bitwise the weights and moments of the plain loop.
  for (const auto& t : a.state_tensors())
    EXPECT_EQ(std::memcmp(a.read_tensor(t.name), b.read_tensor(t.name), t.bytes()), 0) << t.name;

  // An interrupt: polled after the step, it saves that step and stops.
  Trainer c(find_preset("tiny").model, small_run(23, 10));
  c.set_corpus(text, "text");
  TrainingLoop stop(c, TrainingLoop::options_from(c));
  FitCallbacks cs;
  std::vector<int64_t> saves;
  cs.on_save = [&](int64_t s) { saves.push_back(s); };
  cs.stop_requested = [&] { return c.state().step == 3; };
  const FitResult r2 = stop.fit(cs);
  EXPECT_EQ(r2.stop, FitResult::interrupted);
  EXPECT_EQ(r2.step, 3);
  EXPECT_EQ(saves, (std::vector<int64_t>{3}));
  EXPECT_EQ(stop.saved_step(), 3);
}

}  // namespace
}  // namespace ptl
