// What xccl.cpp needs of a C runtime plug-in loaded by vendor_plugin.cpp (Note [C runtime plug-ins]).
#pragma once

#include "python.h"

#include "../include/dipu/custom_runtime.h"

#include <memory>
#include <string>
#include <vector>

namespace dipu {

// The table of a dipu._C.RuntimePlugin, kept alive with it.
struct PluginTable {
  const C_DeviceInterface* table = nullptr;
  std::vector<int> ids;
  std::string vendor;
  std::shared_ptr<void> keep_alive;
};
PluginTable plugin_table(const py::object& plugin);
// The name of a plug-in's status, for error messages.
const char* status_name(C_Status status);

}  // namespace dipu
