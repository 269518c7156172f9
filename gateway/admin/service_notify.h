// Tells the service manager what the process is doing (systemd's
// Type=notify, sd_notify(3)): ready once the listeners are bound,
// reloading around a configuration reload, stopping at the drain. Each call
// is one datagram to $NOTIFY_SOCKET, and nothing at all when the variable
// is unset (not started by systemd). Thread-safe; never throws.
#pragma once

namespace tollgate::gateway {

enum class ServiceState {
  kReady,      // READY=1: serving (after startup, and after a reload)
  kReloading,  // RELOADING=1: a reload of the configuration has begun
  kStopping,   // STOPPING=1: draining before exit
};

void NotifyServiceManager(ServiceState state);

}  // namespace tollgate::gateway
