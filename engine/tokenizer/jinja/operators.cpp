#include "engine/tokenizer/jinja/operators.h"
#include "engine/tokenizer/unicode.h"

#include <cmath>
#include <cstdio>

#include "engine/tokenizer/jinja/error.h"
#include "engine/tokenizer/jinja/interpreter.h"
#include "engine/tokenizer/jinja/text.h"

namespace lathe::jinja {
namespace {

const char* op_symbol(BinaryOp op) {
  switch (op) {
    case BinaryOp::kAdd:
      return "+";
    case BinaryOp::kSub:
      return "-";
    case BinaryOp::kMul:
      return "*";
    case BinaryOp::kDiv:
      return "/";
    case BinaryOp::kFloorDiv:
      return "//";
    case BinaryOp::kMod:
      return "%";
    case BinaryOp::kPow:
      return "** or pow()";
    case BinaryOp::kConcat:
      return "~";
  }
  return "?";
}

[[noreturn]] void unsupported_operands(BinaryOp op, const Value& a, const Value& b) {
  fail(std::string("unsupported operand type(s) for ") + op_symbol(op) + ": '" + type_name(a) +
       "' and '" + type_name(b) + "'");
}

void check_overflow(bool overflow) {
  if (overflow) fail("integer result does not fit in 64 bits");
}

Value repeat(Interpreter& interp, const Value& seq, int64_t n) {
  if (n <= 0)
    return seq.is_string() ? Value(std::string())
                           : (seq.is_tuple() ? Value::tuple({}) : Value::list({}));
  const size_t len = seq.is_string() ? seq.as_string().size() : seq.as_list().items.size();
  size_t total = 0;
  if (__builtin_mul_overflow(len, static_cast<size_t>(n), &total)) {
    throw Error(ErrorKind::kLimit, "repetition by " + std::to_string(n) + " is too large");
  }
  if (seq.is_string()) {
    const std::string& s = seq.as_string();
    interp.charge(total);
    std::string out;
    out.reserve(s.size() * static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) out += s;
    return Value(std::move(out));
  }
  const auto& items = seq.as_list().items;
  interp.charge_items(total);
  std::vector<Value> out;
  out.reserve(items.size() * static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) out.insert(out.end(), items.begin(), items.end());
  return seq.is_tuple() ? Value::tuple(std::move(out)) : Value::list(std::move(out));
}

double py_float_mod(double a, double b) {
  double mod = std::fmod(a, b);
  if (mod != 0.0) {
    if ((b < 0) != (mod < 0)) mod += b;
  } else {
    mod = std::copysign(0.0, b);
  }
  return mod;
}

double py_float_floordiv(double a, double b) {
  double mod = std::fmod(a, b);
  double div = (a - mod) / b;
  if (mod != 0.0 && ((b < 0) != (mod < 0))) div -= 1.0;
  if (div == 0.0) return std::copysign(0.0, a / b);
  const double floordiv = std::floor(div);
  return (div - floordiv > 0.5) ? floordiv + 1.0 : floordiv;
}

Value arithmetic(BinaryOp op, const Value& a, const Value& b) {
  if (a.is_float() || b.is_float()) {
    const double x = a.number();
    const double y = b.number();
    switch (op) {
      case BinaryOp::kAdd:
        return Value(x + y);
      case BinaryOp::kSub:
        return Value(x - y);
      case BinaryOp::kMul:
        return Value(x * y);
      case BinaryOp::kDiv:
        if (y == 0.0) fail("float division by zero");
        return Value(x / y);
      case BinaryOp::kFloorDiv:
        if (y == 0.0) fail("float floor division by zero");
        return Value(py_float_floordiv(x, y));
      case BinaryOp::kMod:
        if (y == 0.0) fail("float modulo by zero");
        return Value(py_float_mod(x, y));
      case BinaryOp::kPow:
        if (x == 0.0 && y < 0) fail("0.0 cannot be raised to a negative power");
        return Value(std::pow(x, y));
      default:
        break;
    }
  }
  const int64_t x = a.integer();
  const int64_t y = b.integer();
  int64_t r = 0;
  switch (op) {
    case BinaryOp::kAdd:
      check_overflow(__builtin_add_overflow(x, y, &r));
      return Value(r);
    case BinaryOp::kSub:
      check_overflow(__builtin_sub_overflow(x, y, &r));
      return Value(r);
    case BinaryOp::kMul:
      check_overflow(__builtin_mul_overflow(x, y, &r));
      return Value(r);
    case BinaryOp::kDiv:
      if (y == 0) fail("division by zero");
      return Value(static_cast<double>(x) / static_cast<double>(y));
    case BinaryOp::kFloorDiv:
    case BinaryOp::kMod: {
      if (y == 0) fail("integer division or modulo by zero");
      if (x == INT64_MIN && y == -1) fail("integer result does not fit in 64 bits");
      int64_t q = x / y;
      int64_t m = x % y;
      if (m != 0 && ((m < 0) != (y < 0))) {
        m += y;
        q -= 1;
      }
      return Value(op == BinaryOp::kMod ? m : q);
    }
    case BinaryOp::kPow: {
      if (y < 0) return Value(std::pow(static_cast<double>(x), static_cast<double>(y)));
      int64_t result = 1;
      int64_t base = x;
      int64_t e = y;
      while (e > 0) {
        if (e & 1) check_overflow(__builtin_mul_overflow(result, base, &result));
        e >>= 1;
        if (e > 0) check_overflow(__builtin_mul_overflow(base, base, &base));
      }
      return Value(result);
    }
    default:
      break;
  }
  return Value::none();
}

}  // namespace

Value binary_op(Interpreter& interp, BinaryOp op, const Value& a, const Value& b) {
  if (op == BinaryOp::kConcat) {
    std::string s = to_str(a);
    s += to_str(b);
    interp.charge(s.size());
    return Value(std::move(s));
  }
  if (a.is_undefined()) raise_undefined(a);
  if (b.is_undefined()) raise_undefined(b);
  if (a.is_number() && b.is_number()) return arithmetic(op, a, b);
  switch (op) {
    case BinaryOp::kAdd:
      if (a.is_string() && b.is_string()) {
        interp.charge(a.as_string().size() + b.as_string().size());
        if (a.is_markup() || b.is_markup()) {  // Markup escapes the plain side
          return Value::markup((a.is_markup() ? a.as_string() : html_escape(a.as_string())) +
                               (b.is_markup() ? b.as_string() : html_escape(b.as_string())));
        }
        return Value(a.as_string() + b.as_string());
      }
      if (a.is_list() && b.is_list() && a.is_tuple() == b.is_tuple()) {
        std::vector<Value> items = a.as_list().items;
        const auto& more = b.as_list().items;
        interp.charge_items(items.size() + more.size());
        items.insert(items.end(), more.begin(), more.end());
        return a.is_tuple() ? Value::tuple(std::move(items)) : Value::list(std::move(items));
      }
      if (a.is_string() && !b.is_string()) {
        fail("can only concatenate str (not \"" + type_name(b) + "\") to str");
      }
      break;
    case BinaryOp::kMul:
      if ((a.is_string() || a.is_list()) && (b.is_int() || b.is_bool()))
        return repeat(interp, a, b.integer());
      if ((b.is_string() || b.is_list()) && (a.is_int() || a.is_bool()))
        return repeat(interp, b, a.integer());
      break;
    case BinaryOp::kMod:
      if (a.is_string()) {
        std::string s = percent_format(a.as_string(), b, a.is_markup());
        interp.charge(s.size());
        return a.is_markup() ? Value::markup(std::move(s)) : Value(std::move(s));
      }
      break;
    default:
      break;
  }
  unsupported_operands(op, a, b);
}

Value negate(const Value& v) {
  if (v.is_undefined()) raise_undefined(v);
  if (v.is_float()) return Value(-v.as_float());
  if (v.is_int() || v.is_bool()) {
    if (v.integer() == INT64_MIN) fail("integer result does not fit in 64 bits");
    return Value(-v.integer());
  }
  fail("bad operand type for unary -: '" + type_name(v) + "'");
}

bool contains(const Value& container, const Value& item) {
  switch (container.kind()) {
    case Value::Kind::kString:
      if (!item.is_string()) {
        fail("'in <string>' requires string as left operand, not " + type_name(item));
      }
      return container.as_string().find(item.as_string()) != std::string::npos;
    case Value::Kind::kList:
      if (container.is_iterator()) {
        if (container.as_list().consumed) return false;
        container.as_list().consumed = true;
      }
      for (const Value& v : container.as_list().items) {
        if (equals(v, item)) return true;
      }
      return false;
    case Value::Kind::kDict:
      return container.as_dict().find(item) != nullptr;
    case Value::Kind::kUndefined:
      return false;  // Jinja's Undefined iterates as empty
    default:
      fail("argument of type '" + type_name(container) + "' is not iterable");
  }
}

namespace {

struct Spec {
  char fill = ' ';
  char align = '\0';  // < > ^ =
  char sign = '-';
  bool alternate = false;
  bool zero = false;
  int width = -1;
  int precision = -1;
  char type = '\0';
};

std::string pad(std::string s, const Spec& spec, char default_align) {
  const auto len = static_cast<int>(code_point_count(s));
  if (spec.width <= len) return s;
  const auto n = static_cast<size_t>(spec.width - len);
  const char align = spec.align != '\0' ? spec.align : default_align;
  if (align == '<') return s + std::string(n, spec.fill);
  if (align == '^') return std::string(n / 2, spec.fill) + s + std::string(n - n / 2, spec.fill);
  if (align == '=' && !s.empty() && (s[0] == '-' || s[0] == '+' || s[0] == ' ')) {
    return s.substr(0, 1) + std::string(n, spec.fill) + s.substr(1);
  }
  return std::string(n, spec.fill) + s;
}

// Formats a number or string the way both mini-languages share (d, i, f, e, g, x, o, s, r, %).
std::string format_value(const Value& v, Spec spec, bool percent_style) {
  char type = spec.type;
  if (type == 's' || (type == '\0' && !v.is_number())) {
    std::string s = to_str(v);
    if (spec.precision >= 0) {
      const auto offs = code_point_offsets(s);
      if (static_cast<size_t>(spec.precision) + 1 < offs.size())
        s = s.substr(0, offs[static_cast<size_t>(spec.precision)]);
    }
    return pad(std::move(s), spec, '<');
  }
  if (type == 'r' || type == 'a') return pad(repr(v), spec, '<');
  if (!v.is_number()) {
    fail(std::string("format code '") + type + "' needs a number, got " + type_name(v));
  }
  if (type == '\0') {
    if (v.is_float()) {
      if (spec.precision < 0) return pad(format_float(v.as_float()), spec, '>');
      type = 'g';
    } else {
      type = 'd';
    }
  }
  if (type == 'i' || type == 'u') type = 'd';
  std::string flags;
  if (spec.sign == '+' || spec.sign == ' ') flags += spec.sign;
  if (spec.alternate) flags += '#';
  char buf[512];
  const int precision = spec.precision >= 0 ? std::min(spec.precision, 100) : 6;
  if (type == 'd' || type == 'x' || type == 'X' || type == 'o' || type == 'c') {
    const auto n = static_cast<long long>(v.is_float() ? std::trunc(v.as_float())
                                                       : static_cast<double>(v.integer()));
    if (v.is_float() && !percent_style) fail("format code 'd' is not valid for a float");
    if (type == 'c') {
      std::string s;
      unicode::append_utf8(s, static_cast<uint32_t>(n));
      return pad(s, spec, '<');
    }
    const std::string f = "%" + flags + "ll" + type;
    std::snprintf(buf, sizeof(buf), f.c_str(),
                  v.is_float() ? n : static_cast<long long>(v.integer()));
  } else if (type == 'f' || type == 'F' || type == 'e' || type == 'E' || type == 'g' ||
             type == 'G' || type == '%') {
    double d = v.number();
    std::string suffix;
    if (type == '%') {
      d *= 100.0;
      type = 'f';
      suffix = "%";
    }
    const std::string f = "%" + flags + "." + std::to_string(precision) + type;
    std::snprintf(buf, sizeof(buf), f.c_str(), d);
    return pad(std::string(buf) + suffix, spec, '>');
  } else {
    fail(std::string("unsupported format character '") + type + "'");
  }
  std::string s(buf);
  if (spec.zero && spec.align == '\0') {
    Spec z = spec;
    z.fill = '0';
    z.align = '=';
    return pad(s, z, '>');
  }
  return pad(s, spec, '>');
}

}  // namespace

std::string percent_format(std::string_view fmt, const Value& args, bool escape) {
  std::vector<Value> positional;
  if (args.is_tuple())
    positional = args.as_list().items;
  else if (!args.is_dict())
    positional.push_back(args);
  size_t next = 0;
  std::string out;
  for (size_t i = 0; i < fmt.size(); ++i) {
    if (fmt[i] != '%') {
      out += fmt[i];
      continue;
    }
    if (++i >= fmt.size()) fail("incomplete format");
    if (fmt[i] == '%') {
      out += '%';
      continue;
    }
    const Value* value = nullptr;
    if (fmt[i] == '(') {
      const size_t close = fmt.find(')', i);
      if (close == std::string_view::npos || !args.is_dict()) fail("format requires a mapping");
      value = args.as_dict().find(fmt.substr(i + 1, close - i - 1));
      if (value == nullptr)
        fail("format key '" + std::string(fmt.substr(i + 1, close - i - 1)) + "' is missing");
      i = close + 1;
    }
    Spec spec;
    spec.align = '>';
    for (; i < fmt.size() && std::string_view("-+ #0").find(fmt[i]) != std::string_view::npos;
         ++i) {
      if (fmt[i] == '-') spec.align = '<';
      if (fmt[i] == '+' || fmt[i] == ' ') spec.sign = fmt[i];
      if (fmt[i] == '#') spec.alternate = true;
      if (fmt[i] == '0') spec.zero = true;
    }
    for (; i < fmt.size() && fmt[i] >= '0' && fmt[i] <= '9'; ++i) {
      spec.width = std::max(spec.width, 0) * 10 + (fmt[i] - '0');
      if (spec.width > 10000) fail("format width too large");
    }
    if (i < fmt.size() && fmt[i] == '.') {
      spec.precision = 0;
      for (++i; i < fmt.size() && fmt[i] >= '0' && fmt[i] <= '9'; ++i) {
        spec.precision = spec.precision * 10 + (fmt[i] - '0');
        if (spec.precision > 10000) fail("format precision too large");
      }
    }
    if (i >= fmt.size()) fail("incomplete format");
    spec.type = fmt[i];
    if (spec.zero && spec.align == '>') spec.align = '\0';
    if (value == nullptr) {
      if (next >= positional.size()) fail("not enough arguments for format string");
      value = &positional[next++];
    }
    std::string piece = format_value(*value, spec, true);
    if (escape && (spec.type == 's' || spec.type == 'r') && !value->is_markup())
      piece = html_escape(piece);
    out += piece;
  }
  if (!args.is_dict() && next < positional.size()) {
    fail("not all arguments converted during string formatting");
  }
  return out;
}

std::string brace_format(std::string_view fmt, const CallArgs& args) {
  std::string out;
  size_t auto_index = 0;
  for (size_t i = 0; i < fmt.size(); ++i) {
    const char c = fmt[i];
    if (c == '}') {
      if (i + 1 < fmt.size() && fmt[i + 1] == '}')
        ++i;
      else
        fail("single '}' encountered in format string");
      out += '}';
      continue;
    }
    if (c != '{') {
      out += c;
      continue;
    }
    if (i + 1 < fmt.size() && fmt[i + 1] == '{') {
      out += '{';
      ++i;
      continue;
    }
    const size_t close = fmt.find('}', i);
    if (close == std::string_view::npos) fail("single '{' encountered in format string");
    std::string_view field = fmt.substr(i + 1, close - i - 1);
    i = close;
    std::string_view spec_text;
    if (const size_t colon = field.find(':'); colon != std::string_view::npos) {
      spec_text = field.substr(colon + 1);
      field = field.substr(0, colon);
    }
    char conversion = '\0';
    if (const size_t bang = field.find('!'); bang != std::string_view::npos) {
      if (bang + 1 < field.size()) conversion = field[bang + 1];
      field = field.substr(0, bang);
    }
    if (field.find_first_of(".[") != std::string_view::npos) {
      throw Error(ErrorKind::kUnsupported, "format field '" + std::string(field) +
                                               "' (attribute or index) is not supported");
    }
    const Value* value = nullptr;
    if (field.empty() || (field[0] >= '0' && field[0] <= '9')) {
      size_t index = 0;
      if (field.empty()) {
        index = auto_index++;
      } else {
        for (char ch : field) {
          if (ch < '0' || ch > '9' || index > 100000)
            fail("invalid format field '" + std::string(field) + "'");
          index = index * 10 + static_cast<size_t>(ch - '0');
        }
      }
      if (index >= args.args.size())
        fail("Replacement index " + std::to_string(index) +
             " out of range for positional args tuple");
      value = &args.args[index];
    } else {
      for (const auto& [k, v] : args.kwargs) {
        if (k == field) value = &v;
      }
      if (value == nullptr) fail("format key '" + std::string(field) + "' is missing");
    }
    Spec spec;
    size_t k = 0;
    auto is_align = [](char ch) { return ch == '<' || ch == '>' || ch == '^' || ch == '='; };
    if (spec_text.size() >= 2 && is_align(spec_text[1])) {
      spec.fill = spec_text[0];
      spec.align = spec_text[1];
      k = 2;
    } else if (!spec_text.empty() && is_align(spec_text[0])) {
      spec.align = spec_text[0];
      k = 1;
    }
    if (k < spec_text.size() && (spec_text[k] == '+' || spec_text[k] == '-' || spec_text[k] == ' '))
      spec.sign = spec_text[k++];
    if (k < spec_text.size() && spec_text[k] == '#') spec.alternate = true, ++k;
    if (k < spec_text.size() && spec_text[k] == '0') spec.zero = true, ++k;
    for (; k < spec_text.size() && spec_text[k] >= '0' && spec_text[k] <= '9'; ++k) {
      spec.width = std::max(spec.width, 0) * 10 + (spec_text[k] - '0');
      if (spec.width > 10000) fail("format width too large");
    }
    if (k < spec_text.size() && spec_text[k] == '.') {
      spec.precision = 0;
      for (++k; k < spec_text.size() && spec_text[k] >= '0' && spec_text[k] <= '9'; ++k) {
        spec.precision = spec.precision * 10 + (spec_text[k] - '0');
        if (spec.precision > 10000) fail("format precision too large");
      }
    }
    if (k < spec_text.size()) spec.type = spec_text[k++];
    if (k != spec_text.size()) fail("invalid format specifier '" + std::string(spec_text) + "'");
    if (conversion == 'r')
      out += format_value(Value(repr(*value)), spec, false);
    else if (conversion == 's')
      out += format_value(Value(to_str(*value)), spec, false);
    else
      out += format_value(*value, spec, false);
  }
  return out;
}

}  // namespace lathe::jinja
