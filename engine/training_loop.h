#pragma once
// The training loop, once for every caller: which events follow a step (evaluate, sample,
// save), the loss history's rules (which points it keeps, how it is thinned), divergence, and
// the blocking loop `fit` built on them.
//
// Three kinds of caller share these decisions:
// - the CLI (`ptl train`, `ptl lora train`, `ptl sft`) runs `fit` with callbacks;
// - the WebAssembly API cannot block for a whole run (the browser's worker yields to its message
//   loop between steps): it runs a step, `record`s it and acts on the events returned;
// - another executor (WebGPU) runs the step itself: the engine supplies the batch and the
//   learning rate (Trainer::next_train_batch, lr_at), and `record`s the loss reported afterwards.
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "engine/checkpoint.h"
#include "engine/trainer.h"

namespace ptl {

// --- The loss history (checkpoint metadata "loss_history") ---------------------------------------
//
// A point every kHistoryEvery-th step and at every validation. The whole run is kept, thinned:
// once it holds more than kHistoryMax points, every other point without a validation loss in the
// older half goes (so the recent steps stay dense and the curve still starts at the run's start);
// validation points always stay.
inline constexpr int64_t kHistoryEvery = 10;
inline constexpr size_t kHistoryMax = 1000;

// Whether step `step` gets a history point (validations add theirs through record_validation).
inline bool history_point_due(int64_t step) { return step % kHistoryEvery == 0; }
// Adds or updates the point of `p.step` (a validation loss already there stays unless `p` has
// one), then thins the history if it grew past `max_points`. Points are kept in step order; a
// point for a step before the last one replaces the history from that step on (a run resumed
// from an earlier checkpoint).
void add_history_point(std::vector<LossPoint>& history, const LossPoint& p, size_t max_points = kHistoryMax);
// Drops every other point without a validation loss from the older half until at most
// `max_points` remain (or only validation points are left to drop).
void thin_history(std::vector<LossPoint>& history, size_t max_points = kHistoryMax);

// --- What follows a step ---------------------------------------------------------------------

struct LoopOptions {
  int64_t last = 0;            // the step the run stops after (the config's steps, or an earlier --until)
  int64_t eval_every = 0;      // validate every N steps (0: only at the last step) ...
  bool has_val = true;         // ... when there is validation data
  int64_t sample_every = 0;    // a text sample every N steps (0: never)
  bool sample_at_end = false;  // and one at the last step
  int64_t save_every = 0;      // a save every N steps besides those after validations (0: none)
};

struct StepEvents {
  bool evaluate = false;  // validate now (and record it: TrainingLoop::record_validation)
  bool sample = false;    // generate a text sample now
  bool save = false;      // save now: after a validation, at the last step, every save_every steps
  bool last = false;      // the run's last step
};

// A non-finite loss or gradient norm.
struct Divergence {
  int64_t step = 0;
  std::string what;  // "loss" or "gradient norm"
  double value = 0;  // NaN or an infinity
  // "training diverged at step N: loss is NaN"
  std::string message() const;
};

// What a blocking run reports per step.
struct StepReport {
  const StepResult& result;
  double elapsed_seconds = 0;            // the run's elapsed time after the step (before validation)
  std::optional<EvalResult> validation;  // when the step was followed by a validation
  StepEvents events;
};

struct FitCallbacks {
  std::function<void(const StepReport&)> on_step;      // after the step and its validation
  std::function<void(int64_t step)> on_sample;         // events.sample
  std::function<void(int64_t step)> on_save;           // events.save, or an interrupt
  std::function<void(const StepReport&)> on_step_end;  // after the save, before the next step
  std::function<bool()> stop_requested;                // polled once per step, before the save decision
};

struct FitResult {
  enum Stop { done, interrupted, diverged } stop = done;
  int64_t step = 0;  // the last step trained (for divergence: the one that diverged)
  std::optional<Divergence> divergence;
};

class TrainingLoop {
 public:
  TrainingLoop(Trainer& trainer, LoopOptions options);
  // Options from the trainer's train config: last = steps, eval_every, sample_every, has_val from
  // its data (corpus or SFT examples).
  static LoopOptions options_from(Trainer& trainer);

  const LoopOptions& options() const { return opt_; }
  void set_options(const LoopOptions& options) { opt_ = options; }
  int64_t step() const;  // the trainer's step count
  bool done() const { return step() >= opt_.last; }

  // The events after step `step` (1-based), whatever ran it.
  StepEvents events_after(int64_t step) const;
  // Counts a step that has run (here or on another executor): adds its time to the run's
  // elapsed time, adds its history point when one is due, and checks it for divergence (then
  // returns nullopt and divergence() says what happened; nothing is recorded). Steps are
  // recorded in order.
  std::optional<StepEvents> record(const StepResult& r);
  // A validation after step `step` (the trainer's step when not given): its history point,
  // carrying the train loss of the last recorded step.
  void record_validation(const EvalResult& v, std::optional<int64_t> step = std::nullopt);
  // Validates on the trainer's validation data, adds the time to the run's elapsed time and
  // records it.
  EvalResult evaluate();
  // A save of step `step` is done (named in divergence messages).
  void record_save(int64_t step) { saved_step_ = step; }
  std::optional<int64_t> saved_step() const { return saved_step_; }
  void set_saved_step(std::optional<int64_t> step) { saved_step_ = step; }
  const std::optional<Divergence>& divergence() const { return divergence_; }

  // Runs steps on the trainer's CPU executor until the last step, an interrupt or divergence.
  FitResult fit(const FitCallbacks& cb);

 private:
  Trainer& trainer_;
  LoopOptions opt_;
  double last_loss_ = 0;
  int64_t last_step_ = -1;  // the step of last_loss_
  std::optional<int64_t> saved_step_;
  std::optional<Divergence> divergence_;
};

}  // namespace ptl
