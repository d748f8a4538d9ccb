// The bracket depth of JSON text read one character at a time, brackets inside strings ignored
// (escapes honoured). Used to bound nesting before parsing (openai_request.cpp) and to find the end
// of a JSON value embedded in model output (tool_calls.cpp). Not a validator.
#pragma once

namespace lathe {

class JsonNesting {
 public:
  // The depth after `c`: '{' and '[' outside strings add one, '}' and ']' take one away.
  int feed(char c) {
    if (in_string_) {
      if (escaped_)
        escaped_ = false;
      else if (c == '\\')
        escaped_ = true;
      else if (c == '"')
        in_string_ = false;
    } else if (c == '"') {
      in_string_ = true;
    } else if (c == '{' || c == '[') {
      ++depth_;
    } else if (c == '}' || c == ']') {
      --depth_;
    }
    return depth_;
  }

 private:
  int depth_ = 0;
  bool in_string_ = false, escaped_ = false;
};

}  // namespace lathe
