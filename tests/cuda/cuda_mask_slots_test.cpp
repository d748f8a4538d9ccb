// The device mask cache's bookkeeping (mask_slot_table.h): a mask object keeps its slot while it
// is used, a new one takes a free slot and then the least recently used, never a slot the current
// step reads; when the step reads every slot, the table says so instead of evicting one. Host
// only: runs without a GPU.
#include <QtTest>

#include <memory>
#include <set>
#include <vector>

#include "engine/backend/cuda/mask_slot_table.h"

using namespace lathe;
using namespace lathe::cuda;

namespace {

std::shared_ptr<const TokenMask> mask(uint32_t word) {
  return std::make_shared<const TokenMask>(TokenMask{word, 0u});
}

}  // namespace

class CudaMaskSlotsTest : public QObject {
  Q_OBJECT
 private slots:
  void a_mask_keeps_its_slot() {
    MaskSlotTable t(4);
    const auto a = mask(1), b = mask(2);
    t.begin_step();
    const MaskSlotTable::Slot sa = t.find_or_assign(a);
    const MaskSlotTable::Slot sb = t.find_or_assign(b);
    QVERIFY(sa.fresh && sb.fresh);
    QVERIFY(sa.index >= 0 && sb.index >= 0 && sa.index != sb.index);
    // Later in the same step and in later steps: the same slot, nothing to upload.
    const MaskSlotTable::Slot again = t.find_or_assign(a);
    QCOMPARE(again.index, sa.index);
    QVERIFY(!again.fresh);
    t.begin_step();
    QCOMPARE(t.find_or_assign(b).index, sb.index);
    QCOMPARE(t.hits(), int64_t{2});
    QCOMPARE(t.uploads(), int64_t{2});
    // An equal mask in another object is another mask (objects are the keys).
    const MaskSlotTable::Slot copy = t.find_or_assign(mask(1));
    QVERIFY(copy.fresh && copy.index != sa.index);
  }

  void the_least_recently_used_slot_goes_first() {
    MaskSlotTable t(3);
    std::vector<std::shared_ptr<const TokenMask>> m;
    for (uint32_t i = 0; i < 5; ++i) m.push_back(mask(i + 1));
    std::vector<int32_t> slot(5, -1);
    for (int i = 0; i < 3; ++i) {  // steps 1-3 read masks 0, 1, 2
      t.begin_step();
      slot[static_cast<size_t>(i)] = t.find_or_assign(m[static_cast<size_t>(i)]).index;
    }
    t.begin_step();
    QVERIFY(!t.find_or_assign(m[0]).fresh);  // mask 0 read again: mask 1 is now the oldest
    const MaskSlotTable::Slot s3 = t.find_or_assign(m[3]);
    QVERIFY(s3.fresh);
    QCOMPARE(s3.index, slot[1]);
    QCOMPARE(t.num_held(), 3);
    // Mask 1 lost its slot: it comes back fresh, into the then oldest slot (mask 2's).
    t.begin_step();
    const MaskSlotTable::Slot back = t.find_or_assign(m[1]);
    QVERIFY(back.fresh);
    QCOMPARE(back.index, slot[2]);
  }

  // A step that reads every slot: the next new mask gets none (the caller packs its words with the
  // step), and no slot this step reads was given away.
  void a_full_step_overflows_instead_of_evicting() {
    MaskSlotTable t(2);
    const auto a = mask(1), b = mask(2), c = mask(3);
    t.begin_step();
    const int32_t ia = t.find_or_assign(a).index, ib = t.find_or_assign(b).index;
    const MaskSlotTable::Slot sc = t.find_or_assign(c);
    QCOMPARE(sc.index, -1);
    QVERIFY(!sc.fresh);
    QCOMPARE(t.overflows(), int64_t{1});
    QCOMPARE(t.find_or_assign(a).index, ia);
    QCOMPARE(t.find_or_assign(b).index, ib);
    // The next step may evict.
    t.begin_step();
    QVERIFY(t.find_or_assign(c).fresh);
  }

  // A table without slots (the cache off) serves nothing; clear() forgets every mask.
  void empty_and_cleared_tables() {
    MaskSlotTable none;
    none.begin_step();
    QCOMPARE(none.find_or_assign(mask(1)).index, -1);
    MaskSlotTable t(2);
    const auto a = mask(1);
    t.begin_step();
    QVERIFY(t.find_or_assign(a).fresh);
    t.clear();
    QCOMPARE(t.num_held(), 0);
    t.begin_step();
    QVERIFY(t.find_or_assign(a).fresh);
  }

  // Many steps over a working set larger than the table: every step's rows get distinct slots
  // (two masks never share one within a step), and a mask's slot holds it until it is reassigned.
  void steps_never_share_a_slot() {
    MaskSlotTable t(8);
    std::vector<std::shared_ptr<const TokenMask>> m;
    for (uint32_t i = 0; i < 20; ++i) m.push_back(mask(i + 1));
    std::vector<const TokenMask*> holder(8, nullptr);
    for (int step = 0; step < 200; ++step) {
      t.begin_step();
      std::set<int32_t> used;
      for (int r = 0; r < 5; ++r) {
        const auto& mk = m[static_cast<size_t>((step * 7 + r * 3) % 20)];
        const MaskSlotTable::Slot s = t.find_or_assign(mk);
        QVERIFY(s.index >= 0);
        if (s.fresh) {
          holder[static_cast<size_t>(s.index)] = mk.get();
        } else {
          QCOMPARE(holder[static_cast<size_t>(s.index)], mk.get());
        }
        used.insert(s.index);
      }
      // Rows of one step reading the same mask share its slot; different masks never do.
      std::set<const TokenMask*> distinct;
      for (int r = 0; r < 5; ++r)
        distinct.insert(m[static_cast<size_t>((step * 7 + r * 3) % 20)].get());
      QCOMPARE(used.size(), distinct.size());
    }
  }
};

QTEST_GUILESS_MAIN(CudaMaskSlotsTest)
#include "cuda_mask_slots_test.moc"
