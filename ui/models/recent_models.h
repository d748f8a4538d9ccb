// The recent models list (newest first, at most 10), kept in QSettings under "recentModels".
// Entries whose file or folder has disappeared stay listed but are shown as missing.
#pragma once

#include <QAbstractListModel>
#include <QStringList>

class QSettings;

namespace lathe::ui {

class RecentModels : public QAbstractListModel {
  Q_OBJECT
 public:
  enum Role { PathRole = Qt::UserRole + 1, ExistsRole };
  static constexpr int kMaxEntries = 10;

  // settings: not owned; the application's QSettings when null.
  explicit RecentModels(QSettings* settings = nullptr, QObject* parent = nullptr);
  ~RecentModels() override;

  QStringList paths() const { return m_paths; }
  void add(const QString& path);  // moves it to the top
  void remove(const QString& path);
  void clear();

  int rowCount(const QModelIndex& parent = QModelIndex()) const override;
  QVariant data(const QModelIndex& index, int role) const override;

 private:
  void persist();

  QSettings* m_settings;
  bool m_ownsSettings = false;
  QStringList m_paths;
};

}  // namespace lathe::ui
