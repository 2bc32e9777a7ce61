// Writes what tests/python/test_lora_parity.py compares against: a base checkpoint, the initial
// adapter, N LoRA training steps (batches with their loss masks, learning rates, losses, gradient
// norms), the adapter gradients of the first and the last step, and the final adapter.
//
//   ptl_lora_dump --preset tiny --data FILE(.jsonl = SFT, masked | text) --steps 50 --out DIR
//                 [--seed S] [--rank R] [--alpha A] [--targets q,v] [--lr X] [--dropout P]
// --dropout is the adapters' (LoRA) dropout; step s (0-based) draws the masks of {key_of(seed), s + 1}.
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>

#include "engine/error.h"
#include "engine/trainer.h"

using namespace ptl;

int main(int argc, char** argv) {
  std::string preset = "tiny", data, out, targets = "q,v";
  int64_t steps = 50;
  uint64_t seed = 1234;
  int rank = 4;
  double alpha = 8.0, lr = 1e-2, dropout = 0;
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
    else if (k == "--rank")
      rank = std::stoi(v);
    else if (k == "--alpha")
      alpha = std::stod(v);
    else if (k == "--targets")
      targets = v;
    else if (k == "--lr")
      lr = std::stod(v);
    else if (k == "--dropout")
      dropout = std::stod(v);
    else {
      std::cerr << "unknown option " << k << "\n";
      return 2;
    }
  }
  if (data.empty() || out.empty()) {
    std::cerr << "usage: ptl_lora_dump --preset NAME --steps N --data FILE --out DIR [--seed S] [--rank R] [--alpha A] "
                 "[--targets LIST] [--lr X] [--dropout P]\n";
    return 2;
  }
  try {
    namespace fs = std::filesystem;
    fs::create_directories(out);
    const Preset& p = find_preset(preset);
    TrainConfig tc;
    tc.batch = p.batch;
    tc.steps = steps;
    tc.seed = seed;
    // The base: seeded weights, written and loaded back so that the adapter records its sha256.
    write_file_atomic(out + "/base.tinygpt", Trainer(p.model, tc).save_checkpoint(false));
    auto trainer = Trainer::from_checkpoint(read_file_bytes(out + "/base.tinygpt"), "base.tinygpt");
    tc.lr = lr;
    tc.data_path = data;
    trainer->start_finetune(tc);
    const bool sft = data.ends_with(".jsonl");
    std::unique_ptr<SftData> sft_data;
    if (sft)
      sft_data = std::make_unique<SftData>(read_sft_file(data), p.model.ctx, 0.0, data);
    else
      trainer->set_corpus(read_text_file(data), data);
    LoraConfig lora;
    lora.rank = rank;
    lora.alpha = alpha;
    lora.targets = parse_lora_targets(targets);
    lora.dropout = dropout;
    trainer->enable_lora(lora, seed);
    write_file_atomic(out + "/adapter_init.tinygpt-lora", trainer->save_adapter());

    nlohmann::json dump;
    dump["model_config"] = p.model.to_json();
    dump["train_config"] = tc.to_json();
    dump["lora_config"] = lora_to_json(lora);
    dump["batch"] = tc.batch;
    dump["ctx"] = p.model.ctx;
    dump["sft"] = sft;
    auto& js = dump["steps"] = nlohmann::json::array();
    Rng rng = trainer->state().data_rng;
    auto dump_grads = [&](const std::string& file) {
      SafeTensors grads;
      for (const auto& t : adapter_tensors(p.model, lora))
        grads.add(t.name, DType::f32, t.shape, trainer->gradient(t.name));
      write_file_atomic(out + "/" + file, encode_safetensors(grads));
    };
    for (int64_t s = 0; s < steps; ++s) {
      Batch b = sft ? sft_data->sample_train(rng, tc.batch) : trainer->corpus().sample_train(rng, tc.batch);
      const double lr_s = tc.lr_at(s);
      StepResult r = trainer->train_step(b);
      if (s == 0) dump_grads("grads_first.safetensors");
      if (s == steps - 1) dump_grads("grads_last.safetensors");
      nlohmann::json j = {
          {"inputs", b.inputs}, {"targets", b.targets}, {"lr", lr_s}, {"loss", r.loss}, {"grad_norm", r.grad_norm}};
      if (!b.mask.empty()) j["mask"] = b.mask;
      js.push_back(std::move(j));
    }
    write_file_atomic(out + "/adapter_final.tinygpt-lora", trainer->save_adapter());
    std::ofstream(out + "/dump.json") << dump.dump();
    std::printf("wrote %s (%lld LoRA steps, final loss %.4f)\n", out.c_str(), (long long)steps,
                js.back()["loss"].get<double>());
  } catch (const std::exception& e) {
    std::cerr << "ptl_lora_dump: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
