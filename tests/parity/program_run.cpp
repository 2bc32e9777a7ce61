// Runs a serialised program (`ptl program --out FILE`) on the CPU executor, so another executor
// (the WebGPU backend, web/webgpu) can be compared with the C++ kernels on exactly the same
// inputs. Two modes:
//
//   ptl_program_run train --init W.tinygpt --program train.json --batches batches.json --out result.json
//                         [--save final.safetensors] [--dump-step N --dump FILE]
//     Loads the parameters from W (safetensors; optimizer moments too when present), then for every
//     entry of batches.json {"steps": [{"tokens": [...], "targets": [...], "lr": x}, ...],
//     "first_step": 1} writes the inputs and optim.hparams = [lr, step] (and, for a program with
//     dropout, dropout.seed = {"dropout_key" of batches.json, step}) and runs the program.
//     result.json: {"losses": [...], "grad_norms": [...]}. --save writes the persistent tensors
//     (parameters and AdamW moments) after the last step; --dump writes every tensor of the
//     program after step N (1-based), for debugging a divergence op by op.
//
//   ptl_program_run kernel --program op.json --in in.safetensors --out out.safetensors
//     The program is usually one op over a few tensors. Every tensor named in `in` is copied into
//     the program's tensor of that name (same element count) before the run, including outputs
//     (their initial value matters for ops with acc<i> = 1); `out` receives every tensor of the
//     program after one run (ptl::run_program_once, engine/program_run.h, which the WebAssembly
//     API's ptl_run_program also calls; tensors share no memory, so each keeps its own value).
//
//   ptl_program_run model --checkpoint M.tinygpt --tokens 1,2,3 --greedy N --out result.json
//     A checkpoint's logits on one sequence of token ids (the evaluation program) and its greedy
//     continuation of N tokens (the generation program with the KV cache), whatever its vocabulary:
//     result.json {"logits": [[V floats] per position], "greedy": [N ids]}. For models whose
//     tokens are no bytes (tests/python/test_hf_gpt2.py), which `ptl sample` cannot print.
#include "engine/program_run.h"

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iostream>
#include <map>
#include <string>

#include "engine/backends/cpu/cpu_backend.h"
#include "engine/error.h"
#include "engine/program.h"
#include "engine/safetensors.h"
#include "engine/trainer.h"

using namespace ptl;

namespace {

nlohmann::json read_json(const std::string& path) {
  auto bytes = read_file_bytes(path);
  return nlohmann::json::parse(bytes.begin(), bytes.end());
}

SafeTensors read_safetensors(const std::string& path) {
  auto bytes = read_file_bytes(path);
  return decode_safetensors(bytes.data(), bytes.size(), path);
}

std::map<std::string, std::string> parse_args(int argc, char** argv, int first) {
  std::map<std::string, std::string> a;
  for (int i = first; i < argc; i += 2) {
    std::string k = argv[i];
    check(k.starts_with("--") && i + 1 < argc, "bad option " + k);
    a[k.substr(2)] = argv[i + 1];
  }
  return a;
}

std::string need(const std::map<std::string, std::string>& a, const std::string& k) {
  auto it = a.find(k);
  check(it != a.end(), "missing --" + k);
  return it->second;
}

int run_train(const std::map<std::string, std::string>& a) {
  Program prog = Program::from_json(read_json(need(a, "program")));
  cpu::TensorStore store;
  // A dump must show every tensor's own value, so then no two tensors share memory.
  cpu::Executor ex(prog, store, /*share_memory=*/a.count("dump-step") == 0);
  const SafeTensors init = read_safetensors(need(a, "init"));
  load_tensors(ex, init, false);
  const nlohmann::json batches = read_json(need(a, "batches"));
  const int64_t first_step = batches.value("first_step", int64_t(1));
  const int64_t dump_step = a.count("dump-step") ? std::stoll(a.at("dump-step")) : -1;
  nlohmann::json losses = nlohmann::json::array(), norms = nlohmann::json::array();
  int64_t s = 0;
  const int tok = prog.id("tokens"), tgt = prog.id("targets"), hp = prog.id("optim.hparams");
  // A program with dropout: dropout.seed = {key, step}, key = batches.json's "dropout_key" (what
  // dropout::key_of makes of the run's seed).
  const int dk = prog.find("dropout.seed");
  check(dk < 0 || batches.contains("dropout_key"), "the program has dropout: give \"dropout_key\" in the batches");
  const uint32_t dropout_key = dk >= 0 ? batches.at("dropout_key").get<uint32_t>() : 0;
  for (const auto& b : batches.at("steps")) {
    const auto tokens = b.at("tokens").get<std::vector<int32_t>>();
    const auto targets = b.at("targets").get<std::vector<int32_t>>();
    check(int64_t(tokens.size()) == prog.tensor(tok).numel() && int64_t(targets.size()) == prog.tensor(tgt).numel(),
          "batch " + std::to_string(s) + " does not match the program's tokens/targets shape");
    std::memcpy(ex.data(tok), tokens.data(), tokens.size() * 4);
    std::memcpy(ex.data(tgt), targets.data(), targets.size() * 4);
    float* h = static_cast<float*>(ex.data(hp));
    h[0] = b.at("lr").get<float>();
    h[1] = float(first_step + s);
    if (dk >= 0) {
      const uint32_t seed[2] = {dropout_key, uint32_t(first_step + s)};
      std::memcpy(ex.data(dk), seed, sizeof seed);
    }
    ex.run();
    losses.push_back(ex.f32("loss")[0]);
    norms.push_back(ex.f32("grad_norm")[0]);
    ++s;
    if (s == dump_step) write_file_atomic(need(a, "dump"), encode_safetensors(collect_tensors(ex, false)));
  }
  nlohmann::json res = {{"losses", losses}, {"grad_norms", norms}};
  const std::string text = res.dump();
  write_file_atomic(need(a, "out"), std::vector<uint8_t>(text.begin(), text.end()));
  if (a.count("save")) write_file_atomic(a.at("save"), encode_safetensors(collect_tensors(ex, true)));
  return 0;
}

int run_model(const std::map<std::string, std::string>& a) {
  const std::string path = need(a, "checkpoint");
  auto trainer = Trainer::from_checkpoint(read_file_bytes(path), path);
  std::vector<int32_t> tokens;
  const std::string list = need(a, "tokens");
  for (size_t pos = 0; pos < list.size();) {
    const size_t comma = std::min(list.find(',', pos), list.size());
    tokens.push_back(int32_t(std::stol(list.substr(pos, comma - pos))));
    pos = comma + 1;
  }
  check(!tokens.empty(), "--tokens names no token");
  const int V = trainer->model_config().vocab_size, T = int(tokens.size());
  Batch b;
  b.batch = 1;
  b.seq = T;
  b.inputs = tokens;
  b.targets.assign(tokens.size(), 0);
  const float* logits = trainer->logits(b);
  nlohmann::json rows = nlohmann::json::array();
  for (int t = 0; t < T; ++t) rows.push_back(std::vector<float>(logits + int64_t(t) * V, logits + int64_t(t + 1) * V));
  SamplingOptions greedy;
  greedy.temperature = 0;
  const auto more = trainer->generate(tokens, std::stoi(need(a, "greedy")), greedy);
  const std::string text = nlohmann::json{{"logits", rows}, {"greedy", more}}.dump();
  write_file_atomic(need(a, "out"), std::vector<uint8_t>(text.begin(), text.end()));
  return 0;
}

int run_kernel(const std::map<std::string, std::string>& a) {
  const Program prog = Program::from_json(read_json(need(a, "program")));
  const SafeTensors out = run_program_once(prog, read_safetensors(need(a, "in")));
  write_file_atomic(need(a, "out"), encode_safetensors(out));
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string mode = argc >= 2 ? argv[1] : "";
  if (mode != "train" && mode != "kernel" && mode != "model") {
    std::cerr << "usage: ptl_program_run train --init W --program P.json --batches B.json --out R.json "
                 "[--save S] [--dump-step N --dump F]\n"
                 "       ptl_program_run kernel --program P.json --in IN.safetensors --out OUT.safetensors\n"
                 "       ptl_program_run model --checkpoint M.tinygpt --tokens 1,2,3 --greedy N --out R.json\n";
    return 2;
  }
  try {
    auto a = parse_args(argc, argv, 2);
    return mode == "train" ? run_train(a) : mode == "kernel" ? run_kernel(a) : run_model(a);
  } catch (const std::exception& e) {
    std::cerr << "ptl_program_run: " << e.what() << "\n";
    return 1;
  }
}
