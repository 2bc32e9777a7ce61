// Writes what python_ref's parity tests compare against: initial weights, the first batch's
// logits and gradients, N training steps (batches, learning rates, losses, gradient norms) and
// a greedy continuation from the trained weights. See tests/python/test_parity.py.
//
// --vocab V gives the model V tokens instead of 256 (tests/python/test_vocab_parity.py): each
// byte b of a batch becomes token b * 7919 mod V (one-to-one for these V), so that the inputs and
// targets spread over the whole vocabulary; the greedy continuation is then left out.
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>

#include "engine/error.h"
#include "engine/trainer.h"

using namespace ptl;

int main(int argc, char** argv) {
  std::string preset = "tiny", data, out;
  int64_t steps = 50;
  uint64_t seed = 1234;
  double dropout = 0;
  int vocab = 256, batch = 0;
  std::string gelu = "erf";
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string k = argv[i], v = argv[i + 1];
    if (k == "--preset")
      preset = v;
    else if (k == "--steps")
      steps = std::stoll(v);
    else if (k == "--data")
      data = v;
    else if (k == "--out")
      out = v;
    else if (k == "--seed")
      seed = std::stoull(v);
    else if (k == "--dropout")
      dropout = std::stod(v);
    else if (k == "--vocab")
      vocab = std::stoi(v);
    else if (k == "--batch")
      batch = std::stoi(v);
    else if (k == "--gelu")
      gelu = v;
    else {
      std::cerr << "unknown option " << k << "\n";
      return 2;
    }
  }
  if (data.empty() || out.empty()) {
    std::cerr << "usage: ptl_parity_dump --preset NAME --steps N --data FILE --out DIR [--seed S] [--dropout P] "
                 "[--vocab V] [--batch B] [--gelu erf|tanh]\n";
    return 2;
  }
  try {
    namespace fs = std::filesystem;
    fs::create_directories(out);
    Preset p = find_preset(preset);
    p.model.vocab_size = vocab;
    if (batch > 0) p.batch = batch;
    p.model.gelu = gelu;  // tanh: GPT-2's form
    TrainConfig tc;
    tc.batch = p.batch;
    tc.steps = steps;
    tc.seed = seed;
    tc.lr = 1e-3;          // larger than the default so 50 steps move the weights visibly
    tc.dropout = dropout;  // step s (0-based) draws the masks of {key_of(seed), s + 1}
    Trainer trainer(p.model, tc);
    // Byte windows of the text, drawn here rather than through the trainer: a model of another
    // vocabulary reads token ids only (no tokenizer), and its ids are mapped from the bytes below.
    const Corpus corpus(read_text_file(data), p.model.ctx, 0.1, data);
    write_file_atomic(out + "/init.tinygpt", trainer.save_checkpoint(false));

    nlohmann::json dump;
    dump["model_config"] = p.model.to_json();
    dump["train_config"] = tc.to_json();
    dump["batch"] = tc.batch;
    dump["ctx"] = p.model.ctx;
    auto& js = dump["steps"] = nlohmann::json::array();
    Rng rng = trainer.state().data_rng;
    for (int64_t s = 0; s < steps; ++s) {
      Batch b = corpus.sample_train(rng, tc.batch);
      if (vocab != 256)
        for (auto* ids : {&b.inputs, &b.targets})
          for (auto& t : *ids) t = int32_t(int64_t(t) * 7919 % vocab);
      if (s == 0) {
        std::ofstream lf(out + "/logits_step0.bin", std::ios::binary);
        lf.write(reinterpret_cast<const char*>(trainer.logits(b)), std::streamsize(b.inputs.size()) * vocab * 4);
      }
      const double lr = tc.lr_at(s);
      StepResult r = trainer.train_step(b);
      if (s == 0) {
        SafeTensors grads;
        for (const auto& t : parameter_list(p.model)) grads.add(t.name, DType::f32, t.shape, trainer.gradient(t.name));
        write_file_atomic(out + "/grads_step0.tinygpt", encode_safetensors(grads));
      }
      js.push_back(
          {{"inputs", b.inputs}, {"targets", b.targets}, {"lr", lr}, {"loss", r.loss}, {"grad_norm", r.grad_norm}});
    }
    write_file_atomic(out + "/final.tinygpt", trainer.save_checkpoint(false));
    if (vocab != 256) {
      std::ofstream(out + "/dump.json") << dump.dump();
      std::printf("wrote %s (vocabulary %d, %lld steps)\n", out.c_str(), vocab, (long long)steps);
      return 0;
    }
    const std::string prompt = "ROMEO:\nWhat say";
    SamplingOptions greedy;
    greedy.temperature = 0;
    auto tokens = trainer.generate(encode(prompt), 200, greedy);
    dump["greedy"] = {{"prompt", prompt},
                      {"prompt_tokens", encode(prompt)},
                      {"max_tokens", 200},
                      {"tokens", tokens},
                      {"checkpoint", "final.tinygpt"}};
    std::ofstream(out + "/dump.json") << dump.dump();
    std::printf("wrote %s (%lld steps, final loss %.4f)\n", out.c_str(), (long long)steps,
                js.back()["loss"].get<double>());
  } catch (const std::exception& e) {
    std::cerr << "ptl_parity_dump: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
