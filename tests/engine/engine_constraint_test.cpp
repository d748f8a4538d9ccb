// Constrained (guided) decoding through the Engine over the fake model runner: where each
// constrained row's token mask is looked up (by the runner, inside its execute(), except rows
// under min_tokens), and that the lookahead (next_decode_input.h) stays on with late-bound masks.
#include <QtTest>

#include <memory>
#include <span>
#include <utility>
#include <vector>

#include "engine/runtime/engine.h"
#include "engine/runtime/token_constraint.h"
#include "engine_test_util.h"
#include "fake_engine.h"
#include "test_support.h"

using namespace lathe;
using test::Made;
using test::make_engine;
using test::prompt_of;
using test::spec;

namespace {

// A grammar over two tokens that alternate forever, `first` first: state 0 allows only `first`,
// state 1 only `second`; any other token leads to the dead state (only the end ids). The mask of
// each step follows from the token the step before sampled, so a mask one step stale repeats a
// token.
class AlternatingConstraint final : public TokenConstraint {
 public:
  AlternatingConstraint(int64_t vocab, TokenId first, TokenId second)
      : vocab_(vocab), first_(first), second_(second) {
    masks_[0] = mask_of({first});
    masks_[1] = mask_of({second});
  }
  int32_t start() const override { return 0; }
  int32_t advance(int32_t state, TokenId token) override {
    if (state == 0 && token == first_) return 1;
    if (state == 1 && token == second_) return 0;
    return kDead;
  }
  std::shared_ptr<const TokenMask> allowed(int32_t state,
                                           std::span<const TokenId> end_ids) override {
    if (state == 0 || state == 1) return masks_[state];
    return mask_of(std::vector<TokenId>(end_ids.begin(), end_ids.end()));
  }

 private:
  std::shared_ptr<const TokenMask> mask_of(const std::vector<TokenId>& ids) const {
    auto m = std::make_shared<TokenMask>(static_cast<size_t>((vocab_ + 31) / 32), 0u);
    for (TokenId t : ids) (*m)[static_cast<size_t>(t) >> 5] |= 1u << (t & 31);
    return m;
  }
  int64_t vocab_;
  TokenId first_, second_;
  std::shared_ptr<const TokenMask> masks_[2];
};

// An AlternatingConstraint that counts where its masks are looked up: inside the runner's
// execute() (where the engine leaves the lookups, model_io.h) or outside it.
class WhereLookedUp final : public TokenConstraint {
 public:
  WhereLookedUp(const test::FakeModelRunner* runner, TokenId first, TokenId second)
      : runner_(runner), inner_(1000, first, second) {}
  int32_t start() const override { return inner_.start(); }
  int32_t advance(int32_t state, TokenId token) override { return inner_.advance(state, token); }
  std::shared_ptr<const TokenMask> allowed(int32_t state,
                                           std::span<const TokenId> end_ids) override {
    ++(runner_->in_execute() ? inside : outside);
    return inner_.allowed(state, end_ids);
  }
  int inside = 0, outside = 0;

 private:
  const test::FakeModelRunner* runner_;
  AlternatingConstraint inner_;
};

}  // namespace

class EngineConstraintTest : public QObject {
  Q_OBJECT
 private slots:
  // Constrained decoding keeps the lookahead: the engine marks a constrained sequence's decode
  // steps as continuing, the runner takes each predicted step (its forward pass as predicted, its
  // sampling rows late-bound: next_decode_input.h), and the mask applied to step N + 1 is the one
  // the engine computed from step N's token: two sequences whose grammars alternate two tokens in
  // opposite orders produce exactly those alternations (a mask one step stale repeats a token).
  void constrained_rows_keep_lookahead_with_late_bound_masks() {
    Made m = make_engine();
    const std::vector<std::pair<TokenId, TokenId>> orders = {{10, 20}, {20, 10}};
    std::vector<test::Collected> cs(orders.size());
    std::vector<StreamCallback> cbs;
    std::vector<RequestSpec> specs;
    for (size_t i = 0; i < orders.size(); ++i) {
      RequestSpec s = spec(prompt_of(20, static_cast<int>(i)), 40);
      s.sampling.constraint =
          std::make_shared<AlternatingConstraint>(1000, orders[i].first, orders[i].second);
      specs.push_back(std::move(s));
      cbs.push_back(cs[i].callback());
    }
    LATHE_QVERIFY_RESULT(m.engine->submit_batch(specs, cbs));
    for (size_t i = 0; i < orders.size(); ++i) {
      QVERIFY(cs[i].wait());
      QCOMPARE(cs[i].tokens.size(), size_t{40});
      for (size_t k = 0; k < cs[i].tokens.size(); ++k)
        QCOMPARE(cs[i].tokens[k], k % 2 == 0 ? orders[i].first : orders[i].second);
    }
    // One prefill step, 38 decode steps that continue, the step of the 40th token.
    std::vector<bool> want(40, true);
    want.front() = want.back() = false;
    QCOMPARE(m.runner->continues(), want);
    // Every continuing step predicts its successor except where that opens a KV block (positions
    // 31 and 47 of the 20-token prompts): 36 predicted steps, all taken.
    QCOMPARE(m.runner->lookahead_hits(), int64_t{36});
    QCOMPARE(m.runner->lookahead_misses(), int64_t{0});
    LATHE_VERIFY_NO_LEAKS(*m.engine);
  }

  // The engine leaves each constrained row's mask lookup (a grammar walk of the vocabulary on a
  // cache miss) to the runner, which looks it up once its forward pass is launched: every lookup
  // happens inside execute(), and the tokens are the grammar's. Under min_tokens the engine needs
  // the mask to decide whether EOS may end a complete output, so those rows are looked up before.
  void masks_are_looked_up_by_the_runner() {
    Made m = make_engine();
    auto lazy = std::make_shared<WhereLookedUp>(m.runner, 10, 20);
    auto eager = std::make_shared<WhereLookedUp>(m.runner, 30, 40);
    test::Collected a, b;
    RequestSpec s = spec(prompt_of(20), 12);
    s.sampling.constraint = lazy;
    LATHE_SUBMIT_OK(m.engine->submit(s, a.callback()));
    s = spec(prompt_of(20, 1), 12);
    s.sampling.constraint = eager;
    s.sampling.min_tokens = 5;
    LATHE_SUBMIT_OK(m.engine->submit(s, b.callback()));
    QVERIFY(a.wait() && b.wait());
    for (size_t k = 0; k < 12; ++k) {
      QCOMPARE(a.tokens[k], k % 2 == 0 ? TokenId{10} : TokenId{20});
      QCOMPARE(b.tokens[k], k % 2 == 0 ? TokenId{30} : TokenId{40});
    }
    QCOMPARE(lazy->outside, 0);
    QVERIFY(lazy->inside >= 12);
    QCOMPARE(eager->outside, 5);  // the rows under min_tokens: outputs 0..4
    QVERIFY(eager->inside >= 7);
    LATHE_VERIFY_NO_LEAKS(*m.engine);
  }
};

QTEST_GUILESS_MAIN(EngineConstraintTest)
#include "engine_constraint_test.moc"
