// The globals of Hugging Face's chat template environment: Jinja2's range, dict, namespace,
// joiner, plus raise_exception(message) and strftime_now(format).
#include <locale.h>
#include <clocale>
#include <ctime>

#include "engine/tokenizer/jinja/builtins.h"
#include "engine/tokenizer/jinja/error.h"
#include "engine/tokenizer/jinja/interpreter.h"
#include "engine/tokenizer/jinja/objects.h"

namespace lathe::jinja {
namespace {

Value range_fn(Interpreter& in, CallArgs& a) {
  if (!a.kwargs.empty()) fail("range() takes no keyword arguments");
  if (a.args.empty() || a.args.size() > 3)
    fail("range expected 1 to 3 arguments, got " + std::to_string(a.args.size()));
  int64_t start = 0;
  int64_t stop = 0;
  int64_t step = 1;
  if (a.args.size() == 1) {
    stop = int_arg("range", "stop", a.args[0]);
  } else {
    start = int_arg("range", "start", a.args[0]);
    stop = int_arg("range", "stop", a.args[1]);
    if (a.args.size() == 3) step = int_arg("range", "step", a.args[2]);
  }
  if (step == 0) fail("range() arg 3 must not be zero");
  // Length computed without overflow, then checked against the iteration budget before anything
  // is allocated.
  const __int128 span =
      step > 0 ? static_cast<__int128>(stop) - start : static_cast<__int128>(start) - stop;
  const __int128 astep = step > 0 ? step : -static_cast<__int128>(step);
  const __int128 n = span <= 0 ? 0 : (span + astep - 1) / astep;
  if (n > in.settings().limits.max_iterations) {
    throw Error(ErrorKind::kLimit, "range() of " +
                                       std::to_string(static_cast<unsigned long long>(n)) +
                                       " items exceeds the template loop limit of " +
                                       std::to_string(in.settings().limits.max_iterations));
  }
  in.charge_items(static_cast<size_t>(n));
  std::vector<Value> items;
  items.reserve(static_cast<size_t>(n));
  for (int64_t i = 0; i < static_cast<int64_t>(n); ++i) items.emplace_back(start + i * step);
  return Value::list(std::move(items));
}

// dict(mapping_or_pairs, **kwargs), as Hugging Face's TemplateDict.
Value dict_fn(Interpreter& in, CallArgs& a) {
  if (a.args.size() > 1)
    fail("dict expected at most 1 argument, got " + std::to_string(a.args.size()));
  Dict d;
  if (!a.args.empty()) {
    const Value& src = a.args[0];
    if (src.is_dict()) {
      d = src.as_dict();
    } else {
      for (const Value& pair : in.iterate(src)) {
        std::vector<Value> kv = in.iterate(pair);
        if (kv.size() != 2)
          fail("dictionary update sequence element has length " + std::to_string(kv.size()) +
               "; 2 is required");
        d.set(kv[0], kv[1]);
      }
    }
  }
  for (const auto& [k, v] : a.kwargs) d.set(Value(k), v);
  return Value::dict(std::move(d));
}

Value namespace_fn(Interpreter&, CallArgs& a) {
  auto ns = std::make_shared<Namespace>();
  register_cyclic(ns);
  if (a.args.size() > 1) fail("namespace() takes at most one positional argument");
  if (!a.args.empty()) {
    if (!a.args[0].is_dict())
      fail("namespace() argument must be a mapping, got " + type_name(a.args[0]));
    for (const auto& [k, v] : a.args[0].as_dict().items()) ns->set_attr(to_str(k), v);
  }
  for (const auto& [k, v] : a.kwargs) ns->set_attr(k, v);
  return Value(std::shared_ptr<Object>(std::move(ns)));
}

Value raise_exception_fn(Interpreter&, CallArgs& a) {
  std::string message;
  if (!a.args.empty()) message = to_str(a.args[0]);
  throw Error(ErrorKind::kRaised, std::move(message));
}

// datetime.now().strftime(format) in the C locale ("%b" is always "Jan".."Dec").
Value strftime_now_fn(Interpreter& in, CallArgs& a) {
  ArgBinder b("strftime_now", a, {"format"});
  const std::string format = string_arg("strftime_now", "format", b.get(0, Value()));
  std::tm tm{};
  if (in.settings().now) {
    tm = *in.settings().now;
    std::tm normalized = tm;  // fills in tm_wday / tm_yday from the date (for %a, %A, %j)
    if (timegm(&normalized) != static_cast<std::time_t>(-1)) tm = normalized;
  } else {
    const std::time_t t = std::time(nullptr);
    localtime_r(&t, &tm);
  }
  static const locale_t c_locale = newlocale(LC_ALL_MASK, "C", static_cast<locale_t>(nullptr));
  std::string buf(256 + format.size() * 16, '\0');
  // 0 means an empty result here: the buffer is far larger than any expansion of `format`.
  buf.resize(strftime_l(buf.data(), buf.size(), format.c_str(), &tm, c_locale));
  return Value(std::move(buf));
}

Value joiner_fn(Interpreter&, CallArgs& a) {
  ArgBinder b("joiner", a, {"sep"});
  const std::string sep = to_str(b.get(0, Value(", ")));
  auto used = std::make_shared<bool>(false);
  return Value(std::make_shared<NativeFunction>("joiner", [sep, used](Interpreter&, CallArgs&) {
    if (!*used) {
      *used = true;
      return Value(std::string());
    }
    return Value(sep);
  }));
}

}  // namespace

void add_globals(Dict& globals) {
  auto add = [&](const char* name, NativeFunction::Fn fn) {
    globals.set(Value(name),
                Value(std::make_shared<NativeFunction>(name, std::move(fn), "function")));
  };
  add("range", range_fn);
  add("dict", dict_fn);
  add("namespace", namespace_fn);
  add("raise_exception", raise_exception_fn);
  add("strftime_now", strftime_now_fn);
  add("joiner", joiner_fn);
}

}  // namespace lathe::jinja
