// What a drag-and-drop or File ▸ Open hands to the Models page: a .gguf file, a Hugging Face model
// folder, or a file inside one (config.json, *.safetensors, tokenizer files) which stands for its
// folder. Anything else is refused at drag time.
#pragma once

#include <QString>

class QMimeData;

namespace lathe::ui {

// The model path a local file or folder stands for, or an empty string when it cannot be a model.
QString modelPathForLocalFile(const QString& localPath);
// The first acceptable model path among the dropped URLs, or an empty string.
QString modelPathFromMimeData(const QMimeData* mime);

}  // namespace lathe::ui
