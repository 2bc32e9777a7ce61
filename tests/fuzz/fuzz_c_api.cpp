// The C API that the WebAssembly module exports (wasm/api.cpp, compiled natively here with
// shim/emscripten/), driven by a sequence of calls read from the input: each call and its
// arguments (handles live, freed, never made; sizes NaN, negative, fractional; JSON fragments;
// byte buffers, and checkpoints and adapters exported by the API itself with bytes flipped).
// Models stay tiny and step counts small, so that an input runs in milliseconds: sizes are
// bounded here, in the harness, as the page bounds them. Every call must return (a value or an
// error through ptl_last_error); the sanitizers watch everything in between.
//
// The tokenizer functions (ptl_tokenizer_*) and the Hugging Face folder functions (ptl_folder_file,
// ptl_create_from_hf, ptl_export_hf, ptl_export_peft) are driven too. Not driven: ptl_run_program (its executor trusts
// the program's shapes: a program is the engine's own output, docs/reliability.md), ptl_set_num_threads (one thread
// here), and ptl_generate's callback.
#include <fuzzer/FuzzedDataProvider.h>

#include <cmath>
#include <limits>
#include <nlohmann/json.hpp>

#include "tests/fuzz/fuzz_common.h"
#include "wasm/api.cpp"

namespace {

std::vector<int> g_live;      // trainer handles made by this input (freed at its end)
std::vector<int> g_live_tok;  // tokenizer handles, likewise

int pick_handle(FuzzedDataProvider& in) {
  switch (in.ConsumeIntegralInRange(0, 5)) {
    case 0:
      return in.ConsumeIntegral<int>();
    case 1:
      return 0;
    default:
      return g_live.empty() ? 1 : g_live[in.ConsumeIntegralInRange<size_t>(0, g_live.size() - 1)];
  }
}

// A byte count for a buffer of `len` bytes: mostly right, sometimes one the API must refuse.
double pick_size(FuzzedDataProvider& in, size_t len) {
  switch (in.ConsumeIntegralInRange(0, 9)) {
    case 0:
      return std::numeric_limits<double>::quiet_NaN();
    case 1:
      return -1;
    case 2:
      return double(len) - 0.5;
    case 3:
      return std::numeric_limits<double>::infinity();
    case 4:
      return double(in.ConsumeIntegralInRange<size_t>(0, len));
    default:
      return double(len);
  }
}

double pick_double(FuzzedDataProvider& in) {
  switch (in.ConsumeIntegralInRange(0, 7)) {
    case 0:
      return std::numeric_limits<double>::quiet_NaN();
    case 1:
      return std::numeric_limits<double>::infinity();
    case 2:
      return -1;
    case 3:
      return in.ConsumeFloatingPoint<double>();
    default:
      return double(in.ConsumeIntegralInRange(0, 20));
  }
}

// A JSON value for a config field: numbers of every kind, strings, nulls, arrays.
nlohmann::json pick_json(FuzzedDataProvider& in) {
  switch (in.ConsumeIntegralInRange(0, 7)) {
    case 0:
      return nullptr;
    case 1:
      return in.ConsumeBool();
    case 2:
      return in.ConsumeIntegralInRange(-3, 40);
    case 3:
      return in.ConsumeFloatingPoint<double>();
    case 4:
      return in.ConsumeRandomLengthString(12);
    case 5:
      return nlohmann::json::array({in.ConsumeIntegralInRange(-1, 3)});
    case 6:
      return in.ConsumeIntegral<int64_t>();
    default:
      return in.ConsumeProbability<double>();
  }
}

// A JSON object of some of `keys` (plus now and then an unknown key), or raw text.
std::string pick_object(FuzzedDataProvider& in, const std::vector<const char*>& keys) {
  if (in.ConsumeIntegralInRange(0, 7) == 0) return in.ConsumeRandomLengthString(48);
  nlohmann::json j = nlohmann::json::object();
  const int n = in.ConsumeIntegralInRange(0, 3);
  for (int i = 0; i < n; ++i) {
    const bool unknown = in.ConsumeIntegralInRange(0, 15) == 0;
    const std::string key =
        unknown ? in.ConsumeRandomLengthString(6) : keys[in.ConsumeIntegralInRange<size_t>(0, keys.size() - 1)];
    j[key] = pick_json(in);
  }
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

// Sizes the harness keeps small (the API itself refuses only what cannot work, as a page would
// ask for a model that fits): a trainer is driven only while its model and batch are small.
bool small_session(int h) {
  const char* info = ptl_info(h);
  if (!info) return true;  // the call under test reports the bad handle itself
  const auto j = nlohmann::json::parse(info);
  const auto& m = j["model"];
  const auto& t = j["train"];
  return m["d_model"].get<int64_t>() <= 16 && m["n_layers"].get<int64_t>() <= 2 && m["ctx"].get<int64_t>() <= 16 &&
         t["batch"].get<int64_t>() <= 4 && t["eval_batches"].get<int64_t>() <= 4;
}

// A config for ptl_create: a tiny model whose fields the input may push out of range (the
// validation refuses those), or the input's own text when it is not JSON.
std::string create_config(FuzzedDataProvider& in) {
  if (in.ConsumeIntegralInRange(0, 7) == 0) {
    // The input's own text, unless it is an object naming a larger preset or model.
    std::string text = in.ConsumeRandomLengthString(48);
    const auto j = nlohmann::json::parse(text, nullptr, false);
    return j.is_object() ? std::string("{\"preset\":\"tiny\"}") : text;
  }
  nlohmann::json model = {{"n_layers", in.ConsumeIntegralInRange(0, 2)},
                          {"d_model", in.ConsumeIntegralInRange(0, 3) * 4},
                          {"n_heads", in.ConsumeIntegralInRange(0, 4)},
                          {"ctx", in.ConsumeIntegralInRange(0, 16)}};
  nlohmann::json train = {{"batch", in.ConsumeIntegralInRange(0, 3)},
                          {"steps", in.ConsumeIntegralInRange(-1, 30)},
                          {"eval_batches", in.ConsumeIntegralInRange(0, 2)},
                          {"eval_every", in.ConsumeIntegralInRange(-1, 3)},
                          {"dropout", in.ConsumeBool() ? 0.0 : pick_double(in)},
                          {"lr", pick_double(in)}};
  nlohmann::json j = {{"preset", in.ConsumeBool() ? "tiny" : "Tiny"}, {"model", model}, {"train", train}};
  if (in.ConsumeIntegralInRange(0, 7) == 0) j["model"][in.ConsumeRandomLengthString(6)] = pick_json(in);
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

// Bytes exported by the API (a checkpoint or an adapter) with a few of them changed.
std::vector<uint8_t> mutated_export(FuzzedDataProvider& in, const uint8_t* p) {
  std::vector<uint8_t> b;
  if (p) b.assign(p, p + size_t(ptl_result_size()));
  const int flips = in.ConsumeIntegralInRange(0, 3);
  for (int i = 0; i < flips && !b.empty(); ++i)
    b[in.ConsumeIntegralInRange<size_t>(0, b.size() - 1)] = in.ConsumeIntegral<uint8_t>();
  if (!b.empty() && in.ConsumeIntegralInRange(0, 7) == 0) b.resize(in.ConsumeIntegralInRange<size_t>(0, b.size()));
  return b;
}

// Hands over a Hugging Face folder's files for ptl_create_from_hf: a live trainer's ptl_export_hf
// (config.json, model.safetensors, tokenizer.json) with bytes changed in some, or files of the input.
void hand_over_folder(FuzzedDataProvider& in) {
  const uint8_t* p = in.ConsumeBool() ? ptl_export_hf(pick_handle(in)) : nullptr;
  if (p) {
    // The files_result framing: u64 header length, {"files": [{"name", "size"}, ...]}, the bytes.
    uint64_t hn = 0;
    for (int i = 0; i < 8; ++i) hn |= uint64_t(p[i]) << (8 * i);
    const auto header = nlohmann::json::parse(p + 8, p + 8 + hn);
    const uint8_t* at = p + 8 + hn;
    std::vector<std::pair<std::string, std::vector<uint8_t>>> files;
    for (const auto& f : header["files"]) {
      const size_t n = f["size"].get<size_t>();
      files.emplace_back(f["name"].get<std::string>(), std::vector<uint8_t>(at, at + n));
      at += n;
    }
    for (auto& [name, bytes] : files) {
      const int flips = in.ConsumeIntegralInRange(0, 2);
      for (int i = 0; i < flips && !bytes.empty(); ++i)
        bytes[in.ConsumeIntegralInRange<size_t>(0, bytes.size() - 1)] = in.ConsumeIntegral<uint8_t>();
      if (!bytes.empty() && in.ConsumeIntegralInRange(0, 7) == 0)
        bytes.resize(in.ConsumeIntegralInRange<size_t>(0, bytes.size()));
      if (in.ConsumeIntegralInRange(0, 7) != 0)
        ptl_folder_file(name.c_str(), bytes.data(), pick_size(in, bytes.size()));
    }
    return;
  }
  static const char* kNames[] = {"config.json",    "model.safetensors", "model.safetensors.index.json",
                                 "tokenizer.json", "vocab.json",        "merges.txt"};
  const int n = in.ConsumeIntegralInRange(0, 3);
  for (int i = 0; i < n; ++i) {
    const std::string name = in.ConsumeIntegralInRange(0, 7) == 0 ? in.ConsumeRandomLengthString(12)
                                                                  : kNames[in.ConsumeIntegralInRange(0, 5)];
    const std::string bytes =
        name == "config.json" && in.ConsumeBool()
            ? pick_object(in, {"model_type", "vocab_size", "n_positions", "n_embd", "n_layer", "n_head", "n_inner",
                               "layer_norm_epsilon", "activation_function", "tie_word_embeddings"})
            : in.ConsumeRandomLengthString(256);
    ptl_folder_file(name.empty() && in.ConsumeBool() ? nullptr : name.c_str(),
                    reinterpret_cast<const uint8_t*>(bytes.data()), pick_size(in, bytes.size()));
  }
}

std::string pick_text(FuzzedDataProvider& in) {
  static const char* kShakespeare =
      "First Citizen:\nBefore we proceed any further, hear me speak.\n\nAll:\nSpeak, speak.\n";
  if (in.ConsumeBool()) return std::string(kShakespeare).substr(0, in.ConsumeIntegralInRange<size_t>(0, 80));
  return in.ConsumeRandomLengthString(96);
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  ptl::cpu::set_num_threads(1);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  FuzzedDataProvider in(data, size);
  for (int call = 0; call < 24 && in.remaining_bytes() > 0; ++call) {
    const int h = pick_handle(in);
    switch (in.ConsumeIntegralInRange(0, 37)) {
      case 0: {
        const int made = ptl_create(create_config(in).c_str());
        if (made > 0) g_live.push_back(made);
        break;
      }
      case 1: {  // a checkpoint: the input's bytes, or an export of a live trainer with bytes changed
        std::vector<uint8_t> b = in.ConsumeBool() ? mutated_export(in, ptl_export_checkpoint(h, in.ConsumeBool()))
                                                  : in.ConsumeBytes<uint8_t>(in.ConsumeIntegralInRange(0, 256));
        const int made = ptl_create_from_checkpoint(b.data(), pick_size(in, b.size()), "fuzz");
        if (made > 0) g_live.push_back(made);
        break;
      }
      case 2: {
        std::vector<uint8_t> b = mutated_export(in, ptl_export_checkpoint(pick_handle(in), in.ConsumeBool()));
        ptl_load_checkpoint(h, b.data(), pick_size(in, b.size()), in.ConsumeBool() ? "" : "fuzz");
        break;
      }
      case 3:
        ptl_free(h);
        break;
      case 4:
        ptl_update_train_config(h, pick_object(in, {"steps", "lr", "schedule", "warmup", "min_lr_frac", "eval_every",
                                                    "sample_every", "data_path", "batch", "seed"})
                                       .c_str());
        break;
      case 5: {
        const std::string t = pick_text(in);
        ptl_set_corpus(h, reinterpret_cast<const uint8_t*>(t.data()), pick_size(in, t.size()), pick_double(in) / 10);
        break;
      }
      case 6:
        ptl_info(h);
        break;
      case 7:
        if (small_session(h)) ptl_train(h, in.ConsumeIntegralInRange(-1, 2));
        break;
      case 8:
        ptl_events_after(h, pick_double(in));
        break;
      case 9:
        ptl_record_step(h, pick_object(in, {"step", "loss", "grad_norm", "seconds"}).c_str());
        break;
      case 10:
        ptl_loop_options(h, pick_object(in, {"sample_at_end", "save_every"}).c_str());
        break;
      case 11:
        ptl_tensor_names(h);
        break;
      case 12: {
        static const char* kNames[] = {"tok_emb.weight", "optim.m.ln_f.bias", "blocks.0.attn.q_proj.lora_A", "nope"};
        ptl_read_tensor(
            h, in.ConsumeBool() ? kNames[in.ConsumeIntegralInRange(0, 3)] : in.ConsumeRandomLengthString(24).c_str());
        break;
      }
      case 13: {
        const std::string name = in.ConsumeBool() ? "ln_f.bias" : in.ConsumeRandomLengthString(24);
        std::vector<uint8_t> b = in.ConsumeBytes<uint8_t>(in.ConsumeIntegralInRange(0, 64));
        ptl_write_tensor(h, name.c_str(), b.empty() && in.ConsumeBool() ? nullptr : b.data(), pick_size(in, b.size()));
        break;
      }
      case 14:
        ptl_set_step(h, pick_double(in));
        break;
      case 15:
        ptl_profile(h, in.ConsumeIntegralInRange(0, 1));
        break;
      case 16:
        if (small_session(h)) ptl_validation_loss(h);
        break;
      case 17: {
        const std::string t = pick_text(in);
        if (small_session(h)) ptl_evaluate_text(h, reinterpret_cast<const uint8_t*>(t.data()), pick_size(in, t.size()));
        break;
      }
      case 18: {
        const std::string t = pick_text(in);
        nlohmann::json o =
            nlohmann::json::parse(pick_object(in, {"temperature", "top_k", "top_p", "seed"}), nullptr, false);
        if (o.is_object()) o["max_tokens"] = in.ConsumeIntegralInRange(-1, 6);
        const std::string opts =
            o.is_discarded() ? std::string("{") : o.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
        if (in.ConsumeBool())
          ptl_generate(h, reinterpret_cast<const uint8_t*>(t.data()), pick_size(in, t.size()), opts.c_str(), nullptr);
        else
          ptl_generate_start(h, reinterpret_cast<const uint8_t*>(t.data()), pick_size(in, t.size()), opts.c_str());
        break;
      }
      case 19:
        ptl_generate_next(h);
        break;
      case 20:
        ptl_generate_stop(h);
        break;
      case 21:
        ptl_export_program(h, in.ConsumeBool() ? "train" : in.ConsumeRandomLengthString(10).c_str());
        break;
      case 22:
        if (small_session(h)) ptl_next_batch(h);
        break;
      case 23:
        ptl_lr_at(h, pick_double(in));
        ptl_dropout_key(h);
        break;
      case 24: {
        const std::string t = pick_text(in);
        if (small_session(h))
          ptl_inspect(h, reinterpret_cast<const uint8_t*>(t.data()), pick_size(in, t.size()),
                      in.ConsumeIntegralInRange(-2, 300));
        break;
      }
      case 25: {
        nlohmann::json j = nlohmann::json::parse(
            pick_object(in, {"steps", "lr", "schedule", "seed", "warmup", "dropout"}), nullptr, false);
        if (j.is_object()) {
          j["steps"] = in.ConsumeIntegralInRange(-1, 20);
          j["batch"] = in.ConsumeIntegralInRange(0, 3);
          if (in.ConsumeBool())
            j["lora"] = {{"rank", in.ConsumeIntegralInRange(0, 5)},
                         {"alpha", pick_double(in)},
                         {"targets", in.ConsumeBool() ? nlohmann::json::array({"q", "v"}) : pick_json(in)}};
        }
        ptl_start_finetune(
            h, j.is_discarded() ? "[" : j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
        break;
      }
      case 26: {
        std::string t = in.ConsumeBool() ? R"({"prompt":"Hi","response":"Yo"})"
                                           "\n"
                                         : in.ConsumeRandomLengthString(80);
        ptl_set_sft_data(h, reinterpret_cast<const uint8_t*>(t.data()), pick_size(in, t.size()), "fuzz.jsonl");
        break;
      }
      case 27: {
        std::vector<uint8_t> b = mutated_export(in, ptl_export_adapter(pick_handle(in)));
        ptl_load_adapter(h, b.data(), pick_size(in, b.size()), "fuzz");
        break;
      }
      case 28:
        ptl_lora_info(h);
        break;
      case 29:
        ptl_export_checkpoint(h, in.ConsumeBool());
        ptl_export_adapter(h);
        break;
      case 30:
        ptl_build_info();
        break;
      case 31: {  // tokenizers: a tokenizer.json from the input, or one trained on a short text
        const std::string t = in.ConsumeBool() ? in.ConsumeRandomLengthString(200) : pick_text(in);
        const int made =
            in.ConsumeBool()
                ? ptl_tokenizer_load(reinterpret_cast<const uint8_t*>(t.data()), pick_size(in, t.size()), "fuzz.json")
                : ptl_tokenizer_train(reinterpret_cast<const uint8_t*>(t.data()), pick_size(in, t.size()),
                                      in.ConsumeIntegralInRange(250, 300));
        if (made > 0) g_live_tok.push_back(made);
        break;
      }
      case 32: {
        const int tk = g_live_tok.empty() || in.ConsumeIntegralInRange(0, 7) == 0
                           ? in.ConsumeIntegral<int>()
                           : g_live_tok[in.ConsumeIntegralInRange<size_t>(0, g_live_tok.size() - 1)];
        const std::string t = pick_text(in);
        ptl_tokenizer_encode(tk, reinterpret_cast<const uint8_t*>(t.data()), pick_size(in, t.size()), in.ConsumeBool());
        std::vector<int32_t> ids;
        const int n = in.ConsumeIntegralInRange(0, 16);
        for (int i = 0; i < n; ++i) ids.push_back(in.ConsumeIntegralInRange<int32_t>(-2, 400));
        ptl_tokenizer_decode(tk, ids.empty() ? nullptr : ids.data(), pick_size(in, ids.size()));
        ptl_tokenizer_info(tk);
        ptl_tokenizer_json(tk);
        break;
      }
      case 33:
        if (!g_live_tok.empty())
          ptl_tokenizer_free(g_live_tok[in.ConsumeIntegralInRange<size_t>(0, g_live_tok.size() - 1)]);
        break;
      case 34: {
        hand_over_folder(in);
        if (in.ConsumeIntegralInRange(0, 15) == 0) ptl_folder_clear();
        if (const char* r = ptl_create_from_hf(in.ConsumeBool() ? "fuzz" : nullptr)) {
          const int made = nlohmann::json::parse(r)["handle"].get<int>();
          if (made > 0) g_live.push_back(made);
        }
        break;
      }
      case 35:
        ptl_export_peft(h, in.ConsumeBool() ? nullptr : in.ConsumeRandomLengthString(16).c_str());
        break;
      default:
        (void)ptl_last_error();
        (void)ptl_result_size();
        break;
    }
  }
  for (int h : g_live) ptl_free(h);
  g_live.clear();
  for (int h : g_live_tok) ptl_tokenizer_free(h);
  g_live_tok.clear();
  ptl_folder_clear();  // files handed over and never read: not the next input's
  return 0;
}
