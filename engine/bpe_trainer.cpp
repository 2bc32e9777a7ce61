// BPE training with incremental pair counts. Counting every pair again after each merge would
// cost (merges x text); instead each distinct piece ("word") is stored once with its count, the
// count of every adjacent pair is kept up to date, and each pair knows the words it occurs in.
// A merge then touches only the words that hold its pair, and the next pair to merge comes from a
// max-heap of (count, pair) whose stale entries are skipped when popped.
#include "engine/bpe_trainer.h"

#include <chrono>
#include <queue>
#include <unordered_map>

#include "engine/error.h"
#include "engine/pretokenize.h"

namespace ptl {

namespace {

uint64_t pair_key(int32_t left, int32_t right) {
  return (static_cast<uint64_t>(static_cast<uint32_t>(left)) << 32) | static_cast<uint32_t>(right);
}
int32_t left_of(uint64_t key) { return static_cast<int32_t>(key >> 32); }
int32_t right_of(uint64_t key) { return static_cast<int32_t>(key & 0xFFFFFFFFu); }

struct Word {
  std::vector<int32_t> sym;
  int64_t count;
};

// A heap entry: valid while `count` is still the pair's count. The heap's top is the largest
// count, and among equal counts the smallest key, that is the smallest (left id, right id).
struct Entry {
  int64_t count;
  uint64_t key;
};
struct EntryOrder {
  bool operator()(const Entry& a, const Entry& b) const {  // true: a comes out after b
    return a.count != b.count ? a.count < b.count : a.key > b.key;
  }
};

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

Tokenizer train_bpe(std::string_view text, const BpeTrainOptions& opt, BpeTrainStats* stats) {
  check(opt.vocab_size >= kMinTrainVocab && opt.vocab_size <= kMaxTrainVocab,
        "vocabulary size " + std::to_string(opt.vocab_size) + " is outside " + std::to_string(kMinTrainVocab) + ".." +
            std::to_string(kMaxTrainVocab) + " (256 bytes, the merges, and the special tokens)");
  for (size_t i = 0; i < opt.specials.size(); ++i) {
    check(!opt.specials[i].empty(), "a special token cannot be empty");
    for (size_t k = 0; k < i; ++k)
      check(opt.specials[k] != opt.specials[i], "special token listed twice: " + opt.specials[i]);
  }
  const int wanted = opt.vocab_size - static_cast<int>(opt.specials.size());  // bytes + merged tokens
  check(wanted >= 256, "vocabulary size " + std::to_string(opt.vocab_size) + " leaves no room for the 256 bytes and " +
                           std::to_string(opt.specials.size()) + " special tokens");
  BpeTrainStats st;
  auto t0 = std::chrono::steady_clock::now();

  // 1. The distinct pieces and their counts, the text cut at the special tokens first.
  std::unordered_map<std::string_view, int64_t> counts;
  const auto count_pieces = [&](std::string_view part) {
    for_each_gpt2_piece(part, [&](std::string_view piece) {
      ++counts[piece];
      ++st.pieces;
    });
  };
  for (size_t i = 0; i < text.size();) {
    size_t best = text.size(), len = 0;
    for (const auto& s : opt.specials)
      if (const size_t p = text.find(s, i); p < best || (p == best && p != text.size() && s.size() > len))
        best = p, len = s.size();
    count_pieces(text.substr(i, best - i));
    i = best + len;
  }
  std::vector<Word> words;
  words.reserve(counts.size());
  for (const auto& [piece, c] : counts) {
    Word w{std::vector<int32_t>(piece.size()), c};
    for (size_t i = 0; i < piece.size(); ++i) w.sym[i] = static_cast<unsigned char>(piece[i]);
    words.push_back(std::move(w));
  }
  st.distinct_pieces = static_cast<int64_t>(words.size());

  // 2. Pair counts, where each pair occurs, and the heap.
  std::unordered_map<uint64_t, int64_t> pair_count;
  std::unordered_map<uint64_t, std::vector<int32_t>> where;
  for (int32_t w = 0; w < static_cast<int32_t>(words.size()); ++w) {
    const auto& s = words[w].sym;
    for (size_t i = 0; i + 1 < s.size(); ++i) {
      const uint64_t k = pair_key(s[i], s[i + 1]);
      pair_count[k] += words[w].count;
      auto& list = where[k];
      if (list.empty() || list.back() != w) list.push_back(w);
    }
  }
  std::priority_queue<Entry, std::vector<Entry>, EntryOrder> heap;
  for (const auto& [k, c] : pair_count) heap.push({c, k});
  st.split_s = seconds_since(t0);
  t0 = std::chrono::steady_clock::now();

  // 3. Merges.
  std::vector<std::string> token(256);
  std::unordered_map<std::string, int32_t> id_of;
  for (int b = 0; b < 256; ++b) {
    token[b] = std::string(1, static_cast<char>(b));
    id_of[token[b]] = b;
  }
  std::vector<Tokenizer::Merge> merges;
  std::vector<int32_t> stamp(words.size(), -1);  // the last merge that rewrote each word
  std::unordered_map<uint64_t, int64_t> before;  // pairs a merge touched -> their count before it
  std::vector<int32_t> rewritten;
  while (static_cast<int>(token.size()) < wanted && !heap.empty()) {
    const Entry top = heap.top();
    heap.pop();
    auto pc = pair_count.find(top.key);
    if (pc == pair_count.end() || pc->second != top.count) continue;  // stale
    const int32_t left = left_of(top.key), right = right_of(top.key);
    std::string bytes = token[left] + token[right];
    int32_t result;
    if (auto it = id_of.find(bytes); it != id_of.end()) {
      result = it->second;
    } else {
      result = static_cast<int32_t>(token.size());
      id_of.emplace(bytes, result);
      token.push_back(std::move(bytes));
    }
    const auto rank = static_cast<int32_t>(merges.size());
    merges.push_back({left, right, result});
    st.last_count = top.count;

    // Rewrite every word that holds the pair: take its pairs out of the counts, merge (left to
    // right, as encoding does), put the new pairs in; the pairs with the new token learn the word.
    const std::vector<int32_t> holders = std::move(where[top.key]);
    where.erase(top.key);
    before.clear();
    const auto add = [&](uint64_t k, int64_t delta) {
      auto [it, fresh] = pair_count.try_emplace(k, 0);
      before.try_emplace(k, it->second);
      it->second += delta;
    };
    for (int32_t w : holders) {
      if (stamp[w] == rank) continue;  // listed twice
      stamp[w] = rank;
      std::vector<int32_t>& s = words[w].sym;
      rewritten.clear();
      for (size_t i = 0; i < s.size();) {
        if (i + 1 < s.size() && s[i] == left && s[i + 1] == right) {
          rewritten.push_back(result);
          i += 2;
        } else {
          rewritten.push_back(s[i++]);
        }
      }
      if (rewritten.size() == s.size()) continue;
      const int64_t c = words[w].count;
      for (size_t i = 0; i + 1 < s.size(); ++i) add(pair_key(s[i], s[i + 1]), -c);
      for (size_t i = 0; i + 1 < rewritten.size(); ++i) {
        const uint64_t k = pair_key(rewritten[i], rewritten[i + 1]);
        add(k, c);
        if (rewritten[i] == result || rewritten[i + 1] == result) {
          auto& list = where[k];
          if (list.empty() || list.back() != w) list.push_back(w);
        }
      }
      s.swap(rewritten);
    }
    for (const auto& [k, was] : before) {
      auto it = pair_count.find(k);
      if (it->second == was) continue;
      if (it->second > 0) {
        heap.push({it->second, k});
      } else {
        pair_count.erase(it);
        where.erase(k);
      }
    }
    if (opt.progress && (rank % 256 == 0)) opt.progress(static_cast<int>(token.size()), wanted);
  }
  st.merge_s = seconds_since(t0);
  st.merges = static_cast<int>(merges.size());

  // 4. The tokenizer, through the same checks as one read from a file.
  Tokenizer::Spelled sp;
  sp.vocab.reserve(token.size());
  for (size_t id = 0; id < token.size(); ++id) sp.vocab.emplace_back(bytes_to_unicode(token[id]), id);
  for (const auto& m : merges) sp.merges.emplace_back(sp.vocab[m.left].first, sp.vocab[m.right].first);
  for (size_t i = 0; i < opt.specials.size(); ++i)
    sp.specials.push_back({opt.specials[i], static_cast<int32_t>(token.size() + i)});
  st.vocab_size = static_cast<int>(token.size() + opt.specials.size());
  if (opt.progress) opt.progress(static_cast<int>(token.size()), wanted);
  if (stats) *stats = st;
  return Tokenizer::from_spelled(std::move(sp), "trained tokenizer", nullptr);
}

}  // namespace ptl
