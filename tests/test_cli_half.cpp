// Half-precision checkpoints as a user meets them: `ptl export --dtype f16|bf16` writes the
// weights in 16 bits (half the data), every command loads them widened to F32, greedy text
// matches the F32 model's, and `ptl train --resume` continues from one as from any export.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <tuple>

#include "engine/half.h"
#include "engine/trainer.h"
#include "test_util.h"

using namespace ptl;
using namespace ptl::test;

namespace {

uint64_t header_bytes(const std::vector<uint8_t>& file) {
  uint64_t n = 0;
  std::memcpy(&n, file.data(), 8);
  return 8 + n;
}

// The largest |difference| of the logits of two checkpoints on the same windows of text.
float max_logit_difference(const std::vector<uint8_t>& a, const std::vector<uint8_t>& b, const std::string& text) {
  auto ta = Trainer::from_checkpoint(a, "a"), tb = Trainer::from_checkpoint(b, "b");
  const int T = ta->model_config().ctx, V = ta->model_config().vocab_size, B = 4;
  Batch batch{B, T, {}, {}};
  for (int i = 0; i < B * T; ++i) {
    batch.inputs.push_back(static_cast<unsigned char>(text[size_t(i)]));
    batch.targets.push_back(static_cast<unsigned char>(text[size_t(i) + 1]));
  }
  const float *la = ta->logits(batch), *lb = tb->logits(batch);
  float worst = 0;
  for (int i = 0; i < B * T * V; ++i) worst = std::max(worst, std::fabs(la[i] - lb[i]));
  return worst;
}

size_t common_prefix(const std::string& a, const std::string& b) {
  size_t n = 0;
  while (n < a.size() && n < b.size() && a[n] == b[n]) ++n;
  return n;
}

}  // namespace

TEST(CliHalf, ExportF16AndBF16HalveTheWeightsAndKeepGreedyText) {
  test::TempDir d;
  const std::string text = test::synthetic_text(20000);
  write(d.file("t.txt"), text);
  CliRun r = ptl_cli("train --preset tiny --sample-every 0 --data t.txt --steps 150 --eval-every 150 --out run", d);
  ASSERT_EQ(r.code, 0) << r.err;
  ASSERT_EQ(ptl_cli("export run/model.tinygpt --out plain.tinygpt", d).code, 0);
  for (const char* dtype : {"f32", "f16", "bf16"}) {
    r = ptl_cli(std::string("export run/model.tinygpt --out w_") + dtype + ".tinygpt --dtype " + dtype, d);
    ASSERT_EQ(r.code, 0) << r.err;
  }
  const CliRun bad = ptl_cli("export run/model.tinygpt --out x.tinygpt --dtype f64", d);  // a usage error (CLI11)
  EXPECT_NE(bad.code, 0);
  EXPECT_NE(bad.err.find("--dtype"), std::string::npos) << bad.err;
  EXPECT_FALSE(std::filesystem::exists(d.file("x.tinygpt")));
  const auto f32 = read_file_bytes(d.file("w_f32.tinygpt"));
  EXPECT_EQ(f32, read_file_bytes(d.file("plain.tinygpt")));  // --dtype f32 is the default: today's export

  const SafeTensors wide = decode_safetensors(f32.data(), f32.size());
  const std::string prompt = "the king ";
  const auto sample = [&](const std::string& file) {
    CliRun s = ptl_cli("sample " + file + " --prompt '" + prompt + "' --max-tokens 160 --temperature 0 --raw", d);
    EXPECT_EQ(s.code, 0) << s.err;
    return s.out;
  };
  const std::string greedy32 = sample("w_f32.tinygpt");
  ASSERT_GE(greedy32.size(), prompt.size() + 160);

  for (const auto& [dtype, encoding, name] :
       {std::tuple{"f16", Encoding::f16, "F16"}, std::tuple{"bf16", Encoding::bf16, "BF16"}}) {
    SCOPED_TRACE(dtype);
    const std::string file = std::string("w_") + dtype + ".tinygpt";
    const auto half = read_file_bytes(d.file(file));
    // The data area is exactly half; the header differs only in dtype names and offsets.
    EXPECT_EQ(2 * (half.size() - header_bytes(half)), f32.size() - header_bytes(f32));
    const double ratio = double(half.size()) / double(f32.size());
    EXPECT_GT(ratio, 0.5);
    EXPECT_LT(ratio, 0.51);
    std::printf("[ sizes    ] %s: %zu bytes, F32 export %zu bytes, full checkpoint %zu bytes (ratio to F32 %.4f)\n",
                dtype, half.size(), f32.size(), read_file_bytes(d.file("run/model.tinygpt")).size(), ratio);

    // Every tensor is stored rounded to nearest even and read back widened; the metadata is the same.
    const SafeTensors h = decode_safetensors(half.data(), half.size());
    EXPECT_EQ(h.metadata, wide.metadata);
    ASSERT_EQ(h.tensors.size(), wide.tensors.size());
    for (const auto& t : h.tensors) {
      EXPECT_EQ(t.encoding, encoding) << t.name;
      const StoredTensor* w = wide.find(t.name);
      ASSERT_NE(w, nullptr) << t.name;
      for (int64_t i = 0; i < t.numel(); ++i) {
        const float x = w->f32()[i];
        const float want = encoding == Encoding::f16 ? f16_to_f32(f32_to_f16(x)) : bf16_to_f32(f32_to_bf16(x));
        ASSERT_EQ(std::bit_cast<uint32_t>(t.f32()[i]), std::bit_cast<uint32_t>(want)) << t.name << "[" << i << "]";
      }
    }
    std::string head(reinterpret_cast<const char*>(half.data()) + 8, header_bytes(half) - 8);
    EXPECT_NE(head.find(std::string("\"dtype\":\"") + name + "\""), std::string::npos);
    EXPECT_EQ(head.find("\"F32\""), std::string::npos);

    // Every command loads it.
    CliRun info = ptl_cli("info " + file + " --json", d);
    ASSERT_EQ(info.code, 0) << info.err;
    EXPECT_EQ(nlohmann::json::parse(info.out)["weights_dtype"], name);
    CliRun ev = ptl_cli("eval " + file + " --data t.txt --json", d),
           ev32 = ptl_cli("eval w_f32.tinygpt --data t.txt --json", d);
    ASSERT_EQ(ev.code, 0) << ev.err;
    const double loss = nlohmann::json::parse(ev.out)["loss"].get<double>(),
                 loss32 = nlohmann::json::parse(ev32.out)["loss"].get<double>();
    EXPECT_NEAR(loss, loss32, encoding == Encoding::f16 ? 1e-3 : 1e-2);

    // Greedy text. F16 keeps 11 significant bits of every weight, BF16 8: the logits move by at
    // most the bounds below on this model, and greedy decoding changes only where the two most
    // likely bytes are closer than that.
    const float diff = max_logit_difference(f32, half, text);
    const std::string greedy = sample(file);
    const size_t same = common_prefix(greedy, greedy32);
    std::printf("[ greedy   ] %s: max |logit difference| %.3g, greedy text equal for %zu of %zu bytes%s\n", dtype, diff,
                same, greedy32.size(), greedy == greedy32 ? " (identical)" : "");
    EXPECT_LT(diff, encoding == Encoding::f16 ? 0.01f : 0.1f);
    EXPECT_GT(diff, 0.0f);  // the weights did change: the comparison is not of a file with itself
    EXPECT_EQ(greedy, greedy32);
  }
}

// A half export resumes as an F32 export does: the weights (widened), fresh AdamW moments, the
// run's step and data position from the metadata; what it writes is an F32 checkpoint again.
TEST(CliHalf, ResumeFromAHalfExportStartsFreshMoments) {
  test::TempDir d;
  write(d.file("t.txt"), test::synthetic_text(20000));
  ASSERT_EQ(ptl_cli("train --preset tiny --sample-every 0 --data t.txt --steps 40 --until 20 --out run", d).code, 0);
  std::filesystem::create_directories(d.path / "f32");
  std::filesystem::create_directories(d.path / "f16");
  ASSERT_EQ(ptl_cli("export run/model.tinygpt --out f32/w.tinygpt", d).code, 0);
  ASSERT_EQ(ptl_cli("export run/model.tinygpt --out f16/w.tinygpt --dtype f16", d).code, 0);
  std::vector<double> first;
  for (const char* dir : {"f32", "f16"}) {
    SCOPED_TRACE(dir);
    CliRun r = ptl_cli(std::string("train --resume ") + dir + "/w.tinygpt", d);
    ASSERT_EQ(r.code, 0) << r.err;
    EXPECT_NE(r.out.find("has no optimizer state"), std::string::npos) << r.out;
    const auto bytes = read_file_bytes(d.file(std::string(dir) + "/model.tinygpt"));
    const SafeTensors f = decode_safetensors(bytes.data(), bytes.size());
    for (const auto& t : f.tensors) EXPECT_EQ(t.encoding, Encoding::as_dtype) << t.name;
    auto tr = Trainer::from_checkpoint(bytes, dir);
    EXPECT_EQ(tr->state().step, 40);
    EXPECT_NE(f.find("optim.m.tok_emb.weight"), nullptr);
    std::ifstream m(d.file(std::string(dir) + "/metrics.jsonl"));
    std::string line;
    ASSERT_TRUE(std::getline(m, line));
    const auto j = nlohmann::json::parse(line);
    EXPECT_EQ(j["step"].get<int>(), 21);
    first.push_back(j["train_loss"].get<double>());
  }
  // The same batch at step 21 on weights that differ by F16 rounding.
  EXPECT_NEAR(first[0], first[1], 1e-3);
}

TEST(CliHalf, UnsupportedDtypeNamesTensorAndDtype) {
  test::TempDir d;
  write(d.file("t.txt"), test::synthetic_text(5000));
  ASSERT_EQ(ptl_cli("train --preset tiny --sample-every 0 --data t.txt --steps 2 --out run", d).code, 0);
  ASSERT_EQ(ptl_cli("export run/model.tinygpt --out w.tinygpt --dtype bf16", d).code, 0);
  std::string bytes = slurp(d.file("w.tinygpt"));
  const std::string from = R"("ln_f.bias":{"dtype":"BF16")", to = R"("ln_f.bias":{"dtype":"BF17")";
  const size_t at = bytes.find(from);
  ASSERT_NE(at, std::string::npos);
  bytes.replace(at, from.size(), to);
  write(d.file("odd.tinygpt"), bytes);
  expect_error(ptl_cli("sample odd.tinygpt --max-tokens 5", d),
               "odd.tinygpt: tensor 'ln_f.bias' has dtype BF17; only F32, F16, BF16 and I32 are supported");
}
