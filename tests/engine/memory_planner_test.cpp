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
};

QTEST_GUILESS_MAIN(MemoryPlannerTest)
#include "memory_planner_test.moc"
