// The parser's view of the token stream: lookahead, expectations with readable errors, and the
// nesting guard that turns absurdly deep input into a syntax error instead of a stack overflow.
#pragma once

#include <algorithm>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "engine/tokenizer/jinja/ast.h"
#include "engine/tokenizer/jinja/error.h"
#include "engine/tokenizer/jinja/lexer.h"

namespace lathe::jinja {

// Blocks and expressions may nest at most this deep.
inline constexpr int kMaxNesting = 128;

[[noreturn]] inline void syntax_error(std::string message, size_t pos) {
  throw Error(ErrorKind::kSyntax, std::move(message), pos);
}

// How a token reads in an error message: "'}}'", "end of template", "'foo'".
inline std::string describe(const Token& t) {
  switch (t.type) {
    case TokenType::kEof:
      return "end of template";
    case TokenType::kText:
      return "template text";
    case TokenType::kVarBegin:
      return "'{{'";
    case TokenType::kVarEnd:
      return "'}}'";
    case TokenType::kBlockBegin:
      return "'{%'";
    case TokenType::kBlockEnd:
      return "'%}'";
    case TokenType::kString:
      return "string literal";
    default:
      return "'" + t.value + "'";
  }
}

inline ExprPtr make(ExprKind kind, size_t pos) {
  auto e = std::make_unique<Expr>();
  e->kind = kind;
  e->pos = pos;
  return e;
}

inline ExprPtr make_unary(ExprKind kind, size_t pos, ExprPtr operand) {
  auto e = make(kind, pos);
  e->operands.push_back(std::move(operand));
  return e;
}

inline ExprPtr make_binary(ExprKind kind, size_t pos, ExprPtr a, ExprPtr b) {
  auto e = make(kind, pos);
  e->operands.push_back(std::move(a));
  e->operands.push_back(std::move(b));
  return e;
}

class TokenStream {
 public:
  explicit TokenStream(const std::vector<Token>& tokens) : t_(tokens) {}

 protected:
  const Token& cur() const { return t_[i_]; }
  const Token& peek(size_t k = 1) const { return t_[std::min(i_ + k, t_.size() - 1)]; }
  void advance() {
    if (i_ + 1 < t_.size()) ++i_;
  }
  bool is_op(std::string_view op) const {
    return cur().type == TokenType::kOperator && cur().value == op;
  }
  bool is_name(std::string_view name) const {
    return cur().type == TokenType::kName && cur().value == name;
  }
  bool skip_op(std::string_view op) {
    if (!is_op(op)) return false;
    advance();
    return true;
  }
  bool skip_name(std::string_view name) {
    if (!is_name(name)) return false;
    advance();
    return true;
  }
  void expect_op(std::string_view op) {
    if (!skip_op(op))
      syntax_error("expected '" + std::string(op) + "', got " + describe(cur()), cur().pos);
  }
  std::string expect_name() {
    if (cur().type != TokenType::kName)
      syntax_error("expected a name, got " + describe(cur()), cur().pos);
    std::string name = cur().value;
    advance();
    return name;
  }
  void expect_block_end() {
    if (cur().type != TokenType::kBlockEnd) {
      syntax_error("expected '%}', got " + describe(cur()), cur().pos);
    }
    advance();
  }

  // Counts nesting (blocks, parentheses, operators) and stops past kMaxNesting.
  struct DepthGuard {
    explicit DepthGuard(TokenStream& s) : stream(s) {
      if (++stream.depth_ > kMaxNesting) {
        syntax_error("template nested more than " + std::to_string(kMaxNesting) + " levels deep",
                     stream.cur().pos);
      }
    }
    ~DepthGuard() { --stream.depth_; }
    TokenStream& stream;
  };

  const std::vector<Token>& t_;
  size_t i_ = 0;
  int depth_ = 0;
};

}  // namespace lathe::jinja
