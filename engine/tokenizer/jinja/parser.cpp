#include "engine/tokenizer/jinja/parser.h"

#include <algorithm>
#include <initializer_list>
#include <string_view>

#include "engine/tokenizer/jinja/builtins.h"
#include "engine/tokenizer/jinja/error.h"
#include "engine/tokenizer/jinja/expr_parser.h"

namespace lathe::jinja {
namespace {

// Statements: {% if %}, {% for %}, {% set %}, {% macro %}, {% call %}, {% filter %}, {% with %},
// {% generation %}, {% break %} / {% continue %}.
class Parser : public ExprParser {
 public:
  explicit Parser(const std::vector<Token>& tokens) : ExprParser(tokens) {}

  Body parse_all() { return subparse({}, "", 0); }

 private:
  // Parses nodes until a "{% name" with name in `end_names`; returns with the stream on that name.
  Body subparse(std::initializer_list<std::string_view> end_names, std::string_view block,
                size_t block_pos) {
    DepthGuard guard(*this);
    Body body;
    while (true) {
      const Token& tok = cur();
      switch (tok.type) {
        case TokenType::kText:
          body.push_back(std::make_unique<TextNode>(tok.pos, tok.value));
          advance();
          break;
        case TokenType::kVarBegin: {
          const size_t pos = tok.pos;
          advance();
          ExprPtr e = parse_tuple(true, {}, false);
          if (cur().type != TokenType::kVarEnd) {
            syntax_error("expected '}}', got " + describe(cur()), cur().pos);
          }
          advance();
          body.push_back(std::make_unique<OutputNode>(pos, std::move(e)));
          break;
        }
        case TokenType::kBlockBegin: {
          const size_t tag_pos = tok.pos;
          advance();
          if (cur().type == TokenType::kName &&
              std::find(end_names.begin(), end_names.end(), cur().value) != end_names.end()) {
            return body;
          }
          body.push_back(parse_statement(block, tag_pos));
          break;
        }
        case TokenType::kEof:
          for (std::string_view end : end_names) {
            if (end.substr(0, 3) != "end") continue;
            syntax_error(std::string("'").append(block) +
                             "' block opened here is never closed with '{% " + std::string(end) +
                             " %}'",
                         block_pos);
          }
          return body;
        default:
          syntax_error("unexpected " + describe(tok), tok.pos);
      }
    }
  }

  // `pos`: where the tag's "{%" starts, which statements report in errors.
  NodePtr parse_statement(std::string_view enclosing, size_t pos) {
    const Token& tok = cur();
    if (tok.type != TokenType::kName) syntax_error("expected a tag name after '{%'", tok.pos);
    const std::string name = tok.value;
    advance();
    if (name == "if") return parse_if(pos);
    if (name == "for") return parse_for(pos);
    if (name == "set") return parse_set(pos);
    if (name == "macro") return parse_macro(pos);
    if (name == "call") return parse_call_block(pos);
    if (name == "filter") return parse_filter_block(pos);
    if (name == "with") return parse_with(pos);
    if (name == "generation") {
      auto node = std::make_unique<ScopeNode>(pos);
      expect_block_end();
      node->body = subparse({"endgeneration"}, "generation", pos);
      advance();
      expect_block_end();
      return node;
    }
    if (name == "break" || name == "continue") {
      if (loop_depth_ == 0) syntax_error("'" + name + "' outside of a for loop", pos);
      expect_block_end();
      return std::make_unique<LoopControlNode>(
          name == "break" ? NodeKind::kBreak : NodeKind::kContinue, pos);
    }
    static const char* const kUnsupported[] = {"extends", "block",      "include", "import",
                                               "from",    "autoescape", "trans",   "do"};
    for (const char* u : kUnsupported) {
      if (name == u) {
        throw Error(ErrorKind::kUnsupported,
                    "the '" + name + "' tag is not supported in chat templates", pos);
      }
    }
    if (name.rfind("end", 0) == 0 || name == "else" || name == "elif") {
      if (enclosing.empty()) syntax_error("unexpected '" + name + "' outside of any block", pos);
      syntax_error("unexpected '" + name + "' inside a '" + std::string(enclosing) + "' block",
                   pos);
    }
    syntax_error("unknown tag '" + name + "'", pos);
  }

  NodePtr parse_if(size_t pos) {
    auto node = std::make_unique<IfNode>(pos);
    ExprPtr cond = parse_tuple(true, {}, false);
    expect_block_end();
    while (true) {
      Body body = subparse({"elif", "else", "endif"}, "if", pos);
      node->branches.emplace_back(std::move(cond), std::move(body));
      const std::string tag = cur().value;
      advance();
      if (tag == "elif") {
        cond = parse_tuple(true, {}, false);
        expect_block_end();
        continue;
      }
      if (tag == "else") {
        expect_block_end();
        node->else_body = subparse({"endif"}, "if", pos);
        advance();
      }
      expect_block_end();
      return node;
    }
  }

  NodePtr parse_for(size_t pos) {
    auto node = std::make_unique<ForNode>(pos);
    node->target = parse_target(false);
    if (!skip_name("in"))
      syntax_error("expected 'in' in for loop, got " + describe(cur()), cur().pos);
    node->iterable = parse_tuple(false, {"recursive", "if"}, false);
    if (skip_name("if")) node->filter = parse_expression(true);
    if (skip_name("recursive")) node->recursive = true;
    expect_block_end();
    ++loop_depth_;
    node->body = subparse({"endfor", "else"}, "for", pos);
    --loop_depth_;
    if (cur().value == "else") {
      advance();
      expect_block_end();
      node->else_body = subparse({"endfor"}, "for", pos);
    }
    advance();
    expect_block_end();
    return node;
  }

  Target parse_target(bool allow_namespace) {
    Target target;
    if (allow_namespace && cur().type == TokenType::kName && peek().type == TokenType::kOperator &&
        peek().value == ".") {
      target.names.push_back(expect_name());
      advance();
      target.attribute = expect_name();
      return target;
    }
    const bool parenthesized = skip_op("(");
    while (true) {
      target.names.push_back(expect_name());
      if (!skip_op(",")) break;
      target.is_tuple = true;
      if (cur().type != TokenType::kName) break;  // trailing comma
    }
    if (parenthesized) {
      expect_op(")");
      target.is_tuple = true;
    }
    for (const auto& n : target.names) {
      if (n == "true" || n == "false" || n == "none" || n == "True" || n == "False" ||
          n == "None") {
        syntax_error("cannot assign to '" + n + "'", cur().pos);
      }
    }
    return target;
  }

  NodePtr parse_set(size_t pos) {
    Target target = parse_target(true);
    if (skip_op("=")) {
      auto node = std::make_unique<SetNode>(pos);
      node->target = std::move(target);
      node->value = parse_tuple(true, {}, false);
      expect_block_end();
      return node;
    }
    auto node = std::make_unique<SetBlockNode>(pos);
    node->target = std::move(target);
    if (is_op("|")) node->filter = parse_filter(make(ExprKind::kBlockInput, cur().pos), false);
    expect_block_end();
    node->body = subparse({"endset"}, "set", pos);
    advance();
    expect_block_end();
    return node;
  }

  Params parse_params() {
    Params params;
    expect_op("(");
    while (!is_op(")")) {
      if (!params.names.empty()) expect_op(",");
      if (is_op(")")) break;
      params.names.push_back(expect_name());
      params.defaults.push_back(skip_op("=") ? parse_expression(true) : nullptr);
    }
    expect_op(")");
    return params;
  }

  NodePtr parse_macro(size_t pos) {
    auto node = std::make_unique<MacroNode>(pos);
    node->name = expect_name();
    node->params = parse_params();
    expect_block_end();
    const int saved_loop_depth = loop_depth_;
    loop_depth_ = 0;
    const size_t body_begin = i_;
    node->body = subparse({"endmacro"}, "macro", pos);
    loop_depth_ = saved_loop_depth;
    for (size_t k = body_begin; k < i_; ++k) {
      if (t_[k].type != TokenType::kName) continue;
      if (t_[k].value == "varargs") node->uses_varargs = true;
      if (t_[k].value == "kwargs") node->uses_kwargs = true;
    }
    advance();
    if (cur().type == TokenType::kName) advance();  // {% endmacro name %}
    expect_block_end();
    return node;
  }

  NodePtr parse_call_block(size_t pos) {
    auto node = std::make_unique<CallBlockNode>(pos);
    if (is_op("(")) node->caller_params = parse_params();
    node->call = parse_expression(true);
    if (node->call->kind != ExprKind::kCall)
      syntax_error("expected a macro call after 'call'", pos);
    expect_block_end();
    const int saved_loop_depth = loop_depth_;
    loop_depth_ = 0;
    node->body = subparse({"endcall"}, "call", pos);
    loop_depth_ = saved_loop_depth;
    advance();
    expect_block_end();
    return node;
  }

  NodePtr parse_filter_block(size_t pos) {
    auto node = std::make_unique<FilterBlockNode>(pos);
    node->filter = parse_filter(make(ExprKind::kBlockInput, pos), true);
    expect_block_end();
    node->body = subparse({"endfilter"}, "filter", pos);
    advance();
    expect_block_end();
    return node;
  }

  NodePtr parse_with(size_t pos) {
    auto node = std::make_unique<WithNode>(pos);
    while (cur().type != TokenType::kBlockEnd) {
      if (!node->assignments.empty()) expect_op(",");
      Target target = parse_target(false);
      expect_op("=");
      node->assignments.emplace_back(std::move(target), parse_expression(true));
    }
    expect_block_end();
    node->body = subparse({"endwith"}, "with", pos);
    advance();
    expect_block_end();
    return node;
  }

  int loop_depth_ = 0;
};

// Jinja2 rejects unknown filter and test names when it compiles a template, except inside an if
// statement or an inline if-expression ("soft" scopes, where a template may guard a filter it is
// not sure exists): there the error waits until the filter is actually used.
void check_names(const Expr* e, bool soft) {
  if (e == nullptr) return;
  soft = soft || e->kind == ExprKind::kCondExpr;
  if (!soft && e->kind == ExprKind::kFilter && filter_support(e->name) == Support::kUnknown) {
    syntax_error("no filter named '" + e->name + "'", e->pos);
  }
  if (!soft && e->kind == ExprKind::kTest && test_support(e->name) == Support::kUnknown) {
    syntax_error("no test named '" + e->name + "'", e->pos);
  }
  for (const auto& op : e->operands) check_names(op.get(), soft);
  for (const auto& a : e->args) check_names(a.get(), soft);
  for (const auto& kw : e->kwargs) check_names(kw.second.get(), soft);
}

void check_names(const Body& body, bool soft);

void check_params(const Params& params) {
  for (const auto& d : params.defaults) check_names(d.get(), false);
}

void check_names(const Node& node, bool soft) {
  switch (node.kind) {
    case NodeKind::kOutput:
      check_names(static_cast<const OutputNode&>(node).expr.get(), soft);
      break;
    case NodeKind::kIf: {
      const auto& n = static_cast<const IfNode&>(node);
      for (const auto& [cond, body] : n.branches) {
        check_names(cond.get(), true);
        check_names(body, true);
      }
      check_names(n.else_body, true);
      break;
    }
    case NodeKind::kFor: {
      const auto& n = static_cast<const ForNode&>(node);
      check_names(n.iterable.get(), soft);
      check_names(n.filter.get(), false);
      check_names(n.body, false);
      check_names(n.else_body, false);
      break;
    }
    case NodeKind::kSet:
      check_names(static_cast<const SetNode&>(node).value.get(), soft);
      break;
    case NodeKind::kSetBlock: {
      const auto& n = static_cast<const SetBlockNode&>(node);
      check_names(n.filter.get(), false);
      check_names(n.body, false);
      break;
    }
    case NodeKind::kMacro: {
      const auto& n = static_cast<const MacroNode&>(node);
      check_params(n.params);
      check_names(n.body, false);
      break;
    }
    case NodeKind::kCallBlock: {
      const auto& n = static_cast<const CallBlockNode&>(node);
      check_names(n.call.get(), soft);
      check_params(n.caller_params);
      check_names(n.body, false);
      break;
    }
    case NodeKind::kFilterBlock: {
      const auto& n = static_cast<const FilterBlockNode&>(node);
      check_names(n.filter.get(), false);
      check_names(n.body, false);
      break;
    }
    case NodeKind::kWith: {
      const auto& n = static_cast<const WithNode&>(node);
      for (const auto& a : n.assignments) check_names(a.second.get(), soft);
      check_names(n.body, false);
      break;
    }
    case NodeKind::kScope:
      check_names(static_cast<const ScopeNode&>(node).body, false);
      break;
    default:
      break;
  }
}

void check_names(const Body& body, bool soft) {
  for (const auto& node : body) check_names(*node, soft);
}

}  // namespace

Body parse_template(const std::vector<Token>& tokens) {
  Body body = Parser(tokens).parse_all();
  check_names(body, false);
  return body;
}

}  // namespace lathe::jinja
