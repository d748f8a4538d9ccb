#include "engine/quant/calibration.h"

#include <filesystem>
#include <functional>
#include <optional>

#include <nlohmann/json.hpp>

#include "engine/core/strings.h"
#include "engine/eval/eval_text.h"
#include "engine/model/model_loader.h"
#include "engine/tokenizer/chat_template.h"

namespace lathe {
namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

// Bytes of text tokenized per plain-text span: enough for seq_len tokens in any language (tokens
// of UTF-8 text are rarely longer than 16 bytes on average).
constexpr int64_t kBytesPerToken = 16;

CalibrationFormat detect_format(const std::string& text) {
  const size_t first = text.find_first_not_of(" \t\r\n\xef\xbb\xbf");
  if (first == std::string::npos) return CalibrationFormat::kText;
  if (text[first] == '[') return CalibrationFormat::kShareGpt;
  if (text[first] == '{') return CalibrationFormat::kJsonl;
  return CalibrationFormat::kText;
}

std::string role_of(const std::string& from) {
  if (from == "human" || from == "user") return "user";
  if (from == "system") return "system";
  return "assistant";  // gpt, chatgpt, bing, bard, assistant, model
}

std::string content_of(const json& c) {
  if (c.is_string()) return c.get<std::string>();
  std::string out;
  if (c.is_array())  // OpenAI content parts: [{"type": "text", "text": "..."}]
    for (const json& part : c)
      if (part.is_object() && part.contains("text") && part["text"].is_string())
        out += part["text"].get<std::string>();
  return out;
}

// One record's conversation (messages), or its plain text (`text`); false when it has neither.
bool read_record(const json& j, std::vector<ChatMessage>* messages, std::string* text) {
  if (!j.is_object()) return false;
  if (j.contains("messages") && j["messages"].is_array()) {
    for (const json& m : j["messages"])
      if (m.is_object() && m.contains("role") && m["role"].is_string() && m.contains("content"))
        messages->push_back({m["role"].get<std::string>(), content_of(m["content"]), ""});
    return true;
  }
  if (j.contains("conversations") && j["conversations"].is_array()) {
    for (const json& m : j["conversations"])
      if (m.is_object() && m.contains("from") && m["from"].is_string() && m.contains("value"))
        messages->push_back({role_of(m["from"].get<std::string>()), content_of(m["value"]), ""});
    return true;
  }
  if (j.contains("text") && j["text"].is_string()) {
    *text = j["text"].get<std::string>();
    return true;
  }
  return false;
}

// The end (one past '}') of the JSON object that starts at text[begin] == '{', or npos when the
// text ends first (a truncated file).
size_t object_end(const std::string& text, size_t begin) {
  int depth = 0;
  bool in_string = false;
  for (size_t i = begin; i < text.size(); ++i) {
    const char ch = text[i];
    if (in_string) {
      if (ch == '\\') {
        ++i;
      } else if (ch == '"') {
        in_string = false;
      }
      continue;
    }
    if (ch == '"') in_string = true;
    if (ch == '{') ++depth;
    if (ch == '}' && --depth == 0) return i + 1;
  }
  return std::string::npos;
}

// Calls fn(record, where) for each JSON record until fn returns false. `where` names the record in
// messages ("line 3", "object 12").
using RecordFn = std::function<Result<bool>(const json&, const std::string&)>;

Status for_each_jsonl(const std::string& text, const std::string& origin, const RecordFn& fn) {
  size_t pos = 0;
  for (int64_t line = 1; pos < text.size(); ++line) {
    size_t end = text.find('\n', pos);
    if (end == std::string::npos) end = text.size();
    const std::string_view l(text.data() + pos, end - pos);
    pos = end + 1;
    if (l.find_first_not_of(" \t\r") == std::string_view::npos) continue;
    json j = json::parse(l, nullptr, false);
    const std::string where = "line " + std::to_string(line);
    if (j.is_discarded() || !j.is_object())
      return invalid_argument("--calibration " + origin + ": " + where +
                              " is not a JSON object; JSONL needs one object per line");
    LATHE_ASSIGN_OR_RETURN(bool more, fn(j, where));
    if (!more) break;
  }
  return Status();
}

Status for_each_sharegpt(const std::string& text, const std::string& origin, const RecordFn& fn) {
  size_t pos = text.find('[') + 1;
  for (int64_t index = 1;; ++index) {
    pos = text.find_first_not_of(" \t\r\n,", pos);
    if (pos == std::string::npos || text[pos] == ']') break;
    if (text[pos] != '{')
      return invalid_argument(strformat(
          "--calibration %s: element %lld of the JSON array is not an object (byte %zu); ShareGPT "
          "JSON is an array of {\"conversations\": [...]} objects",
          origin.c_str(), static_cast<long long>(index), pos));
    const size_t end = object_end(text, pos);
    if (end == std::string::npos) break;  // truncated at the end: keep the whole objects
    json j = json::parse(text.begin() + static_cast<std::ptrdiff_t>(pos),
                         text.begin() + static_cast<std::ptrdiff_t>(end), nullptr, false);
    if (j.is_discarded())
      return invalid_argument(
          strformat("--calibration %s: object %lld (byte %zu) is not valid JSON", origin.c_str(),
                    static_cast<long long>(index), pos));
    LATHE_ASSIGN_OR_RETURN(bool more, fn(j, "object " + std::to_string(index)));
    if (!more) break;
    pos = end;
  }
  return Status();
}

EncodeOptions data_encoding() {
  EncodeOptions o;
  o.add_special_tokens = false;
  o.parse_special = false;
  return o;
}

// Cuts `stream` into consecutive pieces of seq_len tokens (the last may be shorter, kept when it
// has at least kMinCalibrationTokens), at most num_samples.
void cut_stream(const std::vector<TokenId>& stream, const CalibrationConfig& c,
                CalibrationSet* set) {
  for (size_t begin = 0;
       begin < stream.size() && static_cast<int32_t>(set->samples.size()) < c.num_samples;
       begin += static_cast<size_t>(c.seq_len)) {
    const size_t end = std::min(stream.size(), begin + static_cast<size_t>(c.seq_len));
    if (end - begin < static_cast<size_t>(kMinCalibrationTokens) && !set->samples.empty()) break;
    set->samples.emplace_back(stream.begin() + static_cast<std::ptrdiff_t>(begin),
                              stream.begin() + static_cast<std::ptrdiff_t>(end));
  }
}

// Where a span that should start at `pos` starts: after the next newline within 2 KiB, else after
// the next space, else at the next UTF-8 character start.
size_t span_start(const std::string& text, size_t pos) {
  if (pos == 0) return 0;
  const size_t nl = text.find('\n', pos);
  if (nl != std::string::npos && nl - pos < 2048) return nl + 1;
  const size_t sp = text.find(' ', pos);
  if (sp != std::string::npos && sp - pos < 2048) return sp + 1;
  while (pos < text.size() && (static_cast<unsigned char>(text[pos]) & 0xC0) == 0x80) ++pos;
  return pos;
}

void sample_text(const std::string& text, const Tokenizer& tok, const CalibrationConfig& c,
                 CalibrationSet* set) {
  const int64_t span = static_cast<int64_t>(text.size()) / c.num_samples;
  const int64_t want = int64_t{c.seq_len} * kBytesPerToken;
  if (span < want) {  // too short to spread: the whole text, cut in order
    cut_stream(tok.encode(text, data_encoding()), c, set);
    return;
  }
  for (int32_t i = 0; i < c.num_samples; ++i) {
    const size_t begin = span_start(text, static_cast<size_t>(i * span));
    if (begin >= text.size()) break;
    std::string piece = text.substr(begin, static_cast<size_t>(want));
    piece.resize(valid_utf8_prefix(piece));
    std::vector<TokenId> ids = tok.encode(piece, data_encoding());
    if (static_cast<int64_t>(ids.size()) > c.seq_len) ids.resize(static_cast<size_t>(c.seq_len));
    if (ids.size() >= 2) set->samples.push_back(std::move(ids));
  }
}

Status sample_records(const std::string& text, const Tokenizer& tok,
                      const std::string& chat_template, const CalibrationConfig& c,
                      CalibrationSet* set) {
  std::optional<ChatTemplate> tmpl;
  ChatRenderOptions ro;
  ro.add_generation_prompt = false;
  if (tok.bos_id() >= 0) ro.bos_token = tok.token_bytes(tok.bos_id());
  if (tok.eos_id() >= 0) ro.eos_token = tok.token_bytes(tok.eos_id());
  EncodeOptions chat_encoding;
  chat_encoding.add_special_tokens = false;  // the template writes BOS when the model wants it
  const int64_t needed = int64_t{c.num_samples} * c.seq_len;
  std::vector<TokenId> stream;
  int64_t refused = 0;
  std::string first_refusal;
  auto on_record = [&](const json& j, const std::string& where) -> Result<bool> {
    std::vector<ChatMessage> messages;
    std::string plain;
    if (!read_record(j, &messages, &plain))
      return invalid_argument("--calibration " + set->origin + ": " + where +
                              " has none of \"messages\", \"conversations\" or \"text\"");
    std::vector<TokenId> ids;
    if (!messages.empty()) {
      if (!tmpl) {
        if (chat_template.empty())
          return invalid_argument("--calibration " + set->origin +
                                  " holds conversations but the model has no chat template to "
                                  "format them; pass plain text instead");
        LATHE_ASSIGN_OR_RETURN(ChatTemplate t, ChatTemplate::compile(chat_template));
        tmpl.emplace(std::move(t));
      }
      Result<std::string> rendered = tmpl->render(messages, ro);
      if (!rendered.is_ok()) {  // e.g. roles that do not alternate: skip the conversation
        if (refused++ == 0) first_refusal = where + ": " + rendered.status().message();
        return true;
      }
      ++set->conversations;
      ids = tok.encode(rendered.value(), chat_encoding);
    } else if (!plain.empty()) {
      ids = tok.encode(plain, data_encoding());
    }
    stream.insert(stream.end(), ids.begin(), ids.end());
    return static_cast<int64_t>(stream.size()) < needed;
  };
  if (set->format == CalibrationFormat::kJsonl) {
    LATHE_RETURN_IF_ERROR(for_each_jsonl(text, set->origin, on_record));
  } else {
    LATHE_RETURN_IF_ERROR(for_each_sharegpt(text, set->origin, on_record));
  }
  if (stream.empty() && refused > 0)
    return invalid_argument("--calibration " + set->origin +
                            ": the model's chat template refused every conversation (" +
                            first_refusal + ")");
  cut_stream(stream, c, set);
  return Status();
}

}  // namespace

const char* calibration_format_name(CalibrationFormat f) {
  switch (f) {
    case CalibrationFormat::kJsonl:
      return "jsonl";
    case CalibrationFormat::kShareGpt:
      return "sharegpt";
    case CalibrationFormat::kRandom:
      return "random token ids";
    default:
      return "text";
  }
}

int64_t CalibrationSet::num_tokens() const {
  int64_t n = 0;
  for (const auto& s : samples) n += static_cast<int64_t>(s.size());
  return n;
}

std::string default_calibration_path() {
  return lathe_cache_dir("LATHE_TEXT_DIR", "text") + "/calibration.txt";
}

Status check_calibration_sizes(const CalibrationConfig& c) {
  if (c.num_samples < 1)
    return invalid_argument(strformat("--num-samples must be >= 1, got %d", c.num_samples));
  if (c.seq_len < 2)
    return invalid_argument(strformat("--seq-len must be >= 2, got %d", c.seq_len));
  return Status();
}

Status check_calibration_config(const CalibrationConfig& c) {
  LATHE_RETURN_IF_ERROR(check_calibration_sizes(c));
  std::error_code ec;
  if (c.file.empty()) {
    const std::string path = default_calibration_path();
    if (!fs::is_regular_file(path, ec))
      return not_found("the built-in calibration set " + path +
                       " is not there; run scripts/fetch-eval-text.sh, or pass --calibration FILE");
    return Status();
  }
  if (!fs::exists(c.file, ec)) return not_found("--calibration " + c.file + ": no such file");
  if (!fs::is_regular_file(c.file, ec))
    return invalid_argument("--calibration " + c.file + " is not a file; pass a text or JSON file");
  return Status();
}

Result<CalibrationSet> load_calibration(const CalibrationConfig& c, const Tokenizer& tok,
                                        const std::string& chat_template) {
  LATHE_RETURN_IF_ERROR(check_calibration_config(c));
  CalibrationSet set;
  set.origin = c.file.empty() ? default_calibration_path() : c.file;
  LATHE_ASSIGN_OR_RETURN(std::string text, read_text_file(set.origin, "--calibration"));
  set.format = detect_format(text);
  if (set.format == CalibrationFormat::kText) {
    sample_text(text, tok, c, &set);
  } else {
    LATHE_RETURN_IF_ERROR(sample_records(text, tok, chat_template, c, &set));
  }
  const int64_t tokens = set.num_tokens();
  if (tokens < kMinCalibrationTokens)
    return invalid_argument(strformat(
        "--calibration %s gives only %lld tokens (at least %lld needed); pass a longer file",
        set.origin.c_str(), static_cast<long long>(tokens),
        static_cast<long long>(kMinCalibrationTokens)));
  if (static_cast<int32_t>(set.samples.size()) < c.num_samples ||
      static_cast<int64_t>(set.samples.front().size()) < c.seq_len)
    set.note =
        strformat("%s gives %zu samples, %lld tokens (asked for %d x %d)", set.origin.c_str(),
                  set.samples.size(), static_cast<long long>(tokens), c.num_samples, c.seq_len);
  return set;
}

}  // namespace lathe
