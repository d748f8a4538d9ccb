// The parsed form of a template: statement nodes holding expression trees. Built once by the
// parser, then only read (a compiled Template may be rendered from many threads at once).
// Every node records `pos`, its byte offset in the normalised source, for error messages.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "engine/tokenizer/jinja/value.h"

namespace lathe::jinja {

struct Expr;
using ExprPtr = std::unique_ptr<Expr>;

enum class ExprKind {
  kConst,       // value
  kName,        // name
  kBlockInput,  // the captured body of {% filter %} / {% set x | f %}, fed into a filter chain
  kList,        // operands = items
  kTuple,       // operands = items
  kDict,        // operands = key0, value0, key1, value1, ...
  kGetattr,     // operands[0].name
  kGetitem,     // operands[0][operands[1]]
  kSlice,       // operands[0][start:stop:step]; operands 1..3 may be null
  kCall,        // operands[0](args, kwargs)
  kFilter,      // operands[0] | name(args, kwargs)
  kTest,        // operands[0] is name(args, kwargs)
  kNeg,         // -operands[0]
  kPos,         // +operands[0]
  kNot,         // not operands[0]
  kBinary,      // operands[0] <op> operands[1]
  kCompare,     // operands[0] <cmp_ops[0]> operands[1] <cmp_ops[1]> operands[2] ...
  kAnd,         // operands[0] and operands[1]
  kOr,          // operands[0] or operands[1]
  kCondExpr,    // operands[1] if operands[0] else operands[2] (operands[2] may be null)
};

enum class BinaryOp { kAdd, kSub, kMul, kDiv, kFloorDiv, kMod, kPow, kConcat };
enum class CompareOp { kEq, kNe, kLt, kLe, kGt, kGe, kIn, kNotIn };

struct Expr {
  ExprKind kind = ExprKind::kConst;
  size_t pos = 0;
  Value value;       // kConst
  std::string name;  // kName, kGetattr attribute, kFilter / kTest name
  BinaryOp binary_op = BinaryOp::kAdd;
  std::vector<CompareOp> compare_ops;
  std::vector<ExprPtr> operands;
  std::vector<ExprPtr> args;  // call, filter and test arguments
  std::vector<std::pair<std::string, ExprPtr>> kwargs;
};

// An assignment target: a name, a tuple of names (for a, b in ...), or namespace.attribute.
struct Target {
  std::vector<std::string> names;
  bool is_tuple = false;
  std::string attribute;  // set ns.attr = ...: names = {"ns"}, attribute = "attr"
};

struct Node;
using NodePtr = std::unique_ptr<Node>;
using Body = std::vector<NodePtr>;

enum class NodeKind {
  kText,
  kOutput,
  kIf,
  kFor,
  kSet,
  kSetBlock,
  kMacro,
  kCallBlock,
  kFilterBlock,
  kWith,
  kScope,  // {% generation %} (Hugging Face's assistant-mask tag): renders its body as is
  kBreak,
  kContinue,
};

struct Node {
  explicit Node(NodeKind k, size_t p) : kind(k), pos(p) {}
  virtual ~Node() = default;
  NodeKind kind;
  size_t pos;
};

struct TextNode : Node {
  TextNode(size_t p, std::string t) : Node(NodeKind::kText, p), text(std::move(t)) {}
  std::string text;
};

struct OutputNode : Node {
  OutputNode(size_t p, ExprPtr e) : Node(NodeKind::kOutput, p), expr(std::move(e)) {}
  ExprPtr expr;
};

struct IfNode : Node {
  explicit IfNode(size_t p) : Node(NodeKind::kIf, p) {}
  std::vector<std::pair<ExprPtr, Body>> branches;  // if / elif conditions with their bodies
  Body else_body;
};

struct ForNode : Node {
  explicit ForNode(size_t p) : Node(NodeKind::kFor, p) {}
  Target target;
  ExprPtr iterable;
  ExprPtr filter;  // for x in xs if cond
  bool recursive = false;
  Body body;
  Body else_body;  // rendered when no item passed the filter
};

struct SetNode : Node {
  explicit SetNode(size_t p) : Node(NodeKind::kSet, p) {}
  Target target;
  ExprPtr value;
};

struct SetBlockNode : Node {
  explicit SetBlockNode(size_t p) : Node(NodeKind::kSetBlock, p) {}
  Target target;
  ExprPtr filter;  // optional chain over a kBlockInput
  Body body;
};

// Parameters of a macro or of a call block's caller().
struct Params {
  std::vector<std::string> names;
  std::vector<ExprPtr> defaults;  // same length as names; null where there is no default
};

struct MacroNode : Node {
  explicit MacroNode(size_t p) : Node(NodeKind::kMacro, p) {}
  std::string name;
  Params params;
  bool uses_varargs = false;  // the body reads `varargs`: extra positional arguments are allowed
  bool uses_kwargs = false;   // the body reads `kwargs`: unknown keyword arguments are allowed
  Body body;
};

struct CallBlockNode : Node {
  explicit CallBlockNode(size_t p) : Node(NodeKind::kCallBlock, p) {}
  ExprPtr call;  // a kCall expression; `caller` is passed to it
  Params caller_params;
  Body body;
};

struct FilterBlockNode : Node {
  explicit FilterBlockNode(size_t p) : Node(NodeKind::kFilterBlock, p) {}
  ExprPtr filter;  // chain over a kBlockInput
  Body body;
};

struct WithNode : Node {
  explicit WithNode(size_t p) : Node(NodeKind::kWith, p) {}
  std::vector<std::pair<Target, ExprPtr>> assignments;
  Body body;
};

struct ScopeNode : Node {
  explicit ScopeNode(size_t p) : Node(NodeKind::kScope, p) {}
  Body body;
};

struct LoopControlNode : Node {
  LoopControlNode(NodeKind k, size_t p) : Node(k, p) {}
};

}  // namespace lathe::jinja
