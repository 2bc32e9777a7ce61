// `ptl` over a BPE tokenizer as a user meets it: `ptl train --tokenizer`, and the checkpoint's
// tokenizer in sample, eval, info, tokenizer, lora, sft, export and import.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>

#include "engine/tokenizer_files.h"
#include "engine/trainer.h"
#include "test_util.h"

using namespace ptl;
using namespace ptl::test;

namespace {

nlohmann::json json_of(const std::string& args, const TempDir& d) {
  CliRun r = ptl_cli(args, d);
  EXPECT_EQ(r.code, 0) << args << ": " << r.err;
  return nlohmann::json::parse(r.out);
}

// t.txt, a 300-token tokenizer of it (tok.json), and a tiny model over it trained a few steps in `out`.
void make_bpe_run(const TempDir& d, const std::string& out = "run", const std::string& tok = "tok.json",
                  unsigned text_seed = 7, const std::string& extra = "") {
  const std::string text_file = "t" + std::to_string(text_seed) + ".txt";
  write(d.file(text_file), syllable_text(20000, text_seed));
  CliRun r = ptl_cli("tokenizer train --data " + text_file + " --vocab-size 300 --out " + tok, d);
  ASSERT_EQ(r.code, 0) << r.err;
  r = ptl_cli("train --preset tiny --tokenizer " + tok + " --data " + text_file +
                  " --ctx 64 --steps 6 --eval-every 3 --sample-every 3 --out " + out + " " + extra,
              d);
  ASSERT_EQ(r.code, 0) << r.err;
}

}  // namespace

TEST(CliBpe, TrainSampleEvalInfoInTheCheckpointsTokenizer) {
  TempDir d;
  make_bpe_run(d);
  const std::string text = slurp(d.file("t7.txt"));
  const Tokenizer tok = load_tokenizer(d.file("tok.json"));

  // Validations report bits per byte, below the nats per token over ln 2 (a token is several bytes).
  int validations = 0;
  for (const auto& m : read_jsonl(d.file("run/metrics.jsonl"))) {
    if (!m.contains("val_loss")) continue;
    ++validations;
    EXPECT_LT(m["val_bits_per_byte"].get<double>(), m["val_loss"].get<double>() / std::log(2.0));
  }
  EXPECT_EQ(validations, 2);
  EXPECT_NE(slurp(d.file("run/samples.txt")).find("--- step 3 ---"), std::string::npos);

  const auto info = json_of("info run/model.tinygpt --json", d);
  EXPECT_EQ(info["model_config"]["vocab_size"], 300);
  EXPECT_EQ(info["tokenizer"]["type"], "bpe");
  EXPECT_EQ(info["tokenizer"]["vocab_size"], 300);
  EXPECT_EQ(info["tokenizer"]["merges"], tok.merge_count());
  EXPECT_EQ(info["tokenizer"]["specials"][0]["text"], "<|endoftext|>");
  EXPECT_NE(ptl_cli("info run/model.tinygpt", d).out.find("tokenizer:   byte-level BPE, 300 tokens"),
            std::string::npos);
  // `--tokenizer CKPT`: the checkpoint's tokenizer gives the ids of the file it was trained from.
  EXPECT_EQ(json_of("tokenizer encode --tokenizer run/model.tinygpt --data t7.txt --json", d)["ids"],
            nlohmann::json(tok.encode(text)));

  // Sampling: the prompt in the checkpoint's tokens, the continuation decoded.
  CliRun r = ptl_cli("sample run/model.tinygpt --prompt 'kato ' --max-tokens 20 --temperature 0 --raw", d);
  ASSERT_EQ(r.code, 0) << r.err;
  auto t = Trainer::from_checkpoint(read_file_bytes(d.file("run/model.tinygpt")), "run/model.tinygpt");
  SamplingOptions greedy;
  greedy.temperature = 0;
  const std::string expected = "kato " + tok.decode(t->generate(tok.encode("kato "), 20, greedy)) + "\n";
  EXPECT_EQ(r.out, expected);
  EXPECT_GT(r.out.size(), 5u + 20u) << "20 tokens of several bytes";

  // Eval: loss per token, and bits per byte = total nats / (bytes ln 2) over the bytes predicted.
  const auto e = json_of("eval run/model.tinygpt --data t7.txt --json", d);
  const std::vector<int32_t> ids = tok.encode(text);
  EXPECT_EQ(e["tokens"], ids.size() - 1);
  EXPECT_EQ(e["bytes"], text.size() - tok.token_bytes(ids[0]).size());
  EXPECT_NEAR(e["bits_per_byte"].get<double>(),
              e["loss"].get<double>() * e["tokens"].get<double>() / (e["bytes"].get<double>() * std::log(2.0)), 1e-9);
  EXPECT_EQ(e["tokenizer"]["type"], "bpe");
  EXPECT_NE(ptl_cli("eval run/model.tinygpt", d).out.find("per token"), std::string::npos);
}

TEST(CliBpe, TheByteTokenizersFileTrainsTheDefaultModelBitwise) {
  TempDir d;
  write(d.file("t.txt"), synthetic_text(20000));
  write(d.file("bytes.json"), Tokenizer().to_json());
  const std::string common = "train --preset tiny --data t.txt --steps 5 --eval-every 5 --sample-every 0";
  ASSERT_EQ(ptl_cli(common + " --out plain", d).code, 0);
  CliRun r = ptl_cli(common + " --tokenizer bytes.json --out with", d);
  ASSERT_EQ(r.code, 0) << r.err;
  auto losses = [&](const std::string& dir) {
    std::vector<double> out;
    for (const auto& m : read_jsonl(d.file(dir + "/metrics.jsonl"))) out.push_back(m["train_loss"].get<double>());
    return out;
  };
  EXPECT_EQ(losses("plain"), losses("with"));
  const auto a = read_file_bytes(d.file("plain/model.tinygpt")), b = read_file_bytes(d.file("with/model.tinygpt"));
  const SafeTensors fa = decode_safetensors(a.data(), a.size()), fb = decode_safetensors(b.data(), b.size());
  EXPECT_EQ(fb.metadata.at("tokenizer"), R"({"type":"byte","vocab_size":256})");
  EXPECT_EQ(fb.metadata.count("tokenizer_json"), 0u);
  ASSERT_EQ(fa.tensors.size(), fb.tensors.size());
  for (size_t i = 0; i < fa.tensors.size(); ++i)
    EXPECT_EQ(fa.tensors[i].data, fb.tensors[i].data) << fa.tensors[i].name;
}

TEST(CliBpe, ResumingKeepsTheTokenizer) {
  TempDir d;
  make_bpe_run(d, "run", "tok.json", 7, "--until 3");
  write(d.file("t9.txt"), syllable_text(20000, 9));
  ASSERT_EQ(ptl_cli("tokenizer train --data t9.txt --vocab-size 300 --out other.json", d).code, 0);
  expect_error(ptl_cli("train --resume run/model.tinygpt --tokenizer other.json", d),
               "differs from the checkpoint's (a BPE tokenizer of 300 tokens");
  CliRun r = ptl_cli("train --resume run/model.tinygpt --tokenizer tok.json", d);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(json_of("info run/model.tinygpt --json", d)["step"], 6);
}

TEST(CliBpe, AdaptersAndSftDataOfAnotherTokenizerAreRefused) {
  TempDir d;
  make_bpe_run(d, "a", "tok_a.json", 7);
  make_bpe_run(d, "b", "tok_b.json", 9);  // the same shape and vocabulary size, another tokenizer
  CliRun r = ptl_cli("lora train --base a/model.tinygpt --data t7.txt --steps 2 --eval-every 0 --out lo", d);
  ASSERT_EQ(r.code, 0) << r.err;
  // The adapter records its base's tokenizer identity.
  const auto a_info = json_of("info a/model.tinygpt --json", d);
  const nlohmann::json a_tok = {{"type", "bpe"}, {"vocab_size", 300}, {"sha256", a_info["tokenizer"]["sha256"]}};
  EXPECT_EQ(json_of("lora info lo/adapter.tinygpt-lora --json", d)["base_tokenizer"], a_tok);
  ASSERT_EQ(ptl_cli("sample a/model.tinygpt --adapter lo/adapter.tinygpt-lora --max-tokens 5", d).code, 0);
  expect_error(ptl_cli("sample b/model.tinygpt --adapter lo/adapter.tinygpt-lora --max-tokens 5", d),
               "lo/adapter.tinygpt-lora: the adapter was trained on a base that reads a BPE tokenizer of 300 tokens");

  // SFT examples that declare the tokenizer they were prepared for (a's, as `ptl info` prints it).
  write(d.file("d.jsonl"), nlohmann::json{{"tokenizer", a_tok}}.dump() + "\n" +
                               "{\"prompt\": \"kato?\", \"response\": \"rimen.\"}\n"
                               "{\"prompt\": \"salo?\", \"response\": \"vedun.\"}\n");
  r = ptl_cli("sft --base a/model.tinygpt --data d.jsonl --steps 2 --eval-every 0 --out s", d);
  ASSERT_EQ(r.code, 0) << r.err;
  ASSERT_EQ(ptl_cli("sft-eval s/model.tinygpt --data d.jsonl --json", d).code, 0);
  expect_error(ptl_cli("sft --base b/model.tinygpt --data d.jsonl --steps 2 --out s2", d),
               "d.jsonl line 1: the examples were prepared for a BPE tokenizer of 300 tokens (sha256 " +
                   a_info["tokenizer"]["sha256"].get<std::string>().substr(0, 16) +
                   "...), but the model reads a BPE tokenizer of 300 tokens");
}

TEST(CliBpe, ExportAndImportKeepTheTokenizer) {
  TempDir d;
  make_bpe_run(d);
  const auto sha = json_of("info run/model.tinygpt --json", d)["tokenizer"]["sha256"];
  ASSERT_EQ(ptl_cli("export run/model.tinygpt --out e.tinygpt --dtype bf16", d).code, 0);
  EXPECT_EQ(json_of("info e.tinygpt --json", d)["tokenizer"]["sha256"], sha);

  // The weights alone (as PyTorch would save them), imported with and without their tokenizer.
  auto bytes = read_file_bytes(d.file("run/model.tinygpt"));
  SafeTensors bare = decode_safetensors(bytes.data(), bytes.size());
  bare.metadata.clear();
  std::erase_if(bare.tensors, [](const StoredTensor& t) { return t.name.starts_with("optim."); });
  write_file_atomic(d.file("bare.safetensors"), encode_safetensors(bare));
  ASSERT_EQ(ptl_cli("import bare.safetensors --heads 3 --out imp.tinygpt --tokenizer tok.json", d).code, 0);
  EXPECT_EQ(json_of("info imp.tinygpt --json", d)["tokenizer"]["sha256"], sha);
  ASSERT_EQ(ptl_cli("sample imp.tinygpt --max-tokens 5", d).code, 0);
  ASSERT_EQ(ptl_cli("import bare.safetensors --heads 3 --out ids.tinygpt", d).code, 0);
  EXPECT_EQ(json_of("info ids.tinygpt --json", d)["tokenizer"]["type"], "none");
  expect_error(ptl_cli("sample ids.tinygpt --max-tokens 5", d), "reads token ids only (vocabulary 300");
  write(d.file("bytes.json"), Tokenizer().to_json());
  expect_error(ptl_cli("import bare.safetensors --heads 3 --out x.tinygpt --tokenizer bytes.json", d),
               "bytes.json has 256 tokens but bare.safetensors's tok_emb.weight has 300 rows");
}
