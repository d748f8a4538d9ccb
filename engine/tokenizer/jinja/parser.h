// Recursive-descent parser for Jinja2's statement and expression grammar (the subset chat templates
// use: if/elif/else, for/else with filters, set and block set, macro, call, filter, with, break,
// continue, raw, Hugging Face's generation tag; full expression syntax with Jinja's precedence).
#pragma once

#include <vector>

#include "engine/tokenizer/jinja/ast.h"
#include "engine/tokenizer/jinja/lexer.h"

namespace lathe::jinja {

// Parses the token stream of a whole template. Throws jinja::Error (kSyntax, or kUnsupported for
// Jinja tags Lathe does not implement such as include/extends) with the offending position.
// Unknown filter and test names are syntax errors, as in Jinja2, except inside if blocks and inline
// if-expressions, where they fail only when evaluated.
Body parse_template(const std::vector<Token>& tokens);

}  // namespace lathe::jinja
