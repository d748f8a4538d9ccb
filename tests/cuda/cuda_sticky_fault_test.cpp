// A sticky CUDA fault while the CUDA runner serves (issue 17, resource faults): an illegal memory
// access leaves the process's CUDA context unusable until the process ends. The engine core must
// turn it into errors, not an abort or a hang: the step after the fault ends its requests with
// finish_reason error and a message naming the fault, every later request ends the same way, and
// each one's KV blocks are freed. Runs in its own executable (the fault poisons the context of
// every test after it).
#include <QtTest>

#include <cuda_runtime.h>

#include <memory>
#include <string>
#include <vector>

#include "cuda_runner_test_util.h"
#include "engine/runtime/engine_core.h"
#include "engine/runtime/metrics.h"

namespace lathe::test {
cudaError_t cause_illegal_address();  // fault_kernel.cu
}

using namespace lathe;
using namespace lathe::test;

namespace {

constexpr int32_t kBlocks = 64;

// One request's final event (the core steps on this thread: no locking).
struct Outcome {
  bool finished = false;
  FinishReason reason = FinishReason::kNone;
  std::string error;
  int tokens = 0;
};

}  // namespace

class CudaStickyFaultTest : public QObject {
  Q_OBJECT
 private:
  std::vector<std::unique_ptr<Outcome>> outcomes_;
  RequestId next_id_ = 1;

  Outcome* add(EngineCore& core, int64_t vocab) {
    outcomes_.push_back(std::make_unique<Outcome>());
    Outcome* o = outcomes_.back().get();
    CoreRequest r;
    r.id = next_id_++;
    for (int i = 0; i < 21; ++i) r.prompt.push_back(static_cast<TokenId>((i * 37 + 5) % vocab));
    r.sampling.max_tokens = 6;
    r.sampling.temperature = 0.f;
    r.seed = 1;
    r.on_event = [o](const StreamEvent& e) {
      o->tokens += static_cast<int>(e.token_ids.size());
      if (e.finished) {
        o->finished = true;
        o->reason = e.finish_reason;
        o->error = e.error;
      }
    };
    r.arrival = Clock::now();
    core.add_request(std::move(r));
    return o;
  }

 private slots:
  void a_sticky_fault_ends_requests_with_its_message() {
    LATHE_REQUIRE_GPU();
    auto model = load_fixture("llama3_untied_bf16");
    QVERIFY2(model.is_ok(), model.status().message().c_str());
    const int64_t vocab = model.value().config.vocab_size;
    auto runner = make_cuda(model.value(), kBlocks, /*eager=*/false);
    QVERIFY2(runner.is_ok(), runner.status().message().c_str());
    MetricsOptions mo;
    mo.model_name = "fixture";
    mo.max_num_seqs = 8;
    mo.max_num_batched_tokens = 512;
    mo.max_model_len = 512;
    mo.kv_blocks_total = kBlocks;
    mo.kv_block_size = kBlock;
    MetricsRegistry metrics(mo);
    EngineCoreConfig c;
    c.limits.max_num_seqs = 8;
    c.limits.max_num_batched_tokens = 512;
    c.kv = {kBlocks, kBlock, true};
    EngineCore core(c, runner.value().get(), &metrics);
    auto run = [&] {
      for (int i = 0; i < 200 && core.has_unfinished(); ++i) core.step();
      return !core.has_unfinished();
    };
    auto blocks_free = [&] {
      core.publish_load();
      const MetricsSnapshot s = metrics.snapshot();
      return s.kv_blocks_used == 0 && s.num_requests_running == 0;
    };

    // Healthy first: two requests generate to their length.
    Outcome* a = add(core, vocab);
    Outcome* b = add(core, vocab);
    QVERIFY(run());
    QCOMPARE(static_cast<int>(a->reason), static_cast<int>(FinishReason::kLength));
    QCOMPARE(a->tokens, 6);
    QCOMPARE(static_cast<int>(b->reason), static_cast<int>(FinishReason::kLength));

    // The fault: the context is unusable from here on.
    QCOMPARE(static_cast<int>(cause_illegal_address()), static_cast<int>(cudaErrorIllegalAddress));

    // Every later request ends, with an error that names the fault; nothing stays allocated.
    for (int round = 0; round < 3; ++round) {
      Outcome* x = add(core, vocab);
      Outcome* y = add(core, vocab);
      QVERIFY2(run(), "the core did not finish its requests after the fault");
      for (Outcome* o : {x, y}) {
        QVERIFY(o->finished);
        QCOMPARE(static_cast<int>(o->reason), static_cast<int>(FinishReason::kError));
        QVERIFY2(o->error.find("illegal memory access") != std::string::npos ||
                     o->error.find("cudaErrorIllegalAddress") != std::string::npos,
                 o->error.c_str());
      }
      QVERIFY(blocks_free());
      if (round == 0) qInfo("after the fault: %s", x->error.c_str());
    }
  }
};

QTEST_GUILESS_MAIN(CudaStickyFaultTest)
#include "cuda_sticky_fault_test.moc"
