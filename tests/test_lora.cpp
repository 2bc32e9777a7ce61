// Post-training: LoRA adapters (spec "LoRA"), adapter files, merging, and SFT data with its loss mask.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <numeric>

#include "engine/error.h"
#include "engine/trainer.h"
#include "finite_differences.h"
#include "test_util.h"

using namespace ptl;
using namespace ptl::test;

namespace {

ModelConfig tiny_with_ctx(int ctx) {
  ModelConfig mc = tiny();
  mc.ctx = ctx;
  return mc;
}

// A base model as a checkpoint file's bytes, and a trainer loaded from them.
std::vector<uint8_t> base_bytes(uint64_t seed = 42, int ctx = 32) {
  return Trainer(tiny_with_ctx(ctx), train_config(4, seed)).save_checkpoint(false);
}
std::unique_ptr<Trainer> load(const std::vector<uint8_t>& bytes) {
  return Trainer::from_checkpoint(bytes, "base.tinygpt");
}

LoraConfig lora(int rank, std::set<std::string> targets = {"q", "v"}, double alpha = 8.0) {
  LoraConfig c;
  c.rank = rank;
  c.alpha = alpha;
  c.targets = std::move(targets);
  return c;
}

const std::set<std::string> kAll = {"q", "k", "v", "o", "fc_in", "fc_out"};

// Non-zero B (B starts at zero, where A's gradient vanishes and the adapters do nothing).
void randomise_b(Trainer& tr, uint64_t seed, float scale = 0.05f) {
  Rng rng(seed);
  for (const auto& t : adapter_tensors(tr.model_config(), tr.lora_config()))
    if (t.name.ends_with(".lora_B")) {
      float* p = tr.store().find(t.name);
      for (int64_t i = 0; i < t.numel(); ++i) p[i] = float(scale * rng.normal());
    }
}

}  // namespace

TEST(Sha256, KnownAnswers) {
  auto sha = [](const std::string& s) { return sha256_hex(std::vector<uint8_t>(s.begin(), s.end())); };
  EXPECT_EQ(sha(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(sha("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  // 56 bytes: the padding spills into a second block.
  EXPECT_EQ(sha("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  EXPECT_EQ(sha(std::string(1000000, 'a')), "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

TEST(Lora, StepZeroEqualsTheBaseModel) {
  const auto bytes = base_bytes();
  auto tr = load(bytes);
  const Batch b = random_batch(2, 32, 5);
  const auto before = logits_of(*tr, b);
  tr->enable_lora(lora(4, kAll), 7);
  EXPECT_TRUE(tr->lora_enabled());
  EXPECT_EQ(logits_of(*tr, b), before);  // B = 0: bitwise the base's logits
  // A is Kaiming-uniform: bound 1 / sqrt(in).
  const float* A = tr->store().find("blocks.0.mlp.fc_out.lora_A");
  const int64_t n = tr->store().numel("blocks.0.mlp.fc_out.lora_A");
  float amax = 0;
  for (int64_t i = 0; i < n; ++i) amax = std::max(amax, std::abs(A[i]));
  EXPECT_LE(amax, 1.0 / std::sqrt(4.0 * 48));
  EXPECT_GT(amax, 0.9 / std::sqrt(4.0 * 48));
  // Generation goes through the adapters too; with B = 0 it equals the base's.
  SamplingOptions greedy;
  greedy.temperature = 0;
  auto base = load(bytes);
  EXPECT_EQ(tr->generate({'T', 'h'}, 20, greedy), base->generate({'T', 'h'}, 20, greedy));
}

TEST(Lora, GradientsMatchFiniteDifferences) {
  auto tr = load(base_bytes());
  tr->enable_lora(lora(2, kAll, 4.0), 3);
  randomise_b(*tr, 9, 0.05f);
  const Batch b = random_batch(4, 32, 11);  // the checkpoint's batch: the training program's shape
  compute_gradients(*tr, b);
  const int checked = expect_adapter_gradients_match(*tr, b);
  EXPECT_EQ(checked, 2 * 2 * 6 * 2);  // 2 layers x 6 projections x (A, B) x 2 entries
}

TEST(Lora, TrainingLeavesTheBaseUntouchedAndSavesMemory) {
  const auto bytes = base_bytes();
  auto tr = load(bytes);
  TrainConfig tc = train_config(4, 5);
  tc.lr = 1e-2;
  tr->start_finetune(tc);
  tr->set_corpus(test::synthetic_text(5000), "text");
  tr->enable_lora(lora(4), 11);
  const double first = tr->train_step().loss;
  double last = first;
  for (int i = 0; i < 30; ++i) last = tr->train_step().loss;
  EXPECT_LT(last, first - 0.3);
  auto base = load(bytes);
  for (const auto& t : parameter_list(tiny()))
    EXPECT_EQ(0, std::memcmp(tr->store().find(t.name), base->store().find(t.name), t.bytes())) << t.name;
  EXPECT_NE(tr->store().find("blocks.0.attn.q_proj.lora_B")[0], 0.0f);
  // Only the adapters have gradients and moments.
  const Program& p = tr->train_executor().program();
  for (const auto& t : p.tensors) {
    if (t.kind == TensorKind::optim_state) {
      EXPECT_NE(t.name.find(".lora_"), std::string::npos) << t.name;
    }
    if (t.name.starts_with("grad.") && p.find(t.name.substr(5)) >= 0 &&
        p.tensor(p.find(t.name.substr(5))).kind == TensorKind::parameter) {
      EXPECT_NE(t.name.find(".lora_"), std::string::npos) << t.name;
    }
  }
  EXPECT_EQ(tr->store().find("optim.m.tok_emb.weight"), nullptr);
  // The store holds the weights, the adapters and the adapters' moments; full fine-tuning also
  // holds two moments of every weight (at least 2x the store).
  auto full = load(bytes);
  full->start_finetune(tc);
  full->set_corpus(test::synthetic_text(5000), "text");
  full->train_step();
  EXPECT_LT(tr->store().bytes(), full->store().bytes() / 2.5) << tr->store().bytes() << " vs " << full->store().bytes();
  // Adapters off: the base model exactly.
  const Batch b = random_batch(2, 32, 5);
  const auto with = logits_of(*tr, b);
  tr->disable_lora();
  EXPECT_EQ(logits_of(*tr, b), logits_of(*base, b));
  EXPECT_NE(with, logits_of(*base, b));
  EXPECT_EQ(tr->store().find("blocks.0.attn.q_proj.lora_A"), nullptr);
}

TEST(Lora, AdapterRoundTrip) {
  const auto bytes = base_bytes();
  auto tr = load(bytes);
  tr->start_finetune(train_config(4, 5));
  tr->set_corpus(test::synthetic_text(5000), "text");
  tr->enable_lora(lora(3, {"q", "k", "fc_in"}, 6.0), 1);
  for (int i = 0; i < 5; ++i) tr->train_step();
  tr->history().push_back({5, 3.5, 3.6});
  const auto adapter = tr->save_adapter();
  SafeTensors f = decode_safetensors(adapter.data(), adapter.size());
  EXPECT_EQ(f.metadata["format"], "tinygpt-lora");
  EXPECT_EQ(f.metadata["format_version"], "1");
  EXPECT_EQ(f.metadata["base_sha256"], sha256_hex(bytes));
  EXPECT_EQ(nlohmann::json::parse(f.metadata["model_config"]), tiny().to_json());
  EXPECT_EQ(f.tensors.size(), 2u * 2 * 3);  // 2 layers x 3 targets x (A, B)
  for (const auto& t : f.tensors) EXPECT_NE(t.name.find(".lora_"), std::string::npos);
  const AdapterContents c = inspect_adapter(f, "a");
  EXPECT_EQ(c.lora.rank, 3);
  EXPECT_EQ(c.lora.alpha, 6.0);
  EXPECT_EQ(c.lora.targets, (std::set<std::string>{"q", "k", "fc_in"}));
  EXPECT_EQ(c.steps, 5);
  ASSERT_EQ(c.history.size(), 1u);
  EXPECT_EQ(*c.history[0].val_loss, 3.6);
  ASSERT_TRUE(c.train.has_value());

  auto back = load(bytes);
  back->load_adapter(adapter, "adapter.tinygpt-lora");
  EXPECT_EQ(back->lora_config().targets, c.lora.targets);
  const Batch b = random_batch(2, 32, 8);
  EXPECT_EQ(logits_of(*back, b), logits_of(*tr, b));
  // A second adapter replaces the first.
  back->enable_lora(lora(2), 3);
  EXPECT_EQ(back->store().find("blocks.0.attn.k_proj.lora_A"), nullptr);
  back->load_adapter(adapter, "adapter.tinygpt-lora");
  EXPECT_EQ(logits_of(*back, b), logits_of(*tr, b));
}

// A base is matched by its weights, whatever else its file holds: an adapter trained on one file
// loads onto another file of the same weights (as a checkpoint with optimizer state and its
// export without), not onto an F16 export (other weights); an adapter that records only its base's file
// (as adapters did before) is checked against the file.
TEST(Lora, AdapterMatchesItsBaseByTheWeights) {
  Trainer full(find_preset("tiny").model, train_config(4, 42));
  const auto without = full.save_checkpoint(false);
  // The same weights in a file that also holds something else.
  SafeTensors more = decode_safetensors(without.data(), without.size(), "base");
  more.metadata["note"] = "a file with more in it";
  const auto with_moments = encode_safetensors(more);
  ASSERT_NE(sha256_hex(with_moments), sha256_hex(without));
  auto tr = load(with_moments);
  tr->enable_lora(lora(4), 1);
  randomise_b(*tr, 5, 0.05f);
  const auto adapter = tr->save_adapter();
  const SafeTensors f = decode_safetensors(adapter.data(), adapter.size(), "a");
  EXPECT_EQ(f.metadata.at("base_sha256"), sha256_hex(with_moments));
  EXPECT_EQ(f.metadata.at("base_weights_sha256"), weights_sha256(tr->store(), tr->model_config()));
  auto other_file = load(without);
  other_file->load_adapter(adapter, "a.tinygpt-lora");
  const Batch b = random_batch(2, 32, 8);
  EXPECT_EQ(logits_of(*other_file, b), logits_of(*tr, b));
  // F16 weights are other weights.
  SafeTensors h = decode_safetensors(without.data(), without.size(), "base");
  for (auto& t : h.tensors) t.encoding = Encoding::f16;
  auto half = load(encode_safetensors(h));
  EXPECT_NE(error_of([&] {
              half->load_adapter(adapter, "a.tinygpt-lora");
            }).find("a.tinygpt-lora: the adapter was trained on a base with other weights"),
            std::string::npos);
  // An adapter without base_weights_sha256: the base file's sha256 decides.
  SafeTensors legacy = f;
  legacy.metadata.erase("base_weights_sha256");
  const auto legacy_bytes = encode_safetensors(legacy);
  load(with_moments)->load_adapter(legacy_bytes, "old.tinygpt-lora");
  EXPECT_NE(error_of([&] {
              load(without)->load_adapter(legacy_bytes, "old.tinygpt-lora");
            }).find("old.tinygpt-lora: the adapter was trained on a different base checkpoint"),
            std::string::npos);
}

TEST(Lora, AdapterOnAnotherBaseIsRejected) {
  const auto bytes = base_bytes(42);
  auto tr = load(bytes);
  tr->enable_lora(lora(4), 1);
  const auto adapter = tr->save_adapter();
  // Same config, different weights: the weights' sha256 differs.
  auto other = load(base_bytes(43));
  const Batch b = random_batch(1, 32, 2);
  const auto before = logits_of(*other, b);
  std::string e = error_of([&] { other->load_adapter(adapter, "a.tinygpt-lora"); });
  EXPECT_NE(e.find("a.tinygpt-lora: the adapter was trained on a base with other weights"), std::string::npos) << e;
  EXPECT_FALSE(other->lora_enabled());
  EXPECT_EQ(logits_of(*other, b), before);
  // Different config.
  auto small = load(Trainer(find_preset("small").model, train_config(2)).save_checkpoint(false));
  e = error_of([&] { small->load_adapter(adapter, "a.tinygpt-lora"); });
  EXPECT_NE(e.find("trained on a base model with config"), std::string::npos) << e;
  // A model checkpoint is not an adapter, and an adapter is not a model checkpoint.
  e = error_of([&] { tr->load_adapter(bytes, "base.tinygpt"); });
  EXPECT_NE(e.find("not a LoRA adapter"), std::string::npos) << e;
  e = error_of([&] { Trainer::from_checkpoint(adapter, "a.tinygpt-lora"); });
  EXPECT_NE(e.find("is a LoRA adapter, not a model checkpoint"), std::string::npos) << e;
  // A model made in memory has no file, but its weights name it: its adapter loads onto a
  // checkpoint of those weights.
  Trainer fresh(tiny(), train_config(2));
  const auto fresh_file = fresh.save_checkpoint(false);
  fresh.enable_lora(lora(4), 1);
  const auto fresh_adapter = fresh.save_adapter();
  EXPECT_EQ(decode_safetensors(fresh_adapter.data(), fresh_adapter.size()).metadata.count("base_sha256"), 0u);
  load(fresh_file)->load_adapter(fresh_adapter, "fresh.tinygpt-lora");
  // Tampered adapter files.
  SafeTensors f = decode_safetensors(adapter.data(), adapter.size());
  SafeTensors missing = f;
  missing.tensors.pop_back();
  e = error_of([&] { load(bytes)->load_adapter(encode_safetensors(missing), "m"); });
  EXPECT_NE(e.find("missing adapter tensor 'blocks.1.attn.v_proj.lora_B'"), std::string::npos) << e;
  SafeTensors future = f;
  future.metadata["format_version"] = "2";
  e = error_of([&] { load(bytes)->load_adapter(encode_safetensors(future), "m"); });
  EXPECT_NE(e.find("unsupported adapter format_version 2"), std::string::npos) << e;
}

TEST(Lora, BadConfigsAreRejected) {
  auto tr = load(base_bytes());
  const Batch b = random_batch(1, 32, 2);
  const auto before = logits_of(*tr, b);
  std::string e = error_of([&] { tr->enable_lora(lora(49), 1); });  // the tiny model's d is 48
  EXPECT_NE(e.find("LoRA rank 49 is larger than the layer blocks.0.attn.q_proj [48, 48]"), std::string::npos) << e;
  e = error_of([&] { tr->enable_lora(lora(4, {"q", "gate"}), 1); });
  EXPECT_NE(e.find("unknown LoRA target 'gate'"), std::string::npos) << e;
  e = error_of([&] { tr->enable_lora(lora(0), 1); });
  EXPECT_NE(e.find("rank must be at least 1"), std::string::npos) << e;
  EXPECT_FALSE(tr->lora_enabled());
  EXPECT_EQ(logits_of(*tr, b), before);
  EXPECT_EQ(parse_lora_targets("q, v"), (std::set<std::string>{"q", "v"}));
  EXPECT_EQ(parse_lora_targets("all").size(), 6u);
  EXPECT_EQ(lora_targets_string(parse_lora_targets("fc_out,q,mlp")), "q,fc_in,fc_out");
  EXPECT_THROW(parse_lora_targets("q,z"), Error);
  EXPECT_THROW(parse_lora_targets(""), Error);
}

TEST(Lora, MergeGivesTheSameLogits) {
  const auto bytes = base_bytes();
  auto tr = load(bytes);
  tr->enable_lora(lora(4, kAll), 2);
  randomise_b(*tr, 4, 0.1f);
  const Batch b = random_batch(2, 32, 6);
  const auto unmerged = logits_of(*tr, b);
  const auto base_logits = logits_of(*load(bytes), b);
  EXPECT_GT(max_abs_diff(unmerged, base_logits), 1e-2f);  // the adapters do change the model
  tr->merge_lora();
  EXPECT_FALSE(tr->lora_enabled());
  const auto merged = logits_of(*tr, b);
  EXPECT_LT(max_abs_diff(merged, unmerged), 2e-5f);
  // Written as a normal checkpoint, loaded back: the same logits, and the merge is recorded.
  const auto file = tr->save_checkpoint(false);
  auto back = load(file);
  EXPECT_EQ(logits_of(*back, b), merged);
  SafeTensors f = decode_safetensors(file.data(), file.size());
  EXPECT_EQ(nlohmann::json::parse(f.metadata["lora_merged"])["base_sha256"], sha256_hex(bytes));
}

// --- SFT data -----------------------------------------------------------------------------------

TEST(Sft, ChatTemplateAndMask) {
  std::vector<ChatMessage> m = {{"system", "Be brief."}, {"user", "hi"}, {"assistant", "hello"}};
  std::vector<uint8_t> trained;
  const std::string s = render_chat(m, &trained);
  EXPECT_EQ(s, "<|system|>\nBe brief.\n<|user|>\nhi\n<|assistant|>\nhello<|end|>\n");
  ASSERT_EQ(trained.size(), s.size());
  std::string counted;
  for (size_t i = 0; i < s.size(); ++i)
    if (trained[i]) counted += s[i];
  EXPECT_EQ(counted, "hello<|end|>\n");
  SftExample e{m, 0};
  EXPECT_EQ(chat_prompt(e), "<|system|>\nBe brief.\n<|user|>\nhi\n<|assistant|>\n");
  EXPECT_EQ(chat_reply(e), "hello");
  // Both JSONL forms; blank lines skipped; line numbers kept.
  auto ex = parse_sft_jsonl(
      "{\"prompt\": \"2+2\", \"response\": \"4\"}\n\n"
      "{\"messages\": [{\"role\": \"user\", \"content\": \"a\"}, {\"role\": \"assistant\", \"content\": \"b\"},"
      " {\"role\": \"user\", \"content\": \"c\"}, {\"role\": \"assistant\", \"content\": \"d\"}], \"id\": 7}\n",
      "d.jsonl");
  ASSERT_EQ(ex.size(), 2u);
  EXPECT_EQ(ex[0].line, 1);
  EXPECT_EQ(ex[1].line, 3);
  EXPECT_EQ(render_chat(ex[0].messages), "<|user|>\n2+2\n<|assistant|>\n4<|end|>\n");
  EXPECT_EQ(render_chat(ex[1].messages, &trained),
            "<|user|>\na\n<|assistant|>\nb<|end|>\n<|user|>\nc\n<|assistant|>\nd<|end|>\n");
  EXPECT_EQ(std::accumulate(trained.begin(), trained.end(), 0), 2 * 9);  // both replies count
  EXPECT_EQ(chat_prompt(ex[1]), "<|user|>\na\n<|assistant|>\nb<|end|>\n<|user|>\nc\n<|assistant|>\n");
}

TEST(Sft, JsonlErrorsNameTheLine) {
  auto err = [](const std::string& text) { return error_of([&] { parse_sft_jsonl(text, "d.jsonl"); }); };
  const std::string good = "{\"prompt\": \"a\", \"response\": \"b\"}\n";
  EXPECT_NE(err(good + good + "{\"prompt\": \"a\", \"response\": \n").find("d.jsonl line 3: not valid JSON"),
            std::string::npos);
  EXPECT_NE(err(good + "{\"prompt\": \"a\", \"response\": \"\"}\n").find("d.jsonl line 2: empty response"),
            std::string::npos);
  EXPECT_NE(
      err("{\"messages\": [{\"role\": \"user\", \"content\": \"a\"}, {\"role\": \"assistant\", \"content\": \"\"}]}")
          .find("d.jsonl line 1: empty response (message 2)"),
      std::string::npos);
  EXPECT_NE(err(good + "{\"prompt\": \"a\"}").find("d.jsonl line 2: lacks \"response\""), std::string::npos);
  EXPECT_NE(err("[1, 2]").find("d.jsonl line 1: expected a JSON object"), std::string::npos);
  EXPECT_NE(err("{\"text\": \"a\"}").find("line 1: expected {\"prompt\", \"response\"} or {\"messages\""),
            std::string::npos);
  EXPECT_NE(err("{\"messages\": [{\"role\": \"bot\", \"content\": \"a\"}]}").find("has role \"bot\""),
            std::string::npos);
  EXPECT_NE(
      err("{\"messages\": [{\"role\": \"assistant\", \"content\": \"a\"}, {\"role\": \"user\", \"content\": \"b\"}]}")
          .find("the last message must be the assistant's reply"),
      std::string::npos);
  EXPECT_NE(err("{\"prompt\": 5, \"response\": \"b\"}").find("\"prompt\" is not a string"), std::string::npos);
  EXPECT_NE(err("").find("d.jsonl: no examples"), std::string::npos);
  EXPECT_NE(err("\n  \n").find("d.jsonl: no examples"), std::string::npos);
  // Too long for the context: an error naming the line, never a silent truncation.
  auto ex = parse_sft_jsonl(good + "{\"prompt\": \"" + std::string(40, 'x') + "\", \"response\": \"b\"}\n", "d.jsonl");
  std::string e = error_of([&] { SftData(ex, 64, 0.0, "d.jsonl"); });
  EXPECT_NE(e.find("d.jsonl line 2: the example is 73 bytes with the chat template, longer than one context window "
                   "(ctx + 1 = 65 bytes)"),
            std::string::npos)
      << e;
}

TEST(Sft, PackingIsSeededAndCoversEveryExample) {
  std::vector<SftExample> ex;
  for (int i = 0; i < 40; ++i)
    ex.push_back({{{"user", std::to_string(i)}, {"assistant", std::string(1 + i % 3, 'a' + i % 26)}}, i + 1});
  SftData d(ex, 64, 0.1, "d");
  EXPECT_EQ(d.train_examples(), 36u);
  EXPECT_EQ(d.val_examples(), 4u);
  SftData d2(ex, 64, 0.1, "d");
  Rng r1(3), r2(3), r3(4);
  const Batch a = d.sample_train(r1, 4), b = d2.sample_train(r2, 4);
  EXPECT_EQ(a.inputs, b.inputs);
  EXPECT_EQ(a.mask, b.mask);
  SftData d3(ex, 64, 0.1, "d");
  EXPECT_NE(d3.sample_train(r3, 4).inputs, a.inputs);
  // One epoch: every training example appears once (count the "<|user|>" markers).
  SftData d4(ex, 64, 0.1, "d");
  Rng r4(9);
  int users = 0;
  while (d4.epoch() <= 1) {
    const Batch x = d4.sample_train(r4, 1);
    if (d4.epoch() > 1) break;
    std::string row(x.inputs.begin(), x.inputs.end());
    for (size_t p = row.find("<|user|>"); p != std::string::npos; p = row.find("<|user|>", p + 1)) ++users;
  }
  EXPECT_GE(users, 35);  // the row that crosses into the next epoch may hold the last one
  // Validation: every validation example once, in order, padded rows masked out.
  auto val = d.val_batches(4);
  ASSERT_EQ(val.size(), 1u);
  float counted = 0;
  for (float m : val[0].mask) counted += m;
  int expect = 0;
  for (int i = 36; i < 40; ++i) expect += 1 + i % 3 + 8;  // reply + "<|end|>\n"
  EXPECT_EQ(counted, float(expect));
}

TEST(Sft, MaskedLossCountsOnlyResponseBytes) {
  // The loss of a packed SFT batch equals a manual mean of -log p(target) over the reply bytes.
  std::vector<SftExample> ex = {{{{"user", "abc"}, {"assistant", "xyz"}}, 1},
                                {{{"user", "hello"}, {"assistant", "world!"}}, 2},
                                {{{"user", "q"}, {"assistant", "r"}}, 3}};
  SftData d(ex, 64, 0.0, "d");
  Rng rng(1);
  const Batch b = d.sample_train(rng, 3);  // one example per row: the first epoch, every example once
  auto tr = load(base_bytes(42, 64));
  tr->enable_lora(lora(4), 1);
  randomise_b(*tr, 3);
  const double masked = tr->batch_loss(b);
  Batch plain = b;
  plain.mask.clear();
  const float* logits = tr->logits(plain);
  double sum = 0;
  int count = 0;
  std::string counted;
  for (int i = 0; i < b.batch * b.seq; ++i) {
    if (b.mask[i] == 0) continue;
    const float* z = logits + size_t(i) * 256;
    double mx = *std::max_element(z, z + 256), s = 0;
    for (int v = 0; v < 256; ++v) s += std::exp(double(z[v]) - mx);
    sum += mx + std::log(s) - z[b.targets[i]];
    ++count;
    counted += char(b.targets[i]);
  }
  EXPECT_EQ(count, 3 + 6 + 1 + 3 * 8);
  // The counted targets are the replies with their end markers, in some order.
  for (const char* reply : {"xyz<|end|>\n", "world!<|end|>\n", "r<|end|>\n"})
    EXPECT_NE(counted.find(reply), std::string::npos);
  EXPECT_NEAR(masked, sum / count, 1e-5 * std::abs(sum / count));
  // The unmasked loss is a different number (every position counts).
  EXPECT_GT(std::abs(tr->batch_loss(plain) - masked), 1e-3);
  // A mask of ones trains bitwise like no mask.
  auto t1 = load(base_bytes(42, 64)), t2 = load(base_bytes(42, 64));
  for (auto* t : {t1.get(), t2.get()}) t->start_finetune(train_config(3));
  Batch ones = plain;
  ones.mask.assign(plain.inputs.size(), 1.0f);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(t1->train_step(plain).loss, t2->train_step(ones).loss);
}

TEST(Sft, FineTuningLearnsTheReplies) {
  // A toy task (reply = the prompt's letters in reverse) on an untrained tiny model: full
  // fine-tuning and LoRA both bring the masked validation loss down.
  std::vector<SftExample> ex;
  Rng rng(5);
  for (int i = 0; i < 200; ++i) {
    std::string w;
    for (int k = 0; k < 3; ++k) w += char('a' + rng.below(4));
    ex.push_back({{{"user", w}, {"assistant", std::string(w.rbegin(), w.rend())}}, i + 1});
  }
  for (bool use_lora : {false, true}) {
    auto tr = load(base_bytes(42, 64));
    TrainConfig tc = train_config(8, 3);
    tc.lr = use_lora ? 2e-2 : 3e-3;
    tc.steps = 100;
    tr->start_finetune(tc);
    if (use_lora) tr->enable_lora(lora(8, kAll, 16.0), 1);
    tr->set_sft_data(std::make_unique<SftData>(ex, 64, 0.1, "toy"));
    const double v0 = tr->validation_loss().loss;
    for (int s = 0; s < tc.steps; ++s) tr->train_step();
    const double v1 = tr->validation_loss().loss;
    // (LoRA cannot go far on an untrained base: its frozen tied embeddings have norm ~0.14, which
    // bounds the logits after ln_f to about +-1.)
    if (use_lora)
      EXPECT_LT(v1, v0 - 0.5) << "lora: " << v0 << " -> " << v1;
    else
      EXPECT_LT(v1, 0.5 * v0) << "full: " << v0 << " -> " << v1;
  }
}
