// The WebAssembly C API: a thin, exception-free layer over ptl::Trainer for JavaScript.
//
// Conventions (docs/wasm.md, "C API"):
// - A trainer is an integer handle (> 0). ptl_create* return 0 on failure.
// - Functions returning int give 0 (or a handle / token) on success and a negative value on failure.
// - Functions returning const char* give a JSON string, or NULL on failure. The string lives until
//   the next API call that returns a string or bytes.
// - Byte results (checkpoints, batches, inspections, safetensors) are returned as a pointer;
//   ptl_result_size() gives their length.
//   They live until the next API call that returns a string or bytes.
// - Sizes are passed as double, not size_t: a double holds any size up to 2^53 and stays a plain
//   JavaScript number in the Memory64 build too (where size_t would be a BigInt).
// - On failure, ptl_last_error() returns the engine's message (ptl::Error, std::exception).
//   A failed call leaves the trainer as it was (the engine validates before changing state).
//
// Training runs through the engine's loop (engine/training_loop.h), one step per call so that the
// browser's worker can yield between steps; the engine decides what follows each step and keeps
// the loss history (a point every 10th step and at each validation, the whole run thinned):
// - On this CPU engine: ptl_train(h, 1) returns the step's metrics with "events" {"evaluate",
//   "sample", "save", "last"}; the caller acts on them (ptl_validation_loss records the
//   validation in the history; ptl_generate; ptl_export_checkpoint).
// - On another executor (WebGPU): ptl_next_batch gives the step's batch (the learning rate is
//   ptl_lr_at(h, step - 1); with dropout, the program's "dropout.seed" is {ptl_dropout_key(h),
//   step}); ptl_events_after(h, step) says what follows that step before its loss
//   is known; when the loss arrives, ptl_record_step(h, {"step", "loss", "grad_norm",
//   "seconds"}) records it (history, elapsed time, divergence). Before the engine reads the
//   weights (validation, samples, saving), the executor writes them back tensor by tensor:
//   ptl_tensor_names(h) lists the state (parameters, adapters, AdamW moments), ptl_write_tensor
//   sets one, ptl_read_tensor reads one; ptl_set_step sets the step count.
// - ptl_loop_options(h, {"sample_at_end", "save_every"}) adds a sample at the last step and a save
//   every N steps to the events (validation and sampling intervals are the train config's).
#include <emscripten/emscripten.h>
#include <emscripten/heap.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <map>
#include <memory>
#include <new>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "engine/backends/cpu/kernels.h"
#include "engine/backends/cpu/thread_pool.h"
#include "engine/bpe_trainer.h"
#include "engine/dropout.h"
#include "engine/error.h"
#include "engine/hf_gpt2.h"
#include "engine/peft.h"
#include "engine/program_run.h"
#include "engine/tokenizer_files.h"
#include "engine/trainer.h"
#include "engine/training_loop.h"

#ifndef PTL_WASM_VARIANT_NAME
#define PTL_WASM_VARIANT_NAME "unknown"
#endif

using nlohmann::json;
using ptl::json_int;  // every integer from JavaScript is range-checked (engine/config.h)

namespace {

constexpr int64_t kIntMin = std::numeric_limits<int>::min(), kIntMax = std::numeric_limits<int>::max();
constexpr int64_t kInt64Min = std::numeric_limits<int64_t>::min(), kInt64Max = std::numeric_limits<int64_t>::max();

// Polling generation (ptl_generate_start / ptl_generate_next) through Trainer::begin_generation
// and Trainer::next_token; ptl_generate streams the same tokens through a callback.
struct Generation {
  int remaining = 0;
};

struct Session {
  std::unique_ptr<ptl::Trainer> trainer;
  std::unique_ptr<Generation> gen;
  std::unique_ptr<ptl::TrainingLoop> loop;  // made on first use; dropped when the run changes
  bool sample_at_end = false;               // ptl_loop_options
  int64_t save_every = 0;
  int64_t recorded = -1;  // the last step ptl_record_step recorded
};

std::map<int, Session> g_sessions;
int g_next_handle = 1;
std::string g_error;
// Tokenizers have handles of their own (ptl_tokenizer_*), independent of the trainers'.
std::map<int, ptl::Tokenizer> g_tokenizers;
int g_next_tokenizer = 1;

ptl::Tokenizer& tokenizer(int h) {
  auto it = g_tokenizers.find(h);
  ptl::check(it != g_tokenizers.end(), "invalid tokenizer handle " + std::to_string(h) + " (never created, or freed)");
  return it->second;
}

int add_tokenizer(ptl::Tokenizer t) {
  const int h = g_next_tokenizer++;
  g_tokenizers.emplace(h, std::move(t));
  return h;
}

// The files of a Hugging Face folder being handed over (ptl_folder_file), for ptl_create_from_hf.
std::map<std::string, std::vector<uint8_t>> g_folder;

std::string g_text;            // the last string result
std::vector<uint8_t> g_bytes;  // the last byte result

template <class F>
auto guarded(F&& f, decltype(f()) on_error) -> decltype(f()) {
  try {
    return f();
  } catch (const ptl::Error& e) {
    g_error = e.what();
  } catch (const json::exception& e) {
    g_error = std::string("invalid JSON: ") + e.what();
  } catch (const std::bad_alloc&) {
    g_error =
        "out of memory (the WebAssembly heap could not grow; try a smaller model or batch, or the Memory64 build)";
  } catch (const std::exception& e) {
    g_error = e.what();
  } catch (...) {
    g_error = "unknown error";
  }
  return on_error;
}

Session& session(int h) {
  auto it = g_sessions.find(h);
  ptl::check(it != g_sessions.end(), "invalid trainer handle " + std::to_string(h) + " (never created, or freed)");
  return it->second;
}

// The session's training loop, its options read afresh from the train config (which
// ptl_update_train_config may change between calls).
ptl::TrainingLoop& loop(Session& s) {
  if (!s.loop) s.loop = std::make_unique<ptl::TrainingLoop>(*s.trainer, ptl::TrainingLoop::options_from(*s.trainer));
  ptl::LoopOptions o = ptl::TrainingLoop::options_from(*s.trainer);
  o.sample_at_end = s.sample_at_end;
  o.save_every = s.save_every;
  s.loop->set_options(o);
  return *s.loop;
}

// A new run or new state (checkpoint loaded, fine-tuning started): the loop starts afresh.
void reset_loop(Session& s) {
  s.loop.reset();
  s.recorded = -1;
}

const char* text_result(std::string s) {
  g_text = std::move(s);
  return g_text.c_str();
}

size_t size_arg(double n) {
  // Up to 2^53, JavaScript's exact integers: converting a larger double (1e308) to size_t is
  // undefined behaviour.
  ptl::check(std::isfinite(n) && n >= 0 && n <= 0x1p53 && n == std::floor(n), "invalid byte count");
  return size_t(n);
}

// A step number from JavaScript: an integer from `first` (0 or 1) to 2^53.
int64_t step_arg(double step, int first) {
  ptl::check(std::isfinite(step) && step >= first && step <= 0x1p53 && step == std::floor(step),
             first ? "step must be a positive integer" : "step must be a non-negative integer");
  return int64_t(step);
}

std::string bytes_arg(const uint8_t* p, double n) {
  const size_t len = size_arg(n);
  ptl::check(p != nullptr || len == 0, "null data pointer");
  return std::string(reinterpret_cast<const char*>(p), len);
}

// Rejects keys a config does not know (a typo would otherwise be silently ignored).
void only_keys(const json& j, const json& known, const std::string& what) {
  ptl::check(j.is_object(), what + ": expected a JSON object");
  for (auto it = j.begin(); it != j.end(); ++it)
    ptl::check(known.contains(it.key()), what + ": unknown key '" + it.key() + "'");
}

// { "preset": "small", "model": { ...overrides... }, "train": { ...overrides... },
//   "tokenizer": "<tokenizer.json text>" }
// With "tokenizer" the model reads its tokens (as `ptl train --tokenizer`): the vocabulary is the
// tokenizer's, and a "model.vocab_size" that differs is an error. Without it the model reads bytes.
std::unique_ptr<ptl::Trainer> trainer_from_config(const std::string& text) {
  json j = text.empty() ? json::object() : json::parse(text);
  only_keys(j, json{{"preset", 0}, {"model", 0}, {"train", 0}, {"tokenizer", 0}}, "config");
  const std::string preset_name = j.value("preset", std::string("small"));
  const ptl::Preset& preset = ptl::find_preset(preset_name);
  json model = preset.model.to_json();
  // to_json leaves out the default GELU (checkpoints keep their bytes), but a config may name it.
  model["gelu"] = preset.model.gelu;
  if (j.contains("model")) {
    only_keys(j["model"], model, "model config");
    for (auto it = j["model"].begin(); it != j["model"].end(); ++it) model[it.key()] = it.value();
  }
  std::optional<ptl::ModelTokenizer> tok;
  if (j.contains("tokenizer")) {
    ptl::check(j["tokenizer"].is_string(), "config: 'tokenizer' must be the text of a tokenizer.json");
    tok = ptl::ModelTokenizer::of(ptl::tokenizer_from_json(j["tokenizer"].get<std::string>(), "config tokenizer"));
    if (j.contains("model") && j["model"].contains("vocab_size"))
      ptl::check(j["model"]["vocab_size"] == json(tok->vocab_size()),
                 "config: model.vocab_size " + j["model"]["vocab_size"].dump() + " differs from the tokenizer's " +
                     std::to_string(tok->vocab_size()) + " tokens (leave it out: the tokenizer sets it)");
    model["vocab_size"] = tok->vocab_size();
  }
  ptl::ModelConfig mc = ptl::ModelConfig::from_json(model);  // validates
  ptl::TrainConfig base;
  base.batch = preset.batch;
  base.lr = preset.lr;  // as `ptl train`: the preset's learning rate unless the config gives one
  json train = base.to_json();
  if (j.contains("train")) {
    only_keys(j["train"], train, "train config");
    for (auto it = j["train"].begin(); it != j["train"].end(); ++it) train[it.key()] = it.value();
  }
  ptl::TrainConfig tc = ptl::TrainConfig::from_json(train);  // validates
  auto trainer = std::make_unique<ptl::Trainer>(mc, tc);
  if (tok) trainer->set_tokenizer(*tok);
  return trainer;
}

// Heap reservation: grow the heap now (on the calling thread, before any kernel runs) to what
// the model's programs need, so that it does not grow while worker threads compute.
size_t round64(int64_t b) { return (size_t(b) + 63) / 64 * 64; }
size_t program_need(const ptl::Program& p, const ptl::cpu::TensorStore& store) {
  size_t n = 0;
  for (const auto& t : p.tensors)
    if (!t.persistent() || !store.find(t.name)) n += round64(t.bytes());
  return n;
}
// The program's linear weights packed as generation keeps them (TensorStore::packed_linear_weight).
size_t packed_need(const ptl::Program& p) {
  size_t n = 0;
  for (const auto& op : p.ops)
    if (op.kind == ptl::OpKind::linear) {
      const auto& w = p.tensor(op.inputs[1]).shape;
      n += round64(int64_t(ptl::cpu::linear_packed_floats(w[0], w[1]) * sizeof(float)));
    }
  return n;
}
void reserve_heap(ptl::Trainer& t) {
  const auto& mc = t.model_config();
  ptl::BuildOptions opt;
  opt.batch = t.train_config().batch;
  size_t need = program_need(ptl::build_train_program(mc, opt, t.train_config()), t.store());
  need += program_need(ptl::build_eval_program(mc, opt), t.store());
  const ptl::Program generate = ptl::build_generate_program(mc);
  need += program_need(generate, t.store()) + packed_need(generate);
  // Inspection at the full context: its arena holds every layer's [H, T, T] maps (results, so
  // they never share memory), and ptl_inspect copies them twice more (Trainer::inspect's result,
  // then the returned bytes).
  need += program_need(ptl::build_inspect_program(mc, mc.ctx), t.store());
  need += 2 * round64(int64_t(mc.n_layers) * mc.n_heads * mc.ctx * mc.ctx * 4);
  need += need / 4 + (32u << 20);  // allocator slack and kernels' scratch
  const uintptr_t brk = reinterpret_cast<uintptr_t>(sbrk(0));
  const size_t max = emscripten_get_heap_max();
  size_t want = brk + need < brk ? max : std::min<size_t>(brk + need, max);
  if (want > emscripten_get_heap_size()) emscripten_resize_heap(want);  // best effort
}

json step_json(const ptl::StepResult& r, const ptl::Trainer& t) {
  return {{"step", r.step},
          {"loss", r.loss},
          {"lr", r.lr},
          {"grad_norm", r.grad_norm},
          {"tokens", r.tokens},
          {"seconds", r.seconds},
          {"tokens_per_s", r.seconds > 0 ? r.tokens / r.seconds : 0.0},
          {"elapsed_s", t.state().elapsed_seconds}};
}

json events_json(const ptl::StepEvents& e) {
  return {{"evaluate", e.evaluate}, {"sample", e.sample}, {"save", e.save}, {"last", e.last}};
}

std::string divergence_message(const ptl::Divergence& d) { return d.message() + " (try a lower learning rate)"; }

json eval_json(const ptl::EvalResult& r) {
  return {{"loss", r.loss},
          {"tokens", r.tokens},
          {"bytes", std::llround(r.bytes)},
          {"perplexity", r.perplexity()},
          {"bits_per_byte", r.bits_per_byte()}};
}

ptl::SamplingOptions sampling_from(const char* options_json, int* max_tokens) {
  json j = options_json && *options_json ? json::parse(options_json) : json::object();
  only_keys(j, json{{"max_tokens", 0}, {"temperature", 0}, {"top_k", 0}, {"top_p", 0}, {"seed", 0}},
            "generation options");
  ptl::SamplingOptions o;
  o.temperature = j.value("temperature", o.temperature);
  if (j.contains("top_k")) o.top_k = int(json_int(j["top_k"], 0, kIntMax, "generation options: 'top_k'"));
  o.top_p = j.value("top_p", o.top_p);
  if (j.contains("seed")) o.seed = ptl::json_u64(j["seed"], "generation options: 'seed'");
  *max_tokens = j.contains("max_tokens") ? int(json_int(j["max_tokens"], kIntMin, kIntMax, "max tokens")) : 200;
  ptl::check(*max_tokens >= 0, "max tokens must not be negative");
  return o;
}

// A prompt (any bytes) in the model's tokenizer.
std::vector<int32_t> prompt_tokens(const ptl::Trainer& t, const uint8_t* p, double n) {
  return t.encode(bytes_arg(p, n));
}

// {"type", "vocab_size", "sha256" (BPE), "merges", "specials": [{"text", "id"}]}
json tokenizer_json(const ptl::Tokenizer& t) {
  json specials = json::array();
  for (const auto& sp : t.specials()) specials.push_back({{"text", sp.text}, {"id", sp.id}});
  return {{"type", t.type()}, {"vocab_size", t.vocab_size()}, {"merges", t.merge_count()}, {"specials", specials}};
}

// An id list for the C API's results: int32 little-endian in g_bytes.
const uint8_t* ids_result(const std::vector<int32_t>& ids) {
  g_bytes.reserve(1);  // no ids is a valid result: the pointer must still not be NULL
  g_bytes.resize(ids.size() * sizeof(int32_t));
  if (!ids.empty()) std::memcpy(g_bytes.data(), ids.data(), g_bytes.size());
  return g_bytes.data();
}

// Bytes for the C API's results, in g_bytes.
const uint8_t* bytes_result(const std::string& bytes) {
  g_bytes.reserve(1);  // an empty text is a valid result: the pointer must still not be NULL
  g_bytes.assign(bytes.begin(), bytes.end());
  return g_bytes.data();
}

// Binary results with a JSON header (ptl_inspect): the safetensors framing, u64 little-endian
// header length, the header padded with spaces to a multiple of 8 bytes, then the raw
// little-endian data, so the data starts 8-byte aligned and JavaScript can view it in place.
std::vector<uint8_t> framed(const json& header, const void* data, size_t data_bytes) {
  std::string h = header.dump();
  h.resize((h.size() + 7) / 8 * 8, ' ');
  std::vector<uint8_t> out(8 + h.size() + data_bytes);
  const uint64_t n = h.size();
  for (int i = 0; i < 8; ++i) out[i] = uint8_t(n >> (8 * i));
  std::memcpy(out.data() + 8, h.data(), h.size());
  if (data_bytes) std::memcpy(out.data() + 8 + h.size(), data, data_bytes);
  return out;
}

// Several files as one result (ptl_export_peft, ptl_export_hf): framed as ptl_inspect's, the
// header {"files": [{"name", "size"}, ...]}, then the files' bytes one after another in that order.
const uint8_t* files_result(const ptl::NamedFiles& files) {
  json list = json::array();
  size_t total = 0;
  for (const auto& [name, bytes] : files) {
    list.push_back({{"name", name}, {"size", bytes.size()}});
    total += bytes.size();
  }
  std::vector<uint8_t> data;
  data.reserve(total);
  for (const auto& f : files) data.insert(data.end(), f.second.begin(), f.second.end());
  g_bytes.clear();
  g_bytes.shrink_to_fit();
  g_bytes = framed({{"files", list}}, data.data(), data.size());
  return g_bytes.data();
}

}  // namespace

extern "C" {

EMSCRIPTEN_KEEPALIVE const char* ptl_last_error() { return g_error.c_str(); }

// {"version", "variant", "simd", "threads", "memory64", "heap_bytes", "heap_max_bytes"}
EMSCRIPTEN_KEEPALIVE const char* ptl_build_info() {
  json j = {{"version", ptl::kVersionString},
            {"variant", PTL_WASM_VARIANT_NAME},
#ifdef __wasm_simd128__
            {"simd", true},
#else
            {"simd", false},
#endif
#ifdef __EMSCRIPTEN_PTHREADS__
            {"threads", true},
#else
            {"threads", false},
#endif
            {"memory64", sizeof(void*) == 8},
            {"num_threads", ptl::cpu::num_threads()},
            {"heap_bytes", double(emscripten_get_heap_size())},
            {"heap_max_bytes", double(emscripten_get_heap_max())}};
  return text_result(j.dump());
}

// Threads the kernels use (the caller included): a threaded build needs n - 1 pthread pool
// workers (Module.ptlPoolSize). n <= 0 restores the default (hardware concurrency). Returns the
// count in effect, or -1 on error. Not to be called while the engine is computing.
EMSCRIPTEN_KEEPALIVE int ptl_set_num_threads(int n) {
  return guarded(
      [&] {
        ptl::cpu::set_num_threads(n);
        return ptl::cpu::num_threads();
      },
      -1);
}

// A fresh model from a JSON config (see trainer_from_config). Returns a handle, 0 on error.
EMSCRIPTEN_KEEPALIVE int ptl_create(const char* config_json) {
  return guarded(
      [&] {
        auto t = trainer_from_config(config_json ? config_json : "");
        reserve_heap(*t);
        const int h = g_next_handle++;
        g_sessions[h].trainer = std::move(t);
        return h;
      },
      0);
}

// A model from checkpoint bytes (the native .tinygpt format). Returns a handle, 0 on error.
EMSCRIPTEN_KEEPALIVE int ptl_create_from_checkpoint(const uint8_t* bytes, double n, const char* name) {
  return guarded(
      [&] {
        const size_t len = size_arg(n);
        ptl::check(bytes != nullptr || len == 0, "null data pointer");
        auto t = ptl::Trainer::from_checkpoint(std::vector<uint8_t>(bytes, bytes + len),
                                               name && *name ? name : "checkpoint");
        reserve_heap(*t);
        const int h = g_next_handle++;
        g_sessions[h].trainer = std::move(t);
        return h;
      },
      0);
}

// Replaces a trainer's whole state with a checkpoint's; on error the trainer is unchanged.
EMSCRIPTEN_KEEPALIVE int ptl_load_checkpoint(int h, const uint8_t* bytes, double n, const char* name) {
  return guarded(
      [&] {
        Session& s = session(h);
        const size_t len = size_arg(n);
        ptl::check(bytes != nullptr || len == 0, "null data pointer");
        s.trainer->load_checkpoint(std::vector<uint8_t>(bytes, bytes + len), name && *name ? name : "checkpoint");
        s.gen.reset();
        reset_loop(s);
        reserve_heap(*s.trainer);
        return 0;
      },
      -1);
}

EMSCRIPTEN_KEEPALIVE int ptl_free(int h) {
  return guarded(
      [&] {
        session(h);
        g_sessions.erase(h);
        return 0;
      },
      -1);
}

// Updates the schedule of the training config, e.g. {"steps": 3000} to continue a run past
// its planned end, or {"lr": 1e-4}. Only fields read afresh each step may change: steps, lr,
// schedule, warmup, min_lr_frac, eval_every, eval_batches, sample_every. The others (batch,
// seed, AdamW hyper-parameters, grad_clip) are built into the training program.
EMSCRIPTEN_KEEPALIVE int ptl_update_train_config(int h, const char* json_text) {
  return guarded(
      [&] {
        Session& s = session(h);
        ptl::TrainConfig& tc = s.trainer->train_config();
        json cur = tc.to_json();
        json j = json::parse(json_text ? json_text : "{}");
        only_keys(j, cur, "train config");
        // data_path only names the data (the page passes a file's name): checkpoints and adapters record it.
        const std::set<std::string> mutable_keys = {"steps",        "lr",           "schedule",
                                                    "warmup",       "min_lr_frac",  "eval_every",
                                                    "eval_batches", "sample_every", "data_path"};
        for (auto it = j.begin(); it != j.end(); ++it) {
          ptl::check(mutable_keys.count(it.key()) || it.value() == cur[it.key()],
                     "train config: '" + it.key() +
                         "' cannot change on an existing trainer (it is built into the training program)");
          cur[it.key()] = it.value();
        }
        // validates before anything changes; a new length continues the rate reached (docs/model.md)
        tc = ptl::continue_schedule(tc, ptl::TrainConfig::from_json(cur), s.trainer->state().step);
        return 0;
      },
      -1);
}

// The corpus (raw bytes), split (1 - val_fraction) / val_fraction by bytes, each side in the
// model's tokenizer (bytes for a byte-level model).
EMSCRIPTEN_KEEPALIVE int ptl_set_corpus(int h, const uint8_t* bytes, double n, double val_fraction) {
  return guarded(
      [&] {
        Session& s = session(h);
        ptl::check(std::isfinite(val_fraction) && val_fraction >= 0 && val_fraction < 1,
                   "val_fraction must be in [0, 1)");
        s.trainer->set_corpus(bytes_arg(bytes, n), "corpus", val_fraction);
        return 0;
      },
      -1);
}

// {"model", "train", "step", "tokens_seen", "elapsed_s", "param_count", "tokenizer": {"type",
// "vocab_size", "sha256" (BPE)}, "corpus": {"train_bytes", "val_bytes", "train_tokens",
// "val_tokens"} | null}
EMSCRIPTEN_KEEPALIVE const char* ptl_info(int h) {
  return guarded(
      [&] {
        Session& s = session(h);
        const ptl::Trainer& t = *s.trainer;
        json j = {{"model", t.model_config().to_json()},
                  {"train", t.train_config().to_json()},
                  {"step", t.state().step},
                  {"tokens_seen", t.state().tokens_seen},
                  {"elapsed_s", t.state().elapsed_seconds},
                  {"param_count", t.model_config().param_count()},
                  {"tokenizer", t.tokenizer().id().to_json()},
                  {"corpus", nullptr}};
        if (t.has_corpus())
          j["corpus"] = {{"train_bytes", t.corpus().train().size()},
                         {"val_bytes", t.corpus().val().size()},
                         {"train_tokens", t.corpus().train_tokens()},
                         {"val_tokens", t.corpus().val_tokens()}};
        return text_result(j.dump());
      },
      (const char*)nullptr);
}

// Runs `steps` optimizer steps on batches drawn from the corpus, each recorded by the training
// loop (elapsed time, history). Returns a JSON array with one object per step: {"step", "loss",
// "lr", "grad_norm", "tokens", "seconds", "tokens_per_s", "elapsed_s", "events": {"evaluate",
// "sample", "save", "last"}} (what the loop says follows the step). A non-finite loss or
// gradient norm stops with an error (training diverged), naming the step.
EMSCRIPTEN_KEEPALIVE const char* ptl_train(int h, int steps) {
  return guarded(
      [&] {
        Session& s = session(h);
        ptl::check(steps >= 0, "steps must not be negative");
        ptl::Trainer& t = *s.trainer;
        ptl::TrainingLoop& l = loop(s);
        json out = json::array();
        s.gen.reset();
        for (int i = 0; i < steps; ++i) {
          const ptl::StepResult r = t.train_step();
          const auto ev = l.record(r);
          if (!ev) ptl::fail(divergence_message(*l.divergence()));
          s.recorded = r.step;
          json m = step_json(r, t);
          m["events"] = events_json(*ev);
          out.push_back(std::move(m));
        }
        return text_result(out.dump());
      },
      (const char*)nullptr);
}

// What follows step `step` (1-based): {"evaluate", "sample", "save", "last"}; the same rule
// ptl_train and ptl_record_step apply. For an external executor to decide right after it
// submits a step, before the step's loss comes back.
EMSCRIPTEN_KEEPALIVE const char* ptl_events_after(int h, double step) {
  return guarded([&] { return text_result(events_json(loop(session(h)).events_after(step_arg(step, 1))).dump()); },
                 (const char*)nullptr);
}

// Records a step another executor ran on a batch of ptl_next_batch: {"step", "loss",
// "grad_norm", "seconds"} (grad_norm defaults to 0, seconds to 0). Steps are recorded in order,
// each at most once, and none past the engine's step count. Adds the seconds to the run's elapsed
// time and the step's history point; returns the events after the step as ptl_events_after. A
// non-finite loss or gradient norm is an error naming the step (training diverged).
EMSCRIPTEN_KEEPALIVE const char* ptl_record_step(int h, const char* json_text) {
  return guarded(
      [&] {
        Session& s = session(h);
        ptl::Trainer& t = *s.trainer;
        json j = json::parse(json_text ? json_text : "{}");
        only_keys(j, json{{"step", 0}, {"loss", 0}, {"grad_norm", 0}, {"seconds", 0}}, "step result");
        ptl::check(j.contains("step") && j.contains("loss"), "step result: give \"step\" and \"loss\"");
        ptl::StepResult r;
        r.step = json_int(j.at("step"), kInt64Min, kInt64Max, "step result: 'step'");
        // JSON has no NaN or infinity: a non-finite number arrives as null.
        auto number = [&](const char* key, double dflt) {
          return !j.contains(key) ? dflt : j.at(key).is_null() ? double(NAN) : j.at(key).get<double>();
        };
        r.loss = number("loss", 0);
        r.grad_norm = number("grad_norm", 0);
        r.seconds = number("seconds", 0);
        ptl::check(std::isfinite(r.seconds) && r.seconds >= 0, "step result: seconds must be a non-negative number");
        ptl::check(r.step > s.recorded && r.step >= 1 && r.step <= t.state().step,
                   "step result: step " + std::to_string(r.step) + " is not the next step to record (" +
                       (s.recorded >= 1 ? "the last recorded is " + std::to_string(s.recorded) + ", " : std::string()) +
                       "the engine has counted " + std::to_string(t.state().step) + ")");
        r.lr = t.lr_at(r.step - 1);
        r.tokens = int64_t(t.train_config().batch) * t.model_config().ctx;
        ptl::TrainingLoop& l = loop(s);
        const auto ev = l.record(r);
        if (!ev) ptl::fail(divergence_message(*l.divergence()));
        s.recorded = r.step;
        return text_result(events_json(*ev).dump());
      },
      (const char*)nullptr);
}

// Adds to the loop's events: {"sample_at_end": true} a sample at the run's last step,
// {"save_every": N} a save every N steps (0: only after validations and at the end).
EMSCRIPTEN_KEEPALIVE int ptl_loop_options(int h, const char* json_text) {
  return guarded(
      [&] {
        Session& s = session(h);
        json j = json::parse(json_text ? json_text : "{}");
        only_keys(j, json{{"sample_at_end", 0}, {"save_every", 0}}, "loop options");
        const bool at_end = j.value("sample_at_end", s.sample_at_end);
        const int64_t every = j.contains("save_every")
                                  ? json_int(j["save_every"], kInt64Min, kInt64Max, "loop options: 'save_every'")
                                  : s.save_every;
        ptl::check(every >= 0, "loop options: save_every must not be negative");
        s.sample_at_end = at_end;
        s.save_every = every;
        return 0;
      },
      -1);
}

// --- The model's state tensor by tensor (an executor keeping its own copy of the weights) ---

// [{"name", "shape", "present"}]: the parameters (LoRA adapters included), then the AdamW moments
// of the trainable ones ("optim.m.<name>", "optim.v.<name>"; present once a step has run here or
// they were written).
EMSCRIPTEN_KEEPALIVE const char* ptl_tensor_names(int h) {
  return guarded(
      [&] {
        ptl::Trainer& t = *session(h).trainer;
        const ptl::cpu::TensorStore& store = t.store();  // const: a look writes nothing (the packed weights stay)
        json out = json::array();
        for (const auto& ti : t.state_tensors())
          out.push_back({{"name", ti.name}, {"shape", ti.shape}, {"present", store.find(ti.name) != nullptr}});
        return text_result(out.dump());
      },
      (const char*)nullptr);
}

// A state tensor's data, float32 little-endian (length ptl_result_size()).
EMSCRIPTEN_KEEPALIVE const uint8_t* ptl_read_tensor(int h, const char* name) {
  return guarded(
      [&] {
        ptl::Trainer& t = *session(h).trainer;
        const std::string n = name ? name : "";
        const float* p = t.read_tensor(n);
        const size_t bytes = size_t(t.store().numel(n)) * 4;
        g_bytes.assign(reinterpret_cast<const uint8_t*>(p), reinterpret_cast<const uint8_t*>(p) + bytes);
        return (const uint8_t*)g_bytes.data();
      },
      (const uint8_t*)nullptr);
}

// Overwrites a state tensor with n bytes (its size: float32 little-endian), creating AdamW
// moments not present yet. A generation in progress stops.
EMSCRIPTEN_KEEPALIVE int ptl_write_tensor(int h, const char* name, const uint8_t* bytes, double n) {
  return guarded(
      [&] {
        Session& s = session(h);
        const size_t len = size_arg(n);
        ptl::check(bytes != nullptr || len == 0, "null data pointer");
        s.trainer->write_tensor(name ? name : "", bytes, len);
        s.gen.reset();
        return 0;
      },
      -1);
}

// Sets the number of steps done (another executor's count); the data order does not move.
EMSCRIPTEN_KEEPALIVE int ptl_set_step(int h, double step) {
  return guarded(
      [&] {
        Session& s = session(h);
        const int64_t n = step_arg(step, 0);
        s.trainer->set_step(n);
        if (s.recorded > n) s.recorded = n;
        return 0;
      },
      -1);
}

// Per-op wall time of training steps (what `ptl bench --ops` prints natively). enable = 1 turns
// profiling on and clears the totals, 0 turns it off; either way returns the totals so far as
// {"op": seconds, ...} (summed over the steps run since it was enabled).
EMSCRIPTEN_KEEPALIVE const char* ptl_profile(int h, int enable) {
  return guarded(
      [&] {
        ptl::cpu::Executor& ex = session(h).trainer->train_executor();
        json o = json::object();
        for (const auto& [op, sec] : ex.op_seconds) o[op] = sec;
        ex.profile = enable != 0;
        if (enable) ex.op_seconds.clear();
        return text_result(o.dump());
      },
      (const char*)nullptr);
}

// Loss on the fixed validation windows: {"loss", "tokens", "perplexity", "bits_per_byte"}.
// The training loop records it: a history point at the current step (with the train loss
// recorded for that step), its time added to the run's elapsed time.
EMSCRIPTEN_KEEPALIVE const char* ptl_validation_loss(int h) {
  return guarded(
      [&] {
        Session& s = session(h);
        return text_result(eval_json(loop(s).evaluate()).dump());
      },
      (const char*)nullptr);
}

// Mean loss over every byte of a text, window by window (as `ptl eval --data`).
EMSCRIPTEN_KEEPALIVE const char* ptl_evaluate_text(int h, const uint8_t* bytes, double n) {
  return guarded(
      [&] {
        Session& s = session(h);
        std::string text = bytes_arg(bytes, n);
        ptl::check(text.size() >= 2, "text to evaluate must hold at least 2 bytes");
        return text_result(eval_json(s.trainer->evaluate_text(text)).dump());
      },
      (const char*)nullptr);
}

// Generation through Trainer::generate. Options JSON: {"max_tokens", "temperature", "top_k",
// "top_p", "seed"}. Each new token is passed to on_token (a function-table index, may be 0);
// it returns non-zero to continue, 0 to stop. Returns {"tokens": [...]}.
EMSCRIPTEN_KEEPALIVE const char* ptl_generate(int h, const uint8_t* prompt, double n, const char* options_json,
                                              int (*on_token)(int)) {
  return guarded(
      [&] {
        Session& s = session(h);
        int max_tokens = 0;
        ptl::SamplingOptions opt = sampling_from(options_json, &max_tokens);
        s.gen.reset();
        std::function<bool(int32_t)> cb;
        if (on_token) cb = [on_token](int32_t tok) { return on_token(tok) != 0; };
        std::vector<int32_t> out = s.trainer->generate(prompt_tokens(*s.trainer, prompt, n), max_tokens, opt, cb);
        return text_result(json{{"tokens", out}}.dump());
      },
      (const char*)nullptr);
}

// Polling generation: start, then call ptl_generate_next until it returns -1.
EMSCRIPTEN_KEEPALIVE int ptl_generate_start(int h, const uint8_t* prompt, double n, const char* options_json) {
  return guarded(
      [&] {
        Session& s = session(h);
        ptl::Trainer& t = *s.trainer;
        auto g = std::make_unique<Generation>();
        ptl::SamplingOptions opt = sampling_from(options_json, &g->remaining);
        t.begin_generation(prompt_tokens(t, prompt, n), opt);  // validates the options and the prompt
        s.gen = std::move(g);
        return 0;
      },
      -1);
}

// The next token (an id of the model's vocabulary: a byte for a byte-level model), -1 when the
// generation is finished, -2 on error.
EMSCRIPTEN_KEEPALIVE int ptl_generate_next(int h) {
  return guarded(
      [&]() -> int {
        Session& s = session(h);
        ptl::check(s.gen != nullptr, "no generation in progress: call ptl_generate_start first");
        Generation& g = *s.gen;
        if (g.remaining <= 0) {
          s.gen.reset();
          return -1;
        }
        const int32_t next = s.trainer->next_token();
        --g.remaining;
        return next;
      },
      -2);
}

EMSCRIPTEN_KEEPALIVE int ptl_generate_stop(int h) {
  return guarded(
      [&] {
        session(h).gen.reset();
        return 0;
      },
      -1);
}

// Checkpoint bytes in the native .tinygpt format (Trainer::save_checkpoint). With
// with_optimizer = 0 it is a weights-only checkpoint (e.g. the initial weights of a fresh model
// for an external executor). The length is ptl_result_size().
EMSCRIPTEN_KEEPALIVE const uint8_t* ptl_export_checkpoint(int h, int with_optimizer) {
  return guarded(
      [&] {
        Session& s = session(h);
        g_bytes = s.trainer->save_checkpoint(with_optimizer != 0);
        return (const uint8_t*)g_bytes.data();
      },
      (const uint8_t*)nullptr);
}

EMSCRIPTEN_KEEPALIVE double ptl_result_size() { return double(g_bytes.size()); }

// The serialised program (Program::to_json) of this model: "train" (forward, backward, AdamW
// at the trainer's batch), "eval", "forward" (at the trainer's batch and the model's context)
// "generate" (one token with a KV cache), "prefill" (the generate program over kPrefillRows
// tokens, or the context if shorter: a prompt goes into the cache a block at a time), "window"
// (the forward program for one sequence: a generator past the context recomputes its window with
// it) or "inspect" (one sequence of ctx tokens with every layer's attention probabilities;
// ptl_inspect builds it for the prompt's length).
constexpr int kPrefillRows = 32;
EMSCRIPTEN_KEEPALIVE const char* ptl_export_program(int h, const char* which_c) {
  return guarded(
      [&] {
        Session& s = session(h);
        const std::string which = which_c && *which_c ? which_c : "train";
        const ptl::Trainer& t = *s.trainer;
        // The programs the trainer itself runs: with its LoRA adapters, and for SFT data the loss
        // mask (an input "loss_mask" [batch, ctx] that ptl_next_batch supplies).
        ptl::BuildOptions opt;
        opt.batch = t.train_config().batch;
        opt.lora = t.lora_config();
        ptl::BuildOptions one;
        one.lora = t.lora_config();
        ptl::Program p;
        if (which == "train") {
          opt.loss_mask = t.has_sft_data();
          p = ptl::build_train_program(t.model_config(), opt, t.train_config());
        } else if (which == "eval")
          p = ptl::build_eval_program(t.model_config(), opt);
        else if (which == "forward")
          p = ptl::build_forward_program(t.model_config(), opt);
        else if (which == "generate")
          p = ptl::build_generate_program(t.model_config(), t.lora_config());
        else if (which == "prefill")  // a prompt's tokens a block at a time into the KV cache
          p = ptl::build_generate_program(t.model_config(), t.lora_config(),
                                          std::min(kPrefillRows, t.model_config().ctx));
        else if (which == "window")
          p = ptl::build_forward_program(t.model_config(), one);
        else if (which == "inspect")
          p = ptl::build_inspect_program(t.model_config(), t.model_config().ctx, t.lora_config());
        else
          ptl::fail("unknown program '" + which + "' (train, eval, forward, generate, prefill, window or inspect)");
        return text_result(p.to_json().dump());
      },
      (const char*)nullptr);
}

// --- Another executor running the training program (the WebGPU backend) ---

// The batch of the next training step, for an executor outside this engine: drawn from the
// same data RNG that ptl_train uses (Trainer::next_train_batch), and counted as a step done
// elsewhere (step and tokens_seen advance as ptl_train's would). So after N calls the trainer's
// data order, step and token count are those of N ptl_train steps; only the weights stay (bring
// the other executor's back with ptl_load_checkpoint). Bytes (length ptl_result_size()): the
// tokens then the targets, int32 little-endian, [batch, ctx] each, row-major; with SFT data then
// the loss mask, float32 [batch, ctx] (the train program's "loss_mask" input). The step's learning
// rate is ptl_lr_at(h, step - 1) with step the trainer's step after this call (ptl_info).
EMSCRIPTEN_KEEPALIVE const uint8_t* ptl_next_batch(int h) {
  return guarded(
      [&] {
        Session& s = session(h);
        ptl::Trainer& t = *s.trainer;
        ptl::Batch b = t.next_train_batch();
        const size_t n = b.inputs.size();
        std::vector<uint8_t> out((b.mask.empty() ? 2 : 3) * n * 4);
        std::memcpy(out.data(), b.inputs.data(), n * 4);  // wasm is little-endian
        std::memcpy(out.data() + n * 4, b.targets.data(), n * 4);
        if (!b.mask.empty()) std::memcpy(out.data() + 2 * n * 4, b.mask.data(), n * 4);
        t.count_external_step(b);
        s.gen.reset();
        g_bytes = std::move(out);
        return (const uint8_t*)g_bytes.data();
      },
      (const uint8_t*)nullptr);
}

// The learning rate of 0-based step `step` (the step with optim.hparams[1] = step + 1) under the
// trainer's current schedule (TrainConfig::lr_at). NaN on error.
EMSCRIPTEN_KEEPALIVE double ptl_lr_at(int h, double step) {
  return guarded([&] { return session(h).trainer->lr_at(step_arg(step, 0)); }, double(NAN));
}

// The key of the training program's "dropout.seed" input {key, step} (docs/model.md, "Dropout"):
// dropout::key_of(the train config's u64 seed), a u32 (a double holds it exactly; JavaScript
// numbers cannot hold every u64 seed). A step's input is {this key, step} with step its 1-based
// number, optim.hparams[1]. The program has that input only when dropout is on (the train
// config's "dropout" or the LoRA config's above 0). NaN on error.
EMSCRIPTEN_KEEPALIVE double ptl_dropout_key(int h) {
  return guarded([&] { return double(ptl::dropout::key_of(session(h).trainer->train_config().seed)); }, double(NAN));
}

// --- Inspection ---

// What the model computes on a prompt (Trainer::inspect): its last ctx tokens (a newline if
// empty) through the inspect program. Bytes (length ptl_result_size()): u64 little-endian header
// length, a JSON header {"tokens": [...] (ids), "top": [{"token", "byte", "prob"}, ...] (the top_k
// most likely next tokens, most likely first; "byte" repeats the id), "layers": L, "heads": H, "T": T} padded with
// spaces to a multiple of 8, then the attention maps, float32 little-endian [L, H, T, T] (row i: query position i's
// weights over positions 0..i, zeros after). Binary because the maps grow as L H T^2: 0.15 MB for Small, 176 MB for
// Mega at its full 512-byte context.
EMSCRIPTEN_KEEPALIVE const uint8_t* ptl_inspect(int h, const uint8_t* prompt, double n, int top_k) {
  return guarded(
      [&] {
        Session& s = session(h);
        ptl::InspectResult r = s.trainer->inspect(prompt_tokens(*s.trainer, prompt, n), top_k);
        json top = json::array();
        // "token": the id; "byte": the same id, the name byte-level callers read.
        for (const auto& [id, prob] : r.top) top.push_back({{"token", id}, {"byte", id}, {"prob", prob}});
        json header = {{"tokens", r.tokens}, {"top", top}, {"layers", r.layers}, {"heads", r.heads}, {"T", r.T}};
        g_bytes.clear();
        g_bytes.shrink_to_fit();  // the previous result's memory first: the maps may be large
        g_bytes = framed(header, r.attention.data(), r.attention.size() * sizeof(float));
        return (const uint8_t*)g_bytes.data();
      },
      (const uint8_t*)nullptr);
}

// --- One program on the CPU backend (the browser's C++ twin of a WebGPU kernel) ---

// Runs a serialised program (Program::to_json, usually one op) once on the CPU backend, exactly
// as `ptl_program_run kernel` does (the same ptl::run_program_once): every tensor of the
// safetensors `inputs` is copied into the program's tensor of that name (same element count; a
// name the program lacks is an error), then the program runs once. Returns safetensors bytes
// (length ptl_result_size()) holding every tensor of the program after the run. Needs no trainer.
EMSCRIPTEN_KEEPALIVE const uint8_t* ptl_run_program(const char* program_json, const uint8_t* inputs, double n) {
  return guarded(
      [&] {
        ptl::check(program_json != nullptr, "null program");
        const ptl::Program prog = ptl::Program::from_json(json::parse(program_json));
        const size_t len = size_arg(n);
        ptl::check(inputs != nullptr || len == 0, "null data pointer");
        const ptl::SafeTensors in = ptl::decode_safetensors(inputs, len, "program inputs");
        g_bytes = ptl::encode_safetensors(ptl::run_program_once(prog, in));
        return (const uint8_t*)g_bytes.data();
      },
      (const uint8_t*)nullptr);
}

// ---- Post-training: LoRA adapters and SFT (docs/post-training.md) ------------------------------

// Starts fine-tuning the current weights: a fresh step count, schedule and optimizer moments, as
// `ptl lora train` / `ptl sft` do. {"steps", "lr", "schedule", "batch", "seed", "warmup",
// "dropout", "lora": {"rank", "alpha", "targets": [...], "dropout"} | null}; with "lora" the base
// is frozen and only the adapters train. "dropout" is the model's rate for this run (default 0,
// not the base run's); the LoRA config's, the adapters' input's. Every field is optional: "steps"
// defaults to `ptl lora train`'s, and with "lora" so do "lr" and each field of "lora" left out
// (engine/lora.h, default_lora()), so `{"lora": {}}` is that command's run; without "lora" the
// rate is `ptl sft`'s (kDefaultFinetuneLr) and adapters already on are merged into the weights.
EMSCRIPTEN_KEEPALIVE int ptl_start_finetune(int h, const char* config_json) {
  return guarded(
      [&] {
        Session& s = session(h);
        json j = json::parse(config_json ? config_json : "{}");
        only_keys(j,
                  json{{"steps", 0},
                       {"lr", 0},
                       {"schedule", 0},
                       {"batch", 0},
                       {"seed", 0},
                       {"warmup", 0},
                       {"dropout", 0},
                       {"lora", 0}},
                  "fine-tune config");
        const bool with_lora = j.contains("lora") && !j.at("lora").is_null();
        ptl::TrainConfig tc = s.trainer->train_config();  // the base run's optimizer settings, then ours
        tc.steps = j.contains("steps") ? json_int(j.at("steps"), kInt64Min, kInt64Max, "fine-tune config: 'steps'")
                                       : ptl::kDefaultLoraSteps;
        tc.lr = j.value("lr", with_lora ? ptl::kDefaultLoraLr : ptl::kDefaultFinetuneLr);
        if (j.contains("schedule")) tc.schedule = j.at("schedule").get<std::string>();
        if (j.contains("batch")) tc.batch = int(json_int(j["batch"], kIntMin, kIntMax, "fine-tune config: 'batch'"));
        if (j.contains("seed")) tc.seed = ptl::json_u64(j["seed"], "fine-tune config: 'seed'");
        tc.warmup =
            j.contains("warmup") ? json_int(j["warmup"], kInt64Min, kInt64Max, "fine-tune config: 'warmup'") : 0;
        tc.dropout = j.value("dropout", 0.0);
        tc.sample_every = 0;
        tc.validate();
        s.gen.reset();
        ptl::LoraConfig lora;
        if (with_lora) {
          const json& given = j.at("lora");
          ptl::check(given.is_object(), "fine-tune config: 'lora' must be an object or null");
          json full = ptl::lora_to_json(ptl::default_lora());  // the fields left out: the defaults
          for (const auto& [key, value] : given.items()) full[key] = value;
          lora = ptl::lora_from_json(full);  // validate before changing anything
        }
        // Without "lora" every weight trains: adapters from an earlier run are merged first, so the run
        // starts from the model the user has been sampling (left on, they alone would train).
        if (!with_lora && s.trainer->lora_enabled()) s.trainer->merge_lora();
        s.trainer->start_finetune(tc);
        if (with_lora) s.trainer->enable_lora(lora, tc.seed);
        reset_loop(s);
        reserve_heap(*s.trainer);
        return 0;
      },
      -1);
}

// SFT examples (JSONL of {"prompt", "response"} or {"messages": [...]}) replace the corpus, in the
// model's tokens: the loss counts only the response's. Errors name the line; a file that declares
// another tokenizer (engine/sft.h) is refused.
EMSCRIPTEN_KEEPALIVE int ptl_set_sft_data(int h, const uint8_t* bytes, double n, const char* name) {
  return guarded(
      [&] {
        Session& s = session(h);
        const std::string what = name && *name ? name : "sft data";
        const ptl::Trainer& t = *s.trainer;
        auto examples = ptl::parse_sft_jsonl(bytes_arg(bytes, n), what, &t.tokenizer().id());
        s.trainer->set_sft_data(
            std::make_unique<ptl::SftData>(examples, t.model_config().ctx, 0.1, what, t.tokenizer()));
        return 0;
      },
      -1);
}

// The adapters as an adapter file (safetensors, format "tinygpt-lora"); ptl_result_size() bytes.
EMSCRIPTEN_KEEPALIVE const uint8_t* ptl_export_adapter(int h) {
  return guarded(
      [&] {
        Session& s = session(h);
        ptl::check(s.trainer->lora_enabled(), "this model has no LoRA adapters to export");
        g_bytes = s.trainer->save_adapter();
        return (const uint8_t*)g_bytes.data();
      },
      (const uint8_t*)nullptr);
}

// Adapters trained on this model's base (checked: same config and base checkpoint); replaces any
// adapters present. On error nothing changes.
EMSCRIPTEN_KEEPALIVE int ptl_load_adapter(int h, const uint8_t* bytes, double n, const char* name) {
  return guarded(
      [&] {
        Session& s = session(h);
        const std::string b = bytes_arg(bytes, n);
        s.gen.reset();
        s.trainer->load_adapter(std::vector<uint8_t>(b.begin(), b.end()), name && *name ? name : "adapter");
        reserve_heap(*s.trainer);
        return 0;
      },
      -1);
}

// {"enabled", "rank", "alpha", "targets", "trainable_params", "base_sha256"}
EMSCRIPTEN_KEEPALIVE const char* ptl_lora_info(int h) {
  return guarded(
      [&] {
        Session& s = session(h);
        const ptl::LoraConfig& c = s.trainer->lora_config();
        int64_t trainable = 0;
        if (c.enabled())
          for (const auto& t : ptl::adapter_tensors(s.trainer->model_config(), c)) {
            int64_t k = 1;
            for (auto d : t.shape) k *= d;
            trainable += k;
          }
        json j = {{"enabled", c.enabled()},
                  {"rank", c.rank},
                  {"alpha", c.alpha},
                  {"targets", std::vector<std::string>(c.targets.begin(), c.targets.end())},
                  {"trainable_params", trainable},
                  {"base_sha256", s.trainer->base_sha256()}};
        g_text = j.dump();
        return g_text.c_str();
      },
      (const char*)nullptr);
}

// ---- Hugging Face GPT-2 folders and PEFT adapters (engine/hf_gpt2.h, engine/peft.h, docs/gpt2.md) ----

// Hands over one file of a Hugging Face GPT-2 folder (config.json, model.safetensors or
// model.safetensors.index.json and its shards, tokenizer.json or vocab.json + merges.txt; other
// files are ignored by the reader) by its name in the folder. The files wait for
// ptl_create_from_hf; giving a name again replaces its bytes. Returns 0, or -1 on error.
EMSCRIPTEN_KEEPALIVE int ptl_folder_file(const char* name, const uint8_t* bytes, double n) {
  return guarded(
      [&] {
        ptl::check(name != nullptr && *name, "a folder file needs a name");
        const size_t len = size_arg(n);
        ptl::check(bytes != nullptr || len == 0, "null data pointer");
        std::vector<uint8_t>& slot = g_folder[name];
        slot.assign(bytes, bytes + len);
        return 0;
      },
      -1);
}

// Drops the files handed over and not yet read. Returns 0.
EMSCRIPTEN_KEEPALIVE int ptl_folder_clear() {
  g_folder.clear();
  return 0;
}

// A model from the folder files handed over (ptl_folder_file), read and checked by the engine
// code of `ptl import-hf` (engine/hf_gpt2.h): the same model, and the same checkpoint (its sha256
// the base that adapters record). `label` names the folder in messages ("gpt2/config.json: ...").
// The files are consumed, whether the import succeeds or not. Returns {"handle", "summary" (the
// line `ptl import-hf` prints after "wrote FILE: "), "tokenizer_stored"}, or NULL on error.
EMSCRIPTEN_KEEPALIVE const char* ptl_create_from_hf(const char* label) {
  std::map<std::string, std::vector<uint8_t>> files = std::move(g_folder);
  g_folder.clear();
  return guarded(
      [&] {
        const std::string name = label ? label : "";
        ptl::HfGpt2Import imported =
            ptl::import_hf_gpt2(ptl::read_hf_gpt2(ptl::FolderFiles::in_memory(std::move(files), name)),
                                name.empty() ? "model folder" : name);
        imported.checkpoint.clear();
        imported.checkpoint.shrink_to_fit();
        reserve_heap(*imported.trainer);
        const int h = g_next_handle++;
        g_sessions[h].trainer = std::move(imported.trainer);
        return text_result(
            json{{"handle", h}, {"summary", imported.summary}, {"tokenizer_stored", imported.tokenizer_stored}}.dump());
      },
      (const char*)nullptr);
}

// The LoRA adapters as a PEFT adapter folder (engine/peft.h, as `ptl lora export-peft` writes it):
// adapter_config.json and adapter_model.safetensors, framed as files_result (length
// ptl_result_size()). `base_model` is adapter_config.json's base_model_name_or_path (NULL or "":
// the one the adapters were imported with, if any, else null).
EMSCRIPTEN_KEEPALIVE const uint8_t* ptl_export_peft(int h, const char* base_model) {
  return guarded(
      [&] {
        Session& s = session(h);
        ptl::check(s.trainer->lora_enabled(), "this model has no LoRA adapters to export");
        const std::vector<uint8_t> adapter = s.trainer->save_adapter();
        const ptl::PeftExport e = ptl::peft_export(ptl::decode_safetensors(adapter.data(), adapter.size(), "adapter"),
                                                   "adapter", base_model ? base_model : "");
        return files_result(e.files);
      },
      (const uint8_t*)nullptr);
}

// The model as a Hugging Face GPT-2 folder (as `ptl export-hf` writes it): config.json,
// model.safetensors (F32) and, for a model that reads text, tokenizer.json, framed as
// files_result. With LoRA adapters, they are merged first (as `ptl lora merge`) into a copy: the
// model keeps its adapters.
EMSCRIPTEN_KEEPALIVE const uint8_t* ptl_export_hf(int h) {
  return guarded(
      [&] {
        Session& s = session(h);
        const ptl::Trainer& t = *s.trainer;
        std::vector<uint8_t> ckpt = t.save_checkpoint(false);
        if (t.lora_enabled()) {
          auto merged = ptl::Trainer::from_checkpoint(ckpt, "model");
          merged->set_base_sha256(t.base_sha256());  // the adapters' base: this model's
          merged->load_adapter(t.save_adapter(), "adapter");
          merged->merge_lora();
          ckpt = merged->save_checkpoint(false);
        }
        const ptl::SafeTensors f = ptl::decode_safetensors(ckpt.data(), ckpt.size(), "model");
        ckpt.clear();
        ckpt.shrink_to_fit();
        return files_result(ptl::hf_gpt2_export(f, "model").files);
      },
      (const uint8_t*)nullptr);
}

// ---- tokenizers (engine/tokenizer.h, docs/tokenizers.md) ----

// A tokenizer from tokenizer.json bytes. Returns a handle, 0 on error.
EMSCRIPTEN_KEEPALIVE int ptl_tokenizer_load(const uint8_t* json_bytes, double n, const char* name) {
  return guarded(
      [&] {
        return add_tokenizer(
            ptl::tokenizer_from_json(bytes_arg(json_bytes, n), name && *name ? name : "tokenizer.json"));
      },
      0);
}

// A byte-level BPE tokenizer trained on a text (vocab_size counts the bytes, the merged tokens and
// <|endoftext|>: 257..65536). Returns a handle, 0 on error.
EMSCRIPTEN_KEEPALIVE int ptl_tokenizer_train(const uint8_t* text, double n, int vocab_size) {
  return guarded(
      [&] {
        ptl::BpeTrainOptions opt;
        opt.vocab_size = vocab_size;
        return add_tokenizer(ptl::train_bpe(bytes_arg(text, n), opt));
      },
      0);
}

EMSCRIPTEN_KEEPALIVE int ptl_tokenizer_free(int h) {
  return guarded(
      [&] {
        tokenizer(h);
        g_tokenizers.erase(h);
        return 0;
      },
      -1);
}

// {"type", "vocab_size", "merges", "specials": [{"text", "id"}]}
EMSCRIPTEN_KEEPALIVE const char* ptl_tokenizer_info(int h) {
  return guarded([&] { return text_result(tokenizer_json(tokenizer(h)).dump()); }, (const char*)nullptr);
}

// The tokenizer.json text.
EMSCRIPTEN_KEEPALIVE const char* ptl_tokenizer_json(int h) {
  return guarded([&] { return text_result(tokenizer(h).to_json()); }, (const char*)nullptr);
}

// The ids of a text (any bytes), int32 little-endian (length ptl_result_size(), 4 bytes an id).
// allow_special = 0 reads special tokens' text as ordinary text.
EMSCRIPTEN_KEEPALIVE const uint8_t* ptl_tokenizer_encode(int h, const uint8_t* text, double n, int allow_special) {
  return guarded([&] { return ids_result(tokenizer(h).encode(bytes_arg(text, n), allow_special != 0)); },
                 (const uint8_t*)nullptr);
}

// The bytes of `count` int32 ids (length ptl_result_size()); an id outside the vocabulary is an error.
EMSCRIPTEN_KEEPALIVE const uint8_t* ptl_tokenizer_decode(int h, const int32_t* ids, double count) {
  return guarded(
      [&] {
        const size_t len = size_arg(count);
        ptl::check(ids != nullptr || len == 0, "null data pointer");
        return bytes_result(tokenizer(h).decode(std::span<const int32_t>(ids, len)));
      },
      (const uint8_t*)nullptr);
}

// ---- the tokenizer of a model (its checkpoint's: bytes, or BPE; docs/checkpoint-format.md) ----

// {"type": "byte" | "bpe" | "none", "vocab_size", "sha256" (BPE: the identity adapters and SFT
// files record), "merges", "specials": [{"text", "id"}]} ("merges" and "specials" not for "none").
EMSCRIPTEN_KEEPALIVE const char* ptl_model_tokenizer_info(int h) {
  return guarded(
      [&] {
        const ptl::ModelTokenizer& mt = session(h).trainer->tokenizer();
        json j = mt.id().to_json();
        if (mt.reads_text()) {
          const json t = tokenizer_json(mt.text());
          j["merges"] = t["merges"];
          j["specials"] = t["specials"];
        }
        return text_result(j.dump());
      },
      (const char*)nullptr);
}

// The model's tokenizer as tokenizer.json text (for a byte-level model, the byte tokenizer's:
// 256 tokens, no merges); ptl_tokenizer_load reads it back.
EMSCRIPTEN_KEEPALIVE const char* ptl_model_tokenizer_json(int h) {
  return guarded(
      [&] {
        const ptl::ModelTokenizer& mt = session(h).trainer->tokenizer();
        return text_result(mt.json().empty() ? mt.text().to_json() : mt.json());
      },
      (const char*)nullptr);
}

// The ids of a text in the model's tokenizer, int32 little-endian (length ptl_result_size()).
EMSCRIPTEN_KEEPALIVE const uint8_t* ptl_model_encode(int h, const uint8_t* text, double n) {
  return guarded([&] { return ids_result(session(h).trainer->encode(bytes_arg(text, n))); }, (const uint8_t*)nullptr);
}

// The bytes of `count` int32 ids in the model's tokenizer (length ptl_result_size()); an id
// outside the vocabulary is an error.
EMSCRIPTEN_KEEPALIVE const uint8_t* ptl_model_decode(int h, const int32_t* ids, double count) {
  return guarded(
      [&] {
        const size_t len = size_arg(count);
        ptl::check(ids != nullptr || len == 0, "null data pointer");
        return bytes_result(session(h).trainer->decode(std::span<const int32_t>(ids, len)));
      },
      (const uint8_t*)nullptr);
}

}  // extern "C"
