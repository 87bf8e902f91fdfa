#include "run/outputs.h"

namespace tpu::run {

std::string Outputs::file(const std::string& target, When when) {
  if (target.empty()) return target;
  files_.emplace_back(std::make_unique<PendingFile>(target), when);
  return files_.back().first->path();
}

std::string Outputs::folder(const std::string& target) {
  if (target.empty()) return target;
  folders_.push_back(std::make_unique<PendingFolder>(target));
  return folders_.back()->path();
}

void Outputs::commit() {
  for (auto& f : folders_) f->commit();
  for (auto& [f, when] : files_) f->commit();
  folders_.clear();
  files_.clear();
}

void Outputs::commit_fault() {
  for (auto& [f, when] : files_)
    if (when == When::SuccessOrFault) f->commit();
  folders_.clear();  // removes the rest
  files_.clear();
}

}  // namespace tpu::run
