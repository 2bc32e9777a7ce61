// Files are data (docs/reliability.md): the inputs the fuzz targets of tests/fuzz found or were
// built to rule out, each refused with a ptl::Error naming the problem, in every build type.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <nlohmann/json.hpp>

#include "engine/checkpoint.h"
#include "engine/data.h"
#include "engine/error.h"
#include "engine/lora.h"
#include "engine/program.h"
#include "engine/sft.h"
#include "test_util.h"

using namespace ptl;
using nlohmann::json;
using ptl::test::error_of;

namespace {

json tiny_program() {
  return json::parse(R"({"format": "ptl-program", "version": 1, "name": "t",
    "tensors": [{"name": "x", "kind": "input", "dtype": "f32", "shape": [2, 3], "trainable": false},
                {"name": "y", "kind": "activation", "dtype": "f32", "shape": [2, 3], "trainable": false}],
    "ops": [{"op": "gelu", "inputs": [0], "outputs": [1], "attrs": {}}]})");
}

}  // namespace

TEST(UntrustedInput, JsonIntegersAreRangeChecked) {
  EXPECT_EQ(json_int(json(5), 0, 10, "n"), 5);
  EXPECT_EQ(json_int(json(1e3), 0, 1000, "n"), 1000);  // an integral float, as some writers give
  EXPECT_EQ(json_u64(json(std::numeric_limits<uint64_t>::max()), "seed"), std::numeric_limits<uint64_t>::max());
  EXPECT_EQ(error_of([] { json_int(json(11), 0, 10, "n"); }), "n must be an integer from 0 to 10, got 11");
  EXPECT_EQ(error_of([] { json_int(json(1e300), 0, 10, "n"); }), "n must be an integer from 0 to 10, got 1e+300");
  EXPECT_EQ(error_of([] { json_int(json(2.5), 0, 10, "n"); }), "n must be an integer from 0 to 10, got 2.5");
  EXPECT_EQ(error_of([] { json_int(json("3"), 0, 10, "n"); }), "n must be an integer from 0 to 10, got \"3\"");
  EXPECT_EQ(error_of([] { json_int(json(std::numeric_limits<uint64_t>::max()), 0, 10, "n"); }),
            "n must be an integer from 0 to 10, got 18446744073709551615");
  EXPECT_NE(error_of([] { json_u64(json(-1), "seed"); }), "(no error)");
}

TEST(UntrustedInput, ConfigIntegersDoNotWrapAround) {
  // 2^32 + 256 once became vocab_size 256 and passed validation.
  json m = ModelConfig{}.to_json();
  m["vocab_size"] = (int64_t(1) << 32) + 256;
  EXPECT_EQ(error_of([&] { ModelConfig::from_json(m); }),
            "model config: 'vocab_size' must be an integer from -2147483648 to 2147483647, got 4294967552");
  json t = TrainConfig{}.to_json();
  t["batch"] = 1e300;  // converting this to int was undefined behaviour
  EXPECT_EQ(error_of([&] { TrainConfig::from_json(t); }),
            "train config: 'batch' must be an integer from -2147483648 to 2147483647, got 1e+300");
  t["batch"] = 16.0;
  EXPECT_EQ(TrainConfig::from_json(t).batch, 16);
  // AdamW divides by (1 - beta2^t) and sqrt(v) + eps: a beta of 1 or more, or an eps of 0, is no optimizer.
  for (const char* key : {"beta1", "beta2"}) {
    json b = TrainConfig{}.to_json();
    b[key] = 1.0;
    EXPECT_EQ(error_of([&] { TrainConfig::from_json(b); }), "AdamW's beta1 and beta2 must be in [0, 1)") << key;
  }
  t["eps"] = 0.0;
  EXPECT_EQ(error_of([&] { TrainConfig::from_json(t); }), "AdamW's eps must be a positive number");
  EXPECT_NE(error_of([] { lora_from_json({{"rank", 1e20}, {"alpha", 8}, {"targets", {"q"}}}); }), "(no error)");
}

TEST(UntrustedInput, ProgramReaderBoundsEverything) {
  EXPECT_EQ(Program::from_json(tiny_program()).to_json(), Program::from_json(tiny_program()).to_json());
  auto refused = [](const std::function<void(json&)>& edit) {
    json j = tiny_program();
    edit(j);
    return error_of([&] { Program::from_json(j); });
  };
  EXPECT_EQ(refused([](json& j) { j["tensors"][0]["dtype"] = "I32"; }),
            "program: tensor 'x' has dtype 'I32' (f32 or i32)");
  EXPECT_EQ(refused([](json& j) { j["tensors"][1]["name"] = "x"; }), "program: tensor 'x' declared twice");
  EXPECT_EQ(refused([](json& j) { j["tensors"][0]["shape"] = {-1}; }),
            "program: tensor 'x' shape must be an integer from 0 to 1099511627776, got -1");
  // Each dimension is in range, their product is not (it overflowed int64 before).
  EXPECT_EQ(refused([](json& j) {
              j["tensors"][0]["shape"] = {int64_t(1) << 40, int64_t(1) << 40};
            }),
            "program: tensor 'x' shape holds more than 1099511627776 bytes");
  EXPECT_EQ(refused([](json& j) { j["ops"][0]["inputs"] = {1e300}; }),
            "program: op input must be an integer from -1 to 1, got 1e+300");
  EXPECT_EQ(refused([](json& j) { j["ops"][0]["outputs"] = {2}; }),
            "program: op output must be an integer from -1 to 1, got 2");
  EXPECT_EQ(refused([](json& j) { j["tensors"][0]["name"] = 3; }), "program: type must be string, but is number");
  EXPECT_EQ(refused([](json& j) { j["version"] = "1"; }), "unsupported program version");
  // A zero dimension makes the tensor empty whatever the others are.
  json z = tiny_program();
  z["tensors"][0]["shape"] = {0, int64_t(1) << 40, int64_t(1) << 40};
  z["tensors"][1]["shape"] = z["tensors"][0]["shape"];  // gelu's y: x's element count (program_check.h)
  EXPECT_EQ(Program::from_json(z).tensors[0].bytes(), 0);
}

TEST(UntrustedInput, EmptyTensorWithHugeDimensions) {
  // Valid (zero elements), but its other dimensions multiply past int64: numel() overflowed.
  const std::string header = R"({"z":{"dtype":"F32","shape":[4611686018427387904,4611686018427387904,0],)"
                             R"("data_offsets":[0,0]}})";
  std::vector<uint8_t> file(8 + header.size());
  const uint64_t n = header.size();
  std::memcpy(file.data(), &n, 8);
  std::memcpy(file.data() + 8, header.data(), header.size());
  const SafeTensors st = decode_safetensors(file.data(), file.size());
  ASSERT_EQ(st.tensors.size(), 1u);
  EXPECT_EQ(st.tensors[0].numel(), 0);
  EXPECT_TRUE(st.tensors[0].data.empty());
}

TEST(UntrustedInput, CheckpointMetadataNumbers) {
  // Loss history steps that are not integers are skipped, not converted (1e300 was undefined).
  SafeTensors f = with_checkpoint_metadata({}, ModelConfig{256, 1, 4, 1, 4});
  f.metadata["loss_history"] = "[[1e300, 2.0], [3, 1.5]]";
  f.metadata["train_state"] = R"({"step": 1e300})";
  EXPECT_EQ(error_of([&] { inspect_checkpoint(f, "c"); }),
            "c: bad train_state: train_state step must be an integer from 0 to 9223372036854775807, got 1e+300");
  // infer_model_config: a block index past any model's is no layer (atoi overflowed on it).
  SafeTensors bare;
  const std::vector<float> tok(256 * 4), pos(4 * 4), one(4);
  bare.add("tok_emb.weight", DType::f32, {256, 4}, tok.data());
  bare.add("pos_emb.weight", DType::f32, {4, 4}, pos.data());
  bare.add("blocks.99999999999.ln1.weight", DType::f32, {4}, one.data());
  EXPECT_EQ(error_of([&] { infer_model_config(bare, 1, "w"); }),
            "w: no blocks.{i} tensors: not the parameters of this GPT");
}

TEST(UntrustedInput, DataParametersAndNumbers) {
  EXPECT_EQ(error_of([] { parse_sft_jsonl("{\"prompt\": 1e999, \"response\": \"x\"}\n", "d.jsonl"); }),
            "d.jsonl line 1: not valid JSON (a number out of range)");
  const std::string text(200, 'a');
  EXPECT_EQ(error_of([&] { Corpus(text, 8, std::nan("")); }), "corpus: the validation fraction must be in [0, 1)");
  EXPECT_EQ(error_of([&] { Corpus(text, 0, 0.1); }), "corpus: the context length must be at least 1, got 0");
  EXPECT_EQ(error_of([&] { text_windows(text, 0); }), "the context length must be at least 1, got 0");
  Corpus c(text, 8, 0.1);
  Rng rng(1);
  EXPECT_EQ(error_of([&] { c.sample_train(rng, 0); }), "batch must be at least 1, got 0");
}
