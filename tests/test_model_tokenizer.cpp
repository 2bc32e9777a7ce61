// A model over a BPE tokenizer: training on token ids, the tokenizer recorded in the checkpoint
// (engine/model_tokenizer.h), sampling and evaluation in its tokens, and adapters or SFT data of
// another tokenizer refused. The tokenizers are trained here on text the test makes.
#include <gtest/gtest.h>

#include <cmath>

#include "engine/bpe_trainer.h"
#include "engine/tokenizer_files.h"
#include "engine/trainer.h"
#include "test_util.h"

using namespace ptl;

namespace {

Tokenizer bpe(const std::string& text, int vocab) {
  BpeTrainOptions o;
  o.vocab_size = vocab;
  return train_bpe(text, o);
}

const std::string& corpus() {
  static const std::string text = test::syllable_text(20000, 7);
  return text;
}

// A 300-token BPE tokenizer of the test corpus.
const ModelTokenizer& tok300() {
  static const ModelTokenizer t = ModelTokenizer::of(bpe(corpus(), 300));
  return t;
}

ModelConfig small_model(int vocab, int ctx = 16) {
  ModelConfig mc;
  mc.vocab_size = vocab;
  mc.n_layers = 1;
  mc.d_model = 32;
  mc.n_heads = 2;
  mc.ctx = ctx;
  return mc;
}

std::unique_ptr<Trainer> bpe_trainer(const ModelTokenizer& tok = tok300(), int ctx = 16, uint64_t seed = 1) {
  TrainConfig tc;
  tc.batch = 4;
  tc.steps = 40;
  tc.lr = 1e-2;
  tc.warmup = 0;
  tc.seed = seed;
  tc.eval_batches = 2;
  auto t = std::make_unique<Trainer>(small_model(tok.vocab_size(), ctx), tc);
  t->set_tokenizer(tok);
  return t;
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

}  // namespace

TEST(ModelTokenizer, TrainsOnTokenIdsOfEachSplitEncodedApart) {
  ASSERT_EQ(tok300().vocab_size(), 300);
  auto t = bpe_trainer();
  t->set_corpus(corpus(), "t.txt");
  const Corpus& c = t->corpus();
  // The spec's split is by bytes; each side is encoded on its own.
  const size_t n_val = size_t(double(corpus().size()) * 0.1);
  EXPECT_EQ(c.train(), corpus().substr(0, corpus().size() - n_val));
  EXPECT_EQ(c.train_tokens(), tok300().text().encode(c.train()).size());
  EXPECT_EQ(c.val_tokens(), tok300().text().encode(c.val()).size());
  EXPECT_LT(c.train_tokens(), c.train().size() / 2);  // the merges shorten the text

  const Batch b = t->next_train_batch();
  bool merged = false;
  for (int32_t id : b.inputs) {
    ASSERT_GE(id, 0);
    ASSERT_LT(id, 300);
    merged |= id >= 256;
  }
  EXPECT_TRUE(merged) << "a batch of BPE ids holds merged tokens";

  std::vector<double> losses;
  for (int i = 0; i < 40; ++i) losses.push_back(t->train_step().loss);
  // Uniform over 300 tokens at the start; it learns the corpus's tokens.
  EXPECT_NEAR(losses.front(), std::log(300.0), 0.5);
  double last5 = 0;
  for (size_t i = losses.size() - 5; i < losses.size(); ++i) last5 += losses[i] / 5;
  EXPECT_LT(last5, losses.front() - 0.5);
}

TEST(ModelTokenizer, CheckpointKeepsTheTokenizerJson) {
  auto t = bpe_trainer();
  t->set_corpus(corpus(), "t.txt");
  for (int i = 0; i < 3; ++i) t->train_step();
  const std::vector<uint8_t> bytes = t->save_checkpoint();
  const SafeTensors f = decode_safetensors(bytes.data(), bytes.size(), "m.tinygpt");
  const std::string json = tok300().text().to_json();
  EXPECT_EQ(f.metadata.at("tokenizer_json"), json);
  const auto meta = nlohmann::json::parse(f.metadata.at("tokenizer"));
  EXPECT_EQ(meta["type"], "bpe");
  EXPECT_EQ(meta["vocab_size"], 300);
  EXPECT_EQ(meta["sha256"], sha256_hex(std::vector<uint8_t>(json.begin(), json.end())));

  auto back = Trainer::from_checkpoint(bytes, "m.tinygpt");
  EXPECT_EQ(back->tokenizer().id(), tok300().id());
  EXPECT_EQ(back->tokenizer().json(), json);
  EXPECT_EQ(back->encode(corpus()), tok300().text().encode(corpus()));
  EXPECT_EQ(back->save_checkpoint(), bytes);  // the whole file round-trips
  // `--tokenizer CKPT` reads the same tokenizer out of the file.
  test::TempDir d;
  write_file_atomic(d.file("m.tinygpt"), bytes);
  EXPECT_EQ(load_tokenizer(d.file("m.tinygpt")).to_json(), json);
}

TEST(ModelTokenizer, ByteLevelCheckpointsStayAsTheyWere) {
  Trainer t(small_model(256), TrainConfig{});
  EXPECT_TRUE(t.tokenizer().is_bytes());
  const auto bytes = t.save_checkpoint(false);
  const SafeTensors f = decode_safetensors(bytes.data(), bytes.size(), "b.tinygpt");
  EXPECT_EQ(f.metadata.at("tokenizer"), R"({"type":"byte","vocab_size":256})");
  EXPECT_EQ(f.metadata.count("tokenizer_json"), 0u);
  // A tokenizer.json of exactly the 256 bytes is the byte tokenizer, not a BPE one.
  EXPECT_TRUE(ModelTokenizer::of(tokenizer_from_json(Tokenizer().to_json(), "bytes.json")).is_bytes());
}

TEST(ModelTokenizer, LoadRefusesATokenizerThatDoesNotFit) {
  auto t = bpe_trainer();
  const auto good = t->save_checkpoint(false);
  const SafeTensors f = decode_safetensors(good.data(), good.size(), "m.tinygpt");
  auto load_with = [&](const std::function<void(SafeTensors&)>& edit) {
    SafeTensors g = f;
    edit(g);
    return error_of([&] { Trainer::from_checkpoint(encode_safetensors(g), "m.tinygpt"); });
  };
  // A tokenizer of another size than the model's vocabulary.
  const ModelTokenizer other = ModelTokenizer::of(bpe(corpus(), 320));
  EXPECT_EQ(load_with([&](SafeTensors& g) { other.write_metadata(g.metadata); }),
            "m.tinygpt: its tokenizer_json has 320 tokens but the model's vocab_size is 300 (they must be equal)");
  // The same size, other merges: not the tokenizer the sha256 names.
  const ModelTokenizer same_size = ModelTokenizer::of(bpe(test::syllable_text(20000, 99), 300));
  ASSERT_NE(same_size.id().sha256, tok300().id().sha256);
  EXPECT_NE(load_with([&](SafeTensors& g) {
              g.metadata["tokenizer_json"] = same_size.json();
            }).find("tokenizer_json does not match the tokenizer's recorded sha256"),
            std::string::npos);
  EXPECT_EQ(load_with([](SafeTensors& g) { g.metadata.erase("tokenizer_json"); }),
            "m.tinygpt: the tokenizer is BPE but the metadata has no 'tokenizer_json'");
  EXPECT_EQ(
      load_with([](SafeTensors& g) { g.metadata["tokenizer"] = R"({"type":"byte","vocab_size":256})"; }),
      "m.tinygpt: the byte-level tokenizer has 256 tokens but the model's vocab_size is 300 (they must be equal)");
  EXPECT_EQ(load_with([](SafeTensors& g) { g.metadata["tokenizer"] = R"({"type":"sentencepiece","vocab_size":300})"; }),
            "m.tinygpt: unsupported tokenizer type 'sentencepiece' (this ptl reads byte, bpe and none)");
  EXPECT_NE(load_with([](SafeTensors& g) {
              g.metadata["tokenizer_json"] = "{\"model\": 1}";
            }).find("m.tinygpt: tokenizer_json: not a tokenizer.json"),
            std::string::npos);
  // set_tokenizer checks the same.
  EXPECT_EQ(error_of([&] { t->set_tokenizer(other); }),
            "the tokenizer has 320 tokens but the model's vocab_size is 300 (they must be equal)");
}

TEST(ModelTokenizer, SamplingDecodesTokensToText) {
  auto t = bpe_trainer();
  t->set_corpus(corpus(), "t.txt");
  for (int i = 0; i < 30; ++i) t->train_step();
  SamplingOptions greedy;
  greedy.temperature = 0;
  const std::vector<int32_t> ids = t->generate(t->encode("the king "), 30, greedy);
  ASSERT_EQ(ids.size(), 30u);
  std::string streamed;
  TokenStreamDecoder d(t->tokenizer().text());
  for (int32_t id : ids) streamed += d.push(id);
  streamed += d.finish();
  const std::string text = t->decode(ids);
  EXPECT_EQ(streamed, text);
  // Each id decodes to the bytes of its token (merged tokens are several bytes).
  std::string joined;
  for (int32_t id : ids) joined += t->tokenizer().text().token_bytes(id);
  EXPECT_EQ(text, joined);
  // Every byte comes from the corpus's alphabet.
  for (char c : text) EXPECT_NE(corpus().find(c), std::string::npos) << int(c);
  // An empty prompt starts from the newline's token.
  EXPECT_EQ(t->inspect({}, 3).tokens, t->encode("\n"));
}

TEST(ModelTokenizer, EvalBitsPerByteIsNatsOverBytes) {
  auto t = bpe_trainer();
  t->set_corpus(corpus(), "t.txt");
  for (int i = 0; i < 10; ++i) t->train_step();
  const std::string text = corpus().substr(0, 3000);
  const EvalResult r = t->evaluate_text(text);
  const std::vector<int32_t> ids = t->encode(text);
  EXPECT_EQ(r.tokens, int64_t(ids.size()) - 1);  // every token after the first
  EXPECT_EQ(r.bytes, double(text.size() - t->tokenizer().text().token_bytes(ids[0]).size()));
  EXPECT_NEAR(r.bits_per_byte(), r.loss * double(r.tokens) / (r.bytes * std::log(2.0)), 1e-12);
  EXPECT_LT(r.bits_per_byte(), r.loss / std::log(2.0));  // a token is more than a byte
  const EvalResult v = t->validation_loss();
  EXPECT_GT(v.bytes, double(v.tokens));

  // A byte-level model: bits per byte is exactly loss / ln 2, bytes = tokens.
  Trainer b(small_model(256), TrainConfig{});
  const EvalResult rb = b.evaluate_text(text);
  EXPECT_EQ(rb.bytes, double(rb.tokens));
  EXPECT_EQ(rb.bits_per_byte(), rb.loss / std::log(2.0));
}

TEST(ModelTokenizer, AnAdapterOfAnotherTokenizerIsRefused) {
  auto a = bpe_trainer();
  a->set_base_sha256(std::string(64, 'a'));
  LoraConfig lora;
  lora.rank = 2;
  lora.targets = {"q", "v"};
  a->enable_lora(lora, 1);
  const auto adapter = a->save_adapter();
  const SafeTensors f = decode_safetensors(adapter.data(), adapter.size(), "a.tinygpt-lora");
  EXPECT_EQ(nlohmann::json::parse(f.metadata.at("tokenizer")), tok300().id().to_json());
  EXPECT_EQ(f.metadata.count("tokenizer_json"), 0u);  // the identity only

  // The same model shape and vocabulary, another tokenizer.
  const ModelTokenizer other = ModelTokenizer::of(bpe(test::syllable_text(20000, 99), 300));
  ASSERT_EQ(other.vocab_size(), 300);
  auto b = bpe_trainer(other);
  b->set_base_sha256(std::string(64, 'a'));
  EXPECT_EQ(error_of([&] { b->load_adapter(adapter, "a.tinygpt-lora"); }),
            "a.tinygpt-lora: the adapter was trained on a base that reads " + tok300().id().describe() +
                ", but this base reads " + other.id().describe() + " (its token ids mean other text)");
  EXPECT_FALSE(b->lora_enabled());
  // The base it was trained on takes it.
  auto c = bpe_trainer();
  c->set_base_sha256(std::string(64, 'a'));
  c->load_adapter(adapter, "a.tinygpt-lora");
  EXPECT_TRUE(c->lora_enabled());
}

TEST(ModelTokenizer, SftDataOfAnotherTokenizerIsRefused) {
  const std::string jsonl =
      "{\"prompt\": \"what says kato?\", \"response\": \"kato rimen salo.\"}\n"
      "{\"prompt\": \"and vedun?\", \"response\": \"pira.\"}\n";
  const auto examples = parse_sft_jsonl(jsonl, "d.jsonl");
  auto t = bpe_trainer(tok300(), 80);
  // The loss mask covers exactly the reply's tokens and "<|end|>\n".
  std::vector<uint8_t> trained;
  const auto ids = render_chat_tokens(examples[0].messages, tok300().text(), &trained);
  ASSERT_EQ(trained.size(), ids.size());
  std::vector<int32_t> reply;
  for (size_t i = 0; i < ids.size(); ++i)
    if (trained[i]) reply.push_back(ids[i]);
  EXPECT_EQ(tok300().text().decode(reply), "kato rimen salo.<|end|>\n");
  EXPECT_EQ(tok300().text().decode(ids), render_chat(examples[0].messages));

  t->set_sft_data(std::make_unique<SftData>(examples, 80, 0.0, "d.jsonl", tok300()));
  EXPECT_TRUE(t->has_sft_data());
  EXPECT_EQ(error_of([&] { t->set_sft_data(std::make_unique<SftData>(examples, 80, 0.0, "d.jsonl")); }),
            "SFT data was prepared for bytes (256 tokens), but the model reads " + tok300().id().describe());
  // A file that declares the tokenizer it was prepared for.
  const std::string declared = "{\"tokenizer\": " + ModelTokenizer::bytes().id().to_json().dump() + "}\n" + jsonl;
  const TokenizerId bytes_id;
  EXPECT_EQ(parse_sft_jsonl(declared, "d.jsonl", &bytes_id).size(), 2u);
  EXPECT_EQ(error_of([&] { parse_sft_jsonl(declared, "d.jsonl", &tok300().id()); }),
            "d.jsonl line 1: the examples were prepared for bytes (256 tokens), but the model reads " +
                tok300().id().describe());
}
