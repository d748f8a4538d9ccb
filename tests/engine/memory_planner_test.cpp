// The device memory planner (engine/runtime/memory_planner.h): budgets of several models and KV
// caches on one device, reservations released with their owners, utilization caps.
#include <QtTest>

#include <thread>
#include <vector>

#include "engine/runtime/memory_planner.h"

using namespace lathe;

namespace {
constexpr int64_t kGiB = int64_t{1} << 30;
}

class MemoryPlannerTest : public QObject {
  Q_OBJECT
 private slots:
  // One model: what is left for its KV cache is utilization * total minus what was in use and
  // what the load took, as a runner that owns the device would compute it.
  void one_model_gets_the_rest() {
    MemoryPlanner p(100 * kGiB, 2 * kGiB);
    QCOMPARE(p.budget(0.9), 88 * kGiB);
    MemoryReservation load(&p, "weights and activations of A", 16 * kGiB);
    QCOMPARE(p.budget(0.9), 72 * kGiB);
    QCOMPARE(p.reserved(), 16 * kGiB);
  }

  // A second model (a draft beside its target) plans with the first's load and KV cache counted.
  void a_second_model_sees_the_first() {
    MemoryPlanner p(100 * kGiB, 0);
    MemoryReservation a(&p, "weights and activations of target", 40 * kGiB);
    MemoryReservation a_kv(&p, "KV cache of target", 30 * kGiB);
    QCOMPARE(p.budget(0.9), 20 * kGiB);
    MemoryReservation b(&p, "weights and activations of draft", 5 * kGiB);
    QCOMPARE(p.budget(0.9), 15 * kGiB);
    QVERIFY(p.describe().find("KV cache of target: 30.0 GiB") != std::string::npos);
    // A lower utilization of a second engine can leave it nothing: never negative.
    QCOMPARE(p.budget(0.5), int64_t{0});
    a_kv.reset();
    QCOMPARE(p.budget(0.9), 45 * kGiB);
  }

  void reservations_follow_their_owners() {
    MemoryPlanner p(10 * kGiB, 0);
    {
      MemoryReservation r(&p, "temporary", 4 * kGiB);
      MemoryReservation moved = std::move(r);
      QCOMPARE(p.reserved(), 4 * kGiB);
      moved.resize(6 * kGiB);
      QCOMPARE(p.reserved(), 6 * kGiB);
      QCOMPARE(moved.bytes(), 6 * kGiB);
    }
    QCOMPARE(p.reserved(), int64_t{0});
    QCOMPARE(p.describe(), std::string("nothing reserved"));
    p.release(12345);        // unknown ids are ignored
    MemoryReservation none;  // no planner: a no-op
    none.resize(kGiB);
    QCOMPARE(p.reserved(), int64_t{0});
  }

  void concurrent_reservations_add_up() {
    MemoryPlanner p(1000 * kGiB, 0);
    std::vector<std::thread> threads;
    for (int t = 0; t < 4; ++t)
      threads.emplace_back([&p] {
        for (int i = 0; i < 1000; ++i) p.release(p.reserve("x", 1));
        for (int i = 0; i < 100; ++i) p.reserve("kept", 1);
      });
    for (std::thread& t : threads) t.join();
    QCOMPARE(p.reserved(), int64_t{400});
  }

  // check_weights_fit: weights that fit pass; weights over what is free say so with the numbers
  // and that only a quantized format or a smaller model helps; weights over the utilization's
  // budget (but not over what is free) name the utilization that would hold them; in RAM, only the
  // machine's size bounds them.
  void weights_that_do_not_fit_are_refused_with_the_numbers() {
    WeightFit f;
    f.model = "Llama-3.1-70B";
    f.device = "NVIDIA H200";
    f.total_bytes = 140 * kGiB;
    f.free_bytes = 139 * kGiB;
    f.utilization = 0.9;
    f.budget_bytes = 126 * kGiB;
    f.weight_bytes = 100 * kGiB;
    QVERIFY(check_weights_fit(f).is_ok());

    f.weight_bytes = 150 * kGiB;
    Status s = check_weights_fit(f);
    QCOMPARE(static_cast<int>(s.code()), static_cast<int>(ErrorCode::kOutOfMemory));
    QCOMPARE(s.message(),
             std::string("the weights of Llama-3.1-70B need 150 GiB on NVIDIA H200, but 139 GiB of "
                         "its 140 GiB are free; use a quantized format (a GPTQ, AWQ, FP8 "
                         "or GGUF checkpoint of the model, or --quantization int4, int8 or fp8) or "
                         "a smaller model, or free the GPU of other processes (neither a smaller "
                         "--max-model-len nor a higher --gpu-memory-utilization helps: the weights "
                         "alone do not fit)"));

    f.weight_bytes = 131 * kGiB;  // free, but over 0.9's budget: 0.9 + 5/140 = 0.936 -> 0.94
    s = check_weights_fit(f);
    QCOMPARE(static_cast<int>(s.code()), static_cast<int>(ErrorCode::kOutOfMemory));
    QVERIFY2(s.message().find("need 131 GiB on NVIDIA H200, more than --gpu-memory-utilization "
                              "0.90 leaves for this model (126 GiB of 140 GiB); raise "
                              "--gpu-memory-utilization above 0.94") != std::string::npos,
             s.message().c_str());
    QVERIFY(s.message().find("or use a quantized format") != std::string::npos);

    // A second model that the first leaves little: no utilization below 1 holds it.
    f.budget_bytes = 2 * kGiB;
    f.weight_bytes = 16 * kGiB;
    f.free_bytes = 20 * kGiB;
    f.utilization = 0.95;
    s = check_weights_fit(f);
    QVERIFY2(s.message().find("; use a quantized format") != std::string::npos,
             s.message().c_str());
    QVERIFY(s.message().find("raise") == std::string::npos);

    WeightFit ram;
    ram.model = "Llama-3.1-70B";
    ram.device = "RAM";
    ram.total_bytes = 16 * kGiB;
    ram.weight_bytes = 131 * kGiB;
    s = check_weights_fit(ram);
    QCOMPARE(static_cast<int>(s.code()), static_cast<int>(ErrorCode::kOutOfMemory));
    QVERIFY2(s.message().find("the weights of Llama-3.1-70B need 131 GiB of RAM, more than the "
                              "machine's 16.0 GiB; use a quantized format") == 0,
             s.message().c_str());
    ram.weight_bytes = 15 * kGiB;
    QVERIFY(check_weights_fit(ram).is_ok());
  }
};

QTEST_GUILESS_MAIN(MemoryPlannerTest)
#include "memory_planner_test.moc"
