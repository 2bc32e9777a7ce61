// Dropout (docs/model.md, "Dropout"): the generator's exact numbers, the kernels, the fused
// attention with dropped probabilities, the sites of the train program, and runs: masks change
// with the step, a resumed run equals an uninterrupted one bit for bit, dropout 0 changes nothing.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <numeric>
#include <random>
#include <set>

#include "engine/backends/cpu/kernels.h"
#include "engine/dropout.h"
#include "engine/error.h"
#include "engine/trainer.h"
#include "test_util.h"

using namespace ptl;
using namespace ptl::test;

namespace {

using Vec = std::vector<float>;

Vec randn(size_t n, uint32_t seed) {
  std::mt19937 gen(seed);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  Vec v(n);
  for (auto& x : v) x = dist(gen);
  return v;
}

dropout::Mask mask(double p, const std::string& stream, uint32_t key, uint32_t step) {
  dropout::Mask m;
  m.threshold = dropout::threshold_of(p);
  m.scale = dropout::scale_of(p);
  m.base = dropout::base_of(dropout::stream_of(stream), key, step);
  return m;
}

int count_ops(const Program& p, OpKind kind) {
  int n = 0;
  for (const auto& op : p.ops) n += op.kind == kind;
  return n;
}

}  // namespace

// Known answers, shared with python_ref/dropout.py and the WGSL kernels: any backend that gets
// these gets every mask.
TEST(Dropout, GeneratorKnownAnswers) {
  EXPECT_EQ(dropout::hash(0), 0u);
  EXPECT_EQ(dropout::hash(1), 0x688990c0u);
  EXPECT_EQ(dropout::hash(0xdeadbeefu), 0xe628c683u);
  EXPECT_EQ(dropout::stream_of(""), 2166136261u);
  EXPECT_EQ(dropout::stream_of("a"), 0xe40c292cu);  // FNV-1a 32's published value
  EXPECT_EQ(dropout::stream_of("emb.drop"), 0x6e0b30aau);
  EXPECT_EQ(dropout::key_of(1337), 1337u);
  EXPECT_EQ(dropout::key_of(0x123456789abcdef0ull), 0x88888888u);
  EXPECT_EQ(dropout::base_of(dropout::stream_of("emb.drop"), 1337, 1), 0x01a2d92fu);
  EXPECT_EQ(dropout::threshold_of(0.1), 1677722u);
  EXPECT_EQ(dropout::threshold_of(0.2), 3355443u);
  EXPECT_EQ(dropout::scale_of(0.1), float(1.0 / 0.9));
  const dropout::Mask m = mask(0.1, "emb.drop", 1337, 1);
  const bool kept[16] = {1, 1, 1, 0, 1, 1, 1, 1, 1, 1, 1, 0, 0, 1, 1, 1};
  for (uint32_t i = 0; i < 16; i++) EXPECT_EQ(m.keep(i), kept[i]) << i;
}

TEST(Dropout, RateIsPAndMasksDifferByStepAndSite) {
  const int64_t n = 200000;
  for (double p : {0.1, 0.2, 0.5}) {
    const dropout::Mask m = mask(p, "blocks.0.attn.drop", 42, 7);
    int64_t dropped = 0;
    for (int64_t i = 0; i < n; i++) dropped += !m.keep(uint32_t(i));
    // Binomial: sd = sqrt(p (1 - p) / n) < 0.0012; 5 sd.
    EXPECT_NEAR(double(dropped) / n, p, 0.006) << "p = " << p;
  }
  auto differing = [&](const dropout::Mask& a, const dropout::Mask& b) {
    int64_t d = 0;
    for (int64_t i = 0; i < n; i++) d += a.keep(uint32_t(i)) != b.keep(uint32_t(i));
    return double(d) / n;
  };
  const dropout::Mask a = mask(0.2, "blocks.0.attn.drop", 42, 7);
  // Independent masks at rate p differ on 2 p (1 - p) = 32% of the elements.
  EXPECT_NEAR(differing(a, mask(0.2, "blocks.0.attn.drop", 42, 8)), 0.32, 0.01);  // next step
  EXPECT_NEAR(differing(a, mask(0.2, "blocks.1.attn.drop", 42, 7)), 0.32, 0.01);  // another site
  EXPECT_NEAR(differing(a, mask(0.2, "blocks.0.attn.drop", 43, 7)), 0.32, 0.01);  // another seed
  EXPECT_EQ(differing(a, mask(0.2, "blocks.0.attn.drop", 42, 7)), 0.0);           // the same
}

TEST(Dropout, RatesOutsideZeroToOneAreRejected) {
  for (double p : {-0.1, 1.0, 1.5, std::nan("")}) {
    TrainConfig tc;
    tc.dropout = p;
    EXPECT_THROW(tc.validate(), Error) << p;
    LoraConfig lc;
    lc.rank = 2;
    lc.dropout = p;
    EXPECT_THROW(validate_lora(lc), Error) << p;
  }
  try {
    dropout::check_rate(1.0, "dropout");
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "dropout must be at least 0 and below 1, got 1");
  }
}

TEST(Dropout, KernelKeepsScaledOrZeroAndBackwardUsesTheSameMask) {
  const int64_t n = 1000;
  const Vec x = randn(n, 1), dy = randn(n, 2);
  const dropout::Mask m = mask(0.3, "s", 9, 3);
  Vec y(n), dx(n, 5.0f);
  cpu::dropout_forward(y.data(), x.data(), n, m);
  cpu::dropout_backward(dx.data(), false, dy.data(), n, m);
  int kept = 0;
  for (int64_t i = 0; i < n; i++) {
    if (m.keep(uint32_t(i))) {
      kept++;
      EXPECT_EQ(y[i], x[i] * m.scale);
      EXPECT_EQ(dx[i], dy[i] * m.scale);
    } else {
      EXPECT_EQ(y[i], 0.0f);
      EXPECT_EQ(dx[i], 0.0f);
    }
  }
  EXPECT_GT(kept, 600);
  EXPECT_LT(kept, 800);
  Vec acc(n, 1.0f);
  cpu::dropout_backward(acc.data(), true, dy.data(), n, m);
  // (The compiler may fuse the add into the multiply: one rounding instead of two.)
  for (int64_t i = 0; i < n; i++) EXPECT_NEAR(acc[i], 1.0f + dx[i], 1e-6f * (1.0f + std::abs(dx[i])));
}

// The fused attention with dropped probabilities against the whole T x T matrix in double:
// y_i = sum_j keep_ij scale p_ij v_j, lse of the undropped softmax.
TEST(Dropout, AttentionForwardMatchesNaive) {
  const int64_t B = 2, T = 37, C = 12, H = 3, hs = C / H, n = B * T * C;
  const Vec q = randn(n, 3), k = randn(n, 4), v = randn(n, 5);
  const dropout::Mask m = mask(0.25, "blocks.0.attn.probs.drop", 11, 2);
  Vec y(n), lse(B * H * T), y0(n), lse0(B * H * T);
  cpu::attention_forward(y.data(), lse.data(), q.data(), k.data(), v.data(), B, T, C, H, m);
  cpu::attention_forward(y0.data(), lse0.data(), q.data(), k.data(), v.data(), B, T, C, H);
  EXPECT_EQ(lse, lse0);
  double max_err = 0;
  for (int64_t b = 0; b < B; b++)
    for (int64_t h = 0; h < H; h++)
      for (int64_t i = 0; i < T; i++) {
        std::vector<double> s(i + 1);
        double mx = -INFINITY, sum = 0;
        for (int64_t j = 0; j <= i; j++) {
          double d = 0;
          for (int64_t c = 0; c < hs; c++)
            d += double(q[(b * T + i) * C + h * hs + c]) * k[(b * T + j) * C + h * hs + c];
          s[j] = d / std::sqrt(double(hs));
          mx = std::max(mx, s[j]);
        }
        for (int64_t j = 0; j <= i; j++) sum += std::exp(s[j] - mx);
        for (int64_t c = 0; c < hs; c++) {
          double acc = 0;
          for (int64_t j = 0; j <= i; j++) {
            const uint32_t index = uint32_t(((b * H + h) * T + i) * T + j);
            if (m.keep(index)) acc += double(m.scale) * std::exp(s[j] - mx) / sum * v[(b * T + j) * C + h * hs + c];
          }
          max_err = std::max(max_err, std::abs(acc - y[(b * T + i) * C + h * hs + c]));
        }
      }
  EXPECT_LT(max_err, 1e-5);
  EXPECT_NE(y, y0);
}

// dq, dk, dv with dropout against central differences of sum(y * R) (the mask is fixed by its
// seed, so the forward is a smooth function of q, k, v).
TEST(Dropout, AttentionBackwardMatchesFiniteDifferences) {
  for (const auto& [B, T, C, H] : std::vector<std::array<int64_t, 4>>{{1, 7, 12, 3}, {2, 37, 8, 2}}) {
    const int64_t n = B * T * C;
    Vec q = randn(n, 6), k = randn(n, 7), v = randn(n, 8);
    const Vec R = randn(n, 9);
    const dropout::Mask m = mask(0.2, "blocks.1.attn.probs.drop", 5, 4);
    // (Bindings captured by copy: clang before 16 cannot capture structured bindings.)
    auto loss = [&, B = B, T = T, C = C, H = H] {
      Vec y(n), lse(B * H * T);
      cpu::attention_forward(y.data(), lse.data(), q.data(), k.data(), v.data(), B, T, C, H, m);
      double s = 0;
      for (int64_t i = 0; i < n; i++) s += double(y[i]) * R[i];
      return s;
    };
    Vec y(n), lse(B * H * T), dq(n), dk(n), dv(n);
    cpu::attention_forward(y.data(), lse.data(), q.data(), k.data(), v.data(), B, T, C, H, m);
    cpu::attention_backward(dq.data(), false, dk.data(), false, dv.data(), false, R.data(), q.data(), k.data(),
                            v.data(), y.data(), lse.data(), B, T, C, H, m);
    for (auto [name, x, g] : {std::tuple{"dq", &q, &dq}, std::tuple{"dk", &k, &dk}, std::tuple{"dv", &v, &dv}}) {
      int failures = 0;
      for (int64_t i = 0; i < n; i += 3) {
        const float old = (*x)[i];
        const float h = 1e-3f;
        (*x)[i] = old + h;
        const double lp = loss();
        (*x)[i] = old - h;
        const double lm = loss();
        (*x)[i] = old;
        const double numeric = (lp - lm) / (double(old + h) - double(old - h));
        if (std::abs((*g)[i] - numeric) > 1e-2 * std::abs(numeric) + 2e-3 && failures++ < 5)
          ADD_FAILURE() << name << "[" << i << "] (T=" << T << "): analytic " << (*g)[i] << " vs numeric " << numeric;
      }
      EXPECT_EQ(failures, 0) << name;
    }
  }
}

TEST(Dropout, SitesAreInTrainProgramsOnly) {
  const ModelConfig mc = tiny();
  TrainConfig tc = train_config(2);
  BuildOptions opt;
  opt.batch = 2;
  // Off: the program of a run without dropout, no seed input.
  Program off = build_train_program(mc, opt, tc);
  EXPECT_EQ(count_ops(off, OpKind::dropout), 0);
  EXPECT_LT(off.find("dropout.seed"), 0);
  for (const auto& op : off.ops)
    if (op.kind == OpKind::attention) {
      EXPECT_EQ(op.inputs.size(), 3u);
    }
  // On: embedding, and per layer o_proj and fc_out (attention's probabilities inside the op).
  tc.dropout = 0.1;
  Program on = build_train_program(mc, opt, tc);
  EXPECT_EQ(count_ops(on, OpKind::dropout), 1 + 2 * mc.n_layers);
  EXPECT_EQ(count_ops(on, OpKind::dropout_backward), 1 + 2 * mc.n_layers);
  const int seed = on.id("dropout.seed");
  EXPECT_EQ(on.tensor(seed).kind, TensorKind::input);
  EXPECT_EQ(on.tensor(seed).dtype, DType::i32);
  std::set<double> streams;
  for (const auto& op : on.ops) {
    if (op.kind == OpKind::attention || op.kind == OpKind::attention_backward) {
      EXPECT_EQ(op.inputs.back(), seed);
      EXPECT_EQ(op.attr("threshold"), double(dropout::threshold_of(0.1)));
    }
    if (op.kind == OpKind::dropout || op.kind == OpKind::attention) {
      EXPECT_EQ(op.attr("p"), 0.1);
      EXPECT_EQ(op.attr("scale"), double(dropout::scale_of(0.1)));
      streams.insert(op.attr("stream"));
    }
  }
  EXPECT_EQ(streams.size(), size_t(1 + 3 * mc.n_layers));  // one stream per site
  EXPECT_TRUE(streams.count(double(dropout::stream_of("emb.drop"))));
  EXPECT_TRUE(streams.count(double(dropout::stream_of("blocks.1.attn.probs.drop"))));
  EXPECT_TRUE(streams.count(double(dropout::stream_of("blocks.0.attn.drop"))));
  EXPECT_TRUE(streams.count(double(dropout::stream_of("blocks.1.mlp.drop"))));
  // The same program (dropout ops and all) through JSON, as the WebGPU backend receives it.
  EXPECT_EQ(Program::from_json(on.to_json()).to_json(), on.to_json());
  // Never in the other programs, whatever the options say.
  opt.dropout = 0.5;
  opt.lora.rank = 2;
  opt.lora.targets = {"q", "v"};
  opt.lora.dropout = 0.5;
  for (const Program& p : {build_eval_program(mc, opt), build_forward_program(mc, opt),
                           build_generate_program(mc, opt.lora), build_inspect_program(mc, 8, opt.lora)}) {
    EXPECT_EQ(count_ops(p, OpKind::dropout), 0) << p.name;
    EXPECT_LT(p.find("dropout.seed"), 0) << p.name;
  }
  // LoRA: only the adapters' input, one site per target (q, v here), with the model's rate 0.
  tc.dropout = 0.0;
  Program lora = build_train_program(mc, opt, tc);
  EXPECT_EQ(count_ops(lora, OpKind::dropout), 2 * mc.n_layers);
  EXPECT_GE(lora.find("blocks.0.attn.q_proj.lora_drop"), 0);
  for (const auto& op : lora.ops)
    if (op.kind == OpKind::attention) {
      EXPECT_EQ(op.inputs.size(), 3u);
    }
}

TEST(Dropout, ModelGradientsMatchFiniteDifferences) {
  // As Model.GradientsMatchFiniteDifferences, with every site dropping (rate 0.2): the loss of
  // the train program's forward for a fixed (seed, step), by central differences on the weights.
  TrainConfig tc = train_config(2);
  tc.dropout = 0.2;
  const ModelConfig mc = tiny();
  Trainer tr(mc, tc);
  const Batch b = random_batch(2, 32, 11);
  compute_gradients(tr, b, 3);
  cpu::Executor& ex = tr.train_executor();
  auto loss = [&] {
    compute_gradients(tr, b, 3);
    return double(ex.f32("loss")[0]);
  };
  std::vector<std::pair<std::string, std::vector<float>>> grads;
  for (const auto& t : parameter_list(mc)) {
    const float* g = tr.gradient(t.name);
    grads.push_back({t.name, std::vector<float>(g, g + t.numel())});
  }
  // Differs from the undropped loss (the sites are live).
  const double with = loss();
  EXPECT_NE(with, tr.batch_loss(b));
  for (const auto& [name, g] : grads) {
    float* p = tr.store().find(name);
    std::vector<int64_t> idx(g.size());
    std::iota(idx.begin(), idx.end(), 0);
    std::partial_sort(idx.begin(), idx.begin() + 2, idx.end(),
                      [&g = g](int64_t a, int64_t c) { return std::abs(g[a]) > std::abs(g[c]); });
    for (int k = 0; k < 2; ++k) {
      const int64_t i = idx[k];
      const float saved = p[i];
      const double h = 1e-2;
      p[i] = saved + float(h);
      const double lp = loss();
      p[i] = saved - float(h);
      const double lm = loss();
      p[i] = saved;
      const double numeric = (lp - lm) / (2 * h);
      EXPECT_NEAR(g[i], numeric, 0.05 * std::abs(numeric) + 1e-3) << name << "[" << i << "]";
    }
  }
}

TEST(Dropout, StepsDrawNewMasksAndEqualStepsTheSame) {
  TrainConfig tc = train_config(2);
  tc.dropout = 0.2;
  Trainer tr(tiny(), tc);
  const Batch b = random_batch(2, 32, 5);
  auto loss_at = [&](uint32_t step) {
    compute_gradients(tr, b, step);
    return tr.train_executor().f32("loss")[0];
  };
  const float l1 = loss_at(1), l2 = loss_at(2);
  EXPECT_NE(l1, l2);
  EXPECT_EQ(loss_at(1), l1);
  EXPECT_EQ(loss_at(2), l2);
}

TEST(Dropout, ZeroRateIsBitwiseTheRunWithoutDropout) {
  // Dropout 0 builds the program of a run without the setting: the same ops, losses and weights.
  TrainConfig tc = train_config(2);
  Trainer a(tiny(), tc);
  tc.dropout = 0.0;
  Trainer b(tiny(), tc);
  for (int s = 0; s < 3; s++) {
    const Batch batch = random_batch(2, 32, 100 + s);
    EXPECT_EQ(a.train_step(batch).loss, b.train_step(batch).loss);
  }
  EXPECT_EQ(a.save_checkpoint(), b.save_checkpoint());
}

TEST(Dropout, ResumeIsBitwiseAnUninterruptedRun) {
  // 40 steps straight against 20, a checkpoint, a fresh trainer from it and 20 more: the same
  // losses and every tensor (weights and AdamW moments) bit for bit. The masks are a function
  // of the seed (kept in the checkpoint's train config) and the step.
  TrainConfig tc = train_config(2, 77);
  tc.steps = 40;
  tc.dropout = 0.15;
  const std::string text = synthetic_text(20000);
  Trainer straight(tiny(), tc);
  straight.set_corpus(text);
  std::vector<double> losses;
  for (int s = 0; s < 40; s++) losses.push_back(straight.train_step().loss);

  Trainer first(tiny(), tc);
  first.set_corpus(text);
  for (int s = 0; s < 20; s++) EXPECT_EQ(first.train_step().loss, losses[s]) << s;
  auto resumed = Trainer::from_checkpoint(first.save_checkpoint(), "half");
  EXPECT_EQ(resumed->train_config().dropout, 0.15);
  resumed->set_corpus(text);
  for (int s = 20; s < 40; s++) EXPECT_EQ(resumed->train_step().loss, losses[s]) << s;
  const auto a = straight.save_checkpoint(), b = resumed->save_checkpoint();
  SafeTensors sa = decode_safetensors(a.data(), a.size()), sb = decode_safetensors(b.data(), b.size());
  ASSERT_EQ(sa.tensors.size(), sb.tensors.size());
  for (size_t i = 0; i < sa.tensors.size(); ++i)
    EXPECT_EQ(sa.tensors[i].data, sb.tensors[i].data) << sa.tensors[i].name;
  // A checkpoint without the key (older files) means no dropout.
  nlohmann::json j = tc.to_json();
  j.erase("dropout");
  EXPECT_EQ(TrainConfig::from_json(j).dropout, 0.0);
}

TEST(Dropout, LoraDropoutTrainsOnlyTheAdaptersAndIsRecorded) {
  TrainConfig tc = train_config(2);
  Trainer tr(tiny(), tc);
  LoraConfig lc;
  lc.rank = 2;
  lc.dropout = 0.2;
  tr.enable_lora(lc, 3);
  tr.set_base_sha256("00");  // the adapter file records its base
  // B = 0 at the start: nudge it so the adapters' (dropped) path reaches the loss.
  for (const auto& t : adapter_tensors(tiny(), lc))
    if (t.name.ends_with(".lora_B")) {
      float* p = tr.store().find(t.name);
      const Vec r = randn(size_t(t.numel()), 17);
      for (int64_t i = 0; i < t.numel(); i++) p[i] = 0.05f * r[i];
    }
  const Batch b = random_batch(2, 32, 8);
  compute_gradients(tr, b, 1);
  const float l1 = tr.train_executor().f32("loss")[0];
  compute_gradients(tr, b, 2);
  EXPECT_NE(tr.train_executor().f32("loss")[0], l1);  // the adapters' masks moved
  // The eval program has no dropout: its loss is the same for any step.
  EXPECT_EQ(tr.batch_loss(b), tr.batch_loss(b));
  const auto bytes = tr.save_adapter();
  SafeTensors f = decode_safetensors(bytes.data(), bytes.size());
  EXPECT_EQ(nlohmann::json::parse(f.metadata.at("lora_config"))["dropout"], 0.2);
  nlohmann::json old = lora_to_json(lc);
  old.erase("dropout");
  EXPECT_EQ(lora_from_json(old).dropout, 0.0);
}

// ---------------------------------------------------------------------------------------------
// The command line: --dropout on ptl train, ptl sft and ptl lora train.

namespace {
nlohmann::json metadata_json(const std::string& path, const std::string& key) {
  const auto bytes = read_file_bytes(path);
  SafeTensors f = decode_safetensors(bytes.data(), bytes.size());
  return nlohmann::json::parse(f.metadata.at(key));
}
std::vector<double> metric_losses(const std::string& path) {
  std::vector<double> out;
  std::ifstream f(path);
  for (std::string line; std::getline(f, line);) out.push_back(nlohmann::json::parse(line)["train_loss"].get<double>());
  return out;
}
}  // namespace

TEST(DropoutCli, RatesAreValidatedRecordedAndResumedBitwise) {
  TempDir d;
  write(d.file("t.txt"), synthetic_text(20000));
  for (const char* bad : {"1", "-0.1", "1.5", "abc"}) {
    const CliRun r = ptl_cli(std::string("train --preset tiny --data t.txt --out r --dropout ") + bad, d);
    EXPECT_NE(r.code, 0) << bad;
    EXPECT_NE(r.err.find("--dropout"), std::string::npos) << r.err;
  }
  EXPECT_NE(ptl_cli("train --preset tiny --data t.txt --out r --dropout 1", d).err.find("below 1, got 1"),
            std::string::npos);
  EXPECT_FALSE(std::filesystem::exists(d.file("r")));
  // The train program for other executors, with its dropout ops and seed input.
  CliRun prog = ptl_cli("program --preset tiny --dropout 0.1 --out p.json", d);
  ASSERT_EQ(prog.code, 0) << prog.err;
  const std::string json = slurp(d.file("p.json"));
  EXPECT_NE(json.find("\"dropout_backward\""), std::string::npos);
  EXPECT_NE(json.find("\"dropout.seed\""), std::string::npos);
  expect_error(ptl_cli("program --preset tiny --program eval --dropout 0.1", d), "train program only");
  // 40 steps straight against 20 and a resume: the same losses and the same tensors, bit for bit.
  const std::string common =
      "train --preset tiny --sample-every 0 --data t.txt --steps 40 --eval-every 20 --dropout 0.2";
  ASSERT_EQ(ptl_cli(common + " --out straight", d).code, 0);
  ASSERT_EQ(ptl_cli(common + " --until 20 --out split", d).code, 0);
  EXPECT_EQ(metadata_json(d.file("split/model.tinygpt"), "train_config")["dropout"], 0.2);
  const CliRun r = ptl_cli("train --resume split/model.tinygpt", d);
  ASSERT_EQ(r.code, 0) << r.err;
  const auto la = metric_losses(d.file("straight/metrics.jsonl")), lb = metric_losses(d.file("split/metrics.jsonl"));
  ASSERT_EQ(la.size(), 40u);
  EXPECT_EQ(la, lb);
  const auto fa = read_file_bytes(d.file("straight/model.tinygpt")),
             fb = read_file_bytes(d.file("split/model.tinygpt"));
  SafeTensors sa = decode_safetensors(fa.data(), fa.size()), sb = decode_safetensors(fb.data(), fb.size());
  ASSERT_EQ(sa.tensors.size(), sb.tensors.size());
  for (size_t i = 0; i < sa.tensors.size(); ++i)
    EXPECT_EQ(sa.tensors[i].data, sb.tensors[i].data) << sa.tensors[i].name;
  // The rate is the run's: a resume may repeat it, not change it.
  expect_error(ptl_cli("train --resume split/model.tinygpt --steps 50 --dropout 0.1", d),
               "--dropout 0.1 differs from the checkpoint's 0.2");
  // Without dropout the losses are another run's.
  ASSERT_EQ(ptl_cli("train --preset tiny --sample-every 0 --data t.txt --steps 40 --eval-every 20 --out plain", d).code,
            0);
  EXPECT_NE(metric_losses(d.file("plain/metrics.jsonl")), la);
}

TEST(DropoutCli, SftAndLoraTrainTakeTheirRates) {
  TempDir d;
  write(d.file("t.txt"), synthetic_text(20000));
  {
    std::ofstream f(d.file("ex.jsonl"));
    for (int i = 0; i < 60; i++) f << "{\"prompt\": \"a" << i % 7 << "\", \"response\": \"b" << i % 5 << "\"}\n";
  }
  ASSERT_EQ(
      ptl_cli("train --preset tiny --ctx 64 --sample-every 0 --data t.txt --steps 5 --out base --dropout 0.1", d).code,
      0);
  CliRun r =
      ptl_cli("sft --base base/model.tinygpt --data ex.jsonl --steps 4 --eval-every 0 --out sft --dropout 0.3", d);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(metadata_json(d.file("sft/model.tinygpt"), "train_config")["dropout"], 0.3);
  r = ptl_cli("lora train --base base/model.tinygpt --data t.txt --steps 4 --eval-every 0 --out lora --dropout 0.25",
              d);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(metadata_json(d.file("lora/adapter.tinygpt-lora"), "lora_config")["dropout"], 0.25);
  // The fine-tuning run's model rate is its own (0 here), not the base run's 0.1.
  EXPECT_EQ(metadata_json(d.file("lora/adapter.tinygpt-lora"), "train_config")["dropout"], 0.0);
  for (const char* cmd : {"sft --base base/model.tinygpt --data ex.jsonl --out x --dropout 1",
                          "lora train --base base/model.tinygpt --data t.txt --out x --dropout -1"}) {
    r = ptl_cli(cmd, d);
    EXPECT_NE(r.code, 0) << cmd;
    EXPECT_NE(r.err.find("--dropout"), std::string::npos) << r.err;
  }
}
