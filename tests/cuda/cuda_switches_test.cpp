// The CUDA backend's A/B switches (cuda_switches.h): defaults, the one reader of the LATHE_CUDA_*
// environment, values out of range ignored with a warning each; the int4 stream fit's policy
// (quant_gemv_stream_policy.h). Host only: runs without a GPU.
#include <QtTest>

#include <string>
#include <vector>

#include "engine/backend/cuda/cuda_switches.h"
#include "engine/backend/cuda/quant_gemv_stream_policy.h"

using namespace lathe;

namespace {

const char* const kNames[] = {"LATHE_CUDA_ATTENTION",
                              "LATHE_CUDA_DECODE_ATTENTION",
                              "LATHE_CUDA_DECODE_SPLIT_TOKENS",
                              "LATHE_CUDA_DECODE_SPLIT_BLOCKS_PER_SM",
                              "LATHE_CUDA_DECODE_CLUSTER",
                              "LATHE_CUDA_LOOKAHEAD",
                              "LATHE_CUDA_FUSED",
                              "LATHE_CUDA_FUSED_ROPE",
                              "LATHE_CUDA_GEMV_EPILOGUES",
                              "LATHE_CUDA_PDL",
                              "LATHE_CUDA_NATIVE_FORMATS",
                              "LATHE_CUDA_QUANT_ROWS",
                              "LATHE_CUDA_INT4_TILES",
                              "LATHE_CUDA_GGUF_REPACK",
                              "LATHE_CUDA_INT4_TILE_WARPS",
                              "LATHE_CUDA_INT4_TILES_MAX_M",
                              "LATHE_CUDA_INT4_GEMM_MAX_M",
                              "LATHE_CUDA_INT4_TILE_PAIRS",
                              "LATHE_CUDA_INT4_NORM_MAX_M",
                              "LATHE_CUDA_INT4_STREAM_MAX_M",
                              "LATHE_CUDA_INT4_STREAM_STAGES",
                              "LATHE_CUDA_INT4_STREAM_BLOCKS",
                              "LATHE_CUDA_W8_DECODE_MAX_M",
                              "LATHE_CUDA_INT4_STREAM_FIT",
                              "LATHE_CUDA_W8_DECODE_BLOCKS",
                              "LATHE_CUDA_FP8_GEMM",
                              "LATHE_CUDA_FP8_GEMM_MIN_M",
                              "LATHE_CUDA_FP8_DECODE_MAX_K",
                              "LATHE_CUDA_KQUANT_NORM",
                              "LATHE_CUDA_MASK_LOOKUP_LATE",
                              "LATHE_CUDA_MASK_CACHE",
                              "LATHE_CUDA_SAMPLER_MASKS"};

void clear_env() {
  for (const char* n : kNames) qunsetenv(n);
}

// NAME=VALUE alone, a bad value of an int switch: the field keeps `kept`, and one warning names
// `range`.
void expect_ignored(const char* name, const char* value, int32_t CudaSwitches::*field, int32_t kept,
                    const char* range) {
  clear_env();
  qputenv(name, value);
  std::vector<std::string> warnings;
  QCOMPARE(cuda_switches_from_environment(&warnings).*field, kept);
  QCOMPARE(static_cast<int>(warnings.size()), 1);
  QVERIFY2(warnings[0].find(range) != std::string::npos, warnings[0].c_str());
}

}  // namespace

class CudaSwitchesTest : public QObject {
  Q_OBJECT
 private slots:
  void init() { clear_env(); }
  void cleanup() { clear_env(); }

  void defaults_without_environment() {
    std::vector<std::string> warnings;
    const CudaSwitches s = cuda_switches_from_environment(&warnings);
    QVERIFY(warnings.empty());
    QCOMPARE(s.describe(), std::string("defaults"));
    QVERIFY(s.decode_attention && s.gemv_epilogues && s.pdl && s.fused_rope && s.native_formats &&
            s.quant_rows && s.int4_tiles && s.gguf_repack);
    QVERIFY(s.mask_lookup_late && s.mask_cache && s.sampler_masks);
    QCOMPARE(s.fused, FusedDecodeMode::kAuto);
    QCOMPARE(s.lookahead_max_seqs, -1);
  }

  void every_switch_is_read() {
    qputenv("LATHE_CUDA_ATTENTION", "own");
    qputenv("LATHE_CUDA_DECODE_ATTENTION", "split");
    qputenv("LATHE_CUDA_DECODE_SPLIT_TOKENS", "64");
    qputenv("LATHE_CUDA_DECODE_SPLIT_BLOCKS_PER_SM", "2");
    qputenv("LATHE_CUDA_DECODE_CLUSTER", "0");
    qputenv("LATHE_CUDA_LOOKAHEAD", "0");
    qputenv("LATHE_CUDA_FUSED", "0");
    qputenv("LATHE_CUDA_FUSED_ROPE", "0");
    qputenv("LATHE_CUDA_GEMV_EPILOGUES", "0");
    qputenv("LATHE_CUDA_PDL", "0");
    qputenv("LATHE_CUDA_NATIVE_FORMATS", "0");
    qputenv("LATHE_CUDA_QUANT_ROWS", "0");
    qputenv("LATHE_CUDA_INT4_TILES", "0");
    qputenv("LATHE_CUDA_GGUF_REPACK", "0");
    qputenv("LATHE_CUDA_INT4_TILE_WARPS", "4");
    qputenv("LATHE_CUDA_INT4_TILES_MAX_M", "32");
    qputenv("LATHE_CUDA_INT4_GEMM_MAX_M", "2048");
    qputenv("LATHE_CUDA_INT4_TILE_PAIRS", "0");
    qputenv("LATHE_CUDA_INT4_NORM_MAX_M", "8");
    qputenv("LATHE_CUDA_INT4_STREAM_MAX_M", "0");
    qputenv("LATHE_CUDA_INT4_STREAM_STAGES", "6");
    qputenv("LATHE_CUDA_INT4_STREAM_BLOCKS", "3");
    qputenv("LATHE_CUDA_W8_DECODE_MAX_M", "0");
    qputenv("LATHE_CUDA_INT4_STREAM_FIT", "0");
    qputenv("LATHE_CUDA_W8_DECODE_BLOCKS", "1");
    qputenv("LATHE_CUDA_FP8_GEMM", "0");
    qputenv("LATHE_CUDA_FP8_GEMM_MIN_M", "64");
    qputenv("LATHE_CUDA_FP8_DECODE_MAX_K", "4096");
    qputenv("LATHE_CUDA_KQUANT_NORM", "1");
    qputenv("LATHE_CUDA_MASK_LOOKUP_LATE", "0");
    qputenv("LATHE_CUDA_MASK_CACHE", "0");
    qputenv("LATHE_CUDA_SAMPLER_MASKS", "0");
    std::vector<std::string> warnings;
    const CudaSwitches s = cuda_switches_from_environment(&warnings);
    QVERIFY(warnings.empty());
    QVERIFY(s.own_prefill_attention && !s.decode_attention && !s.fused_rope && !s.gemv_epilogues &&
            !s.pdl && !s.native_formats && !s.quant_rows && !s.int4_tiles && !s.gguf_repack);
    QVERIFY(s.describe().find("quant_rows=0") != std::string::npos);
    QVERIFY(s.describe().find("int4_tiles=0") != std::string::npos);
    QCOMPARE(s.int4_tile_warps, 4);
    QCOMPARE(s.int4_tiles_max_m, 32);
    QCOMPARE(s.int4_gemm_max_m, 2048);
    QVERIFY(!s.int4_tile_pairs && !s.fp8_gemm);
    QCOMPARE(s.int4_norm_max_m, 8);
    QCOMPARE(s.int4_stream_max_m, 0);
    QCOMPARE(s.int4_stream_stages, 6);
    QCOMPARE(s.int4_stream_blocks, 3);
    QCOMPARE(s.w8_decode_max_m, 0);
    QCOMPARE(s.w8_decode_blocks, 1);
    QVERIFY(!s.int4_stream_fit);
    QCOMPARE(s.fp8_gemm_min_m, 64);
    QCOMPARE(s.fp8_decode_max_k, 4096);
    QVERIFY(s.kquant_norm);
    QVERIFY(!s.mask_lookup_late && !s.mask_cache && !s.sampler_masks);
    for (const char* d :
         {"kquant_norm=1", "gguf_repack=0", "int4_tile_pairs=0", "int4_norm_max_m=8", "fp8_gemm=0",
          "int4_tiles_max_m=32", "int4_gemm_max_m=2048", "mask_lookup_late=0", "mask_cache=0",
          "sampler_masks=0", "int4_stream_max_m=0", "int4_stream_stages=6", "int4_stream_blocks=3",
          "w8_decode_max_m=0", "w8_decode_blocks=1", "int4_stream_fit=0", "fp8_decode_max_k=4096"})
      QVERIFY2(s.describe().find(d) != std::string::npos, s.describe().c_str());
    QCOMPARE(s.decode_split_tokens, 64);
    QCOMPARE(s.decode_split_blocks_per_sm, 2);
    QCOMPARE(s.decode_cluster, 0);
    QCOMPARE(s.lookahead_max_seqs, 0);
    QCOMPARE(s.fused, FusedDecodeMode::kOff);
    QVERIFY(s.describe().find("fused=0") != std::string::npos);
    qputenv("LATHE_CUDA_FUSED", "1");
    QCOMPARE(cuda_switches_from_environment(nullptr).fused, FusedDecodeMode::kForce);
  }

  // Bad values: ignored (the default stays), one warning each naming the variable and the range.
  void bad_values_are_ignored_with_a_warning() {
    qputenv("LATHE_CUDA_DECODE_SPLIT_TOKENS", "40");  // not a multiple of 16
    qputenv("LATHE_CUDA_DECODE_SPLIT_BLOCKS_PER_SM", "0");
    qputenv("LATHE_CUDA_DECODE_CLUSTER", "1");
    qputenv("LATHE_CUDA_LOOKAHEAD", "-3");
    std::vector<std::string> warnings;
    const CudaSwitches s = cuda_switches_from_environment(&warnings);
    QCOMPARE(static_cast<int>(warnings.size()), 4);
    QCOMPARE(s.describe(), std::string("defaults"));
    QVERIFY2(warnings[3].find("LATHE_CUDA_LOOKAHEAD=-3 ignored (0 to 256 sequences)") !=
                 std::string::npos,
             warnings[3].c_str());
    clear_env();
    qputenv("LATHE_CUDA_LOOKAHEAD", "9999999999");
    warnings.clear();
    QCOMPARE(cuda_switches_from_environment(&warnings).lookahead_max_seqs, -1);
    QCOMPARE(static_cast<int>(warnings.size()), 1);
    expect_ignored("LATHE_CUDA_FP8_DECODE_MAX_K", "-1", &CudaSwitches::fp8_decode_max_k, 0,
                   "0 to 1073741824 inputs");
    expect_ignored("LATHE_CUDA_INT4_TILE_WARPS", "6", &CudaSwitches::int4_tile_warps, 8, "4 or 8");
    expect_ignored("LATHE_CUDA_INT4_NORM_MAX_M", "9", &CudaSwitches::int4_norm_max_m, 1,
                   "0 to 8 rows");
    if (QTest::currentTestFailed()) return;
    clear_env();
    qputenv("LATHE_CUDA_INT4_STREAM_STAGES", "0");
    qputenv("LATHE_CUDA_INT4_STREAM_BLOCKS", "5");
    warnings.clear();
    const CudaSwitches st = cuda_switches_from_environment(&warnings);
    QCOMPARE(st.int4_stream_stages, 4);
    QCOMPARE(st.int4_stream_blocks, 2);
    QCOMPARE(static_cast<int>(warnings.size()), 2);
    QVERIFY2(warnings[0].find("1 to 8 stages") != std::string::npos, warnings[0].c_str());
    QVERIFY2(warnings[1].find("1 to 4 blocks") != std::string::npos, warnings[1].c_str());
    clear_env();
    qputenv("LATHE_CUDA_W8_DECODE_MAX_M", "5");
    qputenv("LATHE_CUDA_W8_DECODE_BLOCKS", "3");
    warnings.clear();
    const CudaSwitches w8 = cuda_switches_from_environment(&warnings);
    QCOMPARE(w8.w8_decode_max_m, 4);
    QCOMPARE(w8.w8_decode_blocks, 2);
    QCOMPARE(static_cast<int>(warnings.size()), 2);
    QVERIFY2(warnings[0].find("0 to 4 rows") != std::string::npos, warnings[0].c_str());
    QVERIFY2(warnings[1].find("1 or 2 blocks") != std::string::npos, warnings[1].c_str());
    clear_env();
    qputenv("LATHE_CUDA_INT4_GEMM_MAX_M", "4");
    warnings.clear();
    QCOMPARE(cuda_switches_from_environment(&warnings).int4_gemm_max_m, 128);
    QCOMPARE(static_cast<int>(warnings.size()), 1);
    QVERIFY2(warnings[0].find("8 to 65536 rows") != std::string::npos, warnings[0].c_str());
  }

  // LATHE_CUDA_INT4_STREAM_FIT's policy (the streaming W4A16 kernel's ring depth): fitted to two
  // blocks per multiprocessor only where a product has tasks for the second block (an H200: 132
  // multiprocessors, 227 + 1 KB of shared memory each; Llama-3.1 shapes at batch 1, group 128).
  void int4_stream_fit_follows_the_tasks() {
    const int sms = 132;
    const int64_t smem = 228 * 1024;
    auto part = [](int64_t k, bool fit) {
      cuda::QuantPart p;
      p.k = k;
      p.group_size = 128;
      p.scale_dtype = DType::kF16;
      p.int4_stream_stages = 4;
      p.int4_stream_blocks = 2;
      p.int4_stream_fit = fit;
      return p;
    };
    using cuda::quant::stream_ring_stages;
    // 70B qkv / gate|up (k 8192: 16 chunks per warp, up to 4 stages per task): with 1792 tasks
    // two blocks per multiprocessor, which fit with 2 stages (70B: 53 tok/s against 44 with 4
    // stages and one block); with fewer tasks than multiprocessors one block and the whole ring.
    QCOMPARE(stream_ring_stages(part(8192, true), 1, 1792, smem, sms), 2);
    QCOMPARE(stream_ring_stages(part(8192, true), 1, 128, smem, sms), 4);
    QCOMPARE(stream_ring_stages(part(8192, false), 1, 1792, smem, sms), 4);
    // 8B down_proj (k 14336, 4096 rows: 128 tasks for 132 multiprocessors): one block, the whole
    // ring (run 86: fitting it to two blocks cost 9% of the step).
    QCOMPARE(stream_ring_stages(part(14336, true), 1, 128, smem, sms), 4);
    // 70B down_proj (k 28672, 256 tasks): two blocks fit at no depth (the staged activations
    // alone are 56 KB), so one block with the deepest ring it fits, as with the tasks unknown.
    const int32_t down70 = stream_ring_stages(part(28672, true), 1, 256, smem, sms);
    QCOMPARE(down70, stream_ring_stages(part(28672, true), 1, 0, smem, sms));
    QVERIFY2(down70 > 1 && down70 < 4, qPrintable(QString::number(down70)));
  }
};

QTEST_GUILESS_MAIN(CudaSwitchesTest)
#include "cuda_switches_test.moc"
