#include "engine/sft.h"

#include <nlohmann/json.hpp>

#include "engine/error.h"

namespace ptl {

namespace {

std::string at_line(const std::string& what, int line) { return what + " line " + std::to_string(line) + ": "; }

bool blank(const std::string& s) { return s.find_first_not_of(" \t\r") == std::string::npos; }

}  // namespace

namespace {

// The template's parts in order, each with whether the loss counts it.
std::vector<std::pair<std::string, bool>> chat_parts(const std::vector<ChatMessage>& messages) {
  std::vector<std::pair<std::string, bool>> parts;
  for (const auto& m : messages) {
    parts.emplace_back("<|" + m.role + "|>\n", false);
    if (m.role == "assistant") {
      parts.emplace_back(m.content, true);
      parts.emplace_back(std::string(kChatEnd) + "\n", true);
    } else {
      parts.emplace_back(m.content + "\n", false);
    }
  }
  return parts;
}

std::vector<std::pair<std::string, bool>> prompt_parts(const SftExample& e) {
  check(!e.messages.empty() && e.messages.back().role == "assistant",
        "a chat example must end with the assistant's reply");
  auto parts = chat_parts(std::vector<ChatMessage>(e.messages.begin(), e.messages.end() - 1));
  parts.emplace_back("<|assistant|>\n", false);
  return parts;
}

std::vector<int32_t> encode_parts(const std::vector<std::pair<std::string, bool>>& parts, const Tokenizer& tokenizer,
                                  std::vector<uint8_t>* trained) {
  std::vector<int32_t> ids;
  if (trained) trained->clear();
  for (const auto& [text, loss] : parts) {
    const size_t before = ids.size();
    tokenizer.encode_append(text, ids, /*allow_special=*/false);
    if (trained) trained->insert(trained->end(), ids.size() - before, loss ? 1 : 0);
  }
  return ids;
}

}  // namespace

std::string render_chat(const std::vector<ChatMessage>& messages, std::vector<uint8_t>* trained) {
  std::string out;
  if (trained) trained->clear();
  for (const auto& [text, loss] : chat_parts(messages)) {
    out += text;
    if (trained) trained->insert(trained->end(), text.size(), loss ? 1 : 0);
  }
  return out;
}

std::string chat_prompt(const SftExample& e) {
  std::string out;
  for (const auto& part : prompt_parts(e)) out += part.first;
  return out;
}

std::vector<int32_t> render_chat_tokens(const std::vector<ChatMessage>& messages, const Tokenizer& tokenizer,
                                        std::vector<uint8_t>* trained) {
  return encode_parts(chat_parts(messages), tokenizer, trained);
}

std::vector<int32_t> chat_prompt_tokens(const SftExample& e, const Tokenizer& tokenizer) {
  return encode_parts(prompt_parts(e), tokenizer, nullptr);
}

const std::string& chat_reply(const SftExample& e) {
  check(!e.messages.empty() && e.messages.back().role == "assistant",
        "a chat example must end with the assistant's reply");
  return e.messages.back().content;
}

std::vector<SftExample> parse_sft_jsonl(const std::string& text, const std::string& what, const TokenizerId* expect) {
  std::vector<SftExample> out;
  size_t pos = 0;
  int line_no = 0;
  bool first = true;  // no example or declaration read yet
  while (pos < text.size()) {
    size_t end = text.find('\n', pos);
    if (end == std::string::npos) end = text.size();
    const std::string line = text.substr(pos, end - pos);
    pos = end + 1;
    ++line_no;
    if (blank(line)) continue;
    const std::string where = at_line(what, line_no);
    nlohmann::json j;
    try {
      j = nlohmann::json::parse(line);
    } catch (const nlohmann::json::parse_error& e) {
      fail(where + "not valid JSON (syntax error near byte " + std::to_string(e.byte) + ")");
    } catch (const nlohmann::json::exception&) {
      // The parser's other refusal: a number too large for a double (1e999).
      fail(where + "not valid JSON (a number out of range)");
    }
    check(j.is_object(), where + "expected a JSON object {\"prompt\", \"response\"} or {\"messages\": [...]}");
    if (first && j.size() == 1 && j.contains("tokenizer")) {
      // The tokenizer the examples were prepared for (sft.h).
      first = false;
      const TokenizerId declared = TokenizerId::from_json(j["tokenizer"], where.substr(0, where.size() - 2));
      if (expect)
        check(declared == *expect, where + "the examples were prepared for " + declared.describe() +
                                       ", but the model reads " + expect->describe());
      continue;
    }
    first = false;
    SftExample ex;
    ex.line = line_no;
    auto text_field = [&](const nlohmann::json& obj, const char* key, const std::string& ctx) -> std::string {
      check(obj.contains(key), where + ctx + "lacks \"" + key + "\"");
      check(obj[key].is_string(), where + ctx + "\"" + key + "\" is not a string");
      return obj[key].get<std::string>();
    };
    if (j.contains("messages")) {
      const auto& msgs = j["messages"];
      check(msgs.is_array() && !msgs.empty(), where + "\"messages\" must be a non-empty array");
      for (size_t i = 0; i < msgs.size(); ++i) {
        const std::string ctx = "message " + std::to_string(i + 1) + " ";
        check(msgs[i].is_object(), where + ctx + "is not an object {\"role\", \"content\"}");
        ChatMessage m{text_field(msgs[i], "role", ctx), text_field(msgs[i], "content", ctx)};
        check(m.role == "system" || m.role == "user" || m.role == "assistant",
              where + ctx + "has role \"" + m.role + "\" (expected system, user or assistant)");
        if (m.role == "assistant")
          check(!m.content.empty(), where + "empty response (message " + std::to_string(i + 1) + ")");
        ex.messages.push_back(std::move(m));
      }
      check(ex.messages.back().role == "assistant", where + "the last message must be the assistant's reply");
    } else if (j.contains("prompt") || j.contains("response")) {
      std::string prompt = text_field(j, "prompt", ""), response = text_field(j, "response", "");
      check(!response.empty(), where + "empty response");
      ex.messages = {{"user", std::move(prompt)}, {"assistant", std::move(response)}};
    } else {
      fail(where + "expected {\"prompt\", \"response\"} or {\"messages\": [...]}");
    }
    out.push_back(std::move(ex));
  }
  check(!out.empty(), what + ": no examples (the file holds no JSON lines)");
  return out;
}

std::vector<SftExample> read_sft_file(const std::string& path, const TokenizerId* expect) {
  return parse_sft_jsonl(read_text_file(path), path, expect);
}

SftData::SftData(const std::vector<SftExample>& examples, int ctx, double val_fraction, const std::string& what,
                 const ModelTokenizer& tokenizer)
    : ctx_(ctx), tokenizer_(tokenizer.id()) {
  check(!examples.empty(), what + ": no examples");
  check(val_fraction >= 0 && val_fraction < 1, "validation fraction must be in [0, 1)");
  check(ctx >= 1, what + ": the context length must be at least 1, got " + std::to_string(ctx));
  const size_t n_val = size_t(double(examples.size()) * val_fraction);
  const size_t n_train = examples.size() - n_val;
  const Tokenizer& tok = tokenizer.text();
  const char* unit = tokenizer.is_bytes() ? " bytes" : " tokens";
  for (size_t i = 0; i < examples.size(); ++i) {
    Rendered r;
    r.ids = render_chat_tokens(examples[i].messages, tok, &r.trained);
    for (int32_t id : r.ids) r.bytes += tok.token_bytes(id).size();
    const std::string where =
        examples[i].line ? at_line(what, examples[i].line) : what + " example " + std::to_string(i + 1) + ": ";
    check(r.ids.size() <= size_t(ctx) + 1, where + "the example is " + std::to_string(r.ids.size()) + unit +
                                               " with the chat template, longer than one "
                                               "context window (ctx + 1 = " +
                                               std::to_string(ctx + 1) + unit +
                                               "); shorten it or use a model with a longer context");
    (i < n_train ? train_ : val_).push_back(std::move(r));
  }
}

int64_t SftData::train_bytes() const {
  int64_t n = 0;
  for (const auto& r : train_) n += int64_t(r.bytes);
  return n;
}

int64_t SftData::train_tokens() const {
  int64_t n = 0;
  for (const auto& r : train_) n += int64_t(r.ids.size());
  return n;
}

void SftData::fill_row(Batch& b, int row, const std::vector<int32_t>& ids, const std::vector<uint8_t>& trained,
                       int ctx) {
  // Row of ctx + 1 tokens (padded with 0): inputs are the first ctx, targets the last ctx, and a
  // target counts when its token is trained.
  const size_t base = size_t(row) * ctx;
  for (int t = 0; t < ctx; ++t) {
    const size_t i = size_t(t), j = size_t(t) + 1;
    b.inputs[base + t] = i < ids.size() ? ids[i] : 0;
    b.targets[base + t] = j < ids.size() ? ids[j] : 0;
    b.mask[base + t] = j < ids.size() && trained[j] ? 1.0f : 0.0f;
  }
}

Batch SftData::sample_train(Rng& rng, int batch) {
  check(batch >= 1, "batch must be at least 1");
  Batch b{batch, ctx_, std::vector<int32_t>(size_t(batch) * ctx_), std::vector<int32_t>(size_t(batch) * ctx_),
          std::vector<float>(size_t(batch) * ctx_)};
  for (int row = 0; row < batch; ++row) {
    std::vector<int32_t> ids;
    std::vector<uint8_t> trained;
    for (;;) {
      if (cursor_ == order_.size()) {
        // A new epoch: a fresh Fisher-Yates shuffle of the training examples.
        order_.resize(train_.size());
        for (size_t i = 0; i < order_.size(); ++i) order_[i] = i;
        for (size_t i = order_.size(); i > 1; --i) std::swap(order_[i - 1], order_[rng.below(i)]);
        cursor_ = 0;
        ++epoch_;
      }
      const Rendered& r = train_[order_[cursor_]];
      if (ids.size() + r.ids.size() > size_t(ctx_) + 1) break;  // starts the next row
      ids.insert(ids.end(), r.ids.begin(), r.ids.end());
      trained.insert(trained.end(), r.trained.begin(), r.trained.end());
      ++cursor_;
    }
    fill_row(b, row, ids, trained, ctx_);
  }
  return b;
}

std::vector<Batch> SftData::pack(const std::vector<const Rendered*>& examples, int ctx, int batch) {
  check(batch >= 1, "batch must be at least 1, got " + std::to_string(batch));
  std::vector<std::pair<std::vector<int32_t>, std::vector<uint8_t>>> rows;
  for (const Rendered* r : examples) {
    if (rows.empty() || rows.back().first.size() + r->ids.size() > size_t(ctx) + 1) rows.emplace_back();
    rows.back().first.insert(rows.back().first.end(), r->ids.begin(), r->ids.end());
    rows.back().second.insert(rows.back().second.end(), r->trained.begin(), r->trained.end());
  }
  std::vector<Batch> out;
  for (size_t i = 0; i < rows.size(); i += size_t(batch)) {
    Batch b{batch, ctx, std::vector<int32_t>(size_t(batch) * ctx), std::vector<int32_t>(size_t(batch) * ctx),
            std::vector<float>(size_t(batch) * ctx)};
    for (int row = 0; row < batch; ++row) {
      if (i + row < rows.size())
        fill_row(b, row, rows[i + row].first, rows[i + row].second, ctx);
      else
        fill_row(b, row, {}, {}, ctx);
    }
    out.push_back(std::move(b));
  }
  return out;
}

std::vector<Batch> SftData::val_batches(int batch) const {
  check(has_val(), "this SFT data has no validation split");
  std::vector<const Rendered*> ex;
  for (const auto& r : val_) ex.push_back(&r);
  return pack(ex, ctx_, batch);
}

std::vector<Batch> SftData::all_batches(int batch) const {
  std::vector<const Rendered*> ex;
  for (const auto& r : train_) ex.push_back(&r);
  for (const auto& r : val_) ex.push_back(&r);
  return pack(ex, ctx_, batch);
}

}  // namespace ptl
