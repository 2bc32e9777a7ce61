#include "engine/training_loop.h"

#include <algorithm>
#include <chrono>
#include <cmath>

#include "engine/trainer.h"

namespace ptl {

void thin_history(std::vector<LossPoint>& history, size_t max_points) {
  while (history.size() > max_points) {
    // The older half: every second point without a validation loss goes (the first stays, so
    // the curve keeps its start).
    const size_t older = history.size() / 2;
    std::vector<LossPoint> kept;
    kept.reserve(history.size());
    size_t plain = 0;  // points without a validation loss seen so far in the older half
    for (size_t i = 0; i < history.size(); ++i) {
      const bool drop = i < older && !history[i].val_loss && plain++ % 2 == 1;
      if (!drop) kept.push_back(history[i]);
    }
    if (kept.size() == history.size()) return;  // only validation points left to drop
    history = std::move(kept);
  }
}

void add_history_point(std::vector<LossPoint>& history, const LossPoint& p, size_t max_points) {
  if (!history.empty() && history.back().step > p.step) {
    // An earlier step than the history's last: the run went back (reopened from an earlier
    // checkpoint); its later points are of another timeline.
    history.erase(std::lower_bound(history.begin(), history.end(), p.step,
                                   [](const LossPoint& a, int64_t s) { return a.step < s; }),
                  history.end());
  }
  if (!history.empty() && history.back().step == p.step) {
    LossPoint& q = history.back();
    q.train_loss = p.train_loss;
    if (p.val_loss) q.val_loss = p.val_loss;
  } else {
    history.push_back(p);
  }
  thin_history(history, max_points);
}

std::string Divergence::message() const {
  const std::string v = std::isnan(value) ? "NaN" : value > 0 ? "+infinity" : "-infinity";
  return "training diverged at step " + std::to_string(step) + ": " + what + " is " + v;
}

TrainingLoop::TrainingLoop(Trainer& trainer, LoopOptions options) : trainer_(trainer), opt_(options) {}

LoopOptions TrainingLoop::options_from(Trainer& t) {
  const TrainConfig& tc = t.train_config();
  LoopOptions o;
  o.last = tc.steps;
  o.eval_every = tc.eval_every;
  o.sample_every = tc.sample_every;
  o.has_val = t.has_sft_data() ? t.sft_data().has_val() : t.has_corpus() && t.corpus().has_val();
  return o;
}

int64_t TrainingLoop::step() const { return trainer_.state().step; }

StepEvents TrainingLoop::events_after(int64_t step) const {
  StepEvents e;
  e.last = step == opt_.last;
  e.evaluate = opt_.has_val && ((opt_.eval_every > 0 && step % opt_.eval_every == 0) || e.last);
  e.sample = opt_.sample_every > 0 && (step % opt_.sample_every == 0 || (opt_.sample_at_end && e.last));
  e.save = e.evaluate || e.last || (opt_.save_every > 0 && step % opt_.save_every == 0);
  return e;
}

std::optional<StepEvents> TrainingLoop::record(const StepResult& r) {
  trainer_.add_elapsed(r.seconds);
  if (!std::isfinite(r.loss) || !std::isfinite(r.grad_norm)) {
    const bool loss = !std::isfinite(r.loss);
    divergence_ = Divergence{r.step, loss ? "loss" : "gradient norm", loss ? r.loss : r.grad_norm};
    return std::nullopt;
  }
  last_loss_ = r.loss;
  last_step_ = r.step;
  if (history_point_due(r.step)) add_history_point(trainer_.history(), {r.step, r.loss, std::nullopt});
  return events_after(r.step);
}

void TrainingLoop::record_validation(const EvalResult& v, std::optional<int64_t> at) {
  const int64_t step = at.value_or(trainer_.state().step);
  auto& h = trainer_.history();
  if (step <= 0) return;  // the untrained model: no point on the curve
  if (last_step_ == step)
    add_history_point(h, {step, last_loss_, v.loss});
  else if (!h.empty() && h.back().step == step)
    h.back().val_loss = v.loss;
  // Otherwise the step's train loss is unknown (it was not recorded here): no point.
}

EvalResult TrainingLoop::evaluate() {
  const auto t0 = std::chrono::steady_clock::now();
  EvalResult v = trainer_.validation_loss();
  trainer_.add_elapsed(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  record_validation(v);
  return v;
}

FitResult TrainingLoop::fit(const FitCallbacks& cb) {
  FitResult out;
  out.step = step();
  while (step() < opt_.last) {
    const StepResult r = trainer_.train_step();
    const std::optional<StepEvents> ev = record(r);
    out.step = r.step;
    if (!ev) {
      out.stop = FitResult::diverged;
      out.divergence = divergence_;
      return out;
    }
    StepReport rep{r, trainer_.state().elapsed_seconds, std::nullopt, *ev};
    if (ev->evaluate) rep.validation = evaluate();
    if (cb.on_step) cb.on_step(rep);
    if (ev->sample && cb.on_sample) cb.on_sample(r.step);
    const bool stop = cb.stop_requested && cb.stop_requested();
    if (ev->save || stop) {
      if (cb.on_save) cb.on_save(r.step);
      record_save(r.step);
    }
    if (cb.on_step_end) cb.on_step_end(rep);
    if (stop) {
      out.stop = FitResult::interrupted;
      return out;
    }
  }
  return out;
}

}  // namespace ptl
