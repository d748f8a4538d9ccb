// Jinja2's expression grammar with its precedence (lowest first): inline if/else, or, and, not,
// comparisons and `in`, + -, ~, * / // %, **, unary - +, then postfix . [] () and the | filter
// and `is` test chains; literals include adjacent-string concatenation ('''a''' works).
#pragma once

#include <initializer_list>
#include <string_view>
#include <vector>

#include "engine/tokenizer/jinja/token_stream.h"

namespace lathe::jinja {

class ExprParser : protected TokenStream {
 public:
  explicit ExprParser(const std::vector<Token>& tokens) : TokenStream(tokens) {}

 protected:
  // An expression, or a tuple when items are separated by commas ("a, b" / "(a, b)").
  // with_condexpr: whether "x if c else y" is allowed at the top (not in a for-loop iterable,
  // where "if" starts the loop filter). extra_end: names that end the tuple ("in", "recursive").
  ExprPtr parse_tuple(bool with_condexpr, std::initializer_list<std::string_view> extra_end,
                      bool explicit_parentheses);
  ExprPtr parse_expression(bool with_condexpr);
  // `| name(args) | ...` applied to node; start_inline: the first "|" was already consumed (as in
  // {% filter upper %}).
  ExprPtr parse_filter(ExprPtr node, bool start_inline);

 private:
  bool is_tuple_end(std::initializer_list<std::string_view> extra_end) const;
  ExprPtr parse_condexpr();
  ExprPtr parse_or();
  ExprPtr parse_and();
  ExprPtr parse_not();
  ExprPtr parse_compare();
  ExprPtr binary(size_t pos, BinaryOp op, ExprPtr a, ExprPtr b);
  ExprPtr parse_math1();
  ExprPtr parse_concat();
  ExprPtr parse_math2();
  ExprPtr parse_pow();
  ExprPtr parse_unary(bool with_filter);
  ExprPtr parse_primary();
  ExprPtr parse_list();
  ExprPtr parse_dict();
  ExprPtr parse_postfix(ExprPtr node);
  ExprPtr parse_filter_expr(ExprPtr node);
  ExprPtr parse_subscript(ExprPtr node);
  ExprPtr parse_subscribed();
  void parse_call_args(Expr& e);
  ExprPtr parse_call(ExprPtr node);
  ExprPtr parse_test(ExprPtr node);
};

}  // namespace lathe::jinja
