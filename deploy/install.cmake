# `make install` (cmake --install) and `make package` (CPack: a Debian 12
# .deb): the binary, the configuration of the packaged service, the
# systemd unit, the man pages, bash completion, the documentation and the
# Grafana dashboard and Prometheus alert rules.
include(GNUInstallDirs)

# Installing needs only the tollgate binary, not the tests and benchmarks
# that "all" builds.
set(CMAKE_SKIP_INSTALL_ALL_DEPENDENCY TRUE)

install(TARGETS tollgate RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})

# Under the prefix /usr (the package) the configuration goes to /etc and
# the unit to /lib/systemd/system, as Debian's own packages have them;
# under another prefix (/usr/local by default) both stay inside it. Decided
# when installing, since CPack installs with a prefix of its own.
install(CODE [[
  if(CMAKE_INSTALL_PREFIX STREQUAL "/usr")
    set(tollgate_etc "etc/tollgate")
    set(tollgate_units "lib/systemd/system")
  else()
    string(REGEX REPLACE "^/+" "" tollgate_root "${CMAKE_INSTALL_PREFIX}")
    set(tollgate_etc "${tollgate_root}/etc/tollgate")
    set(tollgate_units "${tollgate_root}/lib/systemd/system")
  endif()
]])
install(FILES ${PROJECT_SOURCE_DIR}/deploy/tollgate.toml DESTINATION "/\${tollgate_etc}")
# The unit names the binary and the configuration where they were installed.
set(tollgate_unit_out "${PROJECT_BINARY_DIR}/deploy/tollgate.service")
install(CODE "
  file(READ \"${PROJECT_SOURCE_DIR}/deploy/tollgate.service\" unit)
  string(REPLACE \"/usr/bin/tollgate \" \"\${CMAKE_INSTALL_PREFIX}/${CMAKE_INSTALL_BINDIR}/tollgate \"
         unit \"\${unit}\")
  string(REPLACE \" /etc/tollgate/\" \" /\${tollgate_etc}/\" unit \"\${unit}\")
  file(WRITE \"${tollgate_unit_out}\" \"\${unit}\")
")
install(FILES ${tollgate_unit_out} DESTINATION "/\${tollgate_units}")

install(FILES ${PROJECT_SOURCE_DIR}/docs/man/tollgate.8 DESTINATION ${CMAKE_INSTALL_MANDIR}/man8)
install(FILES ${PROJECT_SOURCE_DIR}/docs/man/tollgate.toml.5
        DESTINATION ${CMAKE_INSTALL_MANDIR}/man5)
install(FILES ${PROJECT_SOURCE_DIR}/deploy/bash-completion/tollgate
        DESTINATION ${CMAKE_INSTALL_DATADIR}/bash-completion/completions)
install(FILES ${PROJECT_SOURCE_DIR}/README.md ${PROJECT_SOURCE_DIR}/CHANGELOG.md
              ${PROJECT_SOURCE_DIR}/docs/algorithms.md ${PROJECT_SOURCE_DIR}/docs/leases.md
        DESTINATION ${CMAKE_INSTALL_DOCDIR})
install(FILES ${PROJECT_SOURCE_DIR}/LICENSE DESTINATION ${CMAKE_INSTALL_DOCDIR} RENAME copyright)
# For editors that check TOML with a JSON Schema (docs/configuration.md).
install(FILES ${PROJECT_SOURCE_DIR}/tollgate.schema.json DESTINATION ${CMAKE_INSTALL_DATADIR}/tollgate)
# The observability kit: a Grafana dashboard to import and Prometheus alert
# rules to load (docs/metrics.md).
install(FILES ${PROJECT_SOURCE_DIR}/deploy/grafana/tollgate-dashboard.json
        DESTINATION ${CMAKE_INSTALL_DATADIR}/tollgate/grafana)
install(FILES ${PROJECT_SOURCE_DIR}/deploy/prometheus/tollgate-alerts.yml
        DESTINATION ${CMAKE_INSTALL_DATADIR}/tollgate/prometheus)
install(FILES ${PROJECT_SOURCE_DIR}/conf/tollgate.toml ${PROJECT_SOURCE_DIR}/conf/redis.toml
        DESTINATION ${CMAKE_INSTALL_DOCDIR}/examples)

# The Debian package. Its dependencies are the shared libraries the binary
# links, as dpkg-shlibdeps finds them (libssl3, libhiredis0.14, ...), never
# a -dev package.
set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME tollgate)
set(CPACK_PACKAGE_VENDOR tollgate)
set(CPACK_PACKAGE_CONTACT "tollgate maintainers <tollgate@localhost>")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY
    "rate-limiting reverse proxy for HTTP, HTTP/2, gRPC and WebSocket")
set(CPACK_PACKAGE_DESCRIPTION
    "tollgate sits in front of HTTP services, decides each request with an exact
rate-limit algorithm (token bucket, leaky bucket, fixed window, sliding log,
sub-window, two-bucket) and forwards it or answers 429. Counters live in
memory or in Redis, shared by several gateways; it also answers Envoy's rate
limit service and a /check endpoint for other proxies.")
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_SET_DESTDIR ON)
set(CPACK_INSTALL_PREFIX /usr)
set(CPACK_STRIP_FILES ON)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SECTION net)
set(CPACK_DEBIAN_PACKAGE_PRIORITY optional)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
set(CPACK_DEBIAN_PACKAGE_DEPENDS passwd)  # useradd, in postinst
set(CPACK_DEBIAN_PACKAGE_CONTROL_EXTRA ${PROJECT_SOURCE_DIR}/deploy/debian/postinst
    ${PROJECT_SOURCE_DIR}/deploy/debian/conffiles)
set(CPACK_DEBIAN_PACKAGE_CONTROL_STRICT_PERMISSION TRUE)
include(CPack)
