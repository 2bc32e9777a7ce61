#pragma once
// Tokenizer files. Read: Hugging Face's tokenizer.json (model type BPE with the ByteLevel
// pre-tokenizer and decoder, GPT-2's), a Hugging Face folder's vocab.json + merges.txt, and
// OpenAI's encoder.json + vocab.bpe (the same two formats under other names). Written: tokenizer.json
// (Tokenizer::to_json), which the readers here and @huggingface/tokenizers read.
// Every problem in a file throws ptl::Error with a one-line message that names the file.
#include <string>
#include <string_view>

#include "engine/folder_files.h"
#include "engine/tokenizer.h"

namespace ptl {

// `name` is the file's name for messages.
Tokenizer tokenizer_from_json(std::string_view json, const std::string& name);
// vocab.json ({"spelling": id, ...}) and merges.txt (a "#version" line, then one "left right"
// pair per line, by rank). A vocabulary entry `<|endoftext|>` is GPT-2's special token.
Tokenizer tokenizer_from_vocab_merges(std::string_view vocab_json, std::string_view merges_txt,
                                      const std::string& vocab_name, const std::string& merges_name);

// A folder's tokenizer: tokenizer.json, vocab.json + merges.txt or encoder.json + vocab.bpe
// (looked for in that order); an error names the folder when it holds none or half a pair.
Tokenizer tokenizer_from_folder(const FolderFiles& folder);

// A tokenizer.json file, a folder holding tokenizer.json, vocab.json + merges.txt or
// encoder.json + vocab.bpe (looked for in that order), or a checkpoint (.tinygpt or
// .safetensors: the tokenizer it records; bytes for a byte-level model).
Tokenizer load_tokenizer(const std::string& path);

// Writes `t.to_json()` to `path` (through a temporary file, so a failed write leaves no half file).
void save_tokenizer(const Tokenizer& t, const std::string& path);

}  // namespace ptl
