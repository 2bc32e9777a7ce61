// Byte-level BPE: building a tokenizer from its vocabulary, encoding (pieces, merges by rank, a
// cache of pieces already seen) and decoding. The file formats are in tokenizer_files.cpp, training
// in bpe_trainer.cpp.
#include "engine/tokenizer.h"

#include <algorithm>
#include <array>
#include <cstring>
#include <queue>
#include <unordered_map>

#include "engine/error.h"
#include "engine/pretokenize.h"
#include "engine/unicode_classes.h"

namespace ptl {

namespace {

// GPT-2's bytes_to_unicode(): the printable bytes keep their code point, the others take
// U+0100, U+0101, ... in byte order.
struct ByteMap {
  std::array<uint32_t, 256> to_cp{};
  std::array<int16_t, 0x144> to_byte{};  // code point -> byte, -1 where none (0x100 + 68 = 0x144)
  ByteMap() {
    to_byte.fill(-1);
    uint32_t next = 0x100;
    for (int b = 0; b < 256; ++b) {
      const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
      to_cp[b] = printable ? b : next++;
      to_byte[to_cp[b]] = static_cast<int16_t>(b);
    }
  }
};
const ByteMap& byte_map() {
  static const ByteMap m;
  return m;
}

void append_utf8(std::string& out, uint32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {  // the map never goes past U+0143; the general case is for completeness
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

uint64_t pair_key(int32_t left, int32_t right) {
  return (static_cast<uint64_t>(static_cast<uint32_t>(left)) << 32) | static_cast<uint32_t>(right);
}
constexpr uint64_t kEmptyKey = ~uint64_t{0};  // ids are below 2^20, so no pair packs to this
size_t slot_of(uint64_t key, size_t mask) { return static_cast<size_t>((key * 0x9E3779B97F4A7C15ull) >> 20) & mask; }

std::string in_quotes(std::string_view s) {
  std::string out = "'";
  for (unsigned char c : s) {
    if (c < 0x20 || c == 0x7F) {
      static const char* hex = "0123456789abcdef";
      out += "\\x";
      out += hex[c >> 4];
      out += hex[c & 15];
    } else {
      out += static_cast<char>(c);
    }
    if (out.size() > 60) return out + "...'";
  }
  return out + "'";
}

}  // namespace

std::string bytes_to_unicode(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size() * 2);
  for (unsigned char b : bytes) append_utf8(out, byte_map().to_cp[b]);
  return out;
}

bool unicode_to_bytes(std::string_view text, std::string* bytes) {
  bytes->clear();
  for (size_t i = 0; i < text.size();) {
    const Utf8Char c = next_utf8(text, i);
    if (!c.valid || c.cp >= byte_map().to_byte.size() || byte_map().to_byte[c.cp] < 0) return false;
    *bytes += static_cast<char>(byte_map().to_byte[c.cp]);
    i += c.len;
  }
  return true;
}

Tokenizer::Tokenizer() {
  bytes_.resize(256);
  spelling_.resize(256);
  present_.assign(256, 1);
  for (int b = 0; b < 256; ++b) {
    bytes_[b] = std::string(1, static_cast<char>(b));
    spelling_[b] = bytes_to_unicode(bytes_[b]);
    byte_id_[b] = b;
  }
}

Tokenizer Tokenizer::from_spelled(Spelled s, const std::string& file,
                                  const std::function<std::string(size_t)>& merges_where) {
  const std::string at = file + ": ";
  Tokenizer t;
  t.is_bytes_ = false;
  int64_t max_id = -1;
  for (const auto& [spelling, id] : s.vocab) {
    if (id < 0 || id >= kMaxVocab)
      fail(at + "token " + in_quotes(spelling) + " has id " + std::to_string(id) + ", outside 0.." +
           std::to_string(kMaxVocab - 1));
    max_id = std::max(max_id, id);
  }
  for (const auto& sp : s.specials) {
    if (sp.text.empty()) fail(at + "a special token has empty text (id " + std::to_string(sp.id) + ")");
    if (sp.id < 0 || sp.id >= kMaxVocab)
      fail(at + "special token " + in_quotes(sp.text) + " has id " + std::to_string(sp.id) + ", outside 0.." +
           std::to_string(kMaxVocab - 1));
    max_id = std::max<int64_t>(max_id, sp.id);
  }
  if (max_id < 0) fail(at + "the vocabulary is empty");
  const size_t n = static_cast<size_t>(max_id) + 1;
  t.bytes_.assign(n, {});
  t.spelling_.assign(n, {});
  t.present_.assign(n, 0);

  std::unordered_map<std::string, int32_t> by_spelling;
  by_spelling.reserve(s.vocab.size());
  for (auto& [spelling, id64] : s.vocab) {
    const auto id = static_cast<int32_t>(id64);
    if (t.present_[id])
      fail(at + "id " + std::to_string(id) + " is given to both " + in_quotes(t.spelling_[id]) + " and " +
           in_quotes(spelling));
    t.present_[id] = 1;
    // A spelling outside the byte map stands for its own UTF-8 bytes, as Hugging Face's ByteLevel
    // decoder reads it (no merge can produce it: encoding only ever starts from mapped bytes).
    if (!unicode_to_bytes(spelling, &t.bytes_[id])) t.bytes_[id] = spelling;
    by_spelling.emplace(spelling, id);
    t.spelling_[id] = std::move(spelling);
  }
  for (const auto& sp : s.specials) {
    if (t.present_[sp.id] && t.spelling_[sp.id] != sp.text)
      fail(at + "special token " + in_quotes(sp.text) + " has id " + std::to_string(sp.id) + ", which is " +
           in_quotes(t.spelling_[sp.id]) + " in the vocabulary");
    // The same text under two ids would be written twice into tokenizer.json's vocabulary, and read
    // back as one of them.
    if (auto it = by_spelling.find(sp.text); it != by_spelling.end() && it->second != sp.id)
      fail(at + "special token " + in_quotes(sp.text) + " has id " + std::to_string(sp.id) +
           ", but the vocabulary gives it the id " + std::to_string(it->second));
    for (const auto& other : t.specials_)
      if (other.text == sp.text) fail(at + "special token " + in_quotes(sp.text) + " is listed twice");
    t.present_[sp.id] = 1;
    t.bytes_[sp.id] = sp.text;
    t.spelling_[sp.id] = sp.text;
    t.specials_.push_back(sp);
  }
  // A byte's token is the one spelled as the byte map spells it (as Hugging Face's ByteLevel
  // looks it up), not any other token that happens to decode to the same byte.
  for (int b = 0; b < 256; ++b) {
    const std::string spelled = bytes_to_unicode(std::string(1, static_cast<char>(b)));
    auto it = by_spelling.find(spelled);
    if (it == by_spelling.end()) {
      char hex[8];
      std::snprintf(hex, sizeof hex, "0x%02X", b);
      fail(at + "no token for byte " + hex + " (spelled " + in_quotes(spelled) +
           "): a byte-level vocabulary needs all 256");
    }
    t.byte_id_[b] = it->second;
  }

  const auto where = [&](size_t i) { return merges_where ? merges_where(i) : "merge " + std::to_string(i); };
  const auto lookup = [&](const std::string& spelling, size_t i, const char* what) {
    auto it = by_spelling.find(spelling);
    if (it == by_spelling.end())
      fail(at + where(i) + ": " + what + " " + in_quotes(spelling) + " is not in the vocabulary");
    return it->second;
  };
  t.merges_.reserve(s.merges.size());
  size_t cap = 16;
  while (cap < 2 * s.merges.size()) cap *= 2;
  t.merge_keys_.assign(cap, kEmptyKey);
  t.merge_ranks_.assign(cap, -1);
  for (size_t i = 0; i < s.merges.size(); ++i) {
    const auto& [a, b] = s.merges[i];
    const Merge m{lookup(a, i, "its left part"), lookup(b, i, "its right part"), lookup(a + b, i, "its result")};
    const uint64_t key = pair_key(m.left, m.right);
    size_t slot = slot_of(key, cap - 1);
    while (t.merge_keys_[slot] != kEmptyKey) {
      if (t.merge_keys_[slot] == key)
        fail(at + where(i) + ": " + in_quotes(a + " " + b) + " repeats " + where(t.merge_ranks_[slot]));
      slot = (slot + 1) & (cap - 1);
    }
    t.merge_keys_[slot] = key;
    t.merge_ranks_[slot] = static_cast<int32_t>(i);
    t.merges_.push_back(m);
  }
  bool identity = n == 256 && t.merges_.empty() && t.specials_.empty();
  for (int b = 0; b < 256 && identity; ++b) identity = t.byte_id_[b] == b;
  t.is_bytes_ = identity;
  return t;
}

int64_t Tokenizer::find_merge(int32_t left, int32_t right) const {
  if (merges_.empty()) return -1;
  const uint64_t key = pair_key(left, right);
  const size_t mask = merge_keys_.size() - 1;
  for (size_t slot = slot_of(key, mask);; slot = (slot + 1) & mask) {
    if (merge_keys_[slot] == key) return merge_ranks_[slot];
    if (merge_keys_[slot] == kEmptyKey) return -1;
  }
}

const std::string& Tokenizer::token_bytes(int32_t id) const {
  if (!has_token(id))
    fail("token id " + std::to_string(id) + " is not in the vocabulary (size " + std::to_string(vocab_size()) + ")");
  return bytes_[id];
}

const std::string& Tokenizer::token_spelling(int32_t id) const {
  token_bytes(id);  // checks the id
  return spelling_[id];
}

int32_t Tokenizer::special_id(std::string_view text) const {
  for (const auto& s : specials_)
    if (s.text == text) return s.id;
  return -1;
}

// Working memory of one piece's merges, reused from piece to piece.
struct Tokenizer::Scratch {
  // A candidate merge of the symbols at `pos` and its successor, valid while they still are
  // `left` and `right`. Ordered by rank, then position: the heap pops a rank's occurrences from
  // left to right.
  struct Candidate {
    int32_t rank, pos, left, right;
    bool operator>(const Candidate& o) const { return rank != o.rank ? rank > o.rank : pos > o.pos; }
  };
  std::vector<int32_t> sym, next, prev;
  std::vector<Candidate> heap, fresh;
};

// The merges of one piece. GPT-2's reference loop finds the lowest-ranked adjacent pair, merges
// every occurrence of it from left to right (non-overlapping), and repeats. This does the same in
// O(n log n) with a heap of candidate pairs and a linked list of symbols: all the candidates of the
// lowest rank are popped (left to right) before the pairs that those merges create enter the heap,
// so even a vocabulary whose later merges rank lower than earlier ones gives GPT-2's result.
void Tokenizer::bpe_piece(std::string_view piece, std::vector<int32_t>& out, Scratch& s) const {
  const int n = static_cast<int>(piece.size());
  if (n <= kShortPiece) {
    // Short pieces (most of them): GPT-2's loop itself, in place, which costs less than the heap
    // for a handful of symbols.
    int32_t sym[kShortPiece];
    int m = n;
    for (int i = 0; i < n; ++i) sym[i] = byte_id_[static_cast<unsigned char>(piece[i])];
    for (;;) {
      int64_t best = -1;
      for (int i = 0; i + 1 < m; ++i) {
        const int64_t r = find_merge(sym[i], sym[i + 1]);
        if (r >= 0 && (best < 0 || r < best)) best = r;
      }
      if (best < 0) break;
      const Merge& mg = merges_[best];
      int w = 0;
      for (int i = 0; i < m;) {
        if (i + 1 < m && sym[i] == mg.left && sym[i + 1] == mg.right) {
          sym[w++] = mg.result;
          i += 2;
        } else {
          sym[w++] = sym[i++];
        }
      }
      m = w;
    }
    out.insert(out.end(), sym, sym + m);
    return;
  }
  s.sym.resize(n);
  s.next.resize(n);
  s.prev.resize(n);
  for (int i = 0; i < n; ++i) {
    s.sym[i] = byte_id_[static_cast<unsigned char>(piece[i])];
    s.next[i] = i + 1 < n ? i + 1 : -1;
    s.prev[i] = i - 1;
  }
  s.heap.clear();
  const auto consider = [&](int pos, std::vector<Scratch::Candidate>& into) {
    const int nx = s.next[pos];
    if (nx < 0) return;
    const int64_t r = find_merge(s.sym[pos], s.sym[nx]);
    if (r >= 0) into.push_back({static_cast<int32_t>(r), pos, s.sym[pos], s.sym[nx]});
  };
  for (int i = 0; i + 1 < n; ++i) consider(i, s.heap);
  const auto cmp = std::greater<Scratch::Candidate>();
  std::make_heap(s.heap.begin(), s.heap.end(), cmp);
  while (!s.heap.empty()) {
    const int32_t rank = s.heap.front().rank;
    s.fresh.clear();
    while (!s.heap.empty() && s.heap.front().rank == rank) {
      std::pop_heap(s.heap.begin(), s.heap.end(), cmp);
      const Scratch::Candidate c = s.heap.back();
      s.heap.pop_back();
      const int nx = s.next[c.pos];
      // Stale: the symbol was merged into its left neighbour (sym = -1), or changed, or lost its partner.
      if (s.sym[c.pos] != c.left || nx < 0 || s.sym[nx] != c.right) continue;
      s.sym[c.pos] = merges_[rank].result;
      s.sym[nx] = -1;
      s.next[c.pos] = s.next[nx];
      if (s.next[nx] >= 0) s.prev[s.next[nx]] = c.pos;
      if (s.prev[c.pos] >= 0) consider(s.prev[c.pos], s.fresh);
      consider(c.pos, s.fresh);
    }
    for (const auto& c : s.fresh) {
      s.heap.push_back(c);
      std::push_heap(s.heap.begin(), s.heap.end(), cmp);
    }
  }
  for (int i = 0; i >= 0; i = s.next[i]) out.push_back(s.sym[i]);
}

namespace {

// A hash of a piece's bytes, 8 at a time (pieces are short: most fit one or two words).
uint64_t piece_hash(std::string_view s) {
  uint64_t h = 0x9E3779B97F4A7C15ull ^ s.size();
  size_t i = 0;
  for (; i + 8 <= s.size(); i += 8) {
    uint64_t w;
    std::memcpy(&w, s.data() + i, 8);
    h = (h ^ w) * 0xFF51AFD7ED558CCDull;
    h ^= h >> 32;
  }
  uint64_t w = 0;
  std::memcpy(&w, s.data() + i, s.size() - i);
  h = (h ^ w) * 0xC4CEB9FE1A85EC53ull;
  return h ^ (h >> 29);
}

// The pieces of one encode call already merged: open addressing over (hash, where the piece is
// in the text) -> where its ids are in `ids`. Keys are views into the text, so nothing is copied.
class PieceCache {
 public:
  PieceCache() { grow(1 << 12); }
  // The ids of `piece` (at `offset` in `text`), merged by `merge` the first time it is seen.
  template <class Merge>
  std::span<const int32_t> get(std::string_view text, size_t offset, size_t len, Merge&& merge) {
    const std::string_view piece = text.substr(offset, len);
    const uint64_t h = piece_hash(piece);
    for (size_t slot = h & mask_;; slot = (slot + 1) & mask_) {
      Entry& e = entries_[slot];
      if (e.len == 0) {  // absent: merge it and remember where
        e = {h, static_cast<uint32_t>(offset), static_cast<uint32_t>(len), static_cast<uint32_t>(ids_.size()), 0};
        merge(piece, ids_);
        e.ids_len = static_cast<uint32_t>(ids_.size() - e.ids_at);
        const Entry added = e;
        if (++used_ * 2 > entries_.size()) grow(entries_.size() * 2);
        return {ids_.data() + added.ids_at, added.ids_len};
      }
      if (e.hash == h && e.len == len && std::memcmp(text.data() + e.at, piece.data(), len) == 0)
        return {ids_.data() + e.ids_at, e.ids_len};
    }
  }

 private:
  struct Entry {
    uint64_t hash;
    uint32_t at, len;  // the piece in the text (len 0: empty slot; pieces are never empty)
    uint32_t ids_at, ids_len;
  };
  void grow(size_t capacity) {
    std::vector<Entry> old = std::move(entries_);
    entries_.assign(capacity, Entry{0, 0, 0, 0, 0});
    mask_ = capacity - 1;
    for (const Entry& e : old) {
      if (e.len == 0) continue;
      size_t slot = e.hash & mask_;
      while (entries_[slot].len != 0) slot = (slot + 1) & mask_;
      entries_[slot] = e;
    }
  }
  std::vector<Entry> entries_;
  std::vector<int32_t> ids_;
  size_t mask_ = 0, used_ = 0;
};

}  // namespace

void Tokenizer::encode_ordinary(std::string_view text, std::vector<int32_t>& out) const {
  if (is_bytes_) {
    for (unsigned char c : text) out.push_back(c);
    return;
  }
  // Pieces repeat (words): each distinct piece is merged once per call, so a repeat costs a hash,
  // a comparison and a copy. (Offsets are 32-bit: longer texts are encoded in parts, cut where
  // a piece ends.)
  PieceCache cache;
  Scratch scratch;
  const auto merge = [&](std::string_view piece, std::vector<int32_t>& ids) { bpe_piece(piece, ids, scratch); };
  size_t base = 0;
  for (size_t i = 0; i < text.size();) {
    const size_t n = gpt2_piece_length(text, i);
    if (n == 1) {
      out.push_back(byte_id_[static_cast<unsigned char>(text[i])]);
    } else {
      if (i + n - base > UINT32_MAX) {  // start a fresh cache at this piece
        cache = PieceCache();
        base = i;
      }
      const std::span<const int32_t> ids = cache.get(text.substr(base), i - base, n, merge);
      out.insert(out.end(), ids.begin(), ids.end());
    }
    i += n;
  }
}

void Tokenizer::encode_append(std::string_view text, std::vector<int32_t>& out, bool allow_special) const {
  if (!allow_special || specials_.empty()) return encode_ordinary(text, out);
  // The earliest special token in the rest of the text (the longest where two start at one place);
  // each special's next occurrence is remembered, so the text is searched once per special.
  std::vector<size_t> at(specials_.size(), 0);
  std::vector<bool> searched(specials_.size(), false);
  size_t i = 0;
  while (i < text.size()) {
    size_t best = std::string_view::npos;
    int which = -1;
    for (size_t k = 0; k < specials_.size(); ++k) {
      if (!searched[k] || (at[k] != std::string_view::npos && at[k] < i)) {
        at[k] = text.find(specials_[k].text, i);
        searched[k] = true;
      }
      if (at[k] < best || (at[k] == best && at[k] != std::string_view::npos &&
                           specials_[k].text.size() > specials_[which].text.size())) {
        best = at[k];
        which = static_cast<int>(k);
      }
    }
    if (which < 0) break;
    encode_ordinary(text.substr(i, best - i), out);
    out.push_back(specials_[which].id);
    i = best + specials_[which].text.size();
  }
  if (i < text.size()) encode_ordinary(text.substr(i), out);
}

std::vector<int32_t> Tokenizer::encode(std::string_view text, bool allow_special) const {
  std::vector<int32_t> out;
  out.reserve(text.size() / 3 + 16);
  encode_append(text, out, allow_special);
  return out;
}

std::string Tokenizer::decode(std::span<const int32_t> ids) const {
  std::string out;
  for (int32_t id : ids) out += token_bytes(id);
  return out;
}

// ---- streaming decode ----

namespace {

// Whether bytes [lead, end) of `s` are the start of a UTF-8 character that more bytes could
// still complete (the same rules as next_utf8: no overlong forms, surrogates or values past U+10FFFF).
bool incomplete_utf8(std::string_view s, size_t lead) {
  const auto b = [&](size_t k) { return static_cast<unsigned char>(s[k]); };
  const unsigned char c = b(lead);
  const size_t have = s.size() - lead;
  size_t need;
  unsigned char lo = 0x80, hi = 0xBF;  // the allowed range of the second byte
  if (c >= 0xC2 && c <= 0xDF) {
    need = 2;
  } else if (c >= 0xE0 && c <= 0xEF) {
    need = 3;
    if (c == 0xE0) lo = 0xA0;
    if (c == 0xED) hi = 0x9F;
  } else if (c >= 0xF0 && c <= 0xF4) {
    need = 4;
    if (c == 0xF0) lo = 0x90;
    if (c == 0xF4) hi = 0x8F;
  } else {
    return false;
  }
  if (have >= need) return false;
  if (have >= 2 && (b(lead + 1) < lo || b(lead + 1) > hi)) return false;
  for (size_t k = 2; k < have; ++k)
    if ((b(lead + k) & 0xC0) != 0x80) return false;
  return true;
}

}  // namespace

std::string TokenStreamDecoder::push(int32_t id) {
  pending_ += t_.token_bytes(id);
  // Only the last character can be unfinished: find where it starts (at most 3 bytes back).
  size_t keep = pending_.size();
  for (size_t k = 1; k <= 3 && k <= pending_.size(); ++k) {
    const size_t lead = pending_.size() - k;
    if ((static_cast<unsigned char>(pending_[lead]) & 0xC0) == 0x80) continue;
    if (incomplete_utf8(pending_, lead)) keep = lead;
    break;
  }
  std::string out = pending_.substr(0, keep);
  pending_.erase(0, keep);
  return out;
}

std::string TokenStreamDecoder::finish() { return std::exchange(pending_, {}); }

}  // namespace ptl
