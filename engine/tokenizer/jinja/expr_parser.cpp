#include "engine/tokenizer/jinja/expr_parser.h"

namespace lathe::jinja {

bool ExprParser::is_tuple_end(std::initializer_list<std::string_view> extra_end) const {
  const Token& t = cur();
  if (t.type == TokenType::kVarEnd || t.type == TokenType::kBlockEnd || t.type == TokenType::kEof) {
    return true;
  }
  if (t.type == TokenType::kOperator && t.value == ")") return true;
  return t.type == TokenType::kName &&
         std::find(extra_end.begin(), extra_end.end(), t.value) != extra_end.end();
}

ExprPtr ExprParser::parse_tuple(bool with_condexpr,
                                std::initializer_list<std::string_view> extra_end,
                                bool explicit_parentheses) {
  const size_t pos = cur().pos;
  std::vector<ExprPtr> items;
  bool is_tuple = false;
  while (true) {
    if (!items.empty()) expect_op(",");
    if (is_tuple_end(extra_end)) break;
    items.push_back(parse_expression(with_condexpr));
    if (is_op(",")) {
      is_tuple = true;
    } else {
      break;
    }
  }
  if (!is_tuple) {
    if (!items.empty()) return std::move(items[0]);
    if (!explicit_parentheses)
      syntax_error("expected an expression, got " + describe(cur()), cur().pos);
  }
  auto e = make(ExprKind::kTuple, pos);
  e->operands = std::move(items);
  return e;
}

ExprPtr ExprParser::parse_expression(bool with_condexpr) {
  DepthGuard guard(*this);
  return with_condexpr ? parse_condexpr() : parse_or();
}

ExprPtr ExprParser::parse_condexpr() {
  ExprPtr expr = parse_or();
  while (is_name("if")) {
    const size_t pos = cur().pos;
    advance();
    ExprPtr cond = parse_or();
    ExprPtr otherwise = skip_name("else") ? parse_condexpr() : nullptr;
    auto e = make(ExprKind::kCondExpr, pos);
    e->operands.push_back(std::move(cond));
    e->operands.push_back(std::move(expr));
    e->operands.push_back(std::move(otherwise));
    expr = std::move(e);
  }
  return expr;
}

ExprPtr ExprParser::parse_or() {
  ExprPtr left = parse_and();
  while (is_name("or")) {
    const size_t pos = cur().pos;
    advance();
    left = make_binary(ExprKind::kOr, pos, std::move(left), parse_and());
  }
  return left;
}

ExprPtr ExprParser::parse_and() {
  ExprPtr left = parse_not();
  while (is_name("and")) {
    const size_t pos = cur().pos;
    advance();
    left = make_binary(ExprKind::kAnd, pos, std::move(left), parse_not());
  }
  return left;
}

ExprPtr ExprParser::parse_not() {
  if (is_name("not")) {
    DepthGuard guard(*this);
    const size_t pos = cur().pos;
    advance();
    return make_unary(ExprKind::kNot, pos, parse_not());
  }
  return parse_compare();
}

ExprPtr ExprParser::parse_compare() {
  const size_t pos = cur().pos;
  ExprPtr first = parse_math1();
  auto e = make(ExprKind::kCompare, pos);
  while (true) {
    CompareOp op;
    if (is_op("=="))
      op = CompareOp::kEq;
    else if (is_op("!="))
      op = CompareOp::kNe;
    else if (is_op("<"))
      op = CompareOp::kLt;
    else if (is_op("<="))
      op = CompareOp::kLe;
    else if (is_op(">"))
      op = CompareOp::kGt;
    else if (is_op(">="))
      op = CompareOp::kGe;
    else if (is_name("in"))
      op = CompareOp::kIn;
    else if (is_name("not") && peek().type == TokenType::kName && peek().value == "in") {
      advance();
      op = CompareOp::kNotIn;
    } else {
      break;
    }
    advance();
    if (e->operands.empty()) e->operands.push_back(std::move(first));
    e->compare_ops.push_back(op);
    e->operands.push_back(parse_math1());
  }
  return e->operands.empty() ? std::move(first) : std::move(e);
}

ExprPtr ExprParser::binary(size_t pos, BinaryOp op, ExprPtr a, ExprPtr b) {
  auto e = make_binary(ExprKind::kBinary, pos, std::move(a), std::move(b));
  e->binary_op = op;
  return e;
}

ExprPtr ExprParser::parse_math1() {
  ExprPtr left = parse_concat();
  while (is_op("+") || is_op("-")) {
    const size_t pos = cur().pos;
    const BinaryOp op = cur().value == "+" ? BinaryOp::kAdd : BinaryOp::kSub;
    advance();
    left = binary(pos, op, std::move(left), parse_concat());
  }
  return left;
}

ExprPtr ExprParser::parse_concat() {
  ExprPtr left = parse_math2();
  while (is_op("~")) {
    const size_t pos = cur().pos;
    advance();
    left = binary(pos, BinaryOp::kConcat, std::move(left), parse_math2());
  }
  return left;
}

ExprPtr ExprParser::parse_math2() {
  ExprPtr left = parse_pow();
  while (is_op("*") || is_op("/") || is_op("//") || is_op("%")) {
    const size_t pos = cur().pos;
    const std::string& v = cur().value;
    const BinaryOp op = v == "*"    ? BinaryOp::kMul
                        : v == "/"  ? BinaryOp::kDiv
                        : v == "//" ? BinaryOp::kFloorDiv
                                    : BinaryOp::kMod;
    advance();
    left = binary(pos, op, std::move(left), parse_pow());
  }
  return left;
}

ExprPtr ExprParser::parse_pow() {
  ExprPtr left = parse_unary(true);
  while (is_op("**")) {
    const size_t pos = cur().pos;
    advance();
    left = binary(pos, BinaryOp::kPow, std::move(left), parse_unary(true));
  }
  return left;
}

ExprPtr ExprParser::parse_unary(bool with_filter) {
  DepthGuard guard(*this);
  const size_t pos = cur().pos;
  ExprPtr node;
  if (skip_op("-")) {
    node = make_unary(ExprKind::kNeg, pos, parse_unary(false));
  } else if (skip_op("+")) {
    node = make_unary(ExprKind::kPos, pos, parse_unary(false));
  } else {
    node = parse_primary();
  }
  node = parse_postfix(std::move(node));
  if (with_filter) node = parse_filter_expr(std::move(node));
  return node;
}

ExprPtr ExprParser::parse_primary() {
  const Token& tok = cur();
  const size_t pos = tok.pos;
  switch (tok.type) {
    case TokenType::kName: {
      auto e = make(ExprKind::kConst, pos);
      const std::string& n = tok.value;
      if (n == "true" || n == "True")
        e->value = Value(true);
      else if (n == "false" || n == "False")
        e->value = Value(false);
      else if (n == "none" || n == "None")
        e->value = Value::none();
      else {
        e->kind = ExprKind::kName;
        e->name = n;
      }
      advance();
      return e;
    }
    case TokenType::kString: {
      std::string s;
      while (cur().type == TokenType::kString) {  // adjacent literals concatenate
        s += cur().value;
        advance();
      }
      auto e = make(ExprKind::kConst, pos);
      e->value = Value(std::move(s));
      return e;
    }
    case TokenType::kInteger:
    case TokenType::kFloat: {
      auto e = make(ExprKind::kConst, pos);
      e->value = tok.type == TokenType::kInteger ? Value(tok.int_value) : Value(tok.float_value);
      advance();
      return e;
    }
    case TokenType::kOperator:
      if (tok.value == "(") {
        advance();
        ExprPtr e = parse_tuple(true, {}, true);
        expect_op(")");
        return e;
      }
      if (tok.value == "[") return parse_list();
      if (tok.value == "{") return parse_dict();
      break;
    default:
      break;
  }
  syntax_error("unexpected " + describe(tok), pos);
}

ExprPtr ExprParser::parse_list() {
  auto e = make(ExprKind::kList, cur().pos);
  expect_op("[");
  while (!is_op("]")) {
    if (!e->operands.empty()) expect_op(",");
    if (is_op("]")) break;
    e->operands.push_back(parse_expression(true));
  }
  expect_op("]");
  return e;
}

ExprPtr ExprParser::parse_dict() {
  auto e = make(ExprKind::kDict, cur().pos);
  expect_op("{");
  while (!is_op("}")) {
    if (!e->operands.empty()) expect_op(",");
    if (is_op("}")) break;
    e->operands.push_back(parse_expression(true));
    expect_op(":");
    e->operands.push_back(parse_expression(true));
  }
  expect_op("}");
  return e;
}

ExprPtr ExprParser::parse_postfix(ExprPtr node) {
  while (true) {
    if (is_op(".") || is_op("[")) {
      node = parse_subscript(std::move(node));
    } else if (is_op("(")) {
      node = parse_call(std::move(node));
    } else {
      return node;
    }
  }
}

ExprPtr ExprParser::parse_filter_expr(ExprPtr node) {
  while (true) {
    if (is_op("|")) {
      node = parse_filter(std::move(node), false);
    } else if (is_name("is")) {
      node = parse_test(std::move(node));
    } else if (is_op("(")) {
      node = parse_call(std::move(node));
    } else {
      return node;
    }
  }
}

ExprPtr ExprParser::parse_subscript(ExprPtr node) {
  const size_t pos = cur().pos;
  if (skip_op(".")) {
    if (cur().type == TokenType::kName) {
      auto e = make_unary(ExprKind::kGetattr, pos, std::move(node));
      e->name = cur().value;
      advance();
      return e;
    }
    if (cur().type == TokenType::kInteger) {
      auto key = make(ExprKind::kConst, cur().pos);
      key->value = Value(cur().int_value);
      advance();
      return make_binary(ExprKind::kGetitem, pos, std::move(node), std::move(key));
    }
    syntax_error("expected an attribute name after '.', got " + describe(cur()), cur().pos);
  }
  expect_op("[");
  std::vector<ExprPtr> args;
  while (!is_op("]")) {
    if (!args.empty()) expect_op(",");
    args.push_back(parse_subscribed());
  }
  expect_op("]");
  if (args.empty()) syntax_error("expected an index inside '[]'", pos);
  ExprPtr key;
  if (args.size() == 1) {
    key = std::move(args[0]);
  } else {
    key = make(ExprKind::kTuple, pos);
    key->operands = std::move(args);
  }
  if (key->kind == ExprKind::kSlice) {
    key->operands[0] = std::move(node);
    key->pos = pos;
    return key;
  }
  return make_binary(ExprKind::kGetitem, pos, std::move(node), std::move(key));
}

// An index or a slice start:stop:step (operands[0] is left for the sliced object).
ExprPtr ExprParser::parse_subscribed() {
  const size_t pos = cur().pos;
  auto slice = make(ExprKind::kSlice, pos);
  slice->operands.push_back(nullptr);
  if (skip_op(":")) {
    slice->operands.push_back(nullptr);
  } else {
    ExprPtr e = parse_expression(true);
    if (!skip_op(":")) return e;
    slice->operands.push_back(std::move(e));
  }
  auto optional_expr = [&]() -> ExprPtr {
    if (is_op("]") || is_op(",") || is_op(":")) return nullptr;
    return parse_expression(true);
  };
  slice->operands.push_back(optional_expr());
  slice->operands.push_back(skip_op(":") ? optional_expr() : nullptr);
  return slice;
}

void ExprParser::parse_call_args(Expr& e) {
  expect_op("(");
  while (!is_op(")")) {
    if (!e.args.empty() || !e.kwargs.empty()) expect_op(",");
    if (is_op(")")) break;
    if (is_op("*") || is_op("**")) {
      throw Error(ErrorKind::kUnsupported, "*args and **kwargs in calls are not supported",
                  cur().pos);
    }
    if (cur().type == TokenType::kName && peek().type == TokenType::kOperator &&
        peek().value == "=") {
      std::string key = cur().value;
      advance();
      advance();
      e.kwargs.emplace_back(std::move(key), parse_expression(true));
    } else {
      if (!e.kwargs.empty()) {
        syntax_error("positional argument follows keyword argument", cur().pos);
      }
      e.args.push_back(parse_expression(true));
    }
  }
  expect_op(")");
}

ExprPtr ExprParser::parse_call(ExprPtr node) {
  auto e = make_unary(ExprKind::kCall, cur().pos, std::move(node));
  parse_call_args(*e);
  return e;
}

ExprPtr ExprParser::parse_filter(ExprPtr node, bool start_inline) {
  while (is_op("|") || start_inline) {
    if (!start_inline) advance();
    start_inline = false;
    const size_t pos = cur().pos;
    std::string name = expect_name();
    while (skip_op(".")) name.append(".").append(expect_name());
    auto e = make_unary(ExprKind::kFilter, pos, std::move(node));
    e->name = std::move(name);
    if (is_op("(")) parse_call_args(*e);
    node = std::move(e);
  }
  return node;
}

ExprPtr ExprParser::parse_test(ExprPtr node) {
  const size_t pos = cur().pos;
  advance();  // "is"
  const bool negated = skip_name("not");
  const size_t name_pos = cur().pos;
  std::string name = expect_name();
  while (skip_op(".")) name.append(".").append(expect_name());
  auto e = make_unary(ExprKind::kTest, name_pos, std::move(node));
  e->name = std::move(name);
  const Token& t = cur();
  if (is_op("(")) {
    parse_call_args(*e);
  } else if ((t.type == TokenType::kName || t.type == TokenType::kString ||
              t.type == TokenType::kInteger || t.type == TokenType::kFloat || is_op("[") ||
              is_op("{")) &&
             !is_name("else") && !is_name("or") && !is_name("and")) {
    if (is_name("is")) syntax_error("tests cannot be chained with 'is'", t.pos);
    e->args.push_back(parse_postfix(parse_primary()));
  }
  return negated ? make_unary(ExprKind::kNot, pos, std::move(e)) : std::move(e);
}

}  // namespace lathe::jinja
