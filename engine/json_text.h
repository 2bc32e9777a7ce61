#pragma once
// JSON text from files a user hands us (config.json, tokenizer.json, vocab.json): parsed with a
// one-line ptl::Error naming the file, and values quoted briefly in messages.
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

namespace ptl {

// `name` is how the message names the source ("dir/config.json"). A parse error and a number
// beyond a double ("1E400", which nlohmann reports as out_of_range) both become
// "name: not valid JSON: <what nlohmann says>".
nlohmann::json parse_json(std::string_view text, const std::string& name);

// A value as it would appear in the file, cut to 60 characters: for messages.
std::string shown(const nlohmann::json& value);

}  // namespace ptl
