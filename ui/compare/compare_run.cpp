#include "ui/compare/compare_run.h"

#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>

#include <cmath>
#include <limits>

namespace lathe::ui {

namespace {

constexpr char kFormat[] = "lathe-compare";

QJsonValue number(double v) {
  return std::isfinite(v) ? QJsonValue(v) : QJsonValue();
}

QJsonObject pointToJson(const ComparePoint& p) {
  return QJsonObject{{"concurrency", p.concurrency},
                     {"completed", p.completed},
                     {"failed", p.failed},
                     {"output_tokens_per_s", number(p.outputTokensPerSec)},
                     {"requests_per_s", number(p.requestsPerSec)},
                     {"ttft_p50_ms", number(p.ttftP50Ms)},
                     {"ttft_p99_ms", number(p.ttftP99Ms)},
                     {"itl_p50_ms", number(p.itlP50Ms)},
                     {"itl_p99_ms", number(p.itlP99Ms)}};
}

QJsonObject qualityToJson(const QualityReport& q) {
  return QJsonObject{{"measured", q.measured},
                     {"text", q.text},
                     {"error", q.error},
                     {"scored_positions", q.scoredPositions},
                     {"windows", q.windows},
                     {"context", q.context},
                     {"perplexity", number(q.perplexity)},
                     {"reference_perplexity", number(q.referencePerplexity)},
                     {"kld_mean", number(q.kldMean)},
                     {"kld_p99", number(q.kldP99)},
                     {"top1_agreement", number(q.top1Agreement)},
                     {"seconds", number(q.seconds)}};
}

QJsonObject variantToJson(const CompareVariant& v) {
  QJsonArray sweep;
  for (const ComparePoint& p : v.sweep) sweep.append(pointToJson(p));
  return QJsonObject{{"name", v.name},
                     {"path", v.path},
                     {"device", v.device},
                     {"storage", v.dtype},
                     {"weight_bytes", v.weightBytes},
                     {"bits_per_weight", number(v.bitsPerWeight)},
                     {"kv_cache_bytes", v.kvCacheBytes},
                     {"batch1_tokens_per_s", number(v.batch1TokensPerSec)},
                     {"batch1_latency_ms", number(v.batch1LatencyMs)},
                     {"prefill_tokens_per_s", number(v.prefillTokensPerSec)},
                     {"ttft_ms", number(v.ttftMs)},
                     {"error", v.error},
                     {"quality", qualityToJson(v.quality)},
                     {"sweep", sweep}};
}

// Reads fields by name and keeps the first problem with its path ("variants[1].sweep[0]"); once
// one is found, every later read returns a default and the caller checks ok() at the end.
class Reader {
 public:
  bool ok() const { return m_error.isEmpty(); }
  QString error() const { return m_error; }

  void fail(const QString& path, const QString& what) {
    if (ok()) m_error = path.isEmpty() ? what : QStringLiteral("%1: %2").arg(path, what);
  }

  QJsonValue field(const QJsonObject& o, const QString& path, const char* key) {
    const auto it = o.constFind(QLatin1String(key));
    if (it == o.constEnd()) {
      fail(path, QObject::tr("\"%1\" is missing").arg(QLatin1String(key)));
      return {};
    }
    return *it;
  }

  QString string(const QJsonObject& o, const QString& path, const char* key) {
    const QJsonValue v = field(o, path, key);
    if (ok() && !v.isString()) wrongType(path, key, QObject::tr("text"), v);
    return v.toString();
  }

  bool boolean(const QJsonObject& o, const QString& path, const char* key) {
    const QJsonValue v = field(o, path, key);
    if (ok() && !v.isBool()) wrongType(path, key, QObject::tr("true or false"), v);
    return v.toBool();
  }

  // A number; null is NaN (what a non-finite value is written as).
  double real(const QJsonObject& o, const QString& path, const char* key) {
    const QJsonValue v = field(o, path, key);
    if (v.isNull()) return std::numeric_limits<double>::quiet_NaN();
    if (ok() && !v.isDouble()) wrongType(path, key, QObject::tr("a number"), v);
    return v.toDouble();
  }

  qint64 whole(const QJsonObject& o, const QString& path, const char* key) {
    return wholeValue(field(o, path, key), path, QLatin1String(key));
  }

  qint64 wholeValue(const QJsonValue& v, const QString& path, const QString& key) {
    if (!ok()) return 0;
    const double d = v.toDouble();
    // Below 2^53 every whole number is exact in a double.
    if (!v.isDouble() || d != std::floor(d) || std::fabs(d) > 9007199254740992.0) {
      fail(path, QObject::tr("\"%1\" must be a whole number").arg(key));
      return 0;
    }
    return static_cast<qint64>(d);
  }

  int integer(const QJsonObject& o, const QString& path, const char* key) {
    const qint64 v = whole(o, path, key);
    if (ok() && (v < std::numeric_limits<int>::min() || v > std::numeric_limits<int>::max()))
      fail(path, QObject::tr("\"%1\" is out of range").arg(QLatin1String(key)));
    return static_cast<int>(v);
  }

  QJsonObject object(const QJsonObject& o, const QString& path, const char* key) {
    const QJsonValue v = field(o, path, key);
    if (ok() && !v.isObject()) wrongType(path, key, QObject::tr("an object"), v);
    return v.toObject();
  }

  QJsonArray array(const QJsonObject& o, const QString& path, const char* key) {
    const QJsonValue v = field(o, path, key);
    if (ok() && !v.isArray()) wrongType(path, key, QObject::tr("a list"), v);
    return v.toArray();
  }

  // Element i of `a`, which must be an object.
  QJsonObject element(const QJsonArray& a, const QString& path, qsizetype i) {
    if (ok() && !a[i].isObject()) fail(path, QObject::tr("element %1 is not an object").arg(i));
    return a[i].toObject();
  }

 private:
  static QString typeName(const QJsonValue& v) {
    switch (v.type()) {
      case QJsonValue::Null:
        return QObject::tr("null");
      case QJsonValue::Bool:
        return QObject::tr("true/false");
      case QJsonValue::Double:
        return QObject::tr("a number");
      case QJsonValue::String:
        return QObject::tr("text");
      case QJsonValue::Array:
        return QObject::tr("a list");
      case QJsonValue::Object:
        return QObject::tr("an object");
      case QJsonValue::Undefined:
        break;
    }
    return QObject::tr("nothing");
  }

  void wrongType(const QString& path, const char* key, const QString& expected,
                 const QJsonValue& found) {
    fail(path, QObject::tr("\"%1\" must be %2, not %3")
                   .arg(QLatin1String(key), expected, typeName(found)));
  }

  QString m_error;
};

QString at(const QString& path, qsizetype i) {
  return QStringLiteral("%1[%2]").arg(path).arg(i);
}

CompareSpec readSpec(Reader& r, const QJsonObject& o) {
  const QString path = QStringLiteral("spec");
  CompareSpec s;
  const QJsonArray models = r.array(o, path, "models");
  s.models.clear();
  for (qsizetype i = 0; i < models.size() && r.ok(); ++i) {
    if (!models[i].isString())
      r.fail(at(path + QStringLiteral(".models"), i), QObject::tr("not a path"));
    s.models << models[i].toString();
  }
  const QJsonArray levels = r.array(o, path, "concurrency");
  s.concurrency.clear();
  for (qsizetype i = 0; i < levels.size() && r.ok(); ++i)
    s.concurrency << static_cast<int>(
        r.wholeValue(levels[i], path, at(QStringLiteral("concurrency"), i)));
  s.inputLen = r.integer(o, path, "input_len");
  s.outputLen = r.integer(o, path, "output_len");
  s.promptsPerLevel = r.integer(o, path, "prompts_per_level");
  s.latencyIters = r.integer(o, path, "latency_iters");
  s.maxModelLen = r.integer(o, path, "max_model_len");
  s.cpuThreads = r.integer(o, path, "cpu_threads");
  s.evalText = r.string(o, path, "eval_text");
  s.evalContext = r.integer(o, path, "eval_context");
  s.evalWindows = r.integer(o, path, "eval_windows");
  return s;
}

ComparePoint readPoint(Reader& r, const QJsonObject& o, const QString& path) {
  ComparePoint p;
  p.concurrency = r.integer(o, path, "concurrency");
  p.completed = r.integer(o, path, "completed");
  p.failed = r.integer(o, path, "failed");
  p.outputTokensPerSec = r.real(o, path, "output_tokens_per_s");
  p.requestsPerSec = r.real(o, path, "requests_per_s");
  p.ttftP50Ms = r.real(o, path, "ttft_p50_ms");
  p.ttftP99Ms = r.real(o, path, "ttft_p99_ms");
  p.itlP50Ms = r.real(o, path, "itl_p50_ms");
  p.itlP99Ms = r.real(o, path, "itl_p99_ms");
  return p;
}

QualityReport readQuality(Reader& r, const QJsonObject& o, const QString& path) {
  QualityReport q;
  q.measured = r.boolean(o, path, "measured");
  q.text = r.string(o, path, "text");
  q.error = r.string(o, path, "error");
  q.scoredPositions = r.whole(o, path, "scored_positions");
  q.windows = r.integer(o, path, "windows");
  q.context = r.integer(o, path, "context");
  q.perplexity = r.real(o, path, "perplexity");
  q.referencePerplexity = r.real(o, path, "reference_perplexity");
  q.kldMean = r.real(o, path, "kld_mean");
  q.kldP99 = r.real(o, path, "kld_p99");
  q.top1Agreement = r.real(o, path, "top1_agreement");
  q.seconds = r.real(o, path, "seconds");
  return q;
}

CompareVariant readVariant(Reader& r, const QJsonObject& o, const QString& path) {
  CompareVariant v;
  v.name = r.string(o, path, "name");
  v.path = r.string(o, path, "path");
  v.device = r.string(o, path, "device");
  v.dtype = r.string(o, path, "storage");
  v.weightBytes = r.whole(o, path, "weight_bytes");
  v.bitsPerWeight = r.real(o, path, "bits_per_weight");
  v.kvCacheBytes = r.whole(o, path, "kv_cache_bytes");
  v.batch1TokensPerSec = r.real(o, path, "batch1_tokens_per_s");
  v.batch1LatencyMs = r.real(o, path, "batch1_latency_ms");
  v.prefillTokensPerSec = r.real(o, path, "prefill_tokens_per_s");
  v.ttftMs = r.real(o, path, "ttft_ms");
  v.error = r.string(o, path, "error");
  v.quality = readQuality(r, r.object(o, path, "quality"), path + QStringLiteral(".quality"));
  const QJsonArray sweep = r.array(o, path, "sweep");
  const QString sweepPath = path + QStringLiteral(".sweep");
  for (qsizetype i = 0; i < sweep.size() && r.ok(); ++i)
    v.sweep << readPoint(r, r.element(sweep, sweepPath, i), at(sweepPath, i));
  return v;
}

}  // namespace

QByteArray compareToJson(const CompareRun& run) {
  QJsonArray levels;
  for (int c : run.spec.concurrency) levels.append(c);
  const CompareSpec& s = run.spec;
  const QJsonObject spec{{"models", QJsonArray::fromStringList(s.models)},
                         {"concurrency", levels},
                         {"input_len", s.inputLen},
                         {"output_len", s.outputLen},
                         {"prompts_per_level", s.promptsPerLevel},
                         {"latency_iters", s.latencyIters},
                         {"max_model_len", s.maxModelLen},
                         {"cpu_threads", s.cpuThreads},
                         {"eval_text", s.evalText},
                         {"eval_context", s.evalContext},
                         {"eval_windows", s.evalWindows}};
  QJsonArray variants;
  for (const CompareVariant& v : run.variants) variants.append(variantToJson(v));
  const QJsonObject doc{{"format", QLatin1String(kFormat)},
                        {"version", kCompareRunVersion},
                        {"finished", run.finished.toUTC().toString(Qt::ISODateWithMs)},
                        {"spec", spec},
                        {"variants", variants},
                        {"verdict", run.verdict}};
  return QJsonDocument(doc).toJson(QJsonDocument::Indented);
}

bool compareFromJson(const QByteArray& bytes, CompareRun* out, QString* error) {
  auto refuse = [error](const QString& why) {
    if (error) *error = why;
    return false;
  };
  QJsonParseError parse;
  const QJsonDocument doc = QJsonDocument::fromJson(bytes, &parse);
  if (parse.error != QJsonParseError::NoError)
    return refuse(
        QObject::tr("not JSON (%1 at byte %2)").arg(parse.errorString()).arg(parse.offset));
  const QJsonObject root = doc.object();
  if (!doc.isObject() || root.value(QLatin1String("format")).toString() != QLatin1String(kFormat))
    return refuse(QObject::tr(
        "not a Lathe comparison (it has no \"format\": \"lathe-compare\"); open a file that the "
        "Compare tab saved or exported as JSON"));
  const QJsonValue version = root.value(QLatin1String("version"));
  if (!version.isDouble() || version.toDouble() != std::floor(version.toDouble()) ||
      version.toDouble() < 1)
    return refuse(QObject::tr("\"version\" is missing or not a whole number from 1"));
  if (version.toDouble() > kCompareRunVersion)
    return refuse(QObject::tr("saved by a newer Lathe (comparison format version %1; this one "
                              "reads up to version %2): update Lathe to open it")
                      .arg(version.toDouble())
                      .arg(kCompareRunVersion));
  Reader r;
  CompareRun run;
  const QString finished = r.string(root, QString(), "finished");
  run.finished = QDateTime::fromString(finished, Qt::ISODateWithMs);
  if (r.ok() && !run.finished.isValid())
    r.fail(QString(), QObject::tr("\"finished\" is not a date and time (%1)").arg(finished));
  run.spec = readSpec(r, r.object(root, QString(), "spec"));
  const QJsonArray variants = r.array(root, QString(), "variants");
  if (r.ok() && variants.isEmpty()) r.fail(QStringLiteral("variants"), QObject::tr("empty"));
  for (qsizetype i = 0; i < variants.size() && r.ok(); ++i) {
    const QString path = at(QStringLiteral("variants"), i);
    run.variants << readVariant(r, r.element(variants, QStringLiteral("variants"), i), path);
  }
  run.verdict = r.string(root, QString(), "verdict");
  if (!r.ok()) return refuse(r.error());
  *out = std::move(run);
  return true;
}

QStringList compareDevices(const QVector<CompareVariant>& variants) {
  QStringList out;
  for (const CompareVariant& v : variants)
    if (!v.device.isEmpty() && !out.contains(v.device)) out << v.device;
  return out;
}

}  // namespace lathe::ui
