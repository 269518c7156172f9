#include "gateway/admin/service_notify.h"

#include <systemd/sd-daemon.h>

namespace tollgate::gateway {
namespace {

const char* MessageOf(ServiceState state) {
  switch (state) {
    case ServiceState::kReady:
      return "READY=1";
    case ServiceState::kReloading:
      return "RELOADING=1";
    case ServiceState::kStopping:
      return "STOPPING=1";
  }
  return "";
}

}  // namespace

void NotifyServiceManager(ServiceState state) {
  // unset_environment = 0: a reload and the drain notify again later. The
  // result is not looked at: a manager that cannot be told changes nothing
  // in how the process serves.
  sd_notify(0, MessageOf(state));
}

}  // namespace tollgate::gateway
