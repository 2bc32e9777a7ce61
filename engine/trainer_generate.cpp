// Trainer: generation and inspection on the current weights (the generate program with its KV
// cache, the window recomputed past the context, the inspect program's attention maps).
#include <algorithm>
#include <cmath>
#include <cstring>

#include "engine/error.h"
#include "engine/trainer.h"

namespace ptl {

std::vector<int32_t> Trainer::start_tokens() const {
  // A newline, as if a new paragraph began: byte 10, or its token; a model that reads no text
  // starts from id 10 too (0 when its vocabulary is smaller).
  if (!tokenizer_.reads_text()) return {model_.vocab_size > 10 ? 10 : 0};
  return tokenizer_.text().encode("\n");
}

InspectResult Trainer::inspect(const std::vector<int32_t>& prompt, int top_k) {
  const int V = model_.vocab_size, ctx = model_.ctx;
  check(top_k >= 1, "top k must be at least 1");
  for (int32_t t : prompt) check(t >= 0 && t < V, "prompt token outside the vocabulary");
  InspectResult r;
  // As generation: an empty prompt is a newline, and past the context the model sees the last
  // ctx tokens (nanoGPT's crop).
  if (prompt.empty())
    r.tokens = start_tokens();
  else
    r.tokens.assign(prompt.end() - std::min<size_t>(prompt.size(), size_t(ctx)), prompt.end());
  const int T = int(r.tokens.size());
  if (!inspect_exec_ || inspect_exec_->program().tensor(inspect_exec_->program().id("tokens")).shape[1] != T)
    inspect_exec_ = std::make_unique<cpu::Executor>(build_inspect_program(model_, T, lora_), store_);
  cpu::Executor& ex = *inspect_exec_;
  std::memcpy(ex.i32("tokens"), r.tokens.data(), size_t(T) * 4);
  ex.run();

  // Next-token probabilities at the last position, in double: p_v = exp(l_v - max) / sum.
  const float* last = ex.f32("logits") + size_t(T - 1) * V;
  const double mx = *std::max_element(last, last + V);
  std::vector<double> p(V);
  double sum = 0;
  for (int v = 0; v < V; ++v) sum += p[v] = std::exp(double(last[v]) - mx);
  std::vector<int32_t> order(V);
  for (int v = 0; v < V; ++v) order[v] = v;
  const int k = std::min(top_k, V);
  // Most likely first; equal probabilities by id, so the order is deterministic.
  std::partial_sort(order.begin(), order.begin() + k, order.end(),
                    [&](int32_t a, int32_t b) { return p[a] != p[b] ? p[a] > p[b] : a < b; });
  for (int i = 0; i < k; ++i) r.top.push_back({order[i], p[order[i]] / sum});

  r.layers = model_.n_layers;
  r.heads = model_.n_heads;
  r.T = T;
  const size_t per_layer = size_t(r.heads) * T * T;
  r.attention.resize(size_t(r.layers) * per_layer);
  for (int l = 0; l < r.layers; ++l) {
    const float* probs = ex.f32("blocks." + std::to_string(l) + ".attn.probs");
    std::copy(probs, probs + per_layer, r.attention.begin() + l * per_layer);
  }
  return r;
}

void Trainer::begin_generation(const std::vector<int32_t>& prompt, const SamplingOptions& opt) {
  for (int32_t t : prompt) check(t >= 0 && t < model_.vocab_size, "prompt token outside the vocabulary");
  if (!generate_exec_) {
    generate_exec_ = std::make_unique<cpu::Executor>(build_generate_program(model_, lora_), store_);
    // A token is a single row through every weight: the weights stay packed between tokens,
    // until they change (TensorStore::changed()).
    generate_exec_->pack_weights = true;
  }
  // An empty prompt starts from a newline, as if a new paragraph began.
  gen_ = std::make_unique<Generation>(
      Generation{Sampler(opt), prompt.empty() ? start_tokens() : prompt, 0, std::vector<float>(model_.vocab_size)});
}

int32_t Trainer::next_token() {
  check(gen_ != nullptr, "no generation in progress: begin one first");
  Generation& g = *gen_;
  cpu::Executor& dec = *generate_exec_;
  const int V = model_.vocab_size, ctx = model_.ctx;
  const int L = int(g.seq.size());
  const float* logits;
  if (L <= ctx && L - g.cached > 1) {
    // Within the context, the KV cache is exact: feed only the tokens it has not seen. Several
    // (a prompt) go through the generate program over as many rows at once, a product per
    // weight instead of one per token; every row's floats are those of feeding the tokens one
    // at a time (build_generate_program), so the continuation is the same.
    const int n = L - g.cached;
    if (!prefill_exec_ || prefill_exec_->program().tensor(prefill_exec_->program().id("tokens")).shape[1] != n) {
      prefill_exec_ = std::make_unique<cpu::Executor>(build_generate_program(model_, lora_, n), store_);
      prefill_exec_->pack_weights = true;  // the packs the tokens after it read
    }
    cpu::Executor& pre = *prefill_exec_;
    std::memcpy(pre.i32("tokens"), g.seq.data() + g.cached, size_t(n) * 4);
    pre.i32("pos0")[0] = g.cached;
    pre.run();
    g.cached = L;
    logits = pre.f32("logits");  // the last position's only (BuildOptions::last_position_only)
  } else if (L <= ctx) {
    // One new token (the one sampled last).
    for (; g.cached < L; ++g.cached) {
      dec.i32("tokens")[0] = g.seq[g.cached];
      dec.i32("pos0")[0] = g.cached;
      dec.run();
    }
    logits = dec.f32("logits");
  } else {
    // Past the context the model sees the last ctx tokens at positions 0..ctx-1 (nanoGPT's
    // crop), so every position shifts and the window is recomputed.
    Batch b{1, ctx, std::vector<int32_t>(g.seq.end() - ctx, g.seq.end()), {}};
    std::memcpy(g.window_logits.data(), this->logits(b) + size_t(ctx - 1) * V, V * sizeof(float));
    logits = g.window_logits.data();
  }
  const int32_t next = g.sampler.sample(logits, V);
  g.seq.push_back(next);
  return next;
}

std::vector<int32_t> Trainer::generate(const std::vector<int32_t>& prompt, int max_tokens, const SamplingOptions& opt,
                                       const std::function<bool(int32_t)>& on_token) {
  check(max_tokens >= 0, "max tokens must not be negative");
  begin_generation(prompt, opt);
  std::vector<int32_t> out;
  for (int i = 0; i < max_tokens; ++i) {
    out.push_back(next_token());
    if (on_token && !on_token(out.back())) break;
  }
  gen_.reset();
  return out;
}

}  // namespace ptl
