// The model as a whole: presets, initialisation, programs, gradients, generation, checkpoints.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <numeric>
#include <random>

#include "engine/error.h"
#include "engine/memory.h"
#include "engine/trainer.h"
#include "test_util.h"

using namespace ptl;
using namespace ptl::test;

TEST(Model, PresetParameterCountsMatchTheSpec) {
  const std::map<std::string, int64_t> spec = {{"tiny", 70464},       {"small", 366432},  {"medium", 838400},
                                               {"large", 2743296},    {"xl", 6416896},    {"huge", 9608704},
                                               {"massive", 25039872}, {"mega", 25138176}, {"behemoth", 473244160}};
  for (const auto& [name, count] : spec) {
    const ModelConfig mc = find_preset(name).model;
    EXPECT_EQ(mc.param_count(), count) << name;
    int64_t sum = 0;
    for (const auto& t : parameter_list(mc)) sum += t.numel();
    EXPECT_EQ(sum, count) << name;
  }
  EXPECT_THROW(find_preset("enormous"), Error);
  EXPECT_EQ(find_preset("SMALL").name, "small");
}

TEST(Model, InitialisationIsSeededAndFollowsTheSpec) {
  Trainer a(tiny(), train_config(2, 7)), b(tiny(), train_config(2, 7)), c(tiny(), train_config(2, 8));
  const int64_t n = a.store().numel("tok_emb.weight");
  EXPECT_EQ(0, std::memcmp(a.store().find("tok_emb.weight"), b.store().find("tok_emb.weight"), n * 4));
  EXPECT_NE(0, std::memcmp(a.store().find("tok_emb.weight"), c.store().find("tok_emb.weight"), n * 4));
  auto stddev = [&](const std::string& name) {
    const float* p = a.store().find(name);
    const int64_t k = a.store().numel(name);
    double s = 0, s2 = 0;
    for (int64_t i = 0; i < k; ++i) s += p[i], s2 += double(p[i]) * p[i];
    return std::sqrt(s2 / k - (s / k) * (s / k));
  };
  EXPECT_NEAR(stddev("tok_emb.weight"), 0.02, 0.001);
  EXPECT_NEAR(stddev("blocks.0.mlp.fc_in.weight"), 0.02, 0.001);
  EXPECT_NEAR(stddev("blocks.0.mlp.fc_out.weight"), 0.02 / std::sqrt(4.0), 0.001);
  EXPECT_EQ(a.store().find("blocks.1.ln2.weight")[5], 1.0f);
  EXPECT_EQ(a.store().find("blocks.1.attn.q_proj.bias")[5], 0.0f);
}

TEST(Model, PortableLogMatchesLibm) {
  for (double x : {1e-300, 1e-10, 0.001, 0.3, 0.5, 0.7071, 0.99999, 1.0, 1.5, 2.0, 1e10})
    EXPECT_NEAR(portable_log(x), std::log(x), 1e-14 * std::max(1.0, std::abs(std::log(x)))) << x;
}

TEST(Model, ProgramSerialisesAndRunsTheSameFromJson) {
  BuildOptions opt;
  opt.batch = 2;
  Program p = build_train_program(tiny(), opt, train_config(2));
  const auto j = p.to_json();
  Program q = Program::from_json(nlohmann::json::parse(j.dump()));
  EXPECT_EQ(q.to_json(), j);
  ASSERT_EQ(q.ops.size(), p.ops.size());
  // Executing the deserialised program gives bitwise the same loss and update.
  Trainer a(tiny(), train_config(2)), b(tiny(), train_config(2));
  cpu::Executor ea(p, a.store()), eb(q, b.store());
  const Batch batch = random_batch(2, 32, 1);
  for (auto* e : {&ea, &eb}) {
    std::memcpy(e->i32("tokens"), batch.inputs.data(), batch.inputs.size() * 4);
    std::memcpy(e->i32("targets"), batch.targets.data(), batch.targets.size() * 4);
    e->f32("optim.hparams")[0] = 1e-3f;
    e->f32("optim.hparams")[1] = 1.0f;
    e->run();
  }
  EXPECT_EQ(ea.f32("loss")[0], eb.f32("loss")[0]);
  EXPECT_EQ(0, std::memcmp(a.store().find("ln_f.bias"), b.store().find("ln_f.bias"), 48 * 4));
  // The serialised form names ops and tensor kinds so a foreign executor can run it.
  EXPECT_EQ(j["ops"][0]["op"], "embedding");
  EXPECT_EQ(j["tensors"][0]["kind"], "parameter");
}

// The executor checks token and target ids before it reads a row with them (and builds the
// message only for the id that is wrong, not for every token).
TEST(Model, TokenOrTargetOutsideTheVocabularyIsAnError) {
  Trainer tr(tiny(), train_config(2));
  for (const bool bad_target : {false, true}) {
    Batch b = random_batch(2, 32, 5);
    (bad_target ? b.targets : b.inputs)[37] = bad_target ? 256 : -3;
    try {
      compute_gradients(tr, b);
      FAIL() << "no error for a " << (bad_target ? "target" : "token") << " outside the vocabulary";
    } catch (const Error& e) {
      EXPECT_STREQ(e.what(),
                   bad_target ? "target id 256 is outside the vocabulary" : "token id -3 is outside the vocabulary");
    }
  }
}

// A step on rows shorter than the context (GPT-2 at T 64 keeps its 1,024 positions): the training
// program is built for them, its loss is the evaluation's on the same rows, and the next step at
// the full length goes back to the context's program. Longer rows or another batch size are refused.
TEST(Model, TrainStepOnRowsShorterThanTheContext) {
  Trainer tr(tiny(), train_config(2));  // tiny: context 32
  const Batch short_rows = random_batch(2, 12, 7);
  const double expected = tr.batch_loss(short_rows);
  const StepResult r = tr.train_step(short_rows);
  EXPECT_DOUBLE_EQ(r.loss, expected);
  EXPECT_EQ(r.tokens, 24);
  EXPECT_EQ(tr.train_executor().program().tensors[tr.train_executor().program().find("tokens")].shape,
            (std::vector<int64_t>{2, 12}));
  const Batch whole = random_batch(2, 32, 8);
  const double expected_whole = tr.batch_loss(whole);
  EXPECT_DOUBLE_EQ(tr.train_step(whole).loss, expected_whole);
  EXPECT_EQ(tr.state().step, 2);
  EXPECT_EQ(error_of([&] { tr.train_step(random_batch(2, 33, 9)); }),
            "batch shape [2, 33]: the run trains batches of 2 rows of 1 to 32 tokens");
  EXPECT_EQ(error_of([&] { tr.train_step(random_batch(3, 12, 9)); }),
            "batch shape [3, 12]: the run trains batches of 2 rows of 1 to 32 tokens");
}

TEST(Model, UntrainedLossIsNearLog256) {
  Trainer tr(tiny(), train_config(4));
  const double loss = tr.batch_loss(random_batch(4, 32, 3));
  EXPECT_NEAR(loss, std::log(256.0), 0.05);
}

TEST(Model, VocabularySizesFrom1To65536) {
  ModelConfig mc = tiny();
  for (const int v : {1, 263, 50257, 65536}) {
    mc.vocab_size = v;
    EXPECT_NO_THROW(mc.validate()) << v;
  }
  for (const int v : {0, -5, 65537}) {
    mc.vocab_size = v;
    try {
      mc.validate();
      ADD_FAILURE() << "vocab_size " << v << " accepted";
    } catch (const Error& e) {
      EXPECT_EQ(std::string(e.what()), "model config: vocab_size must be 1..65536, got " + std::to_string(v));
    }
  }
}

TEST(Model, LossOfAnOddVocabularyIsTheCrossEntropyOfItsLogits) {
  // The loss programs hold no logits (cross_entropy_tied); the forward program's logits of the
  // same weights, put through the cross-entropy in double, give the same loss.
  ModelConfig mc = tiny();
  mc.vocab_size = 263;
  Trainer tr(mc, train_config(2));
  Batch b = random_batch(2, 32, 12);
  for (size_t i = 0; i < b.targets.size(); i += 3) b.targets[i] = int32_t(256 + i % 7);  // ids past the bytes
  const double loss = tr.batch_loss(b);
  const float* z = tr.logits(b);
  double want = 0;
  for (int i = 0; i < 64; i++) {
    const float* row = z + size_t(i) * 263;
    const double mx = *std::max_element(row, row + 263);
    double s = 0;
    for (int v = 0; v < 263; v++) s += std::exp(double(row[v]) - mx);
    want += (mx + std::log(s) - row[b.targets[size_t(i)]]) / 64;
  }
  EXPECT_NEAR(loss, want, 1e-6 * want);
  EXPECT_NEAR(loss, std::log(263.0), 0.05);  // untrained: about uniform
}

TEST(Model, TrainingMemoryGrowsWithTheVocabularyOnlyThroughTheEmbedding) {
  // GPT-2's padded vocabulary at the Medium preset: no tensor of the training program holds
  // [B*T, V] values, and the arena (activations and gradients) grows by exactly the embedding's
  // gradient, V d floats, like the weights (and twice that for the AdamW moments).
  const Preset& medium = find_preset("medium");
  BuildOptions opt;
  opt.batch = medium.batch;
  ModelConfig big = medium.model;
  big.vocab_size = 50304;
  const int64_t BT = int64_t(medium.batch) * big.ctx, d = big.d_model;
  const Program p = build_train_program(big, opt, train_config(medium.batch));
  for (const auto& t : p.tensors)
    EXPECT_LT(t.numel(), BT * big.vocab_size / 8) << t.name << " is as large as the logits";
  const TrainingMemory m256 = training_memory(medium.model, opt, train_config(medium.batch));
  const TrainingMemory m = training_memory(big, opt, train_config(medium.batch));
  const int64_t dV = big.vocab_size - medium.model.vocab_size;
  EXPECT_EQ(m.weights - m256.weights, dV * d * 4);
  EXPECT_EQ(m.optimizer - m256.optimizer, 2 * dV * d * 4);
  EXPECT_EQ(m.gradients - m256.gradients, dV * d * 4);
  EXPECT_EQ(m.activations, m256.activations);
  // (The arena's layout may shift a little with the largest tensor; logits would add 300 MiB.)
  EXPECT_LE(m.arena - m256.arena, dV * d * 4 + m256.arena / 10);
}

namespace {

// Central differences of the fp32 loss for the largest-gradient entries of every parameter.
// The fp32 loss is noisy at ~1e-7, so h = 1e-2 and a 5% + 1e-3 tolerance: a wrong index or a
// missing term in any backward kernel gives errors of order 100%.
void expect_gradients_match_finite_differences(const ModelConfig& mc) {
  TrainConfig tc = train_config(2);
  Trainer tr(mc, tc);
  const Batch b = random_batch(2, 32, 11);
  compute_gradients(tr, b);
  for (const auto& t : parameter_list(mc)) {
    const float* g = tr.gradient(t.name);
    float* p = tr.store().find(t.name);
    std::vector<int64_t> idx(t.numel());
    std::iota(idx.begin(), idx.end(), 0);
    std::partial_sort(idx.begin(), idx.begin() + 3, idx.end(),
                      [&](int64_t a, int64_t c) { return std::abs(g[a]) > std::abs(g[c]); });
    for (int k = 0; k < 3; ++k) {
      const int64_t i = idx[k];
      const float saved = p[i];
      const double h = 1e-2;
      p[i] = saved + float(h);
      const double lp = tr.batch_loss(b);
      p[i] = saved - float(h);
      const double lm = tr.batch_loss(b);
      p[i] = saved;
      const double numeric = (lp - lm) / (2 * h);
      EXPECT_NEAR(g[i], numeric, 0.05 * std::abs(numeric) + 1e-3) << t.name << "[" << i << "]";
    }
  }
}

}  // namespace

TEST(Model, GradientsMatchFiniteDifferences) { expect_gradients_match_finite_differences(tiny()); }

// GPT-2's settings: the tanh GELU and a vocabulary that is not the bytes.
TEST(Model, Gpt2SettingsGradientsMatchFiniteDifferences) {
  ModelConfig mc = tiny();
  mc.gelu = "tanh";
  mc.vocab_size = 300;
  expect_gradients_match_finite_differences(mc);
  // The setting reaches the program's ops (and their backward), and the two forms differ.
  BuildOptions one;
  one.batch = 1;
  Program p = build_train_program(mc, one, train_config(1));
  int tanh_ops = 0;
  for (const auto& op : p.ops)
    if (op.kind == OpKind::gelu || op.kind == OpKind::gelu_backward) tanh_ops += op.attr("tanh") == 1.0;
  EXPECT_EQ(tanh_ops, 2 * mc.n_layers);
  Trainer a(mc, train_config(1)), b(tiny(), train_config(1));
  const Batch batch = random_batch(1, 32, 3);
  EXPECT_NE(a.batch_loss(batch), b.batch_loss(batch));
}

TEST(Model, FrozenParametersGetNoGradient) {
  BuildOptions opt;
  opt.batch = 1;
  opt.lora.rank = 2;
  opt.lora.targets = {"q", "v"};
  Program p = build_train_program(tiny(), opt, train_config(1));
  EXPECT_LT(p.find("grad.blocks.0.attn.q_proj.weight"), 0);
  EXPECT_LT(p.find("optim.m.tok_emb.weight"), 0);
  EXPECT_GE(p.find("grad.blocks.0.attn.q_proj.lora_A"), 0);
  EXPECT_GE(p.find("optim.v.blocks.1.attn.v_proj.lora_B"), 0);
  EXPECT_LT(p.find("grad.blocks.0.attn.k_proj.lora_A"), 0);
}

TEST(Model, KvCacheGenerationMatchesTheFullForwardPass) {
  Trainer tr(tiny(), train_config(1));
  // Greedy decoding of 20 tokens through the cache, then the same sequence through the full
  // forward program: the argmax at every position must agree with the cached logits.
  SamplingOptions greedy;
  greedy.temperature = 0;
  const std::vector<int32_t> prompt = {'T', 'h', 'e', ' '};
  auto out = tr.generate(prompt, 20, greedy);
  ASSERT_EQ(out.size(), 20u);
  std::vector<int32_t> seq = prompt;
  seq.insert(seq.end(), out.begin(), out.end());
  const int L = int(seq.size());  // 24 <= ctx 32: all of it went through the KV cache
  Batch b{1, L, std::vector<int32_t>(seq.begin(), seq.end()), std::vector<int32_t>(L, 0)};
  const float* logits = tr.logits(b);
  for (int t = int(prompt.size()) - 1; t < L - 1; ++t) {
    const float* row = logits + size_t(t) * 256;
    EXPECT_EQ(int(std::max_element(row, row + 256) - row), seq[t + 1]) << "position " << t;
  }
}

TEST(Model, GenerationPastTheContextCropsTheWindow) {
  Trainer tr(tiny(), train_config(1));
  SamplingOptions greedy;
  greedy.temperature = 0;
  auto out = tr.generate({'a'}, 50, greedy);  // 51 tokens > ctx 32
  std::vector<int32_t> seq = {'a'};
  seq.insert(seq.end(), out.begin(), out.end());
  // Token 40 was chosen from the window of the 32 tokens before it, at positions 0..31.
  const int i = 40;
  Batch b{1, 32, std::vector<int32_t>(seq.begin() + i - 32, seq.begin() + i), std::vector<int32_t>(32, 0)};
  const float* row = tr.logits(b) + 31 * 256;
  EXPECT_EQ(int(std::max_element(row, row + 256) - row), seq[i]);
}

namespace {
// The generate program's logits at positions 0 .. n - 1 of `tokens`, through its KV cache.
std::vector<float> decode_logits(cpu::Executor& ex, const std::vector<int32_t>& tokens, int V) {
  std::vector<float> out;
  for (size_t i = 0; i < tokens.size(); ++i) {
    ex.i32("tokens")[0] = tokens[i];
    ex.i32("pos0")[0] = int32_t(i);
    ex.run();
    out.insert(out.end(), ex.f32("logits"), ex.f32("logits") + V);
  }
  return out;
}
}  // namespace

TEST(Model, PackedWeightsFollowEveryChangeOfTheWeights) {
  // Generation keeps the linear weights packed between tokens (packed_weights.h). Its logits must
  // be bitwise those of an executor that packs them for every product, after every way the
  // weights change, each of which changes the logits (stale packs would show).
  Trainer tr(tiny(), train_config(2));
  cpu::TensorStore& store = tr.store();
  cpu::Executor packed(build_generate_program(tiny()), store), plain(build_generate_program(tiny()), store);
  packed.pack_weights = true;
  const std::vector<int32_t> tokens = {'T', 'h', 'e', ' ', 'c'};
  std::vector<float> last;
  auto expect_fresh = [&](const std::string& after) {
    const std::vector<float> got = decode_logits(packed, tokens, 256);
    EXPECT_GT(store.packed_bytes(), 0u) << after;
    const std::vector<float> want = decode_logits(plain, tokens, 256);
    ASSERT_EQ(got.size(), want.size());
    EXPECT_EQ(0, std::memcmp(got.data(), want.data(), got.size() * 4)) << "after " << after;
    EXPECT_NE(got, last) << after << " did not change the logits";
    last = got;
  };
  expect_fresh("the first tokens");
  tr.train_step(random_batch(2, 32, 5));
  expect_fresh("a training step");
  store.find("blocks.0.mlp.fc_in.weight")[3] += 0.5f;
  expect_fresh("a write through TensorStore::find");
  std::vector<float> q(size_t(store.numel("blocks.1.attn.q_proj.weight")));
  std::memcpy(q.data(), static_cast<const cpu::TensorStore&>(store).find("blocks.1.attn.q_proj.weight"), q.size() * 4);
  q[7] -= 0.25f;
  plain.write("blocks.1.attn.q_proj.weight", q.data(), q.size() * 4);
  expect_fresh("an executor's write");
  std::vector<float> emb(size_t(store.numel("tok_emb.weight")), 0.01f);
  tr.write_tensor("tok_emb.weight", emb.data(), emb.size() * 4);
  expect_fresh("Trainer::write_tensor");
  LoraConfig lora;
  lora.rank = 2;
  lora.targets = {"fc_in"};
  tr.enable_lora(lora, 3);
  store.find("blocks.0.mlp.fc_in.lora_B")[0] = 1.0f;
  tr.merge_lora();
  expect_fresh("a LoRA merge");
}

TEST(Model, SamplingAfterATrainingStepUsesTheNewWeights) {
  // a samples (its weights get packed), both train, then a samples again: it must sample what b
  // does, which never sampled before the steps. The steps train LoRA adapters (so only weights
  // that are packed change: no bias or LayerNorm could carry the change) to predict 'x' at every
  // position, so what is sampled changes.
  TrainConfig tc = train_config(2);
  tc.lr = 1e-2;
  tc.schedule = "constant";
  LoraConfig lora;
  lora.rank = 4;
  lora.targets = {"q", "v", "o", "fc_in", "fc_out"};
  Trainer a(tiny(), tc), b(tiny(), tc);
  a.enable_lora(lora, 7);
  b.enable_lora(lora, 7);
  SamplingOptions greedy;
  greedy.temperature = 0;
  const std::vector<int32_t> prompt = {'T', 'h', 'e', ' '};
  const auto before = a.generate(prompt, 16, greedy);
  Batch batch = random_batch(2, 32, 8);
  std::fill(batch.targets.begin(), batch.targets.end(), int32_t('x'));
  for (int s = 0; s < 5; ++s) {
    a.train_step(batch);
    b.train_step(batch);
  }
  const auto after = a.generate(prompt, 16, greedy);
  EXPECT_EQ(after, b.generate(prompt, 16, greedy));
  EXPECT_NE(after, before);
}

TEST(Model, AGenerationGoesOnUnderTheWeightsOfATrainingStepTakenMeanwhile) {
  // A polling caller (the WebAssembly worker) may run training steps between two tokens of one
  // generation. The tokens after the step must be those a generation started then from the same
  // tokens gives: keys and values cached under the old weights are not reused. One step at a
  // high rate on random targets moves every weight far, so the old cache gives other tokens.
  TrainConfig tc = train_config(2);
  tc.lr = 0.3;
  tc.schedule = "constant";
  Trainer a(tiny(), tc), b(tiny(), tc);
  SamplingOptions greedy;
  greedy.temperature = 0;
  const std::vector<int32_t> prompt = {'T', 'h', 'e', ' '};
  a.begin_generation(prompt, greedy);
  std::vector<int32_t> seq = prompt;
  for (int i = 0; i < 6; ++i) seq.push_back(a.next_token());
  const Batch batch = random_batch(2, 32, 8);
  a.train_step(batch);
  b.train_step(batch);
  std::vector<int32_t> got;
  for (int i = 0; i < 12; ++i) got.push_back(a.next_token());
  EXPECT_EQ(got, b.generate(seq, 12, greedy));
  // And the same after a weight is written from outside (an external executor's sync): other
  // values at every position in every layer's first product.
  a.begin_generation(prompt, greedy);
  seq = prompt;
  for (int i = 0; i < 6; ++i) seq.push_back(a.next_token());
  std::vector<float> v(size_t(a.store().numel("blocks.0.attn.v_proj.weight")));
  for (size_t i = 0; i < v.size(); ++i) v[i] = float((i * 7919) % 23) * 0.2f - 2.2f;
  a.write_tensor("blocks.0.attn.v_proj.weight", v.data(), v.size() * 4);
  b.write_tensor("blocks.0.attn.v_proj.weight", v.data(), v.size() * 4);
  got.clear();
  for (int i = 0; i < 12; ++i) got.push_back(a.next_token());
  EXPECT_EQ(got, b.generate(seq, 12, greedy));
}

TEST(Model, APromptThroughTheCacheAtOnceGivesTheLogitsOfOneTokenAtATime) {
  // Trainer::next_token runs a prompt through the generate program over all its tokens at once:
  // the last token's logits (the only row the program computes), and the keys and values it
  // caches, must be bitwise those of feeding the tokens one at a time; also for tokens that start
  // past position 0, and with the weights packed.
  for (const ModelConfig& mc : {tiny(), find_preset("small").model}) {
    Trainer tr(mc, train_config(1));
    cpu::TensorStore& store = tr.store();
    const int V = mc.vocab_size;
    const std::vector<int32_t> tokens = {'T', 'h', 'e', ' ', 'c', 'a', 't'};
    const size_t L = tokens.size(), row = size_t(mc.d_model);
    cpu::Executor one(build_generate_program(mc), store);
    const std::vector<float> want = decode_logits(one, tokens, V);
    auto cache = [&] {  // the rows of every layer's keys and values the tokens wrote
      std::vector<float> c;
      for (int l = 0; l < mc.n_layers; ++l)
        for (const char* which : {"cache.k.", "cache.v."}) {
          const float* p = static_cast<const cpu::TensorStore&>(store).find(which + std::to_string(l));
          c.insert(c.end(), p, p + L * row);
        }
      return c;
    };
    const std::vector<float> want_cache = cache();
    for (bool packed : {false, true})
      for (size_t first : {size_t(0), size_t(3)}) {
        const int n = int(L - first);
        cpu::Executor many(build_generate_program(mc, {}, n), store);
        many.pack_weights = packed;
        decode_logits(one, std::vector<int32_t>(tokens.begin(), tokens.begin() + long(first)), V);
        std::memcpy(many.i32("tokens"), tokens.data() + first, size_t(n) * 4);
        many.i32("pos0")[0] = int32_t(first);
        many.run();
        const std::string tag = std::string(packed ? "packed" : "unpacked") + " from " + std::to_string(first);
        const auto& shape = many.program().tensor(many.program().id("logits")).shape;
        EXPECT_EQ(shape, (std::vector<int64_t>{1, V})) << tag;
        EXPECT_EQ(0, std::memcmp(many.f32("logits"), want.data() + (L - 1) * V, size_t(V) * 4)) << tag;
        EXPECT_EQ(cache(), want_cache) << tag;
      }
  }
}

TEST(Model, TinyMemorisesA256ByteText) {
  // Every byte value once, in a shuffled order: each byte fixes the next, so a perfect memory
  // reaches loss 0 at every position (English text would leave the first byte of each window
  // ambiguous and bound the loss away from 0).
  std::string text(256, '\0');
  for (int i = 0; i < 256; ++i) text[i] = char(i);
  std::shuffle(text.begin(), text.end(), std::mt19937(99));
  TrainConfig tc = train_config(16, 5);
  tc.lr = 1e-2;
  tc.schedule = "constant";
  tc.steps = 300;
  Trainer tr(tiny(), tc);
  tr.set_corpus(text, "text", 0.0);
  double loss = 0;
  for (int s = 0; s < tc.steps; ++s) loss = tr.train_step().loss;
  const EvalResult r = tr.evaluate_text(text);
  EXPECT_LT(r.loss, 0.05) << "last train loss " << loss;
}

TEST(Model, LearningRateSchedule) {
  TrainConfig tc;
  tc.lr = 1e-3;
  tc.steps = 1000;
  EXPECT_EQ(tc.warmup_steps(), 100);
  EXPECT_NEAR(tc.lr_at(0), 1e-5, 1e-12);
  EXPECT_NEAR(tc.lr_at(99), 1e-3, 1e-12);
  EXPECT_NEAR(tc.lr_at(100), 1e-3, 1e-12);
  EXPECT_NEAR(tc.lr_at(550), 0.55e-3, 1e-9);  // half way through the cosine: the mid point
  EXPECT_NEAR(tc.lr_at(1000), 1e-4, 1e-12);   // 10% of the peak at the end
  tc.schedule = "constant";
  EXPECT_EQ(tc.lr_at(0), 1e-3);
  EXPECT_EQ(tc.lr_at(999), 1e-3);
}

TEST(Checkpoint, RoundTripIsBitwise) {
  Trainer tr(tiny(), train_config(4));
  tr.set_corpus(test::synthetic_text(5000), "text");
  for (int i = 0; i < 3; ++i) tr.train_step();
  tr.history().push_back({3, 4.5, 4.6});
  const auto bytes = tr.save_checkpoint(true);
  auto back = Trainer::from_checkpoint(bytes, "mem");
  EXPECT_EQ(back->save_checkpoint(true), bytes);
  EXPECT_EQ(back->state().step, 3);
  EXPECT_EQ(back->state().data_rng.state, tr.state().data_rng.state);
  ASSERT_EQ(back->history().size(), 1u);
  EXPECT_EQ(*back->history()[0].val_loss, 4.6);
  // Weights-only export: same format minus the moments.
  const auto weights = tr.save_checkpoint(false);
  EXPECT_LT(weights.size(), bytes.size());
  SafeTensors f = decode_safetensors(weights.data(), weights.size());
  EXPECT_EQ(f.find("optim.m.tok_emb.weight"), nullptr);
  EXPECT_FALSE(inspect_checkpoint(f, "w").has_optimizer);
}

TEST(Checkpoint, GeluSettingIsRecordedOnlyWhenNotTheDefault) {
  // Files of models with the exact GELU keep the bytes they had before the setting existed.
  EXPECT_FALSE(tiny().to_json().contains("gelu"));
  ModelConfig mc = tiny();
  mc.gelu = "tanh";
  EXPECT_EQ(mc.to_json()["gelu"], "tanh");
  Trainer tr(mc, train_config(1));
  auto back = Trainer::from_checkpoint(tr.save_checkpoint(false), "mem");
  EXPECT_EQ(back->model_config().gelu, "tanh");
  auto j = tiny().to_json();
  j["gelu"] = "relu";
  try {
    ModelConfig::from_json(j);
    ADD_FAILURE() << "gelu relu accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("gelu must be \"erf\" or \"tanh\", got \"relu\""), std::string::npos)
        << e.what();
  }
}

TEST(Checkpoint, FailedLoadLeavesTheModelUntouched) {
  Trainer tr(tiny(), train_config(4));
  tr.set_corpus(test::synthetic_text(5000), "text");
  tr.train_step();
  const auto before = tr.save_checkpoint(true);
  auto bad = before;
  bad.resize(bad.size() - 100);
  EXPECT_THROW(tr.load_checkpoint(bad, "bad"), Error);
  Trainer other(find_preset("small").model, train_config(4));
  auto other_bytes = other.save_checkpoint(false);
  // Break one shape: a small-preset file with tiny's config claims.
  SafeTensors f = decode_safetensors(other_bytes.data(), other_bytes.size());
  f.metadata["model_config"] = tiny().to_json().dump();
  EXPECT_THROW(tr.load_checkpoint(encode_safetensors(f), "mismatch"), Error);
  EXPECT_EQ(tr.save_checkpoint(true), before);
  tr.train_step();  // still usable
  EXPECT_EQ(tr.state().step, 2);
}

TEST(Checkpoint, RejectsForeignAndUnsupportedFiles) {
  Trainer tr(tiny(), train_config(1));
  const auto good = tr.save_checkpoint(false);
  auto expect_error = [](const std::vector<uint8_t>& bytes, const std::string& phrase) {
    try {
      Trainer::from_checkpoint(bytes, "f.tinygpt");
      ADD_FAILURE() << "expected an error containing '" << phrase << "'";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(phrase), std::string::npos) << e.what();
    }
  };
  SafeTensors f = decode_safetensors(good.data(), good.size());
  SafeTensors foreign = f;
  foreign.metadata.clear();
  expect_error(encode_safetensors(foreign), "not a tinygpt checkpoint");
  SafeTensors future = f;
  future.metadata["format_version"] = "99";
  expect_error(encode_safetensors(future), "unsupported checkpoint format_version 99");
  SafeTensors missing = f;
  missing.tensors.pop_back();
  expect_error(encode_safetensors(missing), "missing tensor 'ln_f.bias'");
  SafeTensors extra = f;
  extra.add("head.weight", DType::f32, {2}, std::vector<float>{1, 2}.data());
  expect_error(encode_safetensors(extra), "unexpected tensor 'head.weight'");
  SafeTensors badcfg = f;
  badcfg.metadata["model_config"] = R"({"vocab_size":256,"n_layers":2,"d_model":48,"n_heads":5,"ctx":32})";
  expect_error(encode_safetensors(badcfg), "not divisible");
  expect_error(std::vector<uint8_t>(good.begin(), good.begin() + 40), "f.tinygpt");
  expect_error({}, "f.tinygpt");
}

TEST(Sampler, GreedyTopKTopPAndSeeds) {
  std::vector<float> logits = {1.0f, 3.0f, 2.0f, 0.5f, 3.0f};
  SamplingOptions o;
  o.temperature = 0;
  EXPECT_EQ(Sampler(o).sample(logits.data(), 5), 1);  // first of the tied maxima
  o.temperature = 1.0;
  o.top_k = 2;
  auto p = Sampler(o).distribution(logits.data(), 5);
  EXPECT_NEAR(p[1], 0.5, 1e-12);
  EXPECT_NEAR(p[4], 0.5, 1e-12);
  EXPECT_EQ(p[0] + p[2] + p[3], 0.0);
  o.top_k = 0;
  o.top_p = 0.5;  // the two 3.0 logits hold ~0.66 of the mass; the first alone ~0.33 < 0.5
  p = Sampler(o).distribution(logits.data(), 5);
  EXPECT_NEAR(p[1] + p[4], 1.0, 1e-12);
  o.top_p = 1.0;
  o.temperature = 1e-3;  // nearly greedy: the tie splits evenly
  p = Sampler(o).distribution(logits.data(), 5);
  EXPECT_NEAR(p[1], 0.5, 1e-9);
  o.temperature = 100;  // nearly uniform
  p = Sampler(o).distribution(logits.data(), 5);
  for (double q : p) EXPECT_NEAR(q, 0.2, 0.01);
  // Same seed, same draws; another seed, other draws; frequencies follow the distribution.
  o.temperature = 1.0;
  o.seed = 3;
  Sampler s1(o), s2(o);
  o.seed = 4;
  Sampler s3(o);
  std::vector<int> a, b, c, counts(5);
  for (int i = 0; i < 2000; ++i) {
    a.push_back(s1.sample(logits.data(), 5));
    b.push_back(s2.sample(logits.data(), 5));
    c.push_back(s3.sample(logits.data(), 5));
    counts[a.back()]++;
  }
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);
  p = Sampler(o).distribution(logits.data(), 5);
  for (int i = 0; i < 5; ++i) EXPECT_NEAR(counts[i] / 2000.0, p[i], 0.04) << i;
  o.top_p = 0;
  EXPECT_THROW(Sampler{o}, Error);
}

TEST(Data, SplitWindowsAndErrors) {
  const std::string text = test::synthetic_text(1000);
  Corpus c(text, 32);
  EXPECT_EQ(c.train().size(), 900u);
  EXPECT_EQ(c.val(), text.substr(900));
  Rng r1(5), r2(5);
  Batch a = c.sample_train(r1, 4), b = c.sample_train(r2, 4);
  EXPECT_EQ(a.inputs, b.inputs);
  for (int i = 0; i < 4; ++i)
    for (int t = 0; t + 1 < 32; ++t) EXPECT_EQ(a.targets[i * 32 + t], a.inputs[i * 32 + t + 1]);
  EXPECT_EQ(c.val_batches(4, 2)[1].inputs, c.val_batches(4, 2)[1].inputs);
  EXPECT_THROW(Corpus("", 32), Error);
  EXPECT_THROW(Corpus(std::string(30, 'a'), 32), Error);
  EXPECT_THROW(Corpus(std::string(200, 'a'), 32), Error);  // validation split of 20 bytes < 33
  // Every byte of a text after the first is predicted once.
  auto w = text_windows(std::string(100, 'x'), 32);
  int total = 0;
  for (auto& b2 : w) total += b2.seq;
  EXPECT_EQ(total, 99);
  EXPECT_EQ(printable_utf8("ok \xC3\xA9 \xE2\x82"), "ok \xC3\xA9 \xEF\xBF\xBD\xEF\xBF\xBD");
}
