// The learning-rate schedule when a run resumes with a different length (continue_schedule):
// the rate continues from where it was, the cosine stretched to the new last step.
#include <gtest/gtest.h>

#include <cmath>

#include "engine/config.h"
#include "engine/trainer.h"
#include "test_util.h"

using namespace ptl;
using namespace ptl::test;

namespace {

TrainConfig cosine(int64_t steps) {
  TrainConfig c;
  c.steps = steps;
  c.lr = 1e-3;
  return c;
}

std::vector<double> lrs(const std::string& metrics_path) {
  std::vector<double> out;
  std::ifstream f(metrics_path);
  for (std::string line; std::getline(f, line);) out.push_back(nlohmann::json::parse(line)["lr"].get<double>());
  return out;
}

}  // namespace

TEST(Schedule, MoreStepsAfterTheEndStayAtTheMinimum) {
  const TrainConfig before = cosine(300);
  TrainConfig after = before;
  after.steps = 600;
  after = continue_schedule(before, after, 300);
  EXPECT_EQ(after.decay_from_step, 300);
  EXPECT_DOUBLE_EQ(after.decay_from_lr, before.lr_at(300));
  EXPECT_NEAR(after.lr_at(300), 1e-4, 1e-12);  // not back to the 1e-3 peak
  for (int64_t s = 300; s < 600; ++s) EXPECT_NEAR(after.lr_at(s), 1e-4, 1e-12) << s;
}

TEST(Schedule, MoreStepsMidRunStretchTheCosineFromTheRateReached) {
  const TrainConfig before = cosine(300);
  TrainConfig after = before;
  after.steps = 1000;
  after = continue_schedule(before, after, 150);
  EXPECT_EQ(after.warmup, 30) << "the automatic warm-up of 300 steps is kept";
  // Continuous at the resume point, decreasing after it, the minimum at the new end.
  EXPECT_DOUBLE_EQ(after.lr_at(150), before.lr_at(150));
  EXPECT_LT(std::abs(after.lr_at(151) - before.lr_at(149)), 2 * std::abs(before.lr_at(150) - before.lr_at(149)));
  for (int64_t s = 151; s < 1000; ++s) EXPECT_LE(after.lr_at(s), after.lr_at(s - 1)) << s;
  EXPECT_NEAR(after.lr_at(1000), 1e-4, 1e-12);
  EXPECT_GT(after.lr_at(999), 1e-4);
  // The half-way point of the stretched cosine is the mean of the rate reached and the minimum.
  EXPECT_NEAR(after.lr_at(575), 0.5 * (before.lr_at(150) + 1e-4), 1e-12);
  // A second extension continues from the first one's curve.
  TrainConfig again = after;
  again.steps = 2000;
  again = continue_schedule(after, again, 800);
  EXPECT_DOUBLE_EQ(again.lr_at(800), after.lr_at(800));
  EXPECT_NEAR(again.lr_at(2000), 1e-4, 1e-12);
}

TEST(Schedule, UnchangedStepsDuringWarmUpAndNewRatesKeepTheirOwnRules) {
  const TrainConfig before = cosine(300);
  // The same length: nothing changes (a resume of an interrupted run is an uninterrupted run).
  TrainConfig same = continue_schedule(before, before, 100);
  EXPECT_EQ(same.decay_from_step, -1);
  for (int64_t s = 0; s < 300; ++s) EXPECT_EQ(same.lr_at(s), before.lr_at(s));
  // Still warming up: the warm-up continues to the peak, then the cosine spans the new length.
  TrainConfig warm = before;
  warm.steps = 1000;
  warm = continue_schedule(before, warm, 10);
  EXPECT_EQ(warm.decay_from_step, -1);
  EXPECT_EQ(warm.warmup, 30);
  EXPECT_DOUBLE_EQ(warm.lr_at(10), before.lr_at(10));
  EXPECT_DOUBLE_EQ(warm.lr_at(29), 1e-3);
  EXPECT_NEAR(warm.lr_at(1000), 1e-4, 1e-12);
  // A new peak rate applies as given.
  TrainConfig faster = before;
  faster.steps = 600;
  faster.lr = 2e-3;
  faster = continue_schedule(before, faster, 300);
  EXPECT_EQ(faster.decay_from_step, -1);
  // It is recorded in the config (and so in checkpoints) and read back.
  TrainConfig stretched = before;
  stretched.steps = 600;
  stretched = continue_schedule(before, stretched, 200);
  const TrainConfig back = TrainConfig::from_json(nlohmann::json::parse(stretched.to_json().dump()));
  EXPECT_EQ(back.decay_from_step, 200);
  EXPECT_EQ(back.decay_from_lr, stretched.decay_from_lr);
  EXPECT_EQ(back.lr_at(400), stretched.lr_at(400));
}

// `ptl train --resume ... --steps N` after a finished run: the rate goes on from the minimum
// instead of jumping back to the peak, and the checkpoint records where the stretch began.
TEST(Schedule, CliResumeWithMoreStepsContinuesTheRate) {
  TempDir d;
  write(d.file("t.txt"), synthetic_text(20000));
  ASSERT_EQ(ptl_cli("train --preset tiny --sample-every 0 --data t.txt --steps 40 --lr 1e-3 --out run", d).code, 0);
  CliRun r = ptl_cli("train --resume run/model.tinygpt --steps 80", d);
  ASSERT_EQ(r.code, 0) << r.err;
  const std::vector<double> lr = lrs(d.file("run/metrics.jsonl"));
  ASSERT_EQ(lr.size(), 80u);
  EXPECT_NEAR(lr[39], 1e-4, 2e-6) << "step 40: near the end of the first plan";
  for (size_t i = 40; i < 80; ++i) EXPECT_NEAR(lr[i], 1e-4, 1e-12) << "step " << i + 1;
  auto ck = Trainer::from_checkpoint(read_file_bytes(d.file("run/model.tinygpt")), "ck");
  EXPECT_EQ(ck->train_config().decay_from_step, 40);
  EXPECT_EQ(ck->train_config().steps, 80);
  // Mid-run: stop at 20 of 40, resume planning 80: continuous, then down to the minimum at 80.
  ASSERT_EQ(
      ptl_cli("train --preset tiny --sample-every 0 --data t.txt --steps 40 --lr 1e-3 --until 20 --out mid", d).code,
      0);
  ASSERT_EQ(ptl_cli("train --resume mid/model.tinygpt --steps 80", d).code, 0);
  const std::vector<double> m = lrs(d.file("mid/metrics.jsonl"));
  ASSERT_EQ(m.size(), 80u);
  TrainConfig plan = cosine(40);
  EXPECT_DOUBLE_EQ(m[20], plan.lr_at(20)) << "step 21: the rate the 40-step plan had there";
  for (size_t i = 21; i < 80; ++i) EXPECT_LE(m[i], m[i - 1]) << "step " << i + 1;
  EXPECT_GT(m[79], 1e-4);
  EXPECT_LT(m[79], 1.01e-4);
}
