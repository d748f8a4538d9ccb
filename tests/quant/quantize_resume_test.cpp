// Resuming a calibrated `lathe quantize` run (quant_checkpoint.h): a GPTQ or AWQ run stopped after
// N finished blocks keeps them in OUT.partial, and the same job run again reads them back and
// writes an output byte for byte equal to an uninterrupted run's; the work folder is gone after.
// Bad input: a damaged manifest, a manifest of another job (another scheme flag, another
// calibration), a damaged block or state file — each a clear error naming the file and --restart,
// and --restart starts afresh.
#include <QtTest>

#include <QTemporaryDir>

#include <filesystem>
#include <fstream>

#include "engine/core/read_file.h"
#include "engine/quant/quant_checkpoint.h"
#include "engine/quant/quantize_model.h"
#include "quant_model_util.h"

using namespace lathe;
namespace fs = std::filesystem;

namespace {

std::string words(size_t chars, uint32_t seed) {
  static const char* kWords[] = {"the",   "model", "weights", "of",    "a",    "layer", "group",
                                 "scale", "river", "stone",   "light", "over", "under", "42"};
  std::string out;
  uint32_t x = seed;
  while (out.size() < chars) {
    x = x * 1664525u + 1013904223u;
    out += kWords[(x >> 8) % 14];
    out += (x >> 20) % 9 == 0 ? ".\n" : " ";
  }
  return out;
}

bool contains(const Status& s, const char* text) {
  return s.message().find(text) != std::string::npos;
}

// Every file of folder `a` equals the file of the same name in `b`, and both have the same names.
bool same_folder(const std::string& a, const std::string& b, std::string* why) {
  size_t n = 0;
  for (const auto& e : fs::directory_iterator(a)) {
    ++n;
    const std::string name = e.path().filename().string();
    auto x = read_file(e.path().string());
    auto y = read_file(b + "/" + name);
    if (!x.is_ok() || !y.is_ok() || x.value() != y.value()) {
      *why = name + " differs";
      return false;
    }
  }
  size_t m = 0;
  for (const auto& e : fs::directory_iterator(b)) (void)e, ++m;
  if (n != m) *why = "different file counts";
  return n == m && n > 0;
}

void flip_byte(const std::string& path, size_t offset) {
  std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
  f.seekg(static_cast<std::streamoff>(offset));
  char c = 0;
  f.read(&c, 1);
  c = static_cast<char>(c ^ 0x5a);
  f.seekp(static_cast<std::streamoff>(offset));
  f.write(&c, 1);
}

}  // namespace

class QuantizeResumeTest : public QObject {
  Q_OBJECT
  QTemporaryDir dir_;
  std::string model_, calib_;

  QuantizeRequest request(const std::string& out, const char* scheme) const {
    QuantizeRequest r;
    r.model = model_;
    r.output = out;
    r.scheme.scheme = scheme;
    r.scheme.group_size = 64;
    r.calibration.file = calib_;
    r.calibration.num_samples = 16;
    r.calibration.seq_len = 48;
    return r;
  }

  static Result<QuantizeResult> run(const QuantizeRequest& r) {
    LATHE_ASSIGN_OR_RETURN(std::unique_ptr<QuantizeJob> job, QuantizeJob::prepare(r));
    return job->run(nullptr, nullptr);
  }

  std::string path(const char* name) const { return dir_.filePath(name).toStdString(); }

  // Uninterrupted run, then a run stopped after `stop` blocks and resumed: equal outputs.
  void check_resume(const char* scheme, int64_t stop, bool desc_act) {
    const std::string ref = path((std::string(scheme) + "_ref").c_str());
    const std::string out = path((std::string(scheme) + "_resumed").c_str());
    QuantizeRequest r = request(ref, scheme);
    r.scheme.desc_act = desc_act;
    auto full = run(r);
    LATHE_QVERIFY_RESULT(full);
    QCOMPARE(full.value().resumed_layers, int64_t{0});
    QVERIFY(!fs::exists(QuantCheckpoint::folder_for(ref)));  // removed after the commit

    r.output = out;
    r.stop_after_layers = stop;
    auto stopped = run(r);
    QCOMPARE(stopped.status().code(), ErrorCode::kCancelled);
    QVERIFY2(contains(stopped.status(), "run the same command again to resume"),
             stopped.status().message().c_str());
    QVERIFY(!fs::exists(out));
    QVERIFY(fs::exists(out + ".partial/manifest.json"));
    QVERIFY(fs::exists(out + ".partial/state." + std::to_string(stop) + ".bin"));
    QVERIFY(!fs::exists(out + ".partial/state." + std::to_string(stop - 1) + ".bin"));

    r.stop_after_layers = -1;
    auto job = QuantizeJob::prepare(r);
    LATHE_QVERIFY_RESULT(job);
    QCOMPARE(job.value()->checkpointed_layers(), stop);
    auto resumed = job.value()->run(nullptr, nullptr);
    LATHE_QVERIFY_RESULT(resumed);
    QCOMPARE(resumed.value().resumed_layers, stop);
    QVERIFY(!fs::exists(out + ".partial"));
    QCOMPARE(resumed.value().holdout_message, full.value().holdout_message);
    std::string why;
    QVERIFY2(same_folder(ref, out, &why), why.c_str());
  }

 private slots:
  void initTestCase() {
    model_ = path("model");
    test::SyntheticModel m;
    m.layers = 4;
    m.norm_outlier_scale = 12.f;
    LATHE_QVERIFY_OK(test::write_synthetic_model(model_, m));
    calib_ = path("calib.txt");
    std::ofstream(calib_) << words(40000, 5);
  }

  void gptq_resumes_bit_identically() { check_resume("gptq", 2, true); }
  void awq_resumes_bit_identically() { check_resume("awq", 1, false); }

  void another_job_is_refused_and_restart_starts_afresh() {
    const std::string out = path("other");
    QuantizeRequest r = request(out, "gptq");
    r.stop_after_layers = 1;
    QCOMPARE(run(r).status().code(), ErrorCode::kCancelled);
    r.stop_after_layers = -1;

    QuantizeRequest damp = r;
    damp.scheme.damp_percent = 0.05;
    Status s = QuantizeJob::prepare(damp).status();
    QVERIFY2(contains(s, "holds a run of another job (scheme differ)") && contains(s, "--restart"),
             s.message().c_str());
    QuantizeRequest fewer = r;
    fewer.calibration.num_samples = 12;
    s = QuantizeJob::prepare(fewer).status();
    QVERIFY2(contains(s, "calibration"), s.message().c_str());
    QuantizeRequest held = r;
    held.holdout_samples = 2;
    s = QuantizeJob::prepare(held).status();
    QVERIFY2(contains(s, "quantizer differ"), s.message().c_str());

    damp.restart = true;
    auto fresh = run(damp);
    LATHE_QVERIFY_RESULT(fresh);
    QCOMPARE(fresh.value().resumed_layers, int64_t{0});
    QVERIFY(fs::exists(out) && !fs::exists(out + ".partial"));
  }

  void damaged_files_are_refused() {
    const std::string out = path("damaged");
    const std::string folder = out + ".partial";
    QuantizeRequest r = request(out, "gptq");
    r.stop_after_layers = 2;
    QCOMPARE(run(r).status().code(), ErrorCode::kCancelled);
    r.stop_after_layers = -1;
    const std::string manifest = folder + "/manifest.json";
    const std::string good = read_file(manifest).value();

    for (const char* bad : {"", "{not json", "[1, 2]", "{\"format\": \"something else\"}"}) {
      std::ofstream(manifest, std::ios::trunc) << bad;
      const Status s = QuantizeJob::prepare(r).status();
      QVERIFY2(contains(s, "is not a valid checkpoint manifest") && contains(s, "--restart"),
               s.message().c_str());
    }
    std::string wrong_state = good;
    wrong_state.replace(wrong_state.find("state.2.bin"), 11, "state.1.bin");
    std::ofstream(manifest, std::ios::trunc) << wrong_state;
    QVERIFY(contains(QuantizeJob::prepare(r).status(), "finished_layers and state disagree"));
    std::ofstream(manifest, std::ios::trunc) << good;

    // A damaged block: found when the resumed run reads it back.
    flip_byte(folder + "/blk.1.bin", 40);
    Status s = run(r).status();
    QVERIFY2(contains(s, "blk.1.bin is damaged") && contains(s, "--restart"), s.message().c_str());
    flip_byte(folder + "/blk.1.bin", 40);
    // A damaged state, and one cut short.
    const std::string state = folder + "/state.2.bin";
    flip_byte(state, 100);
    s = run(r).status();
    QVERIFY2(contains(s, "state.2.bin is damaged"), s.message().c_str());
    flip_byte(state, 100);
    fs::resize_file(state, fs::file_size(state) - 4);
    s = run(r).status();
    QVERIFY2(contains(s, "does not fit"), s.message().c_str());
    QVERIFY(!fs::exists(out));

    r.restart = true;
    LATHE_QVERIFY_RESULT(run(r));
    QVERIFY(!fs::exists(folder));
  }

  void block_records_round_trip() {
    CalibratedBlock b;
    IntQuantConfig c;
    c.group_size = 4;
    const std::vector<float> w = test::random_normal(3 * 8, 3);
    auto q = quantize_int_rtn(w.data(), 3, 8, c);
    LATHE_QVERIFY_RESULT(q);
    b.linears.emplace("blk.0.attn_q", q.value());
    b.replaced["blk.0.attn_norm"] = {1.f, 2.f, 3.f};
    b.notes = {"a note"};
    b.output_error = 0.25;
    b.has_holdout = true;
    b.holdout = {0.5, 0.75};
    const std::string bytes = encode_calibrated_block(b);
    auto d = decode_calibrated_block(bytes, "x");
    LATHE_QVERIFY_RESULT(d);
    QCOMPARE(encode_calibrated_block(d.value()), bytes);
    QVERIFY(d.value().linears.at("blk.0.attn_q").codes == q.value().codes);
    QCOMPARE(d.value().holdout.rtn_error, 0.75);
    // Cut anywhere: an error, never a crash.
    for (size_t n = 0; n < bytes.size(); n += 7)
      QVERIFY(contains(decode_calibrated_block(bytes.substr(0, n), "cut").status(), "cut"));
  }
};

QTEST_GUILESS_MAIN(QuantizeResumeTest)
#include "quantize_resume_test.moc"
