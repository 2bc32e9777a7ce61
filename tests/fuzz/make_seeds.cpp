// Writes the seed inputs of tests/fuzz/corpus/ that the engine makes itself: `fuzz_make_seeds DIR`
// (DIR = tests/fuzz/corpus). Checkpoints (F32 with and without AdamW moments, F16, BF16, a bare
// weights file), a LoRA adapter of the tiny base (fuzz_common.h), programs, and the byte
// strings the structured targets decode. Deterministic: running it again rewrites the same bytes.
#include <filesystem>
#include <iostream>
#include <string>

#include "engine/lora.h"
#include "engine/safetensors.h"
#include "tests/fuzz/fuzz_common.h"

using namespace ptl;
namespace fs = std::filesystem;

namespace {

fs::path g_root;

void put(const std::string& target, const std::string& name, const std::vector<uint8_t>& bytes) {
  fs::create_directories(g_root / target);
  write_file_atomic((g_root / target / name).string(), bytes);
}
void put(const std::string& target, const std::string& name, const std::string& text) {
  put(target, name, std::vector<uint8_t>(text.begin(), text.end()));
}

std::vector<uint8_t> reencoded(const std::vector<uint8_t>& bytes, Encoding e, bool keep_metadata = true) {
  SafeTensors f = decode_safetensors(bytes.data(), bytes.size());
  if (!keep_metadata) f.metadata.clear();
  for (auto& t : f.tensors) t.encoding = e;
  return encode_safetensors(f);
}

// Bytes of a small xorshift stream: seeds for the targets that read structure out of raw bytes.
std::vector<uint8_t> noise(size_t n, uint64_t seed) {
  std::vector<uint8_t> out(n);
  for (auto& b : out) {
    seed ^= seed << 13;
    seed ^= seed >> 7;
    seed ^= seed << 17;
    b = uint8_t(seed);
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::cerr << "usage: fuzz_make_seeds tests/fuzz/corpus\n";
    return 2;
  }
  g_root = argv[1];
  cpu::set_num_threads(1);

  // fuzz_checkpoint: every kind of file the loaders accept, and a few they refuse.
  const std::vector<uint8_t> base = fuzz::base_checkpoint(true);
  const std::vector<uint8_t> weights = fuzz::base_checkpoint(false);
  put("fuzz_checkpoint", "tiny_with_optimizer.tinygpt", base);
  put("fuzz_checkpoint", "tiny_weights.tinygpt", weights);
  put("fuzz_checkpoint", "tiny_f16.tinygpt", reencoded(weights, Encoding::f16));
  put("fuzz_checkpoint", "tiny_bf16.tinygpt", reencoded(weights, Encoding::bf16));
  put("fuzz_checkpoint", "tiny_bare.safetensors", reencoded(weights, Encoding::as_dtype, false));
  {
    auto t = Trainer::from_checkpoint(base, "base");
    TrainConfig tc = fuzz::tiny_train();
    t->start_finetune(tc);
    LoraConfig lora;
    lora.rank = 1;
    lora.targets = {"q", "v", "fc_in"};
    t->enable_lora(lora, 3);
    put("fuzz_checkpoint", "tiny_adapter.safetensors", t->save_adapter());
  }
  {
    SafeTensors f;
    f.metadata["k"] = "v";
    const float x[2] = {1.5f, -2.0f};
    const int32_t i[1] = {7};
    f.add("a", DType::f32, {2}, x);
    f.add("empty", DType::f32, {0, 3}, nullptr);
    f.add("i", DType::i32, {1, 1}, i);
    f.add("scalar", DType::f32, {}, x);
    put("fuzz_checkpoint", "small_mixed.safetensors", encode_safetensors(f));
    f.tensors[0].encoding = Encoding::f16;
    f.tensors[3].encoding = Encoding::bf16;
    put("fuzz_checkpoint", "small_half.safetensors", encode_safetensors(f));
  }
  put("fuzz_checkpoint", "empty_header.safetensors", encode_safetensors(SafeTensors{}));

  // fuzz_safetensors_roundtrip reads its tensors out of the bytes (FuzzedDataProvider).
  for (int k = 0; k < 4; ++k)
    put("fuzz_safetensors_roundtrip", "noise" + std::to_string(k), noise(size_t(64) << k, 11 + k));

  // fuzz_program: the programs the engine builds for the tiny model.
  {
    const ModelConfig mc = fuzz::tiny_model();
    BuildOptions opt;
    opt.batch = 2;
    LoraConfig lora;
    lora.rank = 1;
    BuildOptions lopt = opt;
    lopt.lora = lora;
    lopt.loss_mask = true;
    TrainConfig tc = fuzz::tiny_train();
    tc.dropout = 0.1;
    put("fuzz_program", "train.json", build_train_program(mc, opt, fuzz::tiny_train()).to_json().dump());
    put("fuzz_program", "train_lora_sft_dropout.json", build_train_program(mc, lopt, tc).to_json().dump());
    put("fuzz_program", "eval.json", build_eval_program(mc, opt).to_json().dump());
    put("fuzz_program", "generate.json", build_generate_program(mc).to_json().dump());
    put("fuzz_program", "generate_prompt.json", build_generate_program(mc, {}, 3).to_json().dump());
    put("fuzz_program", "inspect.json", build_inspect_program(mc, 3).to_json().dump());
  }

  // fuzz_c_api reads a sequence of calls out of the bytes; fuzz_sft_corpus's are hand-written.
  for (int k = 0; k < 4; ++k) put("fuzz_c_api", "noise" + std::to_string(k), noise(size_t(96) << k, 101 + k));
  std::cout << "seeds written under " << g_root.string() << "\n";
  return 0;
}
