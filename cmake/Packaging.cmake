# Install layout of the documentation and `cpack -G DEB`.
#
#   cmake -S . -B build && cmake --build build && (cd build && cpack -G DEB)
#   -> build/sumcast_<version>_<arch>.deb
#
# What goes where (CPACK_PACKAGING_INSTALL_PREFIX=/usr):
#   /usr/sbin/sumcastd                         daemon/CMakeLists.txt
#   /usr/bin/sumcastctl                        tools/CMakeLists.txt
#   /usr/bin/sumcast-perf                      perf/CMakeLists.txt (the acceptance run)
#   /usr/lib/libnccl-net-sumcast.so            plugin/CMakeLists.txt (NCCL dlopens
#                                              "libnccl-net-sumcast.so"; /usr/lib is on
#                                              the loader's default path)
#   /usr/lib/systemd/system/sumcastd.service   systemd/CMakeLists.txt
#   /usr/lib/sysusers.d/sumcast.conf           systemd/CMakeLists.txt
#   /etc/sumcast/sumcastd.conf                 daemon/CMakeLists.txt, a conffile
#   /usr/share/doc/sumcast/                    README.md, LICENSE, docs/ as in the
#                                              tree (img/, journal/: the relative
#                                              links resolve), examples/client.env,
#                                              examples/grafana/sumcast.json
#   /usr/share/sumcast/prometheus/             alert rules and their promtool cases
# The targets' own install() rules live with the targets; this file adds the
# documentation and the package metadata, and checks the targets exist.
include(GNUInstallDirs)

foreach(t sumcastd nccl-net-sumcast sumcastctl sumcast-perf)
  if(NOT TARGET ${t})
    message(STATUS "Packaging: target ${t} not built; the .deb will not contain it")
  endif()
endforeach()

# README.md links docs/x.md, the docs link ../README.md, img/ and journal/:
# the same tree under the docdir, so that every relative link resolves there
# (tests/ops/test_package.sh follows them).
install(FILES ${PROJECT_SOURCE_DIR}/README.md ${PROJECT_SOURCE_DIR}/LICENSE
  DESTINATION ${CMAKE_INSTALL_DOCDIR} COMPONENT doc)
install(DIRECTORY ${PROJECT_SOURCE_DIR}/docs/ DESTINATION ${CMAKE_INSTALL_DOCDIR}/docs COMPONENT doc
  FILES_MATCHING PATTERN "*.md" PATTERN "*.png" PATTERN "*.svg")
install(FILES ${PROJECT_SOURCE_DIR}/conf/client.env DESTINATION ${CMAKE_INSTALL_DOCDIR}/examples
  COMPONENT doc OPTIONAL)
install(FILES ${PROJECT_SOURCE_DIR}/conf/grafana/sumcast.json
  DESTINATION ${CMAKE_INSTALL_DOCDIR}/examples/grafana COMPONENT doc OPTIONAL)
# Alert rules, for prometheus.yml's rule_files (not under doc/: a running
# Prometheus reads them), with the cases `promtool test rules` runs beside them.
install(FILES ${PROJECT_SOURCE_DIR}/conf/prometheus/sumcast-alerts.yml
  ${PROJECT_SOURCE_DIR}/conf/prometheus/sumcast-alerts.test.yml
  DESTINATION ${CMAKE_INSTALL_DATADIR}/sumcast/prometheus)

set(CPACK_PACKAGE_NAME sumcast)
set(CPACK_PACKAGE_VENDOR "Sumcast")
set(CPACK_PACKAGE_CONTACT "Sumcast maintainers <sumcast@localhost>")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "allreduce on spare host CPUs: sumcastd aggregators + NCCL plugin")
set(CPACK_PACKAGE_DESCRIPTION
  "Sumcast makes the allreduce of distributed training faster by doing the reduction\n\
on spare host CPUs. This package holds the sumcastd aggregator daemon (systemd\n\
unit, sysusers entry, /etc/sumcast/sumcastd.conf), sumcastctl, and the NCCL\n\
plugin libnccl-net-sumcast.so (NCCL_NET_PLUGIN=sumcast NCCL_COLLNET_ENABLE=1).")
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_STRIP_FILES OFF) # keep symbols: RelWithDebInfo, asserts on
set(CPACK_GENERATOR DEB)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SECTION net)
set(CPACK_DEBIAN_PACKAGE_PRIORITY optional)
set(CPACK_DEBIAN_PACKAGE_HOMEPAGE "https://localhost/sumcast")
# Runtime dependencies from the ELF files (dpkg-shlibdeps), plus systemd for
# sysusers in postinst.
find_program(SC_DPKG_SHLIBDEPS dpkg-shlibdeps)
if(SC_DPKG_SHLIBDEPS)
  set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
endif()
# CPack's DEB generator runs file(1) on every packaged file (a minbase Debian
# has none; scripts/deps.sh --test installs it).
find_program(SC_FILE_UTILITY file)
if(NOT SC_FILE_UTILITY)
  message(STATUS "Packaging: file(1) not found: cpack -G DEB will fail (apt-get install file)")
endif()
set(CPACK_DEBIAN_PACKAGE_RECOMMENDS "systemd (>= 247)")
set(CPACK_DEBIAN_PACKAGE_SUGGESTS "prometheus, libfabric-bin, rdma-core")
# conffiles: dpkg keeps the operator's edits on upgrade. Maintainer scripts:
# create the sumcast user (systemd-sysusers), reload units; stop on removal.
# The service is not enabled or started by the package: set [fabric] node
# and the listen addresses first, then `systemctl enable --now sumcastd`.
set(CPACK_DEBIAN_PACKAGE_CONTROL_EXTRA
  ${PROJECT_SOURCE_DIR}/cmake/deb/conffiles
  ${PROJECT_SOURCE_DIR}/cmake/deb/postinst
  ${PROJECT_SOURCE_DIR}/cmake/deb/prerm
  ${PROJECT_SOURCE_DIR}/cmake/deb/postrm)
set(CPACK_DEBIAN_PACKAGE_CONTROL_STRICT_PERMISSION ON)
set(CPACK_SOURCE_IGNORE_FILES "/build[^/]*/" "/\\\\.git/" "/out/")
include(CPack)
