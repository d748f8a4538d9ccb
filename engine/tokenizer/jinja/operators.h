// Python's operators on template values (+ - * / // % ** ~ and `in`) and its two string
// formatting mini-languages ("%s" % x, "{}".format(x)), as Jinja2 evaluates them.
#pragma once

#include <string>
#include <string_view>

#include "engine/tokenizer/jinja/ast.h"
#include "engine/tokenizer/jinja/value.h"

namespace lathe::jinja {

// a <op> b. Throws for an Undefined operand (except with ~), for unsupported operand types
// ("unsupported operand type(s) for -: 'str' and 'int'"), division by zero and int64 overflow.
Value binary_op(Interpreter& interp, BinaryOp op, const Value& a, const Value& b);
Value negate(const Value& v);
// `item in container`: substring for strings, element for lists, key for dicts.
bool contains(const Value& container, const Value& item);

// printf-style formatting: fmt % args (args: a tuple, a dict for %(name)s, or one value).
// escape: the format string is Markup, so %s / %r arguments are HTML-escaped.
std::string percent_format(std::string_view fmt, const Value& args, bool escape = false);
// str.format(*args, **kwargs) with format specs ({:>8}, {:.2f}, {name}, {0}).
std::string brace_format(std::string_view fmt, const CallArgs& args);

}  // namespace lathe::jinja
